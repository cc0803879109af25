"""Every target of the benchmark, in one table: what is measured, the figure it must stay under (or above).

An area (bench/<area>.py) records a figure under a target's key; `python -m bench` compares them at the end.
The targets come from the issues that asked for each speed; the figures measured live in docs/figures.md and
in the benchmark's own output, never here.
"""
from dataclasses import dataclass

from .cgroup import CLOUD_MEMORY_BYTES

AT_MOST, AT_LEAST = "at most", "at least"
CLOUD_MEMORY_MB = CLOUD_MEMORY_BYTES / 2**20     # Community Cloud's largest memory, 2.7 GB, in the MB (MiB) we measure


@dataclass(frozen=True)
class Target:
    key: str            # "<area>.<name>": the area (bench/<area>.py) that measures it
    measure: str        # what is measured, in words
    limit: float
    direction: str      # AT_MOST or AT_LEAST
    unit: str = ""      # "ms", "s", "MB", "x", ...

    @property
    def area(self) -> str:
        return self.key.split(".", 1)[0]

    def met(self, figure: float) -> bool:
        return figure <= self.limit if self.direction == AT_MOST else figure >= self.limit

    def describe(self) -> str:
        return f"{self.direction} {format_figure(self.limit, self.unit)}"


def format_figure(value: float, unit: str = "") -> str:
    """A figure as the tables print it: 0.58 ms, 1.19x, 1,264 MB, 0."""
    if value != value or value in (float("inf"), float("-inf")):         # NaN or infinite: never reached
        return "never"
    digits = 0 if abs(value) >= 100 else 2 if abs(value) < 10 else 1
    text = f"{value:,.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + unit if unit == "x" else f"{text} {unit}".rstrip()


