"""What every page shares: the cached models (one copy for all visitors) and the sidebar's choices."""
import streamlit as st

from model.checkpoint import BUNDLED, Bundle, load_bundled

DEFAULT_SENTENCE = "the cat sat on the mat because it was tired"


@st.cache_resource(show_spinner="Loading the model ...")
def bundled_model(name: str) -> Bundle:
    """A bundled model, loaded once per server and shared read-only by every visitor."""
    return load_bundled(name)


def sidebar() -> tuple[str, str]:
    """Draw the shared sidebar; returns (model name, sentence)."""
    with st.sidebar:
        name = st.selectbox("Model", BUNDLED, key="model",
                            help="tinytales learned simple English stories; roses learned one short poem.")
        sentence = st.text_input("Sentence", DEFAULT_SENTENCE, key="sentence", max_chars=2000,
                                 help="Type anything and press Enter.")
    return name, sentence
