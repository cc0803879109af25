"""Features: what the model's neurons respond to, steering it with them, and superposition in a toy."""
import streamlit as st

from explorer import memo
from explorer.app import sae as app_sae
from explorer.app.lab import user_text
from explorer.app.layout import (beside_the_chart, chart, explanation, keep_if, layer_picker, page_header, picker_row,
                                 require_trace, say, sections, step_nav)
from explorer.app.models import is_encoder_decoder
from explorer.app.neurons import feature_index_file, index_file
from explorer.app.state import view
from explorer.steps import dictionary, features, superposition
from model.steering import MAX_STRENGTH, check_strength
from model.superposition import ToyConfig, train_toy

SLUG = "features"
INTRO = """\
A model writes what it has noticed about a word into the numbers of its residual stream. Which numbers, and what do
they mean? This page looks for **features**: things the model responds to, each a direction in its numbers.

- **Neurons**: each feed-forward neuron fires on some words and not others. Its top contexts over the model's own
  text show what it responds to, and its output weights show which next words it pushes up or down.
- **Dictionary features**: a sparse autoencoder finds many more directions than there are neurons, each firing
  rarely. A feature's card shows where it fires over the model's own text, how often, and what it writes; it is
  named by its number only, never by a description nobody computed.
- **Steering**: add a direction (a neuron's, the difference between two sentences, or a dictionary feature's) to
  the stream while the model writes, and watch its words change.
- **Superposition**: a model has more things to notice than numbers to write them in. A toy of five features in two
  dimensions shows how it fits them, when features are rare.
"""

v = view()
page_header(SLUG, v)
explanation(v, INTRO)
pickers = st.empty()                   # above the tabs: the layer, neuron (or feature) and dictionary pickers
neurons_tab, dictionary_tab, steering_tab, superposition_tab = sections(SLUG)
model_tab = neurons_tab.open or dictionary_tab.open or steering_tab.open
if model_tab and is_encoder_decoder(v.bundle):
    st.info(f"**{v.name}** is an encoder-decoder; this page reads a decoder-only language model's neurons (tinytales, "
            "roses, GPT-2, SmolLM2, a model from the lab). The superposition toy needs no model.",
            icon=":material/translate:")
    step_nav(SLUG)
    st.stop()
if model_tab:
    require_trace(v, SLUG)
    cfg = v.bundle.model.cfg
    with pickers.container():
        place, neuron_place, dictionary_place = picker_row([1, 1, 2])
    layer = layer_picker(v, place)


def neuron_picker(where) -> int:
    """The neuron (of the chosen layer), at first the one that fires most on the sentence."""
    keep_if("features_neuron", lambda n: isinstance(n, int) and 0 <= n < cfg.d_ff)
    st.session_state.setdefault("features_neuron", features.busiest_neuron(v, layer))
    return where.number_input("Neuron", 0, cfg.d_ff - 1, key="features_neuron", step=1,
                              help=f"One of the {cfg.d_ff:,} feed-forward neurons of layer {layer}. It starts at the "
                                   "one that fires most on your sentence.")


if neurons_tab.open:
    neuron = neuron_picker(neuron_place)
    with neurons_tab:
        try:
            text = features.own_text(v, user_text())
        except ValueError as problem:
            st.info(str(problem), icon=":material/info:")
            text = None
        # the main chart first: the neuron's strongest contexts, filled in once the text is read (the sentence's
        # chart below is drawn meanwhile)
        top = st.container()
        chart(features.sentence_figure(v, None, None, layer, neuron), key="neuron_sentence")
        fires, index = st.empty(), None
        if text is not None:
            with top:
                bar = st.progress(0.0, text=f"Reading {text.name} once on this server, to find each neuron's "
                                            "strongest contexts ...")
                index = features.neuron_index(v, text, progress=lambda done, total: bar.progress(
                    done / max(total, 1), text=f"Reading {text.name}: window {done:,} of {total:,}"),
                    kept=index_file(v, text))
                bar.empty()
                table = features.contexts_table(v, index, layer, neuron)
                chart(features.contexts_figure(v, table, text, layer, neuron), key="neuron_contexts")
                st.markdown(features.contexts_sentence(v, index, table, text, layer, neuron))
                st.caption(f"The text: {text.source}.")
        fires.markdown(features.fires_sentence(v, index, text, layer, neuron))
        outputs = features.output_tokens(v, layer, neuron)
        chart(features.output_figure(v, outputs, layer, neuron), key="neuron_outputs")
        st.markdown(features.output_sentence(v, outputs, layer, neuron))

