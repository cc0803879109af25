"""Fetch a pretrained model's files from the Hugging Face hub once, into the standard Hugging Face cache.

    from model.hub import GPT2, PYTHIA_70M, SMOLLM2, at_step, fetch
    directory = fetch(GPT2)          # config.json, model.safetensors, tokenizer.json, at a pinned revision
    directory = fetch(SMOLLM2)       # the same three files of SmolLM2-135M
    directory = fetch(at_step(PYTHIA_70M, 1000))   # Pythia-70M after 1,000 training steps (pytorch_model.bin)

`fetch` never hangs and never shows a traceback to a student: files already in the cache are used
without any network; otherwise the hub is probed with a short timeout first, and anything that stops the
download (offline mode, no network, a server error) becomes a `HubUnavailable` whose message says so in
plain words. Loading the files into a model is `model.pretrained.load_pretrained(directory)`.
"""
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from huggingface_hub import constants, hf_hub_download

FILES = ("config.json", "model.safetensors", "tokenizer.json")
NEOX_FILES = ("config.json", "pytorch_model.bin", "tokenizer.json")   # Pythia's checkpoint branches have no safetensors
# Every training checkpoint Pythia saved, each a branch "step<N>" of each model's repository (its model card):
# step 0, log-spaced early steps 1, 2, 4, ..., 512, then every 1,000 steps up to the final 143,000
PYTHIA_STEPS = (0, *(2 ** i for i in range(10)), *range(1000, 143_001, 1000))
PROBE_TIMEOUT_S = 3.0            # an unreachable hub otherwise retries for about 23 s


@dataclass(frozen=True)
class Pretrained:
    """A model on the hub, pinned to one revision so every server loads the same weights."""
    repo_id: str
    revision: str                # a commit id: a later push to the repository cannot change what we load (Pythia's:
                                 # a checkpoint's branch, pushed once; see PYTHIA_70M)
    label: str                   # what a student reads in the model picker
    about: str                   # size, origin and licence, in one line
    parameters: int = 0          # how many numbers it learned (its config's shapes give the same count)
    download_mb: int = 0         # the files' size, about
    files: tuple[str, ...] = FILES   # the files fetched, by their path in the repository
    steps: tuple[int, ...] = ()      # training checkpoints the picker offers (at_step), for a model that saved them


GPT2 = Pretrained("openai-community/gpt2", "607a30d783dfa663caf39e06633721c8d4cfcd7e", "GPT-2 small",
                  "124M parameters, OpenAI 2019, MIT licence; downloads about 550 MB once", 124_439_808, 550)
# The revision was read from public projects that pin SmolLM2-135M (the files at it: a bfloat16 model.safetensors,
# config.json with rope_theta 100,000 at the top level, tokenizer.json), never fetched from here: our build
# machines cannot reach the hub. Check it once where the hub is reachable:
#   huggingface_hub.model_info("HuggingFaceTB/SmolLM2-135M").sha, and load_pretrained(fetch(SMOLLM2)).
SMOLLM2 = Pretrained("HuggingFaceTB/SmolLM2-135M", "93efa2f097d58c2a74874c7e644dbc9b0cee75a2", "SmolLM2-135M",
                     "135M parameters, Hugging Face 2024, Apache 2.0 licence; downloads about 270 MB once",
                     134_515_008, 270)
# Pythia's final models are the branch "step143000" (the same weights as "main"). Here a branch name is the pin, not a
# commit id: EleutherAI pushed each checkpoint branch once when it released the suite in 2023 and has not pushed to
# them since, which is as close to fixed as a branch gets, but a name is not a hash and a later push could move it.
# We cannot read the commits from here (our build machines cannot reach the hub); where it is reachable,
# huggingface_hub.list_repo_refs("EleutherAI/pythia-70m").branches gives each step's commit to pin instead.
# The counts are the files' shapes (50,304 vocabulary rows, embedding and unembedding untied); the loaded model keeps
# the tokenizer's 50,277 rows (model/pretrained.py fit_vocab), 27,648 (70M) or 41,472 (160M) numbers fewer. The
# downloads are float16 pytorch_model.bin files, with the causal-mask buffers older files carry.
# The checkpoints the picker offers: random weights, a few early steps, roughly log-spaced later ones, the final model
SHOWN_STEPS = (0, 64, 512, 1000, 2000, 8000, 33_000, 143_000)
PYTHIA_70M = Pretrained("EleutherAI/pythia-70m", "step143000", "Pythia-70M",
                        "70M parameters, EleutherAI 2023, Apache 2.0 licence; downloads about 166 MB once",
                        70_426_624, 166, NEOX_FILES, SHOWN_STEPS)
