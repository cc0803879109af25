"""The view every page draws from, and the small helpers around it (no Streamlit: figure builders and tests
import this module alone).

A view is one model reading one sentence: the model's bundle, the sentence as it was typed and as the
model read it, the trace of that reading and presenter mode. Its `key` names the model for every cache
(see explorer/app/cache.py).
"""
import re
import uuid
import weakref
from dataclasses import dataclass, field
from threading import Lock

import torch

from model.checkpoint import Bundle
from model.inputs import Prepared
from model.transformer import Trace

DEFAULT_SENTENCE = "the cat sat on the mat because"
# A sentence each bundled model knows every word of, offered when the typed one has unknown words.
EXAMPLES = {"tinytales": DEFAULT_SENTENCE, "roses": "roses are red violets are blue",
            "translate": "the small red cat sees the big dog", "sort": "7 3 9 1 5 2"}
MAX_CHARS = 2000

NOT_FINITE = ("This model's weights contain NaN or infinite values, so every number it computes would be "
              "meaningless. That happens when training diverges (a learning rate that is too high) or a model "
              "file is broken. Pick another model in the sidebar.")
OVERFLOW = ("This sentence makes the model's numbers overflow (NaN or infinity appear in its forward pass), so "
            "there is nothing meaningful to show. Try another sentence or another model.")

ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU, tanh approximation",
                    "swiglu": "SwiGLU: SiLU of a gate times an up projection"}

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def escape(text: str) -> str:
    """Text made safe for Markdown: every special character escaped, a newline as a space."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


def quote(text: str) -> str:
    """User text made safe for Markdown: every special character escaped, shown in quotes."""
    return "“" + escape(text) + "”"


# One key per model object, for as long as it lives: a new object (a retrained or re-uploaded model, a
# model loaded again after the cache was cleared) never inherits an old one's cached results. Weights never
# change after a model reaches the picker (the lab publishes frozen copies), so the key stays valid.
_KEYS: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()
_KEYS_LOCK = Lock()


def model_key(name: str, model: torch.nn.Module) -> str:
    """A stable key for `model` (shown as `name`): the same object always gets the same key."""
    with _KEYS_LOCK:
        if model not in _KEYS:
            _KEYS[model] = f"{name}#{uuid.uuid4().hex[:12]}"
        return _KEYS[model]


class _HeldTrace:
    """`View.trace`: the view's trace, held as any attribute is, until `View.let_go_of_trace` leaves it to the
    server's trace cache alone (a weak reference). Read after that, it is the cached trace while the cache keeps it,
    else the sentence read again (through the cache: `memo.trace`). So a visitor's session between two runs holds
    no trace of its own, and the cache's budget bounds what all sessions' traces take (a SmolLM2 trace of 29 tokens
    is about 47 MB)."""

    def __set_name__(self, owner, name: str):
        self.slot = "_" + name

    def __get__(self, view, owner=None):
        if view is None:
            return None                                          # the dataclass field's default
        held = view.__dict__.get(self.slot)
        if not isinstance(held, weakref.ref):
            return held
        trace = held()
        if trace is None:
            from explorer import memo                            # (memo reads views; views do not read memo)
            trace = memo.trace(view)
            view.__dict__[self.slot] = weakref.ref(trace)
        return trace

    def __set__(self, view, trace) -> None:
        view.__dict__[self.slot] = trace


@dataclass
class View:
    """Everything a page needs about the current view."""
    name: str
    bundle: Bundle
    text: str
    presenter: bool
    prepared: Prepared | None = None   # None when the text cannot be read (then `problem` says why)
    trace: Trace | None = _HeldTrace()
    problem: str | None = None
    notices: list[str] = field(default_factory=list)
    phone: bool = False                # the visitor's browser says it is a phone's (explorer/app/state.py)

    def let_go_of_trace(self) -> None:
        """Hold the trace weakly from now on (the web app, once a run has drawn its page: see `_HeldTrace`)."""
        trace = self.__dict__.get("_trace")
        if trace is not None and not isinstance(trace, weakref.ref):
            self.__dict__["_trace"] = weakref.ref(trace)

    @property
    def compact(self) -> bool:
        """A small first screen, a projector's (presenter mode) or a phone's: the page's chart comes first and its
        words start folded (explorer/app/layout.py lays pages out by it)."""
        return self.presenter or self.phone

    @property
    def key(self) -> str:
        """The model's cache key (explorer/app/cache.py)."""
        return model_key(self.name, self.bundle.model)

    @property
    def ids(self) -> tuple[int, ...]:
        """The token ids the model read (empty when the text could not be read)."""
        return tuple(self.prepared.ids) if self.prepared else ()

    @property
    def tokens(self) -> list[str]:
        """What the model read at each position: the token's text, `<unk>` for a word it does not know."""
        if not self.prepared:
            return []
        pieces = self.prepared.pieces
        if not any(p.unknown for p in pieces):       # (the vocabulary is a copy: GPT-2's has 50,257 entries)
            return [p.text for p in pieces]
        vocab = self.bundle.tokenizer.vocab
        return [vocab[p.id] if p.unknown else p.text for p in pieces]

    @property
    def typed(self) -> list[str]:
        """What was typed at each position (differs from `tokens` only where the model read `<unk>`)."""
        return [p.text for p in self.prepared.pieces] if self.prepared else []


def example_sentence(name: str, bundle: Bundle) -> str | None:
    """A sentence model `name` knows every word of (bundled: EXAMPLES; trained: its probe sentence)."""
    return EXAMPLES.get(name) or bundle.facts.get("example") or None


def shorten(text: str, limit: int = 80) -> str:
    """`text` whole when it has at most `limit` characters, else cut after its last whole word that fits, with
    an ellipsis (a button never shows half a word)."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip() + " …"


def is_finite(model) -> bool:
    """Whether every weight of `model` is a finite number (a diverged run or a broken file has NaN or inf)."""
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def trace_is_finite(trace: Trace) -> bool:
    """Whether every value of the forward pass is a finite number (huge weights can overflow to inf or NaN)."""
    return all(bool(torch.isfinite(value).all()) for value in trace.values())


def forecast_position(n_tokens: int) -> int:
    """The position every page opens on: the last, whose forecast is the model's guess of the word that comes
    next (the home page describes it, and each step page starts from it)."""
    return max(n_tokens - 1, 0)
