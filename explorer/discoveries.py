"""Discoveries: skills hidden in a model, found by searching its heads, for a student to guess and then see.

Nothing here is typed in: every head, token and number on a card comes from a search over the model
(plain functions of a Bundle; the web app's side, caching and "Show me", is explorer/app/discover.py). A card asks a question, keeps the
student's guess, reveals the model's answer with its numbers, and "Show me" opens the page that shows it.

    pronoun      the head that looks from "it"/"they" back to the subject (attention, over probe sentences)
    knockout     the head whose knockout hurts the choice of "it" or "they" most (over probe sentences)
    agreement    the head that looks from the last word of "the cats near the dog" back to "cats"
    names        the head that looks from the full stop back to the name it will copy
    positions    the same words in two orders, with the seat numbers removed and the mask lifted
    scaling      every head's attention with and without the division by √K
    diverging    the training lab's "diverging" preset: a learning rate that is too high
"""
import math
from dataclasses import dataclass, field

import plotly.graph_objects as go
import torch

from model import edits
from model.checkpoint import Bundle
from model.corpora import ANIMALS, NAMES, TINY_TALES_WORDS, tiny_tales_probes
from model.transformer import block_name

from explorer.lessons import LessonStep
from explorer.questions import Question
from explorer.steps import attention
from explorer.steps import positions
from explorer.plot import SEQUENTIAL, labels, safe, style
from explorer.registry import BY_SLUG, Page
from explorer.view import quote
from explorer.lab.training import PRESETS, new_run

N_PROBES = 40                   # probe sentences per search (each probe set is balanced, see tiny_tales_probes)
SUBJECTS = set(ANIMALS) | set(ANIMALS.values())      # the nouns a tiny tale's subject can be
FALLBACK = "tinytales"          # whose discoveries to show when the sidebar's model cannot read tiny tales
DIVERGING, USUAL = "diverging", "walkthrough"        # training-lab presets: too high a learning rate, and its base
MAX_LAB_STEPS = 300             # the diverging run is followed for at most this many steps

INTRO = """\
A trained model has skills nobody programmed: it learned them from its stories. Each card below is one
such skill, found by **searching the model**: we tried every head on dozens of sentences and kept the one
that does the job best. Before each answer, make a guess (so you find out whether the model thinks the
way you expected), press **Reveal**, then **Show me** to open the page where you can see it for yourself.
"""


@dataclass(frozen=True)
class Target:
    """Where "Show me" goes, by name (explorer/registry.py): a page, its tab and the view, set as a link would."""
    slug: str
    model: str | None = None
    text: str | None = None
    layer: int | None = None
    head: int | None = None
    token: int | None = None
    tab: str | None = None                          # the tab's name on that page, e.g. "what-if"
    fields: tuple[tuple[str, object], ...] = ()     # the page's own view fields by name, e.g. ("what-if", "scaling")
    preset: str | None = None                       # a training-lab preset to load

    @property
    def page(self) -> Page:
        return BY_SLUG[self.slug]

    @property
    def section(self) -> str | None:
        """The label of the tab to open (None: the page's first)."""
        return self.page.tab(self.tab) if self.tab else None

    @property
    def state(self) -> dict[str, object]:
        """The page's own view fields as session keys and values."""
        return {self.page.field(name): value for name, value in self.fields}


@dataclass(frozen=True)
class Discovery:
    """One card: a story a teacher can read aloud, a question, the model's answer and where to see it."""
    key: str
    title: str
    story: str                   # Markdown; never gives the answer away
    question: str
    options: tuple[str, ...]
    answer: str | None           # the model's answer, one of options (None: the card cannot be answered)
    reveal: str                  # Markdown: the model's answer with its numbers
    target: Target | None
    facts: dict = field(default_factory=dict, compare=False)    # the numbers behind the words, for tests
    answered_by: str = "The model"                                 # who gives the answer, beside the guess


def head_name(layer: int, head: int) -> str:
    return f"layer {layer}, head {head}"


# --- reading tiny tales ---------------------------------------------------------------------------


