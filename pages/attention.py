"""Step 4, attention: queries, keys and values, the four steps of one head, and every head at once."""
import streamlit as st

from explorer import memo
from explorer.steps import attention
from explorer.app import discover
from explorer.app.layout import (beside_the_chart, chart, explanation, head_picker, layer_picker, math_panel, page_header,
                                 picker_row, quote, require_trace, say, sections, step_nav, token_picker, veil_box,
                                 veiled, whatif_notes)
from explorer.app.state import view
from explorer.registry import BY_SLUG
from explorer.steps import whatif


v = view()
cfg = v.bundle.model.cfg
page_header("attention", v)
discover.way_back()                         # after a discovery's "Show me": one click back to your own sentence
explanation(v, attention.intro(cfg))
trace = require_trace(v, "attention")

left, right, third, *_ = picker_row([1, 1, 2] if v.compact else [1, 1, 2, 2])
layer = layer_picker(v, left)
head = head_picker(v, right)
qkv, steps, who, every, whatif_tab = sections("attention")
side_by_side = not v.presenter           # on a projector each figure gets the full width, one under the other

if qkv.open:
    qkv.subheader(f"Questions, labels and answers: layer {layer}, head {head}")
    text = attention.qkv_text(cfg)
    if not v.compact:
        qkv.markdown(text)
    chart(attention.head_figure(v, layer, head, "qkv"), qkv, key="qkv")
    if cfg.kv_heads < cfg.n_heads:
        qkv.markdown(attention.sharing_text(cfg.n_heads, cfg.kv_heads) + f" Head {head} reads key/value head "
                     f"{attention.kv_head(trace, layer, head)}: its K and V above are that head's.")
    if v.compact:                             # on a projector or a phone the chart comes first, the words under it
        qkv.markdown(text)

if steps.open:
    steps.subheader(f"The four steps: layer {layer}, head {head}")
    figures = attention.head_figure(v, layer, head, "steps")
    for row in (0, 2):
        places = steps.columns(2) if side_by_side else (steps, steps)
        for n, place, fig, caption in zip(range(row, row + 2), places, figures[row:row + 2],
                                          attention.STEP_CAPTIONS[row:row + 2]):
            chart(fig, place, key=f"step_{n}", part="pattern" if n >= 2 else None)   # steps 3-4: the weights
            place.markdown(caption.format(K=cfg.d_head, sqrtK=cfg.d_head ** 0.5))

if who.open:
    query = token_picker(v, third, label="Query token")        # in the pickers' row: the chart comes first
    with who:
        if not v.compact:
            st.subheader(f"Who attends to whom: layer {layer}, head {head}")
            say(attention.read_row(v, trace, layer, head, query), "pattern")
        big, lines = st.columns([3, 2]) if side_by_side else (st.container(), st.container())
        said = attention.head_sentence(v, trace, layer, head, query)           # what a screen reader hears first
        chart(attention.head_figure(v, layer, head, "pattern"), big, key="pattern", description=said, part="pattern")
        if v.compact:
            say(attention.read_row(v, trace, layer, head, query), "pattern")
        chart(attention.who_lines_figure(v, layer, head, query), lines, key="lines", description=said, part="pattern")
        lines.page_link(BY_SLUG["why"].file, label=f"See layer {layer} head {head}'s contribution to the prediction",
                        icon=BY_SLUG["why"].icon)
        lines.caption(f"Orange: the lines of {quote(v.tokens[query])}, drawn on top. A line's width and opacity are "
                      "proportional to its weight: half the weight, half as wide and half as opaque; weights under "
                      "0.01 are left out.")
        panel = math_panel("attention")
        if panel.open and veiled("pattern"):
            veil_box("pattern", panel, key="attention_math")
        elif panel.open:
            with panel:
                top = attention.top_keys(trace, layer, head, query)[0][0]
                key = top
                if not v.presenter:
                    key = st.selectbox("Key token", range(len(v.tokens)), index=top, key="attention_math_key",
                                       format_func=lambda i: f"{i}: {v.tokens[i]}",
                                       help="Starts at the key this query attends to most.")
                st.markdown("\n".join(attention.math_lines(v, trace, layer, head, query, key)))

if every.open:
    every.subheader("Every head in every layer")
    if attention.needs_overview(cfg):
        chart(attention.every_head_figure(v, layer, head), every, key="every_head", part="pattern")
        every.caption(f"All {cfg.n_layers * cfg.n_heads} heads at once: one row per layer, one small square per "
                      "head (its queries down, its keys across; hover for the exact weight). Orange: the head "
                      "chosen above, shown larger with its neighbours below.")
    chart(attention.grid_figure(v, layer, head), every, key="grid", part="pattern")
    say(attention.grid_caption(v, trace), "pattern", every, caption=True)
    every.page_link(BY_SLUG["why"].file, label=f"See layer {layer} head {head}'s contribution to the prediction",
                    icon=BY_SLUG["why"].icon)

if whatif_tab.open:
    query = token_picker(v, third, label="Query token")
    with whatif_tab:
        st.subheader("What if?")
        hidden = veiled("what-if")     # an open question about the knockout or the forecast: its answer waits
        search = None if hidden else attention.knockout_search(v, layer)     # (no "the head that matters most")
        options = attention.experiments(layer, head, search, query)
        if st.session_state.get("attention_whatif") not in options:     # opening the tab: a choice that shows
            st.session_state["attention_whatif"] = (whatif.default_choice(search, options["chosen"], query) if search
                                                    else "chosen")
        else:         # a label may now name another choice (they follow the layer and token): say which one is on
            st.session_state["attention_whatif"] = st.session_state["attention_whatif"]
        knobs, stage = beside_the_chart(v)
        choice = knobs.radio("Change the model", list(options), key="attention_whatif", horizontal=not v.presenter,
                             format_func=lambda key: options[key].label if hidden else
                             attention.experiment_label(key, options, search, query))
        experiment = options[choice]
        knobs.caption(f"{attention.whatif_text(experiment, cfg.d_head)} The chart: the prediction for the word after the "
                      f"query token ({query}: {quote(v.tokens[query])}).")
        if hidden:
            veil_box("what-if", stage, height=whatif.CHANGE_HEIGHT, key="whatif")
            step_nav("attention")
            st.stop()
        figure, words, (notes, elsewhere) = memo.per_view(attention.whatif_stage, v, experiment, query, layer)
        chart(figure, stage, key="whatif")
        stage.markdown(words)
        with stage:
            whatif_notes(v, notes, elsewhere, "attention_whatif",
                         help="Makes that token the query token; the what-if then shows its forecast.")

step_nav("attention")
