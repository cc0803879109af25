"""Questions for a class, answered by the model: every kind on tinytales, roses, a model trained in the lab, an
encoder-decoder where it fits and GPT-2's shape, each answer recomputed here from the model's own forward pass
(never through explorer/steps/ or explorer/questions.py), each option list checked to hold the answer in an order
that is not the model's ranking, and each computed sentence checked to say the recomputed numbers."""
from functools import lru_cache

import numpy as np
import pytest
import torch

from explorer import questions
from explorer.numbers import percent
from explorer.questions import OPTIONS, Question
from explorer.view import escape
from model.checkpoint import load_bundled
from model.edits import knock_out_head
from model.seq2seq import greedy
from questions_support import (cosines, expected_answer, knockout_changes, lens_first, lens_stages, lens_tops, option,
                               pushes)

SENTENCES = {"tinytales": "the cats sat on the mats because", "roses": "roses are red violets are blue",
             "lab": "roses are red violets are blue", "translate": "the small red cat sees the big dog",
             "sort": "7 3 9 1 5 2"}
DECODER_ONLY = ("tinytales", "roses", "lab")


@lru_cache
def lab_trained():
    """A model trained in the lab for a moment (the walkthrough preset: roses, 2 layers, 2 heads), frozen as the
    lab publishes it."""
    from explorer.lab.training import WALKTHROUGH, new_run
    run = new_run(WALKTHROUGH, "run 1")
    run.trainer.step(60)
    return run.bundle()


def bundle_of(name: str):
    return lab_trained() if name == "lab" else load_bundled(name)


def asked_on(name: str, question: Question, **place):
    """(the question asked on model `name`'s sentence at `place`, the ids, the place, the bundle)."""
    bundle = bundle_of(name)
    reading = questions.reading(name, bundle, SENTENCES[name], 64)
    cfg = bundle.model.cfg
    where = questions.place(place, cfg.n_layers, cfg.n_heads, len(reading.ids))
    return questions.ask(question, reading, where), list(reading.ids), where, bundle


def check_options(asked, order_key=None):
    """The answer is one of at most OPTIONS options, each once; with `order_key`, they come in that fixed order."""
    assert asked.answer in asked.options and len(set(asked.options)) == len(asked.options) <= OPTIONS
    if order_key is not None:
        assert list(asked.options) == sorted(asked.options, key=order_key)


# --- next word ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DECODER_ONLY)
def test_next_word_is_the_models_top_guess_among_its_four_likeliest_in_alphabetical_order(name):
    asked, ids, where, bundle = asked_on(name, Question("next-word"))
    probs = torch.softmax(bundle.model.run(ids)["logits"][0, -1].double(), -1)
    top = probs.topk(OPTIONS)
    vocab = bundle.tokenizer.vocab
    assert asked.answer == option(vocab[int(probs.argmax())])
    assert list(asked.options) == sorted(option(vocab[int(i)]) for i in top.indices)      # the order gives nothing away
    assert asked.values[asked.answer] == pytest.approx(float(top.values[0]), rel=1e-9)
    assert f"the model's top guess is “{escape(asked.answer)}” at {percent(float(top.values[0]))}" in asked.said
    assert asked.prompt == f"Which word will the model write after “{option(vocab[ids[-1]])}”?"


# --- tokenization ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, text", [("tinytales", None), ("tinytales", "the dog ran. the cat sat."),
                                        ("roses", None), ("lab", "violets"), ("translate", None)])
def test_token_count_is_how_many_tokens_the_models_tokenizer_makes_among_four_counts_in_a_row(name, text):
    asked, ids, where, bundle = asked_on(name, Question("token-count", text=text))
    n = len(bundle.tokenizer.encode(text or SENTENCES[name]))
    assert asked.answer == str(n)
    counts = [int(o) for o in asked.options]
    assert counts == list(range(counts[0], counts[0] + OPTIONS)) and counts[0] >= 1
    assert f"into **{n}** token" in asked.said


def test_token_count_options_put_the_answer_in_different_places_for_different_texts():
    places = set()
    for text in ["the cat", "the cat sat", "the dog ran on", "a girl named lily was happy", "the sun is hot today",
                 "the bird sat on the tree", "there was a big dog", "the mouse was hungry"]:
        asked = asked_on("tinytales", Question("token-count", text=text))[0]
        places.add(asked.options.index(asked.answer))
        assert asked_on("tinytales", Question("token-count", text=text))[0].options == asked.options   # fixed
    assert len(places) >= 3