TARGETS = [
    # model: the model core (bench/model.py)
    Target("model.trace_ratio", "model.run() with the full trace vs plain forward (tinytales, 32 tokens)",
           1.5, AT_MOST, "x"),
    Target("model.trainer_ratio", "Trainer.step() vs a minimal PyTorch loop (tinytales, same model and batch)",
           0.9, AT_LEAST, "x"),
    Target("model.roses_s", "roses preset to validation loss 0.05", 20, AT_MOST, "s"),
    Target("model.pair_trainer_ratio", "PairTrainer.step vs a plain teacher-forcing loop (sort, same batch)",
           0.9, AT_LEAST, "x"),
    Target("model.attribution_ms", "direct logit attribution from the trace, tinytales, 32 tokens, 1 thread", 50,
           AT_MOST, "ms"),
    Target("model.patching_grid_s", "residual patching grid (2 layers x 32 positions), tinytales, 1 thread", 0.5,
           AT_MOST, "s"),
    # issue 32: today's models (bench/model.py)
    Target("model.smollm2_trace_ratio", "model.run() with the full trace vs plain forward, SmolLM2's shape, 32 tokens, "
           "1 thread", 1.15, AT_MOST, "x"),
    Target("model.cache_token_ratio", "a new token's time with the KV cache, token 256 vs token 16, GPT-2's shape, "
           "1 thread", 1.5, AT_MOST, "x"),
    # pages: server-side script runs in AppTest (bench/pages.py)
    Target("pages.slowest_ms", "slowest page's script run (tinytales, 11 words; translate on encoder-decoder)",
           60, AT_MOST, "ms"),
    Target("pages.slider_model_runs", "model runs when the temperature slider moves (prediction page)",
           0, AT_MOST),
    Target("pages.encoder_decoder_ms", "encoder-decoder page's script run (slower of translate and sort)",
           150, AT_MOST, "ms"),
    # lab: the training lab (bench/lab.py)
    Target("lab.tick_ratio", "training lab ticks vs a plain PyTorch loop (same model)", 0.8, AT_LEAST, "x"),
    Target("lab.roses_s", "roses with the lab's defaults to validation loss 0.05", 30, AT_MOST, "s"),
    Target("lab.sort_s", "the lab's sort run to 99% held-out exact match", 60, AT_MOST, "s"),
    # load: a real server, 10 visitors in Chromium (bench/load.py)
    Target("load.p95_s", "typing to the page redrawn, p95, 10 sessions, nobody training", 0.5, AT_MOST, "s"),
    Target("load.p95_training_s", "typing to the page redrawn, p95, 10 sessions, 2 training", 0.8, AT_MOST, "s"),
    # memory: a real server's resident memory (bench/memory.py)
    Target("memory.training_mb", "server memory, 10 visitors exploring and 2 training", 1500, AT_MOST, "MB"),
    # browser: what Chromium does per update (bench/browser.py)
    Target("browser.charts_built", "charts built from scratch per chart shown, per update (worst page)",
           1.2, AT_MOST),
    Target("browser.first_chart_s", "a first visit (empty browser cache) to every chart drawn, attention page",
           5, AT_MOST, "s"),
    Target("browser.plotly_first_mb", "plotly.js on the wire, first visit (1.5 MB uncompressed)", 0.6, AT_MOST,
           "MB"),
    Target("browser.plotly_later_mb", "plotly.js on the wire, a later visit (from the browser's cache)", 0.01,
           AT_MOST, "MB"),
    Target("browser.training_cores", "a training tab's browser, all its processes, 4-19 s after Start (tiny tales)",
           0.3, AT_MOST, "cores"),
    # gpt2: GPT-2 small's shape with random weights from a disk cache (bench/gpt2.py)
    Target("gpt2.trace_ms", "GPT-2 full trace, 32 tokens, 1 thread", 250, AT_MOST, "ms"),
    Target("gpt2.trace_ratio", "GPT-2 full trace vs plain forward", 1.15, AT_MOST, "x"),
    Target("gpt2.attribution_s", "GPT-2 direct logit attribution from the trace, 16 tokens, 1 thread", 0.5, AT_MOST,
           "s"),
    Target("gpt2.patching_grid_s", "GPT-2 residual patching grid (12 layers x 16 positions), 1 thread", 30, AT_MOST,
           "s"),
    Target("gpt2.first_page_s", "first page with GPT-2 picked (load + first trace, AppTest)", 10, AT_MOST, "s"),
    Target("gpt2.slowest_page_ms", "slowest page's script run with GPT-2's trace cached", 150, AT_MOST, "ms"),
    Target("gpt2.server_first_page_s", "picking GPT-2 to its first page drawn in Chromium", 10, AT_MOST, "s"),
    Target("gpt2.server_mb", "server memory with 10 visitors exploring GPT-2", 1300, AT_MOST, "MB"),
    Target("gpt2.loader_at_cold_start", "GPT-2's loader or transformers imported before anyone picks GPT-2",
           0, AT_MOST),
    # smollm2: SmolLM2-135M's shape with random weights from a disk cache (bench/smollm2.py)
    Target("smollm2.first_page_s", "first page with SmolLM2 picked (load + first trace, AppTest)", 10, AT_MOST, "s"),
    Target("smollm2.slowest_page_ms", "slowest page's script run with SmolLM2's trace cached", 150, AT_MOST, "ms"),
    Target("smollm2.server_mb", "server memory with 10 visitors exploring SmolLM2", 1300, AT_MOST, "MB"),
    Target("smollm2.with_gpt2_mb", "server memory with 10 visitors on SmolLM2 and 10 more on GPT-2 small", 2700,
           AT_MOST, "MB"),
    Target("smollm2.with_class_mb", "server memory with those 20 visitors and a class of 30 led onto a GPT-2 step",
           2700, AT_MOST, "MB"),
    # issue 24: a live class on one server
    Target("classroom.follow_p95_s", "60 students following the teacher's Next (poll + their run), p95", 2, AT_MOST, "s"),
    Target("classroom.answers_counted", "60 answers sent together, all counted exactly once (1: yes)", 1, AT_LEAST),
    Target("classroom.memory_mb", "server memory with a class of 60 students (tinytales, AppTest in one process)", 1500,
           AT_MOST, "MB"),
    Target("classroom.follow_full_runs", "full script runs a follow costs (a student's poll after the teacher moved)", 1,
           AT_MOST),
    Target("classroom.idle_poll_ms", "a student's idle poll (the teacher did not move), CPU, median", 5, AT_MOST, "ms"),
    Target("classroom.gpt2_follow_p95_s", "30 students following the teacher onto a GPT-2 small step, p95", 1.5,
           AT_MOST, "s"),
    Target("classroom.gpt2_traces_per_sentence", "traces computed per distinct sentence while 30 students follow "
           "onto a GPT-2 step", 1, AT_MOST),
    Target("classroom.gpt2_memory_mb", "server memory with 60 students on a GPT-2 small step", 1500, AT_MOST, "MB"),
    Target("classroom.replica_follow_p95_s", "two replicas sharing a class through Redis, 30 students each: follow "
           "p95 (slower replica)", 2, AT_MOST, "s"),
    Target("classroom.replica_answers_counted", "two replicas: 60 students answering twice at once, each counted "
           "exactly once (1: yes)", 1, AT_LEAST),
    Target("classroom.replica_memory_mb", "two replicas: memory of the larger replica (30 students, tinytales)", 1500,
           AT_MOST, "MB"),
    # issue 31: questions of every kind, answered by the model, and what the class got right (bench/classroom.py)
    Target("classroom.question_ms", "a step's question answered from its trace, slowest kind, tinytales (the lecture's "
           "steps), 1 thread", 50, AT_MOST, "ms"),
    Target("classroom.gpt2_question_ms", "a step's question answered from its trace, slowest kind, GPT-2 small, 1 "
           "thread", 1000, AT_MOST, "ms"),
    Target("classroom.question_computations", "times the lesson's question is answered from the model in a class of "
           "60 who follow onto its step, the teacher's summary included (cached once per server)", 1, AT_MOST),
    Target("classroom.lecture_summary_exact", "60 students answering 8 questions: every answer counted once, the "
           "summary and the CSV identical to the answers sent (1: yes)", 1, AT_LEAST),
    # issue 29: the server as Community Cloud runs it, in a cgroup (bench/cloud.py)
    Target("cloud.follow_p95_s", "30 students following the teacher's Next (tinytales), server under a 1-core CPU "
           "quota and 2.7 GB, p95", 2, AT_MOST, "s"),
    Target("cloud.typing_p95_training_s", "typing to the page redrawn, p95, 10 sessions, 2 training, server under a "
           "1-core CPU quota", 1, AT_MOST, "s"),
    Target("cloud.gpt2_class_memory_mb", "server memory, GPT-2 loaded and a class of 30 on its step, under a 2.7 GB "
           "limit (larger of the quotas; a server killed counts as never)", CLOUD_MEMORY_MB, AT_MOST, "MB"),
    # issue 41: features, dictionaries and steering; GPT-2 small's shape and a dictionary of its published size with
    # random weights (bench/features.py)
    Target("features.sae_train_s", "tinytales: an SAE of 8x its width to explained variance 0.9 with L0 <= 16 on "
           "held-out text, 1 thread (slower of the top-k and L1 presets)", 60, AT_MOST, "s"),
    Target("features.sentence_ms", "GPT-2 small + one SAE layer (24,576 features): the features of a 32-token "
           "sentence, the page's work with the trace cached, 1 thread", 200, AT_MOST, "ms"),
    Target("features.index_s", "one pass of a GPT-2 SAE layer's features over the bundled English text, 1 thread",
           120, AT_MOST, "s"),
    Target("features.contexts_s", "top contexts of one GPT-2 feature after that pass", 2, AT_MOST, "s"),
    Target("features.steering_s", "steering GPT-2 small: 20 tokens with and without a feature (and the next "
           "token's shift), 1 thread", 3, AT_MOST, "s"),
    Target("features.class_memory_mb", "memory: GPT-2 small + one SAE layer + a class of 30 on its feature card (a "
           "fresh process, AppTest)", CLOUD_MEMORY_MB, AT_MOST, "MB"),
    # issue 42: Pythia as it learned; Pythia-70M's shape at the picker's 8 training steps with random weights, from
    # a disk cache holding one repository at several revisions (bench/pythia.py)
    Target("pythia.step_switch_first_s", "Pythia-70M: the step picker moved to a step on disk, not in memory (load + "
           "trace, attention page, AppTest, 1 thread)", 2, AT_MOST, "s"),
    Target("pythia.step_switch_cached_ms", "Pythia-70M: the step picker moved back to a step in memory (AppTest, 1 "
           "thread)", 150, AT_MOST, "ms"),
    Target("pythia.learn_s", "Watch it learn: Pythia-70M over its 8 training steps, the first time (every checkpoint "
           "read from disk, AppTest, 1 thread)", 10, AT_MOST, "s"),
    Target("pythia.memory_mb", "memory: Pythia-70M at two steps + GPT-2 small + a class of 30 on a Pythia step (a "
           "fresh process, AppTest)", CLOUD_MEMORY_MB, AT_MOST, "MB"),
]
