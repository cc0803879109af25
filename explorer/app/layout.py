"""The parts every step page shares: header, explanation, "show the math", step buttons, link, pickers.

User text never goes into HTML: it is shown through widgets, tables and charts, or escaped with
`quote` before it goes into Markdown.
"""
import contextlib
import functools
import sys
import threading
from collections.abc import Callable

import pandas as pd
import plotly.io as pio
import streamlit as st
import torch

from model.layers import Trace
from model.scope import scope_of

from explorer.scope import input_notices, source_check, words_markdown, words_title
from explorer.app import classroom, url
from explorer.app.state import link_to, section_key, use_example, view_params
from explorer.chart_text import describe, has_tables, tables
from explorer.plot import DIMS_SHOWN, template_for
from explorer.pointer import point_at
from explorer.veil import VEILS
from explorer.app.plotly_component import plotly_chart
from explorer.app.styles import PRESENTER_TEXT_PX, page_css
from explorer.view import View, escape, example_sentence, quote, shorten  # noqa: F401  (pages import quote from here)
from explorer.app.models import is_encoder_decoder
from explorer.registry import BY_SLUG, ENCODER_DECODER, STEPS, neighbours

WALK_THROUGH = {step.slug for step in STEPS}       # pages that show a decoder-only language model


def page_header(slug: str, view: View, encoder_decoder: bool = False) -> None:
    """The app's CSS (explorer/app/styles.py: presenter mode, high contrast), title and any notices about the input.
    A walk-through page stops for an encoder-decoder (with a link to its page) unless it explains one too
    (`encoder_decoder`)."""
    st.html(page_css(view.presenter, bool(st.session_state.get("high_contrast"))))
    figure_format_picker()
    _page.named_inside = []           # the places of pickers that say their name inside their box
    if view.presenter:      # a projector's first screen: the pickers and the explanation's button beside the title
        row = st.container(horizontal=True, vertical_alignment="center", key="title_row")
        row.title(BY_SLUG[slug].title, width="content")
        _page.pickers = row.container(width="stretch")
        _page.aside = row.container(horizontal=True, horizontal_alignment="right", width="content")
    else:
        _page.pickers = _page.aside = None
        st.title(BY_SLUG[slug].title)
    notices = st.container()           # always there, even empty: a notice coming or going moves nothing below,
    for notice in view.notices + input_notices(view):                                # so charts keep their place
        notices.warning(notice, icon=":material/info:")
    _offer_a_sentence(view, notices)
    if slug in WALK_THROUGH and is_encoder_decoder(view.bundle) and not encoder_decoder:
        st.info(f"**{view.name}** is an encoder-decoder (a source in, a target out), and this page shows a "
                "decoder-only language model (tinytales, roses, GPT-2). The encoder, the decoder and the "
                "cross-attention between them are on the encoder-decoder page.", icon=":material/translate:")
        st.page_link(ENCODER_DECODER.file, label=f"Open {ENCODER_DECODER.title}", icon=ENCODER_DECODER.icon)
        st.stop()


def word_list(view: View, where=st, expanded: bool = False) -> None:
    """Every word (or character) the model can read, in a panel; nothing for a model that reads any text."""
    scope = scope_of(view.bundle)
    if scope.words:
        with where.expander(words_title(view), expanded=expanded, icon=":material/menu_book:"):
            st.markdown(words_markdown(scope))


def _offer_a_sentence(view: View, where) -> None:
    """When the model cannot read the sentence (unknown words, or a source outside what an encoder-decoder learned),
    open the list of words it knows and offer one sentence it can read, beside the notice."""
    if view.prepared is not None and view.prepared.unknown and not is_encoder_decoder(view.bundle):
        word_list(view, where, expanded=not view.presenter)    # an encoder-decoder's card has its lexicon
    check = source_check(view) if view.prepared is not None else None
    cannot_read = view.prepared is None or view.prepared.unknown or (check is not None and check.problems)
    example = example_sentence(view.name, view.bundle)
    if cannot_read and example and example != view.text:
        where.button(f"Use a sentence {escape(view.name)} knows: {quote(shorten(example))}", on_click=use_example,
                     args=(example,), key="use_example", icon=":material/lightbulb:",
                     help="This model does not know every word of the sentence in the sidebar, or was not trained on "
                          "sentences like it.")