PYTHIA_160M = Pretrained("EleutherAI/pythia-160m", "step143000", "Pythia-160M",
                         "162M parameters, EleutherAI 2023, Apache 2.0 licence; downloads about 375 MB once",
                         162_322_944, 375, NEOX_FILES, SHOWN_STEPS)


def at_step(spec: Pretrained, step: int) -> Pretrained:
    """`spec` as it was after `step` training steps: its checkpoint, the repository's branch "step<N>" (Pythia's
    way: one repository, one branch per saved step). A model without checkpoints, or a step it did not save, is a
    ValueError."""
    if not spec.steps:
        raise ValueError(f"{spec.label} has no training checkpoints on the hub, only its final weights")
    if not isinstance(step, int) or isinstance(step, bool) or step not in PYTHIA_STEPS:
        raise ValueError(f"{spec.label} was not saved at step {step!r}: its checkpoints are step 0, steps 1, 2, 4, "
                         "..., 512 and every 1,000 steps up to 143,000")
    label = spec.label.split(" at step ")[0]
    return replace(spec, revision=f"step{step}", label=f"{label} at step {step:,} of {PYTHIA_STEPS[-1]:,}")


class HubUnavailable(RuntimeError):
    """The files are not in the cache and could not be downloaded (the message is for a student)."""


def cached(spec: Pretrained, cache_dir: str | Path | None = None) -> Path | None:
    """The directory holding all of `spec`'s files if the cache has them (no network is used), else None."""
    paths = []
    for name in spec.files:
        try:
            paths.append(Path(hf_hub_download(spec.repo_id, name, revision=spec.revision, cache_dir=cache_dir,
                                              local_files_only=True)))
        except Exception:           # huggingface_hub raises its own errors for a missing entry
            return None
    return paths[0].parent


def _offline() -> bool:
    return constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def _reachable(endpoint: str, timeout: float) -> bool:
    url = urlsplit(endpoint)
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def fetch(spec: Pretrained, cache_dir: str | Path | None = None,
          progress: Callable[[int, int, str], None] | None = None, timeout: float = PROBE_TIMEOUT_S) -> Path:
    """The directory of `spec`'s files, downloading what the cache lacks; `progress(done, total, file)` is
    called before each file. Raises HubUnavailable (in plain words) when they cannot be had."""
    directory = cached(spec, cache_dir)
    if directory is not None:
        return directory
    names = ", ".join(Path(name).name for name in spec.files)
    why = f"{spec.label} needs a one-time download of {names} from the Hugging Face hub"
    if _offline():
        raise HubUnavailable(f"{why}, but this server is set to work offline (HF_HUB_OFFLINE). "
                             "The small models work as before.")
    if not _reachable(constants.ENDPOINT, timeout):
        raise HubUnavailable(f"{why}, but this server cannot reach {urlsplit(constants.ENDPOINT).hostname}. "
                             "The small models work as before.")
    path = None
    for done, name in enumerate(spec.files):
        if progress:
            progress(done, len(spec.files), name)
        try:
            path = Path(hf_hub_download(spec.repo_id, name, revision=spec.revision, cache_dir=cache_dir,
                                        etag_timeout=timeout))
        except Exception as error:   # network, HTTP or disk errors: say so, never a traceback
            raise HubUnavailable(f"{why}, and downloading {name} failed ({type(error).__name__}). "
                                 "The small models work as before; try again later.") from None
    if progress:
        progress(len(spec.files), len(spec.files), "")
    return path.parent
