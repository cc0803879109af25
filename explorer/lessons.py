"""Lessons: an ordered list of views a teacher walks a class through, each with a note and maybe a question.

A lesson is a small JSON file (download, upload, a ready one in lessons/), read with `json` only and checked
field by field like a checkpoint: a file that is not a lesson gets a clear message, never a traceback.

    {"title": "Attention in ten minutes",
     "steps": [{"page": "attention", "tab": "who-looks",
                "view": {"model": "tinytales", "text": "the cat sat on the mat because", "layer": 1, "head": 2},
                "note": "Ask: which word does 'because' look at?",
                "question": {"kind": "looks-at"}}]}

A step names a place the way the registry does (page slug, tab name, the page's own fields by name), so a moved
tab changes one line of explorer/registry.py, not every lesson. A question's answer is never written in the file
(but for the teacher's own multiple choice): it is computed from the model when the step is shown
(explorer/questions.py), so it is true of the model in use. Which kinds fit which page is that module's table.
"""
import base64
import json
import math
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from explorer.classroom.store import ANSWER_CHARS, clean_text
from explorer.lab import link as lab_link
from explorer.questions import KINDS, MAX_OPTIONS, PROMPT_CHARS, TEXT_CHARS, WORD_CHARS, Question, fitting
from explorer.registry import BY_SLUG, FIELD_CHARS, LAB
from explorer.view import MAX_CHARS

READY = Path(__file__).resolve().parents[1] / "lessons"       # the lessons that ship with the app
MAX_BYTES = 64_000
MAX_STEPS = 60
VIEW_FIELDS = {"model": str, "text": str, "layer": int, "head": int, "token": int}


class LessonError(ValueError):
    """A file that is not a lesson this app can open; the message says what is wrong, for a teacher."""


@dataclass(frozen=True)
class LessonStep:
    page: str                                        # a page's slug (explorer/registry.py)
    tab: str | None = None                           # the tab's name on that page
    view: dict = field(default_factory=dict)         # model, text, layer, head, token (checked as a link's are)
    fields: dict = field(default_factory=dict)       # the page's own view fields by name, e.g. {"what-if": "mask"}
    note: str = ""                                   # for the teacher
    question: Question | None = None

    def query(self) -> dict[str, str]:
        """The step as a link's URL parameters (model, text, layer, head, token and the tab's label)."""
        params = {key: str(value) for key, value in self.view.items()}
        if self.tab:
            params["section"] = BY_SLUG[self.page].tab(self.tab)
        return params

    def state(self) -> dict[str, object]:
        """The page's own fields as session keys and values."""
        page = BY_SLUG[self.page]
        return {page.field(name): value for name, value in self.fields.items()}


@dataclass(frozen=True)
class Lesson:
    title: str
    steps: tuple[LessonStep, ...]

    def reading_at(self, index: int, name: str, text: str) -> tuple[str, str]:
        """The model and sentence a class following the lesson has on screen at step `index`: the last ones that step
        or an earlier one names (a step that names none keeps what is on screen), else `name` and `text`. A question
        is asked on these, so that every screen asks it about the same sentence."""
        earlier = self.steps[: index + 1]
        return (next((s.view["model"] for s in reversed(earlier) if "model" in s.view), name),
                next((s.view["text"] for s in reversed(earlier) if "text" in s.view), text))

    def to_json(self) -> str:
        steps = []
        for s in self.steps:
            step = {"page": s.page}
            if s.tab:
                step["tab"] = s.tab
            for key in ("view", "fields"):
                if getattr(s, key):
                    step[key] = dict(getattr(s, key))
            if s.note:
                step["note"] = s.note
            if s.question:
                step["question"] = question_json(s.question)
            steps.append(step)
        return json.dumps({"title": self.title, "steps": steps}, ensure_ascii=False, indent=1)


def _text(value, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise LessonError(f"{what} should be text.")
    if len(value) > limit:
        raise LessonError(f"{what} is longer than {limit:,} characters.")
    return value


def _step(raw, n: int) -> LessonStep:
    where = f"Step {n}"
    if not isinstance(raw, dict):
        raise LessonError(f"{where} should be an object with a page, and maybe a tab, view, note and question.")
    unknown = set(raw) - {"page", "tab", "view", "fields", "note", "question"}
    if unknown:
        raise LessonError(f"{where} has fields a lesson does not use: {', '.join(sorted(map(str, unknown)))}.")
    page = BY_SLUG.get(raw.get("page")) if isinstance(raw.get("page"), str) else None
    if page is None:
        raise LessonError(f"{where} names no page of this app (pages: {', '.join(BY_SLUG)}).")
    tab = raw.get("tab")
    if tab is not None and (not isinstance(tab, str) or tab not in dict(page.tabs)):
        raise LessonError(f"{where}: the {page.slug} page has no tab {str(tab)[:40]!r} "
                          f"(tabs: {', '.join(dict(page.tabs)) or 'none'}).")
    view = raw.get("view", {})
    if not isinstance(view, dict):
        raise LessonError(f"{where}: its view should be an object (model, text, layer, head, token).")
    for key, value in view.items():
        kind = VIEW_FIELDS.get(key)
        if kind is None:
            raise LessonError(f"{where}: a view has no field {str(key)[:40]!r} (fields: {', '.join(VIEW_FIELDS)}).")
        if kind is int and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100_000):
            raise LessonError(f"{where}: {key} should be a whole number from 0.")
        if kind is str:
            _text(value, f"{where}'s {key}", MAX_CHARS)
    fields = raw.get("fields", {})
    if not isinstance(fields, dict) or any(name not in dict(page.fields) for name in fields):
        raise LessonError(f"{where}: the {page.slug} page's fields are {', '.join(dict(page.fields)) or 'none'}.")
    for name, value in fields.items():
        if not _field_value(value) or len(str(value)) > FIELD_CHARS:
            raise LessonError(f"{where}: the field {name} should be short text, a number or true/false.")
    question = raw.get("question")
    return LessonStep(page=page.slug, tab=tab, view=dict(view), fields=dict(fields),
                      note=_text(raw.get("note", ""), f"{where}'s note", 1000),
                      question=None if question is None else _question(question, page.slug, where))


