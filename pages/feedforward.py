"""Step 5, feed-forward: expand, activate, contract, one token at a time."""
import streamlit as st

from explorer.steps import feedforward
from explorer.steps.feedforward import (ALL_NEURONS_UP_TO, SLUG, activation_name, heatmap_text, intro, activations_figure,
                                  change_in_words, histogram_figure, neuron_math,
                                  neuron_math_latex, neuron_terms, shapes_figure, top_neurons,
                                  top_neurons_everywhere_figure, top_neurons_figure, zeroed)
from explorer.app.layout import (beside_the_chart, chart, picker_row, dims_picker, explanation, layer_picker, math_panel, page_header, quote, require_trace,
                             say, sections, step_nav, token_picker, veiled, whatif_notes)
from explorer.plot import DIMS_SHOWN
from explorer.app.state import view
from explorer.steps import whatif


v = view()
page_header(SLUG, v)
explanation(v, intro(v.bundle.model.cfg))
trace = require_trace(v, SLUG)
cfg = v.bundle.model.cfg
act = activation_name(v)
gated = cfg.activation == "swiglu"

picker, note = picker_row([1, 3], vertical_alignment="bottom")
layer = layer_picker(v, picker)
note.caption(f"Layer {layer} of {cfg.n_layers}: every token's {cfg.d_model} numbers go through "
             f"{cfg.d_ff:,} neurons and come back as {cfg.d_model:,} numbers.")
shapes, fire, strongest, off_section, whatif_tab = sections("feedforward")

if shapes.open:
    shapes.subheader("Expand, activate, contract")
    chart(shapes_figure(v, layer), shapes, key="shapes")

if fire.open:
    fire.subheader("Which neurons fire for which token")
    neurons = None
    if cfg.d_ff > ALL_NEURONS_UP_TO:
        strongest_first = fire.toggle(f"The {DIMS_SHOWN} neurons that fire most", value=True, key="mlp_strongest",
                                      help=f"Off: walk through all {cfg.d_ff:,} neurons, {DIMS_SHOWN} at a time.")
        if not strongest_first:
            neurons = dims_picker(v, cfg.d_ff, "mlp_neurons", what="neurons", where=fire)
    chart(activations_figure(v, layer, neurons), fire, key="activations")
    fire.caption(f"Each row is one token, each column one of the {cfg.d_ff:,} neurons. "
                 + heatmap_text(cfg.activation) + " " + feedforward.range_words(v, layer, neurons) + " Hover for exact values.")

if strongest.open:
    with strongest:
        st.subheader("The strongest neurons for one token")
        knobs, stage = beside_the_chart(v)
        token = token_picker(v, knobs if v.presenter else knobs.columns([1, 3])[0])
        table = top_neurons(v, layer, token)
        side_by_side = not v.presenter and len(v.tokens) <= 12          # long sentences need the full width
        left, right = stage.columns(2) if side_by_side else (stage.container(), stage.container())
        chart(top_neurons_figure(v, layer, token, table), left, key="top_neurons")
        chart(top_neurons_everywhere_figure(v, layer, token, table), right, key="top_everywhere")
        knobs.caption(f"The bars: the {len(table)} neurons that fire most for {quote(v.tokens[token])}. The grid: "
                   "the same neurons for every token of the sentence. Hover a bar to see the other tokens that "
                   "fire it at least half as strongly.")
        panel = math_panel(SLUG)
        if panel.open:
            with panel:
                j = int(table["neuron"].iloc[0])
                m = neuron_math(v, layer, token, j)
                st.markdown(f"Token {token} {quote(v.tokens[token])}, its strongest neuron **n{j}** in layer {layer}. "
                            f"The neuron's value is a dot product of the token's {cfg.d_model} input numbers (mlp.in) "
                            f"with row {j} of {'W_gate' if gated else 'W_in'} (a weight matrix of {cfg.d_ff:,} × "
                            f"{cfg.d_model:,}), plus a bias" + (" (this model has none)" if not cfg.bias else "")
                            + (f"; then SiLU of that gate times the up projection (mlp.up = {m.up:.4f}):" if gated
                               else ":"))
                for line in neuron_math_latex(m, shown=2 if v.presenter else 3):
                    st.latex(line)
                terms = neuron_terms(m)
                st.dataframe(terms, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.4f")
                                                                    for c in terms.columns if c != "d"})
                st.caption(f"The model's own trace recorded mlp.{feedforward.pre_name(cfg)} = {m.traced_pre:.4f} and mlp.post = "
                           f"{m.traced_post:.4f} for this token and neuron.")

if off_section.open:
    with off_section:
        st.subheader(f"What {act} switches off")
        off = zeroed(v, layer)
        knobs, stage = beside_the_chart(v)
        number, words = (knobs, knobs) if v.presenter else knobs.columns([1, 3], vertical_alignment="center")
        number.metric("Switched off", f"{off.share:.1%}", border=True)
        words.markdown(f"**{off.count:,} of {off.total:,}** neuron values ({len(v.tokens)} tokens × {cfg.d_ff:,} "
                       f"neurons) in layer {layer} are {off.rule}. "
                       + ("Only the rest carry a signal on to W_out." if cfg.activation == "relu" else
                          "They still pass a faint signal on to W_out; the rest carry the strong one."))
        chart(histogram_figure(v, layer), stage, key="histogram")

if whatif_tab.open:
    with whatif_tab:
        st.subheader("What if a layer had no feed-forward network?")
        knobs, stage = beside_the_chart(v)
        token = token_picker(v, knobs if v.presenter else knobs.columns([1, 3])[0])
        hidden = veiled("what-if")     # an open question about the forecast: the skip's effect names it
        search = feedforward.skip_search(v)
        options = feedforward.choices(layer, search, token)
        if st.session_state.get("mlp_whatif") not in options:          # opening the tab: a choice that shows
            st.session_state["mlp_whatif"] = whatif.default_choice(search, feedforward.experiment(layer), token)
        else:         # a label may now name another choice (they follow the layer and token): say which one is on
            st.session_state["mlp_whatif"] = st.session_state["mlp_whatif"]
        choice = knobs.radio("Change the model", list(options), key="mlp_whatif", horizontal=not v.presenter,
                             format_func=lambda key: feedforward.choice_label(key, options, search, token))
        skipped = options[choice]
        experiment = feedforward.experiment(skipped)
        knobs.caption(f"The model runs again with layer {skipped}'s feed-forward output set to zero; the bars compare "
                      f"its guesses for the token after {quote(v.tokens[token])}.")
        after = whatif.experiment_trace(v, experiment)
        change = whatif.next_token_change(v, trace, after, position=token)
        words = stage.container()                   # the words under the chart on a small first screen, else above it
        chart(whatif.change_figure(change, experiment, v.presenter), stage, key="whatif", part="what-if")
        say(change_in_words(v, trace, after, skipped, position=token), "what-if", stage if v.compact else words)
        notes, elsewhere = feedforward.whatif_notes(v, search, trace, after, experiment, token)
        if not hidden:
            with stage:
                whatif_notes(v, notes, elsewhere, "mlp_whatif",
                             help="Makes that token the selected one; the what-if then shows its forecast.")

step_nav(SLUG)
