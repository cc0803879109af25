"""The big picture: the whole pipeline with this sentence's shapes, each stage linking to its page."""
import streamlit as st

from explorer.steps.home import INTRO, pipeline
from explorer.app.layout import (explanation, page_header, require_trace, step_nav, then_and_now_panel, veiled,
                                  word_list)
from explorer.scope import training_line
from explorer.app.state import label, view
from explorer.registry import BY_SLUG, DISCOVER

v = view()
page_header("home", v)
st.caption("Transformer Explorer opens up a transformer language model. Every number is the real model's.")
explanation(v, INTRO, title="How a transformer reads a sentence")
require_trace(v, "home")

st.subheader("Your sentence, step by step")
st.caption(f"Model: {label(v.name)} · {v.bundle.model.cfg.n_layers} layers · d_model {v.bundle.model.cfg.d_model}")
st.markdown(training_line(v))
if not v.prepared.unknown:                     # with unknown words the list is open beside their notice
    word_list(v)
stages = pipeline(v)
# An open question veils what answers it: a token count hides every shape (each counts the tokens) and the
# sentences that count them; a next word hides the top guess.
hidden = {slug for slug, part in (("tokenization", "tokens"), ("attention", "tokens"), ("prediction", "forecast"))
          if veiled(part)}
for i, stage in enumerate(stages):
    with st.container(border=True):
        left, middle, right = st.columns([3, 2, 2], vertical_alignment="center")
        detail = (":material/visibility_off: *Guess first: this comes at the reveal.*" if stage.slug in hidden
                  else stage.detail)
        left.markdown(f"**{stage.name}**  \n{detail}")
        middle.markdown("#### ?" if veiled("tokens") else f"#### {stage.shape}")
        step = BY_SLUG[stage.slug]
        right.page_link(step.file, label=step.title, icon=step.icon)
    if i + 1 < len(stages):
        st.markdown("<div style='text-align:center;font-size:1.4rem;line-height:1'>↓</div>", unsafe_allow_html=True)
with st.container(border=True):
    left, right = st.columns([3, 2], vertical_alignment="center")
    left.markdown(f"**Why that guess?** {BY_SLUG['why'].summary}")
    right.page_link(BY_SLUG["why"].file, label=BY_SLUG["why"].title, icon=BY_SLUG["why"].icon)
with st.container(border=True):
    left, right = st.columns([3, 2], vertical_alignment="center")
    left.markdown(f"**Not sure where to look?** {DISCOVER.summary}")
    right.page_link(DISCOVER.file, label=DISCOVER.title, icon=DISCOVER.icon)
then_now = st.expander("Then and now: GPT-2 (2019) beside SmolLM2 (2024)", icon=":material/history:",
                       key="then_and_now", on_change="rerun")
if then_now.open:                      # read only when opened
    with then_now:
        then_and_now_panel(v)
step_nav("home")
