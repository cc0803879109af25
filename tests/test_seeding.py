"""A model built from a seed never touches torch's global random generator, so runs built at once, or while
anything else in the process draws random numbers, get the same weights as in a quiet process."""
import threading

import torch

from model.config import ModelConfig
from model.seeding import seeded
from model.seq2seq import EncoderDecoder
from model.transformer import TransformerLM

CFG = ModelConfig(vocab_size=12, d_model=32, n_heads=2, n_layers=2, d_ff=64, max_len=16)


def quiet(build, seed):
    """The weights `torch.manual_seed(seed)` then `build(CFG)` give (how model/train.py builds)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(CFG).state_dict()


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_seeded_build_gives_the_weights_of_a_quiet_process_whatever_the_global_generator_does():
    for build in (TransformerLM, EncoderDecoder):
        def meddling(cfg):        # another thread reseeding and drawing from the global generator mid-build
            torch.manual_seed(99)
            torch.rand(1000, generator=torch.default_generator)
            return build(cfg)
        expected = quiet(build, 3)
        state = torch.get_rng_state()
        assert same(seeded(3, meddling, CFG).state_dict(), expected)
        torch.set_rng_state(state)
        assert same(seeded(3, build, CFG).state_dict(), expected)
        assert torch.equal(torch.get_rng_state(), state)          # nobody else's random numbers moved
        assert not same(seeded(4, build, CFG).state_dict(), expected)


def test_builds_in_many_threads_at_once_each_get_their_seeds_weights():
    expected = {seed: quiet(TransformerLM, seed) for seed in range(4)}
    results, start = {}, threading.Barrier(5)

    def build(seed):
        start.wait()
        results[seed] = [seeded(seed, TransformerLM, CFG).state_dict() for _ in range(5)]

    threads = [threading.Thread(target=build, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    start.wait()
    while any(t.is_alive() for t in threads):       # this thread keeps drawing from the global generator meanwhile
        torch.randn(256)
    assert all(same(state, expected[seed]) for seed, states in results.items() for state in states)
    assert sorted(results) == [0, 1, 2, 3]
