"""Activation patching: run a corrupted sentence with one of the clean sentence's values put back, and see how much
of the clean answer comes back (TransformerLens' `patching` module, without hooks).

One generic function, `run_patched`: the corrupted run with, in each batch row, one value replaced by the clean
run's. The replacement goes into the forward pass as an edit (model/layers.py `Recorder`), an argument: the model
object, shared by every visitor, is never changed. Thin wrappers name what is patched:

    resid_pre_grid(model, pair)   the stream entering each block at each position   (get_act_patch_resid_pre)
    head_out_grid(model, pair)    each head's output at every position at once      (get_act_patch_attn_head_out_all_pos)
    knockout_logits(...)          heads of one block patched with zeros (a knockout), from that block on

The measure is the share of the logit difference restored: (patched - corrupted) / (clean - corrupted), where the
logit difference is logit(answer) - logit(other) at one position: 1 means the patch brings the clean answer
back entirely, 0 that it changes nothing.
"""
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn

from .layers import Recorder, Trace, causal_mask, check_tokens, stack
from .seq2seq import EncoderDecoder

Progress = Callable[[int, int], None]       # (patches done, patches in all)
TINY = 1e-6                                 # a logit difference this small is no difference


class NothingToRestore(ValueError):
    """The clean and corrupted runs give the same logit difference: there is nothing for a patch to restore."""


@dataclass(frozen=True)
class Patch:
    """Put the clean run's value of `name` back at `index` (an index into one sentence's value, without the batch
    dimension: (position,) for a stream (T, D), (head,) for a head's mixed values z (H, T, K))."""
    name: str
    index: tuple


def _decoder_only(model: nn.Module) -> None:
    if isinstance(model, EncoderDecoder):
        raise ValueError("patching is offered for decoder-only models here: an encoder-decoder's two sentences "
                         "would also need the same source")


def _forward(model: nn.Module, tokens: torch.Tensor, rec: Recorder, position: int, targets: list[int]) -> torch.Tensor:
    """The logits of `targets` (N, n) at `position` for a batch of token ids (N, T): only those logits are
    computed (GPT-2 would otherwise make 50,257 per position per row)."""
    x = stack(model.embed, model.blocks, model.final_norm, tokens, rec,
              mask=causal_mask(tokens.shape[1], tokens.device))                            # (N, T, D)
    return x[:, position] @ model.unembed.weight[targets].T                                # (N, n)


def _forward_from(model: nn.Module, stream: torch.Tensor, first: int, rec: Recorder, position: int,
                  targets: list[int] | None) -> torch.Tensor:
    """The same, starting at block `first` from the stream entering it (N, T, D): a patch in block `first` or
    later leaves every block before it as in the unpatched run, so those need not run again. `targets` None:
    every token's logit (N, V)."""
    mask = causal_mask(stream.shape[1], stream.device)                                     # (T, T)
    angles = model.embed.angles(*stream.shape[:2], rec, stream.device)                     # (N, T, K/2), or None
    x = stream
    for block in model.blocks[first:]:
        x = block(x, rec, mask=mask, angles=angles)                                        # (N, T, D)
    x = rec("final.norm", model.final_norm(x))                                             # (N, T, D)
    if targets is None:
        return x[:, position] @ model.unembed.weight.T                                     # (N, V)
    return x[:, position] @ model.unembed.weight[targets].T                                # (N, n)


def first_block(name: str) -> int | None:
    """The block a trace name belongs to ("blocks.3.attn.z" -> 3); None for the embeddings and the end."""
    parts = name.split(".")
    return int(parts[1]) if parts[0] == "blocks" else None


def _replace(rows: list[tuple[int, tuple]], clean: torch.Tensor):
    """An edit putting clean values (1, ...) back: in batch row r, at index i, for each (r, i) of `rows`."""
    def edit(x: torch.Tensor) -> torch.Tensor:                                             # x: (N, ...)
        for row, index in rows:
            x[row][index] = clean[0][index]
        return x
    return edit


@torch.no_grad()
def run_patched(model: nn.Module, corrupted, clean: Trace, patches: Sequence[Patch], position: int,
                targets: Sequence[int], batch: int = 32, progress: Progress | None = None) -> torch.Tensor:
    """The corrupted run once per patch, each with its patch applied; the logits (N, n) of `targets` at
    `position`. `batch` patched runs go through the model together (one batch row each), from the first block a
    patch of the batch touches (the blocks before it are the corrupted run's, computed once)."""
    _decoder_only(model)
    tokens = check_tokens(corrupted, model.cfg)                                            # (1, T)
    names = set(model.trace_names)
    unknown = sorted({p.name for p in patches} - names)
    if unknown:
        raise ValueError(f"cannot patch {', '.join(unknown)}: not a name in this model's trace")
    targets = [int(t) for t in targets]
    entering = model.run(tokens, names=[f"blocks.{i}.resid_pre" for i in range(model.cfg.n_layers)])
    out = []
    for start in range(0, len(patches), batch):
        chunk = patches[start:start + batch]
        rows: dict[str, list[tuple[int, tuple]]] = {}
        for row, patch in enumerate(chunk):
            rows.setdefault(patch.name, []).append((row, tuple(patch.index)))
        edits = Recorder({name: _replace(where, clean[name]) for name, where in rows.items()})
        blocks = [first_block(p.name) for p in chunk]
        if None in blocks:                        # an embedding is patched: the whole model runs
            out.append(_forward(model, tokens.expand(len(chunk), -1), edits, position, targets))
        else:                                     # the blocks before the first patched one ran already
            first = min(blocks)
            stream = entering[f"blocks.{first}.resid_pre"].expand(len(chunk), -1, -1)      # (N, T, D)
            out.append(_forward_from(model, stream, first, edits, position, targets))
        if progress is not None:
            progress(start + len(chunk), len(patches))
    return torch.cat(out) if out else torch.zeros(0, len(targets))


