"""The instrumented transformer: what it computes, what it reports, and what it refuses.

The heart of this file is a NumPy forward pass written from the equations (not from model code) that
every switch combination must match, name by name, to 1e-5.
"""
import itertools
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from model.config import ACTIVATIONS, NORM_KINDS, NORM_POSITIONS, POS_KINDS, ModelConfig
from model.edits import combine, knock_out_head, remove_positions, remove_scaling, skip_mlp
from model.transformer import TransformerLM

SMALL = dict(vocab_size=23, d_model=12, n_heads=3, n_layers=2, d_ff=20, max_len=9)
B, T, D, H, K, F, V = 2, 7, 12, 3, 4, 20, 23   # T < max_len: the tables are sliced
EPS = 1e-5


def make_model(seed=0, noise=0.3, perturb_norms=True, **switches) -> TransformerLM:
    """A small model whose weights are noisy enough that attention, norms and activations all matter."""
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**(SMALL | switches))).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if perturb_norms or "norm" not in name:
                p.add_(noise * torch.randn_like(p))
    return model


def random_tokens(seed=1, batch=B, length=T) -> torch.Tensor:
    return torch.randint(0, V, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------------
# A reference forward pass in float64 NumPy, from the equations.

def reference_forward(model: TransformerLM, tokens: torch.Tensor) -> dict[str, np.ndarray]:
    """Every trace value, computed from `model.state_dict()` alone."""
    cfg = model.cfg
    W = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    tokens = tokens.numpy()
    b, t = tokens.shape
    d, h = cfg.d_model, cfg.n_heads
    g = h if cfg.n_kv_heads is None else cfg.n_kv_heads              # key/value heads
    k = d // h
    out = {}

    def linear(x, prefix):                                           # with a bias when the model has one
        y = x @ W[f"{prefix}.weight"].T
        return y + W[f"{prefix}.bias"] if f"{prefix}.bias" in W else y

    def norm(x, prefix):
        if cfg.norm == "layer":
            mean = x.mean(-1, keepdims=True)
            var = ((x - mean) ** 2).mean(-1, keepdims=True)
            return (x - mean) / np.sqrt(var + cfg.norm_eps) * W[f"{prefix}.weight"] + W[f"{prefix}.bias"]
        if cfg.norm == "rms":
            return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + cfg.norm_eps) * W[f"{prefix}.weight"]
        return x

    def heads(x, n):                                                     # (b, t, n k) -> (b, n, t, k)
        return x.reshape(b, t, n, k).transpose(0, 2, 1, 3)

    def activation(x):
        if cfg.activation == "relu":
            return np.maximum(x, 0.0)
        if cfg.activation == "gelu_tanh":                                # GPT-2's approximation
            return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))

    # RoPE (Su et al.), in Llama's and GPT-NeoX's layout: of a head's k dimensions the first r = int(k fraction)
    # turn, dimensions j and j + r/2 forming pair j, turned by the angle position * theta^(-2j/r), as the point
    # (a, b) -> (a cos - b sin, a sin + b cos); the other k - r pass through
    r = int(k * cfg.rotary_fraction)
    angle = np.arange(t)[:, None] * cfg.rope_theta ** (-np.arange(0, r, 2) / r)     # (t, r/2)

    def rotate(x):                                                       # (b, n, t, k)
        a, c, rest = x[..., :r // 2], x[..., r // 2:r], x[..., r:]
        cos, sin = np.cos(angle), np.sin(angle)
        return np.concatenate([a * cos - c * sin, a * sin + c * cos, rest], axis=-1)

    tok = W["embed.tok.weight"][tokens] * (math.sqrt(d) if cfg.embed_scale else 1.0)
    if cfg.pos == "rope":
        out["embed.rope"] = np.broadcast_to(angle, (b, t, r // 2))
    if cfg.pos == "sinusoidal":
        p = np.arange(t)[:, None]
        angle = p / 10000.0 ** (np.arange(0, d, 2) / d)
        pe = np.zeros((t, d))
        pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    elif cfg.pos == "learned":
        pe = W["embed.pos.weight"][:t]
    else:
        pe = np.zeros((t, d))
    pos = np.broadcast_to(pe, (b, t, d))
    out["embed.tok"], out["embed.pos"], out["embed.out"] = tok, pos, tok + pos

    x = tok + pos
    pre = cfg.norm_position == "pre"
    future = np.triu(np.ones((t, t), dtype=bool), 1)
    for i in range(cfg.n_layers):
        n = f"blocks.{i}"
        out[f"{n}.resid_pre"] = x
        a_in = norm(x, f"{n}.norm1") if pre else x
        q = heads(linear(a_in, f"{n}.attn.W_q"), h)                      # (b, h, t, k)
        kk, v = (heads(linear(a_in, f"{n}.attn.W_{w}"), g) for w in "kv")   # (b, g, t, k)
        if cfg.pos == "rope":
            out[f"{n}.attn.q_unrotated"], out[f"{n}.attn.k_unrotated"] = q, kk
            q, kk = rotate(q), rotate(kk)
        scores = np.stack([q[:, i] @ kk[:, i * g // h].transpose(0, 2, 1) for i in range(h)], 1) / math.sqrt(k)
        masked = np.where(future, -np.inf, scores)
        e = np.exp(masked - masked.max(-1, keepdims=True))
        pattern = e / e.sum(-1, keepdims=True)
        z = np.stack([pattern[:, i] @ v[:, i * g // h] for i in range(h)], 1)   # head i reads key/value head i g/h
        a_out = linear(z.transpose(0, 2, 1, 3).reshape(b, t, d), f"{n}.attn.W_o")
        mid = x + a_out if pre else norm(x + a_out, f"{n}.norm1")
        # a parallel block's MLP reads the stream entering the block (GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x)))
        m_in = norm(x if cfg.parallel else mid, f"{n}.norm2") if pre else mid
        if cfg.activation == "swiglu":                                   # SiLU(gate) x up
            gate, up = linear(m_in, f"{n}.mlp.W_gate"), linear(m_in, f"{n}.mlp.W_up")
            m_post = gate * 0.5 * (1.0 + np.tanh(gate / 2)) * up     # gate x sigmoid(gate) x up
            out.update({f"{n}.mlp.gate": gate, f"{n}.mlp.up": up})
        else:
            m_pre = linear(m_in, f"{n}.mlp.W_in")
            m_post = activation(m_pre)
            out[f"{n}.mlp.pre"] = m_pre
        m_out = linear(m_post, f"{n}.mlp.W_out")
        post = mid + m_out if pre else norm(mid + m_out, f"{n}.norm2")
        out.update({f"{n}.attn.in": a_in, f"{n}.attn.q": q, f"{n}.attn.k": kk, f"{n}.attn.v": v,
                    f"{n}.attn.scores": scores, f"{n}.attn.pattern": pattern, f"{n}.attn.z": z,
                    f"{n}.attn.out": a_out, f"{n}.resid_mid": mid, f"{n}.mlp.in": m_in,
                    f"{n}.mlp.post": m_post, f"{n}.mlp.out": m_out, f"{n}.resid_post": post})
        x = post
    final = norm(x, "final_norm") if pre else x
    out["final.norm"], out["logits"] = final, linear(final, "unembed")
    return out


KV_HEADS = (None, 1)                 # SMALL's 3 heads: a key/value head each, or one shared by all (multi-query)
BIASES = (True, False)
BLOCKS = ("sequential", "parallel")  # attention then the MLP, or side by side (pre-norm only)
SWITCHES = [combo for combo in itertools.product(POS_KINDS, NORM_KINDS, NORM_POSITIONS, ACTIVATIONS, KV_HEADS, BIASES,
                                                 BLOCKS) if not (combo[2] == "post" and combo[-1] == "parallel")]


def switch_id(combo):
    return "-".join(str(s) if not isinstance(s, int) or isinstance(s, bool) else f"kv{s}" for s in combo) \
        .replace("None", "kv-all").replace("True", "bias").replace("False", "no-bias")


def assert_matches_reference(model, tokens):
    """Every traced value within 1e-5 of the reference's, times the value's scale (its largest entry) when that is
    above 1: float32 keeps about 7 digits of the largest number in a sum, and without a norm a gated MLP's
    products grow to tens."""
    trace = model.run(tokens)
    expected = reference_forward(model, tokens)
    assert set(expected) == set(model.trace_names) - {"tokens"}
    for name, value in expected.items():
        scale = max(1.0, float(np.abs(value[np.isfinite(value)]).max(initial=0.0)))
        np.testing.assert_allclose(trace[name].double().numpy(), value, rtol=0, atol=1e-5 * scale, err_msg=name)


@pytest.mark.parametrize("pos, norm, norm_position, activation, n_kv_heads, bias, block", SWITCHES,
                         ids=map(switch_id, SWITCHES))
def test_every_switch_combination_matches_a_numpy_forward_pass_written_from_the_equations(
        pos, norm, norm_position, activation, n_kv_heads, bias, block):
    # embed_scale flips with the parity of the combination, so it meets every value of every other switch; rotary
    # positions turn half of each head's 4 dimensions (Pythia turns a quarter) with the parity of all but the bias,
    # so each fraction meets every other switch's values, embed_scale's too
    parities = [kinds.index(s) for kinds, s in zip(
        (POS_KINDS, NORM_KINDS, NORM_POSITIONS, ACTIVATIONS, KV_HEADS, BIASES, BLOCKS),
        (pos, norm, norm_position, activation, n_kv_heads, bias, block))]
    embed_scale = sum(parities) % 2 == 1
    rotary_fraction = 0.5 if (sum(parities) - parities[5]) % 2 else 1.0
    model = make_model(pos=pos, norm=norm, norm_position=norm_position, activation=activation,
                       embed_scale=embed_scale, n_kv_heads=n_kv_heads, bias=bias, rope_theta=7.0,
                       parallel=block == "parallel", rotary_fraction=rotary_fraction)
    assert model.cfg.pos != "rope" or model.cfg.d_rotary == 4 * rotary_fraction
    assert_matches_reference(model, random_tokens())


@pytest.mark.parametrize("rotary_fraction", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("parallel", [False, True])
def test_partial_rotary_positions_and_parallel_blocks_match_the_numpy_forward_pass(rotary_fraction, parallel):
    """Eight dimensions per head, of which 2, 4, 6 or 8 turn; GPT-NeoX's switches (LayerNorm, exact GELU)."""
    model = make_model(d_model=24, n_heads=3, pos="rope", rotary_fraction=rotary_fraction, parallel=parallel,
                       activation="gelu", rope_theta=10_000.0)
    assert model.cfg.d_rotary == 8 * rotary_fraction
    assert_matches_reference(model, random_tokens())


@pytest.mark.parametrize("n_kv_heads", [6, 3, 2, 1])
@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_grouped_key_value_heads_match_the_numpy_forward_pass_for_every_group_size(pos, n_kv_heads):
    """Six query heads sharing 6, 3, 2 or 1 key/value heads (groups of 1, 2, 3 and 6), with the Llama switches."""
    model = make_model(d_model=24, n_heads=6, n_kv_heads=n_kv_heads, pos=pos, norm="rms", activation="swiglu",
                       bias=False, tie_embeddings=True, rope_theta=100_000.0)
    assert_matches_reference(model, random_tokens())


@pytest.mark.parametrize("pos", ["sinusoidal", "learned"])
def test_a_full_context_matches_the_numpy_forward_pass_too(pos):
    model, tokens = make_model(pos=pos), random_tokens(length=SMALL["max_len"])
    trace, expected = model.run(tokens), reference_forward(model, tokens)
    for name, value in expected.items():
        np.testing.assert_allclose(trace[name].double().numpy(), value, rtol=0, atol=1e-5, err_msg=name)


def test_the_reference_would_notice_a_wrong_model():
    """Guard against a reference that agrees with anything: nudge one weight and it must disagree."""
    model, tokens = make_model(), random_tokens()
    expected = reference_forward(model, tokens)["logits"]
    with torch.no_grad():
        model.unembed.weight[0, 0] += 1e-3
    assert not np.allclose(model.run(tokens)["logits"].double().numpy(), expected, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------------------
# The trace: names, shapes and the arithmetic that ties them together.

SHAPES = {"tokens": (B, T), "embed.tok": (B, T, D), "embed.pos": (B, T, D), "embed.out": (B, T, D),
          "resid_pre": (B, T, D), "attn.in": (B, T, D), "attn.q": (B, H, T, K), "attn.k": (B, H, T, K),
          "attn.v": (B, H, T, K), "attn.scores": (B, H, T, T), "attn.pattern": (B, H, T, T),
          "attn.z": (B, H, T, K), "attn.out": (B, T, D), "resid_mid": (B, T, D), "mlp.in": (B, T, D),
          "mlp.pre": (B, T, F), "mlp.post": (B, T, F), "mlp.out": (B, T, D), "resid_post": (B, T, D),
          "final.norm": (B, T, D), "logits": (B, T, V)}


def documented_shape(name: str) -> tuple:
    return SHAPES[name.split(".", 2)[2] if name.startswith("blocks.") else name]


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_the_trace_holds_every_name_with_its_documented_shape(norm_position):
    model = make_model(norm_position=norm_position)
    trace = model.run(random_tokens())
    assert list(trace) == model.trace_names
    assert len(model.trace_names) == 4 + 15 * SMALL["n_layers"] + 2
    for name in model.trace_names:
        assert tuple(trace[name].shape) == documented_shape(name), name


G = 1                                            # the Llama-like model's key/value heads (multi-query)
LLAMA_SHAPES = {"embed.rope": (B, T, K // 2), "attn.q_unrotated": (B, H, T, K), "attn.k_unrotated": (B, G, T, K),
                "attn.k": (B, G, T, K), "attn.v": (B, G, T, K), "mlp.gate": (B, T, F), "mlp.up": (B, T, F)}


def test_rotary_positions_grouped_heads_and_a_gated_mlp_add_their_names_with_their_shapes():
    model = make_model(pos="rope", n_kv_heads=G, activation="swiglu", norm="rms", bias=False)
    trace = model.run(random_tokens())
    assert list(trace) == model.trace_names
    assert len(model.trace_names) == 5 + 18 * SMALL["n_layers"] + 2        # + embed.rope; + 4 - mlp.pre a block
    assert "blocks.0.mlp.pre" not in trace                                   # a gated MLP has a gate instead
    for name in model.trace_names:
        short = name.split(".", 2)[2] if name.startswith("blocks.") else name
        assert tuple(trace[name].shape) == LLAMA_SHAPES.get(short, SHAPES.get(short)), name
    assert trace["gate", 1] is trace["blocks.1.mlp.gate"] and trace["q_unrotated", 0] is trace["blocks.0.attn.q_unrotated"]


def test_rotary_positions_turn_each_pair_of_dimensions_and_keep_its_length():
    model = make_model(pos="rope", rope_theta=100.0)
    trace = model.run(random_tokens())
    q, before = trace["blocks.1.attn.q"], trace["blocks.1.attn.q_unrotated"]
    pair_length = lambda x: x[..., :K // 2] ** 2 + x[..., K // 2:] ** 2  # noqa: E731   pair i: dims i and i + K/2
    torch.testing.assert_close(pair_length(q), pair_length(before))
    torch.testing.assert_close(q[:, :, 0], before[:, :, 0], rtol=0, atol=0)    # position 0 turns by 0
    angles = trace["embed.rope"][0]                                              # (T, K/2)
    torch.testing.assert_close(angles[1], 100.0 ** (-torch.arange(0, K, 2) / K))  # position 1: one step of each
    torch.testing.assert_close(angles, torch.arange(T)[:, None] * angles[1])      # grows with the position


def test_partial_rotary_positions_turn_the_first_dimensions_of_each_head_and_leave_the_rest_alone():
    """Pythia turns a quarter of each head: here 4 of K = 16 dimensions, pairs (0, 2) and (1, 3)."""
    model = make_model(d_model=32, n_heads=2, pos="rope", rotary_fraction=0.25, rope_theta=100.0, n_kv_heads=1)
    trace = model.run(random_tokens())
    R = model.cfg.d_rotary
    assert R == 4 and tuple(trace["embed.rope"].shape) == (B, T, R // 2)
    for name in ("q", "k"):
        turned, before = trace[f"blocks.1.attn.{name}"], trace[f"blocks.1.attn.{name}_unrotated"]
        assert torch.equal(turned[..., R:], before[..., R:])                      # 12 dimensions pass through
        assert not torch.allclose(turned[..., :R], before[..., :R])               # the first 4 turn
        pair_length = lambda x: x[..., :R // 2] ** 2 + x[..., R // 2:R] ** 2  # noqa: E731   pair i: dims i, i + R/2
        torch.testing.assert_close(pair_length(turned), pair_length(before))
    torch.testing.assert_close(trace["embed.rope"][0, 1], 100.0 ** (-torch.arange(0, R, 2) / R))  # frequencies over R

def test_scores_of_grouped_heads_are_each_query_head_against_its_key_value_head():
    model = make_model(d_model=24, n_heads=6, n_kv_heads=2)
    trace = model.run(random_tokens())
    q, k, v = (trace[f"blocks.0.attn.{s}"] for s in "qkv")                     # k, v: (B, 2, T, K)
    assert k.shape[1] == 2 and q.shape[1] == 6
    for h in range(6):
        group = h // 3                                                           # heads 0-2 read 0, heads 3-5 read 1
        torch.testing.assert_close(trace["blocks.0.attn.scores"][:, h], q[:, h] @ k[:, group].transpose(-2, -1) / 2.0)
        torch.testing.assert_close(trace["blocks.0.attn.z"][:, h], trace["blocks.0.attn.pattern"][:, h] @ v[:, group])


def test_without_biases_no_linear_layer_has_one():
    model = make_model(bias=False, activation="swiglu")
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 1 + 7 * SMALL["n_layers"] and all(m.bias is None for m in linears)
    assert any(m.bias is not None for m in make_model().modules() if isinstance(m, torch.nn.Linear))


def test_a_single_sequence_is_traced_as_a_batch_of_one():
    trace = make_model().run([3, 1, 4, 1, 5])
    assert trace["tokens"].tolist() == [[3, 1, 4, 1, 5]]
    assert tuple(trace["logits"].shape) == (1, 5, V)


def test_attention_patterns_are_causal_distributions():
    trace = make_model().run(random_tokens())
    above = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(SMALL["n_layers"]):
        pattern = trace[f"blocks.{i}.attn.pattern"]
        torch.testing.assert_close(pattern.sum(-1), torch.ones(B, H, T), rtol=0, atol=1e-6)
        assert (pattern[..., above] == 0).all()
        assert (pattern[..., ~above] > 0).all()
        assert pattern[0, 0, 0, 0] == 1  # the first position can only look at itself


def test_scores_are_queries_dot_keys_over_root_k_and_z_is_pattern_times_values():
    trace = make_model().run(random_tokens())
    for i in range(SMALL["n_layers"]):
        a = lambda s: trace[f"blocks.{i}.attn.{s}"]  # noqa: E731
        torch.testing.assert_close(a("scores"), a("q") @ a("k").transpose(-2, -1) / math.sqrt(K))
        torch.testing.assert_close(a("z"), a("pattern") @ a("v"))


def test_scores_before_the_mask_are_reported_for_every_query_key_pair():
    scores = make_model().run(random_tokens())["blocks.0.attn.scores"]
    assert torch.isfinite(scores).all()
    assert (scores[..., torch.ones(T, T, dtype=torch.bool).triu(1)] != 0).all()


def test_pre_norm_residual_stream_adds_each_sublayer_and_normalises_what_it_reads():
    model = make_model(norm="layer", norm_position="pre", perturb_norms=False)  # default LayerNorm: w=1, b=0
    trace = model.run(random_tokens())
    for i, block in enumerate(model.blocks):
        r = lambda s: trace[f"blocks.{i}.{s}"]  # noqa: E731
        torch.testing.assert_close(r("resid_mid"), r("resid_pre") + r("attn.out"))
        torch.testing.assert_close(r("resid_post"), r("resid_mid") + r("mlp.out"))
        torch.testing.assert_close(r("attn.in"), block.norm1(r("resid_pre")))
        torch.testing.assert_close(r("mlp.in"), block.norm2(r("resid_mid")))
        for normed in (r("attn.in"), r("mlp.in")):
            torch.testing.assert_close(normed.mean(-1), torch.zeros(B, T), rtol=0, atol=1e-5)
            torch.testing.assert_close(normed.var(-1, unbiased=False), torch.ones(B, T), rtol=0, atol=1e-3)
    torch.testing.assert_close(trace["final.norm"], model.final_norm(trace["blocks.1.resid_post"]))


def test_a_parallel_block_feeds_both_sublayers_the_stream_entering_it_and_adds_both():
    """GPT-NeoX (Pythia): resid_post = resid_pre + attn.out + mlp.out; resid_mid is the stream with attention's share
    added, which the MLP does not read."""
    model = make_model(parallel=True)
    trace = model.run(random_tokens())
    assert list(trace) == model.trace_names and len(model.trace_names) == 4 + 15 * SMALL["n_layers"] + 2
    for i, block in enumerate(model.blocks):
        r = lambda s: trace[f"blocks.{i}.{s}"]  # noqa: E731
        torch.testing.assert_close(r("attn.in"), block.norm1(r("resid_pre")))
        torch.testing.assert_close(r("mlp.in"), block.norm2(r("resid_pre")))
        torch.testing.assert_close(r("resid_mid"), r("resid_pre") + r("attn.out"))
        torch.testing.assert_close(r("resid_post"), r("resid_pre") + r("attn.out") + r("mlp.out"))
        assert not torch.allclose(r("mlp.in"), block.norm2(r("resid_mid")))


def test_an_edit_on_a_parallel_blocks_resid_mid_reaches_resid_post_but_not_what_the_mlp_reads():
    model, tokens = make_model(parallel=True), random_tokens()
    before = model.run(tokens)
    after = model.run(tokens, edits={"blocks.0.resid_mid": lambda x: x + 1.0})
    assert torch.equal(after["blocks.0.mlp.in"], before["blocks.0.mlp.in"])
    torch.testing.assert_close(after["blocks.0.resid_post"], before["blocks.0.resid_post"] + 1.0)
    assert not torch.allclose(after["logits"], before["logits"])

def test_post_norm_sublayers_read_the_stream_and_normalise_the_sum():
    model = make_model(norm="layer", norm_position="post")
    trace = model.run(random_tokens())
    for i, block in enumerate(model.blocks):
        r = lambda s: trace[f"blocks.{i}.{s}"]  # noqa: E731
        assert torch.equal(r("attn.in"), r("resid_pre"))
        assert torch.equal(r("mlp.in"), r("resid_mid"))
        torch.testing.assert_close(r("resid_mid"), block.norm1(r("resid_pre") + r("attn.out")))
        torch.testing.assert_close(r("resid_post"), block.norm2(r("resid_mid") + r("mlp.out")))
    assert torch.equal(trace["final.norm"], trace["blocks.1.resid_post"])  # no final norm after post-norm


@pytest.mark.parametrize("pos", POS_KINDS)
def test_embedding_output_is_tokens_plus_positions(pos):
    trace = make_model(pos=pos).run(random_tokens())
    torch.testing.assert_close(trace["embed.out"], trace["embed.tok"] + trace["embed.pos"])
    assert torch.equal(trace["embed.pos"][0], trace["embed.pos"][1])  # positions do not depend on the words
    assert (trace["embed.pos"] == 0).all() == (pos in ("none", "rope"))     # rotary positions add nothing


def test_embed_scale_multiplies_token_embeddings_by_root_d():
    tokens = random_tokens()
    plain = make_model(embed_scale=False).run(tokens)["embed.tok"]
    scaled = make_model(embed_scale=True).run(tokens)["embed.tok"]
    torch.testing.assert_close(scaled, plain * math.sqrt(D))


def test_each_block_starts_where_the_previous_one_ended():
    trace = make_model(n_layers=3).run(random_tokens())
    assert torch.equal(trace["blocks.0.resid_pre"], trace["embed.out"])
    for i in range(2):
        assert torch.equal(trace[f"blocks.{i + 1}.resid_pre"], trace[f"blocks.{i}.resid_post"])


def test_traced_logits_equal_the_training_forward_and_predict():
    model, tokens = make_model(), random_tokens()
    logits = model.run(tokens)["logits"]
    torch.testing.assert_close(logits, model(tokens).detach(), rtol=0, atol=0)
    torch.testing.assert_close(logits, model.predict(tokens), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------
# Causality.

def positions_before(name: str, x: torch.Tensor, t: int) -> torch.Tensor:
    """The part of a traced value that belongs to positions before t."""
    if name.endswith(".scores"):                 # scores are reported before the mask: query and key < t
        return x[:, :, :t, :t]
    if x.dim() == 4:                             # q, k, v, z by position; pattern by query
        return x[:, :, :t]
    return x[:, :t]                              # tokens, and every [B, T, ...] value


@pytest.mark.parametrize("norm_position", NORM_POSITIONS)
def test_changing_a_token_changes_nothing_before_it_and_something_at_it(norm_position):
    model, tokens = make_model(norm_position=norm_position), random_tokens()
    base = model.run(tokens)
    for t in range(T):
        changed = tokens.clone()
        changed[:, t] = (changed[:, t] + 1) % V
        trace = model.run(changed)
        for name in model.trace_names:
            assert torch.equal(positions_before(name, trace[name], t), positions_before(name, base[name], t)), \
                (name, t)
        assert not torch.allclose(trace["logits"][:, t], base["logits"][:, t])


def test_lifting_the_mask_lets_later_tokens_change_earlier_positions():
    model, tokens = make_model(), random_tokens()
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    assert torch.equal(model.run(tokens)["logits"][:, 0], model.run(changed)["logits"][:, 0])
    base, other = model.run(tokens, causal=False), model.run(changed, causal=False)
    assert not torch.allclose(base["logits"][:, 0], other["logits"][:, 0])
    assert (base["blocks.0.attn.pattern"][..., torch.ones(T, T, dtype=torch.bool).triu(1)] > 0).all()


# ---------------------------------------------------------------------------------------------------
# A shared model: the trace is a value, nothing is left behind, and threads do not interfere.

def test_the_trace_is_read_only_and_detached():
    model = make_model().train()
    with torch.enable_grad():
        trace = model.run(random_tokens())
    with pytest.raises(TypeError):
        trace["logits"] = torch.zeros(1)
    with pytest.raises(TypeError):
        del trace["logits"]
    assert all(not value.requires_grad for value in trace.values())
    with pytest.raises(KeyError, match="no value named"):
        trace["blocks.9.attn.z"]


@pytest.mark.parametrize("pos", ["learned", "sinusoidal"])
def test_writing_into_a_trace_cannot_change_the_shared_model(pos):
    """A page that edits a traced tensor in place (say, to normalise it for a plot) must not corrupt the
    model every other visitor uses."""
    model, tokens = make_model(pos=pos), [3, 1, 4, 1, 5]
    before = {name: value.clone() for name, value in model.run(tokens).items()}
    for value in model.run(tokens).values():
        value.add_(1)
    after = model.run(tokens)
    assert [name for name in model.trace_names if not torch.equal(after[name], before[name])] == []


def module_snapshot(model: TransformerLM) -> dict:
    """Everything a forward pass could leave behind on the modules."""
    return {name: (sorted(vars(m)), sorted(m._parameters), sorted(m._buffers), sorted(m._modules),
                   m.training, len(m._forward_hooks), len(m._forward_pre_hooks))
            for name, m in model.named_modules()}


def tensors_of(model: TransformerLM) -> dict[str, torch.Tensor]:
    """Parameters and every buffer, including ones left out of the state_dict."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    return state | {f"buffer:{k}": v.clone() for k, v in model.named_buffers()}


@pytest.mark.parametrize("edits", [None, combine(knock_out_head(0, 1), remove_positions(), skip_mlp(1),
                                                  remove_scaling(ModelConfig(**SMALL)))],
                         ids=["no-edits", "edits"])
@pytest.mark.parametrize("switches", [dict(pos="sinusoidal"), dict(pos="rope", n_kv_heads=1, activation="swiglu")],
                         ids=["sinusoidal", "llama-like"])
def test_running_leaves_nothing_on_the_modules(edits, switches):
    model = make_model(**switches)
    modules, tensors = module_snapshot(model), tensors_of(model)
    model.run(random_tokens(), edits=edits)
    model.run(random_tokens(), edits=edits, causal=False)
    _, cache = model.read(random_tokens()[:, :4])                               # generation's pass, with its cache
    model.read(random_tokens()[:, :2], cache)
    assert module_snapshot(model) == modules
    after = tensors_of(model)
    assert after.keys() == tensors.keys()
    assert all(torch.equal(after[k], tensors[k]) for k in tensors)


def test_run_turns_dropout_off_even_in_train_mode():
    model, tokens = make_model(dropout=0.5), random_tokens()
    model.train()
    assert not torch.equal(model(tokens), model(tokens))  # dropout really is active in the training pass
    first, second = model.run(tokens), model.run(tokens)
    assert model.training
    model.eval()
    evaluated = model.run(tokens)
    for name in model.trace_names:
        assert torch.equal(first[name], second[name]) and torch.equal(first[name], evaluated[name]), name
    torch.testing.assert_close(model.train().predict(tokens), evaluated["logits"], rtol=0, atol=0)


def test_four_threads_running_at_once_each_get_their_own_result():
    model = make_model()
    inputs = [random_tokens(seed=s) for s in range(4)]
    expected = [model.run(x) for x in inputs]
    start = threading.Barrier(4)

    def visitor(x):
        start.wait()
        return [model.run(x) for _ in range(10)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(visitor, inputs))
    for want, got_all in zip(expected, results):
        for got in got_all:
            for name in model.trace_names:
                assert torch.equal(got[name], want[name]), name


# ---------------------------------------------------------------------------------------------------
# Bad input gets a ValueError a student can act on.

def test_heads_must_divide_the_width():
    with pytest.raises(ValueError, match="d_model 30 is not divisible by n_heads 4"):
        ModelConfig(d_model=30, n_heads=4)


@pytest.mark.parametrize("field, value, message", [
    ("pos", "rotary", "pos must be one of sinusoidal, learned, none"),
    ("norm", "batch", "norm must be one of layer, rms, none"),
    ("norm_position", "middle", "norm_position must be one of pre, post"),
    ("activation", "tanh", "activation must be one of relu, gelu, gelu_tanh"),
    ("vocab_size", 0, "vocab_size must be between 1"),
    ("d_model", -4, "d_model must be between 1"),
    ("n_heads", 0, "n_heads must be between 1"),
    ("n_layers", -1, "n_layers must be between 1"),
    ("d_ff", 0, "d_ff must be between 1"),
    ("max_len", 0, "max_len must be between 1"),
    ("d_model", 2.5, "d_model must be a whole number"),
    ("n_layers", True, "n_layers must be a whole number"),
    ("dropout", 1.0, "dropout must be at least 0 and below 1"),
    ("dropout", -0.1, "dropout must be at least 0 and below 1"),
    ("embed_scale", "yes", "embed_scale must be true or false"),
    ("tie_embeddings", 1, "tie_embeddings must be true or false"),
    ("norm_eps", 0.0, "norm_eps must be a small positive number"),
    ("norm_eps", "1e-5", "norm_eps must be a small positive number"),
    ("vocab_size", 51_201, "vocab_size must be between 1 and 51200"),
    ("n_layers", 33, "n_layers must be between 1 and 32"),
    ("n_kv_heads", 3, "n_kv_heads must be a whole number that divides n_heads 2"),
    ("n_kv_heads", 0, "n_kv_heads must be a whole number that divides n_heads"),
    ("n_kv_heads", 1.0, "n_kv_heads must be a whole number"),
    ("rope_theta", 1.0, "rope_theta must be a number above 1"),
    ("rope_theta", True, "rope_theta must be a number above 1"),
    ("bias", "no", "bias must be true or false"),
    ("parallel", 1, "parallel must be true or false"),
    ("rotary_fraction", 0.0, "rotary_fraction must be a number above 0 and at most 1"),
    ("rotary_fraction", 1.5, "rotary_fraction must be a number above 0 and at most 1"),
    ("rotary_fraction", "1/4", "rotary_fraction must be a number above 0 and at most 1"),
])
def test_a_bad_config_value_is_refused_by_name(field, value, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**{field: value})


def test_a_config_round_trips_through_a_dict_and_refuses_unknown_or_missing_fields():
    cfg = ModelConfig(**SMALL, pos="learned", norm="rms")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown config fields: colour"):
        ModelConfig.from_dict(cfg.to_dict() | {"colour": "red"})
    missing = cfg.to_dict()
    del missing["n_heads"]
    with pytest.raises(ValueError, match="missing config fields: n_heads"):
        ModelConfig.from_dict(missing)
    with pytest.raises(ValueError, match="JSON object"):
        ModelConfig.from_dict([1, 2])


@pytest.mark.parametrize("tokens, message", [
    ([], "empty"),
    (list(range(10)), "10 tokens is more than this model's context of 9"),
    ([1, 23], "between 0 and 22"),
    ([-1, 2], "between 0 and 22"),
    ([[[1, 2]]], "tokens must be a list or a"),
])
def test_run_refuses_tokens_it_cannot_read(tokens, message):
    with pytest.raises(ValueError, match=message):
        make_model().run(tokens)


def test_run_refuses_an_edit_on_a_name_the_trace_does_not_have():
    with pytest.raises(ValueError, match="cannot edit blocks.5.attn.z"):
        make_model().run([1, 2, 3], edits={"blocks.5.attn.z": lambda z: z})


@pytest.mark.parametrize("edit, got", [(lambda x: x[:, :1], r"\(1, 1, 12\)"), (lambda x: 0.0, "float")])
def test_an_edit_that_returns_the_wrong_shape_is_refused(edit, got):
    with pytest.raises(ValueError, match=rf"edit for blocks.0.attn.out must return a tensor of shape \(1, 3, 12\), got {got}"):
        make_model().run([1, 2, 3], edits={"blocks.0.attn.out": edit})


def test_a_config_from_before_the_gpt2_and_llama_fields_takes_their_defaults():
    old = ModelConfig().to_dict()
    for name in ("tie_embeddings", "norm_eps", "n_kv_heads", "rope_theta", "bias", "parallel", "rotary_fraction"):
        del old[name]                                            # as model/checkpoints/*.json were written
    cfg = ModelConfig.from_dict(old)
    assert cfg.tie_embeddings is False and cfg.norm_eps == 1e-5 and cfg.parallel is False
    assert cfg.rotary_fraction == 1.0 and cfg.d_rotary == cfg.d_head
    assert cfg.n_kv_heads is None and cfg.kv_heads == cfg.n_heads and cfg.bias is True and cfg.rope_theta == 10_000


def test_rotary_positions_need_an_even_number_of_dimensions_per_head():
    with pytest.raises(ValueError, match="rotary positions turn pairs of dimensions.*= 3"):
        ModelConfig(d_model=9, n_heads=3, pos="rope")
    assert ModelConfig(d_model=9, n_heads=3, pos="learned").d_head == 3


@pytest.mark.parametrize("d_model, n_heads, fraction, turned", [(12, 3, 0.25, 1), (24, 2, 0.25, 3), (32, 2, 0.1, 1)])
def test_the_turned_part_of_a_head_needs_an_even_number_of_dimensions_at_least_two(d_model, n_heads, fraction,
                                                                                    turned):
    with pytest.raises(ValueError, match=rf"the turned part of a head .* rotary_fraction {fraction}\) = {turned}"):
        ModelConfig(d_model=d_model, n_heads=n_heads, pos="rope", rotary_fraction=fraction)
    assert ModelConfig(d_model=d_model, n_heads=n_heads, pos="learned", rotary_fraction=fraction).d_rotary == turned
    assert ModelConfig(d_model=512, n_heads=8, pos="rope", rotary_fraction=0.25).d_rotary == 16     # Pythia-70M's


def test_a_parallel_block_needs_pre_norm():
    with pytest.raises(ValueError, match='a parallel block needs norm_position "pre"'):
        ModelConfig(parallel=True, norm_position="post")


def test_gpt2_small_fits_the_limits():
    cfg = ModelConfig(vocab_size=50_257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024,
                      pos="learned", activation="gelu_tanh", tie_embeddings=True)
    assert cfg.d_head == 64


@pytest.mark.parametrize("eps", [1e-5, 0.05])
def test_tied_embeddings_and_tanh_gelu_match_the_reference(eps):
    model = make_model(tie_embeddings=True, activation="gelu_tanh", pos="learned", norm_eps=eps)
    assert model.unembed.weight is model.embed.tok.weight                       # one matrix, two uses
    tokens = random_tokens()
    trace, expected = model.run(tokens), reference_forward(model, tokens)
    for name, value in expected.items():
        np.testing.assert_allclose(trace[name].double().numpy(), value, rtol=0, atol=1e-5, err_msg=name)
    exact_gelu = make_model(tie_embeddings=True, activation="gelu", pos="learned", norm_eps=eps)
    assert not torch.allclose(exact_gelu.run(tokens)["blocks.0.mlp.post"], trace["blocks.0.mlp.post"], atol=1e-6)


def test_a_blocks_values_can_be_looked_up_by_short_name_and_layer():
    model = make_model(**SMALL)
    trace = model.run([1, 2, 3])
    assert trace["pattern", 1] is trace["blocks.1.attn.pattern"]
    assert trace["attn.q", 0] is trace["blocks.0.attn.q"] and trace["q", 0] is trace["blocks.0.attn.q"]
    assert trace["resid_mid", 1] is trace["blocks.1.resid_mid"] and trace["pre", 0] is trace["blocks.0.mlp.pre"]
    for ambiguous in ("in", "out"):
        with pytest.raises(KeyError, match="attn." + ambiguous):
            trace[ambiguous, 0]
    with pytest.raises(KeyError, match="no value named 'blocks.9.attn.pattern'"):
        trace["pattern", 9]


def test_run_can_keep_only_some_names_with_the_same_values():
    model = make_model(**SMALL)
    full = model.run([1, 2, 3, 4])
    some = model.run([1, 2, 3, 4], names=["blocks.1.attn.pattern", "logits"])
    assert list(some) == ["tokens", "blocks.1.attn.pattern", "logits"]
    torch.testing.assert_close(some["logits"], full["logits"], rtol=0, atol=0)
    torch.testing.assert_close(some["pattern", 1], full["pattern", 1], rtol=0, atol=0)
    edited = model.run([1, 2, 3, 4], edits={"blocks.0.attn.z": torch.zeros_like}, names=["logits"])
    assert not torch.equal(edited["logits"], full["logits"])                # an edit still acts on what is kept
    with pytest.raises(ValueError, match="cannot keep blocks.7.mlp.pre"):
        model.run([1, 2], names=["blocks.7.mlp.pre"])
