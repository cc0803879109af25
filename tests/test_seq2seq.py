"""The encoder-decoder (model/seq2seq.py): a NumPy forward pass from the equations for every switch, the masks,
teacher forcing against step-by-step decoding, beam search against greedy, and the trace's names."""
import itertools
import math

import numpy as np
import pytest
import torch

from model.config import ACTIVATIONS, NORM_KINDS, NORM_POSITIONS, POS_KINDS, ModelConfig
from model.seq2seq import CROSS_NAMES, EncoderDecoder, beam_search, greedy, sample

SMALL = dict(vocab_size=17, d_model=12, n_heads=3, n_layers=2, d_ff=20, max_len=10)


def make_model(seed=0, noise=0.1, **switches) -> EncoderDecoder:
    """A small model with noisy weights (and norms), so attention, masks and norms all matter."""
    torch.manual_seed(seed)
    model = EncoderDecoder(ModelConfig(**(SMALL | switches))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn_like(p))
    return model


def batch(seed=1):
    """Two sources (the second padded after 4 tokens) and two decoder inputs starting with <bos>."""
    g = torch.Generator().manual_seed(seed)
    source = torch.randint(4, 17, (2, 6), generator=g)
    source[1, 4:] = 1                                                       # padding
    target = torch.randint(4, 17, (2, 5), generator=g)
    target[:, 0] = 2                                                        # <bos>
    return source, target


# ---------------------------------------------------------------------------------------------------
# A reference forward pass in float64 NumPy, from the equations.