def question_json(question: Question) -> dict:
    """A question as its lesson file holds it: the kind, then only the fields it uses."""
    out = {"kind": question.kind}
    for key in ("prompt", "options", "answer", "word", "text"):
        value = getattr(question, key)
        if value:
            out[key] = list(value) if key == "options" else value
    return out


def _options(raw, where: str) -> tuple[str, ...]:
    """A choice's or poll's options: 2 to MAX_OPTIONS different lines of text, each kept as the class store keeps
    an answer (one line, at most ANSWER_CHARS characters)."""
    if not isinstance(raw, list) or not 2 <= len(raw) <= MAX_OPTIONS:
        raise LessonError(f"{where}: a question's options are a list of 2 to {MAX_OPTIONS} texts.")
    options = []
    for option in raw:
        text = _text(option, f"{where}: an option", ANSWER_CHARS)
        if not clean_text(text, ANSWER_CHARS):
            raise LessonError(f"{where}: an option is empty.")
        options.append(clean_text(text, ANSWER_CHARS))
    if len(set(options)) < len(options):
        raise LessonError(f"{where}: two options are the same ({', '.join(o for o in options if options.count(o) > 1)}).")
    return tuple(options)


def _question(raw, page: str, where: str) -> Question:
    """A step's question, checked: a kind that fits the step's page, and only the fields that kind uses."""
    if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
        raise LessonError(f"{where}: a question needs a kind, one of {', '.join(KINDS)}.")
    kind = KINDS[raw["kind"]]
    if page not in kind.pages:
        raise LessonError(f"{where}: a {kind.name} question does not fit the {page} page (questions for that page: "
                          f"{', '.join(fitting(page))}).")
    for key in ("options", "answer", "word", "text"):
        if key in raw and key not in kind.fields:
            why = ("a poll has no right answer" if kind.name == "poll" else
                   "the model gives it when the step is shown, never the file" if key in ("options", "answer") else
                   f"only {', '.join(k for k, o in KINDS.items() if key in o.fields)} questions have one")
            raise LessonError(f"{where}: a {kind.name} question takes no {key}: {why}.")
    prompt = _text(raw.get("prompt", ""), f"{where}'s question", PROMPT_CHARS).strip()
    options = _options(raw["options"], where) if "options" in raw else ()
    answer = raw.get("answer")
    if kind.name == "choice":
        if not prompt or not options:
            raise LessonError(f"{where}: a choice question needs a prompt and its options.")
        if answer is None or not isinstance(answer, str) or clean_text(answer, ANSWER_CHARS) not in options:
            raise LessonError(f"{where}: a choice question needs its right answer, one of its options.")
        answer = clean_text(answer, ANSWER_CHARS)
    word = _text(raw["word"], f"{where}'s word", WORD_CHARS).strip() or None if "word" in raw else None
    text = _text(raw["text"], f"{where}'s text", TEXT_CHARS).strip() or None if "text" in raw else None
    return Question(kind.name, prompt, options, answer, word, text)


def parse(data: bytes | str) -> Lesson:
    """A lesson from a file's bytes, checked field by field; LessonError says what is wrong."""
    if len(data) > MAX_BYTES:
        raise LessonError(f"This file is larger than a lesson can be ({MAX_BYTES // 1000} KB).")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise LessonError("This file is not a lesson: it is not JSON text.") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        raise LessonError("This file is not a lesson: it needs a title and a list of steps.")
    if not 1 <= len(raw["steps"]) <= MAX_STEPS:
        raise LessonError(f"A lesson has 1 to {MAX_STEPS} steps; this one has {len(raw['steps'])}.")
    title = _text(raw.get("title", ""), "The title", 120).strip() or "Untitled lesson"
    return Lesson(title=title, steps=tuple(_step(s, n) for n, s in enumerate(raw["steps"], 1)))


def ready_lessons() -> dict[str, Lesson]:
    """The lessons that ship with the app, by file name (without .json), in file-name order."""
    return {path.stem: parse(path.read_bytes()) for path in sorted(READY.glob("*.json"))}


