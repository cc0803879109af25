"""Step 8, why this prediction: what the page shows for the sentence in the sidebar, and what it says to bad input."""
import numpy as np
import pytest

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section
from explorer.registry import BY_SLUG
from explorer.steps import why
from model import patching
from model.attribution import attribute
from model.checkpoint import load_bundled

TINY = load_bundled("tinytales")
# The sentence these tests study: "it" at position 7 reads back to "cat".
PRONOUN = "the cat sat on the mat because it was tired"
IDS = TINY.tokenizer.encode(PRONOUN)
TRACE = TINY.model.run(IDS)
VOCAB = TINY.tokenizer.vocab
LAST = len(IDS) - 1
SECTIONS = BY_SLUG["why"].labels


def bars(at, words):
    bar = figure_titled(at, words)["data"][0]
    return list(decode(bar["y"])), decode(bar["x"]).astype(float)


def test_the_attribution_bars_add_up_to_the_logit_of_the_favourite():
    at = open_page("why", text=PRONOUN)
    assert not at.exception
    favourite = int(TRACE["logits"][0, LAST].argmax())
    names, values = bars(at, "Why “")
    assert names[-1] == "total = the model's logit"
    assert values[-1] == pytest.approx(float(TRACE["logits"][0, LAST, favourite]), abs=1e-3)
    assert values[:-1].sum() == pytest.approx(values[-1], abs=1e-3)
    expected = attribute(TINY.model, TRACE, LAST, [favourite])
    assert sorted(np.round(values[:-1], 4)) == sorted(np.round(expected.values[:, 0].numpy(), 4))
    text = page_text(at)
    assert f"a score (logit) of **{float(TRACE['logits'][0, LAST, favourite]):.2f}**" in text
    assert "Layer 0 head 0 adds" in text                        # the head picked in the sidebar state (0, 0)
    assert len(plotly_figures(at)) == 1
    assert not at.dataframe                                      # the table's panel is closed
    at.session_state["why_table"] = True                         # a click opens it
    at.run()
    [table] = at.dataframe
    assert table.value.iloc[:, 4].sum() == pytest.approx(values[-1], abs=1e-3)
    assert "Download the table (CSV)" in [b.proto.label for b in at.get("download_button")]


def test_each_section_draws_only_its_charts():
    at = open_page("why", text=PRONOUN)
    for section, count in zip(SECTIONS, (1, 1, 0)):
        show_section(at, "why", section)
        assert not at.exception and len(plotly_figures(at)) == count, section


def test_rather_than_adds_the_difference_chart():
    at = open_page("why", text=PRONOUN)
    first, second = TRACE["logits"][0, LAST].topk(2).indices.tolist()
    at.selectbox(key="why_other").set_value(second).run()
    assert not at.exception
    names, values = bars(at, "minus")
    gap = float(TRACE["logits"][0, LAST, first] - TRACE["logits"][0, LAST, second])
    assert names[-1] == "total = the difference" and values[-1] == pytest.approx(gap, abs=1e-3)
    assert f"a difference of **{gap:+.2f}**".replace("-", "−") in page_text(at)


def test_a_typed_word_is_explained_and_an_unknown_one_gets_a_message():
    at = open_page("why", text=PRONOUN)
    at.selectbox(key="why_target").set_value(-1).run()
    at.text_input(key="why_target_word").set_value("dog").run()
    assert not at.exception
    dog = VOCAB.index("dog")
    names, values = bars(at, "Why “dog”")
    assert values[-1] == pytest.approx(float(TRACE["logits"][0, LAST, dog]), abs=1e-3)
    at.text_input(key="why_target_word").set_value("zebra").run()
    assert not at.exception
    assert any("not in this model's vocabulary" in w.value for w in at.warning)
    favourite = int(TRACE["logits"][0, LAST].argmax())
    figure_titled(at, f"Why “{why.token_label(VOCAB[favourite])}”")     # the favourite instead


def test_the_routes_tab_draws_the_kept_edges_and_opens_a_node():
    at = open_page("why", text=PRONOUN)
    show_section(at, "why", SECTIONS[1])
    at.slider(key="why_threshold").set_value(0.03).run()
    assert not at.exception
    figure = figure_titled(at, "Routes into the prediction")
    lines = [t for t in figure["data"] if t.get("mode") == "lines"]
    from model.attribution import routes
    assert len(lines) == len(routes(TINY.model, TRACE, LAST, 0.03))
    assert "pushes" in page_text(at) and at.dataframe


