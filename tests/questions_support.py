"""The answer to a class's question, recomputed from the model's own forward pass for tests: never through
explorer/steps/ or explorer/questions.py, whose answers these check.

    option(token)                           a token as an option reads
    knockout_changes(bundle, ids, l, t)     each head of layer l knocked out: the largest change at t
    pushes(bundle, ids, t)                  each head's and MLP's direct share of the top guess's logit
    lens_stages(n_layers)                   the stages the residual page's lens chart draws by default
    lens_tops(bundle, ids, t), lens_first   the top guess read at each of them, where the final one settles
    expected_answer(bundle, ids, view, q)   the answer to question q on the step view `view` (None: a poll)
    bundle_of(name)                         a step's model: a bundled one, or Pythia at a step from HUB_CACHE
"""
import numpy as np
import torch

from explorer.plot import visible
from model.edits import knock_out_head
from model.seq2seq import EncoderDecoder, greedy

OPTIONS = 4
HUB_CACHE = None      # the Hugging Face cache the ready lessons' Pythia steps are read from (conftest.lesson_hub_cache)


def bundle_of(name: str):
    """The model a lesson step names: a bundled one, or Pythia-70M at a training step ("pythia-70m@step1000"), read
    by our loader from HUB_CACHE."""
    from model import hub
    from model.checkpoint import load_bundled
    from model.pretrained import load_pretrained
    family, _, step = name.partition("@step")
    if family != "pythia-70m":
        return load_bundled(name)
    spec = hub.at_step(hub.PYTHIA_70M, int(step) if step else hub.PYTHIA_70M.steps[-1])
    return load_pretrained(hub.cached(spec, HUB_CACHE))


def checkpoints_of(name: str) -> list[tuple[int, object]]:
    """(step, bundle) of each training step of `name`'s model that HUB_CACHE holds, in order."""
    from model import hub
    family = name.partition("@step")[0]
    assert family == "pythia-70m", name
    steps = [s for s in hub.PYTHIA_70M.steps if hub.cached(hub.at_step(hub.PYTHIA_70M, s), HUB_CACHE) is not None]
    return [(step, bundle_of(f"{family}@step{step}")) for step in steps]


def first_right(name: str, ids: list[int]) -> str:
    """The first training step (of those HUB_CACHE holds) whose top guess after `ids` is the last one's, as the
    question's option reads: recomputed from each checkpoint's logits, among the tokenizer's ids."""
    steps, guesses = [], []
    for step, bundle in checkpoints_of(name):
        logits = bundle.model.run(ids)["logits"][0, -1]                                   # (V,)
        steps.append(step)
        guesses.append(int(logits[:len(bundle.tokenizer.vocab)].argmax()))
    first = next(s for s, g in zip(steps, guesses) if g == guesses[-1])
    return f"step {first:,}"


def option(token: str) -> str:
    """A token as an option reads (the test's own rule: visible text, one line)."""
    return " ".join(visible(token).split())


def named(tokens: list[str], position: int) -> str:
    """The option of a word of a sentence: a repeated word names its position."""
    words = [option(t) for t in tokens]
    return words[position] + (f" (position {position})" if words.count(words[position]) > 1 else "")


def cosines(weight: torch.Tensor, i: int) -> np.ndarray:
    w = weight.detach().double().numpy()
    return w @ w[i] / (np.linalg.norm(w, axis=1) * np.linalg.norm(w[i]) + 1e-300)


def special(token: str) -> bool:
    return token.startswith("<") and token.endswith(">")


def knockout_changes(bundle, ids, layer: int, position: int) -> dict[str, float]:
    """Each head of `layer` knocked out in a full run: the largest change of any word's probability at `position`."""
    before = torch.softmax(bundle.model.run(ids)["logits"][0, position].double(), -1)
    out = {}
    for head in range(bundle.model.cfg.n_heads):
        after = torch.softmax(bundle.model.run(ids, edits=knock_out_head(layer, head))["logits"][0, position].double(),
                              -1)
        out[f"layer {layer}, head {head}"] = float((after - before).abs().max())
    return out


def pushes(bundle, ids, position: int) -> dict[str, float]:
    """Each head's and MLP's direct share of the top guess's logit, in float64 NumPy from the trace and weights
    (the final LayerNorm's scale held at this position's)."""
    model, trace = bundle.model, bundle.model.run(ids)
    target = int(trace["logits"][0, position].argmax())
    final = trace[f"blocks.{model.cfg.n_layers - 1}.resid_post"][0, position].double().numpy()
    scale = np.sqrt(final.var() + model.final_norm.eps)
    gain = model.final_norm.weight.detach().double().numpy()
    w_u = model.unembed.weight[target].detach().double().numpy()

    def logit(v: np.ndarray) -> float:
        return float(((v - v.mean()) / scale * gain) @ w_u)
    out, H = {}, model.cfg.n_heads
    for layer, block in enumerate(model.blocks):
        z = trace[f"blocks.{layer}.attn.z"][0, :, position].double().numpy()                     # (H, K)
        w_o = block.attn.W_o.weight.detach().double().numpy()                                    # (D, D): out, in
        K = z.shape[1]
        for h in range(H):
            out[f"layer {layer} head {h}"] = logit(w_o[:, h * K:(h + 1) * K] @ z[h])
        out[f"MLP of layer {layer}"] = logit(trace[f"blocks.{layer}.mlp.out"][0, position].double().numpy())
    return out


