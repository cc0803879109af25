"""Load a pretrained GPT-2 from the files the Hugging Face hub ships, into our own TransformerLM.

    from model.hub import GPT2, fetch
    from model.pretrained import load_pretrained
    bundle = load_pretrained(fetch(GPT2))      # a directory with config.json, model.safetensors, tokenizer.json
    bundle.model.run(bundle.tokenizer.encode("Paris is the capital of"))["logits"]

No `transformers` at run time: GPT-2 is the same pre-norm decoder as ours, with learned positions, GELU
(tanh approximation) and an unembedding tied to the token embedding. The conversion only renames and
reshapes weights; the norms are not folded into neighbouring weights, so every intermediate in the trace
is GPT-2's real value. GPT-2 stores its linear layers as `Conv1D` (weight [in, out], y = x W + b) where
`nn.Linear` keeps [out, in], and fuses the query, key and value projections into one `c_attn`.
"""
import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .checkpoint import Bundle
from .config import ModelConfig
from .tokenizers import load_tokenizer_json
from .transformer import TransformerLM

FILES = ("config.json", "model.safetensors", "tokenizer.json")
MASK_BUFFERS = (".attn.bias", ".attn.masked_bias")     # causal-mask buffers in older GPT-2 files, not weights
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}


def gpt2_config(spec: dict) -> ModelConfig:
    """Our ModelConfig from GPT-2's config.json."""
    if not isinstance(spec, dict) or spec.get("model_type", "gpt2") != "gpt2":
        raise ValueError("config.json does not describe a GPT-2 model")
    unsupported = [k for k, bad in (("scale_attn_weights", False), ("scale_attn_by_inverse_layer_idx", True),
                                    ("tie_word_embeddings", False)) if spec.get(k, not bad) == bad]
    if unsupported or spec.get("activation_function", "gelu_new") not in ACTIVATIONS:
        raise ValueError(f"this GPT-2 variant is not supported ({', '.join(unsupported) or 'activation'})")
    d = spec.get("n_embd")
    try:
        return ModelConfig(vocab_size=spec["vocab_size"], d_model=d, n_heads=spec["n_head"], n_layers=spec["n_layer"],
                           d_ff=spec.get("n_inner") or 4 * d, max_len=spec.get("n_positions", spec.get("n_ctx")),
                           pos="learned", norm="layer", norm_position="pre",
                           activation=ACTIVATIONS[spec.get("activation_function", "gelu_new")],
                           tie_embeddings=True, norm_eps=spec.get("layer_norm_epsilon", 1e-5))
    except (KeyError, TypeError) as e:
        raise ValueError(f"config.json lacks a GPT-2 size field ({e})") from None


