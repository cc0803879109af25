#!/usr/bin/env bash
# Check requirements-dev.txt and the tests on each Python that Streamlit Community Cloud offers.
# Usage: scripts/check_pythons.sh python3.11 python3.12 python3.13
# For each: a fresh venv, install, import every package, then every test but the real-browser ones.
# Where PyTorch's CPU wheel site is unreachable (our build machines) and no local copy of its wheel
# exists for that Python, torch comes from PyPI instead: the same release (2.13.0) as its CUDA build,
# about 5 GB, with the same Python code and CPU kernels; the app never uses the GPU part.
set -uo pipefail
cd "$(dirname "$0")/.."
for py in "$@"; do
  dir=$(mktemp -d)
  "$py" -m venv "$dir" || { echo "$py: cannot create a venv"; continue; }
  if PIP_RETRIES=1 "$dir/bin/pip" install -q -r requirements-dev.txt >"$dir/log" 2>&1; then
    what="all of requirements-dev.txt"
  else
    grep -v -e '^torch' -e '^--find-links' requirements-dev.txt > "$dir/req.txt"     # the lock but its torch
    PIP_RETRIES=1 "$dir/bin/pip" install -q torch==2.13.0 -r "$dir/req.txt" >>"$dir/log" 2>&1 \
      || { echo "$py: install FAILED"; tail -3 "$dir/log"; rm -rf "$dir"; continue; }
    what="requirements-dev.txt with PyPI's torch==2.13.0 (its CPU wheel for this Python is not reachable here)"
  fi
  modules="torch streamlit plotly altair pandas numpy safetensors tokenizers tqdm"
  if ! "$dir/bin/python" -c "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]" $modules; then
    echo "$py: import FAILED"; rm -rf "$dir"; continue
  fi
  result=$("$dir/bin/python" -m pytest -q -p no:cacheprovider --ignore=tests/test_browser.py \
           --ignore=tests/test_browser_lab.py --ignore=tests/test_load.py 2>&1 | tail -1)
  echo "$("$dir/bin/python" --version): installed $what; imported $modules; tests (all but the browser ones): $result"
  rm -rf "$dir"
done
