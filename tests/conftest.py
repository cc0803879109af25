"""Shared test helpers: run the app (or one page of it) with AppTest and read its charts.

Markers (pytest.ini), set here so that test files need no decorator: `browser` (a real server and Chromium:
every test in a test_browser*.py file or using one of BROWSER_FIXTURES), `slow` (the slowest of the others,
listed in SLOW) and `fresh_cache` (the test starts, and ends, with an empty st.cache_resource; listed in
FRESH_CACHE). The quick loop, `python3 dev.py test --quick`, is `pytest -m "not browser and not slow"`.

torch, NumPy and Streamlit are imported where they are used, not when this file is read: pytest-xdist's controller
reads it too and runs no test (it spent 4 s importing them; the workers finished collecting about 1 s sooner).
"""
from __future__ import annotations

import base64
import functools
import json
import os
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "streamlit_app.py")


def pytest_configure(config):
    """The app computes with one torch thread (streamlit_app.py); the tests' own reference traces must too.
    OpenMP's thread count is per calling thread, and on some CPUs (seen on an AMD EPYC) 1 and 2 threads
    round float32 sums differently (a relative 3e-6), more than the tests' exact-value tolerance."""
    controller = getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")
    if controller and not config.option.collectonly:           # pytest-xdist's controller: its workers run the tests
        return
    import torch
    torch.set_num_threads(1)


# Every wait in a real browser (Playwright's expect and a tab's own actions) gives up after this long: generous,
# so that a busy 2-core machine turns nothing red (a rerun after a click took longer than Playwright's 5 s there).
BROWSER_TIMEOUT_MS = 30_000
BROWSER_FIXTURES = {"tab", "app_url", "live_server", "chromium", "browser_context", "playwright_driver"}

# Tests that need st.cache_resource empty when they start: they count what the app builds or loads, or put
# what later tests must not see into the server-wide caches. Every other test shares the session's caches, as
# one server's visitors do, so each bundled model is loaded once per test session.
FRESH_CACHE = [
    "tests/test_page_attention.py::test_a_new_sentence_builds_only_the_open_sections_head_figure",   # counts builds
]

