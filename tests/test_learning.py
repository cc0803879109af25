"""Watch it learn (explorer/steps/learning.py): one model read at several training checkpoints.

Tiny models stand for the checkpoints, all reading tiny tales' words: an untrained model ("step 0"), the bundled
tinytales model ("step 1000") and a model with a hand-made induction head (tests/induction_support.py, "step 2000").
What a student sees: the loss on their sentence at each step, the model's next-word guess and its probability, each
head's induction score over the steps (log axis), and sentences saying when an induction head appears, how the loss
moved and what the model guesses; every number in them is recomputed here.
"""
from functools import cache

import numpy as np
import pytest
import torch

from model.checkpoint import Bundle, load_bundled
from model.induction import induction_scores, repeated_random_tokens
from model.transformer import TransformerLM
from explorer.steps.learning import (INDUCTION_LENGTH, INDUCTION_THRESHOLD, first_step_right, guess_sentence,
                                     induction_figure, induction_sentence, learning, loss_figure, loss_sentence,
                                     plotted_steps, zero_at)
from induction_support import induction_bundle

SENTENCE = "the cat sat on the bed . the cat"      # the induction model copies what followed "the cat": "sat"


@cache
def models() -> dict[str, Bundle]:
    tiny = load_bundled("tinytales")
    torch.manual_seed(0)
    untrained = Bundle(TransformerLM(tiny.model.cfg).eval(), tiny.tokenizer)
    return {"untrained": untrained, "tiny": tiny,
            "induction": induction_bundle(tiny.tokenizer, max_len=tiny.model.cfg.max_len, n_heads=4),
            "induction head 2": induction_bundle(tiny.tokenizer, max_len=tiny.model.cfg.max_len, n_heads=4, head=2)}


def tokens() -> list[int]:
    ids = models()["tiny"].tokenizer.encode(SENTENCE)
    assert 0 not in ids                                                        # every word known
    return ids


def read(**steps: int):
    """learning() over the named models at the given steps, e.g. read(untrained=0, tiny=1000) ("_again": the same
    model at a second step)."""
    return learning([(step, models()[name.replace("_", " ").removesuffix(" again")]) for name, step in steps.items()],
                    tokens())


@cache
def three():
    return read(tiny=1000, induction=2000, untrained=0)                       # given out of order


def scores_of(bundle: Bundle) -> torch.Tensor:
    """(L, H) induction scores, recomputed with the same repeated sequence learning() reads."""
    cfg = bundle.model.cfg
    return induction_scores(bundle.model, repeated_random_tokens(cfg.vocab_size, INDUCTION_LENGTH, seed=0,
                                                                 max_len=cfg.max_len))


def test_checkpoints_are_read_in_step_order():
    learned = three()
    assert learned.steps == (0, 1000, 2000)
    assert learned.induction.shape == (3, 2, 4)
    assert learned.tokens == tuple(tokens()) and learned.copy_length == 16    # half tiny tales' context of 32


def test_the_loss_is_the_mean_next_token_cross_entropy_over_the_sentence():
    ids = torch.tensor(tokens())
    for step, name in ((0, "untrained"), (1000, "tiny"), (2000, "induction")):
        logits = models()[name].model(ids[None])[0].detach()                  # (T, V)
        nats = -logits.log_softmax(dim=-1)[torch.arange(len(ids) - 1), ids[1:]]
        assert three().losses[three().steps.index(step)] == pytest.approx(nats.mean().item(), abs=1e-5)
    vocab = models()["tiny"].tokenizer.vocab_size
    assert three().losses[0] == pytest.approx(np.log(vocab), abs=0.2)         # untrained: about ln V, a guess in V


def test_the_guess_is_the_top_token_after_the_sentence_with_its_probability():
    ids = torch.tensor(tokens())
    vocab = models()["tiny"].tokenizer.vocab
    for s, name in enumerate(("untrained", "tiny", "induction")):
        probs = torch.softmax(models()[name].model(ids[None])[0, -1].detach(), dim=-1)
        assert three().guesses[s] == int(probs.argmax())
        assert three().guess_texts[s] == vocab[int(probs.argmax())]
        assert three().probabilities[s] == pytest.approx(probs.max().item(), abs=1e-6)
    assert three().guess_texts[2] == "sat" and three().probabilities[2] > 0.9  # the induction head copies "sat"


def test_the_induction_scores_are_each_checkpoints_own():
    for s, name in enumerate(("untrained", "tiny", "induction")):
        assert np.allclose(three().induction[s], scores_of(models()[name]).numpy())
    assert three().induction[2, 1, 0] > 0.99 and (three().induction[:2] < 0.1).all()


