"""Reproduce a bundled checkpoint: `python -m model.train --preset roses` (or tinytales).

Trains with the preset's recipe, shows a progress bar, checks the preset's targets, and writes
model/checkpoints/NAME.safetensors and NAME.json (or into --out).
"""
import argparse
import platform
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from . import corpora
from .checkpoint import BUNDLED_DIR, Bundle, save
from .presets import PRESETS, build
from .probes import probe_accuracy
from .trainer import Trainer
from .transformer import TransformerLM


def train_preset(name: str, seed: int = 0, progress: bool = True) -> Bundle:
    """Train preset `name` from scratch and return the model with its measured facts."""
    preset = PRESETS[name]
    tokenizer, cfg, train_ids, val_ids = build(preset, seed)
    torch.manual_seed(seed)
    model = TransformerLM(cfg)
    trainer = Trainer(model, train_ids, val_ids, preset.train)
    start = time.perf_counter()
    chunk = 10
    with tqdm(total=preset.train.steps, desc=name, disable=not progress) as bar:
        while trainer.steps_done < preset.train.steps:
            n = min(chunk, preset.train.steps - trainer.steps_done)
            metrics = trainer.step(n)
            bar.update(n)
            bar.set_postfix(loss=f"{metrics.loss:.3f}", acc=f"{metrics.accuracy:.2f}")
    seconds = time.perf_counter() - start
    model.eval()
    val_loss, val_acc = trainer.evaluate()
    facts = {"preset": name, "about": preset.about, "corpus": preset.task, "seed": seed,
             "train": preset.train.to_dict(), "parameters": sum(p.numel() for p in model.parameters()),
             "train_tokens": len(train_ids), "final_train_loss": round(metrics.loss, 4),
             "val_loss": round(val_loss, 4), "val_accuracy": round(val_acc, 4),
             "train_seconds": round(seconds, 1), "torch": torch.__version__,
             "machine": f"{platform.machine()}, {torch.get_num_threads()} threads"}
    if preset.task == "tinytales":
        facts["probe_accuracy"] = {phenomenon: round(probe_accuracy(model, tokenizer, probes), 4)
                                   for phenomenon, probes in corpora.tiny_tales_probes().items()}
    return Bundle(model, tokenizer, facts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=BUNDLED_DIR, help="folder to write the checkpoint into")
    args = parser.parse_args(argv)
    bundle = train_preset(args.preset, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    save(bundle, args.out / args.preset)
    facts = bundle.facts
    print(f"{args.preset}: val loss {facts['val_loss']}, val accuracy {facts['val_accuracy']}, "
          f"{facts['train_seconds']} s, {facts['parameters']:,} parameters")
    for phenomenon, accuracy in facts.get("probe_accuracy", {}).items():
        print(f"  probe {phenomenon}: {accuracy:.1%}")
    missed = [k for k, target in PRESETS[args.preset].targets.items()
              if (facts["val_loss"] > target if k == "val_loss" else facts["probe_accuracy"][k] < target)]
    if missed:
        print(f"missed targets: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