# --- embedding ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, word", [("tinytales", "cat"), ("tinytales", None), ("roses", "red"), ("lab", "blue")])
def test_nearest_word_is_the_vocabularys_nearest_row_by_cosine_and_the_nearest_of_the_options(name, word):
    asked, ids, where, bundle = asked_on(name, Question("nearest-word", word=word))
    vocab = bundle.tokenizer.vocab
    given = vocab.index(word) if word else ids[where.token]
    sims = cosines(bundle.model.embed.tok.weight, given)
    sims[given] = -np.inf
    sims[[i for i, t in enumerate(vocab) if t.startswith("<") and t.endswith(">")]] = -np.inf   # <unk> and the like
    nearest = option(vocab[int(sims.argmax())])
    assert asked.answer == nearest
    check_options(asked, order_key=str)
    index = {option(t): i for i, t in enumerate(vocab)}
    for o in asked.options:                        # the answer is the nearest of the options too
        assert sims[index[o]] <= sims.max() + 1e-12
        assert asked.values[o] == pytest.approx(float(sims[index[o]]), abs=1e-9)
    assert f"is “{nearest}”'s: cosine similarity **{sims.max():.3f}**" in asked.said


def test_a_word_the_model_does_not_know_cannot_be_asked_about():
    with pytest.raises(questions.Unanswerable, match="not in this model's vocabulary"):
        asked_on("tinytales", Question("nearest-word", word="zebra"))


# --- attention ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, place", [("tinytales", dict(layer=1, head=2, token=6)), ("tinytales", dict(layer=0)),
                                         ("roses", dict(layer=1, head=1, token=4)), ("lab", dict(head=1))])
def test_looks_at_is_the_earlier_word_the_head_weighs_most_and_the_options_follow_the_sentence(name, place):
    asked, ids, where, bundle = asked_on(name, Question("looks-at"), **place)
    row = bundle.model.run(ids)[f"blocks.{where.layer}.attn.pattern"][0, where.head, where.token, : where.token + 1]
    words = [option(bundle.tokenizer.vocab[i]) for i in ids]

    def named(p: int) -> str:
        return words[p] + (f" (position {p})" if words.count(words[p]) > 1 else "")
    top = int(row.argmax())
    assert asked.answer == named(top)
    positions = [int(p) for p in row.topk(min(OPTIONS, len(row))).indices]
    assert list(asked.options) == [named(p) for p in sorted(positions)]              # the sentence's order
    assert asked.values[asked.answer] == pytest.approx(float(row[top]), abs=1e-6)
    said = asked.said.replace("\\", "")                              # as Markdown shows it
    assert f"attends most to “{bundle.tokenizer.vocab[ids[top]]}” ({top}) ({float(row[top]):.2f})" in said


def test_the_first_token_has_nothing_earlier_to_look_at():
    with pytest.raises(questions.Unanswerable, match="first token"):
        asked_on("tinytales", Question("looks-at"), token=0)


# --- residual stream ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, token", [("tinytales", None), ("tinytales", 2), ("tinytales", 6), ("roses", None),
                                         ("roses", 4), ("lab", 3)])
def test_lens_layer_is_the_first_stage_from_which_the_final_guess_stays_on_top_among_the_charts_stages(name, token):
    asked, ids, where, bundle = asked_on(name, Question("lens-layer"), **({} if token is None else {"token": token}))
    stages = [label for _, label in lens_stages(bundle.model.cfg.n_layers)]      # 2 layers: after attention too
    assert len(stages) == 5
    tops = lens_tops(bundle, ids, where.token)
    first = lens_first(tops)
    assert asked.answer == stages[first] and list(asked.options) == stages               # every stage, in order
    word = bundle.tokenizer.vocab[tops[-1]]
    assert f"final guess is “{escape(word)}”" in asked.said and f"**{stages[first]}**" in asked.said
    with torch.no_grad():                                         # each option's number: the top guess read there
        for stage, (name_, _) in zip(stages, lens_stages(bundle.model.cfg.n_layers)):
            stream = bundle.model.run(ids)[name_][0, where.token]
            probs = torch.softmax(bundle.model.unembed(bundle.model.final_norm(stream)).double(), -1)
            assert asked.values[stage] == pytest.approx(float(probs.max()), abs=1e-5)


def test_the_lectures_lens_question_has_they_first_on_top_after_layer_1s_attention_as_its_chart_shows():
    """A class saw "they" on top from layer 1's attention on; that stage was not an option, now it is the answer."""
    asked = asked_on("tinytales", Question("lens-layer"), token=6)[0]
    assert asked.answer == "layer 1: after attention"
    assert asked.options == ("token + position", "layer 0: after attention", "layer 0: after feed-forward",
                             "layer 1: after attention", "layer 1: after feed-forward")
    assert asked.shown["layer 1: after attention"].startswith("“they”")
    assert not asked.shown["layer 0: after feed-forward"].startswith("“they”")


