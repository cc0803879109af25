"""Load a pretrained model from the files the Hugging Face hub ships, into our own TransformerLM: GPT-2, a
Llama-architecture model such as SmolLM2, or a GPT-NeoX model such as Pythia (config.json's model_type says which).

    from model.hub import GPT2, PYTHIA_70M, SMOLLM2, at_step, fetch
    from model.pretrained import load_pretrained
    bundle = load_pretrained(fetch(GPT2))      # a directory with config.json, model.safetensors, tokenizer.json
    bundle.model.run(bundle.tokenizer.encode("Paris is the capital of"))["logits"]
    early = load_pretrained(fetch(at_step(PYTHIA_70M, 1000)))   # Pythia after 1,000 of its 143,000 training steps

No `transformers` at run time. GPT-2 is the same pre-norm decoder as ours, with learned positions, GELU
(tanh approximation) and an unembedding tied to the token embedding. GPT-2 stores its linear layers as
`Conv1D` (weight [in, out], y = x W + b) where `nn.Linear` keeps [out, in], and fuses the query, key and value
projections into one `c_attn`. Llama (SmolLM2) is ours with the switches of today's models: rotary positions,
RMSNorm, a gated MLP (SwiGLU), grouped key/value heads and no biases; its weights are `nn.Linear`'s already, and
its query and key projections are stored for the "rotate-half" pairing our rotary positions use (dimension i
with i + K/2). GPT-NeoX (Pythia) is GPT-2's pre-norm LayerNorm decoder with exact GELU, rotary positions on a
quarter of each head's dimensions, attention and the MLP side by side (a parallel block) and an unembedding of its
own; it fuses query, key and value into one projection interleaved per head. Each conversion only renames and
reshapes weights; the norms are not folded into neighbouring weights, so every intermediate in the trace is the
model's real value.

Weights come from `model.safetensors`, or from `pytorch_model.bin` (Pythia's training checkpoints have only that),
read with `torch.load(weights_only=True)`: tensors and plain containers only, never a pickled object's code.
"""
import json
import pickle
from dataclasses import replace
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .checkpoint import Bundle
from .config import ModelConfig
from .tokenizers import load_tokenizer_json
from .transformer import TransformerLM

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")     # whichever is there, safetensors first
MASK_BUFFERS = (".attn.bias", ".attn.masked_bias")     # causal-mask buffers in older GPT-2 files, not weights
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}
ROTARY_BUFFERS = ("rotary_emb.inv_freq",)              # rotary frequencies some older Llama files carry, not weights
# A Llama block's weights: (the file's name after "layers.<i>.", ours after "blocks.<i>.")
LLAMA_BLOCK = (("input_layernorm", "norm1"), ("self_attn.q_proj", "attn.W_q"), ("self_attn.k_proj", "attn.W_k"),
               ("self_attn.v_proj", "attn.W_v"), ("self_attn.o_proj", "attn.W_o"),
               ("post_attention_layernorm", "norm2"), ("mlp.gate_proj", "mlp.W_gate"), ("mlp.up_proj", "mlp.W_up"),
               ("mlp.down_proj", "mlp.W_out"))

GPT2_FACTS = {"about": "GPT-2 small: OpenAI's 2019 language model, trained on WebText (8 million web pages).",
              "training_data": "WebText: the text of about 8 million web pages (40 GB, mostly English) linked from "
                               "Reddit, collected by OpenAI in 2019",
              "source": "openai-community/gpt2", "licence": "MIT"}
# The one Llama-family model the app offers (model/hub.py SMOLLM2); its model card says what it read.
LLAMA_FACTS = {"about": "SmolLM2-135M: Hugging Face's 2024 small language model (the Llama architecture), trained "
                        "on about 2 trillion tokens.",
               "training_data": "about 2 trillion tokens of FineWeb-Edu (educational web pages), DCLM (web text), "
                                "The Stack (code) and Hugging Face's own filtered maths and code sets, mostly "
                                "English, collected up to 2024",
               "source": "HuggingFaceTB/SmolLM2-135M", "licence": "Apache 2.0"}
