"""Today's switches on every page: a lab model with rotary positions, RMSNorm, SwiGLU, grouped key/value heads and
no biases is read by every page and tab with its own numbers."""
import pytest
import torch

from conftest import APP, page_text, show_section
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
        torch.testing.assert_close(torch.from_numpy(values["raw"]), q @ trace["k", 1][0, group].double().T)
    words = sharing_text(4, 2)
    assert "4 query heads share 2 key/value heads" in words and "heads 0, 1 read key/value head 0" in words
    assert "heads 2, 3 read key/value head 1" in words and "2 sets of keys and values per layer instead of 4" in words
    at = open_today(today, "attention")
    at.query_params["head"] = "3"
    at.session_state["head"] = 3
    at.run()
    assert not at.exception
    assert words in page_text(at) and "Head 3 reads key/value head 1" in page_text(at)


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