def test_the_sentence_names_the_step_the_layer_and_the_head_where_induction_appears():
    learned = three()
    after, before = learned.induction[2, 1, 0], learned.induction[1, 1, 0]
    assert induction_sentence(learned) == (
        f"An induction head appears between step 1,000 and step 2,000: at step 2,000 **layer 1, head 0** puts "
        f"**{after:.2f}** of its attention on the token after the previous occurrence of the current one (its "
        f"induction score; {INDUCTION_THRESHOLD} counts as an induction head), where at step 1,000 it put "
        f"{before:.2f}.")
    assert f"{after:.2f}" == "1.00"


def test_the_sentence_changes_with_the_checkpoints():
    earlier = read(untrained=0, induction_head_2=64, tiny=1000)
    assert induction_sentence(earlier).startswith(
        "An induction head appears between step 0 and step 64: at step 64 **layer 1, head 2** puts **1.00**")
    assert f"where at step 0 it put {earlier.induction[0, 1, 2]:.2f}." in induction_sentence(earlier)
    last = scores_of(models()["tiny"])                                          # step 1,000: another head leads
    layer, head = divmod(int(last.argmax()), last.shape[1])
    assert induction_sentence(earlier).endswith(
        f" By step 1,000 the strongest is layer {layer}, head {head}, at {last.max():.2f}.")
    highlighted = [t.name for t in induction_figure(earlier).data if t.line.width == 4]
    assert highlighted == ["layer 1, head 2"]                                   # the head the sentence names

    at_once = read(induction=0, tiny=1000)
    assert induction_sentence(at_once).startswith(
        "Already at step 0, the first checkpoint at hand, **layer 1, head 0** is an induction head: it puts **1.00**")

    never = read(untrained=0, tiny=1000)
    best = scores_of(models()["tiny"])
    layer, head = divmod(int(best.argmax()), best.shape[1])
    assert best.max() < INDUCTION_THRESHOLD
    assert induction_sentence(never) == (
        f"No head reaches an induction score of {INDUCTION_THRESHOLD} by step 1,000, the last checkpoint at hand: "
        f"the highest there is {best.max():.2f} (layer {layer}, head {head}).")


def test_the_loss_sentence_says_where_it_starts_and_ends():
    learned = three()
    first, last = learned.losses[0], learned.losses[-1]
    verb = "falls" if last < first else "rises"
    assert loss_sentence(learned) == (
        f"The loss on your sentence (the mean over its {len(tokens()) - 1} next-token predictions) {verb} from "
        f"**{first:.2f}** nats at step 0 to **{last:.2f}** at step 2,000.")
    trained = read(untrained=0, tiny=1000)
    assert " falls from " in loss_sentence(trained) and f"**{trained.losses[1]:.2f}** at step 1,000" in \
        loss_sentence(trained)
    assert loss_sentence(read(tiny=1000)) == (f"At step 1,000 the loss on your sentence (the mean over its 8 "
                                              f"next-token predictions) is **{three().losses[1]:.2f}** nats.")


def test_the_guess_sentence_names_the_first_and_last_guess_and_since_when():
    learned = three()
    assert guess_sentence(learned).startswith(
        f"After your sentence, the model at step 0 guesses “{learned.guess_texts[0]}” (")
    assert "; at step 2,000 it guesses “sat” (99.4%)." in guess_sentence(learned)
    assert f"{learned.probabilities[2]:.3f}" == "0.994"
    held = read(untrained=0, induction=500, induction_head_2=1000)             # "sat" from step 500 on
    assert guess_sentence(held).endswith("It has guessed “sat” since step 500.")
    assert "since" not in guess_sentence(learned)                              # first guessed at the last step
    broken = read(induction=0, untrained=500, induction_head_2=1000, induction_head_2_again=2000)
    assert broken.guess_texts == ("sat", broken.guess_texts[1], "sat", "sat") and broken.guess_texts[1] != "sat"
    assert guess_sentence(broken).endswith("It has guessed “sat” since step 1,000.")     # not since step 0
    assert first_step_right(broken, "sat") == 0


def test_first_step_right_answers_at_which_step_the_model_first_gets_the_word():
    learned = three()
    sat = models()["tiny"].tokenizer.encode("sat")[0]
    assert first_step_right(learned, "sat") == 2000
    assert first_step_right(learned, sat) == 2000
    assert first_step_right(learned, learned.guesses[1]) == 1000
    assert first_step_right(learned, learned.guess_texts[0]) == 0
    unguessed = next(w for w in ("bear", "box", "bench") if w not in learned.guess_texts)
    assert first_step_right(learned, unguessed) is None
    assert first_step_right(read(untrained=0, induction=500, induction_head_2=1000), "sat") == 500