def word_ids(bundle: Bundle, words: list[str]) -> list[int] | None:
    """The ids of `words`, one token per word, or None if the model does not read them word by word."""
    tok = bundle.tokenizer
    ids = tok.encode(" ".join(words))
    if len(ids) != len(words) or (tok.unk_id is not None and tok.unk_id in ids):
        return None
    return ids


def reads_tiny_tales(bundle: Bundle) -> bool:
    """Whether the model reads every tiny-tales word as one token of its own (a word model trained on them)."""
    return word_ids(bundle, sorted(TINY_TALES_WORDS)) is not None and bundle.model.cfg.max_len >= 12


def subject_position(words: list[str]) -> int:
    """The position of the sentence's subject: the first animal noun."""
    return next(i for i, w in enumerate(words) if w in SUBJECTS)


# --- searching the heads ----------------------------------------------------------------------------

Item = tuple[list[int], int, int]          # token ids, query position, key position


def _by_length(items: list) -> dict[int, list]:
    groups: dict[int, list] = {}
    for item in items:
        groups.setdefault(len(item[0]), []).append(item)
    return groups


def head_attention(model, items: list[Item]) -> torch.Tensor:
    """Mean attention from each item's query to its key, per layer and head: (L, H)."""
    cfg = model.cfg
    total = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
    for group in _by_length(items).values():
        trace = model.run([ids for ids, _, _ in group])
        rows = torch.arange(len(group))
        queries = torch.tensor([q for _, q, _ in group])
        keys = torch.tensor([k for _, _, k in group])
        for layer in range(cfg.n_layers):
            pattern = trace["pattern", layer]                          # (B, H, T, T)
            total[layer] += pattern[rows, :, queries, keys].double().sum(0)          # (H,)
    return total / len(items)


def _margins(model, groups: dict, changes=None) -> torch.Tensor:
    """logit(good) - logit(bad) after each prefix: (N,), in the order of the groups."""
    out = []
    for group in groups.values():
        logits = model.run([ids for ids, _, _ in group], edits=changes)["logits"][:, -1]    # (B, V)
        rows = torch.arange(len(group))
        good = torch.tensor([g for _, g, _ in group])
        bad = torch.tensor([b for _, _, b in group])
        out.append((logits[rows, good] - logits[rows, bad]).double())
    return torch.cat(out)


def knockout_drop(model, items: list[Item]) -> torch.Tensor:
    """How much knocking out each head lowers the margin logit(good) - logit(bad), on average: (L, H).

    Items are (prefix ids, good id, bad id); the margin is read at the prefix's last position.
    """
    cfg = model.cfg
    groups = _by_length(items)
    base = _margins(model, groups)
    drop = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            drop[layer, head] = (base - _margins(model, groups, edits.knock_out_head(layer, head))).mean()
    return drop


def best_head(scores: torch.Tensor) -> tuple[int, int]:
    """(layer, head) of the largest score."""
    flat = int(scores.argmax())
    return divmod(flat, scores.shape[1])


def runner_up(scores: torch.Tensor) -> tuple[int, int]:
    """(layer, head) of the second largest score."""
    flat = int(scores.flatten().topk(2).indices[1])
    return divmod(flat, scores.shape[1])


def _probe_words(bundle: Bundle, kind: str) -> list[tuple[list[str], list[int]]]:
    """The probe set `kind` as (words, ids) of prefix + good word, leaving out any the model cannot read."""
    out = []
    for probe in tiny_tales_probes(N_PROBES)[kind]:
        words = f"{probe.prefix} {probe.good}".split()
        ids = word_ids(bundle, words)
        if ids is not None and len(ids) <= bundle.model.cfg.max_len:
            out.append((words, ids))
    return out


def pronoun_items(bundle: Bundle) -> list[Item]:
    """From the pronoun ("it", "they") to the subject, in every pronoun probe."""
    return [(ids, len(words) - 1, subject_position(words)) for words, ids in _probe_words(bundle, "pronoun")]


def agreement_items(bundle: Bundle) -> list[Item]:
    """From the last word before the verb (the attractor noun) to the subject, in "the cat near the dogs"."""
    return [(ids[:-1], len(words) - 2, subject_position(words))
            for words, ids in _probe_words(bundle, "agreement_across_phrase")]