def test_patching_the_suggested_sentence_draws_both_grids_with_the_real_numbers():
    at = open_page("why", text=PRONOUN, token=7)
    show_section(at, "why", SECTIONS[2])
    at.button(key="why_suggest").click().run()
    assert not at.exception
    assert at.text_input(key="why_corrupted").value == "the dog sat on the mat because it was tired"
    corrupted = TINY.tokenizer.encode(at.text_input(key="why_corrupted").value)
    favourite = int(TRACE["logits"][0, 7].argmax())
    pair = patching.make_pair(TINY.model, IDS, corrupted, 7, answer=favourite)
    z = np.asarray(decode(figure_titled(at, "stream entering a layer")["data"][0]["z"]), dtype=float)
    assert np.allclose(z, patching.resid_pre_grid(TINY.model, pair).numpy(), atol=1e-4)
    heads = np.asarray(decode(figure_titled(at, "one head's output")["data"][0]["z"]), dtype=float)
    assert np.allclose(heads, patching.head_out_grid(TINY.model, pair).numpy(), atol=1e-4)
    assert "“cat” → “dog” (position 1)" in page_text(at)
    assert len(at.get("download_button")) >= 2
    # the token to explain and the one beside it are what patching compares
    second = TRACE["logits"][0, 7].topk(3).indices.tolist()[2]
    at.selectbox(key="why_other").set_value(second).run()
    pair = patching.make_pair(TINY.model, IDS, corrupted, 7, answer=favourite, other=second)
    heads = np.asarray(decode(figure_titled(at, "one head's output")["data"][0]["z"]), dtype=float)
    assert np.allclose(heads, patching.head_out_grid(TINY.model, pair).numpy(), atol=1e-4)
    assert f"compare “{VOCAB[favourite]}” with “{VOCAB[second]}”" in page_text(at)
    # the instant estimate beside the exact grids
    at.toggle(key="why_estimate").set_value(True).run()
    assert not at.exception and len(plotly_figures(at)) == 4
    estimated = np.asarray(decode(figure_titled(at, "Estimated: one head's output")["data"][0]["z"]), dtype=float)
    assert np.allclose(estimated, patching.head_out_estimate(TINY.model, pair).numpy(), atol=1e-4)
    assert "Against the exact grids, the stream grid: correlation" in page_text(at)


@pytest.mark.parametrize("second, message", [
    ("the dog sat on the mat", "the clean sentence has 10 tokens and the corrupted one 6"),
    (PRONOUN, "the two sentences are the same"),
])
def test_bad_second_sentences_get_a_message_not_a_traceback(second, message):
    at = open_page("why", text=PRONOUN)
    show_section(at, "why", SECTIONS[2])
    at.text_input(key="why_corrupted").set_value(second).run()
    assert not at.exception
    assert message in " ".join(i.value for i in at.info).lower()
    assert not plotly_figures(at)
    at.toggle(key="why_estimate").set_value(True).run()            # the estimate refuses the pair alike
    assert not at.exception and not plotly_figures(at)
    assert message in " ".join(i.value for i in at.info).lower()


def test_a_head_opens_on_the_attention_page():
    at = open_page("why", text=PRONOUN)
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(2).run()
    assert "Layer 1 head 2 adds" in page_text(at)
    at.button(key="why_open_head").click().run()
    assert not at.exception
    assert at.session_state["layer"] == 1 and at.session_state["head"] == 2
    assert at.session_state["section_attention"] == BY_SLUG["attention"].tab("who-looks")
    assert "Who attends to whom: layer 1, head 2" in page_text(at)


def test_the_prediction_and_attention_pages_link_here():
    at = open_page("prediction")
    assert any(link.proto.page.endswith("why.py") or "why" in link.proto.page for link in at.get("page_link"))
    at = open_page("attention")
    for tab in ("who-looks", "every-head"):
        show_section(at, "attention", BY_SLUG["attention"].tab(tab))
        labels = [link.proto.label for link in at.get("page_link")]
        assert "See layer 0 head 0's contribution to the prediction" in labels, tab


# --- GPT-2's shape (12 layers, 12 heads, 50,257 tokens) with random weights, from a prepared hub cache ---------

@pytest.fixture(scope="module")
def gpt2_cache(tmp_path_factory):
    from gpt2_support import gpt2_hub_cache
    return gpt2_hub_cache(tmp_path_factory.mktemp("gpt2"), d_model=48)


@pytest.fixture
def gpt2(gpt2_cache, monkeypatch):
    from explorer.app import models
    from model import hub
    from model.pretrained import load_pretrained
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", gpt2_cache)
    return load_pretrained(hub.cached(hub.GPT2, gpt2_cache))


