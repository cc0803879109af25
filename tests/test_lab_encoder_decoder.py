"""The training lab's encoder-decoder tasks: a sort run reaches 99% exact match on held-out lists, its probe's
cross-attention is snapshotted, its samples are decoded greedily and by beam search, and the finished model opens
on the encoder-decoder page."""
import pytest

from conftest import decode, figure_titled, open_page, page_text, vega_chart_titled
from explorer.lab.training import PRESETS, new_run
from model import tasks
from model.seq2seq import EncoderDecoder, beam_search


def test_a_lab_sort_run_learns_to_sort_held_out_lists():
    run = new_run(PRESETS["sort (encoder-decoder)"][1], "check")
    assert isinstance(run.model, EncoderDecoder)
    assert run.tokenizer.decode(run.probe_target) == tasks.answer("sort", run.example) == "1 3 4 7 9"
    while not run.finished and not (run.evals and run.evals[-1]["exact_match"] >= 0.99):
        run.tick()
    assert run.evals[-1]["exact_match"] >= 0.99 and run.steps_done < 3000
    step, patterns = run.snapshots[-1]
    assert step == run.steps_done and patterns.shape == (2, 4, 6, 5)        # (L, H, target + <eos>, source)
    assert patterns.sum(-1).allclose(patterns.new_ones(2, 4, 6))
    run.model.eval()
    greedy = run.tokenizer.decode(beam_search(run.model, run.probe_ids, 1).tokens)
    assert run.samples[-1][1].startswith(greedy) and "(beam 3: " in run.samples[-1][1]


def test_the_lab_page_trains_an_encoder_decoder_and_explores_it_on_its_page():
    at = open_page("training")
    at.selectbox(key="lab_preset").set_value("translate (encoder-decoder)").run()
    assert at.session_state["lab_task"] == "ed_translate"
    at.button(key="lab_start").click().run()
    run = at.session_state["lab_runs"][-1]
    for _ in range(3):
        run.tick()
    pattern, evals = run.snapshots[-1][1][0, 0].flatten().tolist(), list(run.evals)
    at.run()                                # draws the run as those ticks left it, then its trainer ticks once
    assert not at.exception
    _, snapshot = vega_chart_titled(at, "Cross-attention snapshot")
    assert len(snapshot) == 8 * 7 and snapshot.row.nunique() == 8           # "le chat rouge voit une souris verte"
    assert list(snapshot.weight) == pytest.approx(pattern)
    _, metrics = vega_chart_titled(at, "Accuracy, learning rate and gradient flow")
    exact = metrics[metrics.series == "held-out exact match"]
    assert list(exact.value) == pytest.approx([e["exact_match"] for e in evals])
    at.button(key="lab_pause").click().run()
    at.button(key="lab_publish").click().run()
    assert not at.exception and "lab: run 1" in at.selectbox(key="model").options
    at.selectbox(key="model").set_value("lab: run 1").run()
    at.switch_page("pages/encoder-decoder.py").run()
    assert not at.exception and f"“{run.example}”" in page_text(at)            # the probe, as the source
    assert figure_titled(at, "Cross-attention, layer 0")


def test_gradient_flow_shows_every_parameters_mean_and_largest_gradient_when_opened():
    at = open_page("training")
    at.selectbox(key="lab_preset").set_value("sort (encoder-decoder)").run()
    at.button(key="lab_start").click().run()
    run = at.session_state["lab_runs"][-1]
    run.tick()
    grads = dict(run.model.named_parameters())["decoder_blocks.1.cross_attn.W_k.weight"].grad.abs().clone()
    at.session_state["lab_flow"] = True                       # the student opens the expander
    at.run()                                # draws the gradients of that tick, then its trainer ticks once more
    assert not at.exception
    figure = figure_titled(at, "Gradient flow at step")
    names = list(decode(figure["data"][0]["x"]))
    assert names == list(run.flow) and "decoder_blocks.1.cross_attn.W_k.weight" in names
    means, largest = decode(figure["data"][0]["y"]), decode(figure["data"][1]["y"])
    assert all(m <= x for m, x in zip(means, largest))
    i = names.index("decoder_blocks.1.cross_attn.W_k.weight")
    assert means[i] == pytest.approx(float(grads.mean()), rel=1e-5) and largest[i] == pytest.approx(float(grads.max()))


def test_reversal_is_an_encoder_decoder_task_too_as_a_contrast_to_sorting():
    from explorer.lab.training import LabSetup
    setup = PRESETS["sort (encoder-decoder)"][1]
    run = new_run(LabSetup(task="ed_reverse", model=setup.model, train=setup.train), "reverse")
    assert run.tokenizer.decode(run.probe_target) == "4 1 9 3 7"
    sources, targets = run.trainer.train_pairs
    first = run.tokenizer.decode(sources[0].tolist()).replace("<pad>", "").split()
    assert run.tokenizer.decode(targets[0, 1:].tolist()).replace("<pad>", "").split()[:-1] == first[::-1]