def name_items(bundle: Bundle) -> list[Item]:
    """From the full stop after "there was a girl named mia ." back to the name."""
    return [(ids[:-1], len(words) - 2, words.index("named") + 1) for words, ids in _probe_words(bundle, "names")]


def pronoun_choice_items(bundle: Bundle) -> list[Item]:
    """(prefix ids, right pronoun, wrong pronoun) for "the cats sat on the mat because" -> they / it."""
    tok = bundle.tokenizer
    wrong = {"it": "they", "they": "it"}
    return [(ids[:-1], ids[-1], tok.encode(wrong[words[-1]])[0]) for words, ids in _probe_words(bundle, "pronoun")]


# --- the cards --------------------------------------------------------------------------------------


def _probabilities(trace, position: int = -1) -> torch.Tensor:
    return torch.softmax(trace["logits"][0, position].double(), -1)                  # (V,)


def _options_before(words: list[str], position: int) -> tuple[str, ...]:
    """The distinct words before `position`, in order: the choices for "which word will it look at?"."""
    return tuple(dict.fromkeys(words[:position]))


def _ranked(scores: torch.Tensor, number: str) -> str:
    """'more than any other of the 8 heads (next: layer 0, head 1 with 0.16)'."""
    l2, h2 = runner_up(scores)
    return (f"more than any other of the {scores.numel()} heads (next: {head_name(l2, h2)} with "
            f"{number.format(float(scores[l2, h2]))})")


PRONOUN_SENTENCE = "the dog chased the cat because it was hungry"


def pronoun_card(bundle: Bundle, name: str) -> Discovery | None:
    items = pronoun_items(bundle)
    words = PRONOUN_SENTENCE.split()
    ids = word_ids(bundle, words)
    if not items or ids is None:
        return None
    scores = head_attention(bundle.model, items)                                          # (L, H)
    layer, head = best_head(scores)
    query = words.index("it")
    row = bundle.model.run(ids, names=[block_name("pattern", layer)])["pattern", layer][0, head, query, : query + 1]   # (query+1,)
    top = int(row.argmax())
    weight = float(row[top])
    subject = subject_position(words)
    who = " (the sentence's subject, the one who did the chasing)" if top == subject else ""
    story = (f"In {quote(PRONOUN_SENTENCE)}, the word “it” stands for an animal mentioned earlier. To go on, the "
             f"model must know which one. We searched all {scores.numel()} heads of {name}, over {len(items)} "
             "tiny-tales sentences with “it” or “they”, for the head that looks most from the pronoun back to "
             f"the sentence's subject: **{head_name(layer, head)}**. A head can only pass on what it looks at.")
    reveal = (f"**{head_name(layer, head).capitalize()}** puts **{weight:.2f}** of “it”'s attention on "
              f"{quote(words[top])}{who}. Over the {len(items)} search sentences it sends **{float(scores[layer, head]):.2f}** "
              f"of the pronoun's attention to the subject on average, {_ranked(scores, '{:.2f}')}. In the stories "
              "the model learned from, “it” always meant the subject, so that is what it learned to look for.")
    return Discovery(
        "pronoun", "Who is “it”?", story, "Which word will “it” look at most, through this head?",
        _options_before(words, query), words[top], reveal,
        Target("attention", name, PRONOUN_SENTENCE, layer, head, query, "who-looks"),
        dict(layer=layer, head=head, query=query, key=top, weight=weight, mean=float(scores[layer, head]),
             n=len(items), scores=scores))


KNOCKOUT_SENTENCE = "the cats sat on the mats because"


