"""Step 7: the last scores become probabilities; temperature, top-k and top-p shape them; the model writes."""
import streamlit as st

from explorer.app.layout import (chart, explanation, keep_if, knobs_and_chart, main_chart, math_panel, page_header,
                                 picker_row, quote, require_trace, step_nav, token_picker, veil_box, veiled)
from explorer.plot import safe
from explorer.registry import BY_SLUG
from explorer.steps.prediction import (cache_story, cache_table, times_figure, times_story, MATH_ROWS, STRATEGY_LABELS, TOP_BARS, TOP_K_SLIDER_MAX, Continuation, Settings,
                                 actual_next_story, continuation_table, continued_text, cumulative_figure,
                                 explanation_text, extend, kept_summary, logit_figure, mass_kept,
                                 probability_figure, ranking, renormalise_story, softmax_story, softmax_worked,
                                 top_k_steps, top_p_story, window_story)
from explorer.app.state import MAX_CHARS, view
from model.generate import STRATEGIES, time_new_token

v = view()
page_header("prediction", v)
vocab = v.bundle.tokenizer.vocab
V = len(vocab)
explanation(v, explanation_text(V))
trace = require_trace(v, "prediction")
logits = trace["logits"][0]                                   # (T, V), from the cached trace
n_tokens = logits.shape[0]

# --- the forecast at one position, shaped by the sliders (no model run: the logits are cached) --------
# a link's settings (explorer/registry.py: the page's linked fields) are kept only when this page offers them
keep_if("prediction_temperature", lambda t: isinstance(t, (int, float)) and 0 <= t <= 3)
keep_if("prediction_top_k", lambda k: isinstance(k, int) and 1 <= k <= V)
keep_if("prediction_top_p", lambda p: isinstance(p, (int, float)) and 0.05 <= p <= 1)
keep_if("prediction_strategy", lambda s: s in STRATEGIES)
knobs, stage = knobs_and_chart(v)          # on a phone the charts come first
if v.presenter:          # on a projector: the token picker beside the title, the three sliders beside the charts
    position = token_picker(v, picker_row([1])[0], label="After token")
    sliders, stage = stage.columns([1, 4], gap="medium")
    left = middle = right = sliders
else:
    if not v.compact:
        knobs.subheader("The forecast for the next token")
    pick, _ = knobs.columns([1, 2])
    position = token_picker(v, pick, label="Show what the model predicted after token")
    left, middle, right = knobs.columns(3)
temperature = left.slider("Temperature", 0.0, 3.0, 1.0, 0.05, key="prediction_temperature",
                          help="Below 1 the favourite gets even more likely; above 1 the long shots catch up. "
                               "0 always takes the favourite.")
top_k_help = f"Only the k likeliest tokens may be drawn. {V:,} (the whole vocabulary) cuts nothing."
if V <= TOP_K_SLIDER_MAX:
    top_k = middle.slider("Top-k", 1, V, V, key="prediction_top_k", help=top_k_help)   # another vocabulary: back to V
else:              # GPT-2's 50,257: a slider step of one token would make 5 or 50 impossible to pick
    top_k = middle.select_slider("Top-k", top_k_steps(V), V, key="prediction_top_k_steps", help=top_k_help,
                                 format_func=lambda k: f"{k:,}")
top_p = right.slider("Top-p", 0.05, 1.0, 1.0, 0.05, key="prediction_top_p",
                     help="Only the likeliest tokens that together cover this much of the chance may be drawn. "
                          "1 cuts nothing.")
settings = Settings(temperature, top_k if top_k < V else None, top_p if top_p < 1 else None)

table = ranking(logits[position], vocab, settings)
actual = v.prepared.ids[position + 1] if position + 1 < n_tokens else None
after = v.tokens[position]
bars = 8 if v.presenter else TOP_BARS                        # fewer, larger bars on a projector
scores, chances = stage.columns([2, 3])           # side by side: both on a projector's first screen too
chart(logit_figure(table, f"Scores (logits) after “{safe(after)}”", bars, v.presenter), scores, key="logits",
      part="forecast")
