"""A model built from a seed with a random generator of its own, never torch's global one.

Two threads building at once (two sessions starting lab runs, a Discoveries card's run in the background) would
otherwise draw from the one global generator in turns, and the same seed would give different weights; any thread
seeding or drawing from it meanwhile would change them too. The numbers are the same as `torch.manual_seed(seed)`
followed by the build in a quiet process: a fresh `torch.Generator` seeded alike gives the same stream.
"""
import torch
from torch.overrides import TorchFunctionMode

# Random functions that draw from the global generator when not given a `generator`. nn.init's functions pass
# `generator=None` on to these; they are handled themselves, as a mode does not see the calls inside a call it sees.
_RANDOM = {torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.random_, torch.Tensor.bernoulli_,
           torch.Tensor.exponential_, torch.Tensor.geometric_, torch.Tensor.log_normal_, torch.Tensor.cauchy_,
           torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal, torch.bernoulli, torch.multinomial}


class _OwnGenerator(TorchFunctionMode):
    """Gives every random function called in this thread, inside the `with`, the generator `rng`.
    Torch function modes are per thread, so other threads keep the global generator."""

    def __init__(self, rng: torch.Generator):
        super().__init__()
        self.rng = rng

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs.get("generator") is None and ("generator" in kwargs or func in _RANDOM):
            kwargs = {**kwargs, "generator": self.rng}
        return func(*args, **kwargs)


def seeded(seed: int, build, *args, **kwargs):
    """`build(*args, **kwargs)` with every random number it draws from a generator seeded `seed`."""
    with _OwnGenerator(torch.Generator().manual_seed(seed)):
        return build(*args, **kwargs)
