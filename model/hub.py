"""Fetch a pretrained model's files from the Hugging Face hub once, into the standard Hugging Face cache.

    from model.hub import GPT2, SMOLLM2, fetch
    directory = fetch(GPT2)          # config.json, model.safetensors, tokenizer.json, at a pinned revision
    directory = fetch(SMOLLM2)       # the same three files of SmolLM2-135M

`fetch` never hangs and never shows a traceback to a student: files already in the cache are used
without any network; otherwise the hub is probed with a short timeout first, and anything that stops the
download (offline mode, no network, a server error) becomes a `HubUnavailable` whose message says so in
plain words. Loading the files into a model is `model.pretrained.load_pretrained(directory)`.
"""
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from huggingface_hub import constants, hf_hub_download

FILES = ("config.json", "model.safetensors", "tokenizer.json")
PROBE_TIMEOUT_S = 3.0            # an unreachable hub otherwise retries for about 23 s


@dataclass(frozen=True)
class Pretrained:
    """A model on the hub, pinned to one revision so every server loads the same weights."""
    repo_id: str
    revision: str                # a commit id: a later push to the repository cannot change what we load
    label: str                   # what a student reads in the model picker
    about: str                   # size, origin and licence, in one line
    parameters: int = 0          # how many numbers it learned (its config's shapes give the same count)
    download_mb: int = 0         # the files' size, about
    files: tuple[str, ...] = FILES   # the files fetched, by their path in the repository


GPT2 = Pretrained("openai-community/gpt2", "607a30d783dfa663caf39e06633721c8d4cfcd7e", "GPT-2 small",
                  "124M parameters, OpenAI 2019, MIT licence; downloads about 550 MB once", 124_439_808, 550)
# The revision was read from public projects that pin SmolLM2-135M (the files at it: a bfloat16 model.safetensors,
# config.json with rope_theta 100,000 at the top level, tokenizer.json), never fetched from here: our build
# machines cannot reach the hub. Check it once where the hub is reachable:
#   huggingface_hub.model_info("HuggingFaceTB/SmolLM2-135M").sha, and load_pretrained(fetch(SMOLLM2)).
SMOLLM2 = Pretrained("HuggingFaceTB/SmolLM2-135M", "93efa2f097d58c2a74874c7e644dbc9b0cee75a2", "SmolLM2-135M",
                     "135M parameters, Hugging Face 2024, Apache 2.0 licence; downloads about 270 MB once",
                     134_515_008, 270)


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
