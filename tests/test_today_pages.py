"""Today's switches on every page: a lab model with rotary positions, RMSNorm, SwiGLU, grouped key/value heads and
no biases is read by every page and tab with its own numbers."""
import pytest
import torch

import numpy as np
from conftest import APP, decode, page_text, plotly_figures, show_section
from streamlit.testing.v1 import AppTest
from conftest import open_page
from explorer.lab.training import PRESETS, WALKTHROUGH, check_setup, new_run
from explorer.registry import STEPS

LAB = "lab: today"
TODAY = "today's LLM"
TEXT = "roses are red violets are blue"


@pytest.fixture(scope="module")
def today():
    run = new_run(PRESETS[TODAY][1], "run 1")
    for _ in range(3):
        run.tick(seconds=0)
    return run.bundle()


def open_today(bundle, slug="home") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["trained_models"] = {LAB: bundle}                 # as the lab's "Explore" adds it
    at.query_params["model"] = LAB
    at.query_params["text"] = TEXT
    at.run()
    if slug != "home":
        at.switch_page(f"pages/{slug}.py").run()
    return at


def test_every_page_and_tab_renders_a_rotary_swiglu_grouped_model_without_biases(today):
    cfg = today.model.cfg
    assert (cfg.pos, cfg.activation, cfg.kv_heads, cfg.n_heads, cfg.bias) == ("rope", "swiglu", 2, 4, False)
    at = open_today(today)
    assert not at.exception and at.session_state["model"] == LAB
    view = at.session_state["view"]
    ids = today.tokenizer.encode(TEXT)
    assert list(view.prepared.ids) == ids
    torch.testing.assert_close(view.trace["logits"], today.model.run(ids)["logits"])     # the model's own numbers
    at.session_state["prediction_kv_cache"] = True                      # the KV cache panel open too
    for step in STEPS:
        at.switch_page(step.file).run()
        assert not at.exception, (step.slug, at.exception)
        for label in step.labels or [None]:
            if label is not None:
                show_section(at, step.slug, label)
            assert not at.exception, (step.slug, label, at.exception)
            assert "Traceback" not in page_text(at)


def test_a_query_head_of_a_group_shows_its_groups_keys_and_values_and_the_page_says_who_shares(today):
    from explorer.steps.attention import head_values, kv_head, sharing_text
    trace = today.model.run(today.tokenizer.encode(TEXT))
    assert [kv_head(trace, 1, h) for h in range(4)] == [0, 0, 1, 1]
    for head in range(4):
        values = head_values(trace, 1, head)
        group = head // 2
        assert (values["k"] == trace["k", 1][0, group].double().numpy()).all()
        assert (values["v"] == trace["v", 1][0, group].double().numpy()).all()
        q = trace["q", 1][0, head].double()
        # the scores come from the float32 forward pass (times sqrt(d)): float32 rounding, not float64
        torch.testing.assert_close(torch.from_numpy(values["raw"]), q @ trace["k", 1][0, group].double().T,
                                   rtol=1e-5, atol=1e-6)
    words = sharing_text(4, 2)
    assert "4 query heads share 2 key/value heads" in words and "heads 0, 1 read key/value head 0" in words
    assert "heads 2, 3 read key/value head 1" in words and "2 sets of keys and values per layer instead of 4" in words
    at = open_today(today, "attention")
    at.query_params["head"] = "3"
    at.session_state["head"] = 3
    at.run()
    assert not at.exception
    assert words in page_text(at) and "Head 3 reads key/value head 1" in page_text(at)
    K = trace["q", 1].shape[-1]                                                     # (B, H, T, K)
    assert trace["k", 1].shape[1] == 2                                              # 2 key/value heads kept
    said = (f"Each head gets its own {K} query numbers; its {K} key and {K} value numbers are its group's: "
            f"{4 // trace['k', 1].shape[1]} query heads share one key/value head (2 key/value heads for 4 heads).")
    assert said in " ".join(page_text(at).split()) and "its own 4 numbers of each" not in page_text(at)


