"""The bundled encoder-decoders: sort and translate meet their exact-match targets on held-out pairs."""
import pytest

from model import tasks
from model.checkpoint import BUNDLED_DIR, from_bytes, load_bundled, to_bytes
from model.presets import HELD_OUT_PAIRS, TRAIN_PAIRS
from model.seq2seq import EncoderDecoder, beam_search, exact_match, transduce


@pytest.fixture(scope="module", params=[("sort", 0.99), ("translate", 0.95)], ids=["sort", "translate"])
def bundled(request):
    name, target = request.param
    return name, target, load_bundled(name)


def test_each_meets_its_exact_match_on_held_out_pairs_and_is_small(bundled):
    name, target, bundle = bundled
    assert isinstance(bundle.model, EncoderDecoder) and not bundle.model.training
    train = tasks.pairs(name, TRAIN_PAIRS, seed=0)
    held_out = tasks.held_out(name, HELD_OUT_PAIRS, train, seed=1_000)
    assert exact_match(bundle, held_out) >= target
    assert bundle.facts["exact_match"] >= target
    assert sum(f.stat().st_size for f in BUNDLED_DIR.glob(f"{name}.*")) <= 2_000_000


def test_the_readmes_examples():
    assert transduce(load_bundled("sort"), "3 1 2") == "1 2 3"
    assert transduce(load_bundled("sort"), "9 0 5 5 1 7") == "0 1 5 5 7 9"
    translate = load_bundled("translate")
    assert transduce(translate, "the red cat sleeps") == "le chat rouge dort"
    assert transduce(translate, "the black dogs see a white mouse") == "les chiens noirs voient une souris blanche"


def test_a_wider_beam_agrees_with_greedy_on_a_trained_model_and_scores_at_least_as_well(bundled):
    name, _, bundle = bundled
    source = bundle.tokenizer.encode("4 2 8 1" if name == "sort" else "a green horse follows the girls")
    greedy, wide = beam_search(bundle.model, source, 1), beam_search(bundle.model, source, 4)
    assert wide.tokens == greedy.tokens and wide.score >= greedy.score - 1e-6
    assert len(wide.steps[0]) == 4 and wide.steps[0][0][1] >= wide.steps[0][-1][1]     # best first


def test_an_encoder_decoder_round_trips_through_a_download(bundled):
    _, _, bundle = bundled
    again = from_bytes(to_bytes(bundle))
    assert isinstance(again.model, EncoderDecoder)
    assert transduce(again, "3 1 2") == transduce(bundle, "3 1 2")


def test_the_sort_checkpoint_is_reproduced_by_the_training_command():
    """`python -m model.train --preset sort`: same recipe and seed, the same held-out exact match (within a pair
    or two: float sums differ between CPU families) and the same answers."""
    from model.train import train_seq2seq_preset
    bundled = load_bundled("sort")
    again = train_seq2seq_preset("sort", progress=False)
    assert again.facts["exact_match"] >= 0.99
    assert abs(again.facts["exact_match"] - bundled.facts["exact_match"]) <= 0.006
    for source in ("3 1 2", "7 7 0 2 9", "5 4 3 2 1 0 9 8"):
        assert transduce(again, source) == transduce(bundled, source)
