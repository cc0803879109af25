"""Shared figure helpers: visible token labels, and every step page's chart downloads at presentation size."""
import json

import pytest

from conftest import open_page, plotly_charts, show_section
from explorer.app.layout import FILE_FIELDS
from explorer.plot import MASKED, labels, template_for, token_label, visible
from explorer.registry import STEPS


@pytest.mark.parametrize("token, shown", [(".", "⟨.⟩"), (",", "⟨,⟩"), ("!?", "⟨!?⟩"), (" ", "␣"), ("  ", "␣␣"),
                                          ("\n", "↵"), ("\t", "⇥"), ("", "⟨⟩"), ("the", "the"),
                                          ("<unk>", "<unk>"), ("a.b", "a.b"), ("don't", "don't")])
def test_punctuation_and_whitespace_tokens_get_a_visible_glyph(token, shown):
    assert visible(token) == shown


def test_labels_and_bar_labels_use_the_glyph_and_stay_escaped():
    assert labels(["the", ".", " ", "cat"]) == ["0 the", "1 ⟨.⟩", "2 ␣", "3 cat"]
    assert token_label("<") == "⟨&lt;⟩" and token_label("<b>") == "&lt;b&gt;"        # shown, never interpreted
    assert token_label("<unk>") == "&lt;unk&gt;"


def chart_configs(at) -> list[dict]:
    return [chart["config"] for chart in plotly_charts(at)]


CHART_PAGES = [s.slug for s in STEPS if s.slug != "home"]


@pytest.mark.parametrize("slug", CHART_PAGES)
def test_every_chart_offers_a_presentation_size_download(slug):
    at = open_page(slug, presenter=1)
    assert not at.exception
    configs = chart_configs(at)
    assert configs, f"{slug} drew no chart"
    for config in configs:
        assert config["displayModeBar"] == "hover" and config["displaylogo"] is False
        # nothing that sends a class's data to Plotly's servers or links there; only what a student uses
        assert config["showSendToCloud"] is False and config["showEditInChartStudio"] is False
        assert config["showLink"] is False and config["modeBarButtons"] == [["toImage", "resetScale2d"]]
        image = config["toImageButtonOptions"]
        assert image["format"] == "png" and image["width"] == 1920 and image["height"] >= 1080
        assert image["scale"] == 1 and image["filename"].startswith(f"transformer-explorer-{slug}-")
        for field in FILE_FIELDS.get(slug, ()):              # named after what it shows: its layer, head, token
            assert f"-{field}{at.session_state[field]}" in image["filename"]
    names = [config["toImageButtonOptions"]["filename"] for config in configs]
    assert len(set(names)) == len(names)                      # every chart of a page saves under its own name


def test_the_sidebar_switches_downloads_to_svg_and_the_choice_survives_other_pages():
    at = open_page("attention")
    picker = at.segmented_control(key="figure_format")
    assert picker.label == "Figures download as" and picker.value == "PNG"
    picker.set_value("SVG").run()                      # a click on SVG
    assert {c["toImageButtonOptions"]["format"] for c in chart_configs(at)} == {"svg"}
    at.switch_page("pages/home.py").run()              # a page without charts or the picker
    at.switch_page("pages/prediction.py").run()
    assert {c["toImageButtonOptions"]["format"] for c in chart_configs(at)} == {"svg"}


def test_a_tall_figure_keeps_its_proportions_in_the_download():
    at = show_section(open_page("attention", presenter=1), "attention", "Every head")
    (config,) = chart_configs(at)
    assert config["toImageButtonOptions"]["height"] > 1080


def _contrast(a: str, b: str) -> float:
    def luminance(colour: str) -> float:
        channel = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        channel = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channel]
        return 0.2126 * channel[0] + 0.7152 * channel[1] + 0.0722 * channel[2]
    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("high_contrast", [False, True])
def test_each_theme_has_a_template_whose_text_reads_on_its_background(theme, high_contrast):
    layout = template_for(theme, high_contrast).layout
    paper = layout.paper_bgcolor
    assert (_contrast(paper, "#000000") > _contrast(paper, "#ffffff")) == (theme == "light")
    ink, faded = layout.font.color, layout.xaxis.tickfont.color
    assert _contrast(ink, paper) >= (7 if high_contrast else 4.5)              # WCAG AA text (AAA when asked)
    assert _contrast(faded, paper) >= (7 if high_contrast else 4.5)
    assert _contrast(MASKED, paper) >= 1.5 and layout.plot_bgcolor == paper    # a masked cell stands out
    assert template_for("no such theme", high_contrast) is template_for("light", high_contrast)


def test_charts_take_the_high_contrast_template_when_the_sidebar_asks():
    at = open_page("prediction")
    figure = json.loads(plotly_charts(at)[0]["figure"])
    assert figure["layout"]["template"]["layout"]["font"]["color"] == template_for("light").layout.font.color
    at.session_state["high_contrast"] = True
    at.run()
    figure = json.loads(plotly_charts(at)[0]["figure"])
    assert figure["layout"]["template"]["layout"]["font"]["color"] == "#000000"
    assert figure["layout"]["template"]["layout"]["paper_bgcolor"] == "#ffffff"