FIGURE_FORMATS = {"PNG": "png", "SVG": "svg"}
FORMAT_KEY = "_figure_format"         # kept when a page without the picker runs (a widget's key would not be)


def _keep_format() -> None:
    # A callback may run after a page switch took its widget away (Streamlit then calls it with the browser's last
    # value, but the key is gone): read it with .get, as every callback of a value widget does.
    value = st.session_state.get("figure_format")
    if value in FIGURE_FORMATS:
        st.session_state[FORMAT_KEY] = value


def figure_format_picker() -> None:
    """The sidebar's choice of what a figure's camera button downloads (PNG or SVG, presentation size)."""
    formats = list(FIGURE_FORMATS)
    st.sidebar.segmented_control(
        "Figures download as", formats, default=st.session_state.get(FORMAT_KEY, formats[0]), key="figure_format",
        on_change=_keep_format, required=True,
        help="The camera button at the top right of a figure saves it at presentation size (1920 pixels wide).")


TOOLBAR = [["toImage", "resetScale2d"]]      # what a student uses: save the figure, undo a zoom


# The view fields a saved figure's file name carries, per page (what the figure shows depends on them).
FILE_FIELDS = {"attention": ("layer", "head", "token"), "feedforward": ("layer", "token"),
               "residual": ("layer", "token"), "prediction": ("token",), "why": ("token",)}


def figure_file_name(key: str | None = None) -> str:
    """A saved figure's file name, after what it shows: 'transformer-explorer-attention-pattern-layer1-head2-token6'."""
    page = st.session_state.get("_page") or "home"
    parts = ["transformer-explorer", page, *([key] if key else [])]
    parts += [f"{field}{st.session_state[field]}" for field in FILE_FIELDS.get(page, ())
              if isinstance(st.session_state.get(field), int)]
    return "-".join(part.replace("_", "-") for part in parts)


def chart_config(fig=None, key: str | None = None) -> dict:
    """Plotly's config for every step page's chart: a toolbar of two buttons (its camera saves the figure at
    presentation size, 1920 pixels wide, at least 1080 high, a taller figure keeping its proportions, in the
    sidebar's format, named after what it shows; the other resets the axes), and nothing that links to or uploads
    to Plotly's servers."""
    height = (fig.layout.height if fig is not None else None) or 0
    return {"displaylogo": False, "displayModeBar": "hover",        # shown on hover: never over a chart's title
            "modeBarButtons": TOOLBAR, "showSendToCloud": False, "showEditInChartStudio": False,
            "showLink": False, "showTips": False,
            "toImageButtonOptions": {
                "format": FIGURE_FORMATS.get(st.session_state.get(FORMAT_KEY), "png"),
                "filename": figure_file_name(key),
                "width": 1920, "height": max(1080, round(height * 1.5)), "scale": 1}}


def chart_theme() -> tuple[str | None, bool]:
    """The theme the visitor's browser shows, and the sidebar's high-contrast choice."""
    return st.context.theme.type, bool(st.session_state.get("high_contrast", False))


@functools.cache
def template_json(theme: str | None, high_contrast: bool) -> dict:
    return template_for(theme, high_contrast).to_plotly_json()


