"""Discoveries: every head, token and number a card names is recomputed here from the model's own traces,
independently of explorer/discoveries.py (one sentence at a time, plain loops); a model with permuted or
fresh weights gets its own heads; the page asks, reveals and opens the page that shows it."""
import copy
import math

import pytest
import torch

from conftest import figure_titled, open_page, page_text, plotly_figures, show_section
from explorer.steps import attention
from explorer import discoveries
from explorer.app import cache, discover
from explorer.steps import positions
from explorer.steps import whatif
from explorer.registry import BY_SLUG, DISCOVER, neighbours
from explorer.lab.training import PRESETS, new_run
from explorer.view import quote
from model import edits
from model.checkpoint import Bundle, load_bundled
from model.corpora import ANIMALS, tiny_tales_probes
from model.transformer import TransformerLM

SUBJECTS = set(ANIMALS) | set(ANIMALS.values())


@pytest.fixture(scope="module")
def tinytales():
    return load_bundled("tinytales")


@pytest.fixture(scope="module")
def cards(tinytales):
    return {card.key: card for card in discoveries.discoveries(tinytales, "tinytales")}


# --- independent recomputation: one sentence at a time ------------------------------------------------


def probes(kind):
    return tiny_tales_probes(discoveries.N_PROBES)[kind]


def pattern_of(bundle, words, layer, head):
    """(T, T) attention pattern of one head for one sentence."""
    trace = bundle.model.run(bundle.tokenizer.encode(" ".join(words)))
    return trace[f"blocks.{layer}.attn.pattern"][0, head]


def mean_attention(bundle, sentences):
    """(L, H): mean over (words, query, key) of each head's attention from query to key."""
    cfg = bundle.model.cfg
    total = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
    for words, query, key in sentences:
        trace = bundle.model.run(bundle.tokenizer.encode(" ".join(words)))
        for layer in range(cfg.n_layers):
            for head in range(cfg.n_heads):
                total[layer, head] += float(trace[f"blocks.{layer}.attn.pattern"][0, head, query, key])
    return total / len(sentences)


def argmax2(scores):
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return layer, head


def pronoun_sentences():
    out = []
    for p in probes("pronoun"):
        words = f"{p.prefix} {p.good}".split()
        out.append((words, len(words) - 1, next(i for i, w in enumerate(words) if w in SUBJECTS)))
    return out


def agreement_sentences():
    out = []
    for p in probes("agreement_across_phrase"):
        words = p.prefix.split()
        out.append((words, len(words) - 1, next(i for i, w in enumerate(words) if w in SUBJECTS)))
    return out


def name_sentences():
    return [(p.prefix.split(), 6, 5) for p in probes("names")]          # "there was a girl named mia ." -> mia


def knockout_drops(bundle):
    """(L, H): mean fall of logit(right pronoun) - logit(wrong pronoun) when each head is knocked out."""
    cfg, tok = bundle.model.cfg, bundle.tokenizer
    wrong = {"it": "they", "they": "it"}

    def margin(p, changes):
        logits = bundle.model.run(tok.encode(p.prefix), edits=changes)["logits"][0, -1].double()
        return float(logits[tok.encode(p.good)[0]] - logits[tok.encode(wrong[p.good])[0]])

    drops = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
    for p in probes("pronoun"):
        base = margin(p, None)
        for layer in range(cfg.n_layers):
            for head in range(cfg.n_heads):
                drops[layer, head] += base - margin(p, edits.knock_out_head(layer, head))
    return drops / len(probes("pronoun"))


def next_probs(bundle, text, changes=None):
    return torch.softmax(bundle.model.run(bundle.tokenizer.encode(text), edits=changes)["logits"][0, -1].double(), -1)


# --- the claims on each card ------------------------------------------------------------------------


