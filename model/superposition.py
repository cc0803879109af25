"""The toy model of superposition (Anthropic, "Toy Models of Superposition", 2022): five features, two dimensions.

The whole model is two lines: squeeze the features into a few hidden dimensions, then read them back out.

    h  = W x                   # (d_hidden,)    x: (n_features,), W: (d_hidden, n_features)
    x' = ReLU(Wᵀ h + b)        # (n_features,)

Each feature is 0 with probability S (the sparsity) and uniform in [0, 1] otherwise; feature i matters
decay ** i as much as feature 0 in the loss, an importance-weighted squared error. Column i of W is feature i's
direction in the hidden space: with dense features the model keeps the two most important ones at right angles
and drops the rest; with sparse features it packs all five in, a pentagon, and lets the ReLU and the bias clean up
the interference. The setup follows the paper's notebook (Xavier-normal W, zero b, AdamW with its default weight decay
at a constant learning rate, batches of 1,024, several models trained side by side as one batch), with a tenth of its
10,000 steps at 20 times its rate, so that a slider move trains while the student watches; of the models trained
side by side from different starts, the one with the lowest loss is kept.
"""
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class ToyConfig:
    n_features: int = 5            # features in each example
    d_hidden: int = 2              # dimensions they have to share
    sparsity: float = 0.9          # the chance that a feature is 0 in an example (S)
    importance_decay: float = 0.9  # feature i's weight in the loss: importance_decay ** i
    steps: int = 1_000             # optimiser steps
    lr: float = 2e-2               # AdamW's learning rate, constant
    batch: int = 1_024             # examples per step
    n_instances: int = 4           # models trained together from different starting weights; the best is kept
    seed: int = 0

    def __post_init__(self):
        if not 0 <= self.sparsity < 1:
            raise ValueError(f"sparsity must be at least 0 and below 1 (at 1 every feature is always 0), "
                             f"not {self.sparsity}")


@dataclass(frozen=True, eq=False)          # arrays: compared by identity, not element by element
class ToyResult:
    """A trained toy: W (d_hidden, n_features), b (n_features,), the importance of each feature and the final loss."""
    config: ToyConfig
    W: np.ndarray                  # (d_hidden, n_features): column i is feature i's direction
    b: np.ndarray                  # (n_features,)
    importance: np.ndarray         # (n_features,)
    loss: float                    # the importance-weighted squared error on a held-out batch


EVAL_BATCH = 8_192                 # examples the final loss (and the choice of the best instance) is measured on


def importance(cfg: ToyConfig) -> torch.Tensor:
    """How much each feature counts in the loss: decay ** i, feature 0 the most important."""
    return cfg.importance_decay ** torch.arange(cfg.n_features, dtype=torch.float32)   # (F,)


def sparse_features(cfg: ToyConfig, n: int, generator: torch.Generator) -> torch.Tensor:
    """n examples for each instance: every feature 0 with probability `sparsity`, else uniform in [0, 1]."""
    shape = (cfg.n_instances, n, cfg.n_features)
    values = torch.rand(shape, generator=generator)                                  # (I, B, F)
    present = torch.rand(shape, generator=generator) >= cfg.sparsity                  # (I, B, F)
    return values * present


def reconstruct(W: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """x' = ReLU(Wᵀ W x + b), for every instance at once (examples as rows, so x Wᵀ is W x for each row)."""
    h = x @ W.transpose(1, 2)                                                        # (I, B, H)
    return torch.relu(h @ W + b.unsqueeze(1))                                        # (I, B, F)


def weighted_error(W: torch.Tensor, b: torch.Tensor, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Each instance's importance-weighted squared error, averaged over examples and features: (I,)."""
    return (weights * (x - reconstruct(W, b, x)) ** 2).mean(dim=(1, 2))


def train_toy(cfg: ToyConfig) -> ToyResult:
    """Train `n_instances` toys side by side from a seed (CPU, deterministic); return the one with the lowest loss."""
    generator = torch.Generator().manual_seed(cfg.seed)
    I, H, F = cfg.n_instances, cfg.d_hidden, cfg.n_features
    xavier = (2 / (H + F)) ** 0.5                                                    # Xavier-normal's spread
    W = (torch.randn((I, H, F), generator=generator) * xavier).requires_grad_()      # (I, H, F)
    b = torch.zeros((I, F), requires_grad=True)                                      # (I, F)
    weights = importance(cfg)                                                        # (F,)
    optimiser = torch.optim.AdamW([W, b], lr=cfg.lr)
    for _ in range(cfg.steps):
        x = sparse_features(cfg, cfg.batch, generator)                               # (I, B, F)
        loss = weighted_error(W, b, x, weights).sum()        # instances are independent: their sum trains each
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        losses = weighted_error(W, b, sparse_features(cfg, EVAL_BATCH, generator), weights)   # (I,)
    best = int(losses.argmin())
    return ToyResult(config=cfg, W=W[best].detach().numpy().copy(), b=b[best].detach().numpy().copy(),
                     importance=weights.numpy(), loss=float(losses[best]))
