"""Reproduce a bundled checkpoint: `python -m model.train --preset roses` (or tinytales, sort, translate).

Trains with the preset's recipe, shows a progress bar, checks the preset's targets, and writes
model/checkpoints/<preset>.safetensors and <preset>.json (or into --out).
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


def machine() -> str:
    """The machine a checkpoint was trained on, as its facts say it: "x86_64, 2 threads"."""
    threads = torch.get_num_threads()
    return f"{platform.machine()}, {threads} thread{'s' * (threads != 1)}"


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
    """Train encoder-decoder preset `name` with teacher forcing; its facts say what it learned from and hold its
    measured exact matches (measure_seq2seq)."""
    preset = SEQ2SEQ_PRESETS[name]
    lengths = preset.lengths or tasks.DEFAULT_LENGTHS
    tokenizer = tasks.tokenizer_for(preset.task)
    train_pairs = tasks.pairs(preset.task, TRAIN_PAIRS, seed, lengths)
    test_pairs = tasks.held_out(preset.task, HELD_OUT_PAIRS, train_pairs, seed + 1_000, lengths)
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, **preset.model)
    torch.manual_seed(seed)
    model = EncoderDecoder(cfg)
    trainer = PairTrainer(model, tasks.encode_pairs(tokenizer, train_pairs, cfg.max_len),
                          tasks.encode_pairs(tokenizer, test_pairs, cfg.max_len), preset.train)
    metrics, seconds = _train(trainer, name, preset.train.steps, progress)
    model.eval()
    val_loss, val_acc = trainer.evaluate()
    bundle = Bundle(model, tokenizer)
    learned = {"task": preset.task, "training_data": tasks.training_data(preset.task, len(train_pairs), lengths)}
    if preset.task != "translate":
        learned["lengths"] = list(lengths)
    bundle.facts = {"preset": name, "about": preset.about, **learned, "seed": seed,
                    "train": preset.train.to_dict(), "parameters": sum(p.numel() for p in model.parameters()),
                    "train_pairs": len(train_pairs), "held_out_pairs": len(test_pairs),
                    "final_train_loss": round(metrics.loss, 4), "val_loss": round(val_loss, 4),
                    "val_token_accuracy": round(val_acc, 4),
                    **measure_seq2seq(bundle, preset.task, train_pairs, test_pairs, lengths),
                    "example": test_pairs[0][0], "train_seconds": round(seconds, 1), "torch": torch.__version__,
                    "machine": machine()}
    return bundle


def measure_seq2seq(bundle: Bundle, task: str, train_pairs: list[tuple[str, str]],
                    test_pairs: list[tuple[str, str]], lengths: tuple[int, int]) -> dict:
    """What a trained encoder-decoder gets exactly right: held-out pairs decoded greedily (exact_match); for
    translate, by beam search with 4 beams too; for a digit task, at every trained length (model/tasks.py
    length_test: every list of up to 3 digits, 200 unseen lists of each longer length)."""
    out = {"exact_match": round(exact_match(bundle, test_pairs), 4)}
    if task == "translate":
        out["exact_match_beam4"] = round(exact_match(bundle, test_pairs, beam_size=4), 4)
        return out
    seen = {s for s, _ in train_pairs}
    by_length, tested, unseen = {}, {}, {}
    for length in range(lengths[0], lengths[1] + 1):
        data = tasks.length_test(task, length, train_pairs)
        by_length[str(length)] = round(exact_match(bundle, data), 4)
        tested[str(length)] = len(data)
        unseen[str(length)] = sum(s not in seen for s, _ in data)
    out |= {"exact_match_by_length": by_length, "tested_by_length": tested, "unseen_by_length": unseen}
    return out


def missed_seq2seq_targets(facts: dict, targets: dict) -> list[str]:
    """The targets an encoder-decoder's facts miss, each as a line ("exact_match_by_length at 10: 95.0% < 97%")."""
    missed = []
    for key, target in targets.items():
        measured = facts[key]
        for where, value in (measured.items() if isinstance(measured, dict) else [("", measured)]):
            if value < target:
                missed.append(f"{key}{f' at {where}' if where else ''}: {value:.1%} < {target:.0%}")
    return missed


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
             "machine": machine()}
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
        if "exact_match_beam4" in facts:
            print(f"  beam 4: {facts['exact_match_beam4']:.1%}")
        for length, value in facts.get("exact_match_by_length", {}).items():
            print(f"  {length} digit{'s' * (length != '1')}: {value:.1%} of {facts['tested_by_length'][length]} lists "
                  f"({facts['unseen_by_length'][length]} not in training)")
        missed = missed_seq2seq_targets(facts, SEQ2SEQ_PRESETS[args.preset].targets)
        for line in missed:
            print(f"missed target: {line}", file=sys.stderr)
        return 1 if missed else 0
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