def chart(fig, where=st, *, key: str, description: str | None = None, clickable: bool = False,
          part: str | None = None) -> dict | None:
    """Draw a Plotly figure with the shared config (download at presentation size) in the page's theme as the
    page's chart named `key`: when the sentence or a slider changes, the browser redraws that chart in place
    (see `plotly_component` for why this is not `st.plotly_chart`). A screen reader announces it by a sentence
    computed from its data (`description` when the page knows a better one), and "Show as a table" under it
    lists its numbers (computed only while open). `fig` is not changed (it may be a cached figure). With
    `clickable`, returns the point a click on the chart just chose (see `plotly_component.plotly_chart`).
    A chart that is `part` of what answers an open question (explorer/veil.py) is a placeholder of its size."""
    if veiled(part):
        veil_box(part, where, height=fig.layout.height or 450, key=key)
        return None
    revealed = classroom.revealed_here()
    if revealed is not None and part in VEILS.get(revealed.kind, ()):   # the reveal: the answer, pointed at
        fig = point_at(fig, revealed.target)
    theme = chart_theme()
    figure = once_per_figure(fig, ("json", theme), lambda: figure_json(fig, template_json(*theme)))
    label = once_per_figure(fig, ("label", description), lambda: describe(fig, description))
    clicked = plotly_chart(figure, key, chart_config(fig, key), label, where, clickable,
                           screen=bool(st.session_state.get("presenter")), theme=theme[0])
    if once_per_figure(fig, ("tables",), lambda: has_tables(fig)):
        with contextlib.nullcontext() if where is st else where:
            table_panel(fig, key)
    return clicked


def veiled(part: str | None) -> bool:
    """Whether `part` of the page answers the open question on this screen (it is drawn as a placeholder)."""
    veil = classroom.current_veil()
    return veil is not None and veil.covers(part)


VEIL_HEIGHT = 120           # a placeholder's height (px) when what it stands for has no height of its own


def veil_box(part: str, where=st, height: int | None = None, key: str | None = None) -> None:
    """The placeholder of a veiled part: a box of the part's size saying that it comes at the reveal."""
    box = where.container(border=True, height=int(height or VEIL_HEIGHT), key=f"veil_{key or part}")
    box.markdown(":material/visibility_off: " + classroom.current_veil().words(part))


def say(markdown: str, part: str, where=st, *, caption: bool = False) -> None:
    """Write a sentence computed from `part`'s numbers, unless an open question veils that part (the chart's
    placeholder says what is hidden)."""
    if not veiled(part):
        (where.caption if caption else where.markdown)(markdown)


def figure_json(fig, template: dict) -> str:
    """`fig` as the chart component reads it: its JSON, in `template` (`fig` is not changed)."""
    figure = fig.to_dict()
    figure["layout"]["template"] = template
    return pio.to_json(figure, validate=False)


def once_per_figure(fig, what: tuple, make: Callable):
    """`make()` once per `what` for a figure from the shared figure cache (`explorer.app.cache.per_view`: shared by
    every visitor and never changed; what is made is kept on the figure and goes with it), so many visitors on one
    view (a class) pay for its JSON and its sentence once; any other figure, every time."""
    drawn = getattr(fig, "_drawn", None)
    if drawn is None:
        return make()
    if what not in drawn:
        drawn[what] = make()           # two visitors at once may both make it: the same value
    return drawn[what]


def table_panel(fig, key: str) -> None:
    """The chart's numbers as tables, in a collapsed panel whose content runs only while it is open."""
    panel = st.expander("Show as a table", icon=":material/table:", key=f"table_{key}", on_change="rerun")
    if panel.open:
        with panel:
            for table in tables(fig):
                st.caption(table.title)
                st.dataframe(table_frame(table), hide_index=True)


def table_frame(table) -> pd.DataFrame:
    """A chart table as a DataFrame: its first column the labels, then one column per series (columns keep
    their names even when two are alike)."""
    frame = pd.DataFrame(table.rows, columns=range(len(table.columns)))
    frame.columns = unique_names(table.columns)
    return frame


def unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out


def require_trace(view: View, slug: str):
    """The view's trace, for a page to read at its top level; stop the page with a friendly prompt when there is no
    sentence to show. The page's own variables are let go of after its run (`let_go_of_page_tensors`)."""
    if view.trace is None:
        st.info(view.problem or "Type a sentence in the sidebar.", icon=":material/edit:")
        step_nav(slug)
        st.stop()
    _page.variables = sys._getframe(1).f_globals          # the calling page's module namespace
    return view.trace


