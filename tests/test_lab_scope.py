"""A model the lab publishes says what it learned: its training data in one sentence, an encoder-decoder's task,
and a digit task's list lengths (the facts model/scope.py reads), every number counted from the run's own data."""
import pytest

from explorer.lab.training import LabSetup, PRESETS, new_run
from model import corpora, tasks
from model.scope import scope_of

SORT = PRESETS["sort (encoder-decoder)"][1]


def facts(setup: LabSetup, user_text: str | None = None) -> dict:
    return new_run(setup, "run 1", user_text).bundle().facts


def test_a_language_model_of_the_lab_says_which_text_it_read():
    roses = facts(LabSetup())
    assert roses["training_data"] == f"the roses poem (“{corpora.ROSES}”), 200 copies"
    assert roses["corpus"] == "roses" and "task" not in roses and "lengths" not in roses
    tales = facts(PRESETS["tales"][1])
    assert tales["training_data"].startswith("20,000 sentences of tiny tales: simple English stories")
    text = "the quick brown fox jumps over the lazy dog. " * 40                   # 360 words
    own = facts(LabSetup(task="text", tokenizer="char"), text)
    cut = int(len(text) * 0.9)                                                   # the lab trains on the first 90%
    words, aside = len(text[:cut].split()), len(text[cut:].split())
    assert own["training_data"] == f"your own text ({words} words, and {aside} more kept aside to check it)"
    assert words + aside >= 360 and own["corpus"] == "text" and "task" not in own


@pytest.mark.parametrize("task, lengths, examples, done", [
    ("digits", (3, 6), corpora.digit_sorting_examples(5_000), "sorted (“3 1 2 > 1 2 3 .”)"),
    ("reverse", (5, 8), corpora.digit_reversal_examples(5_000), "reversed (“3 1 4 > 4 1 3 .”)"),
])
def test_a_digit_language_model_says_which_lengths_it_read(task, lengths, examples, done):
    made = facts(LabSetup(task=task, model={**PRESETS["sorting"][1].model}))
    sizes = [len(example.split(">")[0].split()) for example in examples]
    assert (min(sizes), max(sizes)) == lengths
    assert made["lengths"] == list(lengths) and made["corpus"] == task and "task" not in made
    assert made["training_data"] == (f"{len(examples):,} lists of {lengths[0]} to {lengths[1]} digits, each followed "
                                     f"by the same digits {done}")


def test_an_encoder_decoder_of_the_lab_says_its_task_and_lengths():
    run = new_run(SORT, "run 1")
    sources = [run.tokenizer.decode([i for i in row.tolist() if i != run.model.pad_id]).split()
               for row in run.trainer.train_pairs[0]]
    made = run.bundle().facts
    assert made["task"] == "sort" and made["lengths"] == [min(map(len, sources)), max(map(len, sources))] == [3, 8]
    assert made["training_data"] == f"{len(sources):,} random lists of 3 to 8 digits and their sorted versions"
    assert len(sources) == 5_000
    reverse = facts(LabSetup(task="ed_reverse", model=SORT.model, train=SORT.train))
    assert (reverse["task"], reverse["lengths"]) == ("reverse", [3, 8])
    assert reverse["training_data"] == "5,000 random lists of 3 to 8 digits and their reversed versions"
    translate = facts(PRESETS["translate (encoder-decoder)"][1])
    assert translate["task"] == "translate" and "lengths" not in translate
    assert translate["training_data"] == (
        f"5,000 sentences of a small English grammar ({len(tasks.NOUNS)} nouns, {len(tasks.ADJECTIVES)} "
        f"adjectives, {len(tasks.VERBS)} verbs) with their French")


def test_the_scope_of_a_published_lab_model_is_read_from_these_facts():
    sort = scope_of(new_run(SORT, "run 1").bundle())
    assert (sort.task, sort.lengths) == ("sort", (3, 8))
    assert sort.training_data == "5,000 random lists of 3 to 8 digits and their sorted versions"
    roses = scope_of(new_run(LabSetup(), "run 2").bundle())
    assert roses.task is None and roses.training_data.startswith("the roses poem")
