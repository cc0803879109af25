"""The training lab's logic: a session's runs, trained in short ticks, with what the live views need.

Nothing here touches the bundled models: every run builds its own model. A run is advanced by
`tick()`, which trains for a bounded slice of wall time, so the page stays responsive. At most
MAX_TRAINING runs compute at once across the whole server; the others wait for a free trainer.
"""
import copy
import itertools
import math
import random
import threading
import time
from dataclasses import dataclass, field, replace

import torch

from explorer.numbers import percent
from model import corpora, tasks
from model.checkpoint import Bundle
from model.config import ACTIVATIONS, LIMITS, NORM_KINDS, NORM_POSITIONS, POS_KINDS, ModelConfig
from model.generate import generate
from model.presets import PRESETS as MODEL_PRESETS
from model.presets import SEQ2SEQ_PRESETS, Recipe, build_tokenizer, corpus_texts
from model.seeding import seeded
from model.seq2seq import EncoderDecoder, beam_search
from model.tokenizers import TOKENIZERS, Tokenizer
from model.trainer import OPTIMIZERS, SCHEDULES, PairTrainer, TrainConfig, Trainer
from model.transformer import TransformerLM, block_name

MAX_TRAINING = 2                 # trainings computing at once, server-wide
_TRAINER_SLOTS = threading.BoundedSemaphore(MAX_TRAINING)
TICK_SECONDS = 0.2               # compute per tick, at most (plus one chunk of steps)
MAX_RUNS = 4                     # runs kept per session (the oldest is dropped)
MAX_SNAPSHOTS = 30               # attention snapshots kept per run
WALL_BUDGET_S = 300              # a run stops after this much training time
TASKS = {"roses": "The roses poem", "tinytales": "Tiny tales", "digits": "Digit sorting",
         "reverse": "Digit reversal", "text": "Your own text",
         "ed_sort": "Sorting (encoder-decoder)", "ed_reverse": "Reversal (encoder-decoder)",
         "ed_translate": "English → French (encoder-decoder)"}
TASK_ABOUT = {"roses": "the roses poem", "tinytales": "tiny tales (simple English)",
              "digits": "sorting lists of digits (3 1 2 > 1 2 3)",
              "reverse": "reversing lists of digits (3 1 4 > 4 1 3)", "text": "your own text",
              "ed_sort": "sorting digits with an encoder-decoder (3 1 2 -> 1 2 3)",
              "ed_reverse": "reversing digits with an encoder-decoder (3 1 2 -> 2 1 3)",
              "ed_translate": "translating simple English into French with an encoder-decoder"}
ENCODER_DECODER_TASKS = {"ed_sort": "sort", "ed_reverse": "reverse", "ed_translate": "translate"}   # lab task -> model.tasks task
LAB_PAIRS, LAB_HELD_OUT = 5_000, 200     # an encoder-decoder run's training pairs and held-out pairs
DIGIT_LENGTHS = (3, 8)           # an encoder-decoder digit run trains on lists of 3 to 8 digits
LENGTH_LISTS = 100               # lists per length when a finished digit run is tested on every length
LENGTH_SEED = 31_337             # their seed: not the training or held-out pairs' seeds
MAX_TESTED_LENGTH = 20           # the longest list ever tested (a wide context would otherwise give 60 bars)
PACE_WINDOW = 10                 # recent ticks the time estimate reads
PAUSE_GAP_S = 5.0                # a longer gap between two ticks was a pause, not the pace
clock = time.monotonic           # wall clock of the time estimate (tests replace it)

# The lab's own upper bounds keep one step quick on a shared 2-core host; they stay within what a model may
# be at all (model.config.LIMITS).
_LAB_SIZES = dict(n_layers=(1, 4), n_heads=(1, 8), d_model=(8, 128), d_ff=(8, 512), max_len=(4, 64))
BOUNDS = {**{name: (low, min(high, LIMITS[name])) for name, (low, high) in _LAB_SIZES.items()},
          "batch_size": (1, 64), "steps": (1, 5000)}
# Every number knob's range on the lab page (a link's value outside it falls back to the preset's: explorer/lab/link.py)
RANGES = {**BOUNDS, "warmup": (0, 1000), "lr": (1e-5, 1.0), "grad_clip": (0.0, 100.0), "label_smoothing": (0.0, 0.9),
          "weight_decay": (0.0, 1.0)}
CHOICES = dict(pos=POS_KINDS, norm=NORM_KINDS, norm_position=NORM_POSITIONS,
               activation=tuple(a for a in ACTIVATIONS if a != "gelu_tanh"),      # GELU's approximation: GPT-2's
               optimizer=OPTIMIZERS, schedule=SCHEDULES, tokenizer=tuple(TOKENIZERS))
