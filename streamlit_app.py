"""Transformer Explorer: the entry point only routes to the pages."""
from pathlib import Path

import streamlit as st

HERE = Path(__file__).parent
st.set_page_config(page_title="Transformer Explorer", page_icon=str(HERE / "assets/icon.png"), layout="wide")
page = st.navigation([st.Page(HERE / "pages/home.py", title="Start", default=True)])
page.run()
