"""The bundled encoder-decoders meet their presets' targets, measured here on freshly made data they never trained
on: translate greedily and with a beam of 4, sort at every list length it learned (1 to 10 digits)."""
import pytest

from model import tasks
from model.checkpoint import BUNDLED_DIR, from_bytes, load_bundled, to_bytes
from model.presets import HELD_OUT_PAIRS, SEQ2SEQ_PRESETS, TRAIN_PAIRS
from model.seq2seq import EncoderDecoder, beam_search, exact_match, transduce


def training_pairs(name: str) -> list[tuple[str, str]]:
    """The pairs `python -m model.train --preset NAME` trains on (seed 0)."""
    preset = SEQ2SEQ_PRESETS[name]
    return tasks.pairs(preset.task, TRAIN_PAIRS, seed=0, lengths=preset.lengths or tasks.DEFAULT_LENGTHS)


@pytest.fixture(scope="module", params=["sort", "translate"])
def bundled(request):
    return request.param, load_bundled(request.param)


def test_each_meets_its_exact_match_on_held_out_pairs_and_is_small(bundled):
    name, bundle = bundled
    preset = SEQ2SEQ_PRESETS[name]
    assert isinstance(bundle.model, EncoderDecoder) and not bundle.model.training
    train = training_pairs(name)
    held_out = tasks.held_out(name, HELD_OUT_PAIRS, train, seed=7_000, lengths=preset.lengths or tasks.DEFAULT_LENGTHS)
    assert len(held_out) == HELD_OUT_PAIRS and not {s for s, _ in held_out} & {s for s, _ in train}
    target = preset.targets["exact_match"]                 # what the recipe holds to on any CPU (sort: 0.93)
    assert target >= 0.9
    shipped = exact_match(bundle, held_out)                 # the checkpoint we ship: its own figure, 0.97 or more
    assert shipped >= max(target, 0.97)
    assert bundle.facts["exact_match"] >= max(target, 0.97)
    assert sum(f.stat().st_size for f in BUNDLED_DIR.glob(f"{name}.*")) <= 2_000_000


def test_translate_is_right_with_a_beam_of_four_too():
    bundle = load_bundled("translate")
    target = SEQ2SEQ_PRESETS["translate"].targets["exact_match_beam4"]
    held_out = tasks.held_out("translate", 200, training_pairs("translate"), seed=8_000)
    assert target >= 0.97
    assert exact_match(bundle, held_out, beam_size=4) >= target
    assert bundle.facts["exact_match_beam4"] >= target


def test_translate_handles_every_kind_of_noun_phrase_it_never_saw():
    """Adjectives before the noun, colours after it, and both: each on sentences not in the training set."""
    bundle = load_bundled("translate")
    held_out = tasks.held_out("translate", HELD_OUT_PAIRS, training_pairs("translate"), seed=9_000)
    before = {a.english for a in tasks.BEFORE_NOUN}
    colours = {a.english for a in tasks.COLOURS}
    kinds = [(bool(before & set(p[0].split())), bool(colours & set(p[0].split()))) for p in held_out]
    shapes = {"before the noun": [p for p, k in zip(held_out, kinds) if k == (True, False)],
              "after the noun": [p for p, k in zip(held_out, kinds) if k == (False, True)],
              "both in one sentence": [p for p, k in zip(held_out, kinds) if k == (True, True)],
              "both in one noun phrase": [p for p in held_out if any(f" {b} {c} " in f" {p[0]} " for b in before
                                                                     for c in colours)]}
    for shape, pairs in shapes.items():
        assert len(pairs) >= 50, shape
        assert exact_match(bundle, pairs) >= 0.97, shape


def test_sort_is_right_at_every_length_it_learned():
    bundle = load_bundled("sort")
    lo, hi = SEQ2SEQ_PRESETS["sort"].lengths
    assert (lo, hi) == (1, 10) and bundle.facts["lengths"] == [1, 10]
    target = SEQ2SEQ_PRESETS["sort"].targets["exact_match_by_length"]
    train = training_pairs("sort")
    seen = {s for s, _ in train}
    for length in range(lo, hi + 1):
        data = tasks.length_test("sort", length, train, seed=5_000)           # other lists than train.py measured
        unseen = [p for p in data if p[0] not in seen]
        measured = exact_match(bundle, data)
        assert measured >= target, (length, measured)
        if length >= 3:                                                       # every list of 1 or 2 digits was seen
            assert len(unseen) >= 100 and exact_match(bundle, unseen) >= target, length
        assert bundle.facts["exact_match_by_length"][str(length)] >= target


