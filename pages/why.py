"""Step 8, why this prediction: direct logit attribution, contribution routes and activation patching."""
import streamlit as st

from model.attribution import routes
from model.inputs import prepare_text

from explorer import memo
from explorer.app.models import is_encoder_decoder
from explorer.app.layout import (beside_the_chart, chart, explanation, head_picker, layer_picker, page_header, picker_label,
                                 picker_row, quote, require_trace, sections, step_nav, token_picker, veil_box,
                                 veiled)
from explorer.app.state import READ_LIMIT, apply_view, view
from explorer.plot import labels
from explorer.registry import BY_SLUG
from explorer.steps import why
TYPED = -1                                    # "another word": the option that opens a text box
VEILED_HEIGHT = 420                           # the placeholder of a veiled tab (px): about its chart's height
GO = "_why_go"                                # the page to open on the next run (st.switch_page not in a callback)

if st.session_state.get(GO):
    st.switch_page(st.session_state.pop(GO))

v = view()
page_header("why", v, encoder_decoder=True)
explanation(v, why.EXPLANATION)
trace = require_trace(v, "why")
model, vocab = v.bundle.model, v.bundle.tokenizer.vocab
decoder = is_encoder_decoder(v.bundle)          # then the decoder's forecasts are explained
reading = why.stream_tokens(v, trace)            # the tokens the logits are read after
if decoder:
    st.info(why.decoder_note(v, trace), icon=":material/translate:")


def open_head(layer: int, head: int, position: int) -> None:
    """Open head `head` of layer `layer` on the Attention page, reading from `position`."""
    apply_view(layer=layer, head=head, token=position, sections={"attention": BY_SLUG["attention"].tab("who-looks")})
    st.session_state[GO] = BY_SLUG["attention"].file
    st.rerun()


def sentence(problem: Exception) -> str:
    """A refusal from the model's code as a sentence: a capital first, a full stop last."""
    text = str(problem).strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def word_of(i: int) -> str:
    return "another word …" if i == TYPED else why.visible(vocab[i])


def chosen_token(options: list, key: str, label: str, where, fallback: int | None):
    """A token picked among `options`, or typed; a word the model cannot score gets a message and `fallback`."""
    if st.session_state.get(key) not in options:
        st.session_state.pop(key, None)
    choice = where.selectbox(label, options, key=key,
                             **picker_label(label, where, lambda i: "nothing (one token)" if i is None else word_of(i)))
    if choice != TYPED:
        return choice
    typed = where.text_input("Word", key=f"{key}_word", max_chars=60, placeholder="type a word")
    if not typed.strip():
        return fallback
    try:
        return why.target_token(v.bundle.tokenizer, typed)
    except ValueError as problem:
        where.warning(f"{problem} Showing {quote(vocab[fallback])} instead." if fallback is not None else str(problem),
                      icon=":material/info:")
        return fallback


if veiled("forecast"):          # an open next-word question: this page starts from the model's top guess
    veil_box("forecast", height=VEILED_HEIGHT)
    step_nav("why")
    st.stop()
pick, first, second = picker_row([1, 1, 1], beside_the_title=False)
if decoder:                                    # a position of what the decoder read, not of the source
    if st.session_state.get("why_decoder_position") not in range(len(reading)):
        st.session_state["why_decoder_position"] = 0
    position = pick.selectbox("After target token", range(len(reading)), key="why_decoder_position",
                              format_func=lambda i: f"{i}: {why.visible(reading[i])}")
else:
    position = token_picker(v, pick, label="After token" if v.compact else "Explain the forecast after token")
tops = why.favourites(trace, position)
forecast = (v.key, v.ids, position)
if st.session_state.get("_why_forecast") != forecast:      # another forecast: start from its favourite again
    st.session_state["_why_forecast"] = forecast
    for key in ("why_target", "why_other"):
        st.session_state.pop(key, None)
target = chosen_token([*tops, TYPED], "why_target", "Token to explain", first, tops[0])
others = [t for t in tops if t != target]
other = chosen_token([None, *others, TYPED], "why_other", "… rather than", second, None)
if other == target:
    other = None