def reference(model: EncoderDecoder, source: torch.Tensor, target: torch.Tensor) -> dict[str, np.ndarray]:
    cfg = model.cfg
    W = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    d, h = cfg.d_model, cfg.n_heads
    g = h if cfg.n_kv_heads is None else cfg.n_kv_heads                 # key/value heads
    k = d // h
    pre = cfg.norm_position == "pre"
    out = {}

    def linear(x, prefix):                                              # with a bias when the model has one
        return x @ W[f"{prefix}.weight"].T + W.get(f"{prefix}.bias", 0)

    def norm(x, prefix):
        if cfg.norm == "layer":
            mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            return (x - mean) / np.sqrt(var + cfg.norm_eps) * W[f"{prefix}.weight"] + W[f"{prefix}.bias"]
        if cfg.norm == "rms":
            return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + cfg.norm_eps) * W[f"{prefix}.weight"]
        return x

    def act(x):
        if cfg.activation == "relu":
            return np.maximum(x, 0)
        if cfg.activation == "gelu_tanh":
            return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))

    def rotate(x):               # RoPE, Llama's layout: dims j and j + k/2 turn by position * theta^(-2j/k)
        angle = np.arange(x.shape[2])[:, None] * cfg.rope_theta ** (-np.arange(0, k, 2) / k)
        a, c = x[..., :k // 2], x[..., k // 2:]
        return np.concatenate([a * np.cos(angle) - c * np.sin(angle), a * np.sin(angle) + c * np.cos(angle)], -1)

    def embed(tokens, prefix):
        t = tokens.shape[1]
        tok = W[f"{prefix}.tok.weight"][tokens] * (math.sqrt(d) if cfg.embed_scale else 1)
        if cfg.pos == "sinusoidal":
            angle = np.arange(t)[:, None] / 10000.0 ** (np.arange(0, d, 2) / d)
            pe = np.zeros((t, d))
            pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
        else:
            pe = W[f"{prefix}.pos.weight"][:t] if cfg.pos == "learned" else np.zeros((t, d))
        return tok + pe

    def attention(x, src, prefix, allowed, name):                 # allowed: (b or 1, 1, t, s) booleans
        b, t, s = x.shape[0], x.shape[1], src.shape[1]
        q = linear(x, f"{prefix}.W_q").reshape(b, t, h, k).transpose(0, 2, 1, 3)
        kk = linear(src, f"{prefix}.W_k").reshape(b, s, g, k).transpose(0, 2, 1, 3)
        v = linear(src, f"{prefix}.W_v").reshape(b, s, g, k).transpose(0, 2, 1, 3)
        if cfg.pos == "rope" and src is x:                          # self-attention only: never across sentences
            q, kk = rotate(q), rotate(kk)
        kk, v = np.repeat(kk, h // g, axis=1), np.repeat(v, h // g, axis=1)   # query head i reads key head i g/h
        scores = q @ kk.transpose(0, 1, 3, 2) / math.sqrt(k)
        masked = np.where(allowed, scores, -np.inf)
        e = np.exp(masked - masked.max(-1, keepdims=True))
        pattern = e / e.sum(-1, keepdims=True)
        out[f"{name}.scores"], out[f"{name}.pattern"] = scores, pattern
        return linear((pattern @ v).transpose(0, 2, 1, 3).reshape(b, t, d), f"{prefix}.W_o")

    def sublayer(x, norm_prefix, f):
        return x + f(norm(x, norm_prefix)) if pre else norm(x + f(x), norm_prefix)

    def mlp(x, prefix):
        if cfg.activation == "swiglu":                              # SiLU(gate) x up
            gate = linear(x, f"{prefix}.W_gate")
            silu = gate * 0.5 * (1 + np.tanh(gate / 2))            # gate x sigmoid(gate), without overflow
            return linear(silu * linear(x, f"{prefix}.W_up"), f"{prefix}.W_out")
        return linear(act(linear(x, f"{prefix}.W_in")), f"{prefix}.W_out")

    src, tgt = source.numpy(), target.numpy()
    keep = (src != 1)[:, None, None, :]                                   # (b, 1, 1, s)
    x = embed(src, "encoder_embed")
    for i in range(cfg.n_layers):
        p, name = f"encoder_blocks.{i}", f"encoder.blocks.{i}"
        x = sublayer(x, f"{p}.norm1", lambda y: attention(y, y, f"{p}.attn", keep, f"{name}.attn"))
        x = sublayer(x, f"{p}.norm2", lambda y: mlp(y, f"{p}.mlp"))
        out[f"{name}.resid_post"] = x
    memory = norm(x, "encoder_norm") if pre else x
    out["encoder.final.norm"] = memory
    t = tgt.shape[1]
    causal = np.tril(np.ones((t, t), dtype=bool))[None, None]
    y = embed(tgt, "decoder_embed")
    for i in range(cfg.n_layers):
        p, name = f"decoder_blocks.{i}", f"decoder.blocks.{i}"
        y = sublayer(y, f"{p}.norm1", lambda z: attention(z, z, f"{p}.attn", causal, f"{name}.attn"))
        y = sublayer(y, f"{p}.norm_cross", lambda z: attention(z, memory, f"{p}.cross_attn", keep,
                                                               f"{name}.cross_attn"))
        out[f"{name}.resid_cross"] = y
        y = sublayer(y, f"{p}.norm2", lambda z: mlp(z, f"{p}.mlp"))
    final = norm(y, "decoder_norm") if pre else y
    out["logits"] = linear(final, "unembed")
    return out


SWITCHES = list(itertools.product(POS_KINDS, NORM_KINDS, NORM_POSITIONS, ACTIVATIONS, [False, True]))


def grouping_and_bias(combo) -> dict:
    """Key/value heads (3, or 1 shared by all) and biases (on, off), each from the parity of a sum of the other
    switches' indices, so each of their values meets every value of every other switch, and each other."""
    kinds = (POS_KINDS, NORM_KINDS, NORM_POSITIONS, ACTIVATIONS, (False, True))
    index = [choices.index(s) for choices, s in zip(kinds, combo)]
    return dict(n_kv_heads=1 if sum(index) % 2 else None, bias=(index[0] + index[2]) % 2 == 0)


@pytest.mark.parametrize("pos, norm, norm_position, activation, embed_scale", SWITCHES,
                         ids=["-".join(map(str, c)) for c in SWITCHES])
def test_every_switch_matches_a_numpy_forward_pass_written_from_the_equations(pos, norm, norm_position, activation,
                                                                              embed_scale):
    model = make_model(pos=pos, norm=norm, norm_position=norm_position, activation=activation,
                       embed_scale=embed_scale, rope_theta=7.0,
                       **grouping_and_bias((pos, norm, norm_position, activation, embed_scale)))
    source, target = batch()
    trace = model.run(source, target)
    expected = reference(model, source, target)
    for name, value in expected.items():                      # float32 against float64: 1e-5 of the values' size
        scale = max(1.0, float(np.abs(value[np.isfinite(value)]).max()))
        np.testing.assert_allclose(trace[name].double().numpy(), value, rtol=1e-4, atol=1e-5 * scale, err_msg=name)


def test_the_reference_would_notice_swapped_cross_attention_keys_and_queries():
    model = make_model()
    source, target = batch()
    good = reference(model, source, target)["logits"]
    with torch.no_grad():
        block = model.decoder_blocks[0].cross_attn
        block.W_q.weight, block.W_k.weight = block.W_k.weight, block.W_q.weight
    assert np.abs(model.run(source, target)["logits"].double().numpy() - good).max() > 1e-2


def test_the_trace_holds_every_name_with_cross_attention_shaped_target_by_source():
    model = make_model()
    source, target = batch()
    trace = model.run(source, target)
    assert list(trace) == model.trace_names
    B, S, T, H, K = 2, 6, 5, 3, 4
    assert trace["decoder.blocks.1.cross_attn.q"].shape == (B, H, T, K)
    assert trace["decoder.blocks.1.cross_attn.k"].shape == trace["decoder.blocks.1.cross_attn.v"].shape == (B, H, S, K)
    assert trace["decoder.blocks.1.cross_attn.pattern"].shape == (B, H, T, S)
    assert trace["encoder.blocks.0.attn.pattern"].shape == (B, H, S, S)
    assert trace["decoder.blocks.0.attn.pattern"].shape == (B, H, T, T)
    assert trace["logits"].shape == (B, T, 17)
    assert {f"decoder.blocks.0.{n}" for n in CROSS_NAMES} <= set(trace)


def test_masks_the_encoder_sees_everything_padding_gets_nothing_the_decoder_never_the_future():
    model = make_model()
    source, target = batch()
    trace = model.run(source, target)
    enc = trace["encoder.blocks.1.attn.pattern"]                                # (B, H, S, S)
    assert (enc[0] > 0).all()                                                   # no causal mask: later words too
    assert (enc[1, :, :, 4:] == 0).all() and (enc[1, :, :, :4] > 0).all()       # padding gets zero weight
    cross = trace["decoder.blocks.0.cross_attn.pattern"]                        # (B, H, T, S)
    assert (cross[1, :, :, 4:] == 0).all() and torch.allclose(cross.sum(-1), torch.ones(2, 3, 5))
    dec = trace["decoder.blocks.0.attn.pattern"]                                # (B, H, T, T)
    seen = torch.ones(5, 5, dtype=torch.bool).tril()
    assert (dec[..., ~seen] == 0).all() and (dec[..., seen] > 0).all()
    # padding changes nothing: the same source without its padding gives the same logits
    alone = model.run(source[1:, :4], target[1:])
    torch.testing.assert_close(alone["logits"][0], trace["logits"][1], rtol=1e-5, atol=1e-5)


def test_teacher_forced_logits_equal_step_by_step_decoding():
    model = make_model()
    source, target = batch()
    full = model.run(source[:1], target[:1])["logits"][0]                        # (T, V)
    for t in range(1, target.shape[1] + 1):
        step = model.run(source[:1], target[:1, :t])["logits"][0, -1]
        torch.testing.assert_close(step, full[t - 1], rtol=1e-5, atol=1e-5)
    # and the training forward is the same function
    torch.testing.assert_close(model(source[:1], target[:1])[0], full, rtol=1e-6, atol=1e-6)


def test_beam_one_is_greedy_and_a_wider_beam_never_scores_worse():
    model = make_model(seed=3)
    source = [5, 9, 3, 12]
    narrow, wide = beam_search(model, source, 1), beam_search(model, source, 4)
    assert narrow.tokens == greedy(model, source)
    ids = [2]                                                                   # <bos>
    for _ in range(model.cfg.max_len - 1):                                      # greedy by hand
        nxt = int(model.run(source, ids)["logits"][0, -1].argmax())
        if nxt == 3:                                                            # <eos>
            break
        ids.append(nxt)
    assert narrow.tokens == ids[1:]
    assert wide.score >= narrow.score - 1e-6
    assert all(len(step) <= 4 for step in wide.steps) and len(narrow.steps[0]) == 1
    # a hypothesis's score is its summed log-probability
    hyp, score = wide.steps[1][0]
    logp = model.run(source, hyp[:-1])["logits"][0].log_softmax(-1)
    assert score == pytest.approx(float(sum(logp[i, hyp[i + 1]] for i in range(len(hyp) - 1))), abs=1e-4)


def test_seeded_sampling_repeats_and_bad_input_is_refused():
    model = make_model()
    assert sample(model, [4, 5, 6], seed=7) == sample(model, [4, 5, 6], seed=7)
    with pytest.raises(ValueError, match="at most 10"):
        model.run(list(range(4, 16)), [2])
    with pytest.raises(ValueError, match="outside"):
        model.run([4, 99], [2])
    with pytest.raises(ValueError, match="non-empty"):
        model.run([], [2])
    with pytest.raises(ValueError, match="cannot edit"):
        model.run([4, 5], [2], edits={"blocks.0.attn.z": torch.zeros_like})


def test_edits_by_name_reach_cross_attention():
    model = make_model()
    source, target = batch()
    name = "decoder.blocks.1.cross_attn.z"
    before = model.run(source, target)
    after = model.run(source, target, edits={name: torch.zeros_like})
    assert (after[name] == 0).all()
    assert not torch.allclose(before["logits"], after["logits"])
    torch.testing.assert_close(before["encoder.final.norm"], after["encoder.final.norm"])   # upstream untouched


def test_decoding_with_a_cross_attention_head_knocked_out_uses_the_edit_at_every_step():
    from model.edits import knock_out_head, remove_positions, scoped
    model = make_model(seed=2)
    source = [5, 9, 4, 12, 7]
    knocked = scoped("decoder.", knock_out_head(1, 0, "cross_attn"))
    out = greedy(model, source, edits=knocked)
    ids = [2]
    for _ in range(model.cfg.max_len - 1):                                      # greedy by hand, edited
        nxt = int(model.run(source, ids, edits=knocked)["logits"][0, -1].argmax())
        if nxt == 3:
            break
        ids.append(nxt)
    assert out == ids[1:]
    trace = model.run(source, [2, *out], edits=scoped("encoder.", remove_positions()))
    assert (trace["encoder.embed.pos"] == 0).all() and (trace["decoder.embed.pos"] != 0).any()


@pytest.mark.parametrize("switches", [{}, dict(pos="rope", n_kv_heads=1, activation="swiglu", norm="rms", bias=False),
                                      dict(pos="learned", norm_position="post")], ids=["2017", "llama-like", "post"])
def test_decoding_with_and_without_the_key_value_cache_writes_the_same(switches):
    """The decoder keeps its self-attention's keys and values from step to step; cross-attention reads the memory."""
    from model.edits import knock_out_head, scoped
    model = make_model(seed=4, **switches)
    for source in ([5, 9, 4, 12, 7], [16, 4]):
        for beams in (1, 3):
            cached, plain = (beam_search(model, source, beams, use_cache=c) for c in (True, False))
            assert cached.tokens == plain.tokens and cached.probs == pytest.approx(plain.probs, abs=1e-5)
            assert cached.score == pytest.approx(plain.score, abs=1e-5)
        assert sample(model, source, 1.5, seed=3) == sample(model, source, 1.5, seed=3, use_cache=False)
        knocked = scoped("decoder.", knock_out_head(0, 1, "cross_attn"))
        assert beam_search(model, source, 2, edits=knocked).tokens == \
            beam_search(model, source, 2, edits=knocked, use_cache=False).tokens
