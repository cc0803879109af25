"""A step-wise trainer: the app calls `step(n)` a few times per screen refresh instead of a blocking loop.

Next-token prediction on a stream of token ids: each example is a random window of `max_len` tokens,
and the target at every position is the token that follows it.
"""
import math
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from .generate import exact_match
from .transformer import TransformerLM

OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("cosine", "inv_sqrt", "constant", "noam")
DIVERGED_FACTOR = 5               # a loss above this many times ln(vocabulary size) means training blew up


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 500              # the step budget; schedules decay towards it
    batch_size: int = 16
    lr: float = 3e-3              # peak learning rate, reached at the end of warmup
    optimizer: str = "adamw"      # "adamw" or "sgd" (with momentum)
    momentum: float = 0.9         # SGD only
    weight_decay: float = 0.01    # AdamW: on weight matrices and embeddings, not biases and norms (param_groups)
    warmup: int = 20              # steps of linear warmup from 0 to lr
    schedule: str = "cosine"      # after warmup: "cosine" to lr/10, "inv_sqrt" (1/sqrt(step)) or "constant";
                                  # "noam" is the 2017 paper's warmup schedule (see lr_at), lr its factor
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

    def lr_at(self, step: int, d_model: int | None = None) -> float:
        """Learning rate for optimizer step number `step` (1-based).

        "noam": lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), a linear rise for `warmup` steps, then
        1/sqrt(step) ("Attention Is All You Need", section 5.3; lr = 1 is the paper's formula)."""
        if self.schedule == "noam":
            if d_model is None:
                raise ValueError("the noam schedule needs the model's d_model")
            return self.lr * d_model ** -0.5 * min(step ** -0.5, step * max(1, self.warmup) ** -1.5)
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
    """Group parameters by layer for the gradient-flow view: embed, blocks.i, unembed (an encoder-decoder:
    encoder_embed, encoder_blocks.i, decoder_embed, decoder_blocks.i, unembed)."""
    parts = param_name.split(".")
    if parts[0] in ("blocks", "encoder_blocks", "decoder_blocks"):
        return f"{parts[0]}.{parts[1]}"
    return parts[0] if parts[0] in ("embed", "encoder_embed", "decoder_embed") else "unembed"


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's two groups, as nanoGPT's `configure_optimizers` makes them: weight decay on every
    parameter with 2 or more dimensions (the weight matrices and the embeddings), none on the 1-D ones (biases
    and the norms' gains and shifts). A tied embedding is one parameter, decayed once."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def accuracy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> float:
    """How often the top prediction is the label, over the labels that count."""
    counts = labels != ignore_index
    return float(((logits.argmax(-1) == labels) & counts).sum() / counts.sum().clamp(min=1))


class Trainer:
    """Trains `model` in place on a stream of token ids; `step(n)` advances n optimizer steps."""

    def __init__(self, model: TransformerLM, train_ids, val_ids, cfg: TrainConfig = TrainConfig()):
        self.model, self.cfg = model, cfg
        self.context = model.cfg.max_len
        self.train_ids = self._check_ids(train_ids, "training")
        self.val_ids = self._check_ids(val_ids, "validation")
        self._start()

    def _start(self) -> None:
        """The optimizer, the layer groups and the counters: everything but the data."""
        model, cfg = self.model, self.cfg
        self.rng = torch.Generator().manual_seed(cfg.seed)
        if cfg.optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr)
        else:                    # SGD's weight decay is an L2 penalty on every parameter, as torch applies it
            self.optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
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
        start, total_acc, taken, norms, losses, counted = time.perf_counter(), 0.0, 0, None, [], 0
        cfg = self.cfg
        d_model = self.model.cfg.d_model
        for i in range(n):
            lr = cfg.lr_at(self.steps_done + 1, d_model)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            inputs, y = self.batch()                                                     # ..., (B, T)
            logits = self.model(*inputs)                                                 # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), label_smoothing=cfg.label_smoothing,
                                   ignore_index=self.ignore_index)
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
            total_acc += accuracy(logits.detach(), y, self.ignore_index)
            counted += int((y != self.ignore_index).sum())
        if taken and not self.divergence and not self.weights_finite():
            self.divergence = Divergence(self.steps_done, value, "weights not finite", self.loss_limit)
        if not taken:
            return None
        if norms is None:        # diverged within the call: the last step taken's gradients (after any clipping)
            norms = self.grad_norms()
        elapsed = time.perf_counter() - start
        metrics = StepMetrics(step=self.steps_done, loss=sum(losses) / taken, accuracy=total_acc / taken,
                              lr=cfg.lr_at(self.steps_done, d_model),
                              grad_norms=norms,
                              tokens_per_s=counted / max(elapsed, 1e-9),
                              losses=losses)
        self.history.append(metrics)
        return metrics

    ignore_index = -100           # labels never ignored (next-token prediction on a stream)

    def batch(self) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """One training batch: the model's inputs and the labels (B, T)."""
        x, y = make_batch(self.train_ids, self.cfg.batch_size, self.context, self.rng)  # (B, T), (B, T)
        return (x,), y

    def gradient_flow(self) -> dict[str, tuple[float, float]]:
        """Each parameter's mean and largest absolute gradient from the last backward pass (for a bar chart)."""
        return {name: (float(p.grad.abs().mean()), float(p.grad.abs().max()))
                for name, p in self.model.named_parameters() if p.grad is not None}

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