def test_the_pronoun_head_is_the_one_that_looks_most_from_it_or_they_to_the_subject(tinytales, cards):
    card = cards["pronoun"]
    scores = mean_attention(tinytales, pronoun_sentences())
    layer, head = argmax2(scores)
    assert (card.facts["layer"], card.facts["head"]) == (layer, head)
    assert card.facts["n"] == len(probes("pronoun"))
    assert card.facts["mean"] == pytest.approx(float(scores[layer, head]), abs=1e-5)
    words = discoveries.PRONOUN_SENTENCE.split()
    query = words.index("it")
    row = pattern_of(tinytales, words, layer, head)[query, : query + 1]
    top = int(row.argmax())
    assert card.answer == words[top] and card.facts["key"] == top
    assert f"**{float(row[top]):.2f}** of “it”'s attention on “{words[top]}”" in card.reveal
    assert f"**{float(scores[layer, head]):.2f}**" in card.reveal
    second = scores.flatten().topk(2)
    l2, h2 = divmod(int(second.indices[1]), scores.shape[1])
    assert f"next: layer {l2}, head {h2} with {float(second.values[1]):.2f}" in card.reveal
    assert f"layer {layer}, head {head}" in card.story and card.answer not in card.story.split("“it”")[-1]
    assert card.target == discoveries.Target("attention", "tinytales", discoveries.PRONOUN_SENTENCE, layer, head, query, "who-looks")


def test_the_knockout_head_hurts_the_choice_of_it_or_they_most(tinytales, cards):
    card = cards["knockout"]
    drops = knockout_drops(tinytales)
    layer, head = argmax2(drops)
    assert (card.facts["layer"], card.facts["head"]) == (layer, head)
    assert card.facts["drop"] == pytest.approx(float(drops[layer, head]), abs=1e-4)
    vocab = tinytales.tokenizer.vocab
    before = next_probs(tinytales, discoveries.KNOCKOUT_SENTENCE)
    after = next_probs(tinytales, discoveries.KNOCKOUT_SENTENCE, edits.knock_out_head(layer, head))
    b, a = int(before.argmax()), int(after.argmax())
    assert card.answer == vocab[a]
    assert f"predicts “{vocab[b]}” at **{float(before[b]):.2f}**" in card.reveal
    assert f"“{vocab[a]}” at **{float(after[a]):.2f}**" in card.reveal
    assert f"by **{float(drops[layer, head]):.2f}** on average" in card.reveal
    words = discoveries.KNOCKOUT_SENTENCE.split()
    looks = pattern_of(tinytales, words, layer, head)[len(words) - 1, 1]         # "because" -> "cats"
    assert f"**{float(looks):.2f}** of its attention on “cats”" in card.reveal
    assert card.target.section == attention.SECTIONS[4] and card.target.token == len(words) - 1
    assert attention.experiments(layer, head)[dict(card.target.state)["attention_whatif"]] == whatif.knock_out_head(layer, head)


def test_the_agreement_head_carries_the_subject_across_the_phrase(tinytales, cards):
    card = cards["agreement"]
    scores = mean_attention(tinytales, agreement_sentences())
    layer, head = argmax2(scores)
    assert (card.facts["layer"], card.facts["head"]) == (layer, head)
    tok = tinytales.tokenizer
    p = next_probs(tinytales, discoveries.AGREEMENT_SENTENCE)
    plural = float(p[tok.encode("are")[0]] + p[tok.encode("were")[0]])
    singular = float(p[tok.encode("is")[0]] + p[tok.encode("was")[0]])
    knocked = next_probs(tinytales, discoveries.AGREEMENT_SENTENCE, edits.knock_out_head(layer, head))
    k_plural = float(knocked[tok.encode("are")[0]] + knocked[tok.encode("were")[0]])
    weight = float(pattern_of(tinytales, discoveries.AGREEMENT_SENTENCE.split(), layer, head)[4, 1])     # dog -> cats
    assert f"**{plural:.2f}** to the plural verbs" in card.reveal and f"**{singular:.2f}** to “is”" in card.reveal
    assert f"**{weight:.2f}** of “dog”'s attention on “cats”" in card.reveal
    assert f"it puts **{float(scores[layer, head]):.2f}** on the subject" in card.reveal
    assert f"plural verbs get **{k_plural:.2f}**" in card.reveal
    assert card.answer == discoveries.AGREEMENT_OPTIONS[0 if plural > singular else 1]
    assert card.target.token == 4 and card.target.section == attention.SECTIONS[2]


