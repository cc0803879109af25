"""Reference files from SAELens itself, for tests/test_sae.py: our SAE (model/sae.py) must compute what SAELens
computes and read and write the files SAELens reads and writes.

SAELens is not a dependency (it pulls TransformerLens, transformers, datasets, wandb, ...; its pins clash with ours).
It runs in a virtual environment of its own, and this script has two steps, one in each environment:

    # 1. In the project's environment: our save_sae writes two small random SAEs (standard and top-k).
    .venv/bin/python scripts/make_sae_reference.py ours tests/data/sae/ours

    # 2. In SAELens' environment (made once):
    python3 -m venv /tmp/saelens && /tmp/saelens/bin/pip install sae-lens
    /tmp/saelens/bin/python scripts/make_sae_reference.py saelens tests/data/sae --ours tests/data/sae/ours

Step 2 writes, into tests/data/sae:
    reference.safetensors   random GPT-2-shaped weights (d_in 64, d_sae 256), inputs (2, 5, 64), and SAELens' encode
                            and decode of them under four configs (standard, top-k, top-k ranking by decoder norm,
                            standard without b_dec subtracted); the configs as SAELens' to_dict, in the metadata
    saelens/standard/, saelens/topk/
                            two small SAEs saved by SAELens' own save_model (cfg.json, sae_weights.safetensors)
    saelens_outputs.safetensors
                            SAELens' encode and decode of inputs (3, 16) by the two SAEs it saved
    reads_ours.safetensors  what SAELens computes on the same inputs after load_from_disk of each SAE our save_sae
                            wrote in step 1; the configs it read from our files, in the metadata

The files are small (about 250 KB in all). Run step 2 again after step 1, or when SAELens' arithmetic changes.
"""
import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

SMALL = dict(d_in=16, d_sae=32)          # the saved SAEs
SHAPE = dict(d_in=64, d_sae=256)         # the computed reference: GPT-2's layout at a small width


def random_weights(d_in: int, d_sae: int, seed: int) -> dict[str, torch.Tensor]:
    """Weights whose decoder rows have different lengths (so ranking by decoder norm changes the top k) and whose
    biases move the activations (so b_dec's subtraction and b_enc matter)."""
    g = torch.Generator().manual_seed(seed)
    return {"W_enc": torch.randn(d_in, d_sae, generator=g) / d_in ** 0.5,
            "b_enc": 0.3 * torch.randn(d_sae, generator=g),
            "W_dec": torch.randn(d_sae, d_in, generator=g) * torch.rand(d_sae, 1, generator=g) * 2,
            "b_dec": 0.5 * torch.randn(d_in, generator=g)}


def write_ours(out: Path) -> None:
    """Step 1, in the project's environment: two random SAEs written by our save_sae."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from model.sae import SAEConfig, from_weights, save_sae
    for seed, (name, extra) in enumerate({"standard": {}, "topk": {"architecture": "topk", "k": 4}}.items()):
        cfg = SAEConfig(**SMALL, **extra, hook_name="blocks.1.hook_resid_pre", model_name="tinytales",
                        context_size=32, dataset_path="model/corpora.py tiny_tales", prepend_bos=False,
                        extra={"trained_by": "make_sae_reference.py (random weights)"})
        save_sae(from_weights(cfg, random_weights(**SMALL, seed=10 + seed)), out / name)
    print(f"wrote our SAEs into {out}")


def saelens_reference(out: Path, ours: Path) -> None:
    """Step 2, in SAELens' environment."""
    import sae_lens
    from sae_lens import SAE, StandardSAE, StandardSAEConfig, TopKSAE, TopKSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    def build(kind: str, weights: dict, **options):
        config_class, sae_class = {"standard": (StandardSAEConfig, StandardSAE), "topk": (TopKSAEConfig, TopKSAE)}[kind]
        sae = sae_class(config_class(**options))
        sae.load_state_dict(weights)
        return sae.eval()

    def outputs(sae, x: torch.Tensor, prefix: str) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            features = sae.encode(x)
            return {f"{prefix}.features": features, f"{prefix}.reconstruction": sae.decode(features),
                    f"{prefix}.forward": sae(x)}

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    about = {"sae_lens": sae_lens.__version__, "torch": torch.__version__}

    # 1. The computed reference: four configs over one set of weights.
    weights = random_weights(**SHAPE, seed=0)
    x = 2.0 * torch.randn(2, 5, SHAPE["d_in"])                                       # (batch, positions, d_in)
    configs = {"standard": ("standard", {}), "topk": ("topk", {"k": 8}),
               "topk_rescaled": ("topk", {"k": 8, "rescale_acts_by_decoder_norm": True}),
               "standard_no_b_dec": ("standard", {"apply_b_dec_to_input": False})}
    tensors, cfgs = {**weights, "x": x}, {}
    for name, (kind, options) in configs.items():
        sae = build(kind, weights, **SHAPE, **options)
        tensors |= outputs(sae, x, name)
        cfgs[name] = sae.cfg.to_dict()
    save_file(tensors, out / "reference.safetensors", metadata={"configs": json.dumps(cfgs), **about})

    # 2. Two small SAEs saved by SAELens itself, and what it computes with them.
    x_small = torch.randn(3, SMALL["d_in"])
    tensors = {"x": x_small}
    for seed, (name, kind, options) in enumerate([("standard", "standard", {}), ("topk", "topk", {"k": 4})]):
        metadata = SAEMetadata(model_name="gpt2-small", hook_name="blocks.1.hook_resid_pre", prepend_bos=True,
                               context_size=128)
        sae = build(kind, random_weights(**SMALL, seed=20 + seed), **SMALL, **options, metadata=metadata)
        sae.save_model(out / "saelens" / name)
        tensors |= outputs(sae, x_small, name)
    save_file(tensors, out / "saelens_outputs.safetensors", metadata=about)

    # 3. SAELens reads the SAEs our save_sae wrote (step 1), on the same inputs.
    tensors, read = {"x": x_small}, {}
    for name in ("standard", "topk"):
        sae = SAE.load_from_disk(ours / name).eval()
        tensors |= outputs(sae, x_small, name)
        read[name] = {**sae.cfg.to_dict(), "class": type(sae).__name__}
    save_file(tensors, out / "reads_ours.safetensors", metadata={"configs": json.dumps(read), **about})
    print(f"wrote SAELens {sae_lens.__version__}'s reference files into {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    steps.add_parser("ours", help="step 1, in the project's environment").add_argument("out", type=Path)
    saelens = steps.add_parser("saelens", help="step 2, in SAELens' environment")
    saelens.add_argument("out", type=Path)
    saelens.add_argument("--ours", type=Path, required=True, help="the folder step 1 wrote")
    args = parser.parse_args(argv)
    if args.step == "ours":
        write_ours(args.out)
    else:
        saelens_reference(args.out, args.ours)


if __name__ == "__main__":
    main()
