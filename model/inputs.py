"""From typed text to token ids a model can read, with anything surprising said out loud."""
from dataclasses import dataclass

from .tokenizers import Piece, Tokenizer


@dataclass(frozen=True)
class Prepared:
    ids: list[int]                # what the model reads (at most max_len)
    pieces: list[Piece]           # one display piece per id
    dropped: int = 0              # tokens cut from the start because the text was longer than the context
    unknown: int = 0              # tokens the vocabulary did not know (shown as <unk>)
    unit: str = "word"            # what one token of this tokenizer is, in words: "word" or "character"
    context: int | None = None    # the model's context when it is longer than what is read here (GPT-2: 1,024)

    @property
    def notices(self) -> list[str]:
        """Plain sentences about what happened to the text (its length, then its unknown tokens)."""
        return self.length_notices + ([self.unknown_notice()] if self.unknown else [])

    @property
    def unknown_words(self) -> list[str]:
        """The typed tokens read as <unk>, in order, each once."""
        return list(dict.fromkeys(p.text for p in self.pieces if p.unknown))

    def unknown_notice(self, named: str = "") -> str:
        """How many tokens are <unk>; `named` (already made safe for Markdown by the caller) lists them."""
        words = f"1 {self.unit} is" if self.unknown == 1 else f"{self.unknown} {self.unit}s are"
        return (f"{words} not in the model's vocabulary{f' ({named})' if named else ''}; the model reads "
                f"{'it' if self.unknown == 1 else 'each'} as <unk>.")

    @property
    def length_notices(self) -> list[str]:
        """A sentence about the text being cut to the context, when it was."""
        notes = []
        if self.dropped and self.context:
            notes.append(f"The text was {self.dropped + len(self.ids)} tokens long. The model could read "
                         f"{self.context:,}, but every page here shows at most {len(self.ids)} so that each number "
                         f"fits on a screen: only the last {len(self.ids)} tokens are used.")
        elif self.dropped:
            notes.append(f"The text was {self.dropped + len(self.ids)} tokens long, more than the model's context "
                         f"of {len(self.ids)}: only the last {len(self.ids)} tokens are used.")
        return notes


def prepare_text(tokenizer: Tokenizer, text: str, max_len: int, context: int | None = None) -> Prepared:
    """Tokenize `text`, keeping the last `max_len` tokens; empty text raises a friendly ValueError.

    `context`, when larger than `max_len`, is the model's own context (the notice then says both)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence first: the text is empty.")
    pieces = tokenizer.pieces(text)
    if not pieces:
        raise ValueError("The text has no tokens this model can read.")
    dropped = max(0, len(pieces) - max_len)
    kept = pieces[dropped:]
    return Prepared(ids=[p.id for p in kept], pieces=kept, dropped=dropped,
                    unknown=sum(p.unknown for p in kept), unit="character" if tokenizer.kind == "char" else "word",
                    context=context if context and context > max_len else None)
