"""Induction heads: the attention heads that finish a pattern they have seen before.

Read "... Harry Potter ... Harry" and an induction head, at the second "Harry", looks back at the token AFTER the
earlier "Harry" ("Potter") and copies it forward as the guess. It takes two heads in two layers: a previous-token
head writes into each position which token came before it; the induction head's query (the current token) then
matches the key of the position whose previous token is the same, and reads that position's token. Olsson et al.
(2022, "In-context learning and induction heads") found these heads form suddenly, early in training, at the same
moment as a drop in the loss.

The standard test (theirs, and TransformerLens'): a random sequence of n tokens, then the same n again. In the
second copy nothing but copying helps, and an induction head at position i puts its attention on i - n + 1, the
token after the previous occurrence of the current one. A head's induction score is its mean attention weight
there, over the second copy:

    repeated_random_tokens(vocab_size, length, ...)  [B, 2n]   n random tokens, then the same n again
    induction_scores(model, tokens)                  [L, H]    each head's mean attention on i - n + 1

A head that spreads its weight evenly scores about 1 / (i + 1) (it may see i + 1 positions); a perfect induction
head scores 1.
"""
import torch
import torch.nn as nn

from .layers import Trace, block_name, causal_mask, start_run, stack
from .transformer import TransformerLM

FIRST_ID = 2     # random tokens are drawn from this id up: the first ids are special in the tokenizers here (<unk> is
                 # our word and character tokenizers' 0; Pythia's 0 and 1 are <|endoftext|> and <|padding|>)
BATCH = 4        # sequences to average over: 4 x n query positions per head


def repeated_random_tokens(vocab_size: int, length: int, seed: int = 0, batch: int = BATCH,
                           max_len: int | None = None, first_id: int = FIRST_ID) -> torch.Tensor:
    """(batch, 2 x length) token ids: `length` random ids from `first_id` to vocab_size - 1, then the same again.

    Within a copy the ids are all different when there are enough of them (so the token after the previous
    occurrence of the current one is a single position), else drawn with repeats. `max_len`, a model's context,
    shortens `length` to max_len // 2 so that both copies fit. The same seed always gives the same tokens."""
    if max_len is not None:
        length = min(length, max_len // 2)
    choices = vocab_size - first_id                                               # ids to draw from
    if length < 1 or choices < 1 or batch < 1:
        raise ValueError(f"cannot draw {length} random tokens per copy ({batch} sequences) from ids {first_id} to "
                         f"{vocab_size - 1}: it needs a length and a batch of at least 1 and ids to draw from")
    gen = torch.Generator().manual_seed(seed)
    if length <= choices:                         # without repeats: the first `length` of a random order
        first = torch.rand(batch, choices, generator=gen).argsort(dim=-1)[:, :length]   # (B, n)
    else:                                         # too few ids: draw with repeats
        first = torch.randint(0, choices, (batch, length), generator=gen)               # (B, n)
    first = first + first_id                                                      # (B, n)
    return torch.cat([first, first], dim=1)                                       # (B, 2n)


@torch.no_grad()
def induction_scores(model: TransformerLM, tokens: torch.Tensor) -> torch.Tensor:
    """(L, H): each head's mean attention weight, over the second copy of `tokens` (B, 2n) and the batch, from
    position i to i - n + 1, the token after the previous occurrence of token i (the induction score).

    Only the attention patterns are kept from the forward pass. Sequences longer than the model's context are
    shortened to the first max_len // 2 tokens of each copy (still a repeat)."""
    tokens = torch.as_tensor(tokens, dtype=torch.long)                            # (B, 2n)
    tokens = tokens[None] if tokens.dim() == 1 else tokens                        # (B, 2n)
    T = tokens.shape[1]
    n = T // 2
    if T < 2 or T % 2 or not torch.equal(tokens[:, :n], tokens[:, n:]):
        raise ValueError("induction scores need sequences that repeat: n tokens, then the same n again "
                         "(repeated_random_tokens makes them)")
    if T > model.cfg.max_len:                     # both copies cut to what fits the context
        n = model.cfg.max_len // 2
        tokens = torch.cat([tokens[:, :n], tokens[:, :n]], dim=1)                 # (B, 2n)
    L = model.cfg.n_layers
    names = [block_name("pattern", layer) for layer in range(L)]
    # the stack alone: no final norm and no unembedding, most of the work at Pythia's 50,277 tokens, and no pattern
    rec = start_run(model.trace_names[1:], keep=names, inputs={"tokens": tokens})
    stack(model.embed, model.blocks, nn.Identity(), tokens, rec, mask=causal_mask(tokens.shape[1]))
    trace = Trace(rec.values)
    queries = torch.arange(n, 2 * n)                                              # (n,) the second copy
    keys = queries - n + 1                                                        # (n,) after the previous occurrence
    scores = []
    for layer in range(L):
        pattern = trace["pattern", layer]                                         # (B, H, 2n, 2n)
        stripe = pattern[:, :, queries, keys]                                     # (B, H, n)
        scores.append(stripe.mean(dim=(0, 2)))                                    # (H,)
    return torch.stack(scores)                                                    # (L, H)