attribution_tab, routes_tab, patching_tab = sections("why")
if veiled("contributions"):     # an open question about which part pushes most: every tab here measures the parts
    veil_box("contributions", next(t for t in (attribution_tab, routes_tab, patching_tab) if t.open), VEILED_HEIGHT)
    step_nav("why")
    st.stop()

if attribution_tab.open:
    with attribution_tab:
        try:
            result = why.attribution(v, trace, position, target, other)
        except ValueError as problem:                      # a post-norm model: the parts do not add up
            st.info(sentence(problem), icon=":material/info:")
        else:
            story = st.container()             # above the chart; on a small first screen under it: the chart first
            clicked = why.clicked_head(chart(memo.per_view(why.attribution_figure, v, position, target),
                                             key="why_attribution", clickable=not decoder, part="contributions"))
            if clicked:                                    # a head's bar opens that head on the Attention page
                open_head(*clicked, position)
            (st if v.compact else story).markdown(why.attribution_story(v, trace, result, target))
            if other is not None:
                st.subheader(f"Why {quote(vocab[target])} rather than {quote(vocab[other])}?")
                st.markdown(why.rather_story(v, result, target, other))
                chart(memo.per_view(why.attribution_figure, v, position, target, other), key="why_rather")
            if not decoder:                    # the Attention page shows a decoder-only model's heads
                st.subheader("One head")
                left, right, _ = st.columns([1, 1, 2])
                layer, head = layer_picker(v, left), head_picker(v, right)
                st.markdown(why.head_story(v, trace, result, layer, head, target))
                if st.button(f"Open layer {layer} head {head} on the Attention page", icon=":material/hub:",
                             key="why_open_head", help="Or click a head's bar in the chart above."):
                    open_head(layer, head, position)
            panel = st.expander("Every part as a table", icon=":material/table:", key="why_table", on_change="rerun")
            if panel.open:                             # closed, it costs the server nothing
                table = why.attribution_table(v, result, target, other)
                panel.dataframe(table, hide_index=True)
                with panel:
                    st.download_button("Download the table (CSV)", table.to_csv(index=False), "attribution.csv",
                                       "text/csv", key="why_attribution_csv", icon=":material/download:",
                                       on_click="ignore")

if routes_tab.open:
    with routes_tab:
        knobs, stage = beside_the_chart(v, spec=(1, 3))
        threshold = knobs.slider("Threshold", 0.01, 0.5, why.ROUTE_THRESHOLD, 0.01, key="why_threshold",
                              help="Only contributions at least this large (as a share of the state they build) are drawn. "
                                   "llm-transparency-tool starts at 0.04; a tiny model's routes show from 0.02.")
        try:
            edges = routes(model, trace, position, threshold)
        except ValueError as problem:
            st.info(sentence(problem), icon=":material/info:")
        else:
            story = stage.container()
            click = chart(why.routes_figure(v, edges, position, threshold, v.presenter), stage, key="why_routes",
                          clickable=True)
            (knobs if v.compact else story).markdown(why.routes_story(v, edges, position))
            nodes = why.route_nodes(edges)
            if (chosen := why.clicked_node(click, nodes)) is not None:
                st.session_state["why_node"] = chosen      # a click on a node opens what its update wrote
            if nodes:
                index = st.selectbox("What did this update write?", range(len(nodes)), key="why_node",
                                     format_func=lambda i: why.node_label(v, nodes[i]),
                                     help="The update a head or MLP added to the stream at one node of the routes.")
                node = nodes[min(index, len(nodes) - 1)]
                table = why.node_table(v, trace, node, position)
                st.markdown(why.node_story(v, node, table))
                st.dataframe(table, hide_index=True, column_config={
                    "up by": st.column_config.NumberColumn(format="%+.3f"),
                    "down by": st.column_config.NumberColumn(format="%+.3f")})

