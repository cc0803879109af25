"""Step 1, tokenization: the sentence cut into tokens, three ways of cutting, BPE merges and the vocabulary."""
import streamlit as st

from explorer.steps import tokenization
from explorer.app.layout import (beside_the_chart, chart, explanation, math_panel, page_header, quote, require_trace, say,
                                 sections, step_nav, token_picker, veil_box, veiled)
from explorer.app.state import view

v = view()
page_header("tokenization", v)
explanation(v, tokenization.intro(v))
trace = require_trace(v, "tokenization")
tok = v.bundle.tokenizer

cut_up, three_ways, merges, vocabulary = sections("tokenization")

if cut_up.open:
    with cut_up:
        st.subheader("Your sentence as tokens")
        chart(tokenization.sentence_figure(v), key="sentence", part="tokens")
        unknown = ("Blue pieces were found in its vocabulary; orange pieces were not and are read as `<unk>`. "
                   if tok.unk_id is not None else "")
        st.caption(f"This model uses a **{tokenization.KIND_NAMES[tok.kind].lower()} tokenizer** with {tok.vocab_size:,} "
                   f"tokens. {unknown}Hover over a piece for details.")
        if not veiled("tokens"):
            with st.container(border=True):
                st.markdown(tokenization.unknown_note(v))

if three_ways.open:
    with three_ways:
        st.subheader("Three ways to cut the same text")
        tokenizers, source = tokenization.comparison_tokenizers(v.bundle)
        cut = tokenization.comparison_pieces(tokenizers, v.text)
        first, second = st.container(), st.container()
        stage, counted = (first, second) if v.compact else (second, first)   # a small first screen: the chart first
        counts = [] if veiled("tokens") else zip(counted.columns(3, wrap=False), tokenization.KINDS)  # one row
        for column, kind in counts:    # (an open token-count question: the model's count is among them)
            column.metric(f"{tokenization.KIND_NAMES[kind]} tokens" + (" ★ (this model)" if kind == tok.kind else ""),
                          len(cut[kind]), help=f"{tokenization.KIND_NAMES[kind]}: {tokenization.KIND_ABOUT[kind]}; "
                                             f"vocabulary of {tokenizers[kind].vocab_size:,} tokens.")
        chart(tokenization.comparison_figure(tokenizers, cut, tok.kind, v.presenter, v.phone), stage,
              key="comparison", part="tokens")
        st.caption(tokenization.source_note(source, tok.kind))
        if v.prepared.dropped:
            say("The counts are for your whole text; the model itself reads only its last "
                f"{len(v.prepared.ids)} tokens.", "tokens", caption=True)

if merges.open:
    with merges:
        st.subheader("How BPE builds a word, merge by merge")
        bpe = tokenization.comparison_tokenizers(v.bundle)[0]["bpe"]
        words = tokenization.replay_words(v.text)
        if not words:
            st.info("The text has no words for BPE to merge.")
        else:
            knobs, stage = beside_the_chart(v, spec=(1, 3))
            left, right = (knobs, knobs) if v.presenter else knobs.columns([1, 2])
            if st.session_state.get("tokenization_word") not in words:
                st.session_state["tokenization_word"] = words[tokenization.default_word(words)]
            word = left.selectbox("Word", words, key="tokenization_word", format_func=tokenization.visible,
                                  help="Starts at the longest word of your sentence. ␣ is the space in front "
                                       "of the word: BPE keeps it as part of the word.")
            steps = tokenization.merge_steps(bpe, word)
            last = len(steps) - 1
            upto = 0
            if last:
                if st.session_state.get("tokenization_step_word") != word \
                        or not 0 <= st.session_state.get("tokenization_step", -1) <= last:
                    st.session_state["tokenization_step"] = last    # a new word: all of it; slide back to replay
                st.session_state["tokenization_step_word"] = word
                upto = right.slider("Merge step", 0, last, key="tokenization_step",
                                    help="0 is the word as single bytes; each step applies one learned merge. "
                                         "Slide to 0 and step forward to replay them.")
            chart(tokenization.merges_figure(steps, upto, bpe.encode(word), v.presenter, v.phone), stage, key="merges")
            (knobs if v.presenter else stage).markdown(tokenization.merge_caption(steps, upto))
            st.caption(tokenization.merges_note(bpe, tok))

if vocabulary.open:
    with vocabulary:
        st.subheader(f"The model's vocabulary: {tok.vocab_size:,} tokens")
        query = st.text_input("Search the vocabulary", key="tokenization_search",
                              placeholder="e.g. cat, or an id like 17")
        table = tokenization.vocabulary_table(tok, tokenization.corpus_counts(v.bundle), query)
        if table.empty:
            unknown = [p.text for p in tok.pieces(query) if p.unknown]
            st.info(f"No vocabulary entry contains {quote(query)}."
                    + (f" To this model {', '.join(quote(u) for u in unknown)} would be `<unk>`." if unknown
                       else " The model would read it as several tokens it knows."))
        else:
            st.dataframe(table, hide_index=True, height=min(38 + 35 * len(table), 320), width="stretch")
            st.caption(f"{len(table):,} of {tok.vocab_size:,} entries shown. The id is the row number: the model's "
                       "embedding table (next step) has one row per id.")
        panel = math_panel("tokenization")
        if panel.open and veiled("tokens"):
            veil_box("tokens", panel, key="lookup_math")
        elif panel.open:
            with panel:
                position = token_picker(v, label="Token to look up")
                steps_text, around = tokenization.lookup_math(v, position)
                st.markdown(steps_text)
                st.caption("The vocabulary around that id (a dictionary, sorted so each entry has one number):")
                st.dataframe(around, hide_index=True, width="content",
                             column_config={"here": st.column_config.TextColumn("", width="medium")})

step_nav("tokenization")