def knockout_card(bundle: Bundle, name: str) -> Discovery | None:
    items = pronoun_choice_items(bundle)
    words = KNOCKOUT_SENTENCE.split()
    ids = word_ids(bundle, words)
    if not items or ids is None:
        return None
    drops = knockout_drop(bundle.model, items)                                            # (L, H)
    layer, head = best_head(drops)
    vocab = bundle.tokenizer.vocab
    before = _probabilities(bundle.model.run(ids))
    after = _probabilities(bundle.model.run(ids, edits=edits.knock_out_head(layer, head)))
    b, a = int(before.argmax()), int(after.argmax())
    last = len(words) - 1
    looks = bundle.model.run(ids, names=[block_name("pattern", layer)])["pattern", layer][0, head, last, : last + 1]
    subject = subject_position(words)
    story = (f"After {quote(KNOCKOUT_SENTENCE)}, the next word should be “they”: there were several cats. "
             f"We switched off each of the {drops.numel()} heads of {name} in turn (its output set to zero), on "
             f"{len(items)} sentences like this one, and measured how much the model's preference for the right "
             f"pronoun over the wrong one fell. Switching off **{head_name(layer, head)}** hurt most.")
    changed = "it changes to" if a != b else "it stays"
    focus = int(looks.argmax())
    carries = (": it carries the news that there were many" if focus == subject
               else f", and the most on {quote(words[focus])}")
    reveal = (f"As it is, the model predicts {quote(vocab[b])} at **{float(before[b]):.2f}**. With "
              f"{head_name(layer, head)} knocked out, {changed} {quote(vocab[a])} at **{float(after[a]):.2f}**. "
              f"This head, sitting on “because”, puts **{float(looks[subject]):.2f}** of its attention on "
              f"{quote(words[subject])}{carries}. Over the {len(items)} search "
              f"sentences, knocking it out lowers the model's score for the right pronoun, compared with the wrong "
              f"one, by **{float(drops[layer, head]):.2f}** on average, {_ranked(drops, '{:.2f}')}.")
    options = tuple(dict.fromkeys([vocab[b], "it", "they", vocab[a]]))
    return Discovery(
        "knockout", "Switch off one head: “it” or “they”?", story,
        f"With {head_name(layer, head)} switched off, which word will the model predict after “because”?",
        options, vocab[a], reveal,
        Target("attention", name, KNOCKOUT_SENTENCE, layer, head, last, "what-if",
               fields=(("what-if", "chosen"),)),                  # the head chosen: this one
        dict(layer=layer, head=head, before=vocab[b], p_before=float(before[b]), after=vocab[a],
             p_after=float(after[a]), drop=float(drops[layer, head]), n=len(items), scores=drops,
             weight=float(looks[subject])))


AGREEMENT_SENTENCE = "the cats near the dog"
PLURAL_VERBS, SINGULAR_VERBS = ("are", "were"), ("is", "was")
AGREEMENT_OPTIONS = ("a plural verb: “are” or “were”", "a singular verb: “is” or “was”")


def agreement_card(bundle: Bundle, name: str) -> Discovery | None:
    items = agreement_items(bundle)
    words = AGREEMENT_SENTENCE.split()
    ids = word_ids(bundle, words)
    if not items or ids is None:
        return None
    scores = head_attention(bundle.model, items)                                          # (L, H)
    layer, head = best_head(scores)
    tok = bundle.tokenizer
    plural_ids = [tok.encode(w)[0] for w in PLURAL_VERBS]
    singular_ids = [tok.encode(w)[0] for w in SINGULAR_VERBS]
    trace = bundle.model.run(ids)
    p = _probabilities(trace)
    p_plural, p_singular = float(p[plural_ids].sum()), float(p[singular_ids].sum())
    knocked = _probabilities(bundle.model.run(ids, edits=edits.knock_out_head(layer, head)))
    k_plural = float(knocked[plural_ids].sum())
    last, subject = len(words) - 1, subject_position(words)
    weight = float(trace["pattern", layer][0, head, last, subject])
    story = (f"In {quote(AGREEMENT_SENTENCE + ' …')}, the verb must agree with “cats”, the subject, not with "
             "“dog”, the nearest noun. The model makes its guess while sitting on “dog”, so some head has to "
             f"fetch the subject's number from further back. We searched all {scores.numel()} heads of {name}, "
             f"over {len(items)} sentences like this, for the head that looks most from the last word back to "
             f"the subject: **{head_name(layer, head)}**.")
    reveal = (f"The model gives **{p_plural:.2f}** to the plural verbs “are” and “were” together, and "
              f"**{p_singular:.2f}** to “is” and “was”. {head_name(layer, head).capitalize()} puts "
              f"**{weight:.2f}** of “dog”'s attention on “cats”; over the {len(items)} search sentences it puts "
              f"**{float(scores[layer, head]):.2f}** on the subject, {_ranked(scores, '{:.2f}')}. Knock this head "
              f"out and the plural verbs get **{k_plural:.2f}**.")
    return Discovery(
        "agreement", "“Is” or “are”? Agreement across a phrase", story,
        f"Which will the model predict after {quote(AGREEMENT_SENTENCE)}?", AGREEMENT_OPTIONS,
        AGREEMENT_OPTIONS[0] if p_plural > p_singular else AGREEMENT_OPTIONS[1], reveal,
        Target("attention", name, AGREEMENT_SENTENCE, layer, head, last, "who-looks"),
        dict(layer=layer, head=head, query=last, key=subject, weight=weight, mean=float(scores[layer, head]),
             p_plural=p_plural, p_singular=p_singular, knocked_plural=k_plural, n=len(items), scores=scores))