if dictionary_tab.open:
    with dictionary_tab:
        # the dictionary beside the layer and feature (on a phone, whose picker row is narrow, in the tab)
        chosen = app_sae.picker(v, layer, st if v.phone else dictionary_place, notices=st)
        if chosen is not None:
            feature = app_sae.feature_picker(chosen, lambda: dictionary.busiest_feature(v, chosen.sae), neuron_place,
                                             key="features_feature")
            on_sentence = dictionary.sentence_table(v, chosen.sae, feature)
            chart(dictionary.sentence_figure(v, on_sentence, feature), key="sae_sentence")
            st.markdown(dictionary.sentence_words(v, chosen.sae))
            st.caption(f"{chosen.name}: {chosen.source}.")
            try:
                text = features.own_text(v, user_text())
            except ValueError as problem:
                st.info(str(problem), icon=":material/info:")
                text = None
            if text is not None:
                bar = st.progress(0.0, text=f"Reading {text.name} once on this server, to find each feature's "
                                            "strongest contexts ...")
                index = dictionary.feature_index(v, chosen, text, progress=lambda done, total: bar.progress(
                    done / max(total, 1), text=f"Reading {text.name}: window {done:,} of {total:,}"),
                    kept=feature_index_file(v, chosen, text))
                bar.empty()
                contexts = dictionary.contexts_table(v, index, feature)
                if len(contexts):
                    chart(dictionary.contexts_figure(v, contexts, text, feature), key="sae_contexts")
                st.markdown(dictionary.contexts_words(v, index, contexts, text, feature))
                chart(dictionary.density_figure(v, index, feature), key="sae_density")
                st.markdown(dictionary.density_words(index, feature, text))
                st.caption(f"The text: {text.source}.")
            if chosen.sae.cfg.d_in == cfg.d_model:
                outputs = dictionary.output_tokens(v, chosen.sae, feature)
                chart(dictionary.output_figure(v, outputs, feature), key="sae_outputs")
                st.markdown(dictionary.output_words(v, outputs, feature))
            if dictionary.steers(v, chosen.sae):
                st.button("Steer with this feature", key="sae_steer", icon=":material/tune:",
                          on_click=app_sae.steer_with,
                          args=(v.key, dictionary.steering_direction(v, chosen, feature), layer),
                          help="Opens the Steering tab, steering by this feature's decoder row after this layer.")
                st.button("Ask the class what it writes, steered", key="sae_ask", icon=":material/quiz:",
                          on_click=app_sae.ask_about_feature, args=(layer, feature), disabled=not chosen.pinned,
                          help="Adds a question to your lesson: steered with this feature at strength "
                               f"{features.DEFAULT_STRENGTH['feature']:g} after this layer, which word does the model "
                               "write next? " + ("Every student's screen reads this pinned dictionary." if chosen.pinned
                                                 else "Only GPT-2 small's pinned dictionary can be asked about: a "
                                                      "dictionary this session trained or uploaded is not on the "
                                                      "students' screens."))

if steering_tab.open:
    with steering_tab:
        knobs, stage = beside_the_chart(v)
        keep_if("features_steer_by", lambda by: by in features.STEER_BY)
        by = knobs.radio("Steer with", features.STEER_BY, key="features_steer_by", horizontal=True,
                         format_func=features.STEER_BY_LABELS.get,
                         help="A neuron's direction (what it writes into the stream), the difference between two "
                              "sentences' streams after the layer, or a dictionary feature's direction (pick one on "
                              "the Dictionary features tab and press “Steer with this feature”).")
        fields = {"steer-by": by}
        if by == "neuron":
            fields["neuron"] = neuron_picker(neuron_place)
        elif by == "difference":
            first, second = features.default_pair(v)
            st.session_state.setdefault("features_sentence_a", first)
            st.session_state.setdefault("features_sentence_b", second)
            fields["sentence-a"] = knobs.text_input("Sentence A", key="features_sentence_a", max_chars=200)
            fields["sentence-b"] = knobs.text_input("minus sentence B", key="features_sentence_b", max_chars=200)
        try:                                       # a link's strength out of range: said, and the default used
            check_strength(st.session_state.get("features_strength", 0.0))
        except ValueError as problem:
            knobs.warning(f"{str(problem)[:1].upper()}{str(problem)[1:]} This page uses "
                          f"{features.DEFAULT_STRENGTH[by]:g} instead.", icon=":material/warning:")
            del st.session_state["features_strength"]
        st.session_state.setdefault("features_strength", features.DEFAULT_STRENGTH[by])
        fields["strength"] = knobs.number_input("Strength", -MAX_STRENGTH, MAX_STRENGTH, key="features_strength",
                                                step=1.0, help="How many times the direction is added to the stream "
                                                               "after the layer, at every position. Negative: "
                                                               "subtracted.")
        if by == "feature":                        # the feature a step or link names, as the card chose it
            fields |= {name: st.session_state[key] for name, key in (("feature", "features_feature"),
                                                                     ("dictionary", "features_dictionary"))
                       if st.session_state.get(key) is not None}
        result = memo.per_view(features.steered, v, layer, tuple(sorted(fields.items())),
                               app_sae.steering_feature(v, layer, fields) if by == "feature" else None)
        if result.problem:
            knobs.info(result.problem, icon=":material/info:")
        else:
            chart(features.continuation_figure(v, result), stage, key="steered", part="steering")
            say(features.steering_sentence(v, result), "steering", stage)
            chart(features.shift_figure(v, result), stage, key="steering_shift", part="steering")

if superposition_tab.open:
    with superposition_tab:
        knobs, stage = beside_the_chart(v)
        knobs.markdown(superposition.INTRO if not v.compact else superposition.INTRO.split("\n\n")[0])
        sparsity = knobs.slider("Sparsity (how often a feature is absent)", 0.0, 0.95, 0.9, 0.05,
                                key="features_sparsity",
                                help="0: every feature is present in every example. 0.9: each is absent 9 times "
                                     "in 10. The toy trains again (in about a second) when you move it.")
        result = memo.per_key(train_toy, ToyConfig(sparsity=round(float(sparsity), 2)))
        chart(superposition.directions_figure(result, v.presenter, v.phone), stage, key="superposition")
        stage.markdown(superposition.kept_sentence(result))
        with stage.expander("How much the features overlap (Wᵀ W)", icon=":material/grid_on:"):
            chart(superposition.overlap_figure(result, v.presenter, v.phone), key="superposition_overlap")

step_nav(SLUG)