# The GPT-NeoX models the app offers: Pythia (model/hub.py PYTHIA_70M, PYTHIA_160M, at_step), as its model cards say.
NEOX_FACTS = {"about": "Pythia: EleutherAI's 2023 suite of language models (the GPT-NeoX architecture), each trained "
                       "on the Pile for 143,000 steps (300 billion tokens) and saved along the way.",
              "training_data": "the Pile: 825 GB of English text (web pages, books, papers, code, maths, forums and "
                               "more) gathered by EleutherAI, read in the same order by every Pythia model",
              "checkpoints": "step0, then steps 1, 2, 4, 8, ..., 512 (log-spaced), then every 1,000 steps from 1000 "
                             "to 143000 (the final model)",
              "source": "EleutherAI/pythia-70m", "licence": "Apache 2.0"}
# GPT-NeoX's buffers that older files carry and that are not weights: the causal mask ("attention.bias", not
# "attention.dense.bias"), its fill value, and the rotary frequencies
NEOX_BUFFERS = (".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq")
# A GPT-NeoX block's weights, each with a bias: (the file's name after "gpt_neox.layers.<i>.", ours after "blocks.<i>.")
NEOX_BLOCK = (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2"), ("attention.dense", "attn.W_o"),
              ("mlp.dense_h_to_4h", "mlp.W_in"), ("mlp.dense_4h_to_h", "mlp.W_out"))


def gpt2_config(spec: dict) -> ModelConfig:
    """Our ModelConfig from GPT-2's config.json."""
    if spec.get("model_type", "gpt2") != "gpt2":
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
    return _owned(ours)


