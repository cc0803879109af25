"""Every number an explanation states, recomputed from the model (issue 12).

Each test takes a claim the app shows a student (file and wording in the docstring), computes the claimed
number from the model or its trace, and checks that the text states it. Claims are checked on the bundled
models and on lab-like models of other settings (tests/claims_support.py). Eleven claims found wrong in
this audit (a "five vectors" count, "keeps its scale" in pre-norm, "four times as many" for roses, ...) were
rewritten; their tests check the truth and fail on the old texts. Every test first asserts that its claim is
stated (a reworded or removed sentence fails), then checks it: none looks for a sentence and checks only if found.
The claims of the step pages as a student sees them, on several models and sentences, are in
tests/test_claims_pages.py.

Claims already checked properly elsewhere are not repeated here: the √K factor of the scaling what-if
(test_view.py), the four steps' numbers and the math of one weight (test_page_attention.py), the PCA of
tinytales (test_page_embedding.py), top-k/top-p counts and the softmax worked out (test_page_prediction.py),
the pipeline of the default sentence (test_app.py), causal patterns, q·k/√K, pre/post-norm wiring and
embed_scale (test_transformer.py), knock-out, remove-positions and remove-scaling edits (test_edits.py).
"""
import copy
import math
import re
from functools import lru_cache

import numpy as np
import pytest
import torch
import torch.nn as nn

from claims_support import LAB, LAB_TEXT, SENTENCES, bundled, bundled_view, lab_bundle, lab_view, view_of
from conftest import open_page, page_text, show_section
from explorer.steps import attention
from explorer.steps import embedding
from explorer.steps import feedforward
from explorer.steps import home
from explorer.steps import positions
from explorer.steps import residual
from explorer.steps import tokenization
from explorer.app.layout import quote
from explorer.steps.prediction import EXPLANATION, kept_summary, mass_kept, ranking, Settings
from explorer.app.state import DEFAULT_SENTENCE
from explorer.lab.training import PRESETS, WALKTHROUGH, LabSetup, texts_for
from explorer.steps import whatif
from model import edits, presets
from model.config import ModelConfig
from model.generate import next_token_probs
from model.inputs import prepare_text
from model.tokenizers import BPETokenizer, CharTokenizer
from model.transformer import sinusoidal_table

VIEWS = [*SENTENCES, *LAB]
WITH_NORM = [k for k in VIEWS if (bundled(k) if k in SENTENCES else lab_bundle(**LAB[k])).model.cfg.norm != "none"]


def view(key: str):
    return bundled_view(key) if key in SENTENCES else lab_view(key)


def numbers(text: str) -> list[float]:
    """Every number written in `text` (1,234 and 12.5% included), in order."""
    return [float(n.replace(",", "")) for n in re.findall(r"-?\d[\d,]*\.?\d*", text)]


# --- 4. attention (explorer/steps/attention.py, pages/attention.py) ------------------------------