def test_the_name_head_looks_from_the_full_stop_back_to_the_name(tinytales, cards):
    card = cards["names"]
    scores = mean_attention(tinytales, name_sentences())
    layer, head = argmax2(scores)
    assert (card.facts["layer"], card.facts["head"]) == (layer, head)
    p = next_probs(tinytales, discoveries.NAME_SENTENCE)
    vocab = tinytales.tokenizer.vocab
    top = int(p.argmax())
    weight = float(pattern_of(tinytales, discoveries.NAME_SENTENCE.split(), layer, head)[6, 5])
    assert card.answer == vocab[top] and card.answer in card.options
    assert f"predicts “{vocab[top]}” at **{float(p[top]):.2f}**" in card.reveal
    assert f"**{weight:.2f}** of the full stop's attention on “lily”" in card.reveal
    assert f"**{float(scores[layer, head]):.2f}** on the name" in card.reveal
    assert card.target.token == 6


def test_the_order_card_recomputes_the_positions_experiment(tinytales, cards):
    card = cards["positions"]
    a, b = positions.DEFAULT_PAIR
    tok = tinytales.tokenizer

    def largest_difference(changes, causal):
        ia, ib = tok.encode(a), tok.encode(b)
        pa = torch.softmax(tinytales.model.run(ia, edits=changes, causal=causal)["logits"][0].double(), -1)
        pb = torch.softmax(tinytales.model.run(ib, edits=changes, causal=causal)["logits"][0].double(), -1)
        best, word = 0.0, None
        for i, w in enumerate(a.split()):        # the k-th occurrence of a word in A with its k-th in B
            k = a.split()[:i].count(w)
            j = [n for n, x in enumerate(b.split()) if x == w][k]
            diff = float((pa[i] - pb[j]).abs().max())
            if diff > best:
                best, word = diff, w
        return best, word

    no_positions, word = largest_difference(edits.remove_positions(), True)
    bag, _ = largest_difference(edits.remove_positions(), False)
    assert card.facts["no_positions"] == pytest.approx(no_positions, abs=1e-6) and card.facts["word"] == word
    assert f"after “{word}” still differs by **{no_positions:.4f}**" in card.reveal
    assert f"largest difference is **{bag:.4f}**" in card.reveal and bag < 1e-4
    assert card.answer == discoveries.POSITION_OPTIONS[0]
    assert card.target.section == positions.SECTIONS[4] and dict(card.target.state)["positions_sentence_b"] == b


def test_the_scaling_card_measures_sharper_attention_without_the_square_root(tinytales, cards):
    card = cards["scaling"]
    ids = tinytales.tokenizer.encode(discoveries.PRONOUN_SENTENCE)
    model = tinytales.model
    before, after = model.run(ids), model.run(ids, edits=edits.remove_scaling(model.cfg))
    tops = {}
    for name, trace in (("before", before), ("after", after)):
        tops[name] = torch.tensor([[float(trace[f"blocks.{l}.attn.pattern"][0, h].max(-1).values.double().mean())
                                    for h in range(4)] for l in range(2)], dtype=torch.float64)
    mean_before, mean_after = float(tops["before"].mean()), float(tops["after"].mean())
    assert f"**{mean_before:.2f}** on average" in card.reveal and f"without √K it is **{mean_after:.2f}**" in card.reveal
    layer, head = argmax2(tops["after"] - tops["before"])
    assert (card.target.layer, card.target.head) == (layer, head)
    assert card.answer == discoveries.SCALING_OPTIONS[0] and mean_after > mean_before
    change = (torch.softmax(after["logits"][0].double(), -1) - torch.softmax(before["logits"][0].double(), -1)).abs()
    token = int(change.max(-1).values.argmax())
    assert card.target.token == token and f"at most **{float(change[token].max()):.2f}**" in card.reveal
    assert f"√K = √{model.cfg.d_head} = {model.cfg.d_head ** 0.5:g}" in card.story
    assert attention.experiments(layer, head)[dict(card.target.state)["attention_whatif"]] == whatif.REMOVE_SCALING