@torch.no_grad()
def knockout_logits(model: nn.Module, trace: Trace, layer: int, heads: Sequence[int], position: int) -> torch.Tensor:
    """Every token's logit (N, V) after `position` with each of `heads` of block `layer` knocked out in turn (its
    mixed values z patched with zeros), one batch row each. The run starts from `trace`'s stream entering block
    `layer` (the blocks before it do not change) and reads the positions up to `position` only (the causal mask
    keeps the later ones from reaching it): for GPT-2 a few rows of a few blocks instead of a run per head."""
    _decoder_only(model)
    name = f"blocks.{layer}.attn.z"
    upto = position + 1
    stream = trace[f"blocks.{layer}.resid_pre"][:, :upto].expand(len(heads), -1, -1)       # (N, t, D)
    zeros = torch.zeros_like(trace[name][:, :, :upto])                                     # (1, H, t, K)
    edits = Recorder({name: _replace([(row, (head,)) for row, head in enumerate(heads)], zeros)})
    return _forward_from(model, stream, layer, edits, position, None)                      # (N, V)


@torch.no_grad()
def target_logits(model: nn.Module, ids, position: int, targets: Sequence[int]) -> torch.Tensor:
    """The logits (n,) of `targets` at `position` for one sentence, without any patch."""
    _decoder_only(model)
    return _forward(model, check_tokens(ids, model.cfg), Recorder(), position, [int(t) for t in targets])[0]


@dataclass(frozen=True)
class Pair:
    """A clean and a corrupted sentence of the same length, and the logit difference patching tries to restore."""
    clean: tuple[int, ...]
    corrupted: tuple[int, ...]
    position: int
    answer: int                    # the token the clean run should favour
    other: int                     # the token it is compared with
    clean_diff: float              # logit(answer) - logit(other), clean run
    corrupted_diff: float          # the same, corrupted run

    def restored(self, diffs: torch.Tensor) -> torch.Tensor:
        """The share of the logit difference restored, for patched logit differences `diffs` (any shape)."""
        return (diffs.double() - self.corrupted_diff) / (self.clean_diff - self.corrupted_diff)


def make_pair(model: nn.Module, clean, corrupted, position: int = -1, answer: int | None = None,
              other: int | None = None) -> Pair:
    """The pair to patch, checked: same number of tokens, different sentences, a difference to restore.

    By default `answer` is the clean run's top token at `position` and `other` the corrupted run's (or, when both
    runs favour the same token, the clean run's second)."""
    _decoder_only(model)
    clean, corrupted = check_tokens(clean, model.cfg, "clean sentence"), check_tokens(corrupted, model.cfg,
                                                                                       "corrupted sentence")
    if clean.shape != corrupted.shape:
        raise ValueError(f"the clean sentence has {clean.shape[1]} tokens and the corrupted one {corrupted.shape[1]}: "
                         "patching puts values back position by position, so both need the same number of tokens")
    if torch.equal(clean, corrupted):
        raise NothingToRestore("the two sentences are the same: the runs are identical, so there is no difference "
                               "for a patch to restore")
    T = clean.shape[1]
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside the sentences: they have {T} tokens (0 to {T - 1})")
    position %= T
    V = model.cfg.vocab_size
    for what, token in (("answer", answer), ("other", other)):
        if token is not None and not 0 <= int(token) < V:
            raise ValueError(f"the {what} token must be an id between 0 and {V - 1}; got {token}")
    every = list(range(V)) if answer is None or other is None else [int(answer), int(other)]
    clean_logits = target_logits(model, clean, position, every)
    corrupted_logits = target_logits(model, corrupted, position, every)
    if answer is None or other is None:
        ranked = clean_logits.argsort(descending=True).tolist()
        answer = ranked[0] if answer is None else int(answer)
        if other is None:
            other = int(corrupted_logits.argmax())
            if other == answer:
                other = next(t for t in ranked if t != answer)
    answer, other = int(answer), int(other)
    if answer == other:
        raise NothingToRestore("the answer and the token it is compared with are the same token: their logit "
                               "difference is always 0, so there is nothing to restore")
    pick = (lambda logits: float(logits[answer] - logits[other])) if len(every) == V else \
        (lambda logits: float(logits[0] - logits[1]))
    clean_diff, corrupted_diff = pick(clean_logits), pick(corrupted_logits)
    if abs(clean_diff - corrupted_diff) < TINY:
        raise NothingToRestore(f"both sentences give the same logit difference ({clean_diff:+.4f}) between the two "
                               "tokens, so there is nothing for a patch to restore")
    return Pair(tuple(clean[0].tolist()), tuple(corrupted[0].tolist()), position, answer, other, clean_diff,
                corrupted_diff)


