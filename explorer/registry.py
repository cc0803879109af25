"""Every page by name: the walk-through's steps in order, then the encoder-decoder, discoveries and the lab.

Pages, navigation, links and discoveries all read this registry. A place in the app is said by names
("attention page, tab what-if, field what-if = scaling"), never by a widget key or a tab's index: a page's tabs
and the view fields it keeps in session state are named here, and a moved tab or renamed key changes one line.
"""
from dataclasses import dataclass

FIELD_CHARS = 300       # a page field's value (in a link or a lesson), at most: the lab's probe sentence is the longest


@dataclass(frozen=True)
class Page:
    slug: str                                     # the page's URL path
    title: str
    file: str                                     # the page script, relative to streamlit_app.py
    icon: str                                     # a Material icon (served with Streamlit, nothing fetched)
    summary: str                                  # one line for the big picture
    tabs: tuple[tuple[str, str], ...] = ()        # (name, label), in order
    fields: tuple[tuple[str, str], ...] = ()      # (name, session key) of the page's own view fields
    linked: tuple[str, ...] = ()                  # the fields a link carries (the page checks a link's values)

    @property
    def labels(self) -> list[str]:
        """The tab labels, in order (explorer.app.layout.sections draws them)."""
        return [label for _, label in self.tabs]

    def tab(self, name: str) -> str:
        """The label of tab `name`."""
        tabs = dict(self.tabs)
        if name not in tabs:
            raise KeyError(f"the {self.slug} page has no tab {name!r}; it has {', '.join(tabs) or 'none'}")
        return tabs[name]

    @property
    def linked_keys(self) -> dict[str, str]:
        """{field name: session key} of the fields a link carries."""
        return {name: key for name, key in self.fields if name in self.linked}

    def field(self, name: str) -> str:
        """The session key of view field `name`."""
        fields = dict(self.fields)
        if name not in fields:
            raise KeyError(f"the {self.slug} page has no field {name!r}; it has {', '.join(fields) or 'none'}")
        return fields[name]


Step = Page           # a walk-through page


STEPS = [
    Page("home", "The big picture", "pages/home.py", ":material/home:",
         "From a typed sentence to a prediction of the next word."),
    Page("tokenization", "1. Tokenization", "pages/tokenization.py", ":material/text_fields:",
         "Cut the text into tokens and look each one up in the vocabulary.",
         tabs=(("tokens", "Your sentence as tokens"), ("three-ways", "Three ways to cut"), ("bpe", "BPE merges"),
               ("vocabulary", "The vocabulary"))),
    Page("embedding", "2. Embedding", "pages/embedding.py", ":material/scatter_plot:",
         "Turn each token id into a vector of numbers the model learned.",
         tabs=(("rows", "Your sentence's rows"), ("map", "The vocabulary map"), ("similar", "Similar tokens"),
               ("neighbours", "Nearest neighbours"))),
    Page("positions", "3. Positional encoding", "pages/positions.py", ":material/format_list_numbered:",
         "Add where each token stands, so word order is not lost.",
         tabs=(("seats", "The seat numbers"), ("dimensions", "Dimension by dimension"),
               ("sum", "Token + position"), ("alike", "Which seats look alike"), ("what-if", "What if?")),
         fields=(("sentence-a", "positions_sentence_a"), ("sentence-b", "positions_sentence_b"),
                 ("pair-model", "positions_pair_model"))),
    Page("attention", "4. Attention", "pages/attention.py", ":material/hub:",
         "Let every token gather information from the tokens before it.",
         tabs=(("qkv", "Queries, keys, values"), ("four-steps", "The four steps"), ("who-looks", "Who looks at whom"),
               ("every-head", "Every head"), ("what-if", "What if?")),
         fields=(("what-if", "attention_whatif"),), linked=("what-if",)),
    Page("feedforward", "5. Feed-forward", "pages/feedforward.py", ":material/memory:",
         "Process each token on its own: expand, activate, contract.",
         tabs=(("expand", "Expand, activate, contract"), ("fire", "Which neurons fire"),
               ("strongest", "The strongest neurons"), ("switched-off", "Switched off"), ("what-if", "What if?")),
         fields=(("what-if", "mlp_whatif"),), linked=("what-if",)),
    Page("residual", "6. Residual stream & norm", "pages/residual.py", ":material/stacked_line_chart:",
         "Add each layer's work to a running total and keep its scale in check.",
         tabs=(("wiring", "How one block is wired"), ("size", "Stream size"), ("adds", "What a layer adds"),
               ("norm", "Normalization"), ("lens", "Logit lens"))),
    Page("prediction", "7. Next-token prediction", "pages/prediction.py", ":material/casino:",
         "Turn the final vectors into probabilities for the next token.",
         fields=(("temperature", "prediction_temperature"), ("top-k", "prediction_top_k"),
                 ("top-p", "prediction_top_p"), ("strategy", "prediction_strategy")),
         linked=("temperature", "top-k", "top-p", "strategy")),
    Page("why", "8. Why this prediction?", "pages/why.py", ":material/psychology_alt:",
         "Split a prediction into what each head and layer wrote, follow its routes, patch one sentence into another.",
         tabs=(("attribution", "Attribution"), ("routes", "Contribution routes"), ("patching", "Patching")),
         fields=(("target", "why_target"), ("other", "why_other"), ("corrupted", "why_corrupted"),
                 ("decoder-position", "why_decoder_position"))),
]
# The lab's setup knobs (its setup keys): a link names its preset and each knob changed from it, as "n-layers" for
# n_layers (explorer/lab/link.py). The text a student trains on is not one: a link never carries it.
LAB_KNOBS = ("task", "tokenizer", "probe", "n_layers", "n_heads", "d_model", "d_ff", "max_len", "pos", "norm",
             "norm_position", "activation", "embed_scale", "optimizer", "lr", "batch_size", "warmup", "schedule",
             "steps", "grad_clip", "label_smoothing", "weight_decay")
