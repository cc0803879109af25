"""The lab's experiment "does it generalise to longer lists?": an encoder-decoder trained on lists of 3 to 8 digits,
then tested on every length from 1 to 14. Its chart and its sentence say only what was measured."""
import re
import time

import pytest

from conftest import figure_titled, open_page, page_text
from explorer.lab.training import (DIGIT_LENGTHS, PRESETS, LengthResult, length_sentence, length_test_pairs,
                               lengths_to_test, training_sources)
from model.checkpoint import Bundle
from model.seq2seq import exact_match

EXPERIMENT = "sort: does it generalise to longer lists?"


def numbers_in(sentence: str) -> dict:
    """The claims of a length sentence, read back: the trained range, the share at those lengths, each
    "N% at L", and each "0% from A to B digits"."""
    head = re.match(r"Trained on lists of (\d+) to (\d+) digits: ([\d.]+)% exact at those lengths", sentence)
    return {"trained": (int(head[1]), int(head[2])), "inside": float(head[3]),
            "at": {int(length): float(share) for share, length in re.findall(r"([\d.]+)% at (\d+)", sentence)},
            "none": [(int(a), int(b)) for a, b in re.findall(r"0% from (\d+) to (\d+) digits", sentence)]}


def check_sentence(sentence: str, results: list[LengthResult], trained: tuple[int, int]) -> None:
    """Every number of the sentence recomputed from the results; every tested length is mentioned."""
    said, by_length = numbers_in(sentence), {r.length: r for r in results}
    assert said["trained"] == trained
    inside = [r for r in results if trained[0] <= r.length <= trained[1]]
    share = sum(r.right for r in inside) / sum(r.lists for r in inside)
    assert abs(said["inside"] - 100 * share) < 1 and (said["inside"] == 100) == (share == 1)
    for length, percent in said["at"].items():
        assert abs(percent - 100 * by_length[length].exact) < 1, length
        assert (percent == 0) == (by_length[length].right == 0) and (percent == 100) == (by_length[length].exact == 1)
    for a, b in said["none"]:
        assert a < b and all(by_length[n].right == 0 for n in range(a, b + 1))
        assert by_length[a - 1].right > 0 or a - 1 == trained[1]                  # the run of zeros starts at a
    covered = set(said["at"]) | {n for a, b in said["none"] for n in range(a, b + 1)} | \
        set(range(trained[0], trained[1] + 1))
    assert covered == set(by_length)


@pytest.mark.parametrize("rights, sentence", [
    ({1: 0, 2: 78, 3: 100, 4: 100, 5: 100, 6: 100, 7: 100, 8: 99, 9: 64, 10: 0, 11: 0, 12: 0, 13: 0, 14: 0},
     "Trained on lists of 3 to 8 digits: 99.8% exact at those lengths; longer lists: 64% at 9, 0% from 10 to 14 "
     "digits; shorter lists: 0% at 1, 78% at 2."),
    ({3: 100, 4: 100, 5: 100, 6: 100, 7: 100, 8: 100, 9: 100, 10: 1},
     "Trained on lists of 3 to 8 digits: 100% exact at those lengths; longer lists: 100% at 9, 1.0% at 10."),
    ({3: 100, 4: 100, 5: 100, 6: 100, 7: 100, 8: 100, 9: 0, 10: 2, 11: 0},
     "Trained on lists of 3 to 8 digits: 100% exact at those lengths; longer lists: 0% at 9, 2.0% at 10, 0% at 11."),
    ({3: 0, 4: 0, 5: 0, 6: 0, 7: 0, 8: 1, 9: 0, 10: 0},                         # 1 of 600: 1%, never "0%"
     "Trained on lists of 3 to 8 digits: 0.17% exact at those lengths; longer lists: 0% from 9 to 10 digits."),
])
def test_the_sentence_says_what_the_numbers_say(rights, sentence):
    results = [LengthResult(length, right, 10 if length == 1 else 100) for length, right in rights.items()]
    made = length_sentence(results, (3, 8))
    assert made == sentence
    check_sentence(made, results, (3, 8))


