"""Direct logit attribution and contribution routes (model/attribution.py): the parts add up to the model's own
logit, each part equals a float64 NumPy computation written from the equations, and the routes' weights follow
Ferrando & Voita's proximity measure."""
import json

import numpy as np
import pytest
import torch

from gpt2_support import reference_gpt2
from model import attribution as model_attribution
from model.checkpoint import load_bundled
from model.config import ModelConfig
from model.pretrained import convert_gpt2, gpt2_config
from model.seq2seq import EncoderDecoder, greedy
from model.transformer import TransformerLM
from test_transformer import make_model, reference_forward

SENTENCES = {"tinytales": ["the cat sat on the mat because it was tired", "the dog ran to the park",
                           "a bird saw the cat"],
             "roses": ["roses are red violets are blue", "sugar is sweet and so are you"]}


def gpt2_layout(seed=0) -> TransformerLM:
    """A small random GPT-2 (Hugging Face's own class) converted into ours: learned positions, GELU (tanh), tied
    unembedding, perturbed norms."""
    reference = reference_gpt2(n_layers=2, n_heads=3, d_model=24, seed=seed)
    cfg = gpt2_config(json.loads(reference.config.to_json_string()))
    model = TransformerLM(cfg)
    model.load_state_dict(convert_gpt2(reference.state_dict(), cfg))
    model.unembed.weight = model.embed.tok.weight
    return model.eval()


def numpy_attribution(model: TransformerLM, tokens: list[int], position: int, target: int) -> dict[str, float]:
    """Every part's share of logit(target), from the state dict and a NumPy forward pass in float64."""
    cfg = model.cfg
    W = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    ref = reference_forward(model, torch.tensor([tokens]))
    H, K = cfg.n_heads, cfg.d_head
    parts = {"token embedding": ref["embed.tok"][0, position], "position embedding": ref["embed.pos"][0, position]}
    bias = np.zeros(cfg.d_model)
    for layer in range(cfg.n_layers):
        W_o = W[f"blocks.{layer}.attn.W_o.weight"]                                   # (D, D) out x in
        z = ref[f"blocks.{layer}.attn.z"][0, :, position]                            # (H, K)
        for h in range(H):
            parts[f"L{layer} H{h}"] = W_o[:, h * K:(h + 1) * K] @ z[h]
        bias += W.get(f"blocks.{layer}.attn.W_o.bias", 0.0)                        # none without biases
        parts[f"MLP {layer}"] = ref[f"blocks.{layer}.mlp.out"][0, position]
    parts["attention biases"] = bias
    x = ref[f"blocks.{cfg.n_layers - 1}.resid_post"][0, position]
    w_u = W["unembed.weight"][target]
    if cfg.norm == "layer":
        scale = np.sqrt(((x - x.mean()) ** 2).mean() + cfg.norm_eps)
        out = {k: float(((v - v.mean()) / scale * W["final_norm.weight"]) @ w_u) for k, v in parts.items()}
        out["final norm bias"] = float(W["final_norm.bias"] @ w_u)
    elif cfg.norm == "rms":
        scale = np.sqrt((x ** 2).mean() + cfg.norm_eps)
        out = {k: float((v / scale * W["final_norm.weight"]) @ w_u) for k, v in parts.items()}
        out["final norm bias"] = 0.0
    else:
        out = {k: float(v @ w_u) for k, v in parts.items()}
        out["final norm bias"] = 0.0
    return out


def check_sum_rule(model, trace, positions, k=3):
    for position in positions:
        top = trace["logits"][0, position].topk(k).indices.tolist()
        attribution = model_attribution.attribute(model, trace, position, top)
        assert attribution.values.shape == (len(attribution.parts), k)
        np.testing.assert_allclose(attribution.values.sum(0).numpy(), attribution.logits.numpy(), rtol=0, atol=1e-4)
        np.testing.assert_allclose(attribution.logits.numpy(), trace["logits"][0, position, top].double().numpy())


@pytest.mark.parametrize("name", SENTENCES)
def test_the_parts_add_up_to_the_logit_of_a_bundled_model_at_every_position(name):
    bundle = load_bundled(name)
    for sentence in SENTENCES[name]:
        ids = bundle.tokenizer.encode(sentence)
        check_sum_rule(bundle.model, bundle.model.run(ids), range(len(ids)))


def test_the_parts_add_up_on_a_gpt2_layout_model():
    model = gpt2_layout()
    for seed in range(3):
        ids = torch.randint(0, 50_257, (12,), generator=torch.Generator().manual_seed(seed)).tolist()
        check_sum_rule(model, model.run(ids), [0, 5, 11])


@pytest.mark.parametrize("switches", [dict(pos="sinusoidal", norm="layer"), dict(pos="learned", norm="rms"),
                                      dict(pos="none", norm="none", activation="gelu"),
                                      dict(pos="learned", norm="layer", activation="gelu_tanh", tie_embeddings=True),
                                      dict(pos="rope", norm="rms", activation="swiglu", n_kv_heads=1, bias=False,
                                           tie_embeddings=True)])