def test_gpt2_attribution_a_typed_word_routes_and_its_patching_grids(gpt2):
    text = "The cat sat on the mat because it"
    at = open_page("why", model="gpt2", text=text)
    assert not at.exception and at.selectbox(key="model").value == "gpt2"
    ids = gpt2.tokenizer.encode(text)
    trace = gpt2.model.run(ids)
    last = len(ids) - 1
    names, values = bars(at, "Why “")
    favourite = int(trace["logits"][0, last].argmax())
    assert values[-1] == pytest.approx(float(trace["logits"][0, last, favourite]), abs=1e-3)
    assert names[-2] == f"the other {2 + 12 * 12 + 12 + 2 - why.BARS} parts"        # 160 parts, 14 drawn one by one
    at.selectbox(key="why_target").set_value(-1).run()
    at.text_input(key="why_target_word").set_value("dog").run()              # " dog", one GPT-2 token
    assert not at.exception
    dog = gpt2.tokenizer.encode(" dog")[0]
    assert bars(at, "Why “")[1][-1] == pytest.approx(float(trace["logits"][0, last, dog]), abs=1e-3)
    show_section(at, "why", SECTIONS[1])
    assert not at.exception and figure_titled(at, "Routes into the prediction")
    show_section(at, "why", SECTIONS[2])
    at.text_input(key="why_corrupted").set_value("The dog sat on the mat because it").run()
    assert not at.exception
    z = np.asarray(decode(figure_titled(at, "stream entering a layer")["data"][0]["z"]), dtype=float)
    assert z.shape == (12, len(ids))
    pair = patching.make_pair(gpt2.model, ids, gpt2.tokenizer.encode("The dog sat on the mat because it"), last, answer=dog)
    assert np.allclose(z, patching.resid_pre_grid(gpt2.model, pair).numpy(), atol=1e-3)


def test_an_encoder_decoder_explains_its_decoder_with_cross_attention_heads():
    at = open_page("why", model="sort", text="7 3 9 1 5 2")
    assert not at.exception
    sort = load_bundled("sort")
    model = sort.model
    from model.seq2seq import greedy
    source = sort.tokenizer.encode("7 3 9 1 5 2")
    target = [model.bos_id, *greedy(model, source)]
    trace = model.run(source, target)
    assert "sort is an encoder-decoder: this page explains its **decoder**, which wrote “1 2 3 5 7 9”" in page_text(at)
    at.selectbox(key="why_decoder_position").set_value(2).run()
    favourite = int(trace["logits"][0, 2].argmax())
    names, values = bars(at, "Why “")
    assert values[-1] == pytest.approx(float(trace["logits"][0, 2, favourite]), abs=1e-3)
    assert any("cross" in name for name in names)
    assert f"after “{sort.tokenizer.vocab[target[2]]}” (position 2)" in page_text(at)
    for section in SECTIONS[1:]:
        show_section(at, "why", section)
        assert not at.exception and not plotly_figures(at)
        assert any("decoder-only models" in i.value for i in at.info), section


def test_the_big_picture_offers_the_why_page():
    at = open_page("home")
    links = {link.proto.label: link.proto.page for link in at.get("page_link")}
    assert BY_SLUG["why"].title in links
    assert BY_SLUG["why"].summary in page_text(at)


def test_a_post_norm_lab_model_says_why_it_cannot_be_split_and_still_patches():
    from claims_support import LAB, lab_bundle
    bundle = lab_bundle(**LAB["char, rms, post-norm, relu, learned"])
    at = open_page("home")
    at.session_state["trained_models"] = {"lab: post-norm": bundle}      # as the lab or an upload adds one
    at.run()
    at.selectbox(key="model").set_value("lab: post-norm").run()
    at.text_input(key="text").set_value("roses are red").run()
    at.switch_page("pages/why.py").run()
    assert not at.exception
    assert any("post-norm" in i.value for i in at.info) and not plotly_figures(at)
    show_section(at, "why", SECTIONS[1])
    assert not at.exception and any("post-norm" in i.value for i in at.info)
    show_section(at, "why", SECTIONS[2])
    at.text_input(key="why_corrupted").set_value("roses are bed").run()
    assert not at.exception
    ids = bundle.tokenizer.encode("roses are red")
    pair = patching.make_pair(bundle.model, ids, bundle.tokenizer.encode("roses are bed"), len(ids) - 1,
                       answer=int(bundle.model.run(ids)["logits"][0, -1].argmax()))
    z = np.asarray(decode(figure_titled(at, "stream entering a layer")["data"][0]["z"]), dtype=float)
    assert np.allclose(z, patching.resid_pre_grid(bundle.model, pair).numpy(), atol=1e-3)
