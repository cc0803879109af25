"""Checkpoints: safetensors + JSON round trips, never pickle, and uploads that are checked."""
import json
import pickle

import pytest
import torch
from safetensors.torch import load as load_tensors, save as save_tensors

from model import checkpoint
from model.checkpoint import Bundle, from_bytes, load, load_bundled, save, to_bytes
from model.config import ModelConfig
from model.tokenizers import WordTokenizer
from model.transformer import TransformerLM

TOKENS = [[1, 2, 3, 4, 5]]


@pytest.fixture
def bundle() -> Bundle:
    tokenizer = WordTokenizer.from_texts(["the cat sat on the mat"])
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=tokenizer.vocab_size, d_model=16, n_heads=2, n_layers=1,
                                      d_ff=32, max_len=8, pos="learned", norm="rms"))
    return Bundle(model, tokenizer, {"note": "test"})


def test_save_and_load_give_identical_logits_and_tokenizer(bundle, tmp_path):
    save(bundle, tmp_path / "m")
    assert json.loads((tmp_path / "m.json").read_text())["config"]["pos"] == "learned"
    again = load(tmp_path / "m")
    assert torch.equal(again.model.predict(TOKENS), bundle.model.predict(TOKENS))
    assert again.tokenizer.vocab == bundle.tokenizer.vocab and again.facts == {"note": "test"}
    assert not again.model.training


def test_one_file_download_round_trips(bundle):
    again = from_bytes(to_bytes(bundle))
    assert torch.equal(again.model.predict(TOKENS), bundle.model.predict(TOKENS))


def test_loading_never_unpickles(bundle, tmp_path, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle was used")
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    save(bundle, tmp_path / "m")
    load(tmp_path / "m")
    from_bytes(to_bytes(bundle))
    load_bundled("roses")


def tampered(bundle: Bundle, change) -> bytes:
    """A download with its JSON document or tensors changed by `change(document, tensors)`."""
    data = to_bytes(bundle)
    tensors = load_tensors(data)
    document = bundle.document()
    change(document, tensors)
    return save_tensors(tensors, metadata={"explorer": json.dumps(document)})


@pytest.mark.parametrize("change, message", [
    (lambda d, t: d["config"].update(d_model=32), "do not fit|shape"),
    (lambda d, t: d["config"].update(n_heads=3), "not divisible"),
    (lambda d, t: d["config"].update(n_layers=10_000), "n_layers must be between"),
    (lambda d, t: d["config"].update(secret=1), "unknown config fields"),
    (lambda d, t: d.update(format="other/9"), "format"),
    (lambda d, t: d["tokenizer"].update(vocab=["<unk>"]), "tokenizer has 1 tokens"),
    (lambda d, t: t.pop("unembed.weight"), "missing"),
    (lambda d, t: t.update({"unembed.weight": t["unembed.weight"].double()}), "dtype"),
    (lambda d, t: t["embed.tok.weight"].fill_(float("nan")), "NaN"),
])
def test_tampered_uploads_are_refused_with_a_reason(bundle, change, message):
    with pytest.raises(ValueError, match=message):
        from_bytes(tampered(bundle, change))


@pytest.mark.parametrize("data", [b"", b"hello", b"\x00" * 100, pickle.dumps({"a": 1}),
                                  save_tensors({"x": torch.zeros(2)})])
def test_files_that_are_not_model_files_are_refused(data):
    with pytest.raises(ValueError, match="not a Transformer Explorer model file"):
        from_bytes(data)


def test_oversized_uploads_are_refused_before_parsing(bundle):
    with pytest.raises(ValueError, match="the limit is"):
        from_bytes(to_bytes(bundle), max_bytes=100)


def test_unknown_bundled_name_is_refused():
    with pytest.raises(ValueError, match="no bundled model called 'gpt5'"):
        load_bundled("gpt5")
    assert checkpoint.BUNDLED[0] == "tinytales"


def tied_bundle() -> Bundle:
    tokenizer = WordTokenizer.from_texts(["the cat sat on the mat"])
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=tokenizer.vocab_size, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                                      max_len=8, pos="learned", activation="gelu_tanh", tie_embeddings=True))
    with torch.no_grad():
        model.embed.tok.weight.mul_(20.0)                       # large enough that a lost tie shows in logits
    return Bundle(model.eval(), tokenizer, {})


def test_a_tied_unembedding_is_stored_once_and_tied_again(tmp_path):
    tied = tied_bundle()
    save(tied, tmp_path / "tied")
    stored = load_tensors((tmp_path / "tied.safetensors").read_bytes())
    assert "unembed.weight" not in stored and "embed.tok.weight" in stored
    for again in (load(tmp_path / "tied"), from_bytes(to_bytes(tied))):
        assert again.model.unembed.weight is again.model.embed.tok.weight
        assert again.model.cfg.tie_embeddings and again.model.cfg.activation == "gelu_tanh"
        torch.testing.assert_close(again.model.predict(TOKENS), tied.model.predict(TOKENS), rtol=0, atol=0)


def test_an_old_document_without_the_new_config_fields_still_loads(bundle, tmp_path):
    save(bundle, tmp_path / "old")
    document = json.loads((tmp_path / "old.json").read_text())
    del document["config"]["tie_embeddings"], document["config"]["norm_eps"]
    (tmp_path / "old.json").write_text(json.dumps(document))
    assert torch.equal(load(tmp_path / "old").model.predict(TOKENS), bundle.model.predict(TOKENS))
