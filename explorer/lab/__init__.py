"""The training lab's runs and their figures (no Streamlit)."""
