"""Fetching GPT-2's files (model/hub.py), offline: our build machines cannot reach the Hugging Face hub, so
these tests use an empty cache, a cache prepared in the hub's layout, and a stand-in for the download."""
import socket
from pathlib import Path

import pytest

from model import hub
from model.hub import FILES, GPT2, SMOLLM2, HubUnavailable, cached, fetch


def prepared_cache(root: Path, spec=GPT2) -> Path:
    """A cache directory in the hub's layout (models--owner--name/snapshots/<revision>/file), as a download leaves it."""
    snapshot = root / f"models--{spec.repo_id.replace('/', '--')}" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True)
    for name in FILES:
        (snapshot / name).write_text(f"the {name} of {spec.repo_id}")
    return snapshot


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the network was used")
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(hub, "hf_hub_download", _local_only(hub.hf_hub_download))


def _local_only(download):
    def only(*args, **kwargs):
        assert kwargs.get("local_files_only"), "a download was attempted"
        return download(*args, **kwargs)
    return only


def test_gpt2_is_pinned_to_a_commit_and_says_what_it_costs():
    assert GPT2.repo_id == "openai-community/gpt2" and len(GPT2.revision) == 40
    assert "124M" in GPT2.about and "MIT" in GPT2.about and "550 MB" in GPT2.about


def test_smollm2_is_pinned_to_a_commit_and_says_what_it_costs():
    assert SMOLLM2.repo_id == "HuggingFaceTB/SmolLM2-135M" and len(SMOLLM2.revision) == 40
    assert int(SMOLLM2.revision, 16) and SMOLLM2.label == "SmolLM2-135M"
    assert "135M" in SMOLLM2.about and "Apache 2.0" in SMOLLM2.about and "270 MB" in SMOLLM2.about


@pytest.mark.parametrize("spec", [GPT2, SMOLLM2], ids=["gpt2", "smollm2"])
def test_a_prepared_cache_is_used_without_any_network(tmp_path, no_network, spec):
    snapshot = prepared_cache(tmp_path, spec)
    assert cached(spec, tmp_path) == snapshot
    assert fetch(spec, cache_dir=tmp_path) == snapshot
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(FILES)


def test_a_cache_missing_one_file_is_not_used(tmp_path, monkeypatch):
    snapshot = prepared_cache(tmp_path)
    (snapshot / "model.safetensors").unlink()
    assert cached(GPT2, tmp_path) is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable, match="offline"):
        fetch(GPT2, cache_dir=tmp_path)


@pytest.mark.parametrize("spec", [GPT2, SMOLLM2], ids=["gpt2", "smollm2"])
def test_offline_with_an_empty_cache_says_so_in_plain_words(tmp_path, monkeypatch, no_network, spec):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable) as caught:
        fetch(spec, cache_dir=tmp_path)
    message = str(caught.value)
    assert f"{spec.label} needs a one-time download" in message and "offline" in message
    assert "small models work" in message and "Traceback" not in message


@pytest.mark.parametrize("spec", [GPT2, SMOLLM2], ids=["gpt2", "smollm2"])
def test_an_unreachable_hub_says_so_without_trying_to_download(tmp_path, monkeypatch, spec):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub.constants, "ENDPOINT", "http://127.0.0.1:9")        # nothing listens on port 9
    monkeypatch.setattr(hub, "hf_hub_download", _local_only(hub.hf_hub_download))
    with pytest.raises(HubUnavailable, match=f"{spec.label} needs a one-time download.*cannot reach 127.0.0.1"):
        fetch(spec, cache_dir=tmp_path, timeout=0.5)


def test_a_download_reports_progress_file_by_file_and_a_failure_in_plain_words(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub, "_reachable", lambda endpoint, timeout: True)
    source = prepared_cache(tmp_path / "elsewhere")
    fetched = []

    def download(repo_id, name, revision, cache_dir, local_files_only=False, etag_timeout=10):
        if local_files_only:
            raise FileNotFoundError(name)               # nothing cached yet
        if name == "tokenizer.json" and fail:
            raise ConnectionError("reset by peer")
        fetched.append(name)
        return str(source / name)
    monkeypatch.setattr(hub, "hf_hub_download", download)
    fail, seen = False, []
    assert fetch(GPT2, cache_dir=tmp_path, progress=lambda done, total, name: seen.append((done, total, name))) == source
    assert fetched == list(FILES)
    assert seen == [(0, 3, "config.json"), (1, 3, "model.safetensors"), (2, 3, "tokenizer.json"), (3, 3, "")]
    fail = True
    with pytest.raises(HubUnavailable, match=r"downloading tokenizer.json failed \(ConnectionError\)"):
        fetch(GPT2, cache_dir=tmp_path)