def test_the_diverging_card_reports_a_real_run_of_the_preset():
    assert discoveries.DIVERGING in PRESETS, "the training lab's diverging preset"
    outcome = discoveries.lab_outcome(discoveries.DIVERGING)
    run = new_run(PRESETS[discoveries.DIVERGING][1], "check")              # the lab's own run, step by step
    losses = []
    while run.trainer.divergence is None and run.trainer.steps_done < discoveries.MAX_LAB_STEPS:
        metrics = run.trainer.step(1)
        if metrics is not None:
            losses.append(metrics.loss)
    assert run.trainer.divergence is not None and outcome.diverged_at == run.trainer.divergence.step
    card = discoveries.diverging_card(outcome)
    assert card.answer == discoveries.LAB_OPTIONS[2]
    assert f"started at **{losses[0]:.2f}**" in card.reveal and f"as high as **{max(losses):.2f}**" in card.reveal
    assert f"**{run.trainer.divergence.loss:.2f}** at step **{run.trainer.divergence.step}**" in card.reveal
    fast = PRESETS[discoveries.DIVERGING][1].train
    assert f"learning rate of **{fast.lr:g}**" in card.story
    assert f"learning rate of {PRESETS[discoveries.USUAL][1].train.lr:g}." in card.story
    assert ("no warm-up" in card.story) == (fast.warmup == 0)
    assert ("no gradient clipping" in card.story) == (not fast.grad_clip)
    assert ("the same model" in card.story) == (PRESETS[discoveries.DIVERGING][1].model == PRESETS[discoveries.USUAL][1].model)
    assert discoveries.diverging_card().reveal == "" and discoveries.diverging_card().target.preset == discoveries.DIVERGING


def test_without_the_preset_the_diverging_card_says_so(monkeypatch):
    monkeypatch.delitem(PRESETS, discoveries.DIVERGING)
    card = discoveries.diverging_card()
    assert card.target is None and "no “diverging” preset" in card.story


# --- nothing is hard-coded: other weights, other heads ------------------------------------------------


def permute_heads(bundle: Bundle, layer: int, order: list[int]) -> Bundle:
    """The same model with layer `layer`'s heads renumbered: new head i is old head order[i]."""
    model = copy.deepcopy(bundle.model)
    attn = model.blocks[layer].attn
    K = model.cfg.d_head
    rows = torch.cat([torch.arange(h * K, (h + 1) * K) for h in order])
    with torch.no_grad():
        for proj in (attn.W_q, attn.W_k, attn.W_v):
            proj.weight.copy_(proj.weight[rows])
            proj.bias.copy_(proj.bias[rows])
        attn.W_o.weight.copy_(attn.W_o.weight[:, rows])
    return Bundle(model, bundle.tokenizer, {})


def test_renumbering_the_heads_moves_every_discovered_head_with_them(tinytales, cards):
    order = [0, 2, 1, 3]                                          # swap heads 1 and 2 of layer 1
    permuted = permute_heads(tinytales, 1, order)
    ids = tinytales.tokenizer.encode(discoveries.PRONOUN_SENTENCE)
    assert torch.allclose(permuted.model.run(ids)["logits"], tinytales.model.run(ids)["logits"], atol=1e-5)
    moved = {card.key: card for card in discoveries.discoveries(permuted, "renumbered")}
    for key in ("pronoun", "knockout", "agreement", "names"):
        layer, head = cards[key].facts["layer"], cards[key].facts["head"]
        expected = (layer, order.index(head)) if layer == 1 else (layer, head)
        assert (moved[key].facts["layer"], moved[key].facts["head"]) == expected, key
        assert moved[key].answer == cards[key].answer
    assert any(moved[k].facts["head"] != cards[k].facts["head"] for k in ("pronoun", "knockout"))