def test_the_todays_llm_preset_trains_on_the_walkthroughs_data_its_loss_falls_and_it_keeps_snapshots():
    about, setup = PRESETS[TODAY]
    m = setup.model
    assert (m["pos"], m["norm"], m["activation"], m["n_heads"], m["n_kv_heads"], m["bias"]) == \
        ("rope", "rms", "swiglu", 4, 2, False)
    assert setup.task == WALKTHROUGH.task and setup.tokenizer == WALKTHROUGH.tokenizer      # the same data
    assert setup.task == PRESETS["post-norm"][1].task and not check_setup(setup)
    run = new_run(setup, "run 1")
    run.tick(seconds=0)
    first = run.history[0]["loss"]
    while run.steps_done < 150:
        run.tick(seconds=0)
    assert run.history[-1]["loss"] < 0.5 * first
    assert run.snapshots and run.snapshots[-1][1].shape[:2] == (m["n_layers"], 4)          # (L, H, T, T) patterns
    assert torch.allclose(run.snapshots[-1][1].sum(-1), torch.ones(()))                   # each row a softmax


def test_a_preset_without_a_knob_for_key_value_heads_says_when_the_heads_no_longer_share_them():
    _, setup = PRESETS[TODAY]
    changed = type(setup)(model={**setup.model, "n_heads": 1, "d_model": 32})
    assert any("key/value heads" in p for p in check_setup(changed))
    odd = type(setup)(model={**setup.model, "n_kv_heads": None, "n_heads": 2, "d_model": 30})
    assert any("even number of dimensions" in p for p in check_setup(odd))


def test_the_lab_trains_the_todays_llm_preset_and_its_model_opens_on_the_walk_through():
    at = open_page("training")
    at.selectbox(key="lab_preset").set_value(TODAY).run()
    assert at.session_state["lab_pos"] == "rope" and at.session_state["lab_activation"] == "swiglu"
    at.button(key="lab_start").click().run()
    assert not at.exception
    run = at.session_state["lab_runs"][-1]
    assert run.model.cfg.kv_heads == 2 and run.model.cfg.bias is False           # the knob-less switches kept
    run.tick()
    at.button(key="lab_pause").click().run()
    at.button(key="lab_publish").click().run()
    assert not at.exception and at.session_state["model"] == "lab: run 1"
    at.switch_page("pages/attention.py").run()
    assert not at.exception and "share 2 key/value heads" in page_text(at)


def test_the_prediction_page_shows_the_kv_cache_of_the_model_with_its_size_and_live_times(today):
    from explorer.steps.prediction import cache_story, cache_table
    from model.layers import cache_bytes_per_token
    cfg = today.model.cfg
    L, G, K = cfg.n_layers, cfg.kv_heads, cfg.d_head
    assert cache_bytes_per_token(cfg) == 2 * L * G * K * 4
    table = cache_table(cfg)
    assert list(table["numbers per token"]) == [2 * G * K] * L and len(table) == L
    at = open_today(today, "prediction")
    at.session_state["prediction_kv_cache"] = True                      # the student opens the KV cache panel
    at.run()
    assert not at.exception
    n = len(today.tokenizer.encode(TEXT))
    text = page_text(at)
    assert f"2 x {L} x {G} x {K} x 4 bytes = **{2 * L * G * K * 4:,} bytes" in cache_story(cfg, n)
    assert f"{2 * L * G * K * 4:,} bytes" in text and f"for the {n} tokens so far" in text
    assert (f"share {G} key/value heads" in text
            and f"{2 * L * cfg.n_heads * K * 4:,} bytes per token, {cfg.n_heads // G} times as much" in text)
    times = at.session_state["prediction_kv_times"][(LAB, n)]
    assert times.position == n - 1 and times.cached > 0 and times.uncached > 0
    assert f"with the cache **{times.cached * 1000:.2f} ms**" in text
    assert f"without it **{times.uncached * 1000:.2f} ms**" in text
    at.button(key="prediction_next").click().run()                       # the text grows: one more measurement
    assert not at.exception and (LAB, n + 1) in at.session_state["prediction_kv_times"]


def _view(at):
    return at.session_state["view"]


