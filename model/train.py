"""Reproduce a bundled checkpoint: `python -m model.train --preset roses` (or tinytales, sort, translate).

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

from . import corpora, tasks
from .checkpoint import BUNDLED_DIR, Bundle, save
from .config import ModelConfig
from .presets import HELD_OUT_PAIRS, PRESETS, SEQ2SEQ_PRESETS, TRAIN_PAIRS, build
from .probes import probe_accuracy
from .seq2seq import EncoderDecoder, exact_match
from .trainer import PairTrainer, Trainer
from .transformer import TransformerLM


def _train(trainer, name: str, steps: int, progress: bool):
    """Run `trainer` to `steps` with a progress bar; returns the last metrics and the seconds it took."""
    start = time.perf_counter()
    with tqdm(total=steps, desc=name, disable=not progress) as bar:
        while trainer.steps_done < steps:
            n = min(10, steps - trainer.steps_done)
            metrics = trainer.step(n)
            bar.update(n)
            bar.set_postfix(loss=f"{metrics.loss:.3f}", acc=f"{metrics.accuracy:.2f}")
    return metrics, time.perf_counter() - start


def train_seq2seq_preset(name: str, seed: int = 0, progress: bool = True) -> Bundle:
    """Train encoder-decoder preset `name` with teacher forcing; its facts hold the held-out exact match."""
    preset = SEQ2SEQ_PRESETS[name]
    tokenizer = tasks.tokenizer_for(preset.task)
    train_pairs = tasks.pairs(preset.task, TRAIN_PAIRS, seed)
    test_pairs = tasks.held_out(preset.task, HELD_OUT_PAIRS, train_pairs, seed + 1_000)
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, **preset.model)
    torch.manual_seed(seed)
    model = EncoderDecoder(cfg)
    trainer = PairTrainer(model, tasks.encode_pairs(tokenizer, train_pairs, cfg.max_len),
                          tasks.encode_pairs(tokenizer, test_pairs, cfg.max_len), preset.train)
    metrics, seconds = _train(trainer, name, preset.train.steps, progress)
    model.eval()
    val_loss, val_acc = trainer.evaluate()
    bundle = Bundle(model, tokenizer)
    bundle.facts = {"preset": name, "about": preset.about, "task": preset.task, "seed": seed,
                    "train": preset.train.to_dict(), "parameters": sum(p.numel() for p in model.parameters()),
                    "train_pairs": len(train_pairs), "held_out_pairs": len(test_pairs),
                    "final_train_loss": round(metrics.loss, 4), "val_loss": round(val_loss, 4),
                    "val_token_accuracy": round(val_acc, 4),
                    "exact_match": round(exact_match(bundle, test_pairs), 4),
                    "example": test_pairs[0][0], "train_seconds": round(seconds, 1), "torch": torch.__version__,
                    "machine": f"{platform.machine()}, {torch.get_num_threads()} threads"}
    return bundle


def train_preset(name: str, seed: int = 0, progress: bool = True) -> Bundle:
    """Train preset `name` from scratch and return the model with its measured facts."""
    preset = PRESETS[name]
    tokenizer, cfg, train_ids, val_ids = build(preset, seed)
    torch.manual_seed(seed)
    model = TransformerLM(cfg)
    trainer = Trainer(model, train_ids, val_ids, preset.train)
    metrics, seconds = _train(trainer, name, preset.train.steps, progress)
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
    parser.add_argument("--preset", required=True, choices=sorted(PRESETS | SEQ2SEQ_PRESETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=BUNDLED_DIR, help="folder to write the checkpoint into")
    args = parser.parse_args(argv)
    seq2seq = args.preset in SEQ2SEQ_PRESETS
    bundle = (train_seq2seq_preset if seq2seq else train_preset)(args.preset, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    save(bundle, args.out / args.preset)
    facts = bundle.facts
    if seq2seq:
        print(f"{args.preset}: held-out exact match {facts['exact_match']:.1%}, val loss {facts['val_loss']}, "
              f"{facts['train_seconds']} s, {facts['parameters']:,} parameters")
        target = SEQ2SEQ_PRESETS[args.preset].targets["exact_match"]
        if facts["exact_match"] < target:
            print(f"missed target: exact match {facts['exact_match']:.1%} < {target:.0%}", file=sys.stderr)
            return 1
        return 0
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