def test_the_experiment_trains_on_3_to_8_digits_and_shows_exact_match_by_length_up_to_14():
    at = open_page("training")
    at.selectbox(key="lab_preset").set_value(EXPERIMENT).run()
    assert at.info[0].value == PRESETS[EXPERIMENT][0] and at.session_state["lab_max_len"] >= 16
    at.button(key="lab_start").click().run()
    run = at.session_state["lab_runs"][-1]
    assert run.lengths == DIGIT_LENGTHS == (3, 8)
    sizes = {len(run.tokenizer.decode([i for i in row.tolist() if i != run.model.pad_id]).split())
             for row in run.trainer.train_pairs[0]}
    assert sizes == set(range(3, 9))                                     # what it trains on, read from the data
    start = time.perf_counter()
    while not run.finished:                                              # what the live fragment does
        run.tick()
    print(f"\nexperiment: {run.steps_done} steps, {run.seconds:.1f} s of training, "
          f"{time.perf_counter() - start:.1f} s with the tests")
    at.run()                                                             # the next live tick sees it done
    assert not at.exception and run.status == "done"

    # 1) tested on every length its positions hold: 14 digits, <bos> and <eos>
    results = run.by_length
    assert [r.length for r in results] == list(lengths_to_test(run)) == list(range(1, 15))
    assert "lists of 3 to 8 digits" in PRESETS[EXPERIMENT][0] and "from 1 to 14" in PRESETS[EXPERIMENT][0]
    assert [r.lists for r in results] == [10] + [100] * 13                # only 10 lists of one digit exist
    print("exact match by length:", {r.length: r.percent for r in results})
    inside = [r for r in results if 3 <= r.length <= 8]
    assert sum(r.right for r in inside) / sum(r.lists for r in inside) >= 0.95     # it learned what it saw ...
    assert results[-1].exact < 0.1                                        # ... and not lists of 14 digits

    # 2) the numbers are what greedy decoding (model.seq2seq.exact_match) writes, on new lists only
    bundle, seen = Bundle(run.model.eval(), run.tokenizer, {}), training_sources(run)
    for r in results:
        pairs = length_test_pairs(run, r.length, seen)
        assert len(pairs) == r.lists and not {s for s, _ in pairs} & seen
        assert all(len(s.split()) == r.length and t == " ".join(sorted(s.split())) for s, t in pairs)
        assert exact_match(bundle, pairs, beam_size=1) == pytest.approx(r.exact), r.length

    # 3) the page: the chart of those numbers, the trained lengths shaded, the sentence computed from them
    figure = figure_titled(at, "Exact match by list length")
    trained, unseen = figure["data"]
    assert trained["name"] == "lengths it trained on" and list(trained["x"]) == [3, 4, 5, 6, 7, 8]
    assert list(unseen["x"]) == [1, 2, 9, 10, 11, 12, 13, 14]
    shown = dict(zip(list(trained["x"]) + list(unseen["x"]), list(trained["y"]) + list(unseen["y"])))
    assert shown == pytest.approx({r.length: 100 * r.exact for r in results})
    [shade] = figure["layout"]["shapes"]
    assert (shade["x0"], shade["x1"]) == (2.5, 8.5)
    assert figure["layout"]["annotations"][0]["text"] == "trained on 3 to 8 digits"
    sentence = length_sentence(results, (3, 8))
    assert f"**{sentence}**" in [m.value for m in at.markdown]
    check_sentence(sentence, results, (3, 8))
    assert "Each bar: 100 lists of that length the model never saw in training (10 for 1 digit: all there are)" \
        in page_text(at)

    # 4) the published model says what it learned (model/scope.py reads these facts)
    at.button(key="lab_publish").click().run()
    assert not at.exception
    facts = at.session_state["trained_models"]["lab: run 1"].facts
    assert facts["training_data"] == "5,000 random lists of 3 to 8 digits and their sorted versions"
    assert facts["task"] == "sort" and facts["lengths"] == [3, 8]