def _field_value(value) -> bool:
    """Whether `value` may be a page field's value in a lesson: text, a whole or finite number, or true/false (the
    page checks it as it checks a link's)."""
    return isinstance(value, (str, int, bool)) or (isinstance(value, float) and math.isfinite(value))


def step_from_view(slug: str, view: dict, section_label: str | None, fields: dict) -> LessonStep:
    """A lesson step for the view a teacher is looking at: page `slug`, the view's values, the open tab (by its label,
    as the page shows it) and the page's own fields (by session key)."""
    page = BY_SLUG[slug]
    tab = next((name for name, label in page.tabs if label == section_label), None)
    by_key = {key: name for name, key in page.fields}
    kept = {by_key[key]: value for key, value in fields.items() if key in by_key and _field_value(value)}
    if slug == LAB.slug:                    # the lab's preset and the knobs changed from it, as its link has them
        kept = lab_link.in_link(kept)
    values = {k: v for k, v in view.items() if k in VIEW_FIELDS and isinstance(v, VIEW_FIELDS[k])
              and not isinstance(v, bool)}
    return LessonStep(page=slug, tab=tab, view=values, fields=kept)


def as_link(lesson: Lesson) -> str:
    """A lesson as one URL parameter value (compressed JSON, URL-safe base64): `?lesson=...` opens it."""
    return base64.urlsafe_b64encode(zlib.compress(lesson.to_json().encode(), 9)).decode().rstrip("=")


def from_link(value: str) -> Lesson:
    """The lesson a `?lesson=` value carries; LessonError when it is not one."""
    try:
        packed = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        data = zlib.decompressobj().decompress(packed, MAX_BYTES + 1)
    except (ValueError, zlib.error):
        raise LessonError("This link does not carry a lesson (it was cut or changed).") from None
    return parse(data)


def as_field(lesson: Lesson) -> str:
    """A lesson as a `lesson=` URL value: a ready lesson's key when it is one (short), else its link's value."""
    same = [key for key, ready in ready_lessons().items() if ready.to_json() == lesson.to_json()]
    return same[0] if same else as_link(lesson)


def from_field(value: str) -> Lesson:
    """The lesson a `lesson=` URL value names (`as_field`): a ready lesson's key or a lesson's link value."""
    return ready_lessons().get(value) or from_link(value)


def file_name(lesson: Lesson) -> str:
    """'lesson-attention-in-ten-minutes.json': the lesson's title in the file's name."""
    words = "".join(c if c.isalnum() else " " for c in lesson.title.lower()).split()
    return "lesson-" + "-".join(words)[:60].strip("-") + ".json" if words else "lesson.json"


def steps_table(steps: list[LessonStep]) -> pd.DataFrame:
    """The steps being built as a table a teacher edits: the order, note and question are theirs (`questions`
    says which kinds fit the step's page), `keep` drops a step."""
    return pd.DataFrame({"order": range(1, len(steps) + 1),
                         "page": [BY_SLUG[s.page].title for s in steps],
                         "tab": [BY_SLUG[s.page].tab(s.tab) if s.tab else "" for s in steps],
                         "sentence": [s.view.get("text", "") for s in steps],
                         "note": [s.note for s in steps],
                         "question": [s.question.kind if s.question else "" for s in steps],
                         "questions": [", ".join(fitting(s.page)) for s in steps], "keep": [True] * len(steps)})


def _asked_in_table(step: LessonStep, kind, n: int) -> tuple[Question | None, str | None]:
    """The question a table's row asks (its kind as chosen; a kept kind keeps its prompt and options), and why a
    chosen kind could not be used, if it could not."""
    kind = kind if isinstance(kind, str) else ""
    if kind == (step.question.kind if step.question else ""):
        return step.question, None
    if not kind:
        return None, None
    if kind not in KINDS or step.page not in KINDS[kind].pages:
        return step.question, (f"Step {n}: a {kind} question does not fit the {BY_SLUG[step.page].title} page "
                               f"(questions for it: {', '.join(fitting(step.page))}).")
    if kind == "choice":
        return step.question, (f"Step {n}: a choice needs its options and right answer, written in the lesson file "
                               "(download it, edit it, upload it).")
    return Question(kind), None


def from_table(steps: list[LessonStep], edited: pd.DataFrame, title: str) -> tuple[Lesson | None, list[str]]:
    """The lesson the edited table says (its notes, questions and order, the kept steps; None when none is kept),
    and what could not be done as asked."""
    kept, problems = [], []
    for n, row in enumerate(edited.itertuples()):
        question, problem = _asked_in_table(steps[n], getattr(row, "question", None), n + 1)
        problems += [problem] if problem else []
        if row.keep:
            kept.append((float(row.order) if pd.notna(row.order) else float(n + 1), n,
                         replace(steps[n], note=row.note[:1000] if isinstance(row.note, str) else "", question=question)))
    if not kept:
        return None, problems
    ordered = tuple(step for _, _, step in sorted(kept, key=lambda x: (x[0], x[1])))
    return Lesson(title=(title or "").strip() or "Untitled lesson", steps=ordered), problems