def clean_values(model: nn.Module, pair: Pair, names: Sequence[str]) -> Trace:
    """The clean run's values of `names` (only those are kept)."""
    return model.run(list(pair.clean), names=names)


def _grid(model: nn.Module, pair: Pair, patches: list[Patch], shape: tuple[int, int], batch: int,
          progress: Progress | None) -> torch.Tensor:
    clean = clean_values(model, pair, sorted({p.name for p in patches}))
    logits = run_patched(model, list(pair.corrupted), clean, patches, pair.position, [pair.answer, pair.other],
                         batch, progress)                                                   # (N, 2)
    return pair.restored(logits[:, 0] - logits[:, 1]).reshape(shape)


def resid_pre_grid(model: nn.Module, pair: Pair, batch: int | None = None,
                   progress: Progress | None = None) -> torch.Tensor:
    """(L, T): the share restored by putting back the clean stream entering block l at position t. By default one
    forward pass per layer (all its positions in one batch)."""
    L, T = model.cfg.n_layers, len(pair.clean)
    patches = [Patch(f"blocks.{layer}.resid_pre", (t,)) for layer in range(L) for t in range(T)]
    return _grid(model, pair, patches, (L, T), batch or T, progress)


def head_out_grid(model: nn.Module, pair: Pair, batch: int | None = None,
                  progress: Progress | None = None) -> torch.Tensor:
    """(L, H): the share restored by putting back head h of block l's output at every position at once (its mixed
    values z, which W_O turns into the output). By default one forward pass per layer."""
    L, H = model.cfg.n_layers, model.cfg.n_heads
    patches = [Patch(f"blocks.{layer}.attn.z", (h,)) for layer in range(L) for h in range(H)]
    return _grid(model, pair, patches, (L, H), batch or H, progress)


# --- attribution patching: every patch of a grid estimated from one forward and one backward pass ---------------

def corrupted_gradients(model: nn.Module, pair: Pair, names: Sequence[str]) -> tuple[dict, dict]:
    """The corrupted run's values of `names` and the gradient of its logit difference with respect to each (one
    forward pass, one backward pass). Values are held by an edit that returns them unchanged; the gradients are
    taken with torch.autograd.grad, which never writes into the shared model's parameters' .grad."""
    _decoder_only(model)
    held: dict[str, torch.Tensor] = {}

    def hold(name: str):
        def edit(x: torch.Tensor) -> torch.Tensor:
            held[name] = x
            return x
        return edit
    tokens = check_tokens(list(pair.corrupted), model.cfg)
    with torch.enable_grad():
        logits = _forward(model, tokens, Recorder({n: hold(n) for n in names}), pair.position,
                          [pair.answer, pair.other])                                         # (1, 2)
        grads = torch.autograd.grad(logits[0, 0] - logits[0, 1], [held[n] for n in names])
    return {n: held[n].detach() for n in names}, {n: g.detach() for n, g in zip(names, grads)}


def _estimate(model: nn.Module, pair: Pair, names: list[str], reduce) -> torch.Tensor:
    clean = clean_values(model, pair, names)
    corrupted, grads = corrupted_gradients(model, pair, names)
    gap = pair.clean_diff - pair.corrupted_diff
    rows = [reduce((clean[n][0] - corrupted[n][0]).double() * grads[n][0].double()) for n in names]
    return torch.stack(rows) / gap


def resid_pre_estimate(model: nn.Module, pair: Pair) -> torch.Tensor:
    """(L, T): attribution patching's estimate of `resid_pre_grid`, (clean - corrupted) . gradient at each cell,
    as a share of the gap (Nanda 2023; Syed et al. 2023). Exact where the model is linear in that value."""
    names = [f"blocks.{i}.resid_pre" for i in range(model.cfg.n_layers)]
    return _estimate(model, pair, names, lambda x: x.sum(-1))                               # each (T, D) -> (T,)


def head_out_estimate(model: nn.Module, pair: Pair) -> torch.Tensor:
    """(L, H): attribution patching's estimate of `head_out_grid`, from each head's mixed values z."""
    names = [f"blocks.{i}.attn.z" for i in range(model.cfg.n_layers)]
    return _estimate(model, pair, names, lambda x: x.sum((-2, -1)))                         # each (H, T, K) -> (H,)
