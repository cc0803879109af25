"""The model core: the full trace against a plain forward pass, the trainers against plain PyTorch loops,
the roses preset trained to a low loss, the why page's attribution and patching grid, and today's models: the
full trace at SmolLM2's shape and a new token's time with and without the KV cache. Computed with torch's default
thread count, but for the encoder-decoder's trainer, the why page and today's models: one thread, as on the
server."""
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

from .report import Report
from .timing import DEFAULT_THREADS, interleaved, torch_threads

AREA = "model"


def run(report: Report) -> None:
    with torch_threads(DEFAULT_THREADS):
        roses(report)          # first, so it pays for the process's first optimizer creation as a visitor would
        trace(report)
        trainer(report)
    with torch_threads(1):
        pair_trainer(report)
        why(report)
        smollm2_trace(report)
        kv_cache(report)


def trace(report: Report) -> None:
    """model.run() (every intermediate recorded) against model(x), tinytales, 32 tokens."""
    from model import corpora
    from model.checkpoint import load_bundled

    bundle = load_bundled("tinytales")
    model = bundle.model
    ids = bundle.tokenizer.encode(corpora.tiny_tales(20, seed=123))[:32]
    x = torch.tensor([ids])                                                   # (1, 32)
    with torch.no_grad():
        t = interleaved({"forward": lambda: model(x), "run": lambda: model.run(x)}, reps=300)
    ratio = report.record("model.trace_ratio", t["run"] / t["forward"])
    report.line(AREA, f"trace: run() {t['run'] * 1e3:.3f} ms vs forward {t['forward'] * 1e3:.3f} ms = {ratio:.2f}x")


def trainer(report: Report, steps_per_call: int = 10) -> None:
    """Trainer.step against a minimal PyTorch loop on the same model shape and batch (and with clipping)."""
    from model.presets import PRESETS, build
    from model.trainer import TrainConfig, Trainer, make_batch
    from model.transformer import TransformerLM

    preset = PRESETS["tinytales"]
    tokenizer, cfg, train_ids, val_ids = build(preset)
    recipe = TrainConfig(batch_size=preset.train.batch_size, lr=preset.train.lr, grad_clip=0.0)
    torch.manual_seed(0)
    ours = Trainer(TransformerLM(cfg), train_ids, val_ids, recipe)
    clipped = Trainer(TransformerLM(cfg), train_ids, val_ids, preset.train)
    torch.manual_seed(0)
    plain_model = TransformerLM(cfg).train()
    optimizer = torch.optim.AdamW(plain_model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    x, y = make_batch(train_ids, recipe.batch_size, cfg.max_len, torch.Generator().manual_seed(0))

    def plain_steps():
        for _ in range(steps_per_call):
            logits = plain_model(x)                                           # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    t = interleaved({"plain": plain_steps, "trainer": lambda: ours.step(steps_per_call),
                     "clipped": lambda: clipped.step(steps_per_call)}, reps=30, warmup=3)
    rate = {k: steps_per_call / v for k, v in t.items()}
    ratio = report.record("model.trainer_ratio", rate["trainer"] / rate["plain"])
    report.line(AREA, f"trainer: Trainer.step {rate['trainer']:.0f} steps/s vs plain loop {rate['plain']:.0f} steps/s "
                      f"= {ratio:.2f}x; with the preset's gradient clipping {rate['clipped']:.0f} steps/s "
                      f"({rate['clipped'] / rate['plain']:.2f}x)  [batch {recipe.batch_size} x {cfg.max_len} tokens]")


def roses(report: Report, target_loss: float = 0.05) -> None:
    """Wall time for the roses preset, from building its data, to reach validation loss `target_loss`."""
    from model.presets import PRESETS, build
    from model.trainer import Trainer
    from model.transformer import TransformerLM

    preset = PRESETS["roses"]
    start = time.perf_counter()
    tokenizer, cfg, train_ids, val_ids = build(preset)
    torch.manual_seed(0)
    trainer = Trainer(TransformerLM(cfg), train_ids, val_ids, preset.train)
    val_loss = float("inf")
    while val_loss > target_loss and trainer.steps_done < preset.train.steps:
        trainer.step(10)
        val_loss, _ = trainer.evaluate()
    seconds = time.perf_counter() - start
    report.record("model.roses_s", seconds if val_loss <= target_loss else float("inf"))      # inf: never
    report.line(AREA, f"roses: validation loss {val_loss:.4f} after {trainer.steps_done} steps in {seconds:.1f} s")


def pair_trainer(report: Report, steps_per_call: int = 10) -> None:
    """PairTrainer.step against a plain teacher-forcing loop, same model shape and batch (sort)."""
    from model import tasks
    from model.config import ModelConfig
    from model.presets import SEQ2SEQ_PRESETS
    from model.seq2seq import EncoderDecoder
    from model.trainer import PairTrainer

    preset = SEQ2SEQ_PRESETS["sort"]
    tokenizer = tasks.tokenizer_for("sort")
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, **preset.model)
    data = tasks.encode_pairs(tokenizer, tasks.pairs("sort", 2_000), cfg.max_len)
    recipe = replace(preset.train, grad_clip=0.0)
    torch.manual_seed(0)
    ours = PairTrainer(EncoderDecoder(cfg), data, data, recipe)
    torch.manual_seed(0)
    plain_model = EncoderDecoder(cfg).train()
    optimizer = torch.optim.AdamW(plain_model.parameters(), lr=1e-3, weight_decay=0.0)
    (src, tgt_in), labels = ours.batch()

    def plain_steps():
        for _ in range(steps_per_call):
            logits = plain_model(src, tgt_in)                                          # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, label_smoothing=0.1)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    t = interleaved({"plain": plain_steps, "trainer": lambda: ours.step(steps_per_call)}, reps=20, warmup=3)
    rate = {k: steps_per_call / v for k, v in t.items()}
    ratio = report.record("model.pair_trainer_ratio", rate["trainer"] / rate["plain"])
    report.line(AREA, f"encoder-decoder: PairTrainer.step {rate['trainer']:.0f} steps/s vs plain teacher-forcing "
                      f"loop {rate['plain']:.0f} steps/s = {ratio:.2f}x (1 thread)")


