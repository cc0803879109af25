"""Step 2, embedding: what a student sees when every token id becomes a learned row of numbers."""
from functools import lru_cache

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from streamlit.testing.v1 import AppTest

from conftest import (APP, assert_each_section_draws_only_its_charts, decode, figure_titled, open_page,
                      page_text, show_section, type_text)
from explorer.steps import embedding
from explorer.plot import token_label, visible
from explorer.app.state import DEFAULT_SENTENCE, View

T = len(DEFAULT_SENTENCE.split())        # tokens of the sentence the page opens with
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.tokenizers import BPETokenizer, WordTokenizer
from model.transformer import TransformerLM


@lru_cache
def tinytales():
    return load_bundled("tinytales")


def weight():
    return tinytales().model.embed.tok.weight.detach().double()


def run(text):
    ids = tinytales().tokenizer.encode(text)
    return ids, tinytales().model.run(ids)


def trace_named(figure, name):
    return next(t for t in figure["data"] if t.get("name") == name)


def reference_pca(W: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's own PCA: coordinates on the top two directions and their share of the variance."""
    X = W.numpy() - W.numpy().mean(0)
    eigvals, eigvecs = np.linalg.eigh(X.T @ X)
    top = np.argsort(eigvals)[::-1][:2]
    return X @ eigvecs[:, top], eigvals[top] / eigvals.sum()


def show(at, section: str):
    return show_section(at, "embedding", section)


def test_the_sentences_rows_are_the_traced_embeddings():
    at = open_page("embedding")
    assert not at.exception
    figure = figure_titled(at, f"This sentence's embeddings: {T} tokens x 64 numbers")
    _, trace = run(DEFAULT_SENTENCE)
    z = decode(figure["data"][0]["z"])
    assert z.shape == (T, 64)
    np.testing.assert_allclose(z, trace["embed.tok"][0].numpy(), rtol=1e-6)
    assert list(figure["layout"]["yaxis"]["ticktext"][:2]) == ["0 the", "1 cat"]
    assert figure["data"][0]["colorscale"][0][1] != figure["data"][0]["colorscale"][-1][1]   # diverging
    assert figure["data"][0]["zmid"] == 0
    text = page_text(at)
    assert "GPS" in text and "64 numbers" in text and "reading row number" in text


def test_the_vocabulary_map_is_a_real_pca_with_the_sentence_highlighted():
    at = show(open_page("embedding"), "The vocabulary map")
    figure = figure_titled(at, "whole vocabulary on a map (133 tokens")
    coords, share = reference_pca(weight())
    vocab_trace = trace_named(figure, "vocabulary")
    x, y = decode(vocab_trace["x"]), decode(vocab_trace["y"])
    for got, want in ((x, coords[:, 0]), (y, coords[:, 1])):        # the same up to the direction's sign
        assert np.allclose(got, want, atol=1e-6) or np.allclose(got, -want, atol=1e-6)
    ids, _ = run(DEFAULT_SENTENCE)
    highlighted = trace_named(figure, "your sentence")
    assert list(decode(highlighted["customdata"])) == list(dict.fromkeys(ids))
    assert list(decode(highlighted["text"]))[:2] == ["the", "cat"]
    assert f"{share[0]:.1%} of the spread" in figure["layout"]["xaxis"]["title"]["text"]
    assert f"**{share.sum():.1%}**" in page_text(at)


def test_cosine_similarity_between_the_sentences_tokens():
    at = show(open_page("embedding"), "Similar tokens")
    figure = figure_titled(at, "Cosine similarity between this sentence's tokens")
    _, trace = run(DEFAULT_SENTENCE)
    e = trace["embed.tok"][0]
    want = F.cosine_similarity(e[:, None, :], e[None, :, :], dim=-1).numpy()
    z = decode(figure["data"][0]["z"])
    np.testing.assert_allclose(z, want, atol=1e-5)
    assert z[0, 4] == pytest.approx(1.0)                              # "the" twice: the same row
    assert figure["data"][0]["zmin"] == -1 and figure["data"][0]["zmax"] == 1


def test_nearest_neighbours_of_the_chosen_token_over_the_whole_vocabulary():
    at = show(open_page("embedding"), "Nearest neighbours")
    at.selectbox(key="token").set_value(1).run()                    # "cat"
    figure = figure_titled(at, "Nearest neighbours of “cat”")
    vocab = tinytales().tokenizer.vocab
    cat = vocab.index("cat")
    sims = F.cosine_similarity(weight()[cat][None], weight(), dim=-1)
    sims[cat] = -2
    top = sims.topk(8)
    bars = figure["data"][0]
    np.testing.assert_allclose(decode(bars["x"]), top.values.numpy(), atol=1e-9)
    assert list(decode(bars["customdata"])) == top.indices.tolist()
    assert cat not in list(decode(bars["customdata"]))
    assert list(decode(bars["y"]))[0] == f"{vocab[top.indices[0]]} (id {int(top.indices[0])})"


def test_show_the_math_uses_the_real_row_and_works_one_cosine_out():
    at = show(open_page("embedding"), "Nearest neighbours")
    at.selectbox(key="token").set_value(1).run()
    text = page_text(at)
    cat = tinytales().tokenizer.vocab.index("cat")
    row = weight()[cat]
    assert f"**id {cat}**" in text and f"**row {cat}** of the 133 x 64 embedding matrix" in text
    assert ", ".join(f"{float(x):.4f}" for x in row[:6]) in text
    assert "does not scale its embeddings, so the row goes in unchanged" in text and "embed_scale" not in text
    sims = F.cosine_similarity(row[None], weight(), dim=-1)
    sims[cat] = -2
    best = int(sims.argmax())
    dot = float(row @ weight()[best])
    assert f"= **{dot:.4f}**" in text and f"({float(row[0]):.4f} × {float(weight()[best][0]):.4f})" in text
    assert f"= **{float(sims[best]):.4f}**" in text


def test_unknown_words_all_share_the_unk_row():
    at = open_page("embedding")
    type_text(at, "quantum zebras juggle marmalade")
    assert not at.exception
    rows = figure_titled(at, "4 tokens x 64 numbers")
    z = decode(rows["data"][0]["z"])
    assert np.allclose(z, weight()[0].numpy()[None].repeat(4, 0), atol=1e-6)
    assert list(rows["layout"]["yaxis"]["ticktext"]) == [f"{i} {w} →&lt;unk&gt;" for i, w in
                                                          enumerate("quantum zebras juggle marmalade".split())]
    assert "Unknown words all share the `<unk>` row" in page_text(at)
    assert np.allclose(decode(figure_titled(show(at, "Similar tokens"), "Cosine similarity")["data"][0]["z"]), 1.0)
    assert figure_titled(show(at, "Nearest neighbours"), "Nearest neighbours of “&lt;unk&gt;”")


@pytest.mark.parametrize("text", ["<b>the</b> cat <script>x</script>", "the 🐈 sat " * 20])
def test_strange_sentences_stay_text(text):
    at = open_page("embedding")
    type_text(at, text)
    assert not at.exception
    for section, title in zip(embedding.SECTIONS, ("This sentence's embeddings", "whole vocabulary", "Cosine similarity",
                                            "Nearest neighbours")):
        figure = figure_titled(show(at, section), title)
        labels = [str(t) for trace in figure["data"] for t in decode(trace.get("text") if trace.get("text")
                                                                      is not None else [])]
        labels += [str(t) for t in figure["layout"].get("yaxis", {}).get("ticktext", [])]
        assert not any("<b>" in t or "<script" in t for t in labels)


def test_presenter_mode_hides_the_label_option_and_enlarges_the_figures():
    at = show(open_page("embedding"), "The vocabulary map")
    assert at.checkbox(key="embedding_label_all").value is False
    at.checkbox(key="embedding_label_all").check().run()
    texts = list(trace_named(figure_titled(at, "whole vocabulary"), "vocabulary")["text"])
    in_sentence = set(run(DEFAULT_SENTENCE)[0])
    assert all(bool(t) == (i not in in_sentence) for i, t in enumerate(texts))   # every token but the red ones
    big = show(open_page("embedding", presenter=1), "The vocabulary map")
    assert not big.exception and not [c for c in big.checkbox if c.key == "embedding_label_all"]
    assert figure_titled(big, "whole vocabulary")["layout"]["font"]["size"] == 20


@pytest.mark.parametrize("presenter", [0, 1])
def test_the_vocabulary_maps_grey_labels_never_collide_with_each_other_or_the_sentences(presenter):
    at = show(open_page("embedding", presenter=presenter), "The vocabulary map")
    figure = figure_titled(at, "whole vocabulary")
    grey, red = trace_named(figure, "vocabulary"), trace_named(figure, "your sentence")
    xy = np.stack([decode(grey["x"]), decode(grey["y"])], 1)
    size = (embedding.MAP_WIDTH_PX, 480 * (1.3 if presenter else 1.0) - 150)
    pixels = embedding.to_pixels(xy, size)
    vocab = tinytales().tokenizer.vocab
    seen = list(decode(red["customdata"]))
    assert list(red["text"]) == [token_label(vocab[i]) for i in seen]      # every sentence token is labelled
    boxes = [embedding.label_box(*pixels[i], visible(vocab[i]), red["textfont"]["size"]) for i in seen]
    labelled = [i for i, t in enumerate(grey["text"]) if t]
    assert len(labelled) >= 15                                            # a readable subset, not none
    for i in labelled:
        assert grey["text"][i] == token_label(vocab[i]) and i not in seen
        box = embedding.label_box(*pixels[i], visible(vocab[i]), grey["textfont"]["size"])
        assert not any(embedding.overlaps(box, other) for other in boxes), vocab[i]
        boxes.append(box)


def test_roses_has_a_32_number_map():
    at = open_page("embedding", model="roses", text="roses are red")
    assert not at.exception
    assert figure_titled(at, "3 tokens x 32 numbers")
    assert figure_titled(show(at, "The vocabulary map"), "vocabulary on a map (12 tokens")
    assert len(figure_titled(show(at, "Nearest neighbours"), "Nearest neighbours")["data"][0]["y"]) == 8


# --- the builders on models that are not bundled -------------------------------------------------

def tiny_view(text="b a c", **cfg) -> View:
    tok = WordTokenizer(["<unk>", "a", "b", "c", "d"])
    cfg = ModelConfig(vocab_size=5, n_heads=1, n_layers=1, d_ff=8, max_len=8, **cfg)
    torch.manual_seed(0)
    bundle = Bundle(TransformerLM(cfg).eval(), tok, {})
    prepared = prepare_text(tok, text, cfg.max_len)
    return View("lab model", bundle, text, False, prepared, bundle.model.run(prepared.ids))


def test_embed_scale_is_said_and_shown_in_the_math():
    v = tiny_view(d_model=16, embed_scale=True, pos="learned", norm="rms", norm_position="post")
    row = v.bundle.model.embed.tok.weight[2].detach()
    scaled = v.trace["embed.tok"][0, 0]
    assert torch.allclose(scaled, row * 4.0)
    text = embedding.lookup_math(v, v.trace, 0)
    assert "√16 = 4.0000" in text
    assert ", ".join(f"{float(x):.4f}" for x in row[:6]) in text
    assert ", ".join(f"{float(x):.4f}" for x in scaled[:6]) in text
    assert "it scales its embeddings" in embedding.intro(v) and "embed_scale" not in embedding.intro(v) + text
    assert "This model scales its embeddings: the row is multiplied by √16" in text
    assert "changes nothing" in embedding.cosine_math(v, 2, 1)


def test_a_lab_model_gets_its_own_map_and_neighbours():
    v = tiny_view(d_model=8, pos="none", norm="none")
    pca = embedding.vocab_pca(v)
    coords, share = reference_pca(v.bundle.model.embed.tok.weight.detach().double())
    assert np.allclose(np.abs(pca.coords), np.abs(coords), atol=1e-6)
    assert np.allclose(pca.explained, share)
    table = embedding.neighbours_table(v, 2)
    assert len(table) == 4 and 2 not in list(table["id"])
    assert list(table["cosine"]) == sorted(table["cosine"], reverse=True)
    figure = embedding.pca_figure(v, pca).to_plotly_json()
    assert list(decode(trace_named(figure, "your sentence")["customdata"])) == [2, 1, 3]


def test_pca_handles_a_one_number_model_and_sums_big_vocabularies_in_chunks(monkeypatch):
    one = embedding.pca_2d(torch.arange(6.0)[:, None])
    assert one.coords.shape == (6, 2) and one.explained[0] == pytest.approx(1.0) and one.explained[1] == 0
    torch.manual_seed(1)
    W = torch.randn(300, 20) @ torch.diag(torch.linspace(3, 0.1, 20)) + 5.0      # off-centre, like real rows
    coords, share = reference_pca(W.double())
    monkeypatch.setattr(embedding, "PCA_CHUNK", 7)                              # many chunks, one ragged
    chunked = embedding.pca_2d(W)
    assert np.allclose(chunked.explained, share, atol=1e-9)
    assert np.allclose(np.abs(chunked.coords), np.abs(coords), atol=1e-6)


def test_both_pages_run_for_a_lab_model_with_a_bpe_tokenizer_and_embed_scale():
    bpe = BPETokenizer.from_texts(["the cat sat on the mat " * 30], vocab_size=270)
    cfg = ModelConfig(vocab_size=bpe.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                      pos="learned", norm="rms", norm_position="post", embed_scale=True)
    torch.manual_seed(0)
    lab = Bundle(TransformerLM(cfg).eval(), bpe, {"trained_in": "training lab", "task": "text"})
    for page in ("tokenization", "embedding"):
        at = AppTest.from_file(APP, default_timeout=60)
        at.session_state["trained_models"] = {"my bpe model": lab}
        at.session_state[f"math_{page}"] = True
        at.query_params["model"] = "my bpe model"
        at.query_params["text"] = "the cat sat, zebra!"
        at.run()
        at.switch_page(f"pages/{page}.py").run()
        assert not at.exception, at.exception
        assert at.selectbox(key="model").value == "my bpe model"
        text = page_text(at)
        if page == "tokenization":
            assert "no token is ever unknown" in text
            assert "These are the model's own BPE merges" in page_text(show_section(at, page, "BPE merges"))
            assert "own vocabulary" in page_text(show_section(at, page, "Three ways to cut"))
        else:
            ids = bpe.encode("the cat sat, zebra!")
            rows = decode(figure_titled(at, f"{len(ids)} tokens x 16 numbers")["data"][0]["z"])
            W = lab.model.embed.tok.weight.detach()
            np.testing.assert_allclose(rows, (W[ids] * 4.0).numpy(), rtol=1e-5)
            assert "multiplies every row by √16" in text and "√16 = 4.0000" in text


def test_each_section_draws_only_its_own_chart_in_both_modes():
    assert_each_section_draws_only_its_charts("embedding", embedding.SECTIONS, [1, 1, 1, 1])
