"""Transformer Explorer: the entry point routes to one page per step and draws the shared sidebar."""
from pathlib import Path

import streamlit as st

from explorer.state import current_view
from explorer.steps import STEPS

HERE = Path(__file__).parent
st.set_page_config(page_title="Transformer Explorer", page_icon=str(HERE / "assets/icon.png"), layout="wide")
pages = [st.Page(HERE / step.file, title=step.title, icon=step.icon, url_path=step.slug,
                 default=step.slug == "home") for step in STEPS]
page = st.navigation(pages)
st.session_state["view"] = current_view()     # pages read it with explorer.state.view()
page.run()