_ROSES = MODEL_PRESETS["roses"]


@dataclass(frozen=True)
class LabSetup(Recipe):
    """Everything the student chose (a Recipe, as the bundled models' presets are), and the probe."""
    task: str = _ROSES.task
    model: dict = field(default_factory=lambda: dict(_ROSES.model))
    train: TrainConfig = _ROSES.train
    tokenizer: str = _ROSES.tokenizer
    probe: str = ""              # the sentence whose attention is watched; "" picks one for the task

    def __post_init__(self):     # every switch named, so two setups compare equal when they train the same
        object.__setattr__(self, "model", {"embed_scale": False, **self.model})


WALKTHROUGH = LabSetup()         # the bundled roses model's own recipe
MEDIUM = dict(d_model=64, n_heads=4, n_layers=2, d_ff=128, max_len=32, pos="sinusoidal", norm="layer",
              norm_position="pre", activation="relu")                 # the larger presets' shape
MEDIUM_TRAIN = TrainConfig(steps=1500, batch_size=32, lr=3e-3, warmup=50)

EXPERIMENT_LONGEST = 14          # the length experiment's longest test list: its model has positions for it

PRESETS = {
    "walkthrough": ("The walkthrough's model: 2 layers, 2 heads, d_model 32, learns the roses poem in seconds.",
                    WALKTHROUGH),
    "tales": ("A small tiny-tales model: watch agreement and pronouns appear (a few minutes).",
              LabSetup(task="tinytales", model={**MEDIUM, "activation": "gelu"}, train=MEDIUM_TRAIN)),
    "sorting": ("Digit sorting with positions: the model learns to look back at the list.",
                LabSetup(task="digits", model={**MEDIUM, "pos": "learned"}, train=MEDIUM_TRAIN)),
    "reversing": ("Digit reversal with learned positions: the model learns where each digit stood "
                  "and reads the list backwards.",
                  LabSetup(task="reverse", model={**MEDIUM, "pos": "learned"}, train=MEDIUM_TRAIN)),
    "no positions": ("No positional encoding: watch it fail at reversing a list (it cannot tell which digit "
                     "came last). Compare with the 'reversing' preset.",
                     LabSetup(task="reverse", model={**MEDIUM, "pos": "none"}, train=MEDIUM_TRAIN)),
    "post-norm": ("The 2017 paper's post-norm: the same walkthrough model with the norm after each sum.",
                  LabSetup(model={**WALKTHROUGH.model, "norm_position": "post"})),
    "today's LLM": ("Today's recipe (Llama, SmolLM2) on the walkthrough's poem: rotary positions, RMSNorm, a gated "
                    "MLP (SwiGLU), 4 query heads sharing 2 key/value heads, no biases. Compare its curve with the "
                    "walkthrough preset's.",
                    LabSetup(model={**WALKTHROUGH.model, "n_heads": 4, "n_kv_heads": 2, "pos": "rope",
                                    "norm": "rms", "activation": "swiglu", "bias": False})),
    "diverging": ("Too high a learning rate: watch training blow up (SGD at learning rate 1.0, no warmup, "
                  "no gradient clipping).",
                  LabSetup(train=replace(WALKTHROUGH.train, optimizer="sgd", lr=1.0, warmup=0, grad_clip=0.0))),
    "sort (encoder-decoder)": (
        "The 2017 transformer sorts digits: an encoder reads the list, a decoder writes it sorted, with label "
        "smoothing and the warmup schedule; watch the cross-attention find the next smallest digit.",
        LabSetup(task="ed_sort", model=dict(SEQ2SEQ_PRESETS["sort"].model), train=SEQ2SEQ_PRESETS["sort"].train)),
    "sort: does it generalise to longer lists?": (
        f"Train the encoder-decoder to sort lists of {DIGIT_LENGTHS[0]} to {DIGIT_LENGTHS[1]} digits, then test "
        f"it on every length from 1 to {EXPERIMENT_LONGEST}: when the run is done, a chart shows how often it sorts "
        "each length exactly right. Did it learn to sort, or to sort the lists it saw?",
        LabSetup(task="ed_sort", model={**SEQ2SEQ_PRESETS["sort"].model,
                                        "max_len": EXPERIMENT_LONGEST + 2},          # the list, <bos> and <eos>
                 train=replace(SEQ2SEQ_PRESETS["sort"].train, steps=1000))),
    "translate (encoder-decoder)": (
        "English into French with the 2017 transformer: watch the cross-attention line up \"the red cat\" with "
        "\"le chat rouge\", word order flipped.",
        LabSetup(task="ed_translate", model=dict(SEQ2SEQ_PRESETS["translate"].model),
                 train=SEQ2SEQ_PRESETS["translate"].train)),
}