def convert_gpt2(tensors: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """GPT-2's weights (either layout: the hub's, or `transformer.`-prefixed) under our names and shapes."""
    sd = {}
    for name, value in tensors.items():
        name = name.removeprefix("transformer.")
        if name.endswith(MASK_BUFFERS):        # ".attn.bias" is a mask; "c_attn.bias" (no dot before attn) is real
            continue
        sd[name] = value
    lm_head = sd.pop("lm_head.weight", None)
    D = cfg.d_model
    ours = {"embed.tok.weight": sd.pop("wte.weight"), "embed.pos.weight": sd.pop("wpe.weight"),
            "final_norm.weight": sd.pop("ln_f.weight"), "final_norm.bias": sd.pop("ln_f.bias")}
    for i in range(cfg.n_layers):
        h, b = f"h.{i}", f"blocks.{i}"
        for theirs, mine in (("ln_1", "norm1"), ("ln_2", "norm2")):
            ours[f"{b}.{mine}.weight"] = sd.pop(f"{h}.{theirs}.weight")
            ours[f"{b}.{mine}.bias"] = sd.pop(f"{h}.{theirs}.bias")
        qkv_w, qkv_b = sd.pop(f"{h}.attn.c_attn.weight"), sd.pop(f"{h}.attn.c_attn.bias")   # (D, 3D), (3D,)
        if qkv_w.shape != (D, 3 * D):
            raise ValueError(f"{h}.attn.c_attn.weight has shape {tuple(qkv_w.shape)}; expected {(D, 3 * D)}")
        for j, w in enumerate("qkv"):
            ours[f"{b}.attn.W_{w}.weight"] = qkv_w[:, j * D:(j + 1) * D].T                    # (D, D) out x in
            ours[f"{b}.attn.W_{w}.bias"] = qkv_b[j * D:(j + 1) * D]
        for theirs, mine in (("attn.c_proj", "attn.W_o"), ("mlp.c_fc", "mlp.W_in"), ("mlp.c_proj", "mlp.W_out")):
            ours[f"{b}.{mine}.weight"] = sd.pop(f"{h}.{theirs}.weight").T                      # Conv1D -> Linear
            ours[f"{b}.{mine}.bias"] = sd.pop(f"{h}.{theirs}.bias")
    if sd:
        raise ValueError(f"unexpected weights in model.safetensors: {', '.join(sorted(sd)[:5])}")
    if lm_head is not None and not torch.equal(lm_head, ours["embed.tok.weight"]):
        raise ValueError("lm_head.weight differs from wte.weight: GPT-2's unembedding must be tied")
    ours["unembed.weight"] = ours["embed.tok.weight"]
    # Each weight copied once into memory of its own, float32 and contiguous: a view left on the loaded file's
    # storage would keep all of it alive (measured in docs/figures.md, "Measured once, behind a design choice").
    owned = {}
    return {k: owned.setdefault(id(v), torch.empty(v.shape, dtype=torch.float32).copy_(v)) for k, v in ours.items()}


def load_pretrained(directory: str | Path) -> Bundle:
    """A GPT-2 directory in the hub's layout (config.json, model.safetensors, tokenizer.json) as a Bundle,
    the model in eval mode; a missing or broken file raises ValueError saying which."""
    directory = Path(directory)
    missing = [f for f in FILES if not (directory / f).is_file()]
    if missing:
        raise ValueError(f"{directory} lacks {', '.join(missing)}")
    try:
        spec = json.loads((directory / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"config.json is not valid JSON ({e})") from None
    cfg = gpt2_config(spec)
    try:
        tensors = load_file(directory / "model.safetensors")
    except (SafetensorError, OSError) as e:
        raise ValueError(f"model.safetensors could not be read ({e})") from None
    try:
        weights = convert_gpt2(tensors, cfg)
    except KeyError as e:
        raise ValueError(f"model.safetensors lacks the weight {e}") from None
    with torch.device("meta"):                 # shapes only: no memory or time for a random initialisation
        model = TransformerLM(cfg)
    expected = model.state_dict()
    for name, value in weights.items():
        if value.shape != expected[name].shape:
            raise ValueError(f"weight {name} has shape {tuple(value.shape)}; this config expects "
                             f"{tuple(expected[name].shape)}")
        if not torch.isfinite(value).all():
            raise ValueError(f"weight {name} contains NaN or infinite values")
    model.load_state_dict(weights, strict=True, assign=True)
    model.unembed.weight = model.embed.tok.weight          # one matrix, as in GPT-2
    tokenizer = load_tokenizer_json(directory / "tokenizer.json")
    if tokenizer.vocab_size != cfg.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model expects {cfg.vocab_size}")
    facts = {"about": "GPT-2 small: OpenAI's 2019 language model, trained on WebText (8 million web pages).",
             "training_data": "WebText: the text of about 8 million web pages (40 GB, mostly English) linked from "
                              "Reddit, collected by OpenAI in 2019",
             "source": str(spec.get("_name_or_path") or "openai-community/gpt2"), "licence": "MIT",
             "parameters": sum(p.numel() for p in model.parameters())}
    return Bundle(model.eval(), tokenizer, facts)
