"""A step-wise trainer: the app calls `step(n)` a few times per screen refresh instead of a blocking loop.

Next-token prediction on a stream of token ids: each example is a random window of `max_len` tokens,
and the target at every position is the token that follows it.
"""
import math
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from .transformer import TransformerLM

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "inv_sqrt", "constant")
DIVERGED_FACTOR = 5               # a loss above this many times ln(vocabulary size) means training blew up


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 500              # the step budget; schedules decay towards it
    batch_size: int = 16
    lr: float = 3e-3              # peak learning rate, reached at the end of warmup
    optimizer: str = "adamw"      # "adamw" or "sgd" (with momentum)
    momentum: float = 0.9         # SGD only
    weight_decay: float = 0.01
    warmup: int = 20              # steps of linear warmup from 0 to lr
    schedule: str = "cosine"      # after warmup: "cosine" to lr/10, "inv_sqrt" (1/sqrt(step)) or "constant"
    grad_clip: float = 1.0        # clip the total gradient norm to this; 0 turns clipping off
    label_smoothing: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {self.schedule!r}")
        for name in ("steps", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {getattr(self, name)!r}")
        if not 0 < self.lr <= 1:
            raise ValueError(f"the learning rate must be above 0 and at most 1, got {self.lr}")
        if self.warmup < 0 or self.grad_clip < 0 or self.weight_decay < 0:
            raise ValueError("warmup, grad_clip and weight_decay cannot be negative")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"label smoothing must be at least 0 and below 1, got {self.label_smoothing}")

    def lr_at(self, step: int) -> float:
        """Learning rate for optimizer step number `step` (1-based)."""
        if step <= self.warmup:
            return self.lr * step / self.warmup
        if self.schedule == "cosine":
            progress = min(1.0, (step - self.warmup) / max(1, self.steps - self.warmup))
            return self.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        if self.schedule == "inv_sqrt":
            return self.lr * math.sqrt(max(1, self.warmup) / step)
        return self.lr

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class StepMetrics:
    step: int                     # optimizer steps done so far
    loss: float                   # mean training loss over the steps just taken
    accuracy: float               # how often the top prediction was the real next token
    lr: float
    grad_norms: dict[str, float] = field(default_factory=dict)  # per layer, before clipping
    tokens_per_s: float = 0.0
    losses: list[float] = field(default_factory=list)            # each step's training loss, in order


@dataclass(frozen=True)
class Divergence:
    """Where and how a run blew up; the trainer stops there."""
    step: int                     # the optimizer step at which it was detected
    loss: float                   # that step's training loss (NaN or inf when the numbers overflowed)
    cause: str                    # "loss not finite", "loss exploded" or "weights not finite"
    limit: float                  # the loss counted as exploded above this (DIVERGED_FACTOR x ln V)


def make_batch(ids: torch.Tensor, batch_size: int, context: int, rng: torch.Generator):
    """Random windows of `context` tokens (B, T) and their next tokens (B, T)."""
    starts = torch.randint(0, len(ids) - context, (batch_size,), generator=rng)     # (B,)
    rows = ids[starts[:, None] + torch.arange(context + 1)]                         # (B, T+1)
    return rows[:, :-1], rows[:, 1:]


def layer_of(param_name: str) -> str:
    """Group parameters by layer for the gradient-flow view: embed, blocks.i, unembed."""
    parts = param_name.split(".")
    if parts[0] == "blocks":
        return f"blocks.{parts[1]}"
    return "embed" if parts[0] == "embed" else "unembed"