def lens_stages(n_layers: int) -> list[tuple[str, str]]:
    """(trace name, label) of each stage the residual page's lens chart draws by default: the embedding, then each
    layer after its feed-forward network and, for a model of at most 4 layers, after its attention too."""
    stages = [("embed.out", "token + position")]
    for i in range(n_layers):
        if n_layers <= 4:
            stages.append((f"blocks.{i}.resid_mid", f"layer {i}: after attention"))
        stages.append((f"blocks.{i}.resid_post", f"layer {i}: after feed-forward"))
    return stages


def lens_tops(bundle, ids, position: int) -> list[int]:
    """The top token read by the model's own final norm and unembedding from the stream after each stage of
    `lens_stages`."""
    model, trace = bundle.model, bundle.model.run(ids)
    with torch.no_grad():
        return [int(model.unembed(model.final_norm(trace[name][0, position])).argmax())
                for name, _ in lens_stages(model.cfg.n_layers)]


def lens_first(tops: list[int]) -> int:
    """The first stage from which the final guess is on top and stays there to the end."""
    return next(s for s in range(len(tops)) if all(t == tops[-1] for t in tops[s:]))


def fitted(view: dict, key: str, upper: int, default: int) -> int:
    value = view.get(key, default)
    return value if isinstance(value, int) and 0 <= value < upper else default


def expected_answer(bundle, ids: list[int], view: dict, question) -> str | None:
    """The answer to `question` asked on the step view `view` (its layer, head and token as the page fits them),
    read by `bundle` as `ids`."""
    cfg, vocab = bundle.model.cfg, bundle.tokenizer.vocab
    layer, head = fitted(view, "layer", cfg.n_layers, 0), fitted(view, "head", cfg.n_heads, 0)
    token = fitted(view, "token", len(ids), len(ids) - 1)
    kind = question.kind
    if kind == "choice":
        return question.answer
    if kind == "poll":
        return None
    if kind == "token-count":
        return str(len(bundle.tokenizer.encode(question.text or view["text"])))
    if kind == "reads-source":
        assert isinstance(bundle.model, EncoderDecoder) and question.word, "the tests name the written word"
        written = greedy(bundle.model, ids)
        row = [vocab[i] for i in written].index(question.word)
        trace = bundle.model.run(ids, [bundle.model.bos_id, *written])
        weights = trace[f"decoder.blocks.{layer}.cross_attn.pattern"][0, head, row]
        return named([vocab[i] for i in ids], int(weights.argmax()))
    trace = bundle.model.run(ids)
    if kind == "next-word":
        return option(vocab[int(trace["logits"][0, token].argmax())])
    if kind == "nearest-word":
        given = vocab.index(question.word) if question.word else ids[token]
        sims = cosines(bundle.model.embed.tok.weight, given)
        sims[[given, *(i for i, t in enumerate(vocab) if special(t))]] = -np.inf
        return option(vocab[int(sims.argmax())])
    if kind == "looks-at":
        row = trace[f"blocks.{layer}.attn.pattern"][0, head, token, : token + 1]
        return named([vocab[i] for i in ids], int(row.argmax()))
    if kind == "lens-layer":
        return lens_stages(cfg.n_layers)[lens_first(lens_tops(bundle, ids, token))][1]
    if kind == "knockout":
        assert cfg.n_heads <= OPTIONS, "a layer of more heads offers only those that write most"
        changes = knockout_changes(bundle, ids, layer, token)
        return max(changes, key=changes.get)
    if kind == "biggest-push":
        found = pushes(bundle, ids, token)
        return max(found, key=found.get)
    if kind == "first-right":
        return first_right(view["model"], ids)
    if kind == "steered-word":
        steered = steered_logits(bundle, ids, layer, view.get("fields", {}))
        return option(vocab[int(steered.argmax())])
    raise AssertionError(f"no recomputation for {kind}")


def steered_logits(bundle, ids: list[int], layer: int, fields: dict) -> torch.Tensor:
    """The next token's logits after `ids` with the features page's steering (`fields`: a neuron's output weights at
    length 1, or the mean stream after the layer of sentence A minus B's, times the strength) added to the stream
    after block `layer` at every position: recomputed here from the weights, not by model/steering.py."""
    model = bundle.model
    if fields.get("steer-by", "neuron") == "neuron":
        post = model.run(ids)[f"blocks.{layer}.mlp.post"][0]                                   # (T, F)
        neuron = fields.get("neuron")
        if not isinstance(neuron, int) or not 0 <= neuron < post.shape[1]:          # as a link's: the busiest
            neuron = int(post.amax(0).argmax())
        w = model.blocks[layer].mlp.W_out.weight[:, neuron].detach()                           # (D,)
        direction = w / w.norm()
    else:
        streams = [model.run(bundle.tokenizer.encode(fields[key]))[f"blocks.{layer}.resid_post"][0].mean(0)
                   for key in ("sentence-a", "sentence-b")]                                    # (D,) each
        direction = streams[0] - streams[1]
    added = float(fields["strength"]) * direction
    return model.run(ids, edits={f"blocks.{layer}.resid_post": lambda x: x + added})["logits"][0, -1]   # (V,)
