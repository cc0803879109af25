"""Discoveries: skills hidden in the model, found by searching its heads. Guess, reveal, then see it on its page."""
import streamlit as st

from explorer import discoveries
from explorer.app import classroom, discover
from explorer.app.layout import chart, explanation, page_header, step_nav
from explorer.app.state import get_bundle, view

discover.switch_if_asked()                 # "Show me" was pressed: the view is set, open its page
v = view()
page_header("discoveries", v)
discover.way_back()                        # after a "Show me": one click back to your own sentence
explanation(v, discoveries.INTRO, title="How these were found")
name, notice = discover.subject_model(v.name)
if notice:
    st.info(notice, icon=":material/info:")


def draw(discovery: discoveries.Discovery) -> None:
    """One card: the story, the student's guess, then the model's answer and the "Show me" button."""
    saved = discover.guesses().get(discovery.key, {})
    revealed = saved.get("revealed", False)
    if discovery.key == "diverging" and discovery.target is not None:
        if revealed:
            discovery = discoveries.diverging_card(discover.cached_lab_outcome(discoveries.DIVERGING))
        else:
            discover.start_lab_outcome(discoveries.DIVERGING)     # trained in the background while the student guesses
    with st.container(border=True):
        st.subheader(discovery.title)
        st.markdown(discovery.story)
        if discovery.target is None:
            return
        options = list(discovery.options)
        guess = st.radio(discovery.question, options, key=f"discovery_radio_{discovery.key}", disabled=revealed,
                         index=options.index(saved["guess"]) if saved.get("guess") in options else None)
        ask_the_class(discovery)
        if not revealed:
            st.button("Reveal", key=f"discovery_reveal_{discovery.key}", on_click=discover.reveal, args=(discovery.key,),
                      disabled=guess is None, icon=":material/visibility:",
                      help="Pick your guess first." if guess is None else "See what the model does.")
            return
        st.markdown(discoveries.verdict(discovery, saved["guess"]))
        st.markdown(discovery.reveal)
        if discovery.key == "scaling":
            target = discovery.target
            chart(discoveries.sharpness_figure(get_bundle(name), target.layer, target.head, v.presenter),
                  key=f"discovery_{discovery.key}")
        st.button("Show me", key=f"discovery_show_{discovery.key}", on_click=discover.show_me, args=(discovery.target,),
                  type="primary", icon=":material/arrow_forward:",
                  help="Open the page that shows this, with the model, sentence, layer, head and token set.")


def ask_the_class(discovery: discoveries.Discovery) -> None:
    """A teacher's button: this card's view and a question about it go into the lesson being built."""
    st.button("Ask the class", key=f"discovery_ask_{discovery.key}", icon=":material/quiz:", type="tertiary",
              on_click=classroom.add_step, args=(discoveries.lesson_step(discovery),),
              help="Add this card's view to your lesson with a question the model answers about it (the Class page "
                   "lists your lesson's steps).")


cards = [*discover.cached_discoveries(name), discoveries.diverging_card()]
one = st.session_state.get("discovery_card")         # a link (or a lesson) may open one card alone
if one not in {card.key for card in cards}:
    st.session_state.pop("discovery_card", None)
else:
    cards = [card for card in cards if card.key == one]
    st.button("Show every card", key="discovery_every", icon=":material/grid_view:",
              on_click=lambda: st.session_state.pop("discovery_card", None))
columns = [st.container()] if v.presenter or one else st.columns(2)
for i, card in enumerate(cards):
    with columns[i % len(columns)]:
        draw(card)

step_nav("discoveries")