class PairTrainer(Trainer):
    """Trains an encoder-decoder with teacher forcing on (source, target) pairs.

    `train` and `val` are (sources [N, S], targets [N, T]) of padded token ids, each target <bos> ... <eos>
    (model/tasks.py `encode_pairs` makes them). The decoder reads target[:, :-1] and learns target[:, 1:];
    padding is neither read (the model masks it) nor learned (ignore_index)."""

    def __init__(self, model, train: tuple[torch.Tensor, torch.Tensor], val: tuple[torch.Tensor, torch.Tensor],
                 cfg: TrainConfig = TrainConfig()):
        self.model, self.cfg = model, cfg
        self.context = model.cfg.max_len
        for what, (sources, targets) in (("training", train), ("validation", val)):
            if len(sources) == 0 or len(sources) != len(targets):
                raise ValueError(f"the {what} pairs must be as many sources as targets, at least one")
        self.train_pairs, self.val_pairs = train, val
        self._start()

    def _labels(self, targets: torch.Tensor) -> torch.Tensor:
        return targets[:, 1:].masked_fill(targets[:, 1:] == self.model.pad_id, self.ignore_index)  # (B, T-1)

    def batch(self) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        sources, targets = self.train_pairs
        rows = torch.randint(0, len(sources), (self.cfg.batch_size,), generator=self.rng)          # (B,)
        src, tgt = sources[rows], targets[rows]                                                 # (B, S), (B, T)
        return (src, tgt[:, :-1]), self._labels(tgt)

    @torch.no_grad()
    def evaluate(self, max_windows: int = 256) -> tuple[float, float]:
        """Teacher-forced validation (loss, token accuracy) over up to `max_windows` pairs, without dropout."""
        sources, targets = (t[:max_windows] for t in self.val_pairs)
        was_training = self.model.training
        self.model.eval()
        logits = self.model(sources, targets[:, :-1])                                           # (n, T-1, V)
        self.model.train(was_training)
        labels = self._labels(targets)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=self.ignore_index)
        return float(loss), accuracy(logits, labels, self.ignore_index)

    @torch.no_grad()
    def exact_match(self, max_pairs: int = 256) -> float:
        """The share of up to `max_pairs` validation pairs whose whole target greedy decoding writes, read from one
        teacher-forced pass (model/generate.py `exact_match`)."""
        sources, targets = (t[:max_pairs] for t in self.val_pairs)
        was_training = self.model.training
        self.model.eval()
        logits = self.model(sources, targets[:, :-1])                                           # (n, T-1, V)
        self.model.train(was_training)
        return exact_match(logits, self._labels(targets), self.ignore_index)

