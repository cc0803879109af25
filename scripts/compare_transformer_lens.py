"""Our traced forward pass vs TransformerLens' run_with_cache, same shape, 1 thread, interleaved (issue 23's target:
ours at most 0.25x of TransformerLens' time).

TransformerLens is not a dependency (it pulls datasets, wandb, accelerate, ...; 4.x has no HookedTransformer). To
measure, install 3.x beside the project, without touching the venv:

    pip install --target /tmp/tl --no-deps "transformer-lens<4" einops jaxtyping fancy-einsum better-abc typeguard \
        wadler-lindig datasets multiprocess dill xxhash pyarrow fsspec
    PYTHONPATH=/tmp/tl:. .venv/bin/python scripts/compare_transformer_lens.py
"""
import statistics
import time

import torch

from model.checkpoint import load_bundled


def timed(run, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def main(tokens: int = 32, rounds: int = 30, repeats: int = 10) -> None:
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    torch.set_num_threads(1)
    ours = load_bundled("tinytales").model                       # d_model 64, 2 layers, 4 heads, d_ff 256
    cfg = ours.cfg
    theirs = HookedTransformer(HookedTransformerConfig(
        n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads, d_head=cfg.d_model // cfg.n_heads,
        d_mlp=cfg.d_ff, d_vocab=cfg.vocab_size, n_ctx=cfg.max_len, act_fn="gelu", normalization_type="LN",
        device="cpu", seed=0)).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, tokens))
    with torch.no_grad():
        ours.run(ids), theirs.run_with_cache(ids)                # warm up both
        mine, tl = [], []
        for _ in range(rounds):                                  # interleaved: a busy machine slows both alike
            mine += timed(lambda: ours.run(ids), repeats)
            tl += timed(lambda: theirs.run_with_cache(ids), repeats)
    a, b = statistics.median(mine), statistics.median(tl)
    print(f"shape d_model {cfg.d_model}, {cfg.n_layers} layers, {cfg.n_heads} heads, {tokens} tokens, 1 thread")
    print(f"ours model.run (every intermediate): {a * 1000:.2f} ms; TransformerLens run_with_cache: {b * 1000:.2f} ms")
    print(f"ratio {a / b:.2f}x (target at most 0.25x)")


if __name__ == "__main__":
    main()