NAME_SENTENCE = "there was a girl named lily ."


def names_card(bundle: Bundle, name: str) -> Discovery | None:
    items = name_items(bundle)
    words = NAME_SENTENCE.split()
    ids = word_ids(bundle, words)
    if not items or ids is None:
        return None
    scores = head_attention(bundle.model, items)                                          # (L, H)
    layer, head = best_head(scores)
    trace = bundle.model.run(ids)
    p = _probabilities(trace)
    vocab = bundle.tokenizer.vocab
    top = int(p.argmax())
    last, named = len(words) - 1, words.index("named") + 1
    weight = float(trace["pattern", layer][0, head, last, named])
    girl = words[named]
    other = next(n for n in NAMES["girl"] if n != girl)
    n_names = sum(len(names) for names in NAMES.values())
    story = (f"Tiny tales introduce a character, {quote(NAME_SENTENCE)}, and the next sentence starts with the "
             f"name again. There are {n_names} names and any of them can come up, so the model cannot just learn "
             f"one: it has to copy the name it just read. We searched all {scores.numel()} heads of {name}, over "
             f"{len(items)} such stories, for the head that looks most from the full stop back to the name: "
             f"**{head_name(layer, head)}**.")
    reveal = (f"The model predicts {quote(vocab[top])} at **{float(p[top]):.2f}** ({quote(other)} gets "
              f"**{float(p[vocab.index(other)]):.2f}**). {head_name(layer, head).capitalize()} puts **{weight:.2f}** "
              f"of the full stop's attention on {quote(girl)}; over the {len(items)} search stories it puts "
              f"**{float(scores[layer, head]):.2f}** on the name, {_ranked(scores, '{:.2f}')}. Looking at the name "
              "and passing it on is how a transformer copies.")
    options = tuple(dict.fromkeys([girl, other, "the", "there", vocab[top]]))
    return Discovery(
        "names", "Copying a name", story, f"Which word will the model predict after {quote(NAME_SENTENCE)}?",
        options, vocab[top], reveal,
        Target("attention", name, NAME_SENTENCE, layer, head, last, "who-looks"),
        dict(layer=layer, head=head, query=last, key=named, weight=weight, mean=float(scores[layer, head]),
             top=vocab[top], p_top=float(p[top]), n=len(items), scores=scores))


POSITION_OPTIONS = ("Yes: its predictions still differ", "No: both sentences look the same to it")


def order_comparison(bundle: Bundle, a: str, b: str) -> positions.OrderComparison:
    """The positions page's comparison of two orders, computed from the model directly."""
    def traces(ids):
        return [bundle.model.run(ids), bundle.model.run(ids, edits=edits.remove_positions(bundle.model.cfg)),
                bundle.model.run(ids, edits=edits.remove_positions(bundle.model.cfg), causal=False)]
    ids_a, ids_b = bundle.tokenizer.encode(a), bundle.tokenizer.encode(b)
    return positions.compare_orders(bundle.tokenizer.vocab, ids_a, ids_b, traces(ids_a), traces(ids_b))


