"""The step-wise trainer: it learns, it is reproducible, and every knob does what it says."""

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from model.config import ModelConfig
from model.corpora import roses_text
from model.tokenizers import WordTokenizer
from model.trainer import TrainConfig, Trainer, make_batch
from model.transformer import TransformerLM

TOKENIZER = WordTokenizer.from_texts([roses_text(1)])
IDS = torch.tensor(TOKENIZER.encode(roses_text(40)))
CFG = ModelConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_heads=2, n_layers=2, d_ff=64, max_len=16)


def make_trainer(seed: int = 0, **recipe) -> Trainer:
    torch.manual_seed(seed)
    return Trainer(TransformerLM(CFG), IDS, IDS, TrainConfig(**{"steps": 100, "seed": seed, **recipe}))


def test_training_lowers_the_loss():
    trainer = make_trainer(lr=1e-2, warmup=5)
    first = trainer.step(1).loss
    val_before, _ = trainer.evaluate()
    trainer.step(80)
    val_after, acc_after = trainer.evaluate()
    assert first > 2.0                         # about ln(12): a guess among 12 words
    assert val_after < 0.2 * val_before
    assert acc_after > 0.9


def test_sgd_with_momentum_also_learns():
    trainer = make_trainer(optimizer="sgd", lr=0.5, warmup=0, grad_clip=0.0)
    before, _ = trainer.evaluate()
    trainer.step(60)
    assert trainer.evaluate()[0] < 0.7 * before
    assert isinstance(trainer.optimizer, torch.optim.SGD) and trainer.optimizer.defaults["momentum"] == 0.9


def test_same_seed_gives_the_same_run_and_another_seed_does_not():
    a, b, c = make_trainer(0), make_trainer(0), make_trainer(1)
    losses = [[t.step(5).loss for _ in range(3)] for t in (a, b, c)]
    assert losses[0] == losses[1]
    assert losses[0] != losses[2]
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(p, q)


def test_step_reports_its_metrics():
    trainer = make_trainer(warmup=10, lr=1e-3)
    metrics = trainer.step(4)
    assert metrics.step == 4 and trainer.steps_done == 4
    assert metrics.lr == pytest.approx(4e-4)
    assert 0.0 <= metrics.accuracy <= 1.0 and metrics.tokens_per_s > 0
    assert set(metrics.grad_norms) == {"embed", "blocks.0", "blocks.1", "unembed"}
    assert all(v > 0 for v in metrics.grad_norms.values())
    assert [m.step for m in trainer.history] == [4]


def test_gradient_norms_are_the_real_per_layer_norms_before_clipping():
    trainer = make_trainer(grad_clip=1e-3)
    metrics = trainer.step(1)
    # recompute this step's gradients by hand from a twin model and the same batch
    torch.manual_seed(0)
    twin = TransformerLM(CFG).train()
    x, y = make_batch(IDS, 16, 16, torch.Generator().manual_seed(0))
    F.cross_entropy(twin(x).flatten(0, 1), y.flatten()).backward()
    blocks0 = torch.cat([p.grad.flatten() for n, p in twin.named_parameters() if n.startswith("blocks.0.")])
    assert metrics.grad_norms["blocks.0"] == pytest.approx(float(blocks0.norm()), rel=1e-4)
    assert metrics.grad_norms["blocks.0"] > 1e-3   # so the number shown is not the clipped one


def test_gradient_clipping_bounds_each_update():
    trainer = make_trainer(optimizer="sgd", momentum=0.0, weight_decay=0.0, lr=1.0, warmup=0,
                           schedule="constant", grad_clip=1e-3)
    before = torch.cat([p.detach().flatten().clone() for p in trainer.model.parameters()])
    trainer.step(1)
    after = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    assert (after - before).norm() == pytest.approx(1e-3, rel=1e-3)


@pytest.mark.parametrize("switches", [dict(), dict(tie_embeddings=True, pos="learned", norm="rms")])
def test_adamw_decays_the_weight_matrices_and_embeddings_but_not_biases_and_norms(switches):
    """nanoGPT's configure_optimizers: every parameter with 2 or more dimensions is decayed, the 1-D ones are not."""
    torch.manual_seed(0)
    model = TransformerLM(replace(CFG, **switches))
    trainer = Trainer(model, IDS, IDS, TrainConfig(weight_decay=0.05))
    decayed, plain = trainer.optimizer.param_groups
    assert (decayed["weight_decay"], plain["weight_decay"]) == (0.05, 0.0)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed, plain = {names[id(p)] for p in decayed["params"]}, {names[id(p)] for p in plain["params"]}
    assert decayed | plain == set(names.values()) and not decayed & plain
    assert {"embed.tok.weight", "blocks.0.attn.W_q.weight", "blocks.1.mlp.W_out.weight"} <= decayed
    assert ("embed.pos.weight" in decayed) == (switches.get("pos") == "learned")
    assert ("unembed.weight" in decayed) != bool(switches.get("tie_embeddings"))     # a tied unembedding is embed.tok
    assert "blocks.0.attn.W_q.bias" in plain and "blocks.0.norm1.weight" in plain and "final_norm.weight" in plain
    assert all(n.endswith(".bias") or "norm" in n for n in plain)
    assert all(n.endswith(".weight") and "norm" not in n for n in decayed)


def test_an_encoder_decoder_decays_the_same_kind_of_parameters():
    from model import tasks
    from model.seq2seq import EncoderDecoder
    from model.trainer import PairTrainer
    tok = tasks.tokenizer_for("reverse")
    pairs = tasks.encode_pairs(tok, [("1 2 3", "3 2 1")], 8)
    model = EncoderDecoder(replace(CFG, vocab_size=tok.vocab_size, max_len=8))
    decayed, plain = PairTrainer(model, pairs, pairs, TrainConfig()).optimizer.param_groups
    assert {p.dim() for p in decayed["params"]} == {2} and {p.dim() for p in plain["params"]} == {1}
    assert len(decayed["params"]) + len(plain["params"]) == len(list(model.parameters()))
    assert decayed["weight_decay"] == TrainConfig().weight_decay and plain["weight_decay"] == 0.0


