"""Dictionary features (the Features page's "Dictionary features" tab) and the lab's sparse autoencoder, as a student
sees them (AppTest): every number of a feature's card recomputed here from the SAE and the model, window by window
with plain model.run; GPT-2 small's pretrained dictionary offline; the lab's curves are its trainer's history; a
corrupt or another model's dictionary is refused in words."""
import functools
import io
from dataclasses import replace
import json
import zipfile

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section
from explorer.app import sae as app_sae
from explorer.app.pinned import gpt2_dictionary
from explorer.plot import safe, token_label
from explorer.registry import BY_SLUG
from explorer.steps import dictionary, features
from explorer.steps.features import NO_FEATURE
from explorer.view import model_key
from model import neurons
from model.checkpoint import load_bundled
from model.dictionary import HISTOGRAM_EDGES, index_features, sae_features, sae_from_zip, sae_to_zip
from model.sae import SAE_PRESETS, SAETrainer, activations, gpt2_sae_spec, their_name
from test_steering import steered_by_hand

PAGE = BY_SLUG["features"]
TEXT = "the cat sat on the mat because"
LAYER = 0                                         # the stream after block 0 (tinytales has 2 blocks)


@pytest.fixture(autouse=True, scope="module")
def _the_first_20000_tokens():
    """Every model's text cut to its first 20,000 tokens (the page reads tiny tales' 151,430 in about 3 s; the
    recomputation here would take as long again)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(neurons, "MAX_TOKENS", 20_000)
        yield


def tab(at, name: str):
    return show_section(at, "features", PAGE.tab(name))


@functools.cache
def trained() -> dictionary.Dictionary:
    """A top-k dictionary (8x, k 8) of tinytales' stream after block 0, trained as the lab trains one: 150 steps."""
    bundle = load_bundled("tinytales")
    name = f"blocks.{LAYER}.resid_post"
    ids = neurons.text_ids(bundle, neurons.own_text(bundle))[:20_000]
    recipe = SAE_PRESETS["topk"]
    trainer = SAETrainer(recipe.config(64, their_name(name), "tinytales"), activations(bundle.model, ids, name),
                         recipe.train)
    trainer.step(150)
    sae = trainer.sae()
    return dictionary.Dictionary(model_key("test SAE", sae), "test SAE", sae, "trained by the test")


def with_dictionary(model: str = "tinytales", **query):
    """The Features page on `model` with this session keeping the trained dictionary, as the lab keeps one."""
    at = open_page("features", model=model, text=TEXT, layer=str(LAYER), **query)
    at.session_state["sae_kept"] = [app_sae.Kept(trained(), at.session_state["view"].key)]
    return tab(at, "dictionary")