chart(probability_figure(table, settings, f"Next-token probabilities after “{safe(after)}” "
                                          f"(position {position})", actual, bars, v.presenter), main_chart(chances),
      key="probabilities", part="forecast")
hidden = veiled("forecast")             # a class's open next-word question: its answer waits for the reveal
if not hidden:
    numbers = st.columns(3)
    numbers[0].metric("Tokens in the draw", f"{int(table.kept.sum()):,} of {V:,}")
    numbers[1].metric("Chance kept", f"{mass_kept(table):.2%}")
    numbers[2].metric("Favourite", quote(table.token.iloc[0]), f"{table.final.iloc[0]:.1%} after the cut",
                      delta_color="off", delta_arrow="off")
    st.caption(kept_summary(table))
    if actual is not None:
        st.markdown(actual_next_story(table, actual))
    else:
        st.caption(f"After the last token, {quote(after)}, the sentence ends: this forecast is what the model "
                   "would write next.")
    st.page_link(BY_SLUG["why"].file, label=f"Why {quote(table.token.iloc[0])}? See what each head and layer added "
                 "to this forecast", icon=BY_SLUG["why"].icon)

panel = math_panel("prediction")
if panel.open and hidden:
    veil_box("forecast", panel)
elif panel.open:
    with panel:
        if temperature == 0:
            st.markdown("At temperature 0 there is nothing to compute: dividing by 0 is impossible, so the rule is "
                        "simply *always take the token with the highest logit*. Here that is "
                        f"{quote(table.token.iloc[0])} (logit {table.logit.iloc[0]:.4f}).")
            worked = softmax_worked(logits[position], vocab, 1.0)
            shown_t = 1.0
        else:
            worked = softmax_worked(logits[position], vocab, temperature)
            shown_t = temperature
        st.markdown(f"**Softmax at temperature {shown_t:g}**, for the {MATH_ROWS} likeliest of the {V:,} tokens:")
        st.latex(r"p_i = \frac{e^{z_i / T}}{\sum_{j=1}^{V} e^{z_j / T}}"
                 + (r"\quad\text{(computed as } e^{z_i/T - m}\text{, } m = \max_j z_j/T\text{, to avoid overflow)}"
                    if worked.shift else ""))
        st.dataframe(worked.rows, hide_index=True, column_config={
            "token": st.column_config.TextColumn("token"),
            "logit": st.column_config.NumberColumn(format="%.4f"),
            "logit / T": st.column_config.NumberColumn(format="%.4f"),
            "exp(logit / T)": st.column_config.NumberColumn(format="%.6g"),
            "probability": st.column_config.NumberColumn(format="%.4f")})
        st.markdown(softmax_story(worked, shown_t, V))
        st.markdown("**How top-k and top-p cut.** "
                    + (f"Top-k keeps ranks 1 to {settings.top_k:,} and cuts the other {V - settings.top_k:,}. "
                       if settings.top_k is not None else "Top-k is off. ")
                    + top_p_story(table, settings.top_p))
        chart(cumulative_figure(table, settings, v.presenter), key="cumulative")
        st.markdown(renormalise_story(table))

# --- writing with the model: an explicit action, so here the model does run --------------------------
st.subheader("Let the model write")
if hidden:                              # its first word would be the open question's answer
    veil_box("forecast", key="continuation")
    step_nav("prediction")
    st.stop()
controls = st.columns([2, 1, 1, 1] if not v.presenter else [2, 1])
strategy = controls[0].radio("Strategy", STRATEGIES, key="prediction_strategy", horizontal=True,
                             format_func=STRATEGY_LABELS.get,
                             help="greedy: always the favourite. sampling: roll the dice with the sliders above. "
                                  "beam search: keep several whole continuations, return the likeliest.")