PROBES = {"roses": "roses are red violets are blue", "tinytales": "the cat sat on the mat because it was tired",
          "digits": "3 1 2 > 1 2 3", "reverse": "3 1 4 1 5 > 5 1 4 1 3", "ed_sort": "7 3 9 1 4",
          "ed_reverse": "7 3 9 1 4",
          "ed_translate": "the red cat sees a green mouse"}


def check_setup(setup: LabSetup) -> list[str]:
    """Problems with a setup, in words (empty when it can be trained)."""
    problems = []
    values = {**setup.model, "batch_size": setup.train.batch_size, "steps": setup.train.steps}
    for name, (low, high) in BOUNDS.items():
        if not low <= values[name] <= high:
            problems.append(f"{name} must be between {low} and {high} on this shared host (got {values[name]}).")
    if setup.model["d_model"] % setup.model["n_heads"]:
        problems.append(f"d_model {setup.model['d_model']} is not divisible by n_heads {setup.model['n_heads']}: "
                        "each head must get the same number of dimensions.")
    kv = setup.model.get("n_kv_heads")
    if kv is not None and setup.model["n_heads"] % kv:
        problems.append(f"n_heads {setup.model['n_heads']} is not a multiple of the preset's {kv} key/value heads: "
                        "each key/value head must serve the same number of query heads.")
    elif setup.model["pos"] == "rope" and not setup.model["d_model"] % setup.model["n_heads"] \
            and (setup.model["d_model"] // setup.model["n_heads"]) % 2:
        problems.append("Rotary positions turn pairs of dimensions: each head needs an even number of dimensions "
                        f"(d_model {setup.model['d_model']} / n_heads {setup.model['n_heads']} is odd).")
    return problems


def texts_for(setup: LabSetup, user_text: str | None = None) -> tuple[str, str]:
    """(training text, validation text) for the task; your own text is split 90% / 10%."""
    if setup.task != "text":
        return corpus_texts(setup.task)
    if not user_text:
        raise ValueError("Paste some text or upload a .txt file first.")
    text = corpora.user_text(user_text)
    cut = int(len(text) * 0.9)
    return text[:cut], text[cut:]


@dataclass
class Run:
    """One training run of this session, with everything its live views show."""
    label: str
    setup: LabSetup
    tokenizer: Tokenizer
    trainer: Trainer
    probe_ids: list[int]
    history: list[dict] = field(default_factory=list)        # one row per tick: step, loss, accuracy, lr, ...
    losses: list[tuple[int, float]] = field(default_factory=list)   # (step, training loss) for every step
    evals: list[dict] = field(default_factory=list)          # step, val_loss, val_accuracy
    samples: list[tuple[int, str]] = field(default_factory=list)
    snapshots: list[tuple[int, torch.Tensor]] = field(default_factory=list)   # step, patterns (L, H, T, T)
    status: str = "ready"                                     # ready, running, waiting, paused, done, diverged
    seconds: float = 0.0                                      # training compute time
    ticks: list[tuple[float, int]] = field(default_factory=list)   # (wall clock, steps done) after recent ticks
    probe_target: list[int] = field(default_factory=list)    # an encoder-decoder's probe: its right target
    flow: dict[str, tuple[float, float]] = field(default_factory=dict)   # parameter -> mean, max |gradient|
    training_data: str = ""                                   # what it learns from, in one sentence (its facts)
    lengths: tuple[int, int] | None = None                    # a digit task's list lengths in training
    by_length: list["LengthResult"] = field(default_factory=list)   # a finished digit run, tested on every length

    @property
    def encoder_decoder(self) -> bool:
        return isinstance(self.model, EncoderDecoder)

    @property
    def model(self) -> TransformerLM:
        return self.trainer.model

    @property
    def pair_task(self) -> str | None:
        """An encoder-decoder run's task as model.tasks names it ("sort", "reverse", "translate"), else None."""
        return ENCODER_DECODER_TASKS.get(self.setup.task)

    @property
    def tests_lengths(self) -> bool:
        """Whether the finished run is tested on every list length (an encoder-decoder digit task)."""
        return self.pair_task in ("sort", "reverse")

    @property
    def steps_done(self) -> int:
        return self.trainer.steps_done

    @property
    def divergence(self):
        """Where and how training blew up (model.trainer.Divergence), or None."""
        return self.trainer.divergence

    @property
    def finished(self) -> bool:
        return (self.steps_done >= self.setup.train.steps or self.seconds >= WALL_BUDGET_S
                or self.divergence is not None)

    @property
    def example(self) -> str:
        """A sentence the model knows every token of: the probe sentence, else the start of its training text."""
        ids = self.probe_ids
        if self.encoder_decoder:
            return self.tokenizer.decode(ids)
        if self.tokenizer.unk_id is not None and self.tokenizer.unk_id in ids:
            ids = self.trainer.train_ids[: self.model.cfg.max_len].tolist()
        return self.tokenizer.decode(ids)

    def _end_status(self) -> str:
        return "diverged" if self.divergence else "done"

    def tick(self, seconds: float = TICK_SECONDS, chunk: int = 5) -> bool:
        """Train for about `seconds` if a trainer slot is free; returns False when it had to wait.

        `seconds=0` takes exactly one chunk of steps: slow motion, to watch a fast model learn.
        Training stops at once when it diverges (status "diverged").
        """
        if self.finished:
            self.status = self._end_status()
            return True
        if not _TRAINER_SLOTS.acquire(blocking=False):
            self.status = "waiting"
            return False
        try:
            start = time.perf_counter()
            while not self.finished:
                n = min(chunk, self.setup.train.steps - self.steps_done)
                metrics = self.trainer.step(n)
                if metrics is not None:
                    first = metrics.step - len(metrics.losses) + 1
                    self.losses += [(first + i, loss) for i, loss in enumerate(metrics.losses)]
                    self.history.append(dict(
                        step=metrics.step, loss=metrics.loss, accuracy=metrics.accuracy, lr=metrics.lr,
                        tokens_per_s=metrics.tokens_per_s, **{f"grad {k}": v for k, v in metrics.grad_norms.items()}))
                if time.perf_counter() - start >= seconds:
                    break
            self.seconds += time.perf_counter() - start
            self.flow = self.trainer.gradient_flow()       # the last step's gradients, parameter by parameter
            if self.trainer.weights_finite():           # a diverged model's NaN would only fill the views with noise
                self.observe()
            if self.finished and self.publishable and self.tests_lengths and not self.by_length:
                self.by_length = exact_match_by_length(self)
        finally:
            _TRAINER_SLOTS.release()
        self.ticks = (self.ticks + [(clock(), self.steps_done)])[-PACE_WINDOW:]
        self.status = self._end_status() if self.finished else "running"
        return True

    def seconds_left(self) -> float | None:
        """Wall-clock seconds until the step budget, from the pace of recent ticks (None before two ticks).

        A tick trains for a fraction of the time between ticks (the page redraws in between), so the pace
        is measured on the wall clock, not from the training compute time. Gaps longer than PAUSE_GAP_S
        (a pause) are left out.
        """
        gaps = [(t1 - t0, s1 - s0) for (t0, s0), (t1, s1) in zip(self.ticks, self.ticks[1:]) if t1 - t0 < PAUSE_GAP_S]
        wall, steps = sum(g for g, _ in gaps), sum(n for _, n in gaps)
        if not wall or not steps:
            return None
        to_budget = (self.setup.train.steps - self.steps_done) * wall / steps
        compute_per_wall = (self.seconds / self.steps_done) * steps / wall if self.steps_done else 0
        to_time_limit = (WALL_BUDGET_S - self.seconds) / compute_per_wall if compute_per_wall else to_budget
        return max(0.0, min(to_budget, to_time_limit))

    def observe(self) -> None:
        """Validation loss, a sample generation and an attention snapshot at the current step."""
        if self.encoder_decoder:
            return self._observe_encoder_decoder()
        val_loss, val_acc = self.trainer.evaluate(max_windows=16)
        self.evals.append(dict(step=self.steps_done, val_loss=val_loss, val_accuracy=val_acc))
        prompt = self.probe_ids[: max(1, min(3, len(self.probe_ids)))]
        out = generate(self.model, prompt, n_new=min(12, self.model.cfg.max_len), strategy="greedy")
        self.samples.append((self.steps_done, self.tokenizer.decode(prompt + out.tokens)))
        self.samples = self.samples[-20:]
        self.snapshot()

    def _observe_encoder_decoder(self) -> None:
        """Held-out loss, token accuracy and exact match; the probe decoded greedily and by beam search."""
        val_loss, val_acc = self.trainer.evaluate()
        self.evals.append(dict(step=self.steps_done, val_loss=val_loss, val_accuracy=val_acc,
                               exact_match=self.trainer.exact_match()))
        self.model.eval()
        decode = self.tokenizer.decode
        greedy_out = decode(beam_search(self.model, self.probe_ids, 1).tokens)
        beam_out = decode(beam_search(self.model, self.probe_ids, 3).tokens)
        self.model.train()
        self.samples = (self.samples + [(self.steps_done, f"{greedy_out}   (beam 3: {beam_out})")])[-20:]
        self.snapshot()

    def snapshot(self) -> None:
        if self.encoder_decoder:                   # the probe's cross-attention: (L, H, T, S)
            trace = self.model.run(self.probe_ids, [self.model.bos_id, *self.probe_target])
            patterns = torch.stack([trace[f"decoder.blocks.{i}.cross_attn.pattern"][0]
                                    for i in range(self.model.cfg.n_layers)])
            self._keep_snapshot(patterns)
            return
        layers = range(self.model.cfg.n_layers)
        trace = self.model.run(self.probe_ids, names=[block_name("pattern", i) for i in layers])   # patterns only
        self._keep_snapshot(torch.stack([trace["pattern", i][0] for i in layers]))   # (L, H, T, T)

    def _keep_snapshot(self, patterns: torch.Tensor) -> None:
        self.snapshots.append((self.steps_done, patterns))
        if len(self.snapshots) > MAX_SNAPSHOTS:      # thin out evenly, keeping the first and the latest
            self.snapshots = self.snapshots[::2] + ([self.snapshots[-1]] if len(self.snapshots) % 2 == 0 else [])

    @property
    def publishable(self) -> bool:
        """Whether the model may go to the model picker or a download: it did not diverge, every weight is finite."""
        return self.divergence is None and self.trainer.weights_finite()

    def bundle(self) -> Bundle:
        """A frozen copy of the model as it is now, for the walk-through pages and for download."""
        if not self.publishable:
            raise ValueError(f"{self.label} has no finite trained model to publish"
                             + (f": training diverged at step {self.divergence.step}." if self.divergence else "."))
        model = copy.deepcopy(self.model).eval()
        # What it learned (model/scope.py reads training_data, task and lengths): an encoder-decoder's task as
        # model.tasks names it, a language model's text as its corpus (as model/train.py writes them).
        learned = {"task": self.pair_task} if self.encoder_decoder else {"corpus": self.setup.task}
        if self.lengths:
            learned["lengths"] = list(self.lengths)
        facts = {"trained_in": "training lab", "training_data": self.training_data, **learned,
                 "steps": self.steps_done, "train": self.setup.train.to_dict(), "example": self.example,
                 "val_loss": round(self.evals[-1]["val_loss"], 4) if self.evals else None}
        return Bundle(model, self.tokenizer, facts)


def new_run(setup: LabSetup, label: str, user_text: str | None = None, seed: int = 0) -> Run:
    """Build the data, tokenizer and a fresh model for `setup`; ValueError says what does not fit."""
    problems = check_setup(setup)
    if problems:
        raise ValueError(" ".join(problems))
    if setup.task in ENCODER_DECODER_TASKS:
        return _new_encoder_decoder_run(setup, label, seed)
    train_text, val_text = texts_for(setup, user_text)
    tokenizer = build_tokenizer(setup.tokenizer, train_text, setup.task)
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, **setup.model)
    train_ids, val_ids = tokenizer.encode(train_text), tokenizer.encode(val_text)
    context = cfg.max_len
    if len(val_ids) <= context:     # short texts: validate on the training text rather than refuse
        val_ids = train_ids
    trainer = Trainer(seeded(seed, TransformerLM, cfg), train_ids, val_ids, replace(setup.train, seed=seed))
    probe_text = setup.probe or PROBES.get(setup.task) or train_text[:200]
    probe_ids = tokenizer.encode(probe_text)[:context] or train_ids[:context]
    lengths = digit_lengths(train_text) if setup.task in ("digits", "reverse") else None
    run = Run(label=label, setup=setup, tokenizer=tokenizer, trainer=trainer, probe_ids=probe_ids,
              training_data=text_training_data(setup.task, train_text, val_text), lengths=lengths)
    run.snapshot()
    return run