def test_positions_draws_the_rotary_angles_and_says_them_from_the_trace(today):
    from explorer.steps import positions
    from model.layers import rope_frequencies
    cfg = today.model.cfg
    at = open_today(today, "positions")
    show_section(at, "positions", positions.SECTIONS[1])
    assert not at.exception
    v = _view(at)
    trace = v.trace
    angles = trace["embed.rope"][0]
    T, pairs = angles.shape
    freqs = rope_frequencies(cfg.d_head, cfg.rope_theta)
    torch.testing.assert_close(angles, torch.arange(T).float()[:, None] * freqs)     # position x frequency
    fig = positions.rope_figure(v, trace)
    assert fig.data[0].z.shape == (T, pairs) and pairs == cfg.d_head // 2
    text = page_text(at)
    assert (f"Pair 0 turns by {float(freqs[0]):.4f} radian per position, pair {pairs - 1} by "
            f"{float(freqs[-1]):.6f}") in text
    assert (f"pair 0 has turned **{float(angles[T - 1, 0]):.4f}** radians and pair {pairs - 1} "
            f"**{float(angles[T - 1, -1]):.6f}**") in text
    intro = positions.intro(cfg)
    assert f"{cfg.d_head} dimensions form {pairs} pairs" in intro and f"base θ = {cfg.rope_theta:,.0f}" in intro


@pytest.mark.parametrize("k", [1, 5, 17])
def test_shifting_every_position_by_k_turns_the_queries_but_leaves_every_score(today, k):
    from explorer.steps import positions
    ids = today.tokenizer.encode(TEXT)
    trace = today.model.run(ids)
    at = open_today(today, "positions")
    s = positions.shift_positions(_view(at), trace, k)
    assert s.k == k and s.score_change < 1e-4 and s.query_change > 1e-3
    assert s.angle_change == pytest.approx(k * 1.0, rel=1e-6)                # pair 0 turns 1 radian per position
    words = positions.shift_text(s)
    assert f"moved on by **{k}** seats" in words and f"{s.score_change:.1e}" in words


def test_the_shift_what_if_on_the_page_says_the_scores_stay(today):
    from explorer.steps import positions
    at = open_today(today, "positions")
    show_section(at, "positions", positions.SECTIONS[4])
    assert not at.exception
    s = positions.shift_positions(_view(at), _view(at).trace)
    assert positions.shift_text(s) in page_text(at) and s.score_change < 1e-4


def test_feed_forward_shows_gate_up_and_their_product_for_swiglu(today):
    import math
    from explorer.steps import feedforward
    at = open_today(today, "feedforward")
    assert not at.exception
    v = _view(at)
    trace, layer = v.trace, 1
    assert [s.name for s in feedforward.stages(v, layer)] == ["mlp.in", "mlp.gate", "mlp.up", "mlp.post", "mlp.out"]
    gate, up, post = (trace[f"blocks.{layer}.mlp.{n}"][0] for n in ("gate", "up", "post"))
    torch.testing.assert_close(post, torch.nn.functional.silu(gate) * up)
    m = feedforward.neuron_math(v, layer, 2, 3)
    assert m.pre == pytest.approx(float(gate[2, 3]), abs=1e-5) and m.up == pytest.approx(float(up[2, 3]))
    assert m.post == pytest.approx(float(post[2, 3]), abs=1e-5) and m.bias == 0.0
    assert m.post == pytest.approx(m.pre / (1 + math.exp(-m.pre)) * m.up)
    off = feedforward.zeroed(v, layer)
    assert off.count == int((gate < 0).sum()) and off.total == gate.numel()
    assert "gated by a negative gate" in off.rule
    assert "SwiGLU" in page_text(at) and "W_gate" in feedforward.intro(today.model.cfg)


def test_the_seat_numbers_tab_draws_the_rotary_angles_instead_of_an_all_zero_table(today):
    from explorer.steps import positions
    at = open_today(today, "positions")
    show_section(at, "positions", positions.SECTIONS[0])
    assert not at.exception
    v = _view(at)
    assert float(v.trace["embed.pos"].abs().max()) == 0.0                    # nothing is added: all zero
    [drawn] = plotly_figures(at)                                              # one chart: the angles
    expected = positions.rope_figure(v, v.trace)
    assert drawn["layout"]["title"]["text"] == expected.layout.title.text
    np.testing.assert_allclose(np.asarray(decode(drawn["data"][0]["z"]), dtype=float), expected.data[0].z)
    assert "nothing is added to a token's vector" in page_text(at)
