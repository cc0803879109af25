"""Transformer Explorer: the entry point routes to one page per step and draws the shared sidebar."""
from pathlib import Path

import streamlit as st
import torch

from explorer.app import classroom, peek, runner_race, url
from explorer.app.cache import give_back_dropped_traces
from explorer.app.lab import pause_all
from explorer.app.layout import let_go_of_page_tensors
from explorer.app.memory import limit_arenas
from explorer.app.plotly_component import provide_plotly_js
from explorer.app.state import current_view, presenter_requested, view_params
from explorer.registry import LAB, NAVIGATION

# One thread per computation: on a shared 2-core host, many visitors in parallel matter more than one
# visitor's matrix multiply being split across cores, and one trainer cannot starve everyone else.
torch.set_num_threads(1)
limit_arenas()                                    # fewer per-thread malloc pools: less memory per visitor
provide_plotly_js()                               # the charts' plotly.js, served from static/ (once)
runner_race.install()                             # a busy server must not drop the end of a page's run

HERE = Path(__file__).parent
# Presenter mode starts with the sidebar closed: on a projector the page's chart gets the whole width.
st.set_page_config(page_title="Transformer Explorer", page_icon=str(HERE / "assets/icon.png"), layout="wide",
                   initial_sidebar_state="collapsed" if presenter_requested() else "auto")


def as_page(step):
    return st.Page(HERE / step.file, title=step.title, icon=step.icon, url_path=step.slug,
                   default=step.slug == "home")


# One flat list: Streamlit's navigation sections put their headers between a list and its items, which a screen
# reader cannot follow (axe-core's list rules); explorer/app/styles.py draws the groups' names inside the items.
def pages() -> list:
    """This session's pages, made on its first run: making one reads its file's place on disk, a fifth of a page
    run's time when a class of 30 follows a Next together (bench/cloud.py)."""
    if "_pages" not in st.session_state:
        st.session_state["_pages"] = [as_page(p) for p in NAVIGATION]
    return st.session_state["_pages"]


page = st.navigation(pages(), expanded=True)      # every page listed
if page.url_path != LAB.slug:
    pause_all()                                   # leaving the lab pauses its training
st.session_state["_page"] = page.url_path         # whose open section (tab) the URL carries
classroom.rejoin_from_url()                       # a reloaded student finds their seat again (or is told why not)
peek.from_url()                                   # the teacher's second screen (its link, or its reload)
classroom.load_lesson_from_url()                  # a lesson's link opens it on the class page
classroom.follow()                                # a student follows the teacher's step (a teacher, their second screen's)
classroom.apply_pending()                         # a lesson's step to show: its view, before the sidebar
classroom.switch_if_moved(page.url_path)          # ... on its own page
st.session_state["view"] = view = current_view()  # pages read it with explorer.app.state.view()
url.write(view_params(), classroom.url_params(), peek.url_params())   # the URL: this view, the class a page is in
# The main area's first element is an empty placeholder. Streamlit (1.67) draws an exception raised by a widget's
# callback during a fragment run at the main area's first place: were that the class box, which holds the class's
# polling fragment, the next poll would write into an element and the browser would crash to a blank page
# (tests/test_browser_lessons.py). An empty element takes the hit instead.
st.empty()
classroom.set_veil(view.name, view.text)          # an open question: what answers it is hidden on this screen
classroom.class_box(view.name, view.text)         # the class's box: the teacher's controls or a student's
try:
    page.run()
finally:                                          # between runs, the server's trace cache alone holds the trace
    view.let_go_of_trace()
    let_go_of_page_tensors()
    give_back_dropped_traces()