def test_a_model_with_fresh_weights_gets_its_own_recomputed_heads(tinytales, cards):
    torch.manual_seed(7)
    fresh = Bundle(TransformerLM(tinytales.model.cfg).eval(), tinytales.tokenizer, {})
    found = {card.key: card for card in discoveries.discoveries(fresh, "fresh")}
    expected = {"pronoun": argmax2(mean_attention(fresh, pronoun_sentences())),
                "agreement": argmax2(mean_attention(fresh, agreement_sentences())),
                "names": argmax2(mean_attention(fresh, name_sentences())),
                "knockout": argmax2(knockout_drops(fresh))}
    for key, head in expected.items():
        assert (found[key].facts["layer"], found[key].facts["head"]) == head, key
    assert any(head != (cards[k].facts["layer"], cards[k].facts["head"]) for k, head in expected.items())
    words = discoveries.PRONOUN_SENTENCE.split()
    layer, head = expected["pronoun"]
    row = pattern_of(fresh, words, layer, head)[6, :7]
    assert f"**{float(row.max()):.2f}** of “it”'s attention on “{words[int(row.argmax())]}”" in found["pronoun"].reveal


def test_a_model_that_cannot_read_tiny_tales_has_no_cards():
    roses = load_bundled("roses")
    assert not discoveries.reads_tiny_tales(roses) and discoveries.discoveries(roses, "roses") == []


def test_the_discoveries_page_is_outside_the_walk_through():
    assert BY_SLUG["discoveries"] is DISCOVER and neighbours("discoveries") == (None, None)


# --- the page -----------------------------------------------------------------------------------


def radio(at, key):
    return at.radio(key=f"discovery_radio_{key}")


def guess_and_reveal(at, key, guess=None):
    choice = radio(at, key).options[0] if guess is None else guess
    radio(at, key).set_value(choice).run()
    at.button(key=f"discovery_reveal_{key}").click().run()
    assert not at.exception
    return choice


def test_the_page_shows_every_card_with_a_question_and_no_answer_yet(tinytales, cards):
    at = open_page("discoveries")
    assert not at.exception
    titles = [s.value for s in at.subheader]
    for card in [*cards.values(), discoveries.diverging_card()]:
        assert card.title in titles
        assert radio(at, card.key).value is None
        assert at.button(key=f"discovery_reveal_{card.key}").disabled         # guess first
        assert not card.reveal or card.reveal not in page_text(at)
    assert not [b for b in at.button if b.key and b.key.startswith("discovery_show_")]
    assert "Discoveries" in [t.value for t in at.title]


def test_reveal_shows_the_guess_beside_the_models_answer_and_keeps_it(tinytales, cards):
    at = open_page("discoveries")
    card = cards["pronoun"]
    wrong = next(o for o in card.options if o != card.answer)
    guess_and_reveal(at, "pronoun", wrong)
    text = page_text(at)
    assert f"**You guessed** “{wrong}”. **The model:** “{card.answer}”. Not what you expected!" in text
    assert card.reveal in text
    assert radio(at, "pronoun").disabled and at.session_state["discovery_guesses"]["pronoun"]["guess"] == wrong
    guess_and_reveal(at, "agreement", cards["agreement"].answer)
    assert "Your guess was right." in page_text(at)
    at.switch_page("pages/home.py").run()
    at.switch_page("pages/discoveries.py").run()                      # back again: the guesses are kept
    assert card.reveal in page_text(at) and radio(at, "pronoun").value == wrong


@pytest.mark.parametrize("key", ["pronoun", "agreement", "names"])
def test_show_me_opens_who_looks_at_whom_on_the_named_head_and_token(tinytales, cards, key):
    card = cards[key]
    at = open_page("discoveries", model="roses", text="roses are red")
    guess_and_reveal(at, key)
    at.button(key=f"discovery_show_{key}").click().run()
    assert not at.exception
    state = at.session_state
    assert state["_page"] == "attention" and state["model"] == "tinytales" and state["text"] == card.target.text
    assert (state["layer"], state["head"], state["token"]) == (card.facts["layer"], card.facts["head"],
                                                              card.facts["query"])
    assert state["section_attention"] == attention.SECTIONS[2]
    assert f"Who attends to whom: layer {card.facts['layer']}, head {card.facts['head']}" in page_text(at)
    words = card.target.text.split()
    assert f"puts **{card.facts['weight']:.2f}** of its attention on “{words[card.facts['key']]}”" in page_text(at)
    figure_titled(at, f"Attention pattern of layer {card.facts['layer']} head {card.facts['head']}")