if patching_tab.open and decoder:
    patching_tab.info("Patching is drawn for decoder-only models here (tinytales, roses, GPT-2): an encoder-decoder's "
                      "two runs would also need one source.", icon=":material/info:")
elif patching_tab.open:
    with patching_tab:
        knobs, stage = beside_the_chart(v)
        suggestion = why.suggested_corruption(v)
        text = knobs.text_input("A second sentence, with the same number of tokens", key="why_corrupted",
                             max_chars=400, placeholder=suggestion or "the sentence with one word changed",
                             help="Change one word. The page puts pieces of your sentence's run into the run of "
                                  "this one and measures how much of your sentence's answer comes back: the token "
                                  "to explain, against the one chosen beside it (or else the changed sentence's "
                                  "favourite).")
        if suggestion and not text.strip():
            # the sentence itself is the box's placeholder just above: in a projector's narrow column it would be cut
            knobs.button("Try the sentence shown", key="why_suggest", icon=":material/lightbulb:",
                         help=f"Puts {quote(suggestion)} in the box.",
                         on_click=lambda: st.session_state.update(why_corrupted=suggestion))
        if text.strip():
            corrupted = prepare_text(v.bundle.tokenizer, text, min(model.cfg.max_len, READ_LIMIT))
            if corrupted.unknown:
                knobs.warning(corrupted.unknown_notice(), icon=":material/info:")
            compare = knobs.toggle("Beside it: the instant estimate (attribution patching)", key="why_estimate",
                                help="One forward and one backward pass estimate every cell at once; the exact grid "
                                     "runs the model once per cell.")
            args = (tuple(v.ids), tuple(corrupted.ids), position, target, other)
            try:
                # the estimate first (one forward and one backward pass): on GPT-2 it is drawn while the exact
                # grid is still being computed
                guess = memo.per_input(why.estimate, v, *args) if compare else None
            except ValueError as problem:                  # the same pair problems the exact grid would meet
                guess, refusal = None, problem
            else:
                refusal = None
            story = (knobs if v.compact else stage).container()     # beside the grids on a projector, under them on a phone
            rows, words = [], []                           # in page order: stream grids, their words, head grids, ...
            for _ in range(2):
                rows.append(stage.columns(2) if compare and not v.presenter else (stage.container(), stage.container()))
                words.append(stage.container())
            if guess is not None:
                chart(why.estimate_figure(v, guess, "resid", v.presenter), rows[0][1], key="why_resid_estimate")
                chart(why.estimate_figure(v, guess, "heads", v.presenter), rows[1][1], key="why_heads_estimate")
            progress = stage.progress(0.0, text="Patching ...")
            try:
                if refusal is not None:
                    raise refusal
                result = memo.per_input(why.patching, v, *args, progress=lambda done, total: progress.progress(
                    done / total, text=f"Patched run {done:,} of {total:,}"))
            except ValueError as problem:
                progress.empty()
                stage.info(sentence(problem), icon=":material/info:")
            else:
                progress.empty()
                story.markdown(why.pair_story(v, result, [vocab[i] for i in corrupted.ids]))
                chart(why.resid_figure(v, result, v.presenter), rows[0][0], key="why_resid")
                words[0].markdown(why.resid_story(v, result))
                chart(why.heads_figure(result, v.presenter), rows[1][0], key="why_heads")
                words[1].markdown(why.heads_story(result))
                if guess is not None:
                    stage.markdown(why.agreement_story(v, result, guess))
                csv = stage.container(horizontal=True)       # each button its label's width; wraps when it must
                csv.download_button("Download the stream grid (CSV)", why.grid_csv(result.resid, labels(v.tokens)),
                                    "patching_stream.csv", "text/csv", key="why_resid_csv",
                                    icon=":material/download:", on_click="ignore")
                csv.download_button("Download the head grid (CSV)",
                                    why.grid_csv(result.heads, [f"head {h}" for h in range(model.cfg.n_heads)]),
                                    "patching_heads.csv", "text/csv", key="why_heads_csv",
                                    icon=":material/download:", on_click="ignore")

step_nav("why")
