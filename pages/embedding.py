"""Step 2, embedding: each token id picks a learned row of numbers; maps and similarities of those rows."""
import streamlit as st

from explorer.steps import embedding
from explorer.app.layout import (chart, dims_picker, explanation, math_panel, page_header, quote, require_trace, say,
                                 sections, step_nav, token_picker, veil_box, veiled)
from explorer.app.state import view

v = view()
page_header("embedding", v)
explanation(v, embedding.intro(v))
trace = require_trace(v, "embedding")
cfg = v.bundle.model.cfg
rows, vocabulary, similar, neighbours = sections("embedding")

if rows.open:
    with rows:
        st.subheader("Your sentence's rows of the embedding matrix")
        dims = dims_picker(v, cfg.d_model, "embedding_dims")
        chart(embedding.rows_figure(v, trace, dims), key="rows")
        st.caption(embedding.rows_caption(v))
        panel = math_panel("embedding")
        if panel.open:
            with panel:
                position = token_picker(v, label="Token")
                st.markdown(embedding.lookup_math(v, trace, position))

if vocabulary.open:
    with vocabulary:
        st.subheader("A map of the whole vocabulary")
        label_all = False
        if not v.presenter:
            label_all = st.checkbox("Label every token", key="embedding_label_all",
                                    help="Write every vocabulary token next to its dot (crowded for big "
                                         "vocabularies).")
        chart(embedding.map_figure(v, label_all), key="map")
        st.caption(embedding.pca_note(v, embedding.vocab_pca(v)))

if similar.open:
    with similar:
        st.subheader("Similar tokens in your sentence")
        chart(embedding.cosine_figure(v, trace, show_values=v.presenter or len(v.tokens) <= 6), key="cosine")
        st.caption("Cosine similarity compares the direction of two rows: 1 = same direction, 0 = unrelated, "
                   "-1 = opposite. The diagonal is always 1 (every token compared with itself).")

if neighbours.open:
    with neighbours:
        st.subheader("Nearest neighbours")
        position = token_picker(v, st.columns([1, 2])[0], label="Token")
        token_id = v.prepared.ids[position]
        table = embedding.neighbours_table(v, token_id)
        chart(embedding.neighbours_figure(v, token_id, table), key="neighbours", part="neighbours")
        say(f"The {len(table)} vocabulary tokens whose rows point most nearly the same way as the row of "
                   f"{quote(v.bundle.tokenizer.vocab[token_id])}, out of all {cfg.vocab_size:,}. Training can give "
                   "words that are used in similar places similar rows; whether it did here, the neighbours show.",
            "neighbours", caption=True)
        panel = math_panel("embedding")
        if panel.open and veiled("neighbours"):
            veil_box("neighbours", panel, key="neighbours_math")
        elif panel.open:
            with panel:
                st.markdown(embedding.lookup_math(v, trace, position))
                if len(table):
                    st.divider()
                    st.markdown(embedding.cosine_math(v, token_id, int(table["id"].iloc[0])))

step_nav("embedding")
