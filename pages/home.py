"""Start: a sentence goes in, the model's guesses for the next word come out."""
import plotly.graph_objects as go
import streamlit as st

from explorer.prediction import top_next_tokens
from explorer.state import bundled_model, sidebar

name, sentence = sidebar()
bundle = bundled_model(name)

st.title("Transformer Explorer")
st.write("A small transformer language model reads your sentence and guesses the next word. "
         "Every number below comes from the real model.")

try:
    result = top_next_tokens(bundle, sentence)
except ValueError as problem:
    st.info(str(problem))
    st.stop()

for notice in result.prepared.notices:
    st.warning(notice)

st.subheader("1. The sentence as tokens")
st.caption("The model does not read letters or words: it reads token ids, numbers that index its vocabulary.")
st.dataframe(
    {"position": list(range(len(result.prepared.ids))),
     "token": [("⚠ " if p.unknown else "") + p.text for p in result.prepared.pieces],
     "id": result.prepared.ids},
    hide_index=True, width="content")

st.subheader("2. The five likeliest next tokens")
figure = go.Figure(go.Bar(
    x=result.probs[::-1], y=result.tokens[::-1], orientation="h",
    text=[f"{p:.1%}" for p in result.probs[::-1]], textposition="auto",
    hovertemplate="next token %{y}: probability %{x:.4f}<extra></extra>"))
figure.update_layout(xaxis=dict(title="probability", range=[0, 1], tickformat=".0%"),
                     height=300, margin=dict(l=10, r=10, t=10, b=40))
st.plotly_chart(figure)
