"""What the class got right, from the answers as the store keeps them: per question, per answer (the CSV) and per
student."""
import csv
import io

from explorer.classroom import summary
from explorer.questions import Asked

NEXT = Asked("next-word", "Which word next?", ("cat", "dog", "it", "they"), "they")
POLL = Asked("poll", "How sure are you?", ("1", "2", "3"), None)
ANSWERS = {2: {"s1": "they", "s2": "it", "s3": "dog", "s4": "they", "s5": "dog", "s6": "it"},
           5: {"s1": "3", "s2": "3", "s3": "1"}}
ROSTER = {"s1": "Ada", "s2": "", "s3": "<b>Bob</b>", "s4": "", "s5": "Chen", "s6": "Dara", "s7": ""}


def test_each_question_says_how_many_answered_how_many_were_right_and_the_wrong_answer_given_most():
    found = summary.summarise({2: NEXT, 5: POLL}, ANSWERS)
    next_word, poll = found
    assert (next_word.answered, next_word.right, next_word.share) == (6, 2, 2 / 6)
    assert next_word.most_common_wrong == "dog"            # "dog" and "it" twice each: the one shown first
    assert summary.share_words(next_word) == "2 of 6 right (33.3%)"
    assert (poll.answered, poll.right, poll.share, summary.share_words(poll)) == (3, None, None, "")
    table = summary.summary_table(found)
    assert table.to_dict("list") == {"step": [3, 6], "question": ["Which word next?", "How sure are you?"],
                                     "answered": [6, 3], "right": ["2", "(poll)"], "share right": ["33.3%", ""],
                                     "most common wrong answer": ["dog", ""]}
    assert summary.summarise({2: NEXT}, {})[0].most_common_wrong is None and summary.share_words(
        summary.summarise({2: NEXT}, {})[0]) == ""


def test_the_csv_has_every_answer_once_with_names_only_where_students_gave_them():
    rows = list(csv.DictReader(io.StringIO(summary.csv_of(summary.answers_table({2: NEXT, 5: POLL}, ANSWERS,
                                                                                ROSTER)))))
    assert len(rows) == 9
    assert [(r["step"], r["student"], r["answer"], r["right"]) for r in rows if r["step"] == "3"] == [
        ("3", "Ada", "they", "yes"), ("3", "student 2", "it", "no"), ("3", "<b>Bob</b>", "dog", "no"),
        ("3", "student 4", "they", "yes"), ("3", "Chen", "dog", "no"), ("3", "Dara", "it", "no")]
    assert {(r["right answer"], r["right"]) for r in rows if r["step"] == "6"} == {("(poll)", "")}


def test_a_student_sees_their_own_answers_and_the_right_ones_once_revealed():
    table = summary.own_table({2: NEXT, 5: POLL}, {2: "it"}, frozenset({2}))
    assert table.to_dict("list") == {"step": [3, 6], "your answer": ["it", "(none)"],
                                     "right answer": ["they", "(not revealed yet)"], "right": ["no", ""],
                                     "question": ["Which word next?", "How sure are you?"]}