class Trainer:
    """Trains `model` in place on a stream of token ids; `step(n)` advances n optimizer steps."""

    def __init__(self, model: TransformerLM, train_ids, val_ids, cfg: TrainConfig = TrainConfig()):
        self.model, self.cfg = model, cfg
        self.context = model.cfg.max_len
        self.train_ids = self._check_ids(train_ids, "training")
        self.val_ids = self._check_ids(val_ids, "validation")
        self.rng = torch.Generator().manual_seed(cfg.seed)
        params = list(model.parameters())
        if cfg.optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        else:
            self.optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum,
                                             weight_decay=cfg.weight_decay)
        self.layers: dict[str, list[torch.nn.Parameter]] = {}
        for name, p in model.named_parameters():
            self.layers.setdefault(layer_of(name), []).append(p)
        self.steps_done = 0
        self.history: list[StepMetrics] = []
        self.divergence: Divergence | None = None
        self.loss_limit = DIVERGED_FACTOR * math.log(model.cfg.vocab_size)   # uniform guessing scores ln V
        model.train()

    def _check_ids(self, ids, what: str) -> torch.Tensor:
        ids = torch.as_tensor(ids, dtype=torch.long).flatten()
        if len(ids) <= self.context:
            raise ValueError(f"the {what} text is too short: {len(ids)} tokens, but one example needs "
                             f"{self.context + 1} (the context length plus one). Use more text or a shorter context.")
        return ids

    def step(self, n: int = 1) -> StepMetrics | None:
        """Take up to n optimizer steps; returns their mean loss and accuracy, and the last step's details.

        Stops at once if training diverges (see `divergence`): a step whose loss is not finite or above
        `loss_limit` is not taken. Weights that turned NaN or inf make the next step's loss NaN, and are
        checked once more at the end of the call. Returns None when no step was completed.
        """
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        if self.divergence:
            raise RuntimeError(f"this run diverged at step {self.divergence.step}; start a new one")
        start, total_acc, taken, norms, losses = time.perf_counter(), 0.0, 0, None, []
        cfg = self.cfg
        for i in range(n):
            lr = cfg.lr_at(self.steps_done + 1)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            x, y = make_batch(self.train_ids, cfg.batch_size, self.context, self.rng)  # (B, T), (B, T)
            logits = self.model(x)                                                       # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), label_smoothing=cfg.label_smoothing)
            value = loss.item()
            if not math.isfinite(value) or value > self.loss_limit:
                cause = "loss exploded" if math.isfinite(value) else "loss not finite"
                self.divergence = Divergence(self.steps_done + 1, value, cause, self.loss_limit)
                break
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if i == n - 1:
                norms = self.grad_norms()  # before clipping, so the gradient flow view shows the real sizes
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
            self.optimizer.step()
            self.steps_done += 1
            taken += 1
            losses.append(value)
            total_acc += (logits.detach().argmax(-1) == y).float().mean().item()
        if taken and not self.divergence and not self.weights_finite():
            self.divergence = Divergence(self.steps_done, value, "weights not finite", self.loss_limit)
        if not taken:
            return None
        if norms is None:        # diverged within the call: the last step taken's gradients (after any clipping)
            norms = self.grad_norms()
        elapsed = time.perf_counter() - start
        metrics = StepMetrics(step=self.steps_done, loss=sum(losses) / taken, accuracy=total_acc / taken,
                              lr=cfg.lr_at(self.steps_done),
                              grad_norms=norms,
                              tokens_per_s=taken * cfg.batch_size * self.context / max(elapsed, 1e-9),
                              losses=losses)
        self.history.append(metrics)
        return metrics

    def weights_finite(self) -> bool:
        """Whether every weight is a finite number (an overflowing step leaves NaN or inf behind)."""
        return all(bool(torch.isfinite(p).all()) for p in self.model.parameters())

    def grad_norms(self) -> dict[str, float]:
        """The gradient norm of each layer from the last backward pass."""
        norms = {}
        for layer, params in self.layers.items():
            grads = [p.grad for p in params if p.grad is not None]
            norms[layer] = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))) if grads else 0.0
        return norms

    @torch.no_grad()
    def evaluate(self, max_windows: int = 64) -> tuple[float, float]:
        """Validation (loss, accuracy) over up to `max_windows` non-overlapping windows, without dropout."""
        T = self.context
        n = min(max_windows, (len(self.val_ids) - 1) // T)
        rows = self.val_ids[: n * T + 1]
        x = rows[:-1].view(n, T)                                                         # (n, T)
        y = rows[1:].view(n, T)                                                          # (n, T)
        logits = self.model.predict(x)                                                   # (n, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        accuracy = (logits.argmax(-1) == y).float().mean()
        return float(loss), float(accuracy)