def let_go_of_page_tensors() -> None:
    """Drop the trace and the tensors the page that just ran keeps in its variables. A function a page hands a
    widget (a `format_func`, a callback) is kept with the widget until the session's next run, and with it the
    page's every variable: a SmolLM2 trace (42 MB) per visitor, beside the trace cache's own (tests/test_cache.py).
    So a function a page hands a widget, or a fragment it reruns, reads the view (`v.trace`), not the page's `trace`."""
    variables = getattr(_page, "variables", None)
    _page.variables = None
    for name, value in list((variables or {}).items()):
        if isinstance(value, (Trace, torch.Tensor)):
            del variables[name]


_page = threading.local()             # this script run's page: the place beside its title (each session runs in its
                                      # own thread)


def explanation(view: View, markdown: str, title: str = "What is happening here") -> None:
    """The plain-language explanation a teacher could read aloud: open above the page on a wide screen; folded on
    a small first screen (`View.compact`: in presenter mode a button beside the title that opens it, on a phone a
    closed panel one tap opens), so the page's chart has the first screen."""
    with side_panel(view, title, ":material/school:", expanded=not view.compact):
        st.markdown(markdown)


def side_panel(view: View, title: str, icon: str, expanded: bool = False):
    """A panel of words a page can do without at first sight: an expander (open when `expanded`); in presenter
    mode, unless it must be open, a button beside the page's title that opens it."""
    aside = getattr(_page, "aside", None) if view.presenter and not expanded else None
    if aside is not None:
        return aside.popover(title, icon=icon)
    return st.expander(title, expanded=expanded, icon=icon)


def knobs_and_chart(view: View, where=st):
    """(knobs, stage): two places, one above the other: a tab's choices above its chart, except on a phone, where
    the chart comes first (the first screen shows it; the choices are a swipe below)."""
    first, second = where.container(), where.container()
    return (second, first) if view.phone else (first, second)


def main_chart(column):
    """The place in `column` for the page's main chart: on a narrow screen, where columns stack, its column comes
    first (explorer/app/styles.py, PHONE_CSS)."""
    return column.container(key="main_chart")


def beside_the_chart(view: View, where=st, spec=(1, 2.2)):
    """(knobs, stage): in presenter mode two columns, a tab's choices and words on the left and its chart on the
    right, so the chart starts at the top of the tab, on a projector's first screen; otherwise `knobs_and_chart`."""
    if view.presenter:
        return where.columns(list(spec), gap="medium")
    return knobs_and_chart(view, where)


def picker_row(spec: list, beside_the_title: bool = True, **columns) -> list:
    """Columns for the pickers above a page's tabs (layer, head, token). In presenter mode each says its name inside
    its box (`picker_label`), and they stand beside the page's title unless `beside_the_title` is False (three long
    ones would crowd it): a row less above the chart. On a phone they stay one row (other columns stack there;
    explorer/app/styles.py lets them narrow)."""
    title_row = getattr(_page, "pickers", None)              # presenter mode only
    if title_row is not None and beside_the_title:
        places = title_row.columns(spec, **columns)
    else:
        places = st.container(key="pickers").columns(spec, wrap=False, **columns)
    if title_row is not None:
        _page.named_inside += places
    return places


def picker_label(label: str, where, show=str, values=()) -> dict:
    """A picker's label and how it shows a value, as selectbox arguments: its name inside its box when it stands in
    a presenter's `picker_row` (a screen reader still hears the name), else above it. Inside, the box is as wide as
    the longest of its `values` shown (`picker_px`): a title row that leaves little room never cuts "Layer 1" to
    "Laye" (explorer/app/styles.py keeps a title row's column as wide as its picker)."""
    if any(where is place for place in getattr(_page, "named_inside", ())):
        def shown(value) -> str:
            return f"{label} {show(value)}"
        width = {"width": picker_px(max(len(shown(value)) for value in values))} if len(values) else {}
        return {"label_visibility": "collapsed", "format_func": shown, **width}
    return {"format_func": show}


