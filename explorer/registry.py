"""The walk-through's steps, in order: one page each. Pages, navigation and links all read this list."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    slug: str          # the page's URL path
    title: str
    file: str          # the page script, relative to streamlit_app.py
    icon: str          # a Material icon (served with Streamlit, nothing fetched from outside)
    summary: str       # one line for the big picture


STEPS = [
    Step("home", "The big picture", "pages/home.py", ":material/home:",
         "From a typed sentence to a prediction of the next word."),
    Step("tokenization", "1. Tokenization", "pages/tokenization.py", ":material/text_fields:",
         "Cut the text into tokens and look each one up in the vocabulary."),
    Step("embedding", "2. Embedding", "pages/embedding.py", ":material/scatter_plot:",
         "Turn each token id into a vector of numbers the model learned."),
    Step("positions", "3. Positional encoding", "pages/positions.py", ":material/format_list_numbered:",
         "Add where each token stands, so word order is not lost."),
    Step("attention", "4. Attention", "pages/attention.py", ":material/hub:",
         "Let every token gather information from the tokens before it."),
    Step("feedforward", "5. Feed-forward", "pages/feedforward.py", ":material/memory:",
         "Process each token on its own: expand, activate, contract."),
    Step("residual", "6. Residual stream & norm", "pages/residual.py", ":material/stacked_line_chart:",
         "Add each layer's work to a running total and keep its scale in check."),
    Step("prediction", "7. Next-token prediction", "pages/prediction.py", ":material/casino:",
         "Turn the final vectors into probabilities for the next token."),
]
LAB = Step("training", "Training lab", "pages/training.py", ":material/model_training:",
           "Train a small transformer live, watch it learn, then explore it.")
DISCOVER = Step("discoveries", "Discoveries", "pages/discoveries.py", ":material/lightbulb:",
                "Skills hidden in the model, found by searching its heads: guess first, then see.")
ENCODER_DECODER = Step("encoder-decoder", "Encoder-decoder", "pages/encoder-decoder.py", ":material/translate:",
                       "The 2017 transformer: an encoder reads the source, a decoder writes the target through "
                       "cross-attention.")
BY_SLUG = {step.slug: step for step in [*STEPS, ENCODER_DECODER, DISCOVER, LAB]}


def neighbours(slug: str) -> tuple[Step | None, Step | None]:
    """The steps before and after `slug` (None at either end, and for a page outside the walk-through)."""
    if slug not in [s.slug for s in STEPS]:
        return None, None
    i = [s.slug for s in STEPS].index(slug)
    return (STEPS[i - 1] if i > 0 else None), (STEPS[i + 1] if i + 1 < len(STEPS) else None)
