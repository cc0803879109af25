"""Step 6, residual stream and normalization: the running total, what each layer adds, and the logit lens."""
import streamlit as st

from explorer.app.layout import (beside_the_chart, chart, picker_row, explanation, knobs_and_chart, layer_picker, math_panel,
                             page_header, quote, require_trace, say, sections, step_nav, token_picker)
from explorer.steps.residual import (NORM_NAMES, SLUG, TEXT, block_figure, contributions, contributions_figure,
                               diagram_caption, lens_chart, lens_in_words, lens_of, lens_reads_mid, math_latex, math_table,
                               norm_caption, norm_math, norm_scatter_figure, norm_stats, norm_steps, stream_norms_figure)
from explorer.app.state import view

v = view()
page_header(SLUG, v)
explanation(v, TEXT)
trace = require_trace(v, SLUG)
cfg = v.bundle.model.cfg

picker, note = picker_row([1, 3], vertical_alignment="bottom")
layer = layer_picker(v, picker)
note.caption(f"This model: {cfg.n_layers} layers, a stream of {cfg.d_model} numbers per token, "
             f"{NORM_NAMES[cfg.norm]}" + (f", {cfg.norm_position}-norm" if cfg.norm != "none" else "")
             + (", parallel blocks." if cfg.parallel else "."))

wired, size, adds, norm, lens = sections("residual")

if wired.open:
    with wired:
        st.subheader("How one block is wired")
        chart(block_figure(v, layer), key="block")
        st.markdown(diagram_caption(v))

if size.open:
    with size:
        st.subheader("How big the stream is, stage by stage")
        chart(stream_norms_figure(v), key="norms")
        st.caption("Each cell is the length (L2 norm) of one token's vector in the stream after a stage: the "
                   "embedding, then each layer after attention and after the feed-forward network have added their notes.")

if adds.open:
    with adds:
        st.subheader(f"What layer {layer} adds")
        chart(contributions_figure(v, layer), key="contributions")
        added = contributions(v, layer)
        st.caption(f"On average attention adds a vector {added['attn.out'].mean():.2f} long to a stream "
                   f"{added['resid_pre'].mean():.2f} long, and the feed-forward network adds one {added['mlp.out'].mean():.2f} "
                   + ("long, read from the same stream (the block is parallel)" if cfg.parallel else
                      f"long to a stream {added['resid_mid'].mean():.2f} long")
                   + f" (averages over the {len(v.tokens)} tokens).")

if norm.open:
    with norm:
        st.subheader("Before and after normalization")
        steps = norm_steps(v, layer)
        if not steps:
            st.info("This model has no normalization layers: each sublayer reads the stream as it is.",
                    icon=":material/info:")
        else:
            knobs, stage = beside_the_chart(v)
            left, right = (knobs, knobs) if v.presenter else knobs.columns([1, 2])
            with left:
                token = token_picker(v)
            options = {s.key: s for s in steps}
            if st.session_state.get("residual_norm") not in options:
                st.session_state["residual_norm"] = steps[0].key
            chosen = right.radio("Which norm", list(options), key="residual_norm", horizontal=not v.presenter,
                                 format_func=lambda key: options[key].label)
            step = options[chosen]
            m = norm_math(v, step, token)
            chart(norm_scatter_figure(v, m, step, token), stage, key="norm_scatter")
            stats = norm_stats(m)
            knobs.dataframe(stats, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.4f")
                                                                for c in ("mean", "variance", "RMS", "L2 norm")})
            knobs.caption(norm_caption(m, step))
        panel = math_panel(SLUG)
        if panel.open:
            with panel:
                if not steps:
                    st.markdown("This model has no normalization, so there is nothing to work out here.")
                else:
                    st.markdown(f"{NORM_NAMES[m.kind]} for token {token} {quote(v.tokens[token])}, {step.label} in "
                                f"layer {layer}: its input is {step.x_name}, its output {step.y_name}.")
                    for line in math_latex(m):
                        st.latex(line)
                    table = math_table(m)
                    st.dataframe(table, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.4f")
                                                                        for c in table.columns if c != "d"})
                    worst = float(abs(m.y - m.traced).max())
                    st.caption(f"The first {len(table)} of {len(m.x)} dimensions. Recomputed here, the output matches "
                               f"the model's trace to within {worst:.1e}.")

if lens.open:
    with lens:
        st.subheader("The logit lens: what would the model guess at each stage?")
        with_mid = lens_reads_mid(v)                  # a deep model's 2 readings per layer crowd the chart
        knobs, stage = knobs_and_chart(v)             # on a phone the chart first, the toggle under it
        if not v.presenter:
            with_mid = knobs.toggle("Also read the stream after attention", value=with_mid,
                                    key="residual_lens_mid",
                                    help="Each layer's stream between its attention and its feed-forward "
                                         "network.")
        chart(lens_chart(v, with_mid), stage, key="lens", part="lens")
        say(lens_in_words(v, lens_of(v, with_mid)), "lens")
        st.caption("Each cell passes that stage's stream through the model's own final norm and unembedding, "
                   "exactly as the real output does, and shows the likeliest next token and its probability. The "
                   "last column is the model's real prediction.")

step_nav(SLUG)