PICKER_EM_PER_CHAR = 0.55           # a generous average width of a character (Source Sans: 0.45 em for "Layer 0")
PICKER_CHROME_PX = 70               # a select box's padding, border and arrow (Streamlit 1.67: 68 px)
PICKER_MOST_CHARS = 32              # a longer value (a long token) may be cut rather than push the row apart


def picker_px(chars: int) -> int:
    """The width (px) of a presenter's select box that shows `chars` characters whole (its type is 0.875 of the
    presenter's text, as Streamlit sizes a widget's)."""
    return round(min(chars, PICKER_MOST_CHARS) * PICKER_EM_PER_CHAR * 0.875 * PRESENTER_TEXT_PX) + PICKER_CHROME_PX


def sections(slug: str) -> list:
    """Page `slug`'s tabs as the registry names them (explorer/registry.py), of which only the open one runs: draw a
    section's content under `if tab.open:`, so the browser draws a few charts per new sentence instead of all of
    them. The open section is in the URL (`section=`), so a copied link reopens it."""
    labels = BY_SLUG[slug].labels
    return st.tabs(labels, key=section_key(slug), on_change="rerun")


def math_panel(slug: str, title: str = "Show the math"):
    """A collapsed panel for working one entry out with the real numbers. Draw its content only under
    `if panel.open:` (then `with panel:`): closed, it costs neither the server nor the browser anything."""
    return st.expander(title, icon=":material/calculate:", key=f"math_{slug}", on_change="rerun")


LINK_CAPTIONS = {"": "This link reopens this page with the same model, sentence, layer, head and token.",
                 "training": "This link reopens the lab on this preset with every knob you changed from it (never "
                             "your own text, and it does not start training)."}


def step_nav(slug: str) -> None:
    """Previous / next step buttons, and a link that reopens exactly this view. The browser's URL becomes that link
    too: the page may have set a field since the run began (a slider's first value, a link's value it refused)."""
    url.write(view_params(), classroom.url_params())
    before, after = neighbours(slug)
    st.divider()
    # side by side on a wide screen; in presenter mode (large type) each on its own row, so neither is cut off
    left, right = (st.container(), st.container()) if st.session_state.get("presenter") else st.columns(2)
    if before:
        left.page_link(before.file, label=f"Previous: {before.title}", icon=":material/arrow_back:")
    if after:
        right.page_link(after.file, label=f"Next: {after.title}", icon=":material/arrow_forward:")
    with st.popover("Copy a link to this view", icon=":material/link:"):
        st.caption(LINK_CAPTIONS.get(slug, LINK_CAPTIONS[""]))
        st.code(link_to(slug), language=None, wrap_lines=True)
        with st.container(horizontal=True):
            st.button("Add this view to my lesson", key="lesson_add", on_click=classroom.add_this_view, args=(slug,),
                      icon=":material/playlist_add:",
                      help="Build a lesson from the views you visit; the Class page lists them, with notes to edit.")
            st.button("Ask the class", key="lesson_ask", on_click=classroom.add_this_view, args=(slug, True),
                      icon=":material/quiz:",
                      help="Add this view to your lesson with a question about it that the model answers (which "
                           "word comes next, which word a head looks at, ...); change the question on the Class page.")
        if st.session_state.get("_lesson_added"):
            st.caption(f"Your lesson has {st.session_state['_lesson_added']} steps (on the Class page).")


def keep_if(key: str, valid) -> None:
    """Drop session value `key` (a link's, or another model's) unless `valid(value)`: its widget then starts at its
    default instead of failing on a value it does not offer."""
    if key in st.session_state and not valid(st.session_state[key]):
        del st.session_state[key]