def by_hand(bundle, sae, index, feature: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the feature's activation at every token of the text (n,), every feature's count of tokens it fires on
    (d_sae,)), each token read by the window that records it, through plain model.run and sae.encode."""
    top, name = index.top, sae.trace_name
    n, step, overlap = len(top.ids), top.step, top.overlap
    column, fired = torch.full((n,), float("nan")), torch.zeros(sae.cfg.d_sae, dtype=torch.long)
    starts = list(range(0, max(n - overlap, 1), step - overlap))
    full = [s for s in starts if s + step <= n]
    groups = [full[i:i + 512] for i in range(0, len(full), 512)] + [[s] for s in starts[len(full):]]
    with torch.no_grad():
        for group in groups:
            windows = torch.stack([top.ids[s:s + step] for s in group])                 # (B, t)
            acts = sae.encode(bundle.model.run(windows, names=[name])[name])             # (B, t, d_sae)
            for row, s in enumerate(group):
                first = overlap if s > 0 else 0
                kept = acts[row, first:]
                column[s + first:s + first + len(kept)] = kept[:, feature]
                fired += (kept > 0).sum(0)
    return column, fired


# --- the card -----------------------------------------------------------------------------------------------------

def test_a_features_card_shows_what_the_sae_and_the_model_compute():
    at = with_dictionary()
    assert not at.exception
    bundle, sae = load_bundled("tinytales"), trained().sae
    ids = list(at.session_state["view"].ids)
    with torch.no_grad():
        on_sentence = sae.encode(bundle.model.run(ids)[f"blocks.{LAYER}.resid_post"])[0]   # (T, d_sae)
    feature = int(on_sentence[-1].argmax())
    assert at.number_input(key="features_feature").value == feature                 # fires most on the last token
    # (d) the sentence: tokens x the features that fire most on it, each cell its activation
    heat = figure_titled(at, "fire most on your sentence")
    columns = [int(t) for t in heat["layout"]["xaxis"]["ticktext"]]
    expected = on_sentence.amax(0).topk(10).indices.tolist()
    assert columns == (expected if feature in expected else expected[:9] + [feature])   # the chosen one always there
    heat = heat["data"][0]
    torch.testing.assert_close(torch.tensor(decode(heat["z"]), dtype=torch.float32), on_sentence[:, columns])
    fire = (on_sentence > 0).sum(-1).float()
    assert f"{float(fire.mean()):.1f} fire at each token of your sentence" in page_text(at)
    # (a) its top contexts over tiny tales: the strongest is the largest activation anywhere in the text
    index = dictionary.feature_index(at.session_state["view"], trained(), neurons.own_text(bundle))
    column, fired = by_hand(bundle, sae, index, feature)
    assert not column.isnan().any()                                                   # every token read once
    top_value, top_position = float(column.max()), int(column.argmax())
    assert index.contexts(feature, 1)[0].value == pytest.approx(top_value, abs=1e-5)
    contexts = figure_titled(at, f"Where feature {feature} fires most")
    assert contexts["layout"]["yaxis"]["ticktext"][0].startswith(f"1: {top_value:.2f}")
    peak = list(decode(contexts["data"][0]["x"])).index(0)                              # the peak's column
    cut = token if len(token := bundle.tokenizer.vocab[int(index.top.ids[top_position])]) <= 5 else token[:4] + "…"
    assert str(decode(contexts["data"][0]["text"])[0][peak]) == token_label(cut)         # a token a cell can hold
    token = bundle.tokenizer.vocab[int(index.top.ids[top_position])]
    assert f"feature {feature} fires most on “{token}”, at {top_value:.2f}" in page_text(at)
    # (b) how often it fires: the share of tokens above 0, its activations' histogram, every feature's share
    n = len(index.top.ids)
    assert torch.equal(fired, index.fired) and index.tokens == n
    assert f"Feature {feature} fires on {int(fired[feature]):,} of the {n:,} tokens" in page_text(at)
    density = figure_titled(at, f"How often feature {feature} fires")
    bars, every = density["data"]
    edges = HISTOGRAM_EDGES.numpy().astype(float)
    counts, _ = np.histogram(column[column > 0].numpy(), bins=[0.0, *edges[1:-1], np.inf])
    centres = np.sqrt(edges[:-1] * edges[1:])                     # the bars stand at their bins' centres
    shown = decode(bars["y"]) > 0
    np.testing.assert_allclose(decode(bars["x"])[shown], centres[counts > 0], rtol=1e-6)
    np.testing.assert_array_equal(decode(bars["y"])[shown], counts[counts > 0])
    share = fired.double() / n
    np.testing.assert_allclose(np.sort(decode(every["x"])), np.sort(np.log10(share[share > 0].numpy())), rtol=1e-9)
    dead = int((fired == 0).sum())
    assert f"{dead:,} of them never fire on this text" in page_text(at) or dead == 0
    # (c) the tokens it pushes up and down: its decoder row through the final norm's scale and the unembedding
    w = sae.W_dec[feature].detach()
    logits = bundle.model.unembed.weight.detach() @ ((w - w.mean()) * bundle.model.final_norm.weight.detach())
    pushed = figure_titled(at, f"What feature {feature} writes")["data"]
    up = logits.topk(10)
    torch.testing.assert_close(torch.tensor(decode(pushed[0]["x"]), dtype=torch.float32), up.values)
    assert [t.split(" ", 1)[1] for t in decode(pushed[0]["y"])] == [token_label(bundle.tokenizer.vocab[i])
                                                                     for i in up.indices]
    assert f"raises the score of “{bundle.tokenizer.vocab[int(up.indices[0])]}” most" in page_text(at)
    assert "trained by the test" in page_text(at)                                    # where it comes from
    assert "feature" in page_text(at) and "neuron" not in figure_titled(at, "writes")["layout"]["title"]["text"]


def test_another_feature_and_steering_with_it_adds_its_decoder_row_after_its_layer():
    at = with_dictionary()
    other = int(figure_titled(at, "fire most on your sentence")["layout"]["xaxis"]["ticktext"][1])
    at.number_input(key="features_feature").set_value(other).run()
    assert not at.exception and figure_titled(at, f"Where feature {other} fires most")
    at.button(key="sae_steer").click().run()
    assert not at.exception and at.session_state["section_features"] == PAGE.tab("steering")
    assert at.radio(key="features_steer_by").value == "feature" and at.session_state["layer"] == LAYER
    bundle, sae = load_bundled("tinytales"), trained().sae
    ids = list(at.session_state["view"].ids)
    strength = at.number_input(key="features_strength").value
    written, _ = steered_by_hand(bundle.model, ids, LAYER, strength * sae.W_dec[other].detach(), 20)
    heat = figure_titled(at, "without and with steering")["data"][0]
    steered = [bundle.tokenizer.vocab[i] for i in written]
    assert [str(step[1]) for step in decode(heat["customdata"])[1]] == [safe(t) for t in steered]     # hover: whole
    assert [str(t) for t in decode(heat["text"])[1]] == [token_label(features._short(t, at.session_state["view"],
                                                                                    features.STEP_CHARS))
                                                         for t in steered]                          # cells: cut to fit
    assert f"Steered with feature {other} of test SAE at strength {strength:g}" in page_text(at)


@pytest.mark.parametrize("feature", ["abc", "-1", "512", "1e9", "7"])
def test_a_links_feature_is_kept_when_the_dictionary_has_it_and_else_the_busiest_is_shown(feature):
    at = with_dictionary(feature=feature)
    assert not at.exception
    busiest = dictionary.busiest_feature(at.session_state["view"], trained().sae)
    assert at.number_input(key="features_feature").value == (7 if feature == "7" else busiest)
    assert at.query_params["feature"] == str(at.number_input(key="features_feature").value)


def test_a_hostile_sentence_is_shown_as_text_on_the_dictionary_tab():
    at = with_dictionary()
    at.text_input(key="text").set_value("<script>alert(1)</script> the cat **sat**").run()
    assert not at.exception and "<script>" not in page_text(at).replace("\\<script\\>", "")
    assert figure_titled(at, "fire most on your sentence")


def test_without_a_dictionary_the_tab_says_how_to_get_one_and_steering_by_a_feature_says_pick_one():
    at = tab(open_page("features", model="roses", layer="1"), "dictionary")
    assert not at.exception and not plotly_figures(at)
    assert any("No dictionary of **roses** reads layer 1 yet" in i.value for i in at.info)
    at = tab(at, "steering")
    at.radio(key="features_steer_by").set_value("feature").run()
    assert not at.exception and any(NO_FEATURE in i.value for i in at.info)


# --- GPT-2 small's pretrained dictionary ----------------------------------------------------------------------------

def gpt2_sae_files(cache, layer: int, d_in: int, d_sae: int = 32) -> None:
    """gpt2-small-res-jb's files for SAELens' layer `layer` in the hub cache, as a download leaves them (random
    weights of width `d_in`; the published cfg.json's fields)."""
    from test_sae import PUBLISHED_CFG
    spec = gpt2_sae_spec(layer)
    hook = spec.files[0].split("/")[0]
    folder = cache / f"models--{spec.repo_id.replace('/', '--')}" / "snapshots" / spec.revision / hook
    folder.mkdir(parents=True)
    g = torch.Generator().manual_seed(layer)
    save_file({"W_enc": torch.randn(d_in, d_sae, generator=g), "b_enc": torch.zeros(d_sae),
               "W_dec": torch.nn.functional.normalize(torch.randn(d_sae, d_in, generator=g), dim=-1),
               "b_dec": torch.zeros(d_in)}, folder / "sae_weights.safetensors")
    (folder / "cfg.json").write_text(json.dumps({**PUBLISHED_CFG, "hook_point": hook, "d_in": d_in, "d_sae": d_sae,
                                                 "hook_point_layer": int(hook.split(".")[1])}))


@pytest.fixture(scope="module")
def gpt2_cache(tmp_path_factory):
    """A GPT-2-shaped model (12 layers, d_model 48) where GPT-2's files would be, and two layers of the dictionary:
    one of GPT-2 small's real width (768, which this narrow model cannot read) and one of its own width."""
    from gpt2_support import gpt2_hub_cache
    cache = gpt2_hub_cache(tmp_path_factory.mktemp("gpt2"), d_model=48)
    gpt2_sae_files(cache, app_sae.gpt2_file_layer(3), 768)
    gpt2_sae_files(cache, app_sae.gpt2_file_layer(5), 48)
    return cache


def test_gpt2_offline_the_download_says_why_the_other_layers_and_tabs_keep_working(gpt2_cache, monkeypatch):
    from explorer.app import models
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", gpt2_cache)
    at = tab(open_page("features", model="gpt2", text="Paris is the capital of France", layer="1"), "dictionary")
    assert not at.exception and at.selectbox(key="features_dictionary").value == app_sae.PRETRAINED_KEY
    assert not plotly_figures(at)                                 # nothing is downloaded until asked
    at.button(key="sae_download").click().run()
    warned = [w.value for w in at.warning]
    assert not at.exception and any("one-time download" in w and "offline" in w for w in warned), warned
    assert any(w.startswith("GPT-2 small's feature dictionary of the stream after block 1 (SAELens' layer 2) needs")
               for w in warned)                                   # the page's layer, and the file's name for it
    assert "Traceback" not in page_text(at) and not at.main.get("progress")
    assert not [e for e in at.main.expander if "download" in str(e.label).lower()]   # no leftover box to open
    at.run()                                                      # said again on the next run, still no exception
    assert any("one-time download" in w.value for w in at.warning)
    at.session_state["layer"] = 3                                 # GPT-2 small's real width: not this model's
    at.run()
    assert not at.exception and any("trained on gpt2-small, not on gpt2: it reads 768 numbers per token" in w.value
                                    for w in at.warning)
    at.session_state["layer"] = 5                                 # its own width: the whole card
    at.run()
    assert not at.exception and figure_titled(at, "fire most on your sentence")
    assert figure_titled(at, "fires most in Pride and Prejudice") and figure_titled(at, "writes")
    assert "SAELens' layer 6" in page_text(at)
    at = tab(at, "neurons")
    assert not at.exception
    at = lab_panel("gpt2")                                        # the lab trains no dictionary of GPT-2 small
    assert not at.exception and any("The lab trains dictionaries for the tiny models" in i.value for i in at.info)
    assert "lab_sae_start" not in [b.key for b in at.button] and at.file_uploader(key="lab_sae_upload")


def test_a_feature_cards_ask_the_class_is_answered_from_the_pinned_dictionary_on_a_students_screen(gpt2_cache,
                                                                                                   monkeypatch):
    from explorer.app import classroom, models
    from explorer.lessons import Lesson
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", gpt2_cache)
    text = "Paris is the capital of France"
    at = tab(open_page("features", model="gpt2", text=text, layer="5"), "dictionary")
    feature = at.number_input(key="features_feature").value
    assert not at.button(key="sae_ask").disabled
    at.button(key="sae_ask").click().run()
    [step] = at.session_state[classroom.DRAFT]
    strength = features.DEFAULT_STRENGTH["feature"]
    assert (step.page, step.tab, step.question.kind) == ("features", "steering", "steered-word")
    assert step.fields == {"steer-by": "feature", "feature": feature, "dictionary": "pretrained",
                           "strength": strength} and step.view["layer"] == 5
    # the class's answer: the steered model's top next word, recomputed here through the file's decoder row
    view = at.session_state["view"]
    sae = gpt2_dictionary(app_sae.gpt2_file_layer(5), str(gpt2_cache))
    written, _ = steered_by_hand(view.bundle.model, list(view.ids), 5, strength * sae.W_dec[feature].detach(), 1)
    from explorer.questions import label
    asked = classroom.asked(step, "gpt2", text)
    assert asked is not None and asked.answer == label(view.bundle.tokenizer.vocab[written[0]])
    assert f"Steered with feature {feature} of GPT-2 small's dictionary after block 5" in asked.said
    # a student's screen at that step (a fresh session, no "Steer with this feature" pressed): the same steering
    student = open_page("features", model="gpt2", text=text, layer="5", **{"steer-by": "feature",
                        "feature": str(feature), "dictionary": "pretrained", "strength": f"{strength:g}"})
    student = tab(student, "steering")
    assert not student.exception and features.NO_FEATURE not in page_text(student)
    assert f"Steered with feature {feature} of GPT-2 small's dictionary after block 5" in page_text(student)
    # a dictionary this session trained cannot be asked about: the students' screens do not have it
    mine = with_dictionary()
    assert mine.button(key="sae_ask").disabled and "pinned dictionary" in mine.button(key="sae_ask").help


def test_gpt2s_feature_index_is_read_once_and_kept_on_disk_a_sessions_dictionary_is_not(gpt2_cache, tmp_path,
                                                                                        monkeypatch, fresh_cache):
    from explorer.app import models
    from model import dictionary as model_dictionary
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", gpt2_cache)
    monkeypatch.setattr("explorer.app.neurons.FEATURE_DIR", tmp_path)
    at = tab(open_page("features", model="gpt2", text="Paris is the capital of France", layer="5"), "dictionary")
    contexts = figure_titled(at, "fires most in Pride and Prejudice")
    [file] = tmp_path.iterdir()
    kept = model_dictionary.load_feature_index(file)
    assert file.name.startswith("gpt2-") and kept.fired.shape == (32,) and kept.tokens == neurons.MAX_TOKENS
    import streamlit as st
    st.cache_resource.clear()                                          # a restarted server: the file, no pass
    monkeypatch.setattr(model_dictionary, "index_features", lambda *a, **k: pytest.fail("the text was read again"))
    again = tab(open_page("features", model="gpt2", text="Paris is the capital of France", layer="5"), "dictionary")
    assert not again.exception
    assert figure_titled(again, "fires most in Pride and Prejudice")["data"] == contexts["data"]
    assert torch.equal(kept.counts, model_dictionary.load_feature_index(file).counts)


def test_a_kept_feature_index_round_trips_and_a_broken_one_is_read_again(tmp_path):
    from explorer import questions
    from model import dictionary as model_dictionary
    view = questions.reading("tinytales", load_bundled("tinytales"), "the cat sat", 64)
    chosen = trained()
    text = features.own_text(view)
    first = dictionary.feature_index(view, chosen, text, kept=tmp_path / "tiny.safetensors")
    back = model_dictionary.load_feature_index(tmp_path / "tiny.safetensors")
    assert back.tokens == first.tokens and torch.equal(back.fired, first.fired)
    assert torch.equal(back.counts, first.counts) and back.contexts(3) == first.contexts(3) != []
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"not a safetensors file")
    again = dictionary.feature_index(view, chosen, text, kept=broken)
    assert torch.equal(again.fired, first.fired) and model_dictionary.load_feature_index(broken).tokens == first.tokens