def test_show_me_on_the_knockout_card_opens_the_what_if_with_that_head_knocked_out(cards):
    card = cards["knockout"]
    at = open_page("discoveries")
    guess_and_reveal(at, "knockout", card.answer)
    at.button(key="discovery_show_knockout").click().run()
    assert not at.exception and at.session_state["_page"] == "attention"
    layer, head = card.facts["layer"], card.facts["head"]
    assert at.radio(key="attention_whatif").value == "chosen"
    assert at.radio(key="attention_whatif").options[0].startswith(f"Knock out head {head} of layer {layer}")
    assert f"With head {head} of layer {layer} knocked out, it becomes" in page_text(at)
    text = page_text(at)
    assert (f"top guess for the word after “because” is “{card.facts['before']}” at **{card.facts['p_before']:.2f}**"
            in text)
    assert f"it becomes “{card.facts['after']}” at **{card.facts['p_after']:.2f}**" in text


def test_show_me_on_the_scaling_card_opens_the_what_if_without_the_square_root(cards):
    card = cards["scaling"]
    at = open_page("discoveries")
    guess_and_reveal(at, "scaling")
    at.button(key="discovery_show_scaling").click().run()
    assert not at.exception and at.session_state["_page"] == "attention"
    assert attention.experiments(0, 0)[at.radio(key="attention_whatif").value] == whatif.REMOVE_SCALING
    assert at.session_state["token"] == card.target.token
    change = card.facts["change"]
    said = (f"largest change of any word's probability is **{change:.2f}**" if change >= whatif.VISIBLE else
            f"That changes little: no word's probability moves by more than **{math.ceil(change * 1000) / 1000:.3f}**")
    assert said in page_text(at)


def test_show_me_on_the_order_card_opens_the_positions_what_if_with_both_sentences(cards):
    card = cards["positions"]
    at = open_page("discoveries")
    guess_and_reveal(at, "positions")
    at.button(key="discovery_show_positions").click().run()
    assert not at.exception and at.session_state["_page"] == "positions"
    assert at.session_state["section_positions"] == positions.SECTIONS[4]
    a, b = positions.DEFAULT_PAIR
    assert at.text_input(key="positions_sentence_a").value == a and at.text_input(key="positions_sentence_b").value == b
    assert f"differ, by up to **{card.facts['no_positions']:.4f}**" in page_text(at)


def sidebar_view(at) -> tuple:
    return (at.selectbox(key="model").value, at.text_input(key="text").value)


@pytest.mark.parametrize("model, text", [("tinytales", "the dog ran to the old tree"), ("roses", "roses are red")])
def test_after_show_me_one_click_brings_back_your_sentence_model_page_and_choices(cards, model, text):
    at = open_page("attention", model=model, text=text, layer=1, head=1, token=2)
    at = show_section(at, "attention", attention.SECTIONS[3])                              # the student's own tab
    assert sidebar_view(at) == (model, text)
    at.switch_page("pages/discoveries.py").run()
    assert not [b for b in at.button if b.key == "discovery_back"]                 # nothing to go back to yet
    guess_and_reveal(at, "pronoun")
    at.button(key="discovery_show_pronoun").click().run()
    assert at.session_state["_page"] == "attention"
    assert sidebar_view(at) == ("tinytales", discoveries.PRONOUN_SENTENCE) != (model, text)  # the discovery's sentence
    back = at.button(key="discovery_back")
    assert back.label == f"Back to your sentence: “{text}”"
    assert at.button[0].key == "discovery_back"                                    # the first button of the page
    guess_and_reveal(at.switch_page("pages/discoveries.py").run(), "names")      # a second jump keeps yours
    at.button(key="discovery_show_names").click().run()
    assert sidebar_view(at) == ("tinytales", discoveries.NAME_SENTENCE)
    at.button(key="discovery_back").click().run()
    assert not at.exception and at.session_state["_page"] == "discoveries"          # the page you were on
    assert sidebar_view(at) == (model, text) and at.session_state["view"].text == text
    assert not [b for b in at.button if b.key == "discovery_back"]                 # back home: no more way back
    at.switch_page("pages/attention.py").run()
    state = at.session_state
    assert (state["layer"], state["head"], state["token"], state["section_attention"]) == (1, 1, 2, attention.SECTIONS[3])