# The slowest tests that need no browser, left out of the quick loop: together about two thirds of the
# non-browser suite's time (`pytest -m "not browser" --durations=30` shows them), and every test of the quick loop
# that took over 0.7 s in a whole-suite run, but the layering checks (so the quick loop takes about a minute on 2
# cores). A file name marks all its tests; a name with [parameters] marks that one, a name without every one.
SLOW = [
    "tests/test_bundled_seq2seq.py::test_the_sort_checkpoint_is_reproduced_by_the_training_command",   # trains sort
    "tests/test_bundled_seq2seq.py::test_each_meets_its_exact_match_on_held_out_pairs_and_is_small",
    "tests/test_bundled.py::test_the_roses_checkpoint_is_reproduced_by_the_training_command",
    "tests/test_lab_positions.py::test_without_positions_the_model_cannot_reverse_and_with_them_it_can",
    "tests/test_lab_lengths.py::test_the_experiment_trains_on_3_to_8_digits_and_shows_exact_match_by_length_up_to_14",
    "tests/test_lab_encoder_decoder.py::test_a_lab_sort_run_learns_to_sort_held_out_lists",
    "tests/test_lab_encoder_decoder.py::test_the_lab_page_trains_an_encoder_decoder_and_explores_it_on_its_page",
    "tests/test_lab.py::test_a_session_keeps_at_most_four_runs",
    "tests/test_lab.py::test_start_step_pause_reset_drive_a_real_run_whose_loss_falls",
    "tests/test_lab.py::test_training_in_one_session_leaves_the_bundled_model_bit_for_bit_unchanged",
    "tests/test_claims_pages.py::test_every_claim_on_every_step_page_is_what_the_model_computes",    # 12 sweeps
    "tests/test_hostile.py",                         # hypothesis: generated sentences and links on every page
    "tests/test_gpt2_app.py",                        # loads GPT-2's shape for each test
    "tests/test_page_why.py::test_gpt2_attribution_a_typed_word_routes_and_its_patching_grids",     # GPT-2's shape
    "tests/test_pretrained.py::test_a_gpt2_shaped_model_round_trips_through_our_files_with_the_tie_kept",
    "tests/test_pretrained_llama.py::test_the_real_smollm2_shape_gives_transformers_logits",        # 135M weights
    "tests/test_tasks.py::test_exact_match_in_one_teacher_forced_pass_equals_greedy_decoding",
    "tests/test_class_replicas.py",                  # redis-server and two replica processes
    "tests/test_class_lecture.py",                   # ten students answer the whole lecture (AppTest)
    "tests/test_page_features.py::test_a_pretrained_models_neurons_are_read_over_the_bundled_english_text_once_and_kept_on_disk",
    "tests/test_questions.py::test_gpt2s_long_word_and_its_questions_are_answered_as_its_own_forward_pass_says",
    # the quick loop's own slowest (1 to 8 s each on 2 workers): most train a lab run or build a model's real shape
    "tests/test_smollm2_app.py::test_every_page_and_tab_runs_with_smollm2_on_its_own_numbers",        # SmolLM2's shape
    "tests/test_attribution.py::test_the_parts_add_up_on_a_gpt2_layout_model",                         # GPT-2's shape
    "tests/test_lab.py::test_long_runs_tick_less_often_and_train_longer_per_tick",
    "tests/test_lab.py::test_a_finished_run_appears_in_the_model_picker_and_the_walk_through_reads_it",
    "tests/test_lab.py::test_pause_pressed_while_a_tick_trains_leaves_the_run_paused",
    "tests/test_lab_encoder_decoder.py::test_gradient_flow_shows_every_parameters_mean_and_largest_gradient_"
    "when_opened",
    "tests/test_lab_views.py::test_runs_are_compared_within_the_active_runs_task_with_short_labels",
    "tests/test_lab_views.py::test_the_compare_chart_says_what_it_plots",
    "tests/test_lab_views.py::test_compared_runs_are_averaged_over_the_same_steps_however_their_ticks_were_cut",
    "tests/test_lab_diverge.py::test_a_diverged_model_is_never_published_nor_downloadable_and_reset_and_start_work",
    "tests/test_today_pages.py::test_the_todays_llm_preset_trains_on_the_walkthroughs_data_its_loss_falls_and_it_"
    "keeps_snapshots",
    "tests/test_today_pages.py::test_the_lab_trains_the_todays_llm_preset_and_its_model_opens_on_the_walk_through",
    "tests/test_today_pages.py::test_every_page_and_tab_renders_a_rotary_swiglu_grouped_model_without_biases",
    "tests/test_then_and_now.py",                    # GPT-2's and SmolLM2's shapes side by side
    "tests/test_bundled_seq2seq.py::test_translate_is_right_with_a_beam_of_four_too",
    "tests/test_cache.py::test_no_page_keeps_the_trace_once_drawn_so_the_cache_alone_holds_traces",   # every page
    "tests/test_trainer.py::test_a_sensible_recipe_never_counts_as_diverged",
    "tests/test_claims.py::test_animals_close_to_animals_and_feelings_close_to_feelings_is_said_only_where_measured"
    "[gpt2-shaped]",
    "tests/test_smollm2_app.py::test_smollm2s_kv_cache_is_a_third_of_what_one_key_value_head_per_query_head_would_keep",
    "tests/test_links_lab.py::test_any_lab_link_opens_a_setup_the_knobs_offer_and_starts_nothing",     # hypothesis
    "tests/test_lab.py::test_the_lab_offers_embed_scale_and_trains_with_it",
    "tests/test_lab.py::test_download_then_upload_gives_identical_logits",
    "tests/test_lab_views.py::test_the_time_left_follows_the_wall_clock_pace_of_ticks_not_the_compute_time",
    "tests/test_tasks.py::test_teacher_forcing_learns_to_reverse_three_digits_and_ignores_padding",
    # the quick loop's tests over 0.7 s in a whole-suite run (stop 41), but the layering checks (tests/test_imports.py)
    "tests/test_why.py::test_a_click_on_a_heads_bar_or_a_route_node_names_what_it_chose",
    "tests/test_dead_code.py::test_the_public_api_exists_and_is_documented",
    "tests/test_transformer.py::test_run_can_keep_only_some_names_with_the_same_values",
    "tests/test_chart_text.py::test_every_chart_on_every_tab_is_announced_by_a_sentence_from_its_data[tokenization]",
    "tests/test_lab.py::test_the_setup_panels_draw_their_knobs_only_while_open_and_keep_their_values",
    "tests/test_view.py::test_presenter_mode_survives_a_page_switched_to_by_code",
    "tests/test_gpt2_tokenizer.py::test_known_ids",
    "tests/test_generate.py::test_next_token_probabilities_are_a_distribution",
    "tests/test_url.py::test_only_the_url_module_touches_the_query_parameters",
    "tests/test_class.py::test_answers_come_in_live_and_the_reveal_shows_the_models_answer_beside_each_guess",
    "tests/test_lab.py::test_a_corrupted_upload_is_refused_with_a_message_and_nothing_is_lost",
    "tests/test_lab_views.py::test_explore_publishes_the_model_selects_it_with_its_probe_sentence_and_opens_the_walk_"
    "through",
    "tests/test_pretrained.py::test_every_loaded_weight_owns_exactly_its_memory",
    "tests/test_page_tokenization.py::test_the_vocabulary_can_be_searched_and_counts_come_from_the_training_text",
    "tests/test_page_tokenization.py::test_word_char_and_bpe_are_compared_with_real_token_counts",
    "tests/test_pretrained.py::test_every_intermediate_matches_hugging_face",
    "tests/test_discoveries.py::test_a_model_with_fresh_weights_gets_its_own_recomputed_heads",
    "tests/test_discoveries.py::test_reveal_shows_the_guess_beside_the_models_answer_and_keeps_it",
    "tests/test_lab.py::test_the_probe_sentence_is_the_one_whose_attention_is_watched_and_whose_words_start_the_samples",
    "tests/test_lab_scope.py::test_a_language_model_of_the_lab_says_which_text_it_read",
    "tests/test_pretrained_llama.py::test_logits_patterns_and_the_residual_stream_match_transformers",
    "tests/test_gpt2_tokenizer.py::test_added_tokens_outside_the_vocabulary_are_refused",
    "tests/test_edits.py::test_an_edit_that_works_in_place_still_changes_nothing_before_it_nor_the_shared_model",
    "tests/test_lab_views.py::test_the_lab_says_how_to_share_a_trained_model",
    "tests/test_claims.py::test_slow_motion_trains_two_steps_per_tick",
    "tests/test_class.py::test_students_join_with_the_code_and_follow_the_teachers_next_and_previous",
    "tests/test_encoder_decoder_app.py::test_every_tab_runs_on_real_numbers",
    "tests/test_pretrained.py::test_a_swapped_query_and_key_is_caught",
    # trains an SAE on tinytales' residual stream to issue 41's target (3-10 s each)
    "tests/test_sae.py::test_tinytales_reaches_explained_variance_09_with_l0_at_most_16",
    # reads every neuron of tinytales over its whole training text, 151,430 words, in one pass (3-4 s)
    "tests/test_features.py::test_tinytales_whole_text_in_one_pass_and_the_index_kept_on_disk_gives_the_same_contexts",
    # a feature's card recomputed window by window over 20,000 tokens (5-10 s); GPT-2's shape with its dictionary
    "tests/test_dictionary.py::test_a_features_card_shows_what_the_sae_and_the_model_compute",
    "tests/test_dictionary.py::test_gpt2_offline_the_download_says_why_the_other_layers_and_tabs_keep_working",
    # the quick loop's slowest after issues 41 and 42 (2-3.5 s each): a dictionary's pass kept on disk or trained in
    # the lab, and every page on Pythia at two steps
    "tests/test_dictionary.py::test_gpt2s_feature_index_is_read_once_and_kept_on_disk_a_sessions_dictionary_is_not",
    "tests/test_dictionary.py::test_a_kept_feature_index_round_trips_and_a_broken_one_is_read_again",
    "tests/test_dictionary.py::test_the_lab_trains_a_dictionary_whose_curves_are_its_trainers_history_and_keeps_it",
    "tests/test_dictionary.py::test_a_dictionary_of_this_model_uploads_and_is_listed_on_the_features_page",
    "tests/test_pythia_app.py::test_every_page_and_tab_runs_on_pythia_at_two_steps_on_its_own_numbers",
]


