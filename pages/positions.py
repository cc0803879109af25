"""Step 3, positional encoding: the seat numbers added to each token, and what is lost without them."""
import streamlit as st

from explorer import memo
from explorer.app import discover
from explorer.steps import positions
from explorer.app.layout import (beside_the_chart, chart, dims_picker, explanation, math_panel, page_header, quote, require_trace, sections, step_nav,
                             token_picker)
from explorer.app.state import view

v = view()
cfg = v.bundle.model.cfg
page_header("positions", v)
discover.way_back()                         # after a discovery's "Show me": one click back to your own sentence
st.caption(positions.kind_caption(cfg))
explanation(v, positions.intro(cfg))
trace = require_trace(v, "positions")
seats, waves, sums, alike, whatif = sections("positions")
NO_POSITIONS = "This model has no position signal: every position vector is zero, so nothing is added."
ROTARY = ("This model uses rotary positions: nothing is added to a token's vector (its position vectors are all "
          "zero). Its queries and keys are turned inside attention instead, each pair of dimensions by the angle "
          "drawn here for its seat (the next tab says more).")
dims = positions.default_dims(cfg)

if seats.open:
    with seats:
        st.subheader("Your sentence's seats: the angles its queries and keys turn by" if cfg.pos == "rope"
                     else "The seat numbers added to your sentence")
        if cfg.pos == "none":
            st.info(NO_POSITIONS, icon=":material/block:")
        window = None if cfg.pos == "rope" else dims_picker(v, cfg.d_model, "positions_window")
        table = None if cfg.pos == "rope" else positions.figure("table", v, window)
        if cfg.pos == "rope":              # all zeros would draw an empty chart: the angles are its position signal
            chart(positions.figure("rope", v), key="rope_seats")       # the chart first, then what it means
            st.info(ROTARY + (f" Only {cfg.d_rotary} of each head's {cfg.d_head} dimensions turn; the others never do."
                              if cfg.d_rotary < cfg.d_head else ""), icon=":material/block:")
        elif table is None:
            chart(positions.figure("added", v, window), key="added")
        else:
            # only the open one draws: a hidden chart costs the browser as much as a shown one
            yours, everything = st.tabs(["Your sentence", f"The whole table ({cfg.max_len:,} positions)"],
                                        key="positions_rows", on_change="rerun")
            if yours.open:
                chart(positions.figure("added", v, window), yours, key="added")
            if everything.open:
                chart(table, everything, key="table")
                if cfg.max_len > positions.MAX_TABLE_ROWS:
                    everything.caption(f"The first {positions.MAX_TABLE_ROWS} of {cfg.max_len:,} positions.")

if waves.open:
    with waves:
        if cfg.pos == "none":
            st.info(NO_POSITIONS, icon=":material/block:")
        elif cfg.pos == "rope":
            st.subheader("Rotary positions: each pair of dimensions turned by an angle")
            chart(positions.figure("rope", v), key="rope")
            st.markdown(positions.rope_text(v, trace))
        else:
            st.subheader(("Waves" if cfg.pos == "sinusoidal" else "Learned values") + ", dimension by dimension")
            if not v.presenter:
                dims = st.multiselect("Dimensions", range(cfg.d_model), default=dims, key="positions_dims",
                                      max_selections=8,
                                      help="Each dimension of the position vector, drawn over every seat.")
            curves = positions.figure("curves", v, dims)
            if curves is not None:
                chart(curves, key="curves")
                if cfg.pos == "learned":
                    st.markdown(positions.FORMULA_TEXT)
                    chart(positions.figure("curves", v, dims, True), key="formula")
            else:
                st.info("Pick at least one dimension to draw.")

if sums.open:
    with sums:
        st.subheader("Token + position = input")
        left, right = st.columns(2)
        position = token_picker(v, left)
        chart(positions.figure("sum", v, position, dims_picker(v, cfg.d_model, "positions_window", where=right)), key="sum")
        st.caption(positions.sum_caption(v, trace, position))
        st.markdown(positions.sum_text(v, trace))
        panel = math_panel("positions")
        if panel.open:
            with panel:
                dim = dims[0] if dims else 0
                if not v.presenter:
                    dim = st.selectbox("Dimension", range(cfg.d_model), index=dim, key="positions_math_dim")
                st.markdown("\n".join(positions.math_lines(v, trace, position, dim)))

if alike.open:
    with alike:
        if cfg.pos in ("none", "rope"):
            st.info(ROTARY if cfg.pos == "rope" else NO_POSITIONS, icon=":material/block:")
        else:
            st.subheader("Which seats look alike?")
            whole = False
            if not v.presenter and positions.position_table(v.bundle.model) is not None:
                whole = st.toggle("Show the whole table", key="positions_whole",
                                  help=f"Compare all {min(cfg.max_len, positions.MAX_TABLE_ROWS)} positions, not only "
                                       "your sentence's.")
            chart(positions.figure("similarity", v, whole), key="similarity")
            st.caption(positions.SIMILARITY_TEXT[cfg.pos])

if whatif.open:
    with whatif:
        if cfg.pos == "rope":
            st.subheader(f"What if every token moved on by {positions.SHIFT} seats?")
            st.markdown(positions.shift_text(memo.per_view(positions.shift_positions, v)))
        st.subheader("What if the seats were gone?")
        knobs, stage = beside_the_chart(v, spec=(1, 1.3))
        knobs.markdown(positions.order_text(v.bundle.tokenizer.kind))
        a, b = positions.default_pair(v)
        if not v.presenter:
            if st.session_state.get("positions_pair_model") != v.name:      # another model: its own pair
                st.session_state.pop("positions_sentence_a", None)
                st.session_state.pop("positions_sentence_b", None)
                st.session_state["positions_pair_model"] = v.name
            st.session_state.setdefault("positions_sentence_a", a)
            st.session_state.setdefault("positions_sentence_b", b)
            first, second = knobs.columns(2)
            a = first.text_input("Sentence A", key="positions_sentence_a", max_chars=200)
            b = second.text_input(f"Sentence B (the same {positions.UNITS[v.bundle.tokenizer.kind][1]} in another order)",
                                  key="positions_sentence_b",
                                  max_chars=200)
        else:
            knobs.markdown(f"**A**: {quote(a)}  \n**B**: {quote(b)}")
        try:
            pa, pb = positions.prepare_pair(v, a, b)
        except ValueError as problem:
            knobs.info(f"{problem} Type both sentences to compare them.", icon=":material/edit:")
        else:
            for notice in dict.fromkeys(pa.notices + pb.notices):
                knobs.caption(notice)
            comparison = positions.compare_orders(v.bundle.tokenizer.vocab, pa.ids, pb.ids,
                                          positions.order_traces(v, pa.ids), positions.order_traces(v, pb.ids))
            number = st.column_config.NumberColumn(format="%.4f")
            table = knobs.container()          # above the chart; beside it on a projector
            table.dataframe(comparison.summary, hide_index=True,
                            column_config={positions.INPUT_COLUMN: number, positions.PREDICTION_COLUMN: number},
                            column_order=positions.PRESENTER_COLUMNS if v.presenter else None)
            table.caption(positions.table_caption(positions.PRESENTER_COLUMNS if v.presenter else comparison.summary.columns))
            bars = positions.order_figure(comparison, v.presenter)
            if bars is not None:
                chart(bars, stage, key="order")
            stage.markdown(positions.order_verdict(comparison, cfg.pos != "none", a, b, cfg.pos == "rope"))

step_nav("positions")