# --- the lab ------------------------------------------------------------------------------------------------------

def lab_panel(model: str = "tinytales"):
    at = open_page("training", model=model)
    at.session_state["lab_sae_panel"] = True                      # the panel is drawn only while open
    return at.run()


def test_the_lab_trains_a_dictionary_whose_curves_are_its_trainers_history_and_keeps_it():
    at = lab_panel()
    assert not at.exception and at.selectbox(key="lab_sae_layer").value == 0
    at.button(key="lab_sae_start").click().run()
    run = at.session_state["sae_run"]
    while run.trainer.steps_done < 100:                           # each run is a tick of the page's fragment
        at.run()
    assert not at.exception and run.setup == app_sae.SAESetup(0, 8, "topk", 8, 1.0)
    assert run.trainer.cfg.d_sae == 512 and run.trainer.cfg.hook_name == "blocks.0.hook_resid_post"
    history = run.trainer.history
    curves = figure_titled(at, "The dictionary learning")["data"]
    assert len(curves) == 4 and len(decode(curves[0]["x"])) == len(history) <= dictionary.CURVE_POINTS
    for trace, (name, _) in zip(curves, dictionary.CURVES):               # every step the trainer took, as it measured
        np.testing.assert_array_equal(decode(trace["x"]), [m.step for m in history])
        np.testing.assert_allclose(decode(trace["y"]), [getattr(m, name) for m in history])
    assert history[-1].l0 == 8 and history[-1].explained_variance > 0.85
    assert f"Step {history[-1].step}: explained variance {history[-1].explained_variance:.3f}" in page_text(at)
    long = [replace(history[0], step=s) for s in range(1, 1001)]         # a long run's curves are thinned evenly
    assert [m.step for m in dictionary.curve_steps(long)] == [*range(1, 1001, 4), 1000]
    at.button(key="lab_sae_pause").click().run()
    [kept] = at.session_state["sae_kept"]
    assert kept.model == at.session_state["view"].key and "SAE 1 (8x, top-8, after block 0)" == kept.dictionary.name
    again = sae_from_zip(app_sae.download_bytes(kept.dictionary))          # what the download button serves
    torch.testing.assert_close(again.W_dec, kept.dictionary.sae.W_dec)
    assert again.cfg.extra["steps"] == run.trainer.steps_done and again.cfg.model_name == "tinytales"
    with zipfile.ZipFile(io.BytesIO(app_sae.download_bytes(kept.dictionary))) as z:
        assert sorted(z.namelist()) == ["cfg.json", "sae_weights.safetensors"]