_LAB_FIELDS = (("preset", "lab_preset"), *((knob.replace("_", "-"), f"lab_{knob}") for knob in LAB_KNOBS))
LAB = Page("training", "Training lab", "pages/training.py", ":material/model_training:",
           "Train a small transformer live, watch it learn, then explore it.",
           fields=_LAB_FIELDS, linked=tuple(name for name, _ in _LAB_FIELDS))
DISCOVER = Page("discoveries", "Discoveries", "pages/discoveries.py", ":material/lightbulb:",
                "Skills hidden in the model, found by searching its heads: guess first, then see.",
                fields=(("card", "discovery_card"),), linked=("card",))
FEATURES = Page("features", "Features", "pages/features.py", ":material/neurology:",
                "What the model's neurons respond to, steering it with them, and how many features fit in few "
                "dimensions.",
                tabs=(("neurons", "Neurons"), ("dictionary", "Dictionary features"), ("steering", "Steering"),
                      ("superposition", "Superposition")),
                fields=(("neuron", "features_neuron"), ("feature", "features_feature"),
                        ("dictionary", "features_dictionary"), ("steer-by", "features_steer_by"), ("strength", "features_strength"),
                        ("sentence-a", "features_sentence_a"), ("sentence-b", "features_sentence_b"),
                        ("sparsity", "features_sparsity")),
                linked=("neuron", "feature", "dictionary", "steer-by", "strength", "sentence-a", "sentence-b", "sparsity"))
LEARNING = Page("learning", "Watch it learn", "pages/learning.py", ":material/timeline:",
                "A real model (Pythia) at steps of its training: its loss on your sentence, its next word and when "
                "its induction heads appear.")
ENCODER_DECODER = Page("encoder-decoder", "Encoder-decoder", "pages/encoder-decoder.py", ":material/translate:",
                       "The 2017 transformer: an encoder reads the source, a decoder writes the target through "
                       "cross-attention.",
                       tabs=(("cross", "Cross-attention"), ("encoder", "Encoder self-attention"),
                             ("decoder", "Decoder self-attention"), ("decoding", "Decoding step by step"),
                             ("what-if", "What if?")))
CLASS = Page("class", "Class", "pages/class.py", ":material/groups:",
              "Lessons: walk one alone, or lead a class that follows on every student's screen and answers live.")
BY_SLUG = {page.slug: page for page in [*STEPS, ENCODER_DECODER, DISCOVER, FEATURES, LEARNING, LAB, CLASS]}
NAVIGATION = [*STEPS, ENCODER_DECODER, DISCOVER, FEATURES, LEARNING, LAB, CLASS]   # the sidebar's pages, in order
GROUPS = {STEPS[0].slug: "Walk-through", ENCODER_DECODER.slug: "Beyond the walk-through"}   # named above a page


def neighbours(slug: str) -> tuple[Page | None, Page | None]:
    """The steps before and after `slug` (None at either end, and for a page outside the walk-through)."""
    if slug not in [s.slug for s in STEPS]:
        return None, None
    i = [s.slug for s in STEPS].index(slug)
    return (STEPS[i - 1] if i > 0 else None), (STEPS[i + 1] if i + 1 < len(STEPS) else None)
