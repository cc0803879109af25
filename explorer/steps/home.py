"""The big picture: the pipeline from text to prediction, with this sentence's real shapes."""
from dataclasses import dataclass

import torch

from explorer.view import ACTIVATION_NAMES, View, forecast_position, quote

INTRO = """\
A language model like this one does one thing: **given some text, it guesses the next token**.
It does that in a fixed series of steps, and each page of this app opens one of them with the real
numbers for your sentence.

Think of an assembly line. The sentence is cut into pieces (tokens), each piece gets an ID card of
numbers (an embedding) with its seat number stamped on it (its position). Then, layer by layer,
every piece looks back at the pieces before it (attention) and thinks on its own (feed-forward),
adding what it found to a running notebook (the residual stream). At the end the last notebook is
read out as a score for every word the model knows, and the scores become probabilities.
"""


@dataclass(frozen=True)
class Stage:
    slug: str          # the step page that explains this stage
    name: str
    shape: str         # the real shape for this sentence, e.g. "10 x 64"
    detail: str


NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm"}


def residual_detail(cfg) -> str:
    """What the norm does to the stream, for this model's norm and its position."""
    if cfg.norm == "none":
        return "Every layer adds its work to the stream; this model has no normalization."
    if cfg.norm_position == "pre":
        return (f"Every layer adds its work to the stream; {NORM_NAMES[cfg.norm]} rescales the copy each sublayer "
                "reads (pre-norm), so the stream itself can grow.")
    return (f"Every layer adds its work to the stream; {NORM_NAMES[cfg.norm]} rescales the stream after each "
            "addition (post-norm), so it keeps its scale.")


def pipeline(view: View) -> list[Stage]:
    """The stages of the forward pass with the shapes this sentence produces."""
    trace, cfg = view.trace, view.bundle.model.cfg
    T = trace["tokens"].shape[1]
    D, H, F, V, L = cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.vocab_size, cfg.n_layers
    probs = torch.softmax(trace["logits"][0, forecast_position(T)], -1)    # the position every step page opens on
    best = int(probs.argmax())
    return [
        Stage("tokenization", "Tokens", f"{T} tokens",
              f"The model reads {T} token ids from a vocabulary of {V:,}"
              + (f" (the last {T} of the text's {T + view.prepared.dropped})." if view.prepared.dropped else ".")),
        Stage("embedding", "Embeddings", f"{T} x {D}",
              f"Each token id picks a row of {D} learned numbers."),
        Stage("positions", "+ positions", f"{T} x {D}",
              f"A {cfg.pos} position signal is added to each row." if cfg.pos not in ("none", "rope")
              else "Nothing is added: attention turns each query and key by an angle that grows with its "
                   "position (rotary positions)." if cfg.pos == "rope"
              else "This model adds no position signal."),
        Stage("attention", f"Attention ({L} layers x {H} heads)", f"{H} x {T} x {T} per layer",
              f"Each head weighs the {T} tokens; each token looks only at itself and earlier tokens."
              + (f" Its {H} query heads share {cfg.kv_heads} key/value heads." if cfg.kv_heads < H else "")),
        Stage("feedforward", "Feed-forward", f"{T} x {D} → {T} x {F:,} → {T} x {D}",
              f"Each token is expanded to {F:,} neurons, activated ({ACTIVATION_NAMES[cfg.activation]}) and "
              "contracted back."),
        Stage("residual", "Residual stream & norm", f"{T} x {D}",
              residual_detail(cfg)),
        Stage("prediction", "Next-token probabilities", f"{V:,} scores",
              f"The last position's {V:,} scores become probabilities: the top guess is "
              f"{quote(view.bundle.tokenizer.vocab[best])} at {probs[best]:.0%}."),
    ]