def test_figures_put_steps_on_a_log_axis_step_0_at_1_and_hover_the_real_step():
    learned = three()
    for fig in (loss_figure(learned), induction_figure(learned), loss_figure(learned, presenter=True, phone=True)):
        assert fig.layout.xaxis.type == "log"
        assert "step 0 is drawn at 1" in fig.layout.xaxis.title.text
        phone = bool((fig.layout.meta or {}).get("phone"))
        assert list(fig.layout.xaxis.tickvals) == ([1, 2000] if phone else [1, 1000, 2000])  # a phone: room only
        assert list(fig.layout.xaxis.ticktext) == (["0", "2,000"] if phone else ["0", "1,000", "2,000"])
        for trace in fig.data:
            assert list(trace.x) == [1, 1000, 2000] and list(trace.customdata) == [0, 1000, 2000]
            assert "step %{customdata:,}" in trace.hovertemplate
    assert list(loss_figure(learned).data[0].y) == pytest.approx(learned.losses)
    assert "step 0" not in loss_figure(read(tiny=1000, induction=2000)).layout.xaxis.title.text


def test_the_induction_figure_has_one_line_per_head_the_strongest_labelled():
    learned = three()
    fig = induction_figure(learned)
    assert len(fig.data) == 2 * 4
    assert {t.name for t in fig.data} == {f"layer {l}, head {h}" for l in range(2) for h in range(4)}
    for t in fig.data:
        layer, head = (int(part.split()[-1]) for part in t.name.split(","))
        assert list(t.y) == pytest.approx(learned.induction[:, layer, head].tolist())
    strongest = [t for t in fig.data if t.line.width == 4]
    assert [t.name for t in strongest] == ["layer 1, head 0"] and strongest[0].text[-1] == "layer 1, head 0"
    assert [s.y0 for s in fig.layout.shapes] == [INDUCTION_THRESHOLD]


def test_step_0_moves_left_when_a_checkpoint_sits_at_step_1():
    assert zero_at([0, 64, 512]) == 1 and plotted_steps([0, 64]) == [1.0, 64.0]
    assert zero_at([0, 1, 2]) == 0.5 and plotted_steps([0, 1, 2]) == [0.5, 1.0, 2.0]


def test_checkpoints_that_cannot_be_compared_are_refused():
    tiny = models()["tiny"]
    with pytest.raises(ValueError, match="no checkpoints"):
        learning([], tokens())
    with pytest.raises(ValueError, match="its own training step"):
        learning([(5, tiny), (5, tiny)], tokens())
    with pytest.raises(ValueError, match="at least two tokens"):
        learning([(5, tiny)], tokens()[:1])
    with pytest.raises(ValueError, match="layers and heads"):
        learning([(0, tiny), (1, induction_bundle(tiny.tokenizer, n_heads=2))], tokens())


@pytest.mark.parametrize("phone", [False, True])
def test_the_guess_chart_has_a_bar_per_step_labelled_with_its_guess_and_the_reveal_points_at_the_answer(phone):
    from explorer import questions
    from explorer.pointer import NAME, point_at
    from explorer.steps.learning import guess_figure, step_label
    learned = three()
    fig = guess_figure(learned, phone=phone)
    bar = fig.data[0]
    steps, chances = (bar.y, bar.x) if phone else (bar.x, bar.y)
    assert list(steps) == [step_label(s) for s in learned.steps] == ["step 0", "step 1,000", "step 2,000"]
    assert list(chances) == list(learned.probabilities) and list(bar.text) == list(learned.guess_texts)
    assert bar.orientation == ("h" if phone else "v")
    tiny = models()["tiny"]
    view = questions.reading("tinytales", tiny, SENTENCE, 64)
    where = questions.Place(0, 0, len(view.ids) - 1, learned=learned)
    asked = questions.ask(questions.Question("first-right"), view, where)
    first = first_step_right(learned, learned.guesses[-1])
    assert asked.answer == step_label(first) and asked.options == tuple(step_label(s) for s in learned.steps)
    pointed = [a for a in point_at(fig, asked.target).layout.annotations if a.name == NAME]
    assert len(pointed) == 1 and (pointed[0].y if phone else pointed[0].x) == step_label(first)


def test_a_phones_step_axis_labels_only_the_ticks_with_room_the_first_and_last_always():
    from explorer.steps.learning import PHONE_TICK_GAP, labelled_ticks
    shown = (0, 64, 512, 1000, 2000, 8000, 33_000, 143_000)
    assert labelled_ticks(shown) == list(shown)                                   # a desktop: every one
    kept = labelled_ticks(shown, phone=True)
    assert kept[0] == 0 and kept[-1] == 143_000 and 1000 not in kept              # 512 and 1,000 would overlap
    at = np.log10(plotted_steps(kept))
    assert (np.diff(at) >= PHONE_TICK_GAP).all()
    fig = loss_figure(three(), phone=True)
    assert list(fig.layout.xaxis.ticktext) == [f"{s:,}" for s in labelled_ticks(three().steps, phone=True)]