def positions_card(bundle: Bundle, name: str) -> Discovery | None:
    a, b = positions.DEFAULT_PAIR
    if word_ids(bundle, a.split()) is None or word_ids(bundle, b.split()) is None:
        return None
    c = order_comparison(bundle, a, b)
    no_pos, bag = c.pred_diff[1], c.pred_diff[2]
    column = positions.CONDITIONS[1]
    word = str(c.words.loc[c.words[column].idxmax(), "word"])
    n = len(c.words)
    story = (f"{quote(a)} and {quote(b)} use the same words; only the order differs. Attention by itself "
             "ignores order: it mixes words like a bag. Order reaches the model in two ways: the seat numbers "
             "added to each word (the positional encoding) and the causal mask (each word sees only itself and "
             "the words before it). What if we take the seat numbers away?")
    still = no_pos >= positions.SAME
    reveal = (f"{'Yes' if still else 'No'}: without seat numbers, the model's prediction after {quote(word)} still "
              f"differs by **{no_pos:.4f}** between the two sentences. Through the mask, a word sees different "
              f"words before it in each order. Lift the mask as well and the largest difference is "
              f"**{bag:.4f}** ({c.n_same[2]} of {n} words predicted the same): now the model sees only a bag "
              "of words and cannot tell who chased whom.")
    if not still:
        reveal = (f"No: without seat numbers every word is predicted the same in both orders (largest difference "
                  f"**{no_pos:.4f}**), and with the mask lifted too (**{bag:.4f}**).")
    return Discovery(
        "positions", "Word order: seat numbers and the mask", story,
        "With the seat numbers removed, can the model still tell the two sentences apart?", POSITION_OPTIONS,
        POSITION_OPTIONS[0] if still else POSITION_OPTIONS[1], reveal,
        Target("positions", name, a, tab="what-if",
               fields=(("sentence-a", a), ("sentence-b", b), ("pair-model", name))),
        dict(no_positions=no_pos, bag=bag, trained=c.pred_diff[0], word=word, n_same_bag=c.n_same[2], n=n))


SCALING_OPTIONS = ("Sharper: each word focuses on fewer words", "Blurrier: attention spreads out",
                   "Nothing changes")


def scaling_card(bundle: Bundle, name: str) -> Discovery | None:
    words = PRONOUN_SENTENCE.split()
    ids = word_ids(bundle, words)
    if ids is None:
        return None
    model = bundle.model
    cfg = model.cfg
    before, after = model.run(ids), model.run(ids, edits=edits.remove_scaling(cfg))
    top_before = torch.stack([before["pattern", l][0].amax(-1) for l in range(cfg.n_layers)])  # (L, H, T)
    top_after = torch.stack([after["pattern", l][0].amax(-1) for l in range(cfg.n_layers)])    # (L, H, T)
    mean_before, mean_after = float(top_before.double().mean()), float(top_after.double().mean())
    gain = (top_after - top_before).double().mean(-1)                                    # (L, H)
    layer, head = best_head(gain)
    change = (_probabilities_all(after) - _probabilities_all(before)).abs().amax(-1)     # (T,)
    token = int(change.argmax())
    K = cfg.d_head
    story = (f"Before the softmax, every head divides its match scores by √K = √{K} = {math.sqrt(K):g} (each head "
             f"works with K = {K} numbers). We ran {quote(PRONOUN_SENTENCE)} through {name} as it is and without "
             f"that division, so every score is {math.sqrt(K):g} times larger, and compared all "
             f"{cfg.n_layers * cfg.n_heads} heads' attention.")
    sharper = mean_after > mean_before + 0.005
    answer = SCALING_OPTIONS[0] if sharper else SCALING_OPTIONS[1] if mean_after < mean_before - 0.005 \
        else SCALING_OPTIONS[2]
    reveal = (f"{answer.split(':')[0]}. As trained, a word's strongest attention weight is **{mean_before:.2f}** on "
              f"average (all heads, all words); without √K it is **{mean_after:.2f}**. "
              f"{head_name(layer, head).capitalize()} sharpens most: **{float(top_before[layer, head].double().mean()):.2f}**"
              f" → **{float(top_after[layer, head].double().mean()):.2f}**. The softmax turns a larger gap between "
              "scores into a more lopsided share, so the winner takes almost everything; in a bigger model with "
              "longer vectors the scores grow even more, which is why the division is there. The next-word "
              f"forecasts change by at most **{float(change[token]):.2f}** here, after {quote(words[token])}.")
    return Discovery(
        "scaling", "Why divide by √K?", story, "Without the division by √K, what happens to the attention?",
        SCALING_OPTIONS, answer, reveal,
        Target("attention", name, PRONOUN_SENTENCE, layer, head, token, "what-if",
               fields=(("what-if", "scaling"),)),
        dict(layer=layer, head=head, token=token, mean_before=mean_before, mean_after=mean_after,
             change=float(change[token])))


