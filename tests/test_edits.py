"""The "what if" edits: each helper does what its name says, and an edit only changes what comes after it."""
import pytest
import torch

from model.config import ModelConfig
from model.edits import combine, knock_out_head, remove_positions, remove_scaling, skip_mlp
from model.layers import rope_frequencies
from model.transformer import TransformerLM

SMALL = dict(vocab_size=23, d_model=12, n_heads=3, n_layers=2, d_ff=20, max_len=9)
LLAMA = dict(d_model=24, n_heads=6, n_kv_heads=2, pos="rope", norm="rms", activation="swiglu", bias=False)
TOKENS = torch.tensor([[5, 17, 2, 9, 11, 0, 22], [3, 3, 14, 8, 1, 19, 6]])   # (B=2, T=7)


def make_model(seed=0, **switches) -> TransformerLM:
    """A small model with weights large enough that every edit visibly matters."""
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**(SMALL | switches))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def names_before(model: TransformerLM, name: str) -> list[str]:
    return model.trace_names[:model.trace_names.index(name)]


def assert_unchanged(base, edited, names):
    changed = [n for n in names if not torch.equal(base[n], edited[n])]
    assert changed == [], f"edit changed upstream values: {changed}"


def add_noise(x: torch.Tensor) -> torch.Tensor:
    """A pure edit that changes every entry, the same way each time."""
    return x + 0.5 * torch.randn(x.shape, generator=torch.Generator().manual_seed(0))


@pytest.fixture
def model():
    return make_model()


@pytest.mark.parametrize("layer, head", [(0, 0), (1, 2)])
def test_knocking_out_a_head_zeroes_only_that_head(model, layer, head):
    base, edited = model.run(TOKENS), model.run(TOKENS, edits=knock_out_head(layer, head))
    z, base_z = edited[f"blocks.{layer}.attn.z"], base[f"blocks.{layer}.attn.z"]
    assert (z[:, head] == 0).all()
    assert (base_z[:, head] != 0).any()
    others = [h for h in range(SMALL["n_heads"]) if h != head]
    assert torch.equal(z[:, others], base_z[:, others])
    assert_unchanged(base, edited, names_before(model, f"blocks.{layer}.attn.z"))
    assert not torch.allclose(edited[f"blocks.{layer}.attn.out"], base[f"blocks.{layer}.attn.out"])


def test_knocking_out_a_query_head_of_a_group_leaves_its_shared_keys_and_values_and_the_other_heads():
    model = make_model(**LLAMA)                                   # six query heads, two key/value heads
    base, edited = model.run(TOKENS), model.run(TOKENS, edits=knock_out_head(1, 4))
    z, base_z = edited["blocks.1.attn.z"], base["blocks.1.attn.z"]
    assert (z[:, 4] == 0).all() and torch.equal(z[:, [0, 1, 2, 3, 5]], base_z[:, [0, 1, 2, 3, 5]])
    for name in ("k", "v", "pattern"):                            # heads 3 and 5 still read key/value head 1
        assert torch.equal(edited["blocks.1.attn." + name], base["blocks.1.attn." + name])
    assert not torch.allclose(edited["logits"], base["logits"])


@pytest.mark.parametrize("pos", ["sinusoidal", "learned", "rope"])
def test_removing_positions_zeroes_them_and_leaves_just_the_words(pos):
    model = make_model(pos=pos)
    trace = model.run(TOKENS, edits=remove_positions(model.cfg))
    assert (trace["embed.pos"] == 0).all()
    assert torch.equal(trace["embed.out"], trace["embed.tok"])
    if pos == "rope":                                             # no angle: no query or key is turned
        assert (trace["embed.rope"] == 0).all()
        assert torch.equal(trace["blocks.0.attn.q"], trace["blocks.0.attn.q_unrotated"])
        assert torch.equal(trace["blocks.1.attn.k"], trace["blocks.1.attn.k_unrotated"])


def test_rotary_scores_depend_on_the_distance_only_so_shifting_every_position_changes_no_score():
    """Every angle moved on by k positions (k x each pair's frequency): each query and key turns further, but a
    query at m and a key at n still differ by m - n, so no score, weight or logit changes."""
    model = make_model(**LLAMA, rope_theta=100_000.0)
    base = model.run(TOKENS)
    frequencies = rope_frequencies(model.cfg.d_head, model.cfg.rope_theta)               # (K/2,)
    for k in (1, 5, 100):
        shifted = model.run(TOKENS, edits={"embed.rope": lambda angles: angles + k * frequencies})
        assert not torch.allclose(shifted["blocks.0.attn.q"], base["blocks.0.attn.q"])
        for name in ("blocks.0.attn.scores", "blocks.1.attn.pattern", "logits"):
            torch.testing.assert_close(shifted[name], base[name], rtol=0, atol=1e-4)


@pytest.mark.parametrize("pos", ["sinusoidal", "learned", "rope"])
@pytest.mark.parametrize("n_layers, causal", [(1, True), (2, False)], ids=["one-causal-layer", "two-unmasked-layers"])
def test_without_positions_the_last_output_depends_only_on_the_bag_of_words(pos, n_layers, causal):
    """Reordering earlier words changes nothing at the last position once positions are removed.

    (With two causal layers this is not so: the middle positions see different prefixes, and the
    last position reads them.)"""
    model = make_model(pos=pos, n_layers=n_layers)
    swapped = TOKENS.clone()
    swapped[:, [0, 3]] = TOKENS[:, [3, 0]]            # reorder two earlier words, keep the last one in place
    assert not torch.equal(swapped, TOKENS)
    last = lambda tokens, **kw: model.run(tokens, causal=causal, **kw)["logits"][:, -1]  # noqa: E731
    assert not torch.allclose(last(swapped), last(TOKENS), atol=1e-3)      # with positions, order matters
    removed = remove_positions(model.cfg)
    torch.testing.assert_close(last(swapped, edits=removed), last(TOKENS, edits=removed), rtol=0, atol=1e-5)


