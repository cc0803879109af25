"""What the class got right: per question, per student, and each student's own (no Streamlit).

Everything here is read from the class store's answers (`answers`, `roster`) and each step's question as asked
(explorer/questions.py), at the moment it is drawn: nothing is kept, so nothing outlives the class. A student is
named only by the name they gave; the others are "student 3" in the CSV, numbered in the order of their seat's id.
"""
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from explorer.numbers import percent
from explorer.questions import Asked


@dataclass(frozen=True)
class QuestionSummary:
    """One question's answers: how many, how many right, and the wrong answer given most."""
    step: int                       # the lesson's step, from 0
    asked: Asked
    counts: dict[str, int]          # answer -> students

    @property
    def answered(self) -> int:
        return sum(self.counts.values())

    @property
    def right(self) -> int | None:
        """Students who gave the right answer (None: a poll has none)."""
        return None if self.asked.answer is None else self.counts.get(self.asked.answer, 0)

    @property
    def share(self) -> float | None:
        """The share of those who answered who were right (None: a poll, or nobody answered yet)."""
        return None if self.right is None or not self.answered else self.right / self.answered

    @property
    def most_common_wrong(self) -> str | None:
        """The wrong answer given most (ties: the one shown first); for a poll, the answer given most."""
        wrong = {a: n for a, n in self.counts.items() if a != self.asked.answer}
        if not wrong:
            return None
        shown = {option: i for i, option in enumerate(self.asked.options)}
        return min(wrong, key=lambda a: (-wrong[a], shown.get(a, len(shown)), a))


def summarise(asked: dict[int, Asked], answers: dict[int, dict[str, str]]) -> list[QuestionSummary]:
    """Each asked question's summary, in the lesson's order, from every student's answer by step and student."""
    return [QuestionSummary(step, question, dict(Counter(answers.get(step, {}).values())))
            for step, question in sorted(asked.items())]


def share_words(summary: QuestionSummary) -> str:
    """'7 of 10 right (70.0%)', for the teacher after a reveal ('' for a poll or before any answer)."""
    if summary.share is None:
        return ""
    return f"{summary.right} of {summary.answered} right ({percent(summary.share)})"


def summary_table(summaries: list[QuestionSummary]) -> pd.DataFrame:
    """The teacher's table: one row per question."""
    return pd.DataFrame({
        "step": [s.step + 1 for s in summaries],
        "question": [s.asked.prompt for s in summaries],
        "answered": [s.answered for s in summaries],
        "right": ["(poll)" if s.right is None else str(s.right) for s in summaries],
        "share right": ["" if s.share is None else percent(s.share) for s in summaries],
        "most common wrong answer": ["" if s.right is None else s.most_common_wrong or "" for s in summaries]})


def answers_table(asked: dict[int, Asked], answers: dict[int, dict[str, str]], roster: dict[str, str]) -> pd.DataFrame:
    """Every answer sent, one row each: the question, the student (their name where they gave one, else a number),
    their answer, the right one and whether theirs is."""
    number = {seat: n for n, seat in enumerate(sorted(roster), 1)}
    rows = []
    for step, question in sorted(asked.items()):
        for seat, answer in sorted(answers.get(step, {}).items(), key=lambda item: number.get(item[0], 0)):
            right = question.right(answer)
            rows.append({"step": step + 1, "question": question.prompt,
                         "student": roster.get(seat) or f"student {number.get(seat, 0)}",
                         "answer": answer, "right answer": question.answer or "(poll)",
                         "right": "" if right is None else "yes" if right else "no"})
    return pd.DataFrame(rows, columns=["step", "question", "student", "answer", "right answer", "right"])


def csv_of(table: pd.DataFrame) -> str:
    return table.to_csv(index=False)


def own_table(asked: dict[int, Asked], mine: dict[int, str], revealed: frozenset[int]) -> pd.DataFrame:
    """A student's own summary: each question, their answer, and once revealed the right one and whether theirs is
    (the answers first and the question's words last: a phone shows the first columns)."""
    rows = []
    for step, question in sorted(asked.items()):
        answer, shown = mine.get(step), step in revealed
        right = None if answer is None or not shown else question.right(answer)
        rows.append({"step": step + 1, "your answer": answer or "(none)",
                     "right answer": (question.answer or "(poll)") if shown else "(not revealed yet)",
                     "right": "" if right is None else "yes" if right else "no", "question": question.prompt})
    return pd.DataFrame(rows, columns=["step", "your answer", "right answer", "right", "question"])
