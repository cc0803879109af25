#!/usr/bin/env bash
# Install-and-import check of requirements.txt on each Python that Streamlit Community Cloud offers.
# Usage: scripts/check_pythons.sh python3.11 python3.12 python3.13
# Where PyTorch's CPU wheel site is unreachable (our build machines), torch is checked only on the
# Python whose wheel lies on local disk; every other package is installed from PyPI and imported.
set -uo pipefail
cd "$(dirname "$0")/.."
for py in "$@"; do
  dir=$(mktemp -d)
  "$py" -m venv "$dir" || { echo "$py: cannot create a venv"; continue; }
  if PIP_RETRIES=1 "$dir/bin/pip" install -q -r requirements.txt >"$dir/log" 2>&1; then
    what="all of requirements.txt"
  else
    grep -v '^torch' requirements.txt | grep -v '^--find-links' > "$dir/req.txt"
    PIP_RETRIES=1 "$dir/bin/pip" install -q -r "$dir/req.txt" >>"$dir/log" 2>&1 || { echo "$py: install FAILED"; tail -3 "$dir/log"; continue; }
    what="requirements.txt without torch (its CPU wheel for this Python is not reachable here)"
  fi
  modules="streamlit plotly altair pandas numpy safetensors tokenizers tqdm"
  "$dir/bin/python" -c "import torch" 2>/dev/null && modules="torch $modules"
  if "$dir/bin/python" -c "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]" $modules; then
    echo "$("$dir/bin/python" --version): installed $what; imported $modules"
  else
    echo "$py: import FAILED"
  fi
  rm -rf "$dir"
done