def test_the_way_back_is_dropped_once_you_type_a_sentence_of_your_own():
    at = open_page("discoveries", text="the dog ran to the old tree")
    guess_and_reveal(at, "pronoun")
    at.button(key="discovery_show_pronoun").click().run()
    assert at.button(key="discovery_back")
    at.text_input(key="text").set_value("the cat sat on the mat").run()
    assert not [b for b in at.button if b.key == "discovery_back"] and discover.BACK not in at.session_state


def test_a_sentence_with_markdown_is_shown_as_text_on_the_way_back():
    text = "**bold** [link](http://x) <b>"
    at = open_page("discoveries", text=text)
    guess_and_reveal(at, "pronoun")
    at.button(key="discovery_show_pronoun").click().run()
    assert at.button(key="discovery_back").label == f"Back to your sentence: {quote(text)}"
    at.button(key="discovery_back").click().run()
    assert at.text_input(key="text").value == text


def test_the_learning_rate_card_trains_its_run_in_the_background_before_the_reveal():
    at = open_page("discoveries")                      # no reveal yet: showing the card starts the run
    background = cache.stores().background
    key = (f"{discoveries.lab_outcome.__module__}.{discoveries.lab_outcome.__qualname__}", (discoveries.DIVERGING,))
    outcome = background.get(key, lambda: pytest.fail("showing the card did not start its run"))   # waits for it
    assert outcome == discoveries.lab_outcome(discoveries.DIVERGING)       # the preset's real run, seed 0
    guess_and_reveal(at, "diverging", discoveries.LAB_OPTIONS[2])
    assert background.get(key, lambda: pytest.fail("trained again")) is outcome    # the reveal reads it
    assert f"reached **{outcome.final_loss:.2f}** at step **{outcome.diverged_at}**" in page_text(at)


def test_show_me_on_the_learning_rate_card_opens_the_lab_with_the_diverging_preset():
    at = open_page("discoveries")
    guess_and_reveal(at, "diverging", discoveries.LAB_OPTIONS[2])
    assert "Your guess was right." in page_text(at)
    at.button(key="discovery_show_diverging").click().run()
    assert not at.exception and at.session_state["_page"] == "training"
    assert at.selectbox(key="lab_preset").value == discoveries.DIVERGING
    assert at.session_state["lab_lr"] == PRESETS[discoveries.DIVERGING][1].train.lr
    assert PRESETS[discoveries.DIVERGING][0] in page_text(at)


def test_a_model_trained_in_this_session_gets_its_own_heads_on_the_page(tinytales):
    torch.manual_seed(7)
    fresh = Bundle(TransformerLM(tinytales.model.cfg).eval(), tinytales.tokenizer, {})
    expected = argmax2(mean_attention(fresh, pronoun_sentences()))
    at = open_page("discoveries")
    at.session_state["trained_models"] = {"lab: fresh": fresh}
    at.run()
    at.selectbox(key="model").set_value("lab: fresh").run()
    assert not at.exception and not at.info
    assert f"**layer {expected[0]}, head {expected[1]}**" in page_text(at)
    guess_and_reveal(at, "pronoun")
    at.button(key="discovery_show_pronoun").click().run()
    assert at.session_state["model"] == "lab: fresh" and (at.session_state["layer"], at.session_state["head"]) == expected


def test_a_model_that_cannot_read_tiny_tales_shows_tinytales_discoveries_with_a_notice(cards):
    at = open_page("discoveries", model="roses")
    assert not at.exception
    assert "roses does not read tiny-tales words" in page_text(at)
    assert cards["pronoun"].story in page_text(at)


def test_a_diverged_model_shows_tinytales_discoveries_with_a_notice(tinytales):
    broken = copy.deepcopy(tinytales.model)
    with torch.no_grad():
        broken.blocks[0].attn.W_q.weight[0, 0] = float("nan")
    at = open_page("discoveries")
    at.session_state["trained_models"] = {"lab: broken": Bundle(broken, tinytales.tokenizer, {})}
    at.run()
    at.selectbox(key="model").set_value("lab: broken").run()
    assert not at.exception and "weights are not finite numbers" in page_text(at)