@pytest.mark.parametrize("key", VIEWS)
def test_each_head_gets_K_numbers_and_its_scores_are_divided_by_root_K(key):
    """QKV_TEXT "Each head gets its own {K} numbers of each"; STEP_CAPTIONS[1] "Divided by √K = √{K} = {sqrtK}"."""
    v = view(key)
    cfg, trace = v.bundle.model.cfg, v.trace
    K = trace["blocks.0.attn.q"].shape[-1]                              # (B, H, T, K)
    assert K * cfg.n_heads == cfg.d_model
    H, G = trace["blocks.0.attn.q"].shape[1], trace["blocks.0.attn.k"].shape[1]    # query, key/value heads
    if G == H:
        assert f"its own {K} numbers of each" in attention.qkv_text(cfg)
    else:                                             # grouped-query: a head's keys and values are its group's
        assert (f"its own {K} query numbers; its {K} key and {K} value numbers are its group's: {H // G} query heads "
                f"share one key/value head" in " ".join(attention.qkv_text(cfg).split()))
    caption = attention.STEP_CAPTIONS[1].format(K=cfg.d_head, sqrtK=cfg.d_head ** 0.5)     # as the page formats it
    stated_k, stated_root = re.search(r"√K = √(\d+) = ([\d.]+)", caption).groups()
    for layer in range(cfg.n_layers):
        name = f"blocks.{layer}.attn"
        keys = trace[f"{name}.k"][0].double().repeat_interleave(H // G, dim=0)             # (H, T, K)
        raw = trace[f"{name}.q"][0].double() @ keys.transpose(-2, -1)                     # (H, T, T)
        scores = trace[f"{name}.scores"][0].double()
        big = scores.abs() > 1e-3
        factor = float((raw[big] / scores[big]).median())
        assert int(stated_k) == K and float(stated_root) == pytest.approx(factor, rel=1e-4)


def test_lifting_the_mask_lets_every_head_look_ahead_at_as_many_tokens_as_the_text_says():
    """WHATIF_TEXT "Let every word look ahead ... in every head"; change_words "can also see the {n} token(s) after it"."""
    v = bundled_view("tinytales")
    changes, causal = whatif.LIFT_MASK.edits(v.bundle.model.cfg), whatif.LIFT_MASK.causal
    assert not changes and causal is False
    after = v.bundle.model.run(v.prepared.ids, causal=False)
    T = len(v.tokens)
    for layer in range(v.bundle.model.cfg.n_layers):
        ahead = after[f"blocks.{layer}.attn.pattern"][0].triu(1).sum((-2, -1))     # (H,) weight on later tokens
        assert (ahead > 0).all()
    for position in (0, 4, T - 1):
        text = attention.change_words(v, v.trace, after, whatif.LIFT_MASK, position=position)
        later = int((after["blocks.0.attn.pattern"][0, 0, position, position + 1:] > 0).sum())
        if position < T - 1:
            assert f"the {later} token(s) after it" in text
        else:
            assert later == 0 and "already sees every token" in text


def most_alike(trace, n_layers: int, n_heads: int):
    """(largest weight difference, layer, a, b) of the two heads of one layer with the most alike patterns."""
    pairs = [(float((trace[f"blocks.{l}.attn.pattern"][0, a] - trace[f"blocks.{l}.attn.pattern"][0, b]).abs().max()),
              l, a, b) for l in range(n_layers) for a in range(n_heads) for b in range(a + 1, n_heads)]
    return min(pairs) if pairs else None


@pytest.mark.parametrize("key", VIEWS)
def test_the_page_says_how_many_heads_a_layer_has_and_whether_their_patterns_differ(key):
    """intro "Each layer of this model has **{H} heads**" or "one head"; grid_caption "Heads in the same layer ...
    so their patterns differ: even the two most alike, heads a and b of layer l, differ by as much as **x**" only
    when measured (it once said "A layer has several heads ... so their patterns differ" for one-head models)."""
    v = view(key)
    cfg = v.bundle.model.cfg
    H = v.trace["blocks.0.attn.pattern"].shape[1]
    intro = " ".join(attention.intro(cfg).split())
    caption = attention.grid_caption(v, v.trace)
    alike = most_alike(v.trace, cfg.n_layers, H)
    if H == 1:
        assert "This model has **one head** per layer" in intro and "several heads per layer" in intro
        assert "This model has one head per layer, so each layer has a single pattern" in caption
        assert alike is None and "differ" not in caption
        return
    assert f"Each layer of this model has **{H} heads**" in intro
    gap, l, a, b = alike
    if gap >= 0.01:
        assert (f"so their patterns differ: even the two most alike, heads {a} and {b} of layer {l}, differ by as "
                f"much as **{gap:.2f}** in one weight.") in caption
    else:
        assert f"heads {a} and {b} of layer {l} have nearly the same pattern: no weight differs by more than " \
               f"**{gap:.3f}**" in caption and "so their patterns differ" not in caption


def test_two_heads_with_the_same_weights_are_said_to_look_alike():
    """grid_caption on a model whose two heads are one head twice: "nearly the same pattern", never "differ"."""
    bundle = copy.deepcopy(lab_bundle(**LAB["char, rms, post-norm, relu, learned"]))
    K = bundle.model.cfg.d_head
    with torch.no_grad():
        for block in bundle.model.blocks:
            for linear in (block.attn.W_q, block.attn.W_k):        # output rows h*K to (h+1)*K belong to head h
                linear.weight[K:] = linear.weight[:K]            # head 1 asks head 0's questions of head 0's keys
                linear.bias[K:] = linear.bias[:K]
    v = view_of(bundle, "roses are red")
    gap, l, a, b = most_alike(v.trace, bundle.model.cfg.n_layers, 2)
    assert gap < 1e-6
    caption = attention.grid_caption(v, v.trace)
    assert f"heads {a} and {b} of layer {l} have nearly the same pattern: no weight differs by more than **0.000**" \
        in caption and "so their patterns differ" not in caption


# --- 2. embedding (explorer/steps/embedding.py, pages/embedding.py) ------------------------------


@pytest.mark.parametrize("key", VIEWS)
def test_the_embedding_texts_count_the_matrix_they_describe(key):
    """intro "a vector of {D} numbers", "({V} rows)", "({D} columns)", "√D = ..." with embed_scale; lookup_math
    "row {id} of the {V} x {D} embedding matrix"; page caption "The same word always gets the same row"."""
    v = view(key)
    cfg = v.bundle.model.cfg
    W = embedding.embedding_matrix(v)
    V, D = W.shape
    assert (V, D) == (v.bundle.tokenizer.vocab_size, cfg.d_model)
    text = embedding.intro(v)
    assert f"vector of {D} numbers" in text and f"({V} rows)" in text and f"({D} columns)" in text
    scale = math.sqrt(D) if cfg.embed_scale else 1.0
    rows = v.trace["embed.tok"][0]                                                   # (T, D)
    torch.testing.assert_close(rows, W[v.prepared.ids] * scale)
    if cfg.embed_scale:
        stated = float(re.search(r"by √\d+ = ([\d.]+)", text).group(1))
        assert stated == pytest.approx(float((rows / W[v.prepared.ids]).median()), abs=5e-4)
    assert f"of the {V} x {D} embedding matrix" in embedding.lookup_math(v, v.trace, 0)
    ids = v.prepared.ids
    repeats = [(i, j) for i in range(len(ids)) for j in range(i) if ids[i] == ids[j]]
    assert repeats
    for i, j in repeats:
        assert torch.equal(rows[i], rows[j])


@pytest.mark.parametrize("key", VIEWS)
def test_cosine_runs_from_minus_1_to_1_every_token_matches_itself_and_length_does_not_count(key):
    """pages/embedding.py "1 = same direction ... -1 = opposite. The diagonal is always 1"; cosine_math "(so the
    √D scale changes nothing here)" and its "= **cos**"."""
    v = view(key)
    sims = embedding.cosine_matrix(v.trace["embed.tok"][0]).numpy()
    np.testing.assert_allclose(np.diag(sims), 1.0, atol=1e-12)
    assert sims.min() >= -1 - 1e-12 and sims.max() <= 1 + 1e-12
    W = embedding.embedding_matrix(v).double()
    ids = v.prepared.ids
    i, j = next((i, j) for i in range(len(ids)) for j in range(i) if ids[i] != ids[j])   # two different tokens
    a, b = ids[i], ids[j]
    want = float(W[a] @ W[b] / (W[a].norm() * W[b].norm()))
    stated = re.search(r"cosine = .*?= \*\*(-?[\d.]+)\*\*", embedding.cosine_math(v, a, b))
    assert stated, "cosine_math no longer states the cosine"
    assert float(stated.group(1)) == pytest.approx(want, abs=5e-5)
    scaled = embedding.cosine_matrix(v.trace["embed.tok"][0, [i, j]]).numpy()[0, 1]    # the rows as the model uses them
    assert scaled == pytest.approx(want, abs=1e-6)                              # float32 rows
    assert ("the √D scale changes nothing here" in embedding.cosine_math(v, a, b)) == v.bundle.model.cfg.embed_scale


GROUPS = {"animal": ["bear", "bird", "cat", "cow", "dog", "duck", "fox", "frog", "goat", "horse", "mouse", "owl", "pig",
                     "puppy", "rabbit"],
          "feeling": ["angry", "bored", "happy", "hungry", "sad", "scared", "sleepy", "tired"]}


def nearest_rows(W: torch.Tensor, i: int, k: int) -> list[int]:
    """The k rows of W nearest to row i by cosine (itself left out), in double precision."""
    Wd = W.double()
    cos = Wd @ Wd[i] / (Wd.norm(dim=1) * Wd[i].norm())
    cos[i] = -2
    return cos.topk(k).indices.tolist()


@pytest.mark.parametrize("key", [*VIEWS, "gpt2-shaped"])
def test_animals_close_to_animals_and_feelings_close_to_feelings_is_said_only_where_measured(key, tmp_path):
    """intro "Training moved the tokens ... ended up near each other: animals close to animals, feelings close to
    feelings. Measured in this model: of each animal's 5 nearest rows, on average **x** are animals too" only where
    the rows say so (it was hard-coded, true of tinytales only); elsewhere "can end up near each other", with this
    model's own nearest row to the sentence's first token as the example."""
    if key == "gpt2-shaped":
        from gpt2_support import gpt2_shaped_dir
        from model.pretrained import load_pretrained
        v = view_of(load_pretrained(gpt2_shaped_dir(tmp_path, d_model=48)), "the cat sat on the mat")
    else:
        v = view(key)
    tok, W = v.bundle.tokenizer, embedding.embedding_matrix(v)
    V = W.shape[0]
    text = " ".join(embedding.intro(v).split())
    close, measured = [], []
    for name, words in GROUPS.items():
        ids = []
        for w in words:                      # the words read as one known token (GPT-2: with the space before it)
            pieces = tok.pieces(" " + w if tok.kind == "bpe" else w)
            if len(pieces) == 1 and not pieces[0].unknown and len(tok.decode([pieces[0].id]).strip()) == len(w):
                ids.append(pieces[0].id)
        if len(ids) < 4:
            assert f"{name}s close to" not in text and f"of each {name}'s" not in text
            continue
        same = np.mean([len(set(nearest_rows(W, i, 5)) & set(ids)) for i in ids])      # of 5 nearest, in the group
        chance = 5 * (len(ids) - 1) / (V - 1)
        m = re.search(rf"of each {name}'s 5 nearest rows, on average \*\*([\d.]+)\*\* are {name}s too \(rows drawn "
                      rf"at random: ([\d.e-]+)\)", text)
        assert m, text
        assert float(m[1]) == pytest.approx(same, abs=0.051)
        assert float(m[2]) == pytest.approx(chance, abs=0.51 * 10 ** (math.floor(math.log10(chance)) - 1))   # 2 digits
        (close if same >= 2.5 and same > 5 * chance else measured).append(name)
    if close:
        assert "ended up near each other: " + ", ".join(f"{g}s close to {g}s" for g in close) + "." in text
        return
    assert "close to" not in text
    assert "Training moves the tokens around so that words used in the same way can end up near each other." in text
    if measured:
        assert f"In this model the {' and the '.join(g + 's' for g in measured)} have not come together" in text
    first = next(i for i in v.prepared.ids if i != tok.unk_id)
    m = re.search(r"the row nearest to that of (“.*?”) is the row of (“.*?”) \(cosine similarity ([\d.-]+)\)", text)
    assert m and m[1] == quote(tok.vocab[first]), text
    nearest = [i for i in nearest_rows(W, first, 2) if i != tok.unk_id][0]
    Wd = W.double()
    assert m[2] == quote(tok.vocab[nearest])
    assert float(m[3]) == pytest.approx(float(Wd[first] @ Wd[nearest] / (Wd[first].norm() * Wd[nearest].norm())),
                                        abs=0.0051)


def test_in_tinytales_animals_sit_close_to_animals_and_feelings_close_to_feelings():
    """The measurement above, on the one bundled model whose stories have both groups: it is said there."""
    assert "animals close to animals, feelings close to feelings." in " ".join(embedding.intro(bundled_view("tinytales")).split())


@pytest.mark.parametrize("key", ["roses", *LAB])
def test_the_map_note_states_the_share_of_the_spread_two_directions_keep(key):
    """pca_note "They keep **x%** of the spread (direction 1: a%, direction 2: b%); ... the other {D-2} directions"."""
    v = view(key)
    W = embedding.embedding_matrix(v).double().numpy()
    X = W - W.mean(0)
    variance = np.sort(np.linalg.eigvalsh(X.T @ X))[::-1]                           # per direction, largest first
    share = variance[:2] / variance.sum()
    note = embedding.pca_note(v, embedding.pca_2d(embedding.embedding_matrix(v)))
    kept = numbers(re.search(r"\*\*(.*?)\*\*", note).group(1))[0]
    first, second = numbers(note.split("direction 1:")[1])[:3:2]
    assert kept == pytest.approx(100 * share.sum(), abs=0.051)
    assert first == pytest.approx(100 * share[0], abs=0.051) and second == pytest.approx(100 * share[1], abs=0.051)
    assert f"other {W.shape[1] - 2} directions" in note


# --- 3. positions (explorer/steps/positions.py, pages/positions.py) ------------------------------


@pytest.mark.parametrize("D, L", [(64, 32), (32, 16), (24, 32), (8, 64)])
def test_sinusoidal_seats_follow_the_formula_with_fast_waves_first_and_slow_waves_last(D, L):
    """_SINUSOIDAL "{D} numbers ... a sine or a cosine of the position. The first dimensions wave fast ... the
    last ones slowly", "up to the context of {L}"; dim_name "one wave = {n} positions"; kind_caption "{D} per position"."""
    cfg = ModelConfig(vocab_size=4, d_model=D, n_heads=1, d_ff=8, max_len=L)
    table = sinusoidal_table(L, D).double()                                          # (L, D)
    angle = torch.arange(L).double()[:, None] / 10000 ** (torch.arange(0, D, 2).double() / D)   # (L, D/2)
    torch.testing.assert_close(table[:, 0::2], angle.sin(), atol=3e-5, rtol=0)
    torch.testing.assert_close(table[:, 1::2], angle.cos(), atol=3e-5, rtol=0)
    waves = [numbers(positions.dim_name(cfg, d).split("one wave = ")[1])[0] for d in range(D)]
    for d in range(D):
        assert waves[d] == pytest.approx(2 * math.pi * 10000 ** (2 * (d // 2) / D), abs=0.051)
    assert waves[0] < waves[2] < waves[-1]
    intro = positions.intro(cfg)
    assert f"not one number but {D} numbers" in intro and f"context of {L})" in intro
    assert f"{D} per position" in positions.kind_caption(cfg)


def test_the_bundled_models_add_the_same_fixed_table_to_every_sentence():
    """_SINUSOIDAL "Nothing here is learned: the same table (one row per position ...) is added to every sentence"."""
    b = bundled("tinytales")
    intro = " ".join(positions.intro(b.model.cfg).split())
    assert "Nothing here is learned: the same table (one row per position, up to the context of 32) is added to every sentence." in intro
    table = sinusoidal_table(b.model.cfg.max_len, b.model.cfg.d_model)
    for text in (DEFAULT_SENTENCE, "the dog chased the cat"):
        pos = b.model.run(b.tokenizer.encode(text))["embed.pos"][0]                  # (T, D)
        torch.testing.assert_close(pos, table[: len(pos)])
    assert positions.position_table(b.model).shape == (b.model.cfg.max_len, b.model.cfg.d_model)
    assert not any(name.startswith("embed.pos") for name, _ in b.model.named_parameters())


def test_learned_positions_are_one_trained_row_per_seat():
    """_LEARNED "one row of {D} numbers for each seat, 0 to {L-1}"; kind_caption "{L} rows of {D} numbers"."""
    key = "char, rms, post-norm, relu, learned"
    v = lab_view(key)
    cfg = v.bundle.model.cfg
    table = positions.position_table(v.bundle.model)
    assert table.shape == (cfg.max_len, cfg.d_model)
    intro = positions.intro(cfg)
    assert f"one row of {cfg.d_model} numbers" in intro and f"0 to {cfg.max_len - 1}" in intro
    assert f"{cfg.max_len} rows of {cfg.d_model} numbers" in positions.kind_caption(cfg)
    T = len(v.tokens)
    torch.testing.assert_close(v.trace["embed.pos"][0], table[:T])


@pytest.mark.parametrize("tokenizer", [
    "word",
    "char",
    "bpe",
])
def test_without_positions_the_two_orders_enter_as_the_same_vectors_one_per_token(tokenizer):
    """_NONE "its position vectors are all zeros, so each token's input is its token embedding alone ... enter as
    the same vectors (one per token) in a different order" (it once said "five vectors", wrong for char and BPE)."""
    b = lab_bundle(tokenizer=tokenizer, pos="none")
    intro = " ".join(positions.intro(b.model.cfg).split())
    assert "its position vectors are all zeros, so each token's input is its token embedding alone" in intro
    assert "enter as the same vectors (one per token) in a different order" in intro
    a, c = (b.model.run(b.tokenizer.encode(s)) for s in ("the dog chased the cat", "the cat chased the dog"))
    for trace in (a, c):
        assert not trace["embed.pos"].any() and torch.equal(trace["embed.out"], trace["embed.tok"])
        assert trace["embed.out"].shape[1] == trace["tokens"].shape[1]         # one vector per token
    assert sorted(map(tuple, a["embed.out"][0].tolist())) == sorted(map(tuple, c["embed.out"][0].tolist()))


REPEATS = "roses are red roses are blue"             # a word twice, in seats 0 and 3


@pytest.mark.parametrize("key", VIEWS)
def test_the_same_word_in_two_seats_enters_as_two_vectors_only_when_the_model_adds_positions(key):
    """sum_text "The same word in two different seats therefore enters the model as two different vectors" (once
    shown for every model, false without positions: there the repeated word gets identical rows), and "In your
    sentence, “w” stands in seats i and j: its two input vectors differ by up to **x** / are exactly the same"."""
    v = view_of(view(key).bundle, REPEATS)
    text = positions.sum_text(v, v.trace)
    one = {"word": "word", "char": "character", "bpe": "token"}[v.bundle.tokenizer.kind]
    inputs, ids = v.trace["embed.out"][0], v.prepared.ids                        # (T, D)
    table = positions.position_table(v.bundle.model)
    if table is None:
        assert f"the same {one} in two different seats enters the model as the same vector." in text
        assert "two different vectors" not in text
        for j in range(len(ids)):
            for i in range(j):
                if ids[i] == ids[j]:
                    assert torch.equal(inputs[i], inputs[j])
    else:
        assert f"The same {one} in two different seats therefore enters the model as two different vectors." in text
        assert len(torch.unique(table, dim=0)) == len(table)                   # no two seats share a row
    i, j = next((i, j) for j in range(len(ids)) for i in range(j) if ids[i] == ids[j])     # the first repeat
    gap = float((inputs[i] - inputs[j]).abs().max())
    said = f"In your sentence, {quote(v.tokens[j])} stands in seats {i} and {j}: its two input vectors "
    assert said + (f"differ by up to **{gap:.4f}** in one dimension." if gap > 0 else "are exactly the same.") in text
    assert (gap > 0) == (table is not None)


@pytest.mark.parametrize("key", VIEWS)
@pytest.mark.parametrize("text", [DEFAULT_SENTENCE, "roses are pink, tulips are 🙂", "Zyzzyva", "roses"])
def test_the_offered_pair_is_the_same_tokens_in_another_order(key, text):
    """default_pair with order_text "two sentences made of the same {words / characters / tokens} in a different
    order": the model's own tokenizer reads them as the same tokens, none unknown, in another order (the pair was
    once a sentence's token ids reversed and decoded: “ mat the on sat catthe” with GPT-2's tokenizer)."""
    bundle = view(key).bundle
    v, tok = view_of(bundle, text), bundle.tokenizer
    a, b = positions.default_pair(v)
    ids_a, ids_b = tok.encode(a), tok.encode(b)
    assert ids_a != ids_b and sorted(ids_a) == sorted(ids_b) and tok.unk_id not in ids_a, (a, b)
    many = {"word": "words", "char": "characters", "bpe": "tokens"}[tok.kind]
    assert f"two sentences made of the same {many} in a different order" in " ".join(positions.order_text(tok.kind).split())


@pytest.mark.parametrize("D, L", [(64, 32), (32, 16), (8, 64), (128, 64), (24, 64)])
def test_sinusoidal_similarity_depends_only_on_the_distance_between_seats(D, L):
    """SIMILARITY_TEXT "With sinusoidal waves the similarity depends only on the distance between two seats"."""
    assert "the similarity depends only on the distance between two seats" in positions.SIMILARITY_TEXT["sinusoidal"]
    sims = positions.cosine_matrix(sinusoidal_table(L, D)).numpy()
    for i in range(L):
        for j in range(L):
            assert sims[i, j] == pytest.approx(sims[0, abs(i - j)], abs=1e-6)


@pytest.mark.parametrize("D, L", [
    (64, 32), (32, 16), (128, 64), (16, 64), (24, 64),
    (8, 16), (8, 64),
])
def test_neighbouring_seats_look_alike_and_further_apart_the_similarity_mostly_falls(D, L):
    """SIMILARITY_TEXT "Neighbouring seats look alike; further apart the similarity mostly falls, in ripples (with
    very few dimensions a far seat can look alike again)" (the lab allows d_model 8..128 and contexts up to 64)."""
    assert ("Neighbouring seats look alike; further apart the similarity mostly falls, in ripples (with very few "
            "dimensions a far seat can look alike again)") in positions.SIMILARITY_TEXT["sinusoidal"]
    row = positions.cosine_matrix(sinusoidal_table(L, D)).numpy()[0]                            # seat 0 against every seat
    assert row[1] > 0.8                                                          # neighbours alike
    if D >= 16:
        assert all(row[1] > row[k] for k in range(2, L))                         # none more alike than a neighbour
        assert row[L // 2:].mean() < row[1:L // 2].mean()                        # further apart: less alike
    else:                                                                        # "very few dimensions"
        assert any(row[k] > row[1] for k in range(2, L))                         # a far seat alike again


@pytest.mark.parametrize("b", [
    "the cat chased the dog",
    "the cat saw the dog",
])
def test_the_verdict_blames_the_causal_mask_only_when_lifting_it_removes_the_difference(b):
    """order_verdict "Yet the predictions still differ ... That is the causal mask at work" for the same words in
    another order; "partly because of the causal mask ..., partly because the two sentences do not share every
    word" for different words; "its prediction is identical" once the mask is lifted too."""
    bundle, a = bundled("tinytales"), "the dog chased the cat"
    model = bundle.model

    def traces(text):
        ids = bundle.tokenizer.encode(text)
        return ids, [model.run(ids), model.run(ids, edits=edits.remove_positions()),
                     model.run(ids, edits=edits.remove_positions(), causal=False)]

    (ids_a, ta), (ids_b, tb) = traces(a), traces(b)
    comparison = positions.compare_orders(bundle.tokenizer.vocab, ids_a, ids_b, ta, tb)
    verdict = positions.order_verdict(comparison, True, a, b)
    pairs = positions.match_words(ids_a, ids_b)

    def largest(condition: int) -> float:             # the largest change of a matched word's forecast
        pa, pb = (t[condition]["logits"][0].double().softmax(-1) for t in (ta, tb))
        return max(float((pa[i] - pb[j]).abs().max()) for i, j in pairs)

    assert largest(1) > positions.SAME                           # without positions the two orders still differ
    assert "Yet the predictions still differ" in verdict
    if sorted(ids_a) == sorted(ids_b):                   # the same words: lifting the mask removes the difference
        assert largest(2) < positions.SAME
        assert "That is the causal mask at work" in verdict and "its prediction is identical" in verdict
    else:
        assert "do not use exactly the same words" in verdict
        assert "partly because the two sentences do not share every word" in verdict
        assert "That is the causal mask at work" not in verdict


# --- 5. feed-forward (explorer/steps/feedforward.py, pages/feedforward.py) -----------------------


@pytest.mark.parametrize("key", VIEWS)
def test_the_network_expands_D_to_F_and_back_treating_every_position_on_its_own(key):
    """pages/feedforward.py "every token's {D} numbers go through {F} neurons and come back as {D} numbers",
    "(a weight matrix of {F} × {D})"; TEXT "the same vector always gives the same result, wherever it sits"."""
    v = view(key)
    cfg = v.bundle.model.cfg
    for layer in range(cfg.n_layers):
        shapes = [(s.rows, s.cols) for s in feedforward.stages(v, layer)]
        T = len(v.tokens)
        gated = cfg.activation == "swiglu"                   # in, gate, up, SiLU(gate) x up, out
        assert shapes == ([(T, cfg.d_model)] + [(T, cfg.d_ff)] * (3 if gated else 2) + [(T, cfg.d_model)])
        mlp = v.bundle.model.blocks[layer].mlp
        assert tuple((mlp.W_gate if gated else mlp.W_in).weight.shape) == (cfg.d_ff, cfg.d_model)
        x, out = v.trace[f"blocks.{layer}.mlp.in"][0], v.trace[f"blocks.{layer}.mlp.out"][0]    # (T, D)
        order = torch.randperm(T, generator=torch.Generator().manual_seed(layer))
        with torch.no_grad():
            hidden = (torch.nn.functional.silu(mlp.W_gate(x[order])) * mlp.W_up(x[order]) if gated
                      else mlp.act(mlp.W_in(x[order])))
            shuffled = mlp.W_out(hidden)
        torch.testing.assert_close(shuffled, out[order])


def test_relu_turns_every_negative_value_into_exactly_0_and_never_goes_below():
    """TEXT "ReLU keeps positive values and turns every negative one into exactly 0"; HEATMAP_TEXT "ReLU never goes
    below 0"; zeroed "exactly 0 after ReLU" and its count of T × F values."""
    v = bundled_view("roses")
    assert "never goes below 0" in feedforward.HEATMAP_TEXT["relu"]
    for layer in range(v.bundle.model.cfg.n_layers):
        pre, post = v.trace[f"blocks.{layer}.mlp.pre"][0], v.trace[f"blocks.{layer}.mlp.post"][0]
        assert torch.equal(post, pre.clamp_min(0)) and float(post.min()) >= 0
        off = feedforward.zeroed(v, layer)
        assert (off.count, off.total) == (int((post == 0).sum()), post.numel())


def test_gelu_never_goes_below_about_minus_0_17():
    """HEATMAP_TEXT "GELU can be slightly negative (never below about −0.17)"; zeroed "squashed to between −0.17
    and 0"."""
    floor = float(nn.GELU()(torch.linspace(-6, 6, 1_200_001, dtype=torch.float64)).min())
    assert round(floor, 2) == -0.17
    stated = numbers(feedforward.HEATMAP_TEXT["gelu"].replace("−", "-").split("never below about")[1])[0]
    assert stated == pytest.approx(floor, abs=0.005)
    v = bundled_view("tinytales")
    for layer in range(v.bundle.model.cfg.n_layers):
        pre, post = v.trace[f"blocks.{layer}.mlp.pre"][0], v.trace[f"blocks.{layer}.mlp.post"][0]
        squashed = post[pre < 0]
        assert float(squashed.min()) >= floor - 1e-6 and float(squashed.max()) <= 0
        low, high = numbers(feedforward.zeroed(v, layer).rule.replace("−", "-"))
        assert (low, high) == (round(floor, 2), 0)


def test_also_fires_on_lists_exactly_the_tokens_at_least_half_as_strong():
    """pages/feedforward.py "Hover a bar to see the other tokens that fire it at least half as strongly"."""
    v = bundled_view("tinytales")
    token, post = 4, v.trace["blocks.1.mlp.post"][0]                                  # (T, F)
    table = feedforward.top_neurons(v, 1, token)
    assert list(table.neuron) == post[token].topk(feedforward.TOP_K).indices.tolist()
    for j, value, listed in zip(table.neuron, table.activation, table["also fires on"]):
        want = {t for t in range(len(v.tokens)) if t != token and 0 < post[t, j] and post[t, j] >= 0.5 * value}
        assert {int(entry.split()[0]) for entry in listed} == want


@pytest.mark.parametrize("name", [
    "tinytales",
    "roses",
])
def test_the_feed_forward_page_states_how_many_times_wider_the_hidden_layer_is(name):
    """TEXT "giving *F* numbers, usually four times as many"."""
    cfg = bundled(name).model.cfg
    ratio = cfg.d_ff / cfg.d_model
    text = page_text(open_page("feedforward", model=name))
    said = {2: ["twice", "2 times"], 4: ["four times", "4 times"]}.get(
        ratio, [f"{ratio:g} times" if ratio * 10 == int(ratio * 10) else f"about {ratio:.1f} times"])
    assert any(words in text for words in said)


@pytest.mark.parametrize("name", [
    "roses",
    "tinytales",
])
def test_switched_off_values_carry_no_signal_on_to_W_out(name):
    """pages/feedforward.py "{count} of {total} neuron values ... are {rule}. Only the rest carry a signal on to W_out"."""
    at = show_section(open_page("feedforward", model=name, layer=0), "feedforward", "Switched off")
    says = "Only the rest carry a signal on to W_out" in page_text(at)
    v = at.session_state["view"]
    mlp = v.bundle.model.blocks[0].mlp
    pre, post = v.trace["blocks.0.mlp.pre"][0], v.trace["blocks.0.mlp.post"][0]
    off = (post == 0) if v.bundle.model.cfg.activation == "relu" else (pre < 0)        # what zeroed() counts
    assert int(off.sum()) == feedforward.zeroed(v, 0).count
    with torch.no_grad():
        without = mlp.W_out(post.masked_fill(off, 0.0))
    carry_nothing = bool(torch.allclose(without, v.trace["blocks.0.mlp.out"][0], rtol=0, atol=1e-6))
    assert says == carry_nothing
    faint = "They still pass a faint signal on to W_out; the rest carry the strong one." in page_text(at)
    assert faint == (not carry_nothing)                  # GELU: one of the two sentences, whichever is true


def shown_as(text: str, true: float) -> bool:
    """`text` (a percentage as written) is 100 * `true` rounded to the decimals written."""
    decimals = len(text.rstrip("%").split(".")[1]) if "." in text else 0
    return abs(float(text.rstrip("%")) - 100 * true) <= 0.5 * 10 ** -decimals + 1e-9


@pytest.mark.parametrize("key", VIEWS)
def test_skipping_a_feed_forward_names_each_chance_precisely_enough_to_show_their_order(key):
    """change_in_words "changes from “a” (x%) to “b” (y%); “a” now gets z%": each percentage is the model's,
    rounded, with enough significant digits that the new favourite never looks smaller than the guess it overtook
    (it once said "to “ DP” (0.0%); “idi” now gets 0.01%")."""
    v = view(key)
    vocab, said = v.bundle.tokenizer.vocab, 0
    for layer in range(v.bundle.model.cfg.n_layers):
        after = v.bundle.model.run(v.prepared.ids, edits=edits.skip_mlp(layer))
        for position in range(len(v.tokens)):
            p0 = torch.softmax(v.trace["logits"][0, position], -1)
            p1 = torch.softmax(after["logits"][0, position], -1)
            b, a = int(p0.argmax()), int(p1.argmax())
            text = feedforward.change_in_words(v, v.trace, after, layer, position)
            if a == b:
                continue
            m = re.search(rf"changes from {re.escape(quote(vocab[b]))} \(([\d.]+%)\) to {re.escape(quote(vocab[a]))} "
                          rf"\(([\d.]+%)\); {re.escape(quote(vocab[b]))} now gets ([\d.]+%)\.", text)
            assert m, text
            old, top, new = m.groups()
            assert shown_as(old, float(p0[b])) and shown_as(top, float(p1[a])) and shown_as(new, float(p1[b])), text
            assert float(top[:-1]) > float(new[:-1]) or float(p1[a]) == float(p1[b]), text   # the order shows
            assert float(old[:-1]) != float(new[:-1]) or float(p0[b]) == float(p1[b]), text
            said += 1
    assert said or key != "tinytales"                    # tinytales changes its mind somewhere


# --- 6. residual stream and norm (explorer/steps/residual.py, pages/residual.py) -----------------


@pytest.mark.parametrize("key", WITH_NORM)
def test_norms_give_mean_0_and_variance_1_or_rms_1_before_their_learned_gain(key):
    """TEXT "LayerNorm subtracts the vector's average and divides by its spread, so the numbers end up with mean 0
    and variance 1, then applies a learned gain and shift. RMSNorm only divides by the ... root mean square";
    page captions "mean 0 and variance 1 (up to the tiny ε)", "before the learned gain, its RMS is 1"."""
    v = view(key)
    cfg = v.bundle.model.cfg
    for layer in range(cfg.n_layers):
        for step in residual.norm_steps(v, layer):
            for token in (0, len(v.tokens) - 1):
                m = residual.norm_math(v, step, token)
                assert float(np.abs(m.y - m.traced).max()) < 1e-4                # the recomputation is the model's
                if cfg.norm == "layer":
                    assert abs(m.z.mean()) < 1e-9 and m.z.var() == pytest.approx(m.var / (m.var + m.eps), rel=1e-9)
                    assert m.gain is not None and m.bias is not None
                else:
                    rms = float(np.sqrt((m.z ** 2).mean()))
                    assert rms == pytest.approx(math.sqrt(m.rms ** 2 - m.eps) / m.rms, rel=1e-9)
                    assert m.gain is not None and m.bias is None                 # a gain, no shift
                assert 1 - (m.z.var() if cfg.norm == "layer" else float((m.z ** 2).mean())) < 1e-3   # tiny ε


def norm_caption_claims(module: nn.Module, kind: str, y: torch.Tensor) -> list[str]:
    """What norm_caption must say about a norm, recomputed from its parameters and the output y (D,) it gave."""
    gain = module.weight.detach().double()
    bias = module.bias.detach().double() if getattr(module, "bias", None) is not None else None
    y = y.double()
    four = lambda x: f"{x:.4f}".replace("-0.0000", "0.0000")                     # noqa: E731
    moved_gain = float((gain - 1).abs().max()) >= 5e-5
    moved_bias = bias is not None and float(bias.abs().max()) >= 5e-5
    stretched = f"stretched by a learned gain (from {float(gain.min()):.4f} to {float(gain.max()):.4f})"
    if kind == "RMSNorm":
        rms = four(float(y.pow(2).mean().sqrt()))
        if not moved_gain:
            return [f"This norm's gain is still 1 in every dimension (its starting value)", f"itself: RMS {rms}."]
        return [f"is then stretched by a learned gain per dimension (from {float(gain.min()):.4f} to "
                f"{float(gain.max()):.4f}), so its RMS is {rms}."]
    mean, var = four(float(y.mean())), four(float(y.var(unbiased=False)))
    if not moved_gain and not moved_bias:
        return ["This norm's gain is still 1 and its bias 0 in every dimension (their starting values)",
                f"itself: mean {mean}, variance {var}."]
    return [stretched if moved_gain else "not stretched (its gain is still 1)",
            f"shifted by a learned bias (from {float(bias.min()):.4f} to {float(bias.max()):.4f})" if moved_bias
            else "not shifted (its bias is still 0)",
            f"so its mean is {mean} and its variance {var}"
            + (": still 0 and 1 to four decimals." if (mean, var) == ("0.0000", "1.0000") else ", no longer 0 and 1.")]


def moved_norms(key: str):
    """The lab model `key` with its norms' gains and biases moved from 1 and 0, as training moves them."""
    bundle = copy.deepcopy(lab_bundle(**LAB[key]))
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in bundle.model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    return bundle


@pytest.mark.parametrize("key", WITH_NORM + [f"{k}, trained norms" for k in WITH_NORM if k in LAB])
def test_the_norm_caption_says_stretched_or_shifted_only_where_the_learned_values_moved(key):
    """norm_caption: "stretched by a learned gain (from a to b) and shifted by a learned bias (from c to d), so its mean
    is m and its variance v, no longer 0 and 1", or "This norm's gain is still 1 and its bias 0 ... itself: mean 0.0000,
    variance 1.0000" (the page once said "no longer exactly 0 and 1" and "stretched by a learned gain" of a fresh
    lab model whose gains were 1.0000), recomputed from the norm's parameters and the output in the trace."""
    if key.endswith(", trained norms"):
        v = view_of(moved_norms(key.removesuffix(", trained norms")), LAB_TEXT)
    else:
        v = view(key)
    kind = {"layer": "LayerNorm", "rms": "RMSNorm"}[v.bundle.model.cfg.norm]
    fresh = key in LAB
    for layer in range(v.bundle.model.cfg.n_layers):
        for step in residual.norm_steps(v, layer):
            for token in (0, len(v.tokens) - 1):
                m = residual.norm_math(v, step, token)
                caption = residual.norm_caption(m, step)
                with torch.no_grad():
                    y = step.module(step.x[token].float())                      # the norm, run by the test
                torch.testing.assert_close(y, step.y[token], atol=1e-5, rtol=1e-5)
                for claim in norm_caption_claims(step.module, kind, step.y[token]):
                    assert claim in caption, (claim, caption)
                if fresh:                                       # a fresh lab model's norms are still at 1 and 0
                    assert "still 1" in caption and "stretched" not in caption and "no longer" not in caption


@pytest.mark.parametrize("name", SENTENCES)
def test_the_stream_tends_to_grow_from_the_embedding_to_the_last_layer(name):
    """TEXT "Because every layer adds more, the numbers in the stream tend to grow"."""
    assert "Because every layer adds more, the numbers in the stream tend to grow." in " ".join(residual.TEXT.split())
    norms = residual.stream_norms(bundled_view(name))                                      # (T, stages)
    assert norms[:, -1].mean() > 1.5 * norms[:, 0].mean()
    assert (norms[:, -1] > norms[:, 0]).mean() > 0.5


@pytest.mark.parametrize("name", SENTENCES)
def test_in_a_pre_norm_model_the_stream_is_never_normalized_and_tends_to_grow(name):
    """TEXT "In a pre-norm model ... each sublayer reads a normalized copy while the stream itself is never
    normalized and tends to grow"; ANALOGY_TEXT["pre"] "the stream itself is never normalized; each sublayer reads
    a normalized copy"."""
    assert ("each sublayer reads a normalized copy while the stream itself is never normalized and tends to grow"
            in " ".join(residual.TEXT.split()))
    assert "the stream itself is never normalized; each sublayer reads a normalized copy" in residual.ANALOGY_TEXT["pre"]
    v = bundled_view(name)
    model, trace = v.bundle.model, v.trace
    assert model.cfg.norm_position == "pre"
    for layer, block in enumerate(model.blocks):
        b = f"blocks.{layer}"
        torch.testing.assert_close(trace[f"{b}.resid_post"],                       # only ever added to
                                   trace[f"{b}.resid_pre"] + trace[f"{b}.attn.out"] + trace[f"{b}.mlp.out"])
        with torch.no_grad():
            torch.testing.assert_close(trace[f"{b}.attn.in"], block.norm1(trace[f"{b}.resid_pre"]))   # a copy
    sizes = residual.stream_norms(v).mean(0)                                               # per stage
    assert sizes[-1] > 1.5 * sizes[0] and np.corrcoef(np.arange(len(sizes)), sizes)[0, 1] > 0.5     # tends to grow


@pytest.mark.parametrize("key", [k for k in LAB if LAB[k].get("norm_position") == "post"])
def test_in_a_post_norm_model_the_stream_is_normalised_after_each_addition_so_it_never_grows_far(key):
    """ANALOGY_TEXT["post"] "after each addition the whole stream is normalized, so it never grows far"."""
    assert "after each addition the whole stream is normalized, so it never grows far" in residual.ANALOGY_TEXT["post"]
    v = lab_view(key)
    model = v.bundle.model
    for layer, block in enumerate(model.blocks):
        for norm, name in ((block.norm1, "resid_mid"), (block.norm2, "resid_post")):
            gain = norm.weight.detach().abs().max()
            shift = norm.bias.detach().norm() if getattr(norm, "bias", None) is not None else 0.0
            bound = float(gain * math.sqrt(model.cfg.d_model) + shift)           # |z| <= √D, then gain and shift
            assert float(v.trace[f"blocks.{layer}.{name}"][0].norm(dim=-1).max()) <= bound + 1e-4


# --- 7. prediction (explorer/steps/prediction.py, pages/prediction.py) ---------------------------


def test_temperature_sharpens_below_1_flattens_above_and_0_takes_the_favourite():
    """EXPLANATION "cold (below 1) they almost always take the favourite, at 1 they follow the forecast as it is";
    slider help "Below 1 the favourite gets even more likely ... 0 always takes the favourite", "{V} (the whole
    vocabulary) cuts nothing", "1 cuts nothing"."""
    text = " ".join(EXPLANATION.split())
    assert ("cold (below 1) they almost always take the favourite, at 1 they follow the forecast as it is, hot "
            "(above 1) they give the long shots a real chance") in text
    logits = bundled_view("tinytales").trace["logits"][0, 4]                       # (V,)
    favourite = [float(next_token_probs(logits, t).max()) for t in (0.25, 0.5, 1.0, 2.0, 3.0)]
    assert all(a > b for a, b in zip(favourite, favourite[1:]))
    zero = next_token_probs(logits, 0)
    assert float(zero[logits.argmax()]) == 1 and float(zero.sum()) == 1
    torch.testing.assert_close(next_token_probs(logits, 1.0, logits.numel(), 1.0), logits.softmax(-1))


@pytest.mark.parametrize("settings", [Settings(1.0, 5, None), Settings(0.7, None, 0.6), Settings(1.5, 8, 0.9)])
def test_the_kept_chances_are_divided_by_their_total_so_they_add_up_to_100(settings):
    """EXPLANATION "The kept chances are then scaled up so they add up to 100% again"; kept_summary "each is
    divided by {mass} so that they add up to 100% again"."""
    assert "The kept chances are then scaled up so they add up to 100% again." in " ".join(EXPLANATION.split())
    v = bundled_view("tinytales")
    table = ranking(v.trace["logits"][0, 4], v.bundle.tokenizer.vocab, settings)
    kept = table[table.kept]
    mass = float(kept.pT.sum())
    np.testing.assert_allclose(kept.final, kept.pT / mass, rtol=1e-5)
    assert float(table.final.sum()) == pytest.approx(1.0, abs=1e-6)
    assert numbers(kept_summary(table).split("divided by")[1])[0] == pytest.approx(mass_kept(table), abs=5e-5)


# --- the big picture (explorer/steps/home.py) ----------------------------------------------------


@pytest.mark.parametrize("key", VIEWS)
def test_the_big_picture_states_this_sentences_real_shapes_for_every_kind_of_model(key):
    """pipeline: "{T} tokens", "{T} x {D}", "Attention ({L} layers x {H} heads)", "{H} x {T} x {T} per layer",
    "{T} x {D} → {T} x {F} → {T} x {D}", "{V} scores", "the top guess is ... at {p}%"."""
    v = view(key)
    tr, cfg = v.trace, v.bundle.model.cfg
    stages = {s.slug: s for s in home.pipeline(v)}
    _, T, D = tr["embed.out"].shape
    _, heads, _, _ = tr["blocks.0.attn.pattern"].shape
    F, V = tr["blocks.0.mlp.post"].shape[-1], tr["logits"].shape[-1]
    layers = sum(1 for name in tr if name.endswith(".attn.pattern"))
    assert stages["tokenization"].shape == f"{T} tokens"
    assert stages["embedding"].shape == stages["positions"].shape == stages["residual"].shape == f"{T} x {D}"
    assert stages["attention"].name == f"Attention ({layers} layers x {heads} heads)"
    assert stages["attention"].shape == f"{heads} x {T} x {T} per layer"
    assert stages["feedforward"].shape == f"{T} x {D} → {T} x {F} → {T} x {D}"
    assert stages["prediction"].shape == f"{V} scores"
    probs = tr["logits"][0, -1].softmax(-1)
    assert numbers(stages["prediction"].detail)[-1] == round(100 * float(probs.max()))
    assert quote(v.bundle.tokenizer.vocab[int(probs.argmax())]) in stages["prediction"].detail


@pytest.mark.parametrize("key", [
    "tinytales",
    "bpe, layer, post-norm, gelu, no positions",
    "char, rms, post-norm, relu, learned",
    "word, no norm, relu, sinusoidal, 3 heads, embed_scale",
    "word, rms, pre-norm, gelu, 1 head",
])
def test_the_big_picture_says_the_norm_keeps_the_streams_scale_only_where_it_does(key):
    """pipeline, residual stage: "{norm} rescales the stream after each addition (post-norm), so it keeps its
    scale", "{norm} rescales the copy each sublayer reads (pre-norm), so the stream itself can grow", "this model
    has no normalization"."""
    v = view(key)
    detail = {s.slug: s for s in home.pipeline(v)}["residual"].detail
    cfg, trace, model = v.bundle.model.cfg, v.trace, v.bundle.model
    after_each_layer = np.array([float(trace[f"blocks.{i}.resid_post"][0].norm(dim=-1).mean())
                                 for i in range(cfg.n_layers)])
    added = [trace[f"blocks.{i}.resid_pre"] + trace[f"blocks.{i}.attn.out"] + trace[f"blocks.{i}.mlp.out"]
             for i in range(cfg.n_layers)]
    only_added = all(torch.allclose(trace[f"blocks.{i}.resid_post"], added[i], atol=1e-5) for i in range(cfg.n_layers))
    name = {nn.LayerNorm: "LayerNorm", nn.RMSNorm: "RMSNorm"}.get(type(model.blocks[0].norm1))
    if name is None:
        assert detail == "Every layer adds its work to the stream; this model has no normalization."
        assert only_added and torch.equal(trace["blocks.0.attn.in"], trace["blocks.0.resid_pre"])
    elif only_added:                                     # pre-norm: the stream is never rescaled
        assert detail == (f"Every layer adds its work to the stream; {name} rescales the copy each sublayer reads "
                          "(pre-norm), so the stream itself can grow.")
    else:                                                # post-norm: rescaled after each addition
        assert detail == (f"Every layer adds its work to the stream; {name} rescales the stream after each addition "
                          "(post-norm), so it keeps its scale.")
        assert after_each_layer.max() <= 1.5 * after_each_layer.min()


def test_the_big_picture_counts_the_tokens_of_a_text_longer_than_the_context():
    """pipeline, tokens stage: "The text becomes {T} token ids from a vocabulary of {V}"."""
    b = bundled("tinytales")
    text = " ".join([DEFAULT_SENTENCE] * 6)
    v = view_of(b, text)
    detail = {s.slug: s for s in home.pipeline(v)}["tokenization"].detail
    total = len(b.tokenizer.encode(text))
    assert total > b.model.cfg.max_len and len(v.prepared.ids) == b.model.cfg.max_len
    assert total in numbers(detail)


# --- 1. tokenization (explorer/steps/tokenization.py, pages/tokenization.py, model/inputs.py) ----


@lru_cache
def tales_tokenizers() -> dict:
    """The comparison tokenizers the tokenization page builds for tinytales (its training text)."""
    text = presets.corpus_texts("tinytales", 0)[0]
    return {"word": bundled("tinytales").tokenizer, "char": CharTokenizer.from_texts([text]),
            "bpe": BPETokenizer.from_texts([text], vocab_size=tokenization.BPE_VOCAB_SIZE)}


@pytest.mark.parametrize("kind, bullet", [
    ("bpe", "**BPE**"),
    ("char", "**characters**"),
])
def test_the_intro_says_nothing_is_unknown_only_for_tokenizers_that_never_read_unk(kind, bullet):
    """intro "- **characters**: nothing is ever unknown", "- **BPE**: ... so nothing is unknown"."""
    intro = tokenization.intro(bundled_view("tinytales"))
    [said] = [b for b in intro.split("\n- ") if b.startswith(bullet)]
    says_none = bool(re.search(r"nothing is (ever )?unknown", said.replace("\n", " ")))
    pieces = tales_tokenizers()[kind].pieces("The Cat sat on the mat! Café 🙂")
    assert says_none == (not [p.text for p in pieces if p.unknown])


@pytest.mark.parametrize("kind", ["word", "char"])
@pytest.mark.parametrize("text", ["the zebra ate my marmalade", "the cat sat on the mat", "Café 🙂 ß", "🙂"])
def test_unk_is_explained_for_the_kind_of_tokenizer_the_model_has(kind, text):
    """unk_explained: a word tokenizer "cannot tell “zebra” from “marmalade”", a character tokenizer "only knows the
    characters it saw ({n} of them)" and cannot tell two unknown characters apart (the word text was once shown
    for character models, which can tell zebra from marmalade); both examples are pieces it reads as <unk>, the
    sentence's own first."""
    tok = tales_tokenizers()[kind]
    unknown = [p.text for p in tok.pieces(text) if p.unknown]
    said = " ".join(tokenization.unk_explained(tok, unknown).split())
    one, many = {"word": ("word", "words"), "char": ("character", "characters")}[kind]
    assert f"A {one} tokenizer only knows the {many} it saw in its training text" in said
    assert f"the same `<unk>` for every unknown {one}: it cannot tell “" in said
    if kind == "char":
        assert f"({tok.vocab_size - 1:,} of them)" in said and "zebra" not in said
        assert len(tok.vocab[1:]) == len(set(tok.vocab[1:])) == tok.vocab_size - 1 and "<unk>" not in tok.vocab[1:]
    a, b = re.search(r"it cannot tell “(.+?)” from “(.+?)”", said).groups()
    assert a != b
    for example in (a, b):
        [piece] = tok.pieces(example)
        assert piece.unknown
    if unknown:
        assert a == unknown[0]


@pytest.mark.parametrize("key", VIEWS)
def test_the_rows_caption_names_what_shares_the_unk_row_in_the_tokenizers_units(key):
    """rows_caption "The same {word / character / token} always gets the same row", "Unknown {words / characters}
    all share the `<unk>` row" (it said "Unknown words" for characters), only when the sentence has one."""
    bundle = view(key).bundle
    tok = bundle.tokenizer
    one, many = {"word": ("word", "words"), "char": ("character", "characters"), "bpe": ("token", "tokens")}[tok.kind]
    for text in ("roses are red", "roses are pink 🙂 zebra"):
        v = view_of(bundle, text)
        caption = embedding.rows_caption(v)
        assert f"The same {one} always gets the same row, wherever it stands" in caption
        unknown = [i for i, p in enumerate(v.prepared.pieces) if p.id == tok.unk_id]
        assert (f"Unknown {many} all share the `<unk>` row." in caption) == bool(unknown)
        rows = v.trace["embed.tok"][0]
        for i in unknown:
            assert torch.equal(rows[i], rows[unknown[0]])
    assert ("Unknown" in embedding.rows_caption(view_of(bundle, "roses are pink 🙂 zebra"))) == (tok.unk_id is not None)


@pytest.mark.parametrize("word", [" because", " chased", "the", " zebra", " marmalade"])
def test_bpe_applies_the_lowest_numbered_merge_that_fits_and_ends_as_the_real_tokens(word):
    """merge_caption "starts as its {n} bytes", "BPE always applies the lowest-numbered merge that fits", "the word
    ends as **{n} tokens**"; merges_note "{V} tokens: 256 single bytes + {m} learned merges"."""
    bpe = tales_tokenizers()["bpe"]
    history, steps = bpe.replay(word), tokenization.merge_steps(bpe, word)
    ranks = {pair: r for r, pair in enumerate(bpe.merges)}
    n_bytes = len(word.encode("utf-8"))
    assert len(history[0]) == n_bytes
    assert numbers(tokenization.merge_caption(steps, 0))[1 if len(steps) > 1 else 0] == n_bytes
    for s, (before, after) in enumerate(zip(history, history[1:]), start=1):
        assert steps[s].rank == min(ranks[p] for p in zip(before, before[1:]) if p in ranks)
    final = bpe.encode(word)
    assert [bpe.token_text(t) for t in history[-1]] == [p.text for p in bpe.pieces(word)]
    assert numbers(tokenization.merge_caption(steps, len(steps) - 1))[-1] == len(final)
    note = tokenization.merges_note(bpe, bundled("tinytales").tokenizer)
    assert bpe.vocab_size == 256 + len(bpe.merges)
    assert f"{bpe.vocab_size} tokens: 256 single bytes + {len(bpe.merges)} learned merges" in note


def test_bpe_keeps_the_space_in_front_of_a_word_and_words_ignore_capitals():
    """source_note "BPE keeps the space in front of a word as part of its token (␣cat)"; lookup_math "Lowercased
    (the word tokenizer ignores capitals)"."""
    text = "the cat sat on the mat because it was tired"
    pieces = tales_tokenizers()["bpe"].pieces(text)
    assert "".join(p.text for p in pieces) == text
    assert all(" " not in p.text[1:] for p in pieces)                # a space only ever opens a token
    assert sum(p.text.startswith(" ") for p in pieces) == text.count(" ")
    tok = bundled("tinytales").tokenizer
    assert tok.encode("The CAT Sat") == tok.encode("the cat sat")
    steps, _ = tokenization.lookup_math(view_of(bundled("tinytales"), "The cat"), 0)
    assert "ignores capitals" in steps and f"index **{tok.encode('the')[0]}**" in steps


@pytest.mark.parametrize("query", [
    "zebra",
    "the cat",
])
def test_an_empty_vocabulary_search_mentions_unk_only_when_the_model_would_read_unk(query):
    """pages/tokenization.py "No vocabulary entry contains {query}: to this model it would be `<unk>`"."""
    at = show_section(open_page("tokenization"), "tokenization", "The vocabulary")
    at.text_input(key="tokenization_search").set_value(query).run()
    [info] = [i.value for i in at.info if "No vocabulary entry contains" in i.value]
    pieces = bundled("tinytales").tokenizer.pieces(query)
    unknown = [p.text for p in pieces if p.unknown]
    if unknown:
        assert f"To this model {', '.join(quote(u) for u in unknown)} would be `<unk>`." in info
    else:                                                # every piece is a known token
        assert "The model would read it as several tokens it knows." in info and "<unk>" not in info
        assert len(pieces) > 1


@pytest.mark.parametrize("kind, unit", [
    ("word", "word"),
    ("char", "character"),
])
def test_the_unknown_notice_counts_the_pieces_the_tokenizer_cuts(kind, unit):
    """Prepared.notices "{n} words are not in the model's vocabulary; the model reads each as <unk>"."""
    prepared = prepare_text(tales_tokenizers()[kind], "The Cat sat on the zebra!", 32)
    [notice] = [n for n in prepared.notices if "vocabulary" in n]
    n = sum(p.unknown for p in prepared.pieces)
    assert n > 1 and f"{n} {unit}s are not in" in notice


# --- the training lab (explorer/lab/training.py, explorer/app/lab.py, pages/training.py) ---------


# What each preset's description claims (kinds of claim, detected in its words below). A description that drops or
# gains a claim fails here: say here what it now claims, so the claim is checked instead of skipped.
PRESET_CLAIMS = {
    "walkthrough": {"shape", "task"},
    "tales": {"task"},
    "sorting": {"with positions", "task"},
    "reversing": {"learned positions", "task"},
    "no positions": {"no positional encoding", "task"},
    "post-norm": {"post-norm"},
    "today's LLM": {"today's switches"},
    "diverging": {"learning rate", "sgd", "no warmup", "no gradient clipping"},
    "sort (encoder-decoder)": {"encoder-decoder", "label smoothing", "warmup schedule", "task"},
    "sort: does it generalise to longer lists?": {"encoder-decoder", "trained lengths", "tested lengths", "task"},
    "translate (encoder-decoder)": {"encoder-decoder", "task"},
}
PRESET_TASKS = {"roses poem": "roses", "tiny-tales": "tinytales", "digit sorting": "digits", "reversal": "reverse",
                "reversing": "reverse", "sorts digits": "ed_sort", "to sort lists": "ed_sort",
                "english into french": "ed_translate"}


def preset_claims(about: str) -> dict[str, re.Match | bool]:
    """The kinds of claim a preset's description makes, each with its match."""
    words = about.lower()
    found = {
        "shape": re.search(r"(\d+) layers, (\d+) heads, d_model (\d+)", about),
        "learned positions": "learned positions" in words,
        "with positions": "with positions" in words,
        "no positional encoding": "no positional encoding" in words,
        "post-norm": "post-norm" in words,
        "learning rate": re.search(r"learning rate (\d+\.?\d*)", about),
        "sgd": "sgd" in words,
        "no warmup": "no warmup" in words,
        "no gradient clipping": "no gradient clipping" in words,
        "label smoothing": "label smoothing" in words,
        "warmup schedule": "the warmup schedule" in words,
        "trained lengths": re.search(r"lists of (\d+) to (\d+) digits", about),
        "tested lengths": re.search(r"every length from 1 to (\d+)", about),
        "encoder-decoder": "encoder-decoder" in words or "2017 transformer" in words,
        "task": any(key in words for key in PRESET_TASKS),
        "today's switches": re.search(r"rotary positions, RMSNorm, a gated MLP \(SwiGLU\), (\d+) query heads sharing "
                                      r"(\d+) key/value heads, no biases", about),
    }
    return {kind: match for kind, match in found.items() if match}


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_preset_is_what_its_description_says(name):
    """PRESETS: "2 layers, 2 heads, d_model 32", "with positions" / "with learned positions", "No positional
    encoding ... Compare with ...", "the same walkthrough model with the norm after each sum", "SGD at learning
    rate 1.0, no warmup, no gradient clipping", "with label smoothing and the warmup schedule", "lists of 3 to 8
    digits, then test it on every length from 1 to 14", the task each one names, and which are encoder-decoders."""
    from explorer.lab.training import DIGIT_LENGTHS
    about, setup = PRESETS[name]
    m, train = setup.model, setup.train
    claims = preset_claims(about)
    assert set(claims) == PRESET_CLAIMS.get(name), (f"preset {name!r} now claims {sorted(claims)}: update "
                                                    "PRESET_CLAIMS so each claim is checked")
    for kind, match in claims.items():
        if kind == "shape":
            assert tuple(map(int, match.groups())) == (m["n_layers"], m["n_heads"], m["d_model"])
        elif kind == "learned positions":
            assert m["pos"] == "learned"
        elif kind == "with positions":
            assert m["pos"] != "none"
        elif kind == "no positional encoding":
            twins = [s for n, (_, s) in PRESETS.items() if n != name and s.task == setup.task and s.model["pos"] != "none"]
            assert m["pos"] == "none" and any(t.model == {**m, "pos": t.model["pos"]} and t.train == train
                                              for t in twins)
            assert "compare with the 'reversing' preset" in about.lower() and PRESETS["reversing"][1] in twins
        elif kind == "post-norm":
            assert m == {**WALKTHROUGH.model, "norm_position": "post"}
            assert (setup.task, train) == (WALKTHROUGH.task, WALKTHROUGH.train)
        elif kind == "learning rate":
            assert train.lr == float(match.group(1))
        elif kind == "sgd":
            assert train.optimizer == "sgd"
        elif kind == "no warmup":
            assert train.warmup == 0
        elif kind == "no gradient clipping":
            assert train.grad_clip == 0
        elif kind == "label smoothing":
            assert train.label_smoothing > 0
        elif kind == "warmup schedule":
            assert train.schedule == "noam" and train.warmup > 0
        elif kind == "trained lengths":
            assert tuple(map(int, match.groups())) == tuple(DIGIT_LENGTHS)
        elif kind == "tested lengths":
            assert m["max_len"] == int(match.group(1)) + 2                  # the longest list, <bos> and <eos>
        elif kind == "encoder-decoder":
            assert setup.task.startswith("ed_")
        elif kind == "today's switches":
            assert (m["pos"], m["norm"], m["activation"], m["bias"]) == ("rope", "rms", "swiglu", False)
            assert tuple(map(int, match.groups())) == (m["n_heads"], m["n_kv_heads"])
            switched = {"n_heads", "n_kv_heads", "pos", "norm", "activation", "bias"}       # the rest: the walkthrough's
            assert ({k: v for k, v in m.items() if k not in switched}
                    == {k: v for k, v in WALKTHROUGH.model.items() if k not in switched})
            assert (setup.task, train) == (WALKTHROUGH.task, WALKTHROUGH.train)
        elif kind == "task":
            named = {task for key, task in PRESET_TASKS.items() if key in about.lower()}
            assert named == {setup.task}


def test_your_own_text_is_split_90_10_into_training_and_validation():
    """texts_for: "your own text is split 90% / 10%"."""
    train, val = texts_for(LabSetup(task="text"), "the cat sat on the mat. " * 50)
    assert len(train) / (len(train) + len(val)) == pytest.approx(0.9, abs=0.01)


def test_slow_motion_trains_two_steps_per_tick():
    """pages/training.py Slow motion: "Two steps per tick, to watch a quick model learn step by step"."""
    at = open_page("training")
    assert "Two steps per tick" in at.toggle(key="lab_slow").help
    at.toggle(key="lab_slow").set_value(True).run()
    at.button(key="lab_step").click().run()
    assert at.session_state["lab_runs"][-1].steps_done == 2
    at.button(key="lab_step").click().run()
    assert at.session_state["lab_runs"][-1].steps_done == 4