def test_the_facts_say_what_each_model_learned_from():
    sort, translate = load_bundled("sort").facts, load_bundled("translate").facts
    assert sort["task"] == "sort" and sort["lengths"] == [1, 10]
    assert sort["training_data"] == "20,000 random lists of 1 to 10 digits and their sorted versions"
    assert translate["task"] == "translate" and "lengths" not in translate
    assert translate["training_data"] == \
        "20,000 sentences of a small English grammar (12 nouns, 12 adjectives, 8 verbs) with their French"


def test_the_readmes_examples():
    assert transduce(load_bundled("sort"), "3 1 2") == "1 2 3"
    assert transduce(load_bundled("sort"), "9 0 5 5 1 7") == "0 1 5 5 7 9"
    assert transduce(load_bundled("sort"), "7") == "7"
    assert transduce(load_bundled("sort"), "9 8 7 6 5 4 3 2 1 0") == "0 1 2 3 4 5 6 7 8 9"
    translate = load_bundled("translate")
    for english in ("the red cat sleeps", "the black dogs see a white mouse", "the small red cat sees the big dog",
                    "an old cow eats"):
        assert transduce(translate, english) == tasks.translate(english)


def test_a_wider_beam_agrees_with_greedy_on_a_trained_model_and_scores_at_least_as_well(bundled):
    name, bundle = bundled
    source = bundle.tokenizer.encode("4 2 8 1" if name == "sort" else "a green horse follows the girls")
    greedy, wide = beam_search(bundle.model, source, 1), beam_search(bundle.model, source, 4)
    assert wide.tokens == greedy.tokens and wide.score >= greedy.score - 1e-6
    assert len(wide.steps[0]) == 4 and wide.steps[0][0][1] >= wide.steps[0][-1][1]     # best first


def test_an_encoder_decoder_round_trips_through_a_download(bundled):
    _, bundle = bundled
    again = from_bytes(to_bytes(bundle))
    assert isinstance(again.model, EncoderDecoder)
    assert transduce(again, "3 1 2") == transduce(bundle, "3 1 2")


def test_the_sort_checkpoint_is_reproduced_by_the_training_command():
    """`python -m model.train --preset sort`: the same recipe and seed meet every target the recipe states (held-out
    exact match, and at every trained length) and sort the examples right. What holds on any CPU: float sums differ
    between CPU families and a training run amplifies them (one Intel machine reached 0.976 where the checkpoint,
    trained on AMD, has 0.998), so the test asks for the recipe's targets, not the checkpoint's own figures. Of the
    examples, every answer is a sorted list of the source's length and at most one is wrong (CI's machine once wrote
    four zeros for five in '6 0 6 0 6 0 6 0 6 0')."""
    from model.train import missed_seq2seq_targets, train_seq2seq_preset
    again = train_seq2seq_preset("sort", progress=False)
    assert missed_seq2seq_targets(again.facts, SEQ2SEQ_PRESETS["sort"].targets) == []
    examples = ("3 1 2", "7 7 0 2 9", "5 4 3 2 1 0 9 8", "4", "6 0 6 0 6 0 6 0 6 0")
    answers = {source: transduce(again, source).split() for source in examples}
    for source, answer in answers.items():
        assert len(answer) == len(source.split()) and answer == sorted(answer), (source, answer)
    wrong = [source for source, answer in answers.items() if " ".join(answer) != tasks.answer("sort", source)]
    assert len(wrong) <= 1, wrong


def test_the_training_command_fails_when_a_target_is_missed_at_any_length():
    from model.train import missed_seq2seq_targets
    for name in ("sort", "translate"):
        assert missed_seq2seq_targets(load_bundled(name).facts, SEQ2SEQ_PRESETS[name].targets) == []
    facts = load_bundled("sort").facts
    worse = {**facts, "exact_match_by_length": {**facts["exact_match_by_length"], "10": 0.85}}
    assert missed_seq2seq_targets(worse, SEQ2SEQ_PRESETS["sort"].targets) == \
        ["exact_match_by_length at 10: 85.0% < 90%"]
    facts = load_bundled("translate").facts
    assert missed_seq2seq_targets({**facts, "exact_match_beam4": 0.95}, SEQ2SEQ_PRESETS["translate"].targets) == \
        ["exact_match_beam4: 95.0% < 97%"]
