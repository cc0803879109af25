"""The encoder-decoder: the encoder reads the source, the decoder writes the target through cross-attention."""
import streamlit as st

from explorer.steps import encoder_decoder
from explorer.app.layout import (chart, side_panel, explanation, head_picker, layer_picker, math_panel, page_header,
                             picker_row, require_trace, say, sections, step_nav, veil_box, veiled)
from explorer.app.models import BUNDLED_SEQ2SEQ, is_encoder_decoder
from explorer.scope import answer_line, digits_line, grammar_line, lexicon_table, outside_text, source_check, training_line
from explorer.app.state import apply_view, view
from explorer.view import EXAMPLES, quote

v = view()
page_header(encoder_decoder.SLUG, v)
if not is_encoder_decoder(v.bundle):
    st.info(encoder_decoder.NOT_HERE, icon=":material/translate:")
    with st.container(horizontal=True):          # in the main area too: presenter mode starts with the sidebar closed
        for name in BUNDLED_SEQ2SEQ:
            st.button(f"Open {name}: {quote(EXAMPLES[name])}", key=f"open_{name}", icon=":material/translate:",
                      on_click=apply_view, kwargs=dict(model=name, text=EXAMPLES[name]))
    st.stop()
explanation(v, encoder_decoder.intro(v))
check = source_check(v)
problems = bool(check and check.problems)
under = v.compact and not problems           # a small first screen: the tab's chart first, the words under it


def model_card() -> None:
    with side_panel(v, "What this model knows", ":material/menu_book:", expanded=problems):
        st.markdown(training_line(v))
        if encoder_decoder.task_of(v) == "translate":
            st.markdown(grammar_line())
            st.dataframe(lexicon_table("translate"), hide_index=True)
        else:
            st.markdown(digits_line(v))


if not (under and v.phone):                  # (in presenter mode a button beside the title)
    model_card()
trace = require_trace(v, encoder_decoder.SLUG)
written = encoder_decoder.decoded_text(v, trace)
words = None if under else st.container()
left, right, _ = picker_row([1, 1, 3], beside_the_title=False)   # one row (the title's has two buttons beside it)
layer, head = layer_picker(v, left), head_picker(v, right)
cross, encoder, decoder, steps, whatif = sections("encoder-decoder")
if under:                                    # after the tabs: under the open tab's chart
    with st.container():
        if v.phone:
            model_card()
        words = st.container()
words.markdown(f"**Source** (what the encoder reads): {encoder_decoder.quote(v.bundle.tokenizer.decode(list(v.ids)))}  \n"
               f"**Target** (what the decoder wrote, greedily): {encoder_decoder.quote(written)}")
if problems:
    words.warning(outside_text(check), icon=":material/explore_off:")
if check and check.answer is not None:
    words.markdown(answer_line(v, written, check))

if cross.open:
    with cross:
        st.subheader("Cross-attention: the decoder reads the source")
        chart(encoder_decoder.figure("cross", v, layer, head), key="cross", part="cross")
        st.caption(encoder_decoder.CROSS_TEXT)
        say(encoder_decoder.alignment_story(v, trace), "cross")
        best = encoder_decoder.best_head(v, trace)
        if best.hits and (best.layer, best.head) != (layer, head):
            st.button(f"Show layer {best.layer}, head {best.head}", key="s2s_best_head", icon=":material/visibility:",
                      on_click=apply_view, kwargs=dict(layer=best.layer, head=best.head))
        say(encoder_decoder.alignment_words(v, trace, layer, head), "cross")
        panel = math_panel(encoder_decoder.SLUG)
        if panel.open and veiled("cross"):
            veil_box("cross", panel, key="cross_math")
        elif panel.open:
            with panel:
                a, b = st.columns(2)
                rows = encoder_decoder.row_labels(v, trace)     # a label per row: the trace is gone after the run
                row = a.selectbox("Target row", range(len(encoder_decoder.written(v, trace))), key="s2s_row",
                                  format_func=rows.__getitem__)
                col = b.selectbox("Source column", range(len(v.tokens)), key="s2s_col",
                                  format_func=lambda s: f"{s}: {v.tokens[s]}")
                st.markdown("\n".join(encoder_decoder.math_lines(v, trace, layer, head, row, col)))

if encoder.open:
    with encoder:
        st.subheader("The encoder reads the whole source at once")
        chart(encoder_decoder.figure("encoder", v, layer, head), key="encoder")
        st.caption("No causal mask: a source token may look at tokens after it too. Each row adds up to 1.")

if decoder.open:
    with decoder:
        st.subheader("The decoder looks back at what it has written")
        chart(encoder_decoder.figure("decoder", v, layer, head), key="decoder")
        st.caption("The causal mask of the decoder-only models: row t sees <bos> and the tokens written before it.")

if steps.open:
    with steps:
        st.subheader("Decoding, one token at a time")
        st.dataframe(encoder_decoder.greedy_table(v, trace), hide_index=True, height=280 if v.presenter else "auto", column_config={
            "probability": st.column_config.NumberColumn(format="%.4f"),
            "its probability": st.column_config.NumberColumn(format="%.4f")})
        st.caption("Greedy decoding takes the likeliest token at every step and stops at <eos>.")
        size = st.select_slider("Beam size", [1, 2, 3, 4, 5], 3, key="s2s_beam",
                                help="Keep this many partial targets at every step and finish the best one.")
        result = encoder_decoder.beam(v, size)
        st.markdown(f"Beam search ({size}): {encoder_decoder.quote(v.bundle.tokenizer.decode(result.tokens))}, total "
                    f"log-probability **{result.score:.4f}**.")
        st.dataframe(encoder_decoder.beam_table(v, result), hide_index=True,
                     column_config={"log-probability": st.column_config.NumberColumn(format="%.4f")})

if whatif.open:
    with whatif:
        st.subheader("What if?")
        options = encoder_decoder.experiments(layer, head)
        choice = st.radio("Change the model", list(options), key="s2s_whatif")
        st.markdown(encoder_decoder.what_it_does(choice))
        st.markdown(f"Without the change: {encoder_decoder.quote(written)}  \n"
                    f"With it: {encoder_decoder.quote(encoder_decoder.whatif_output(v, choice, layer, head))}")
        st.markdown(encoder_decoder.whatif_change(v, choice, layer, head))

step_nav(encoder_decoder.SLUG)