def test_presenter_mode_and_hostile_links_leave_the_page_working():
    at = open_page("discoveries", presenter=1, layer=99, token="<script>", section="<b>x</b>")
    assert not at.exception and len(at.subheader) == 7
    assert not plotly_figures(at)


def test_the_teachers_guide_table_states_what_the_search_finds(cards):
    from conftest import ROOT
    guide = (ROOT / "docs/teaching.md").read_text()
    section = guide.split("## Discoveries\n", 1)[1].split("\n## ", 1)[0]
    f = {key: card.facts for key, card in cards.items()}
    expected = [
        f"on {discoveries.N_PROBES} probe sentences",
        f"layer {f['pronoun']['layer']}, head {f['pronoun']['head']}: \"it\" in \"{discoveries.PRONOUN_SENTENCE}\" puts "
        f"{f['pronoun']['weight']:.2f} of its attention on \"{cards['pronoun'].answer}\"",
        f"layer {f['knockout']['layer']}, head {f['knockout']['head']}: knocked out, \"{discoveries.KNOCKOUT_SENTENCE}\" is "
        f"followed by \"{f['knockout']['after']}\" ({f['knockout']['p_after']:.2f}) instead of "
        f"\"{f['knockout']['before']}\" ({f['knockout']['p_before']:.2f})",
        f"layer {f['agreement']['layer']}, head {f['agreement']['head']}: \"dog\" in \"{discoveries.AGREEMENT_SENTENCE}\" puts "
        f"{f['agreement']['weight']:.2f} on \"cats\"; plural verbs get {f['agreement']['p_plural']:.2f}, "
        f"{f['agreement']['knocked_plural']:.2f} with the head knocked out",
        f"layer {f['names']['layer']}, head {f['names']['head']}: the full stop of \"{discoveries.NAME_SENTENCE}\" puts "
        f"{f['names']['weight']:.2f} on \"lily\"; the model predicts \"{f['names']['top']}\" at {f['names']['p_top']:.2f}",
        f"still differ by {f['positions']['no_positions']:.4f} (the mask); with the mask lifted too, "
        f"{f['positions']['bag']:.4f}",
        f"rises from {f['scaling']['mean_before']:.2f} to {f['scaling']['mean_after']:.2f} on average; "
        f"layer {f['scaling']['layer']}, head {f['scaling']['head']} sharpens most",
        f"(SGD at {PRESETS[discoveries.DIVERGING][1].train.lr:.1f}) blows up at step {discoveries.lab_outcome(discoveries.DIVERGING).diverged_at}",
    ]
    for claim in expected:
        assert claim in section, claim
    assert PRESETS[discoveries.DIVERGING][1].train.optimizer == "sgd"


def test_the_scaling_card_shows_the_heads_pattern_with_and_without_the_square_root(tinytales, cards):
    card = cards["scaling"]
    layer, head = card.target.layer, card.target.head
    at = open_page("discoveries")
    assert not plotly_figures(at)                                  # no chart before the reveal
    guess_and_reveal(at, "scaling")
    figure = figure_titled(at, f"Layer {layer} head {head}: as trained and without √K")
    ids = tinytales.tokenizer.encode(discoveries.PRONOUN_SENTENCE)
    trained = tinytales.model.run(ids)[f"blocks.{layer}.attn.pattern"][0, head]
    unscaled = tinytales.model.run(ids, edits=edits.remove_scaling(tinytales.model.cfg))[f"blocks.{layer}.attn.pattern"]
    from conftest import decode
    shown = [torch.tensor(decode(trace["z"]), dtype=torch.float32) for trace in figure["data"]]
    assert torch.allclose(shown[0], trained, atol=1e-6) and torch.allclose(shown[1], unscaled[0, head], atol=1e-6)
    assert float(shown[1].max(-1).values.mean()) > float(shown[0].max(-1).values.mean())      # sharper
    assert len(plotly_figures(at)) == 1