def test_sgd_keeps_its_l2_penalty_on_every_parameter():
    trainer = make_trainer(optimizer="sgd", weight_decay=0.05)
    (group,) = trainer.optimizer.param_groups
    assert group["weight_decay"] == 0.05 and len(group["params"]) == len(list(trainer.model.parameters()))


def test_label_smoothing_changes_the_loss_as_defined():
    trainer = make_trainer(label_smoothing=0.3)
    torch.manual_seed(0)
    twin = TransformerLM(CFG).train()
    x, y = make_batch(IDS, 16, 16, torch.Generator().manual_seed(0))
    logits = twin(x).flatten(0, 1).detach()
    expected = F.cross_entropy(logits, y.flatten(), label_smoothing=0.3)
    assert trainer.step(1).loss == pytest.approx(float(expected), rel=1e-5)
    assert float(expected) != pytest.approx(float(F.cross_entropy(logits, y.flatten())), rel=1e-3)


@pytest.mark.parametrize("schedule, step, expected", [
    ("cosine", 5, 0.5), ("cosine", 10, 1.0), ("cosine", 100, 0.1), ("cosine", 55, 0.55),
    ("inv_sqrt", 40, 0.5), ("inv_sqrt", 10, 1.0), ("constant", 100, 1.0)])
def test_learning_rate_schedules(schedule, step, expected):
    recipe = TrainConfig(steps=100, lr=1.0, warmup=10, schedule=schedule)
    assert recipe.lr_at(step) == pytest.approx(expected)


def test_evaluate_is_the_plain_loss_on_validation_windows():
    trainer = make_trainer()
    loss, accuracy = trainer.evaluate(max_windows=4)
    x, y = IDS[:64].view(4, 16), IDS[1:65].view(4, 16)
    logits = trainer.model.predict(x)
    assert loss == pytest.approx(float(F.cross_entropy(logits.flatten(0, 1), y.flatten())), rel=1e-5)
    assert accuracy == pytest.approx(float((logits.argmax(-1) == y).float().mean()))


def test_text_too_short_for_one_example_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="too short: 5 tokens.*needs 17"):
        Trainer(TransformerLM(CFG), IDS[:5], IDS, TrainConfig())


@pytest.mark.parametrize("bad", [dict(optimizer="adam"), dict(schedule="linear"), dict(lr=0.0), dict(lr=2.0),
                                 dict(steps=0), dict(batch_size=-1), dict(warmup=-1), dict(label_smoothing=1.0)])
def test_bad_recipes_are_refused(bad):
    with pytest.raises(ValueError):
        TrainConfig(**bad)


# --- divergence: a learning rate far too high must stop the run, not train on NaN ----------------------

def diverging_trainer() -> Trainer:
    """The lab's diverging recipe on the roses poem: SGD at learning rate 1.0, no warmup, no clipping."""
    return make_trainer(optimizer="sgd", lr=1.0, warmup=0, grad_clip=0.0, steps=300)


def test_a_diverging_run_stops_at_the_step_its_loss_blows_up_and_never_trains_on_nan():
    trainer = diverging_trainer()
    losses = []
    while trainer.divergence is None and trainer.steps_done < 300:
        metrics = trainer.step(1)
        if metrics:
            losses.append(metrics.loss)
    where = trainer.divergence
    assert where is not None and where.step < 60                 # it blows up early, long before the budget
    assert trainer.steps_done == where.step - 1                  # the exploding step was not taken
    assert where.limit == pytest.approx(5 * math.log(TOKENIZER.vocab_size))
    assert not math.isfinite(where.loss) or where.loss > where.limit
    assert all(math.isfinite(x) and x <= where.limit for x in losses)
    assert trainer.weights_finite()                              # stopped before the weights overflowed
    with pytest.raises(RuntimeError, match=f"diverged at step {where.step}"):
        trainer.step(1)


def test_a_chunk_that_diverges_reports_only_its_completed_steps():
    trainer = diverging_trainer()
    while trainer.divergence is None:
        trainer.step(5)
    completed = [m.step for m in trainer.history]
    assert completed and completed[-1] == trainer.steps_done < trainer.divergence.step
    assert all(math.isfinite(m.loss) for m in trainer.history)


def test_weights_that_turned_nan_stop_the_run():
    trainer = make_trainer()
    with torch.no_grad():
        trainer.model.embed.tok.weight[TOKENIZER.encode("roses")[0], 0] = float("nan")   # a word every batch reads
    assert trainer.step(3) is None                               # the first loss is already NaN
    assert trainer.divergence.cause == "loss not finite" and trainer.divergence.step == 1


def test_a_nan_weight_the_loss_does_not_see_is_caught_at_the_end_of_the_call():
    trainer = make_trainer()
    with torch.no_grad():
        trainer.model.embed.tok.weight[0, 0] = float("nan")    # <unk>: the poem never reads it
    metrics = trainer.step(3)
    assert metrics.step == 3 and math.isfinite(metrics.loss)
    assert trainer.divergence.cause == "weights not finite" and trainer.divergence.step == 3


def test_a_sensible_recipe_never_counts_as_diverged():
    trainer = make_trainer(optimizer="sgd", lr=0.5, warmup=0, grad_clip=0.0, steps=300)
    trainer.step(300)
    assert trainer.divergence is None and trainer.steps_done == 300