def digit_lengths(text: str) -> tuple[int, int]:
    """(shortest, longest) list in a digit corpus of examples "3 1 2 > 1 2 3 ."."""
    sizes = [len(example.split(">")[0].split()) for example in text.split(".") if ">" in example]
    return min(sizes), max(sizes)


def text_training_data(task: str, train_text: str, val_text: str) -> str:
    """What a language model of the lab learns from, in one sentence counted from its training text."""
    if task == "roses":
        return f"the roses poem (“{corpora.ROSES}”), {train_text.count(corpora.ROSES):,} copies"
    if task == "tinytales":
        return (f"{train_text.count(' .'):,} sentences of tiny tales: simple English stories made from a small "
                "grammar (animals, places, names and a few verbs)")
    if task in ("digits", "reverse"):
        lo, hi = digit_lengths(train_text)
        done, example = ("sorted", "3 1 2 > 1 2 3 .") if task == "digits" else ("reversed", "3 1 4 > 4 1 3 .")
        return (f"{train_text.count('>'):,} lists of {lo} to {hi} digits, each followed by the same digits {done} "
                f"(“{example}”)")
    return (f"your own text ({len(train_text.split()):,} words, and {len(val_text.split()):,} more kept aside to "
            "check it)")


def _new_encoder_decoder_run(setup: LabSetup, label: str, seed: int) -> Run:
    """An encoder-decoder on source -> target pairs (model/tasks.py), trained with teacher forcing."""
    task = ENCODER_DECODER_TASKS[setup.task]
    tokenizer = tasks.tokenizer_for(task)
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, **setup.model)
    if task == "translate":
        train_pairs = tasks.pairs(task, LAB_PAIRS, seed)
        held_out = tasks.held_out(task, LAB_HELD_OUT, train_pairs, seed + 1_000)
        lengths = None
        data = tasks.training_data(task, len(train_pairs))
    else:
        train_pairs = digit_pairs(task, LAB_PAIRS, seed, DIGIT_LENGTHS)
        held_out = unseen_pairs(digit_pairs(task, 4 * LAB_HELD_OUT, seed + 1_000, DIGIT_LENGTHS), train_pairs,
                                LAB_HELD_OUT)
        sizes = [len(source.split()) for source, _ in train_pairs]
        lengths = (min(sizes), max(sizes))
        data = tasks.training_data(task, len(train_pairs), lengths)
    trainer = PairTrainer(seeded(seed, EncoderDecoder, cfg), tasks.encode_pairs(tokenizer, train_pairs, cfg.max_len),
                          tasks.encode_pairs(tokenizer, held_out, cfg.max_len), replace(setup.train, seed=seed))
    probe = setup.probe if tasks.answer(task, setup.probe or "") else PROBES[setup.task]
    probe_ids = tokenizer.encode(probe)[:cfg.max_len]
    target = tokenizer.encode(tasks.answer(task, probe))[:cfg.max_len - 1]
    run = Run(label=label, setup=setup, tokenizer=tokenizer, trainer=trainer, probe_ids=probe_ids,
              probe_target=target, training_data=data, lengths=lengths)
    run.snapshot()
    return run


