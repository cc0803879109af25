"""Placeholder until this step's page is built."""
import streamlit as st

from explorer.layout import page_header, step_nav
from explorer.state import view

v = view()
page_header("embedding", v)
st.info("This step's page is being built.")
step_nav("embedding")
