"""Guess first, then see: the parts of a page that give an open question's answer away (no Streamlit).

While a class question is open, every screen of the class (the teacher's projector, every student, one who
reloads or joins late) draws these parts as a placeholder of the same size; the reveal lifts the veil. A student
walking a lesson alone gets the same veil until they check their guess. The rest of the page stays.

A part is a name that a page gives to what it draws (`chart(..., part="forecast")` in explorer/app/layout.py):

    part            what it shows                                      pages
    forecast        the next-token forecast: its bars, favourite,      prediction, attention (what-if),
                    scores and the sentences computed from them        why, home
    tokens          the sentence cut into tokens: the chips, count     tokenization, home
    neighbours      a word's nearest rows in the embedding             embedding
    pattern         who attends to whom: a head's pattern and lines    attention
    lens            the logit lens: each stage's top guess             residual
    what-if         a knocked-out head's effect on the forecast        attention
    contributions   what each head and MLP added to the top guess      why
    cross           cross-attention: which source word is read         encoder-decoder
    steering        what the steered model writes, and how much        features
                    each next-token probability moved
    learning        the model's next word at each training step        learning

`VEILS` says which parts each kind of question hides: a next-word question hides every part that names the
model's next word, not only the prediction page's chart.
"""
from dataclasses import dataclass

PARTS = {
    "forecast": "The model's forecast",
    "tokens": "The sentence's tokens",
    "neighbours": "The nearest words",
    "pattern": "This head's attention",
    "lens": "The logit lens",
    "what-if": "The knockout's result",
    "contributions": "What each part added",
    "cross": "The cross-attention",
    "steering": "What the steered model writes",
    "learning": "The model's next word at each training step",
}

VEILS = {
    "next-word": frozenset({"forecast", "lens", "what-if", "contributions"}),
    "token-count": frozenset({"tokens"}),
    "nearest-word": frozenset({"neighbours"}),
    "looks-at": frozenset({"pattern"}),
    "lens-layer": frozenset({"lens"}),
    "knockout": frozenset({"what-if"}),
    "biggest-push": frozenset({"contributions"}),
    "reads-source": frozenset({"cross"}),
    "steered-word": frozenset({"steering"}),
    "first-right": frozenset({"learning", "forecast", "lens", "what-if", "contributions"}),
}


@dataclass(frozen=True)
class Veil:
    """What this screen hides while a question of `kind` is open (`alone`: a student's own guess, not a class's)."""
    kind: str
    parts: frozenset[str]
    alone: bool = False

    def covers(self, part: str | None) -> bool:
        return part is not None and part in self.parts

    def words(self, part: str) -> str:
        """What the placeholder says (Markdown)."""
        when = "when you check your guess" if self.alone else "at the reveal"
        return (f"**Guess first, then see.** {PARTS[part]} is hidden while the question is open: it appears "
                f"here {when}.")


def veil_for(kind: str, alone: bool = False) -> Veil | None:
    """The veil of an open question of `kind` (None: the kind's answer is not on any chart, a choice or a poll)."""
    parts = VEILS.get(kind)
    return None if parts is None else Veil(kind, parts, alone)
