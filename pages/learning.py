"""Watch it learn: a real model (Pythia) at the training steps this server has: its loss on the sentence, its next
word and each head's induction score, step by step."""
import streamlit as st

from explorer.app import learning as app_learning
from explorer.app.layout import chart, explanation, page_header, require_trace, say, step_nav
from explorer.app.models import PRETRAINED
from explorer.app.state import apply_view, view
from explorer.steps.learning import (NO_CHECKPOINTS, SLUG, TEXT, guess_figure, guess_sentence, induction_figure,
                                     induction_sentence, loss_figure, loss_sentence)

v = view()
page_header(SLUG, v)
explanation(v, TEXT)
require_trace(v, SLUG)
family = app_learning.family_of(v)
if family is None:
    st.info(NO_CHECKPOINTS, icon=":material/timeline:")
    st.button("Show Pythia-70M", key="learning_pythia", icon=":material/timeline:", on_click=apply_view,
              kwargs=dict(model="pythia-70m"))
    step_nav(SLUG)
    st.stop()

spec = PRETRAINED[family]
here = app_learning.steps_here(family)
missing = [s for s in spec.steps if s not in here]
if missing:
    st.caption(f"This server has {len(here)} of the {len(spec.steps)} training steps the picker offers "
               f"({', '.join(f'{s:,}' for s in here) or 'none'}).")
    if st.button(f"Download the other {len(missing)} steps (about {len(missing) * spec.download_mb:,} MB, once for "
                 "this server)", key="learning_download", icon=":material/download:"):
        app_learning.keep_going(app_learning.download(family, missing, st))
        here = app_learning.steps_here(family)
if len(here) < 2:
    st.info("Watch it learn compares two or more training steps: download them with the button above.",
            icon=":material/download:")
    step_nav(SLUG)
    st.stop()
if len(v.ids) < 2:
    st.info("Type a sentence of two or more tokens: the loss scores each token after the first.", icon=":material/edit:")
    step_nav(SLUG)
    st.stop()

bar = st.progress(0.0, text="Reading your sentence with the model at each training step ...")
learned = app_learning.learned(family, list(v.ids), here, progress=lambda done, total, step: bar.progress(
    done / total, text=f"Reading your sentence with the model at step {step:,} ({done + 1} of {total}) ..."))
bar.empty()

chart(guess_figure(learned, v.presenter, v.phone), key="learning_guess", part="learning")
say(guess_sentence(learned), "learning")
chart(loss_figure(learned, v.presenter, v.phone), key="learning_loss")
st.markdown(loss_sentence(learned))
chart(induction_figure(learned, v.presenter, v.phone), key="learning_induction")
st.markdown(induction_sentence(learned))
st.caption(f"{spec.label}: {spec.about.split(';')[0]}. Each step's checkpoint is the hub repository "
           f"{spec.repo_id}'s branch step<N>; the induction scores read {learned.copy_length} random tokens, then the "
           "same again.")
step_nav(SLUG)