def why(report: Report) -> None:
    """The why page's numbers for tinytales at 32 tokens: attribution from the cached trace, routes, and the
    residual and head patching grids of a pair that differs in one token."""
    from model import corpora
    from model import patching
    from model.attribution import attribute, routes
    from model.checkpoint import load_bundled

    bundle = load_bundled("tinytales")
    model = bundle.model
    ids = bundle.tokenizer.encode(corpora.tiny_tales(20, seed=123))[:32]
    trace = model.run(ids)
    top = trace["logits"][0, -1].topk(2).indices.tolist()
    corrupted = list(ids)
    corrupted[1] = next(t for t in range(4, model.cfg.vocab_size) if t != ids[1])
    pair = patching.make_pair(model, ids, corrupted)
    t = interleaved({"attribution": lambda: attribute(model, trace, len(ids) - 1, top),
                     "routes": lambda: routes(model, trace, len(ids) - 1),
                     "resid": lambda: patching.resid_pre_grid(model, pair), "heads": lambda: patching.head_out_grid(model, pair),
                     "estimate": lambda: (patching.resid_pre_estimate(model, pair), patching.head_out_estimate(model, pair))},
                    reps=20, warmup=2)
    report.record("model.attribution_ms", t["attribution"] * 1e3)
    report.record("model.patching_grid_s", t["resid"])
    report.line(AREA, f"why, {len(ids)} tokens, 1 thread: attribution {t['attribution'] * 1e3:.2f} ms, routes "
                      f"{t['routes'] * 1e3:.1f} ms, residual patching grid {t['resid'] * 1e3:.0f} ms, head grid "
                      f"{t['heads'] * 1e3:.0f} ms, both estimated by attribution patching {t['estimate'] * 1e3:.0f} ms")


def smollm2_trace(report: Report, tokens: int = 32) -> None:
    """model.run() against model(x) at SmolLM2-135M's shape (random weights: the timing does not depend on them):
    30 layers, 9 heads sharing 3 key/value heads, rotary positions, SwiGLU, 49,152 tokens."""
    from model.config import ModelConfig
    from model.transformer import TransformerLM

    cfg = ModelConfig(vocab_size=49_152, d_model=576, n_heads=9, n_kv_heads=3, n_layers=30, d_ff=1536, max_len=8192,
                      pos="rope", rope_theta=100_000.0, norm="rms", activation="swiglu", bias=False,
                      tie_embeddings=True)
    torch.manual_seed(0)
    model = TransformerLM(cfg).eval()
    x = torch.randint(0, cfg.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(0))   # (1, 32)
    with torch.no_grad():
        t = interleaved({"forward": lambda: model(x), "run": lambda: model.run(x)}, reps=20, warmup=3)
    ratio = report.record("model.smollm2_trace_ratio", t["run"] / t["forward"])
    report.line(AREA, f"SmolLM2's shape, {tokens} tokens, 1 thread: run() {t['run'] * 1e3:.0f} ms vs forward "
                      f"{t['forward'] * 1e3:.0f} ms = {ratio:.2f}x")


def kv_cache(report: Report, early: int = 16, late: int = 256) -> None:
    """A new token's time at position `early` and `late`, with the KV cache (only the new position is computed)
    and without (every position again), at GPT-2 small's shape; and what the cache keeps per token."""
    from model.config import ModelConfig
    from model.generate import cache_bytes_per_token, time_new_token
    from model.transformer import TransformerLM

    gpt2 = ModelConfig(vocab_size=50_257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024,
                       pos="learned", activation="gelu_tanh", tie_embeddings=True)
    smollm2 = ModelConfig(vocab_size=49_152, d_model=576, n_heads=9, n_kv_heads=3, n_layers=30, d_ff=1536,
                          pos="rope", norm="rms", activation="swiglu", bias=False, max_len=8192)
    torch.manual_seed(0)
    model = TransformerLM(gpt2).eval()
    ids = torch.randint(0, gpt2.vocab_size, (late + 1,), generator=torch.Generator().manual_seed(0)).tolist()
    at = {n: min((time_new_token(model, ids[:n + 1], repeats=5) for _ in range(3)), key=lambda t: t.cached)
          for n in (early, late)}
    ratio = report.record("model.cache_token_ratio", at[late].cached / at[early].cached)
    report.line(AREA, f"a new token, GPT-2's shape, 1 thread: with the KV cache {at[early].cached * 1e3:.1f} ms at "
                      f"token {early}, {at[late].cached * 1e3:.1f} ms at token {late} ({ratio:.2f}x); without it "
                      f"{at[early].uncached * 1e3:.1f} ms and {at[late].uncached * 1e3:.1f} ms "
                      f"({at[late].uncached / at[early].uncached:.1f}x)")
    report.line(AREA, f"the KV cache keeps {cache_bytes_per_token(gpt2) / 1024:.0f} KB a token for GPT-2 small "
                      f"(12 heads of keys and values in 12 layers) and {cache_bytes_per_token(smollm2) / 1024:.0f} KB "
                      "for SmolLM2-135M (3 key/value heads in 30 layers), in float32")
