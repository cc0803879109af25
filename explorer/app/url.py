"""The page's URL: the one place that reads and writes its query parameters (the view, the class, and each page's
own fields, the lab's setup among them), each kind of parameter cut to one limit.

    read()              the parameters the app knows, as text cut to their kind's limit (anything else is dropped),
                        and the names that were cut
    write(*parts)       the URL becomes exactly these parameters (the view's, then the class's)
    switch_page(file)   open another page with these parameters (Streamlit empties the query until the page runs)
    link(slug, params)  a full link to page `slug` with these parameters, on this server

A link is a stranger's text: every value is read as text, cut here, and checked by whoever uses it (the view against
its model, a page's fields by the page, the lab's by explorer/lab/link.py, a class's by the class store).
"""
from urllib.parse import urlencode, urlsplit

import streamlit as st

from explorer.registry import BY_SLUG, FIELD_CHARS
from explorer.view import MAX_CHARS

SHORT = 80                          # a model's name, a number, a switch, a tab's label, a class code, a seat, an id
VIEW = ("model", "text", "layer", "head", "token", "presenter", "high_contrast", "section")
CLASS = ("join", "seat", "teaching", "server", "lesson", "peek", "key")   # peek, key: the teacher's second screen
PAGE_FIELDS = tuple(sorted({name for page in BY_SLUG.values() for name in page.linked}))
LIMITS = {"text": MAX_CHARS,        # the sentence (its box's own limit)
          "lesson": 200_000,        # a lesson carried whole in its link, compressed
          **{name: FIELD_CHARS for name in PAGE_FIELDS}}       # a page's field (the lab's probe sentence is the longest)
KNOWN = (*VIEW, *CLASS, *PAGE_FIELDS)


def limit(name: str) -> int:
    """How many characters of parameter `name` are read."""
    return LIMITS.get(name, SHORT)


def read(query=None) -> tuple[dict[str, str], set[str]]:
    """(every known parameter of `query` (the page's URL by default) as text cut to its limit, the names cut)."""
    query = st.query_params if query is None else query
    values = {name: str(query[name]) for name in KNOWN if name in query}
    cut = {name for name, value in values.items() if len(value) > limit(name)}
    return {name: value[:limit(name)] for name, value in values.items()}, cut


def switch(value: str) -> bool:
    """A link's on/off value ("1", "true" or "on" is on)."""
    return value in ("1", "true", "on")


def write(*parts: dict[str, str]) -> None:
    """Make the URL exactly these parameters, later parts over earlier ones."""
    st.query_params.from_dict({name: value for part in parts for name, value in part.items()})


def switch_page(file: str, *parts: dict[str, str]) -> None:
    """Open page `file` with these parameters in its URL from the first moment (Streamlit empties a URL's query on a
    page switch until the new page's run writes it again: a server that dies in between leaves a bare URL)."""
    st.switch_page(file, query_params={name: value for part in parts for name, value in part.items()})


def link(slug: str, params: dict[str, str]) -> str:
    """A full link to page `slug` with `params`, on the server this page came from."""
    here = urlsplit(getattr(st.context, "url", None) or "http://localhost:8501/")
    path = "" if slug == "home" else slug
    return f"{here.scheme}://{here.netloc}/{path}" + (f"?{urlencode(params)}" if params else "")