def sharpness_figure(bundle: Bundle, layer: int, head: int, presenter: bool = False) -> go.Figure:
    """One head's attention pattern on the scaling card's sentence, as trained and without √K, side by side."""
    ids = bundle.tokenizer.encode(PRONOUN_SENTENCE)
    model = bundle.model
    panels = [("as trained", model.run(ids)), ("without √K", model.run(ids, edits=edits.remove_scaling(model.cfg)))]
    vocab = bundle.tokenizer.vocab
    names = [safe(t) for t in labels([vocab[i] for i in ids])]
    layout = dict(title=f"Layer {layer} head {head}: as trained and without √K", annotations=[],
                  coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=1, colorbar=dict(
                      title=dict(text="weight"), orientation="h", y=-0.08, yanchor="top", thickness=12)))
    data = []
    for n, (title, trace) in enumerate(panels):
        axis = "" if n == 0 else str(n + 1)
        x0 = n * 0.53
        layout[f"xaxis{axis}"] = dict(domain=[x0, x0 + 0.47], anchor=f"y{axis}", showticklabels=False)
        layout[f"yaxis{axis}"] = dict(anchor=f"x{axis}", autorange="reversed", showticklabels=n == 0,
                                      tickvals=list(range(len(names))), ticktext=names)
        layout["annotations"].append(dict(text=title, x=x0 + 0.235, y=1.0, xref="paper", yref="paper",
                                          showarrow=False, yanchor="bottom"))
        data.append(go.Heatmap(z=trace["pattern", layer][0, head].numpy(), xaxis=f"x{axis}",
                               yaxis=f"y{axis}", coloraxis="coloraxis", name=title,
                               customdata=[[[q, k] for k in names] for q in names],
                               hovertemplate=(f"{title}<br>query %{{customdata[0]}}<br>key %{{customdata[1]}}"
                                              "<br>weight %{z:.4f}<extra></extra>")))
    return style(go.Figure(data, layout=layout), presenter, 420)


def _probabilities_all(trace) -> torch.Tensor:
    return torch.softmax(trace["logits"][0].double(), -1)                                # (T, V)


LAB_OPTIONS = ("It falls faster than usual", "It falls, but slowly", "It jumps around and blows up")


@dataclass(frozen=True)
class LabOutcome:
    """How a training-lab preset's run went: its losses step by step and where it stopped."""
    losses: tuple[float, ...]      # the training loss of each step that finished
    diverged_at: int | None        # the step at which the trainer stopped it (None: it did not diverge)
    cause: str | None
    final_loss: float | None       # the loss at that step (NaN or inf when the numbers overflowed)


def lab_outcome(preset: str, max_steps: int = MAX_LAB_STEPS) -> LabOutcome:
    """Train preset `preset` as the lab does (seed 0) for up to `max_steps` steps, or until it diverges."""
    run = new_run(PRESETS[preset][1], preset)
    losses = []
    while run.trainer.steps_done < min(max_steps, run.setup.train.steps) and run.trainer.divergence is None:
        metrics = run.trainer.step(1)
        if metrics is not None:
            losses.append(metrics.loss)
    d = run.trainer.divergence
    return LabOutcome(tuple(losses), d.step if d else None, d.cause if d else None, d.loss if d else None)


