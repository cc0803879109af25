"""Next-token predictions for a typed sentence, as plain values a page can show."""
from dataclasses import dataclass

import torch

from model.checkpoint import Bundle
from model.inputs import Prepared, prepare_text


@dataclass(frozen=True)
class NextTokens:
    prepared: Prepared             # the tokens the model read
    tokens: list[str]              # the k likeliest next tokens, best first
    probs: list[float]             # their probabilities


def top_next_tokens(bundle: Bundle, text: str, k: int = 5) -> NextTokens:
    """The model's k likeliest next tokens after `text` (ValueError for empty text)."""
    prepared = prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len)
    logits = bundle.model.run(prepared.ids)["logits"][0, -1]            # (V,)
    top = torch.softmax(logits, -1).topk(min(k, logits.numel()))
    vocab = bundle.tokenizer.vocab
    return NextTokens(prepared, [vocab[i] for i in top.indices.tolist()], top.values.tolist())