def digit_pairs(task: str, n: int, seed: int, lengths: tuple[int, int]) -> list[tuple[str, str]]:
    """`n` (source, target) pairs of a digit task with lists of lengths[0] to lengths[1] digits (as tasks.pairs,
    with the lengths said here rather than left to its default)."""
    rng = random.Random(f"{task}-{seed}")
    return [tasks.digit_pair(rng, task, lengths) for _ in range(n)]


def unseen_pairs(candidates: list[tuple[str, str]], seen: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """The first `n` candidates whose source is new: not in `seen`, nor earlier among the candidates."""
    known, out = {source for source, _ in seen}, []
    for source, target in candidates:
        if source not in known and len(out) < n:
            known.add(source)
            out.append((source, target))
    return out


# --- does it generalise to other lengths? ----------------------------------------------------------------

@dataclass(frozen=True)
class LengthResult:
    """How many test lists of one length the model turned exactly into the right answer."""
    length: int                  # digits in each list
    right: int                   # lists it got exactly right (greedy decoding)
    lists: int                   # lists tested

    @property
    def exact(self) -> float:
        return self.right / self.lists

    @property
    def percent(self) -> str:
        """As a percent, never 0% or 100% unless it is exactly that."""
        return percent(self.right / self.lists, digits=2)


def lengths_to_test(run: Run) -> range:
    """Every list length the model can be asked about: its positions hold the list, and <bos> and <eos> more."""
    return range(1, min(MAX_TESTED_LENGTH, run.model.cfg.max_len - 2) + 1)


def training_sources(run: Run) -> set[str]:
    """The source texts an encoder-decoder run trains on."""
    pad = run.model.pad_id
    return {run.tokenizer.decode([i for i in row.tolist() if i != pad]) for row in run.trainer.train_pairs[0]}


def length_test_pairs(run: Run, length: int, seen: set[str] | None = None,
                      n: int = LENGTH_LISTS) -> list[tuple[str, str]]:
    """Up to `n` different lists of `length` digits that are not among the run's training lists (`seen`), with
    their right answers; all of them when fewer exist (there are only 10 lists of one digit)."""
    task, seen = run.pair_task, training_sources(run) if seen is None else seen
    rng = random.Random(f"lengths-{task}-{length}-{LENGTH_SEED}")
    if 10 ** length <= 100 * n:                               # few lists of this length: pick among all of them
        every = [" ".join(digits) for digits in itertools.product(tasks.DIGITS, repeat=length)]
        unseen = [source for source in every if source not in seen]
        sources = rng.sample(unseen, min(n, len(unseen)))
    else:
        sources = []
        while len(sources) < n:
            source, _ = tasks.digit_pair(rng, task, (length, length))
            if source not in seen and source not in sources:
                sources.append(source)
    return [(source, tasks.answer(task, source)) for source in sources]


@torch.no_grad()
def exact_match_by_length(run: Run) -> list[LengthResult]:
    """Exact match of the run's model on new lists of every length it can read.

    One teacher-forced pass per length: when every step's top prediction is the right token, greedy decoding
    writes exactly the answer, and otherwise it does not: what model.seq2seq.exact_match counts by decoding each
    list, in one batch instead (tests/test_lab_lengths.py checks the two agree)."""
    model, results, seen = run.model, [], training_sources(run)
    was_training = model.training
    model.eval()
    for length in lengths_to_test(run):
        pairs = length_test_pairs(run, length, seen)
        sources, targets = tasks.encode_pairs(run.tokenizer, pairs, model.cfg.max_len)    # (N, n), (N, n + 2)
        guesses = model(sources, targets[:, :-1]).argmax(-1)                              # (N, n + 1)
        right = int((guesses == targets[:, 1:]).all(-1).sum())
        results.append(LengthResult(length, right, len(pairs)))
    model.train(was_training)
    return results


def length_caption(run: Run) -> str:
    """How the length test was made, in words counted from its results."""
    most = max(r.lists for r in run.by_length)
    fewer = [f"{r.lists} for {r.length} digit{'s' * (r.length > 1)}" for r in run.by_length if r.lists < most]
    done = "sorted" if run.pair_task == "sort" else "reversed"
    return (f"Each bar: {most} lists of that length the model never saw in training"
            + (f" ({', '.join(fewer)}: all there are)" if fewer else "")
            + f", decoded greedily; a list counts when every digit and the end come out {done} exactly right. "
            "The model learned from the shaded lengths only: nothing in its training says what to do with other "
            "lengths, and it answers anyway.")


def length_sentence(results: list[LengthResult], trained: tuple[int, int]) -> str:
    """What the length test found, in one sentence whose every number is counted from `results`:
    "Trained on lists of 3 to 8 digits: 97% exact at those lengths; longer: 62% at 9, 0% from 10 to 14 digits; ..."."""
    lo, hi = trained
    inside = [r for r in results if lo <= r.length <= hi]
    longer = [r for r in results if r.length > hi]
    shorter = [r for r in results if r.length < lo]
    parts = [f"Trained on lists of {lo} to {hi} digits: "
             f"{percent(sum(r.right for r in inside) / sum(r.lists for r in inside), digits=2)} exact at those lengths"]
    if longer:
        cut = len(longer)
        while cut and longer[cut - 1].right == 0:          # a run of nothing right at the end, in one phrase
            cut -= 1
        words = [f"{r.percent} at {r.length}" for r in longer[:cut]]
        zeros = longer[cut:]
        if len(zeros) > 1:
            words.append(f"0% from {zeros[0].length} to {zeros[-1].length} digits")
        elif zeros:
            words.append(f"0% at {zeros[0].length}")
        parts.append("longer lists: " + ", ".join(words))
    if shorter:
        parts.append("shorter lists: " + ", ".join(f"{r.percent} at {r.length}" for r in shorter))
    return "; ".join(parts) + "."


# Learning rates above these are very high for the optimizer (the presets train at 0.003-0.01 with AdamW;
# SGD with momentum learns the roses poem at 0.3-0.5 and blows up at 1.0).
HIGH_LR = {"adamw": 0.05, "sgd": 0.5}
OPTIMIZER_NAMES = {"adamw": "AdamW", "sgd": "SGD"}


def divergence_explanation(run: Run) -> str:
    """What happened to a diverged run, why, and what to try, in words naming this run's own settings."""
    where, train = run.divergence, run.setup.train
    vocab = run.model.cfg.vocab_size
    guess = math.log(vocab)
    if where.cause == "loss exploded":
        what = (f"the loss jumped to {where.loss:,.1f}, more than {where.limit / guess:.0f} times the "
                f"{guess:.2f} a model scores by guessing evenly among its {vocab} tokens")
    elif where.cause == "loss not finite":
        what = "the loss overflowed to NaN (not a number): the model's numbers grew past what a computer can hold"
    else:
        what = "some weights overflowed to NaN or infinity"
    causes, tries = [], []
    optimizer = OPTIMIZER_NAMES[train.optimizer]
    if train.lr > HIGH_LR[train.optimizer]:
        causes.append(f"learning rate {train.lr} is very high for {optimizer}")
        tries.append(f"a learning rate of {train.lr / 10:g}")
    if train.warmup == 0:
        causes.append("no warmup: the full learning rate hit the random starting weights from step 1")
        tries.append("20 warmup steps")
    if train.grad_clip == 0:
        causes.append("no gradient clipping: nothing capped a step when the gradient grew large")
        tries.append("gradient clipping at 1.0")
    if not causes:
        causes.append(f"learning rate {train.lr} with {optimizer} is too high for this model")
        tries.append(f"a learning rate of {train.lr / 10:g}")
    return (f"**Training diverged at step {where.step}**: {what}. The run stopped there; the chart shows the "
            "loss up to that step.\n\n"
            "Why: each step moved the weights too far. They overshot the low point of the loss, landed where "
            "the loss is higher and the slope steeper, so the next step overshot even more, until the numbers "
            f"blew up. In this run: {'; '.join(causes)}.\n\n"
            f"Try {_and_list(tries)}, then press Start. This model is not added to the model picker "
            "and cannot be downloaded.")


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def setting_words(setup: LabSetup, base: LabSetup | None = None) -> list[str]:
    """Short words for the settings of `setup` (only those that differ from `base`, if given)."""
    train, other = setup.train.to_dict(), (base.train.to_dict() if base else {})
    model, other_model = setup.model, (base.model if base else {})
    words = []
    if base is None or setup.task != base.task:
        words.append(TASKS.get(setup.task, setup.task).lower())
    if base is None or setup.tokenizer != base.tokenizer:
        words.append(f"{setup.tokenizer} tokens")
    names = {"d_model": "d_model", "n_heads": "heads", "n_layers": "layers", "d_ff": "d_ff", "max_len": "context",
             "norm_position": "norm", "activation": "", "norm": "norm:"}
    for key, value in model.items():
        if other_model.get(key) != value:
            if key == "pos":
                words.append("no positions" if value == "none" else f"{value} positions")
            elif key in ("n_layers", "n_heads"):
                words.append(f"{value} {names[key]}")
            elif key == "norm_position":
                words.append(f"{value}-norm")
            elif key == "norm":
                words.append("no norm" if value == "none" else f"{value} norm")
            elif key == "embed_scale":
                words.append("embeddings scaled by √d_model" if value else "embeddings not scaled")
            else:
                words.append(f"{names.get(key, key)} {value}".strip())
    short = {"lr": "lr", "batch_size": "batch", "warmup": "warmup", "steps": "steps", "grad_clip": "clip",
             "label_smoothing": "smoothing", "weight_decay": "decay", "momentum": "momentum", "seed": "seed"}
    for key, value in train.items():
        if other.get(key) != value:
            if key == "optimizer":
                words.append(OPTIMIZER_NAMES[value])
            elif key == "schedule":
                words.append(f"{value} schedule")
            elif key == "grad_clip" and not value:
                words.append("no clipping")
            elif key == "warmup" and not value:
                words.append("no warmup")
            else:
                words.append(f"{short[key]} {value:g}" if isinstance(value, float) else f"{short[key]} {value}")
    return words


def describe_difference(setup: LabSetup, other: LabSetup) -> str:
    """What differs between two setups, in a few words, to label overlaid loss curves."""
    return ", ".join(setting_words(setup, other)) or "same settings"


def preset_hint(setup: LabSetup, preset: str) -> str:
    """What pressing Start will train: the preset's description, or "Custom: ..." when the knobs differ."""
    about, base = PRESETS[preset]
    if setup == base:
        return about
    shape = f"{setup.model['n_layers']} layers, {setup.model['n_heads']} heads, d_model {setup.model['d_model']}"
    return (f"Custom: trains a model of {shape} on {TASK_ABOUT.get(setup.task, setup.task)}. "
            f"Changed from the '{preset}' preset: {describe_difference(setup, base)}.")