def diverging_card(outcome: LabOutcome | None = None) -> Discovery:
    """The training lab's diverging preset; the outcome (a short training run) is needed only for the reveal."""
    title, question = "A learning rate that is too high", "What will the training loss do?"
    if DIVERGING not in PRESETS:
        return Discovery("diverging", title, "This version of the training lab has no “diverging” preset yet, so "
                         "there is nothing to show here.", question, LAB_OPTIONS, None, "", None)
    fast_setup, usual_setup = PRESETS[DIVERGING][1], PRESETS[USUAL][1]
    fast, usual = fast_setup.train, usual_setup.train
    optimizer = {"adamw": "AdamW", "sgd": "SGD"}
    same = "the same model" if (fast_setup.model, fast_setup.task) == (usual_setup.model, usual_setup.task) \
        else "a model"
    without = [what for what, off in (("warm-up", fast.warmup == 0), ("gradient clipping", not fast.grad_clip)) if off]
    story = (f"Training nudges every weight a little against its gradient; the learning rate sets how big the "
             f"nudge is. The lab's {USUAL} preset trains its small model with {optimizer[usual.optimizer]} at a "
             f"learning rate of {usual.lr:g}. The {DIVERGING} preset trains {same} with "
             f"{optimizer[fast.optimizer]} at a learning rate of **{fast.lr:g}**"
             + (f", with no {' and no '.join(without)}" if without else "") + ". Think of a dart player who "
             "corrects each miss so hard that the next dart lands even further off, on the other side.")
    target = Target("training", preset=DIVERGING)
    if outcome is None:
        return Discovery("diverging", title, story, question, LAB_OPTIONS, None, "", target)
    losses = outcome.losses
    if outcome.diverged_at is not None:
        answer = LAB_OPTIONS[2]
        reveal = (f"It blows up. In our run of this preset the loss started at **{losses[0]:.2f}**, jumped around "
                  f"(as high as **{max(losses):.2f}**) and reached **{outcome.final_loss:.2f}** at step "
                  f"**{outcome.diverged_at}**, where the lab stopped it ({outcome.cause}). Each step overshot, so "
                  "the next gradient was larger still. Press Start in the lab to watch it happen; then try a smaller "
                  "learning rate.")
    else:
        answer = LAB_OPTIONS[0] if losses[-1] < losses[0] else LAB_OPTIONS[2]
        reveal = (f"In our run of {len(losses)} steps the loss went from **{losses[0]:.2f}** to "
                  f"**{losses[-1]:.2f}** without blowing up.")
    return Discovery("diverging", title, story, question, LAB_OPTIONS, answer, reveal, target,
                     dict(first=losses[0], highest=max(losses), step=outcome.diverged_at, cause=outcome.cause,
                          final=outcome.final_loss), answered_by="The training run")


MODEL_CARDS = (pronoun_card, knockout_card, agreement_card, names_card, positions_card, scaling_card)


# "Ask the class" on a card: its view goes into the lesson being built, with a question the model answers on that
# view (the card's own words where they ask the same thing), or for the lab's run a poll of the card's options.
CLASS_QUESTIONS = {"pronoun": ("looks-at", True), "knockout": ("knockout", False), "agreement": ("next-word", False),
                   "names": ("next-word", False), "positions": ("next-word", False), "scaling": ("looks-at", False),
                   "diverging": ("poll", True)}


def lesson_step(discovery: Discovery) -> LessonStep:
    """The card's "Show me" view as a lesson step, with the question a class is asked about it."""
    target, (kind, own_words) = discovery.target, CLASS_QUESTIONS[discovery.key]
    view = {key: value for key in ("model", "text", "layer", "head", "token")
            if (value := getattr(target, key)) is not None}
    fields = dict(target.fields) | ({"preset": target.preset} if target.preset else {})
    question = Question(kind, discovery.question if own_words else "",
                        discovery.options if kind == "poll" else ())
    return LessonStep(target.slug, target.tab, view, fields, note=discovery.title, question=question)


def discoveries(bundle: Bundle, name: str) -> list[Discovery]:
    """Every card this model can answer (a plain function of the model: its own search, its own heads)."""
    with torch.no_grad():
        return [card for make in MODEL_CARDS if (card := make(bundle, name)) is not None]


def verdict(discovery: Discovery, guess: str) -> str:
    """'You guessed X. The model: Y.' in Markdown, and whether they match."""
    same = guess == discovery.answer
    return (f"**You guessed** {quote(guess)}. **{discovery.answered_by}:** {quote(discovery.answer)}. "
            + ("Your guess was right." if same else "Not what you expected!"))
