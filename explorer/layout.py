"""The parts every step page shares: header, explanation, "show the math", step buttons, link, pickers.

User text never goes into HTML: it is shown through widgets, tables and charts, or escaped with
`quote` before it goes into Markdown.
"""
import re

import streamlit as st

from .state import View, link_to, section_key
from .steps import BY_SLUG, neighbours

# Larger type for a projector. A constant: no user text ever goes into unsafe HTML.
PRESENTER_CSS = """<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.25rem; }
h1 { font-size: 3rem !important; } h2 { font-size: 2.2rem !important; } h3 { font-size: 1.8rem !important; }
[data-testid="stSidebar"], [data-testid="stSidebar"] * { font-size: 16px !important; }
</style>"""

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def quote(text: str) -> str:
    """User text made safe for Markdown: every special character escaped, shown in quotes."""
    return "“" + _MARKDOWN_SPECIAL.sub(r"\\\1", text.replace("\n", " ")) + "”"


def page_header(slug: str, view: View) -> None:
    """Title, presenter styling and any notices about the input."""
    if view.presenter:
        st.html(PRESENTER_CSS)
    st.title(BY_SLUG[slug].title)
    for notice in view.notices + (view.prepared.notices if view.prepared else []):
        st.warning(notice, icon=":material/info:")


def require_trace(view: View, slug: str):
    """Stop the page with a friendly prompt when there is no sentence to show."""
    if view.trace is None:
        st.info(view.problem or "Type a sentence in the sidebar.", icon=":material/edit:")
        step_nav(slug)
        st.stop()
    return view.trace


def explanation(view: View, markdown: str, title: str = "What is happening here") -> None:
    """The plain-language explanation a teacher could read aloud (collapsed in presenter mode)."""
    with st.expander(title, expanded=not view.presenter, icon=":material/school:"):
        st.markdown(markdown)


def sections(slug: str, labels: list[str]) -> list:
    """The page's sections as tabs, of which only the open one runs: draw a section's content under
    `if tab.open:`. The browser then draws a few charts per new sentence instead of all of them
    (measured on the attention page: 0.16 s of browser CPU without charts, about 0.1 s more per chart).
    The open section is in the URL (`section=`), so a copied link reopens it."""
    return st.tabs(labels, key=section_key(slug), on_change="rerun")


def math_panel(slug: str, title: str = "Show the math"):
    """A collapsed panel for working one entry out with the real numbers. Draw its content only under
    `if panel.open:` (then `with panel:`): closed, it costs neither the server nor the browser anything."""
    return st.expander(title, icon=":material/calculate:", key=f"math_{slug}", on_change="rerun")


def step_nav(slug: str) -> None:
    """Previous / next step buttons, and a link that reopens exactly this view."""
    before, after = neighbours(slug)
    st.divider()
    left, right = st.columns(2)
    if before:
        left.page_link(before.file, label=f"Previous: {before.title}", icon=":material/arrow_back:")
    if after:
        right.page_link(after.file, label=f"Next: {after.title}", icon=":material/arrow_forward:")
    with st.popover("Copy a link to this view", icon=":material/link:"):
        st.caption("This link reopens this page with the same model, sentence, layer, head and token.")
        st.code(link_to(slug), language=None, wrap_lines=True)


def layer_picker(view: View, where=st) -> int:
    return where.selectbox("Layer", range(view.bundle.model.cfg.n_layers), key="layer",
                           help="Which block of the model. Layer 0 reads the embeddings; later layers read "
                                "what earlier layers wrote.")


def head_picker(view: View, where=st) -> int:
    return where.selectbox("Head", range(view.bundle.model.cfg.n_heads), key="head",
                           help="Each attention head looks for its own kind of relationship between tokens.")


def token_picker(view: View, where=st, label: str = "Token") -> int:
    """Pick one position of the sentence; returns its index."""
    tokens = view.tokens
    return where.selectbox(label, range(len(tokens)), key="token",
                           format_func=lambda i: f"{i}: {tokens[i]}")