def test_lens_layer_offers_exactly_the_stages_the_residual_pages_lens_chart_draws_by_default():
    from conftest import figure_titled, open_page, show_section
    at = show_section(open_page("residual", text=SENTENCES["tinytales"], token=6), "residual", "Logit lens")
    assert not at.exception
    drawn = list(figure_titled(at, "Logit lens")["layout"]["xaxis"]["ticktext"])               # the stages, across
    assert tuple(drawn) == asked_on("tinytales", Question("lens-layer"), token=6)[0].options


# --- what if -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, place", [("tinytales", dict(layer=1, head=2, token=6)), ("tinytales", dict(layer=0)),
                                         ("roses", dict(layer=1)), ("lab", dict(layer=0, token=4))])
def test_knockout_is_the_head_of_the_layer_whose_knockout_moves_the_forecast_most(name, place):
    asked, ids, where, bundle = asked_on(name, Question("knockout"), **place)
    changes = knockout_changes(bundle, ids, where.layer, where.token)
    assert set(asked.options) == set(changes)                       # tinytales 4 heads a layer, roses 2: every one
    assert list(asked.options) == sorted(asked.options, key=lambda h: int(h.rsplit(" ", 1)[1]))      # the model's order
    assert asked.answer == max(changes, key=changes.get)
    for head, change in changes.items():
        assert asked.values[head] == pytest.approx(change, abs=1e-5)
    head = int(asked.answer.rsplit(" ", 1)[1])
    assert f"With head {head} of layer {where.layer} knocked out" in asked.said
    largest = changes[asked.answer]
    assert (f"is **{largest:.2f}**" in asked.said) if largest >= 0.05 else ("That changes little" in asked.said)


def test_the_knockout_on_tinytales_finds_the_head_that_turns_they_into_it():
    asked = asked_on("tinytales", Question("knockout"), layer=1, head=2, token=6)[0]
    assert asked.answer == "layer 1, head 2"                         # as the discoveries' knockout card finds
    assert "it becomes “it”" in asked.said


# --- why this prediction -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, token", [("tinytales", None), ("tinytales", 3), ("roses", None), ("lab", 2)])
def test_biggest_push_is_the_head_or_mlp_that_adds_most_to_the_top_guess(name, token):
    asked, ids, where, bundle = asked_on(name, Question("biggest-push"), **({} if token is None else {"token": token}))
    found = pushes(bundle, ids, where.token)
    assert asked.answer == max(found, key=found.get)
    ranked = sorted(found, key=found.get, reverse=True)[:OPTIONS]
    assert set(asked.options) == set(ranked)
    assert list(asked.options) == [part for part in found if part in ranked]             # the model's order
    for part in asked.options:
        assert asked.values[part] == pytest.approx(found[part], abs=1e-4)
    assert f"**{asked.answer}** ({found[asked.answer]:+.2f})".replace("-", "−") in asked.said


def test_a_post_norm_model_says_why_it_cannot_be_split():
    from claims_support import lab_bundle
    bundle = lab_bundle(norm_position="post")
    reading = questions.reading("post", bundle, "roses are red", 64)
    with pytest.raises(questions.Unanswerable, match="post-norm"):
        questions.ask(Question("biggest-push"), reading, questions.place({}, 2, 2, len(reading.ids)))


# --- the encoder-decoder -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, word, place", [("translate", None, dict(layer=1, head=0)),
                                               ("translate", "chat", dict(layer=0, head=3)),
                                               ("sort", None, dict(layer=1, head=1))])
def test_reads_source_is_the_source_word_a_cross_attention_head_reads_most_while_writing_a_word(name, word, place):
    asked, ids, where, bundle = asked_on(name, Question("reads-source", word=word), **place)
    model, vocab = bundle.model, bundle.tokenizer.vocab
    written = greedy(model, ids)
    trace = model.run(ids, [model.bos_id, *written])
    out = [vocab[i] for i in written] + ["<eos>"]
    row = out.index(word) if word else 0 if name == "sort" else out.index("petit")
    weights = trace[f"decoder.blocks.{where.layer}.cross_attn.pattern"][0, where.head, row].double()
    source = [vocab[i] for i in ids]
    top = int(weights.argmax())
    names = [s + (f" (position {p})" if source.count(s) > 1 else "") for p, s in enumerate(source)]
    assert asked.answer == names[top]
    kept = sorted(int(p) for p in weights.topk(OPTIONS).indices)
    assert list(asked.options) == [names[p] for p in kept]                               # the source's order
    assert f"while writing “{escape(out[row])}”" in asked.said and f"**{float(weights[top]):.2f}**" in asked.said