# Files with real-browser tests besides tests/test_browser*.py. Under pytest-xdist (python3 dev.py test) the browser
# tests run in BROWSER_GROUPS, each one test after another on one worker (its own server and browser), while the other
# workers take the rest file by file (BrowserGroups below).
BROWSER_FILES = {"tests/test_hostile.py", "tests/test_load.py"}

# The browser tests' groups (3.5-6 min each in a whole-suite run on 2 cores; the other files fill the workers around
# them): the WCAG walk of every page and tab; the walks of every page for links, the projector and the README's
# pictures; everything else.
BROWSER_GROUPS = {"tests/test_browser_a11y.py": "browser-a11y", "tests/test_browser_links.py": "browser-walks",
                  "tests/test_browser.py": "browser-walks", "tests/test_browser_presenter.py": "browser-walks"}


def _in_browser_group(nodeid: str) -> bool:
    file = nodeid.split("::", 1)[0]
    return Path(file).name.startswith("test_browser") or file in BROWSER_FILES


def browser_group(nodeid: str) -> str | None:
    """The browser group a test runs in (None: not a browser test)."""
    if not _in_browser_group(nodeid):
        return None
    return BROWSER_GROUPS.get(nodeid.split("::", 1)[0], "browser")


def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadgroup`: each browser group as one unit of work, every other file a unit of its own, the
    browser groups handed out first (they take longest).
    (pytest-xdist 3.8's own loadgroup reads xdist_group marks by renaming a test's node id through an attribute
    pytest 9 no longer reads: its groups are silently ignored, so the grouping is done here, by file name.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False         # the collection's order: browser groups first (below)

    class BrowserGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return browser_group(nodeid) or nodeid.split("::", 1)[0]

    return BrowserGroups(config, log)


def _listed(item, names: list[str]) -> bool:
    """Whether the test, its file, or this one parametrization of it ("...::test[param]") is in `names`."""
    test = item.nodeid.split("[", 1)[0]               # "tests/<file>.py::<test>", without parameters
    return item.nodeid in names or test in names or test.split("::", 1)[0] in names


@pytest.hookimpl(tryfirst=True)                        # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark browser, slow and fresh-cache tests; warn about a listed test that no longer exists."""
    for item in items:
        if item.path.name.startswith("test_browser") or BROWSER_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.browser)
            if not _in_browser_group(item.nodeid):
                raise pytest.UsageError(f"{item.nodeid} uses a real browser: add its file to BROWSER_FILES in "
                                        "tests/conftest.py, so that it runs in turn with the other browser tests")
        if _listed(item, SLOW):
            item.add_marker(pytest.mark.slow)
        if _listed(item, FRESH_CACHE):
            item.add_marker(pytest.mark.fresh_cache)
    order = list(dict.fromkeys(browser_group(item.nodeid) for item in items if browser_group(item.nodeid)))
    items.sort(key=lambda item: order.index(group) if (group := browser_group(item.nodeid)) else len(order))
    files = {item.nodeid.split("::", 1)[0] for item in items}
    tests = {item.nodeid.split("[", 1)[0] for item in items} | {item.nodeid for item in items}
    for name in SLOW + FRESH_CACHE:
        if "::" in name and name.split("::", 1)[0] in files and name not in tests:
            warnings.warn(f"tests/conftest.py lists {name}, which is not a test any more", pytest.PytestWarning)


@pytest.fixture
def fresh_cache():
    """An empty st.cache_resource (models, traces, figures) for this test, emptied again after it."""
    import streamlit as st
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


@pytest.fixture(scope="session", autouse=True)
def _apptest_starts_as_a_running_server_does():
    """An AppTest run does what a running server has already done once: AppTest compiles the scripts again at every
    run and looks through every installed package for Streamlit components at every new AppTest (about 0.1 s, most
    of a fresh page's run); a server does both once. The packages do not change during the tests."""
    from streamlit.components.v2 import manifest_scanner
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test

    class CompiledOnce(ScriptCache):
        """The scripts compiled once per test process; again when a file changes (its path, modification time and
        size are the key)."""
        compiled: dict[tuple, object] = {}

        def get_bytecode(self, script_path: str):
            path = os.path.abspath(script_path)
            stat = os.stat(path)
            key = (path, stat.st_mtime_ns, stat.st_size)
            if key not in self.compiled:
                self.compiled[key] = super().get_bytecode(path)
            return self.compiled[key]

    scan, cache = manifest_scanner.scan_component_manifests, app_test.ScriptCache
    manifest_scanner.scan_component_manifests = functools.cache(scan)
    app_test.ScriptCache = CompiledOnce
    yield
    manifest_scanner.scan_component_manifests, app_test.ScriptCache = scan, cache


@pytest.fixture(autouse=True)
def _pages_run_through_the_entry_point(monkeypatch):
    """Make AppTest's switch_page run streamlit_app.py (with its sidebar), as a real browser does.

    With a pages/ folder present Streamlit would run the page file alone; st.navigation apps never do.
    """
    from streamlit.runtime import pages_manager
    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    monkeypatch.setattr(pages_manager.PagesManager, "__init__", init)
    yield


@pytest.fixture(autouse=True)
def _fresh_cache_when_marked(request):
    """A test marked fresh_cache (FRESH_CACHE) gets the fresh_cache fixture without asking for it."""
    if request.node.get_closest_marker("fresh_cache"):
        request.getfixturevalue("fresh_cache")


def open_page(slug: str = "home", open_math: bool = True, **query) -> AppTest:
    """Run the app on page `slug` (a step slug, as in explorer.registry) with URL query parameters, its
    "Show the math" panel open unless `open_math` is False (a student opens it with a click)."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.session_state[f"math_{slug}"] = open_math        # the "Show the math" panel (its content runs only open)
    at.run()
    if slug != "home":
        at.switch_page(f"pages/{slug}.py").run()
    return at


def show_section(at: AppTest, slug: str, section: str) -> AppTest:
    """Open one of a page's sections (tabs), as a click on its tab does."""
    at.session_state[f"section_{slug}"] = section
    return at.run()


def assert_each_section_draws_only_its_charts(slug: str, sections: list[str], charts: list[int]) -> None:
    """In normal and presenter mode, opening section i of page `slug` draws exactly charts[i] Plotly figures."""
    for presenter in (0, 1):
        at = open_page(slug, presenter=presenter)
        for section, count in zip(sections, charts, strict=True):
            show_section(at, slug, section)
            assert not at.exception and len(plotly_figures(at)) == count, section
            assert at.session_state[f"section_{slug}"] == section


def type_text(at: AppTest, text: str) -> AppTest:
    """Type a sentence into the sidebar and press Enter."""
    at.text_input(key="text").set_value(text).run()
    return at


def decode(value):
    """Plotly 7 sends NumPy arrays as {dtype, bdata, shape}; turn them back into arrays."""
    import numpy as np
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            array = array.reshape([int(s) for s in str(shape).split(",")] if isinstance(shape, str) else shape)
        return array
    if isinstance(value, list):
        return np.asarray(value, dtype=object) if value and isinstance(value[0], str) else np.asarray(value)
    return value


def plotly_charts(at: AppTest) -> list[dict]:
    """Every Plotly chart on the page, in page order, as the app's keyed component receives it
    (explorer.app.plotly_component): {"figure": the figure's JSON text, "config": Plotly's config}."""
    return [json.loads(chart.proto.json) for chart in at.get("bidi_component")
            if chart.proto.component_name.endswith("explorer_plotly")]


def plotly_figures(at: AppTest) -> list[dict]:
    """Every Plotly chart on the page as its JSON figure (data and layout)."""
    return [json.loads(chart["figure"]) for chart in plotly_charts(at)]


def vega_chart_titled(at: AppTest, words: str):
    """(spec, data) of the Vega-Lite chart whose title contains `words`: the spec as a dict, the data as a
    pandas DataFrame read from the Arrow bytes Streamlit sends."""
    import json

    import pyarrow as pa
    for element in at.get("vega_lite_chart"):
        spec = json.loads(element.proto.spec)
        title = spec.get("title", "")
        title = title.get("text", "") if isinstance(title, dict) else str(title)
        if words.lower() in title.lower():
            [dataset] = element.proto.datasets
            return spec, pa.ipc.open_stream(dataset.data.data).read_pandas()
    raise AssertionError(f"no Vega-Lite chart titled {words!r}")


def figure_titled(at: AppTest, words: str) -> dict:
    """The Plotly figure whose title contains `words`."""
    for figure in plotly_figures(at):
        title = figure.get("layout", {}).get("title", {})
        text = title.get("text", "") if isinstance(title, dict) else str(title)
        if words.lower() in text.lower():
            return figure
    raise AssertionError(f"no figure titled {words!r}; titles: "
                         f"{[f.get('layout', {}).get('title') for f in plotly_figures(at)]}")


def page_text(at: AppTest) -> str:
    """All markdown, captions, info/warning text and headers of the page, joined (for 'shows X' checks)."""
    parts = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader"):
        parts += [str(element.value) for element in getattr(at, kind)]
    return "\n".join(parts)


# --- a real server and browser (test_browser*.py, test_load.py) -------------------------------------

def _in_ci() -> bool:
    import os
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


LESSON_STEPS = (0, 512, 1000, 143_000)   # the training steps "How a real model learned" reads (and Watch it learn)


@pytest.fixture(scope="session")
def lesson_hub_cache(tmp_path_factory):
    """A Hugging Face cache holding what the ready lessons read beyond the bundled models: Pythia-70M's layout at the
    training steps "How a real model learned" visits (random weights, small: tests/neox_support.py), as downloads
    leave it. The AppTest sessions and the live server read it; questions_support reads its answers from it."""
    import questions_support
    from neox_support import pythia_hub_cache
    cache, _ = pythia_hub_cache(tmp_path_factory.mktemp("lessons-hub"), steps=LESSON_STEPS)
    questions_support.HUB_CACHE = cache
    return cache


@pytest.fixture(scope="session")
def live_server(lesson_hub_cache):
    """`streamlit run streamlit_app.py` on a free local port for the whole test session: (url, process); its Hugging
    Face cache holds the ready lessons' Pythia steps (and nothing else: GPT-2 and SmolLM2 are not downloaded)."""
    from browser_support import serve
    with serve(env={"HF_HUB_CACHE": str(lesson_hub_cache)}) as (base, server):
        yield base, server


@pytest.fixture(scope="session")
def app_url(live_server):
    return live_server[0]


@pytest.fixture(scope="session")
def playwright_driver():
    """Playwright itself; under CI (CI=true) a missing Chromium or Playwright fails, elsewhere it skips."""
    import os
    from browser_support import CHROMIUM
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = [what for what, ok in (("Playwright", sync_playwright is not None),
                                     (CHROMIUM, os.path.exists(CHROMIUM))) if not ok]
    if missing:
        message = (f"{' and '.join(missing)} not installed "
                   "(apt-get install chromium-headless-shell; pip install playwright)")
        if _in_ci():
            pytest.fail("the browser tests must run in CI: " + message)
        pytest.skip(message)
    from playwright.sync_api import expect
    expect.set_options(timeout=BROWSER_TIMEOUT_MS)
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def chromium(playwright_driver):
    from browser_support import launch
    browser = launch(playwright_driver)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def browser_context(chromium):
    """One browser profile for the session, so the app's scripts are downloaded once and cached."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    yield context
    context.close()


@pytest.fixture(scope="session")
def second_profile(chromium):
    """Another browser profile, where a link made in the first one (or a fresh one) is reopened: nothing from the
    first view (cookies, storage, its Streamlit session) is there; the app's scripts are cached once here too."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    yield context
    context.close()


@pytest.fixture
def tab(browser_context, app_url):
    """A fresh tab (a new Streamlit session) that records any JavaScript dialog it is shown."""
    page = browser_context.new_page()
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    page.dialogs = []

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()
    page.on("dialog", on_dialog)
    yield page
    page.close()