def test_every_part_equals_a_float64_numpy_computation(switches):
    model = make_model(seed=3, **switches)
    tokens = torch.randint(0, 23, (7,), generator=torch.Generator().manual_seed(5)).tolist()
    trace = model.run(tokens)
    for position in (0, 3, 6):
        for target in (0, 11, 22):
            ours = model_attribution.attribute(model, trace, position, [target])
            reference = numpy_attribution(model, tokens, position, target)
            assert [p.label for p in ours.parts] == list(reference)
            np.testing.assert_allclose(ours.values[:, 0].numpy(), list(reference.values()), rtol=0, atol=1e-5)
            assert ours.values[:, 0].sum().item() == pytest.approx(ours.logits[0].item(), abs=1e-4)


def test_the_numpy_reference_would_catch_a_missing_final_norm_scale():
    model = make_model(seed=3)
    tokens = [1, 5, 7, 2]
    trace = model.run(tokens)
    ours = model_attribution.attribute(model, trace, 3, [4])
    reference = numpy_attribution(model, tokens, 3, 4)
    unscaled = ours.values[:, 0] * ours.scale          # what forgetting to divide by the scale would give
    assert ours.scale != pytest.approx(1.0, abs=0.05)
    assert not np.allclose(unscaled.numpy(), list(reference.values()), rtol=0, atol=1e-3)


def test_why_x_rather_than_y_is_the_difference_of_the_two_columns():
    bundle = load_bundled("tinytales")
    ids = bundle.tokenizer.encode("the cat sat on the mat because it was tired")
    trace = bundle.model.run(ids)
    top = trace["logits"][0, -1].topk(2).indices.tolist()
    attribution = model_attribution.attribute(bundle.model, trace, -1, top)
    difference = attribution.difference(top[0], top[1])
    logits = trace["logits"][0, -1]
    assert difference.sum().item() == pytest.approx(float(logits[top[0]] - logits[top[1]]), abs=1e-4)
    assert attribution.position == len(ids) - 1


def test_the_encoder_decoders_decoder_splits_into_self_and_cross_attention_heads():
    bundle = load_bundled("sort")
    model = bundle.model
    source = bundle.tokenizer.encode("7 3 9 1 5 2")
    target = [model.bos_id, *greedy(model, source)]
    trace = model.run(source, target)
    check_sum_rule(model, trace, range(len(target)))
    parts = model_attribution.attribute(model, trace, 0, [4]).parts
    cfg = model.cfg
    assert sum(p.attention == "attn" for p in parts) == cfg.n_layers * cfg.n_heads
    assert sum(p.attention == "cross_attn" for p in parts) == cfg.n_layers * cfg.n_heads
    assert "L1 cross H2" in [p.label for p in parts]


def test_a_heads_contribution_split_by_source_adds_up_to_its_bar():
    bundle = load_bundled("tinytales")
    ids = bundle.tokenizer.encode("the cat sat on the mat because it was tired")
    trace = bundle.model.run(ids)
    target = int(trace["logits"][0, -1].argmax())
    attribution = model_attribution.attribute(bundle.model, trace, -1, [target])
    for i, part in enumerate(attribution.parts):
        if part.kind == "head":
            sources = model_attribution.head_sources(bundle.model, trace, len(ids) - 1, part.layer, part.head, target)
            assert sources.shape == (len(ids),)
            assert sources.sum().item() == pytest.approx(attribution.values[i, 0].item(), abs=1e-5)


def test_with_grouped_key_value_heads_and_no_biases_the_parts_and_the_routes_still_add_up():
    """Llama's switches: each query head's part reads its group's values; there is no output bias to add."""
    model = make_model(seed=4, d_model=24, n_heads=6, n_kv_heads=2, pos="rope", norm="rms", activation="swiglu",
                       bias=False, tie_embeddings=True)
    tokens = torch.randint(0, 23, (8,), generator=torch.Generator().manual_seed(2)).tolist()
    trace = model.run(tokens)
    check_sum_rule(model, trace, [0, 4, 7])
    target = int(trace["logits"][0, -1].argmax())
    attribution = model_attribution.attribute(model, trace, -1, [target])
    assert attribution.values[[p.label for p in attribution.parts].index("attention biases"), 0] == 0
    for i, part in enumerate(attribution.parts):
        if part.kind == "head":
            sources = model_attribution.head_sources(model, trace, 7, part.layer, part.head, target)
            assert sources.sum().item() == pytest.approx(attribution.values[i, 0].item(), abs=1e-5)
    for layer in range(model.cfg.n_layers):
        mid = [e.weight for e in model_attribution.layer_edges(model, trace, layer, 7) if e.into == "mid"]
        assert sum(mid) == pytest.approx(1.0)                     # no output bias takes a share
    assert model_attribution.routes(model, trace, 7)