def test_a_diverging_dictionary_stops_with_its_message_and_is_not_kept():
    at = lab_panel()
    bundle = load_bundled("tinytales")
    x = activations(bundle.model, bundle.tokenizer.encode(TEXT * 8), "blocks.0.resid_post")
    recipe = SAE_PRESETS["l1"]
    trainer = SAETrainer(recipe.config(64, "blocks.0.hook_resid_post", "tinytales"), x,
                         replace(recipe.train, l1_coefficient=1e38, l1_warmup=0, lr_warmup=0))
    at.session_state["sae_run"] = app_sae.SAERun("SAE 9", at.session_state["view"].key, "tinytales",
                                                 app_sae.SAESetup(0, sparsity="l1", l1=1e38), trainer, "tiny tales")
    at.session_state["sae_running"] = True
    at.run()
    assert not at.exception and not at.session_state["sae_running"] and not at.session_state.get("sae_kept")
    assert any(e.value.startswith("Training stopped at step 1: the loss became NaN or infinite") for e in at.error)
    assert "stopped" in at.get("progress")[0].proto.text


@pytest.mark.parametrize("data, message", [
    (b"\x00garbage" * 100, "not a zip of a dictionary"),
    (None, "lacks sae_weights.safetensors"),
    ("mismatched", "W_enc has shape (64, 512), but cfg.json's d_in 32 and d_sae 512 make it (32, 512)"),
    ("tinytales", "trained on tinytales, not on roses: it reads 64 numbers per token at blocks.0.resid_post, and "
                  "roses has 32 there"),
])
def test_a_corrupt_or_another_models_dictionary_is_refused_in_words(data, message):
    if data is None:
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as z:
            z.writestr("cfg.json", "{}")
        data = zipped.getvalue()
    elif data == "mismatched":                                   # cfg.json of one width, weights of another
        zipped = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(sae_to_zip(trained().sae))) as source, zipfile.ZipFile(zipped, "w") as z:
            z.writestr("sae_weights.safetensors", source.read("sae_weights.safetensors"))
            z.writestr("cfg.json", json.dumps({**json.loads(source.read("cfg.json")), "d_in": 32}))
        data = zipped.getvalue()
    elif data == "tinytales":
        sae = trained().sae
        sae.cfg.model_name = "tinytales"
        data = sae_to_zip(sae)
    at = lab_panel("roses")
    at.file_uploader(key="lab_sae_upload").upload("dictionary.zip", data).run()
    assert not at.exception
    assert any("That dictionary could not be used" in w.value and message in w.value for w in at.warning), \
        [w.value for w in at.warning]
    assert "sae_kept" not in at.session_state or not at.session_state["sae_kept"]        # nothing was kept


def test_a_dictionary_of_this_model_uploads_and_is_listed_on_the_features_page():
    at = lab_panel()
    at.file_uploader(key="lab_sae_upload").upload("mine.zip", sae_to_zip(trained().sae)).run()
    assert not at.exception and [k.dictionary.name for k in at.session_state["sae_kept"]] == ["upload: mine.zip"]
    at.switch_page("pages/features.py").run()
    at = tab(at, "dictionary")
    assert not at.exception and at.selectbox(key="features_dictionary").options == ["upload: mine.zip"]


# --- the one pass, by itself ----------------------------------------------------------------------------------------

def test_the_sae_reads_the_stream_without_running_the_rest_of_the_model():
    bundle, sae = load_bundled("tinytales"), trained().sae
    ids = bundle.tokenizer.encode(TEXT)
    with torch.no_grad():
        expected = sae.encode(bundle.model.run(ids)[sae.trace_name])
    torch.testing.assert_close(sae_features(bundle.model, sae, [ids]), expected)
    index = index_features(bundle.model, sae, bundle.tokenizer.encode("the cat sat on the mat . " * 12))
    assert index.tokens == len(index.top.ids) and int(index.counts.sum()) == int(index.fired.sum())