def test_a_decoder_only_question_on_an_encoder_decoder_and_the_other_way_round_say_so():
    with pytest.raises(questions.Unanswerable, match="encoder-decoder"):
        asked_on("translate", Question("next-word"))
    with pytest.raises(questions.Unanswerable, match="no source"):
        asked_on("tinytales", Question("reads-source"))


# --- the teacher's own, and a poll ---------------------------------------------------------------------------------


def test_a_choice_is_the_teachers_and_a_poll_has_no_right_answer():
    choice = questions.ask(Question("choice", "Who wrote it?", ("Vaswani", "Turing"), "Vaswani"), None, None)
    assert choice.options == ("Vaswani", "Turing") and choice.right("Vaswani") and not choice.right("Turing")
    poll = questions.ask(Question("poll"), None, None)
    assert poll.options == ("1", "2", "3", "4", "5") and poll.answer is None and poll.right("3") is None


MODEL_KINDS = ("next-word", "token-count", "nearest-word", "looks-at", "lens-layer", "knockout", "biggest-push")


@pytest.mark.parametrize("name", DECODER_ONLY)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("place", [{}, dict(layer=1, head=1, token=3)])
def test_every_kind_answers_what_the_models_own_forward_pass_says(name, kind, place):
    asked, ids, where, bundle = asked_on(name, Question(kind), **place)
    assert asked.answer == expected_answer(bundle, ids, {**place, "text": SENTENCES[name]}, Question(kind))
    assert asked.answer in asked.options and asked.said


def test_every_kind_names_the_pages_it_fits_and_each_fitting_model_kind_answers_on_tinytales():
    from explorer.registry import BY_SLUG
    for name, kind in questions.KINDS.items():
        assert kind.pages and set(kind.pages) <= set(BY_SLUG), name
    assert questions.fitting("attention") == ["next-word", "looks-at", "knockout", "choice", "poll"]
    assert questions.fitting("training") == ["choice", "poll"]


# --- GPT-2's shape (slow: tests/conftest.py) -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    from gpt2_support import gpt2_shaped_dir
    from model.pretrained import load_pretrained
    return load_pretrained(gpt2_shaped_dir(tmp_path_factory.mktemp("gpt2q"), d_model=48))


GPT2_TEXT = "Paris is the capital of France, and my name is Sara. I love pizza and cats"


def test_gpt2s_long_word_and_its_questions_are_answered_as_its_own_forward_pass_says(gpt2):
    reading = questions.reading("gpt2", gpt2, GPT2_TEXT, 64)
    where = questions.place({"layer": 5, "head": 3}, 12, 12, len(reading.ids))
    count = questions.ask(Question("token-count", text="unbelievably"), reading, where)
    assert count.answer == str(len(gpt2.tokenizer.encode("unbelievably")))
    trace = gpt2.model.run(list(reading.ids))
    looks = questions.ask(Question("looks-at"), reading, where)
    row = trace["blocks.5.attn.pattern"][0, 3, where.token, : where.token + 1]
    assert looks.values[looks.answer] == pytest.approx(float(row.max()), abs=1e-6)
    knocked = questions.ask(Question("knockout"), reading, where)
    assert len(knocked.options) == OPTIONS                          # 4 of layer 5's 12 heads: those writing most
    before = torch.softmax(trace["logits"][0, -1].double(), -1)
    for head in knocked.options:
        h = int(head.rsplit(" ", 1)[1])
        after = torch.softmax(gpt2.model.run(list(reading.ids), edits=knock_out_head(5, h))["logits"][0, -1].double(), -1)
        assert knocked.values[head] == pytest.approx(float((after - before).abs().max()), abs=1e-5)
    assert knocked.answer == max(knocked.values, key=knocked.values.get)
    lens = questions.ask(Question("lens-layer"), reading, where)
    assert len(lens.options) == questions.LENS_OPTIONS and lens.answer in lens.options      # 13 stages: five offered
    stages = [label for _, label in lens_stages(12)]                 # 12 layers: the chart reads no after-attention
    assert len(stages) == 13 and lens.answer == stages[lens_first(lens_tops(gpt2, list(reading.ids), where.token))]
    start = stages.index(lens.options[0])
    assert list(lens.options) == stages[start:start + questions.LENS_OPTIONS]                 # five in a row
    push = questions.ask(Question("biggest-push"), reading, where)
    assert push.answer == max(push.values, key=push.values.get)
    near = questions.ask(Question("nearest-word", word="Paris"), reading, where)
    assert near.answer in near.options