@pytest.mark.parametrize("layer", [0, 1])
def test_skipping_an_mlp_zeroes_its_output_and_passes_the_stream_through(model, layer):
    base, edited = model.run(TOKENS), model.run(TOKENS, edits=skip_mlp(layer))
    n = f"blocks.{layer}"
    assert (edited[f"{n}.mlp.out"] == 0).all()
    assert torch.equal(edited[f"{n}.resid_post"], edited[f"{n}.resid_mid"])
    assert not torch.equal(base[f"{n}.resid_post"], base[f"{n}.resid_mid"])
    assert_unchanged(base, edited, names_before(model, f"{n}.mlp.out"))


def test_removing_the_scaling_leaves_scores_as_plain_dot_products_in_every_layer(model):
    edited = model.run(TOKENS, edits=remove_scaling(model.cfg))
    for i in range(SMALL["n_layers"]):
        a = lambda s: edited[f"blocks.{i}.attn.{s}"]  # noqa: E731
        torch.testing.assert_close(a("scores"), a("q") @ a("k").transpose(-2, -1))


def test_removing_the_scaling_in_one_layer_leaves_the_others_scaled(model):
    edited = model.run(TOKENS, edits=remove_scaling(model.cfg, layers=[1]))
    scaled, plain = (edited[f"blocks.{i}.attn.scores"] for i in (0, 1))
    b0 = lambda s: edited[f"blocks.0.attn.{s}"]  # noqa: E731
    b1 = lambda s: edited[f"blocks.1.attn.{s}"]  # noqa: E731
    torch.testing.assert_close(scaled, b0("q") @ b0("k").transpose(-2, -1) / model.cfg.d_head ** 0.5)
    torch.testing.assert_close(plain, b1("q") @ b1("k").transpose(-2, -1))


def test_combining_applies_every_edit(model):
    trace = model.run(TOKENS, edits=combine(knock_out_head(0, 1), skip_mlp(1), remove_positions()))
    assert (trace["blocks.0.attn.z"][:, 1] == 0).all()
    assert (trace["blocks.1.mlp.out"] == 0).all()
    assert (trace["embed.pos"] == 0).all()


def test_combining_two_edits_on_the_same_name_applies_them_in_order(model):
    plus_one = {"embed.pos": lambda x: x + 1}
    doubled = {"embed.pos": lambda x: x * 2}
    base = model.run(TOKENS)["embed.pos"]
    torch.testing.assert_close(model.run(TOKENS, edits=combine(plus_one, doubled))["embed.pos"], (base + 1) * 2)
    torch.testing.assert_close(model.run(TOKENS, edits=combine(doubled, plus_one))["embed.pos"], base * 2 + 1)
    z = model.run(TOKENS, edits=combine(knock_out_head(0, 0), knock_out_head(0, 2)))["blocks.0.attn.z"]
    assert (z[:, [0, 2]] == 0).all() and (z[:, 1] != 0).any()


def test_combining_leaves_its_inputs_alone():
    first, second = knock_out_head(0, 0), knock_out_head(0, 2)
    zero_0, zero_2 = first["blocks.0.attn.z"], second["blocks.0.attn.z"]
    combine(first, second)
    assert first == {"blocks.0.attn.z": zero_0} and second == {"blocks.0.attn.z": zero_2}


EDITABLE = make_model().trace_names[1:]   # every name but "tokens"
LLAMA_EDITABLE = make_model(**LLAMA).trace_names[1:]            # with embed.rope, q_unrotated, mlp.gate, ...
EDIT_CASES = [pytest.param(where, name, {}, id=f"{where}-{name}") for where in ("pre", "post") for name in EDITABLE] + \
    [pytest.param("pre", name, LLAMA, id=f"llama-{name}") for name in LLAMA_EDITABLE]


@pytest.mark.parametrize("norm_position, name, switches", EDIT_CASES)
def test_an_edit_changes_its_own_value_and_what_follows_but_nothing_before_it(norm_position, name, switches):
    model = make_model(norm_position=norm_position, **switches)
    base, edited = model.run(TOKENS), model.run(TOKENS, edits={name: add_noise})
    assert_unchanged(base, edited, names_before(model, name))
    assert torch.equal(edited[name], add_noise(base[name]))
    assert not torch.allclose(edited["logits"], base["logits"])


@pytest.mark.parametrize("norm_position", ["pre", "post"])
@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rope"])
def test_an_edit_that_works_in_place_still_changes_nothing_before_it_nor_the_shared_model(pos, norm_position):
    """Students write edits like `def double(x): x *= 2; return x`. That must not reach back into values
    already reported, nor into the weights every other visitor's runs use."""
    def double_in_place(x):
        x *= 2
        return x

    problems = []
    for name in make_model(pos=pos).trace_names[1:]:
        model = make_model(pos=pos, norm_position=norm_position)
        base = {n: value.clone() for n, value in model.run(TOKENS[:1]).items()}
        edited = model.run(TOKENS[:1], edits={name: double_in_place})
        problems += [f"editing {name} changed {n}" for n in names_before(model, name)
                     if not torch.equal(edited[n], base[n])]
        again = model.run(TOKENS[:1])
        if not torch.equal(again["logits"], base["logits"]):
            problems.append(f"editing {name} changed the model itself")
    assert not problems, "\n".join(problems)