def test_a_nodes_update_read_by_the_unembedding_is_the_attribution_of_that_sublayer():
    bundle = load_bundled("tinytales")
    model = bundle.model
    ids = bundle.tokenizer.encode("the dog ran to the park")
    trace = model.run(ids)
    attribution = model_attribution.attribute(model, trace, 2, range(model.cfg.vocab_size))
    labels = [p.label for p in attribution.parts]
    mlp = model_attribution.node_update_logits(model, trace, 2, 1, "mlp")
    assert mlp.shape == (model.cfg.vocab_size,)
    np.testing.assert_allclose(mlp.numpy(), attribution.values[labels.index("MLP 1")].numpy(), atol=1e-6)
    heads = [i for i, p in enumerate(attribution.parts) if p.kind == "head" and p.layer == 0]
    bias = model.blocks[0].attn.W_o.bias.detach().double()
    norm = model_attribution.final_norm_at(model, trace, 2)
    bias_logits = norm.apply(bias[None])[0] @ model.unembed.weight.detach().double().T
    np.testing.assert_allclose(model_attribution.node_update_logits(model, trace, 2, 0, "attn").numpy(),
                               (attribution.values[heads].sum(0) + bias_logits).numpy(), atol=1e-6)


def test_proximity_weights_follow_ferrando_and_voita():
    total = torch.tensor([1.0, 0.0])
    parts = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-0.5, 0.0]])   # the whole sum; orthogonal; opposed
    weights = model_attribution.proximity(total, parts)
    # |total| - |total - part|: 1 - 0 = 1; 1 - sqrt(2) < 0 -> 0; 1 - 1.5 < 0 -> 0
    assert weights.tolist() == [1.0, 0.0, 0.0]
    weights = model_attribution.proximity(torch.tensor([2.0, 0.0]), torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    assert weights.tolist() == [0.5, 0.5]


def test_the_edges_into_each_state_are_weights_that_sum_to_one():
    bundle = load_bundled("tinytales")
    ids = bundle.tokenizer.encode("the cat sat on the mat because it was tired")
    trace = bundle.model.run(ids)
    for layer in range(bundle.model.cfg.n_layers):
        edges = model_attribution.layer_edges(bundle.model, trace, layer, 6)
        mid = [e.weight for e in edges if e.into == "mid"]
        post = [e.weight for e in edges if e.into == "post"]
        assert len(post) == 2 and sum(post) == pytest.approx(1.0)
        assert len(mid) == 1 + bundle.model.cfg.n_heads * 7       # the residual and every head from 7 sources
        assert 0.9 < sum(mid) <= 1.0 + 1e-9                      # the rest is the output bias
        assert all(e.source <= 6 for e in edges)                  # never a later token


def test_routes_reach_back_from_the_chosen_position_and_a_higher_threshold_keeps_fewer_edges():
    bundle = load_bundled("tinytales")
    ids = bundle.tokenizer.encode("the cat sat on the mat because it was tired")
    trace = bundle.model.run(ids)
    last = len(ids) - 1
    loose, strict = model_attribution.routes(bundle.model, trace, last, 0.01), model_attribution.routes(bundle.model, trace, last, 0.2)
    assert set(strict) <= set(loose) and len(strict) < len(loose)
    assert all(e.weight >= 0.01 for e in loose)
    top = [e for e in loose if e.layer == bundle.model.cfg.n_layers - 1]
    assert top and all(e.target == last for e in top)                     # the last layer only builds `last`
    assert any(e.source != last for e in loose)                           # other tokens feed in through heads
    with pytest.raises(ValueError, match="outside the sentence"):
        model_attribution.routes(bundle.model, trace, len(ids))


def test_bad_input_is_refused_with_a_clear_message():
    bundle = load_bundled("roses")
    trace = bundle.model.run(bundle.tokenizer.encode("roses are red"))
    with pytest.raises(ValueError, match="outside the sentence"):
        model_attribution.attribute(bundle.model, trace, 3, [1])
    with pytest.raises(ValueError, match="between 0 and 11"):
        model_attribution.attribute(bundle.model, trace, 0, [12])
    post = TransformerLM(ModelConfig(norm_position="post")).eval()
    with pytest.raises(ValueError, match="post-norm"):
        model_attribution.attribute(post, post.run([1, 2, 3]), 0, [1])
    seq2seq = load_bundled("sort").model
    assert isinstance(seq2seq, EncoderDecoder)
    with pytest.raises(ValueError, match="encoder-decoder"):
        model_attribution.routes(seq2seq, seq2seq.run([4, 5], [2, 4]), 0)


def test_attribution_never_changes_the_shared_model():
    bundle = load_bundled("tinytales")
    before = {k: v.clone() for k, v in bundle.model.state_dict().items()}
    trace = bundle.model.run(bundle.tokenizer.encode("the cat sat"))
    model_attribution.attribute(bundle.model, trace, 2, [1, 2])
    model_attribution.routes(bundle.model, trace, 2)
    assert all(torch.equal(before[k], v) for k, v in bundle.model.state_dict().items())
