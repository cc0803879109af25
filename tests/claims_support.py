"""Models and views for tests/test_claims.py: the bundled models and small lab-like models of other settings.

The lab-like models have random weights (larger than the initialisation, norms left at gain 1 and shift 0),
which is enough for claims about shapes, formulas and wiring; claims about what training produced are checked
on the bundled models.
"""
from functools import lru_cache

import torch

from explorer.app.state import DEFAULT_SENTENCE, View
from model import corpora, presets
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.transformer import TransformerLM

SENTENCES = {"tinytales": DEFAULT_SENTENCE, "roses": "roses are red violets are blue sugar is sweet"}
LAB_TEXT = "roses are red violets are blue"

# Lab settings a student can pick (BOUNDS in explorer/lab/training.py), covering every switch at least once.
LAB = {
    "char, rms, post-norm, relu, learned": dict(tokenizer="char", norm="rms", norm_position="post",
                                                activation="relu", pos="learned"),
    "bpe, layer, post-norm, gelu, no positions": dict(tokenizer="bpe", norm="layer", norm_position="post",
                                                      activation="gelu", pos="none"),
    "word, no norm, relu, sinusoidal, 3 heads, embed_scale": dict(norm="none", d_model=24, n_heads=3,
                                                                  embed_scale=True),
    "word, rms, pre-norm, gelu, 1 head": dict(norm="rms", n_heads=1, activation="gelu"),
    "today's: rope, rms, swiglu, 4 heads sharing 2, no biases": dict(norm="rms", norm_position="pre", pos="rope",
                                                                    activation="swiglu", n_heads=4, n_kv_heads=2,
                                                                    bias=False),
}


@lru_cache
def bundled(name: str) -> Bundle:
    return load_bundled(name)


@lru_cache
def lab_bundle(tokenizer: str = "word", seed: int = 0, **settings) -> Bundle:
    """A random model with a lab's settings and a tokenizer fitted to the roses poem."""
    tok = presets.build_tokenizer(tokenizer, corpora.roses_text(20), "roses")
    shape = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=32) | settings
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(vocab_size=tok.vocab_size, **shape)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.3)
    return Bundle(model, tok)


def view_of(bundle: Bundle, text: str, name: str = "test") -> View:
    """The View a page would build for `text` (the name is not a bundled one, so nothing is cached)."""
    prepared = prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len)
    return View(name=name, bundle=bundle, text=text, presenter=False, prepared=prepared,
                trace=bundle.model.run(prepared.ids))


def bundled_view(name: str) -> View:
    return view_of(bundled(name), SENTENCES[name])


def lab_view(label: str, text: str = LAB_TEXT) -> View:
    return view_of(lab_bundle(**LAB[label]), text)