beams, seed = 3, 0
if not v.presenter:
    if strategy == "beam":
        beams = controls[1].number_input("Beams", 1, 8, 3, key="prediction_beams")
    if strategy == "sample":
        seed = controls[1].number_input("Seed", 0, 1_000_000, 0, key="prediction_seed",
                                        help="The same seed draws the same tokens again.")

key = (v.name, v.text, strategy)
cont = st.session_state.get("prediction_generated")
if not isinstance(cont, Continuation) or cont.key != key:
    cont = Continuation(key)                                    # a new model, sentence or strategy starts over
buttons = st.container(horizontal=True)
one = buttons.button("Next token", key="prediction_next", icon=":material/skip_next:", disabled=cont.full)
ten = buttons.button("Generate 10", key="prediction_ten", icon=":material/fast_forward:", disabled=cont.full)
if buttons.button("Start over", key="prediction_reset", icon=":material/restart_alt:"):
    cont = Continuation(key)
if one or ten:
    cont = extend(v.bundle.model, v.prepared.ids, cont, 1 if one else 10, strategy, settings, beams, seed)
st.session_state["prediction_generated"] = cont

if cont.tokens:
    new_text = continued_text(v.bundle.tokenizer, v.text, cont.tokens)
    st.markdown(f"{quote(v.text)} + **{quote(v.bundle.tokenizer.decode(cont.tokens))}**")
    st.dataframe(continuation_table(cont, vocab), hide_index=True, height=min(400, 38 + 35 * len(cont.tokens)),
                 column_config={"probability": st.column_config.NumberColumn(
                     format="%.4f", help="The chance the token had when it was chosen")})
    if cont.window_slid:
        st.info(window_story(cont, len(v.prepared.ids), v.bundle.model.cfg.max_len), icon=":material/swap_horiz:")
    if cont.revised:
        st.caption("Beam search changed its mind about earlier tokens: looking one token further, another "
                   "continuation became the likeliest overall.")
    if cont.full:
        st.caption(f"That is {len(cont.tokens)} new tokens, the most this page writes. Start over to write again.")
    if len(new_text) <= MAX_CHARS:
        st.button("Use this as the sentence", key="prediction_use", icon=":material/input:",
                  on_click=lambda: st.session_state.update(text=new_text),
                  help="Put the text with its new tokens into the sidebar, to follow it through every step.")
else:
    st.caption("Press a button to add tokens. Greedy and sampling add to the text so far; beam search plans the "
               f"whole continuation again. Sampling uses the sliders above ({settings.describe()}). "
               "Changing the model, the sentence or the strategy starts over.")

# --- the KV cache: measured live on the text as it grows (drawn only when opened) --------------------------
kv_box = st.expander("The KV cache: writing without reading everything again", icon=":material/memory:",
                     key="prediction_kv_cache", on_change="rerun")
if kv_box.open:
    with kv_box:
        cfg = v.bundle.model.cfg
        written = [*v.prepared.ids, *cont.tokens][-cfg.max_len:]
        st.markdown(cache_story(cfg, len(written)))
        st.markdown(f"What each of the {cfg.n_layers} layers keeps per token:")
        st.table(cache_table(cfg).set_index("layer"))
        if len(written) > 1:
            measured = st.session_state.setdefault("prediction_kv_times", {})     # (model, tokens) -> TokenTimes
            if (v.name, len(written)) not in measured:
                measured[(v.name, len(written))] = time_new_token(v.bundle.model, written, repeats=3)
            st.markdown(times_story(measured[(v.name, len(written))]))
            chart(times_figure([t for (name, _), t in measured.items() if name == v.name], v.presenter),
                  key="kv_times")
            st.caption("Each point is measured on this server when the text reaches that length: press Next token "
                       "or Generate 10 above to add points.")

step_nav("prediction")
