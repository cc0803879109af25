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

    @property
    def notices(self) -> list[str]:
        """Plain sentences about what happened to the text, for the page to show."""
        notes = []
        if self.dropped:
            notes.append(f"The text was {self.dropped + len(self.ids)} tokens long, more than the model's context "
                         f"of {len(self.ids)}: only the last {len(self.ids)} tokens are used.")
        if self.unknown:
            words = f"1 {self.unit} is" if self.unknown == 1 else f"{self.unknown} {self.unit}s are"
            notes.append(f"{words} not in the model's vocabulary; the model reads "
                         f"{'it' if self.unknown == 1 else 'each'} as <unk>.")
        return notes


def prepare_text(tokenizer: Tokenizer, text: str, max_len: int) -> Prepared:
    """Tokenize `text`, keeping the last `max_len` tokens; empty text raises a friendly ValueError."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence first: the text is empty.")
    pieces = tokenizer.pieces(text)
    if not pieces:
        raise ValueError("The text has no tokens this model can read.")
    dropped = max(0, len(pieces) - max_len)
    kept = pieces[dropped:]
    return Prepared(ids=[p.id for p in kept], pieces=kept, dropped=dropped,
                    unknown=sum(p.unknown for p in kept), unit="character" if tokenizer.kind == "char" else "word")