def _owned(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each weight copied once into memory of its own, float32 (from any float type: SmolLM2's file is bfloat16)
    and contiguous: a view left on the loaded file's storage would keep all of it alive (measured in
    docs/figures.md, "Measured once, behind a design choice"). Tied names stay one tensor."""
    owned = {}
    return {k: owned.setdefault(id(v), torch.empty(v.shape, dtype=torch.float32).copy_(v)) for k, v in weights.items()}


def rope_theta(spec: dict, family: str = "Llama") -> float:
    """Rotary positions' base from a Llama or GPT-NeoX config.json: `rope_theta` at the top (transformers 4,
    SmolLM2's file) or in `rope_parameters` (transformers 5); 10,000 when neither says. Only plain RoPE: a scaled
    variant (Llama 3.1's "llama3", "linear", "dynamic", YaRN) turns pairs by other angles and is refused."""
    parameters = spec.get("rope_parameters") or {}
    scaling = spec.get("rope_scaling") or {}
    kind = parameters.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind != "default" or spec.get("rope_interleaved"):
        raise ValueError(f"this {family} variant is not supported (rotary positions of kind {kind!r}"
                         f"{', interleaved' if spec.get('rope_interleaved') else ''})")
    return float(parameters.get("rope_theta", spec.get("rope_theta", 10_000.0)))


def llama_config(spec: dict) -> ModelConfig:
    """Our ModelConfig from a Llama-architecture config.json (SmolLM2's): pre-norm RMSNorm, SwiGLU, rotary
    positions, grouped key/value heads, biases on or off together."""
    if spec.get("model_type") != "llama":
        raise ValueError("config.json does not describe a Llama model")
    try:
        d, heads = spec["hidden_size"], spec["num_attention_heads"]
        unsupported = [what for what, bad in (
            ("activation", spec.get("hidden_act", "silu") != "silu"),
            ("head_dim", spec.get("head_dim") not in (None, d // heads)),
            ("attention and MLP biases differ", spec.get("attention_bias", False) != spec.get("mlp_bias", False)),
        ) if bad]
        if unsupported:
            raise ValueError(f"this Llama variant is not supported ({', '.join(unsupported)})")
        return ModelConfig(vocab_size=spec["vocab_size"], d_model=d, n_heads=heads,
                           n_kv_heads=spec.get("num_key_value_heads") or heads, n_layers=spec["num_hidden_layers"],
                           d_ff=spec["intermediate_size"], max_len=spec.get("max_position_embeddings", 2048),
                           pos="rope", rope_theta=rope_theta(spec), norm="rms", norm_position="pre",
                           activation="swiglu", bias=bool(spec.get("attention_bias", False)),
                           tie_embeddings=bool(spec.get("tie_word_embeddings", False)),
                           norm_eps=spec.get("rms_norm_eps", 1e-6))
    except (KeyError, TypeError) as e:
        raise ValueError(f"config.json lacks a Llama size field ({e})") from None


def convert_llama(tensors: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """A Llama model's weights (`model.`-prefixed as LlamaForCausalLM saves them, or not) under our names. The
    unembedding is `lm_head`, or the token embedding when tied (SmolLM2: the file may then have no lm_head)."""
    sd = {name.removeprefix("model."): value for name, value in tensors.items() if not name.endswith(ROTARY_BUFFERS)}
    lm_head = sd.pop("lm_head.weight", None)
    ours = {"embed.tok.weight": sd.pop("embed_tokens.weight"), "final_norm.weight": sd.pop("norm.weight")}
    for i in range(cfg.n_layers):
        for theirs, mine in LLAMA_BLOCK:
            ours[f"blocks.{i}.{mine}.weight"] = sd.pop(f"layers.{i}.{theirs}.weight")
            if cfg.bias and "norm" not in mine:
                ours[f"blocks.{i}.{mine}.bias"] = sd.pop(f"layers.{i}.{theirs}.bias")
    if sd:
        raise ValueError(f"unexpected weights in model.safetensors: {', '.join(sorted(sd)[:5])}")
    if cfg.tie_embeddings:
        if lm_head is not None and not torch.equal(lm_head, ours["embed.tok.weight"]):
            raise ValueError("lm_head.weight differs from embed_tokens.weight, but config.json ties them")
        ours["unembed.weight"] = ours["embed.tok.weight"]
    elif lm_head is None:
        raise ValueError("model.safetensors lacks the weight 'lm_head.weight' (config.json does not tie it)")
    else:
        ours["unembed.weight"] = lm_head
    return _owned(ours)


def neox_config(spec: dict) -> ModelConfig:
    """Our ModelConfig from a GPT-NeoX config.json (Pythia's): pre-norm LayerNorm with biases, exact GELU, rotary
    positions on a fraction of each head (`rotary_pct` and `rotary_emb_base` in transformers 4's files, Pythia's;
    `rope_parameters` {rope_theta, partial_rotary_factor} in transformers 5's), parallel or sequential blocks
    (`use_parallel_residual`). A missing field takes transformers' default, which is Pythia's value."""
    if spec.get("model_type") != "gpt_neox":
        raise ValueError("config.json does not describe a GPT-NeoX model")
    parameters = spec.get("rope_parameters") or {}
    try:
        act = spec.get("hidden_act", "gelu")
        unsupported = [what for what, bad in (
            (f"activation {act!r}", act not in ACTIVATIONS),
            ("attention without biases beside an MLP with them", spec.get("attention_bias", True) is not True),
        ) if bad]
        if unsupported:
            raise ValueError(f"this GPT-NeoX variant is not supported ({', '.join(unsupported)})")
        theta = rope_theta({**spec, "rope_theta": spec.get("rope_theta", spec.get("rotary_emb_base", 10_000.0))},
                           "GPT-NeoX")
        fraction = parameters.get("partial_rotary_factor", spec.get("partial_rotary_factor",
                                                                    spec.get("rotary_pct", 0.25)))
        return ModelConfig(vocab_size=spec["vocab_size"], d_model=spec["hidden_size"],
                           n_heads=spec["num_attention_heads"], n_layers=spec["num_hidden_layers"],
                           d_ff=spec["intermediate_size"], max_len=spec.get("max_position_embeddings", 2048),
                           pos="rope", rope_theta=theta, rotary_fraction=fraction, norm="layer",
                           norm_position="pre", activation=ACTIVATIONS[act], bias=True,
                           parallel=bool(spec.get("use_parallel_residual", True)),
                           tie_embeddings=bool(spec.get("tie_word_embeddings", False)),
                           norm_eps=spec.get("layer_norm_eps", 1e-5))
    except (KeyError, TypeError) as e:
        raise ValueError(f"config.json lacks a GPT-NeoX size field ({e})") from None


def convert_neox(tensors: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """A GPT-NeoX model's weights (GPTNeoXForCausalLM's names) under ours. The unembedding is `embed_out` in
    Pythia's files and `lm_head` in those transformers 5 saves. The fused `query_key_value` (3D, D) is interleaved
    per head: its rows are laid out (H, 3, K), head 0's query, key and value, then head 1's, ...

    Only the first cfg.vocab_size rows of the embedding and the unembedding are kept: Pythia pads its 50,277
    tokens to 50,304 rows (a multiple of 128, which GPUs multiply faster), and no text reaches the padding rows
    (see fit_vocab)."""
    sd = {name.removeprefix("gpt_neox."): value for name, value in tensors.items() if not name.endswith(NEOX_BUFFERS)}
    V, D, H, K = cfg.vocab_size, cfg.d_model, cfg.n_heads, cfg.d_head
    embed_in, embed_out = sd.pop("embed_in.weight"), sd.pop("embed_out.weight", None)
    lm_head = sd.pop("lm_head.weight", None)
    embed_out = lm_head if embed_out is None else embed_out
    ours = {"embed.tok.weight": embed_in[:V],                                          # (V, D): the tokenizer's rows
            "final_norm.weight": sd.pop("final_layer_norm.weight"), "final_norm.bias": sd.pop("final_layer_norm.bias")}
    for i in range(cfg.n_layers):
        layer, b = f"layers.{i}", f"blocks.{i}"
        for theirs, mine in NEOX_BLOCK:
            for part in ("weight", "bias"):
                ours[f"{b}.{mine}.{part}"] = sd.pop(f"{layer}.{theirs}.{part}")
        qkv_w = sd.pop(f"{layer}.attention.query_key_value.weight")                  # (3D, D)
        qkv_b = sd.pop(f"{layer}.attention.query_key_value.bias")                    # (3D,)
        if qkv_w.shape != (3 * D, D) or qkv_b.shape != (3 * D,):
            raise ValueError(f"{layer}.attention.query_key_value has shape {tuple(qkv_w.shape)}; expected "
                             f"{(3 * D, D)}")
        qkv_w, qkv_b = qkv_w.view(H, 3, K, D), qkv_b.view(H, 3, K)                     # per head: q, k, v
        for j, w in enumerate("qkv"):
            ours[f"{b}.attn.W_{w}.weight"] = qkv_w[:, j].reshape(D, D)                  # (H K, D) out x in
            ours[f"{b}.attn.W_{w}.bias"] = qkv_b[:, j].reshape(D)                       # (H K,)
    if sd:
        raise ValueError(f"unexpected weights in the model file: {', '.join(sorted(sd)[:5])}")
    if cfg.tie_embeddings:
        if embed_out is not None and not torch.equal(embed_out, embed_in):
            raise ValueError("embed_out.weight differs from embed_in.weight, but config.json ties them")
        ours["unembed.weight"] = ours["embed.tok.weight"]
    elif embed_out is None:
        raise ValueError("the model file lacks the weight 'embed_out.weight' (config.json does not tie it)")
    else:
        ours["unembed.weight"] = embed_out[:V]                                          # (V, D): the tokenizer's rows
    return _owned(ours)


# model_type in config.json -> how to read it: its config, its weights, what it is
FAMILIES = {"gpt2": (gpt2_config, convert_gpt2, GPT2_FACTS), "llama": (llama_config, convert_llama, LLAMA_FACTS),
            "gpt_neox": (neox_config, convert_neox, NEOX_FACTS)}
# Families whose weights have more vocabulary rows than the tokenizer has tokens (padding; see fit_vocab)
PADDED_VOCAB = ("gpt_neox",)


def read_config(directory: str | Path) -> tuple[dict, str]:
    """A hub directory's config.json, read and checked: (its fields, its family: "gpt2", "llama" or "gpt_neox")."""
    try:
        spec = json.loads((Path(directory) / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"config.json is not valid JSON ({e})") from None
    except OSError as e:
        raise ValueError(f"config.json could not be read ({e})") from None
    if not isinstance(spec, dict) or spec.get("model_type", "gpt2") not in FAMILIES:
        kind = spec.get("model_type") if isinstance(spec, dict) else None
        raise ValueError(f"config.json describes a {kind or 'model of no known type'}: this app loads GPT-2 and "
                         "Llama-architecture models (SmolLM2), and GPT-NeoX models (Pythia)")
    return spec, spec.get("model_type", "gpt2")


def fit_vocab(cfg: ModelConfig, tokens: int, family: str) -> ModelConfig:
    """The config whose vocabulary is the tokenizer's `tokens`. A model's weights may have more rows than that only
    when its family pads them (PADDED_VOCAB: Pythia, 50,304 rows for 50,277 tokens); those rows no token id reaches
    are dropped, so the model scores exactly the tokens the tokenizer can write (the kept logits are unchanged: a
    row of the unembedding scores its own token only) and generation can never pick a padding id."""
    if tokens == cfg.vocab_size:
        return cfg
    if family in PADDED_VOCAB and tokens < cfg.vocab_size:
        return replace(cfg, vocab_size=tokens)
    raise ValueError(f"the tokenizer has {tokens} tokens but the model expects {cfg.vocab_size}")


def model_config(directory: str | Path) -> ModelConfig:
    """Our ModelConfig for a hub directory, from its config.json alone (no weights read). A padded vocabulary
    (Pythia's) is the model's as load_pretrained keeps it, the tokenizer's size, from tokenizer.json."""
    spec, family = read_config(directory)
    cfg = FAMILIES[family][0](spec)
    if family in PADDED_VOCAB:
        cfg = fit_vocab(cfg, load_tokenizer_json(Path(directory) / "tokenizer.json").vocab_size, family)
    return cfg


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The named tensors of the directory's model.safetensors, or else of its pytorch_model.bin. A .bin is read
    with weights_only=True (PyTorch's restricted unpickler: tensors and plain containers, never an object's code)
    and memory-mapped, so its float16 weights are copied once, into float32 (by _owned), not read twice."""
    if (directory / "model.safetensors").is_file():
        try:
            return load_file(directory / "model.safetensors")
        except (SafetensorError, OSError) as e:
            raise ValueError(f"model.safetensors could not be read ({e})") from None
    try:
        try:
            tensors = torch.load(directory / "pytorch_model.bin", weights_only=True, mmap=True, map_location="cpu")
        except RuntimeError as e:
            if "mmap" not in str(e):            # only files in the zip format (PyTorch 1.6 and later) map
                raise
            tensors = torch.load(directory / "pytorch_model.bin", weights_only=True, map_location="cpu")
    except (pickle.UnpicklingError, RuntimeError, OSError, EOFError, ValueError) as e:
        raise ValueError(f"pytorch_model.bin could not be read as weights ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else 'no detail'})") from None
    if not isinstance(tensors, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                for k, v in tensors.items()):
        raise ValueError("pytorch_model.bin holds something other than named tensors")
    return tensors


def load_pretrained(directory: str | Path) -> Bundle:
    """A GPT-2, Llama-architecture (SmolLM2) or GPT-NeoX (Pythia) directory in the hub's layout (config.json,
    model.safetensors or pytorch_model.bin, tokenizer.json) as a Bundle, the model in eval mode; a missing or broken
    file raises ValueError saying which."""
    directory = Path(directory)
    missing = [f for f in ("config.json", "tokenizer.json") if not (directory / f).is_file()]
    if not any((directory / f).is_file() for f in WEIGHT_FILES):
        missing.insert(1, " or ".join(WEIGHT_FILES))
    if missing:
        raise ValueError(f"{directory} lacks {', '.join(missing)}")
    spec, family = read_config(directory)
    config_of, convert, facts = FAMILIES[family]
    cfg = config_of(spec)
    tensors = read_weights(directory)
    tokenizer = load_tokenizer_json(directory / "tokenizer.json")
    cfg = fit_vocab(cfg, tokenizer.vocab_size, family)
    try:
        weights = convert(tensors, cfg)
    except KeyError as e:
        raise ValueError(f"the model file lacks the weight {e}") from None
    del tensors                                # the file's (memory-mapped) tensors: only the copies are kept
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
    if cfg.tie_embeddings:
        model.unembed.weight = model.embed.tok.weight      # one matrix, as in GPT-2 and SmolLM2
    facts = {**facts, "source": hub_repo(directory) or str(spec.get("_name_or_path") or facts["source"]),
             "parameters": sum(p.numel() for p in model.parameters()),
             "finite": True}                   # every weight checked above: the app need not check them again
    return Bundle(model.eval(), tokenizer, facts)


def hub_repo(directory: Path) -> str | None:
    """The repository whose files a Hugging Face cache's snapshot holds (.../models--EleutherAI--pythia-160m/
    snapshots/<commit>/ -> "EleutherAI/pythia-160m"), or None for a directory elsewhere."""
    repo = directory.parent.parent.name
    if directory.parent.name != "snapshots" or not repo.startswith("models--"):
        return None
    return repo.removeprefix("models--").replace("--", "/")