def layer_picker(view: View, where=st) -> int:
    return where.selectbox("Layer", range(view.bundle.model.cfg.n_layers), key="layer",
                           help="Which block of the model. Layer 0 reads the embeddings; later layers read "
                                "what earlier layers wrote.",
                           **picker_label("Layer", where, values=range(view.bundle.model.cfg.n_layers)))


def head_picker(view: View, where=st) -> int:
    return where.selectbox("Head", range(view.bundle.model.cfg.n_heads), key="head",
                           help="Each attention head looks for its own kind of relationship between tokens.",
                           **picker_label("Head", where, values=range(view.bundle.model.cfg.n_heads)))


def dims_picker(view: View, n: int, key: str, what: str = "dimensions", where=st) -> tuple[int, int]:
    """(start, stop) of the `n` columns a wide heatmap shows: all of them when they fit, else a window of
    DIMS_SHOWN picked here (every one of them can be seen, a window at a time, or all at once)."""
    if n <= DIMS_SHOWN:
        return 0, n
    starts = list(range(0, n, DIMS_SHOWN))
    options = [*starts, -1]
    start = where.selectbox(f"{what.capitalize()} shown", options, key=key,
                            format_func=lambda s: f"all {n:,}" if s < 0 else f"{s}–{min(s + DIMS_SHOWN, n) - 1}",
                            help=f"This model has {n:,} {what}: a heatmap shows {DIMS_SHOWN} at a time so each cell "
                                 "can be read. Pick another window, or all of them at once.")
    return (0, n) if start < 0 else (start, min(start + DIMS_SHOWN, n))


def token_picker(view: View, where=st, label: str = "Token") -> int:
    """Pick one position of the sentence; returns its index."""
    tokens = view.tokens
    return where.selectbox(label, range(len(tokens)), key="token",
                           **picker_label(label, where, lambda i: f"{i}: {tokens[i]}", range(len(tokens))))


def _look_at(position: int, whatif_key: str) -> None:
    """A button's callback: make `position` the selected token and let the page's what-if choose again for it."""
    st.session_state["token"] = position
    st.session_state.pop(whatif_key, None)


def whatif_notes(view: View, notes: str, elsewhere: int | None, whatif_key: str, help: str) -> None:
    """A what-if's notes, and when the change shows elsewhere in the sentence, one click to that token's forecast."""
    if notes:
        st.markdown(notes)
    if elsewhere is not None:
        st.button(f"Look at the forecast after {quote(view.tokens[elsewhere])}", key=f"{whatif_key}_look",
                  on_click=_look_at, args=(elsewhere, whatif_key), icon=":material/arrow_forward:", help=help)


def then_and_now_panel(view: View) -> None:
    """GPT-2 small (2019), Pythia-70M (2023) and SmolLM2-135M (2024) switch by switch, on this sentence (explorer/steps/then_and_now.py);
    a model this server has not downloaded is named, with how to get it."""
    from explorer.app.models import THEN_AND_NOW, then_and_now_sides
    from explorer.steps.then_and_now import cache_claim, comparison_table
    sides, missing = then_and_now_sides()
    st.caption("The same transformer, five years apart: what changed is a handful of switches. Each column is read "
               "from the model's own files; the last rows are your sentence.")
    if missing:
        named = ", ".join(missing[:-1]) + (" and " if len(missing) > 1 else "") + missing[-1]
        st.info(f"{named} {'is' if len(missing) == 1 else 'are'} not downloaded on this server yet: pick it once in "
                "the sidebar's model picker (it downloads once) and its column appears here.",
                icon=":material/download:")
    if sides:
        st.table(comparison_table(sides, view.text))          # whole cells, wrapped (a grid would cut them)
    by_label = {side.label: side for side in sides}
    then, now = by_label.get(THEN_AND_NOW["gpt2"]), by_label.get(THEN_AND_NOW["smollm2"])
    if then and now:                                           # grouped key/value heads: 2019 against 2024
        st.markdown(cache_claim(then, now))
