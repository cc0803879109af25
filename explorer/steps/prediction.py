"""Step 7, next-token prediction: from the last scores to probabilities, and from probabilities to text.

Everything here is a plain function of logits, a vocabulary or a model (no Streamlit calls), so it is
tested without a browser. Probabilities always come from `model.generate.next_token_probs`, the same
function sampling draws from: the bars a student sees are exactly what the dice are rolled on.
"""
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model.config import ModelConfig
from model.generate import TokenTimes, generate, next_token_probs
from model.layers import cache_bytes_per_token
from model.tokenizers import Tokenizer
from model.transformer import TransformerLM

from explorer.plot import style, token_label
from explorer.view import quote

TOP_BARS = 12               # bars in the probability chart
MATH_ROWS = 6               # tokens worked out in "Show the math"
CUMULATIVE_RANKS = 40       # ranks in the top-p chart
MAX_GENERATED = 100         # the continuation stops growing here
KEPT, CUT = "#4477AA", "#BBBBBB"
STRATEGY_LABELS = {"greedy": "greedy", "sample": "sampling", "beam": "beam search"}

EXPLANATION = """\
**The model's last step is a forecast.** A weather forecast never says "it will rain tomorrow"; it says
*60% rain, 30% clouds, 10% sun*. The model does the same for the next token: it gives a chance to every
one of the {vocab} tokens it knows.

1. The final vector of a token is compared with every vocabulary token (the *unembedding*), giving one
   score per token, called a **logit**. A high score means "this could well come next".
2. **Softmax** turns the scores into chances that add up to 100%: raise *e* to the power of each score,
   then divide each result by the total.
3. Then someone has to actually pick a token, and that is where the sliders come in.
   **Temperature** is how adventurous the guesser is: cold (below 1) they almost always take the
   favourite, at 1 they follow the forecast as it is, hot (above 1) they give the long shots a real chance.
   **Top-k** only lets the *k* favourites take part. **Top-p** lets the favourites take part until
   together they cover *p* of the chance (say 90%) and forgets the rest. The kept chances are then
   scaled up so they add up to 100% again.

Every position makes a forecast, not only the last one: pick an earlier token to see what the model
expected after it, and compare with the word that really came next. That comparison is exactly how
the model was trained.

Writing is this, over and over: pick a token, add it to the text, forecast again. **Greedy** always takes
the favourite, **sampling** rolls the dice on the chances above, and **beam search** keeps a few whole
continuations in mind and returns the one with the highest chance overall.
"""


def explanation_text(vocab_size: int) -> str:
    return EXPLANATION.format(vocab=f"{vocab_size:,}")


@dataclass(frozen=True)
class Settings:
    """How probabilities are shaped before a token is picked (None: that cut is off)."""
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def describe(self) -> str:
        parts = [f"temperature {self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top-k {self.top_k:,}")
        if self.top_p is not None:
            parts.append(f"top-p {self.top_p:g}")
        return ", ".join(parts)


def ranking(logits: torch.Tensor, vocab: list[str], settings: Settings) -> pd.DataFrame:
    """Every vocabulary token for one position, likeliest first.

    Columns: rank, id, token, logit, p1 (softmax at temperature 1), pT (at the chosen temperature),
    before (the pT mass of the tokens ranked above), kept, cut_by ("" when kept), final (what sampling
    draws from: `next_token_probs` with every setting).
    """
    logits = logits.detach().float()                                            # (V,)
    T, k, p = settings.temperature, settings.top_k, settings.top_p
    p1 = next_token_probs(logits, 1.0)                                          # (V,)
    pT = p1 if T == 1 else next_token_probs(logits, T)                          # (V,)
    final = next_token_probs(logits, T, k, p)                                   # (V,)
    order = logits.argsort(descending=True, stable=True).numpy()
    p_sorted = pT.numpy()[order]
    before = np.cumsum(p_sorted) - p_sorted
    rank = np.arange(1, len(order) + 1)
    cut_by = np.full(len(order), "", dtype=object)
    if p is not None and p < 1:
        cut_by[before >= p] = "top-p"
    if k is not None:
        cut_by[rank > k] = "top-k"
    if T == 0:
        cut_by[rank > 1] = "temperature 0"
    return pd.DataFrame({
        "rank": rank, "id": order, "token": [vocab[i] for i in order],
        "logit": logits.numpy()[order], "p1": p1.numpy()[order], "pT": p_sorted, "before": before,
        "kept": cut_by == "", "cut_by": cut_by, "final": final.numpy()[order],
    })


def mass_kept(table: pd.DataFrame) -> float:
    """The share of the (temperature-adjusted) probability the kept tokens had before rescaling."""
    return float(table.loc[table.kept, "pT"].sum())


TOP_K_SLIDER_MAX = 1000      # up to this vocabulary size top-k is a plain slider over every k
TOP_K_STEPS = [1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000]


def top_k_steps(V: int) -> list[int]:
    """The top-k choices for a bigger vocabulary: 1, 2, 3, 5, 10, ... and V itself (nothing cut)."""
    return [k for k in TOP_K_STEPS if k < V] + [V]


def kept_summary(table: pd.DataFrame) -> str:
    """One sentence: how many tokens take part and how much of the chance they had."""
    n, total, mass = int(table.kept.sum()), len(table), mass_kept(table)
    if n == total:
        return f"All {total:,} tokens take part in the draw; nothing is cut."
    return (f"{n:,} of {total:,} tokens take part in the draw. Together they had {mass:.1%} of the chance; "
            f"each is divided by {mass:.4f} so that they add up to 100% again.")


def renormalise_story(table: pd.DataFrame) -> str:
    """The last step worked out for the favourite: divide by the mass the kept tokens had."""
    mass, row = mass_kept(table), table.iloc[0]
    return (f"**Scaling back up to 100%.** The kept tokens had {mass:.6f} of the probability together, so each "
            f"is divided by {mass:.6f}. For {quote(row.token)}: {row.pT:.6f} / {mass:.6f} = **{row.final:.6f}**.")


def probability_figure(table: pd.DataFrame, settings: Settings, title: str, actual: int | None = None,
                       n: int = TOP_BARS, presenter: bool = False) -> go.Figure:
    """Bars for the n likeliest tokens: the probability at the chosen temperature (grey and hatched when
    top-k or top-p cuts the token) and what sampling draws from after the cut."""
    top = table.head(n)
    tokens = [token_label(t) for t in top.token]
    if actual is not None and actual not in set(top.id):      # show the real next token too, far down the list
        row = table[table.id == actual]
        top = pd.concat([top, row])
        tokens.append(f"… #{int(row['rank'].iloc[0]):,} {token_label(row.token.iloc[0])}")
    kept = top.kept.to_numpy()
    hover = np.stack([tokens, top.logit.map("{:.4f}".format), top.p1.map("{:.4%}".format),
                      top.pT.map("{:.4%}".format), top.final.map("{:.4%}".format),
                      np.where(kept, "kept", "cut by " + top.cut_by.astype(str))], axis=-1)
    template = ("<b>%{customdata[0]}</b><br>logit %{customdata[1]}<br>at temperature 1: %{customdata[2]}"
                f"<br>at temperature {settings.temperature:g}: %{{customdata[3]}}"
                "<br>after the cut: %{customdata[4]} (%{customdata[5]})<extra></extra>")
    outline = []
    if settings.temperature != 1:        # the distribution before the temperature, as an outline beside it
        outline = [go.Bar(name="at temperature 1 (before the change)", x=tokens, y=top.p1,
                          marker=dict(color="rgba(0,0,0,0)", line=dict(color="#444444", width=2)),
                          customdata=hover, hovertemplate=template)]
    highest = min(1.0, float(top[["pT", "final", "p1"]].max().max()))
    ceiling = highest * (1.18 if actual is None else 1.6) + 1e-9            # room for bar labels and the arrow
    fig = go.Figure([
        *outline,
        go.Bar(name=f"probability at temperature {settings.temperature:g}", x=tokens, y=top.pT,
               marker=dict(color=np.where(kept, "#88CCEE", CUT).tolist(),
                           pattern=dict(shape=np.where(kept, "", "/").tolist())),
               customdata=hover, hovertemplate=template),
        go.Bar(name="what sampling draws from (after the cut)", x=tokens,
               y=top.final, marker_color=KEPT, customdata=hover, hovertemplate=template,
               text=[("cut" if not k else f"{f:.0%}" if f >= 0.005 else "") for f, k in zip(top.final, kept)],
               textposition="outside", constraintext="none", cliponaxis=False),
    ], layout=dict(title=title, barmode="group", bargap=0.25,
                   legend=dict(orientation="h", y=-0.28, x=0),
                   yaxis=dict(title="probability", tickformat=".0%", tickvals=_percent_ticks(min(1.0, ceiling)),
                              range=[0, ceiling]),
                   xaxis=dict(type="category", title="next token (likeliest first)")))
    if actual is not None:
        x = tokens[int(np.flatnonzero(top.id.to_numpy() == actual)[0])]
        row = top[top.id == actual].iloc[0]
        left = tokens.index(x) < len(tokens) / 2            # the words run away from the plot's nearer edge
        fig.add_annotation(x=x, y=max(row.pT, row.final), text="next in your sentence", showarrow=True,
                           arrowhead=2, arrowcolor="#CC3311", ax=0, ay=-40, yshift=16,  # above the bar's own label
                           xanchor="left" if left else "right", font=dict(color="#CC3311"))
    return style(fig, presenter, 430)


def _percent_ticks(highest: float) -> list[float]:
    """At most six round ticks from 0 to `highest` (a probability axis shows no tick above 100%)."""
    step = next(s for s in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25) if highest / s <= 5 + 1e-6)
    return [round(step * i, 4) for i in range(int(highest / step + 1e-9) + 1)]


def logit_figure(table: pd.DataFrame, title: str, n: int = TOP_BARS, presenter: bool = False) -> go.Figure:
    """The raw scores (logits) of the n likeliest tokens: what softmax starts from."""
    top = table.head(n)
    tokens = [token_label(t) for t in top.token]
    fig = go.Figure(go.Bar(
        x=tokens, y=top.logit, marker_color=np.where(top.logit >= 0, "#EE6677", "#4477AA").tolist(),
        customdata=np.stack([tokens, top.p1.map("{:.4%}".format)], -1),
        text=top.logit.map("{:.1f}".format), textposition="outside", constraintext="none", cliponaxis=False,
        hovertemplate="<b>%{customdata[0]}</b><br>logit %{y:.4f}<br>probability at temperature 1: "
                      "%{customdata[1]}<extra></extra>"),
        layout=dict(title=title, xaxis=dict(type="category", title="token (likeliest first)"),
                    yaxis=dict(title="logit (score)", zeroline=True, zerolinecolor="#888888")))
    return style(fig, presenter, 430)


def cumulative_figure(table: pd.DataFrame, settings: Settings, presenter: bool = False) -> go.Figure:
    """Top-p's view: probabilities added up from the likeliest token, with the line at p."""
    top = table.head(CUMULATIVE_RANKS)
    total = (top.before + top.pT).to_numpy()
    tokens = [token_label(t) for t in top.token]
    inside = top.before.to_numpy() < (settings.top_p if settings.top_p is not None else 2.0)
    fig = go.Figure(go.Scatter(
        x=top["rank"], y=total, mode="lines+markers", line=dict(color="#777777"),
        marker=dict(size=9, color=np.where(inside, KEPT, CUT).tolist()),
        customdata=np.stack([tokens, top.pT.map("{:.4%}".format),
                             np.where(inside, "inside top-p", "cut by top-p")], -1),
        hovertemplate=("rank %{x}: <b>%{customdata[0]}</b> (%{customdata[1]})<br>"
                       "total up to here %{y:.4%}<br>%{customdata[2]}<extra></extra>")),
        layout=dict(title="Top-p: the probabilities added up, likeliest token first",
                    xaxis=dict(title="rank of the token", dtick=5 if len(top) > 12 else 1),
                    yaxis=dict(title="total probability so far", tickformat=".0%", range=[0, 1.05]),
                    showlegend=False))
    if settings.top_p is not None:
        fig.add_hline(y=settings.top_p, line_dash="dash", line_color="#CC3311",
                      annotation_text=f"p = {settings.top_p:g}", annotation_position="bottom right")
    if settings.top_k is not None and settings.top_k < len(top):
        fig.add_vline(x=settings.top_k + 0.5, line_dash="dot", line_color="#555555",
                      annotation_text=f"top-k = {settings.top_k:,}", annotation_position="top right")
    return style(fig, presenter, 330)


@dataclass(frozen=True)
class Softmax:
    """Softmax worked out in float64 with the real sum over the whole vocabulary."""
    rows: pd.DataFrame      # token, logit, scaled (logit / T), exp, probability for the top tokens
    total: float            # sum over the vocabulary of exp(logit / T - shift)
    shift: float            # 0, unless exp would overflow: then the largest scaled logit is subtracted


def softmax_worked(logits: torch.Tensor, vocab: list[str], temperature: float, n: int = MATH_ROWS) -> Softmax:
    """exp(logit / T) / sum over the vocabulary, for the n likeliest tokens (temperature > 0)."""
    z = logits.detach().double()                                                 # (V,)
    scaled = z / temperature
    shift = float(scaled.max()) if float(scaled.max()) > 700 else 0.0          # exp(710) overflows float64
    e = torch.exp(scaled - shift)
    total = float(e.sum())
    top = z.argsort(descending=True, stable=True)[:n].tolist()
    rows = pd.DataFrame({"token": [vocab[i] for i in top], "logit": [float(z[i]) for i in top],
                         "logit / T": [float(scaled[i]) for i in top], "exp(logit / T)": [float(e[i]) for i in top],
                         "probability": [float(e[i]) / total for i in top]})
    return Softmax(rows, total, shift)


def softmax_story(worked: Softmax, temperature: float, vocab_size: int) -> str:
    """The first row worked out in words, with its real numbers."""
    row = worked.rows.iloc[0]
    exp_name = "exp(logit / T − largest)" if worked.shift else "exp(logit / T)"
    return (f"For the likeliest token, {quote(row.token)}: its logit is {row.logit:.4f}; divided by the "
            f"temperature {temperature:g} that is {row['logit / T']:.4f}; {exp_name} = "
            f"{row['exp(logit / T)']:.6g}. The same is done for all {vocab_size:,} tokens and the results "
            f"add up to **{worked.total:.6g}**. So its probability is {row['exp(logit / T)']:.6g} / "
            f"{worked.total:.6g} = **{row.probability:.4f}**.")


def top_p_story(table: pd.DataFrame, top_p: float | None) -> str:
    """How top-p found its cut-off, in words and real numbers."""
    if top_p is None:
        return "Top-p is at 1: every token is allowed, however small its chance."
    inside = table[table.before < top_p]
    last = inside.iloc[-1]
    reached = last.before + last.pT
    return (f"Top-p adds the probabilities up from the likeliest token and stops as soon as the total "
            f"reaches p = {top_p:g}. Before {quote(last.token)} (rank {int(last['rank']):,}) the total was "
            f"{last.before:.4f}, still below {top_p:g}, so it is kept; with it the total is {reached:.4f}"
            + (f", which reaches {top_p:g}, so the {len(table) - len(inside):,} tokens after it are cut."
               if len(inside) < len(table) else ", and no token is left to cut."))


def actual_next_story(table: pd.DataFrame, actual: int) -> str:
    """How the model rated the token that really comes next in the sentence."""
    row = table[table.id == actual].iloc[0]
    return (f"In your sentence the next token is {quote(row.token)}: the model gave it **{row.p1:.1%}** "
            f"(rank {int(row['rank']):,} of {len(table):,}).")


# ---------------------------------------------------------------------------------------------------
# Writing with the model, one token at a time.

@dataclass
class Continuation:
    """Tokens generated after the sentence, for one (model, sentence, strategy)."""
    key: tuple = ()
    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    how: list[str] = field(default_factory=list)       # how each token was chosen, for the table
    window_slid: bool = False                          # the text outgrew the context while writing
    revised: bool = False                              # beam search changed earlier tokens on its last step

    @property
    def full(self) -> bool:
        return len(self.tokens) >= MAX_GENERATED


def extend(model: TransformerLM, prompt: list[int], cont: Continuation, n: int, strategy: str,
           settings: Settings, beams: int = 3, seed: int = 0) -> Continuation:
    """The continuation with n more tokens (never more than MAX_GENERATED in all).

    greedy and sampling append to the text so far (the model reads its last max_len tokens; sampling's
    seed is offset by the tokens already written, so "generate 10" from the start equals
    generate(..., 10, seed=seed)). Beam search plans the whole continuation from the sentence again,
    one token longer, and may revise earlier tokens.
    """
    n = min(n, MAX_GENERATED - len(cont.tokens))
    if n <= 0:
        return cont
    max_len = model.cfg.max_len
    if strategy == "beam":
        out = generate(model, prompt[-max_len:], len(cont.tokens) + n, "beam", beams=beams)
        return Continuation(cont.key, out.tokens, out.probs, [f"best of {beams} beams"] * len(out.tokens),
                            out.window_slid, revised=out.tokens[:len(cont.tokens)] != cont.tokens)
    ids = prompt + cont.tokens
    out = generate(model, ids[-max_len:], n, strategy, settings.temperature, settings.top_k, settings.top_p,
                   seed=seed + len(cont.tokens))
    how = "the likeliest token" if strategy == "greedy" else f"drawn at {settings.describe()} (seed {seed})"
    return Continuation(cont.key, cont.tokens + out.tokens, cont.probs + out.probs,
                        cont.how + [how] * len(out.tokens),
                        cont.window_slid or out.window_slid or len(ids) > max_len)


def continuation_table(cont: Continuation, vocab: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"step": range(1, len(cont.tokens) + 1), "token": [vocab[t] for t in cont.tokens],
                         "probability": cont.probs, "how it was chosen": cont.how})


def continued_text(tokenizer: Tokenizer, text: str, tokens: list[int]) -> str:
    """The typed text followed by the generated tokens, as a sentence the sidebar can take."""
    if not tokens:
        return text
    sep = getattr(tokenizer, "separator", "")
    return text.rstrip() + sep + tokenizer.decode(tokens) if sep else text + tokenizer.decode(tokens)


def window_story(cont: Continuation, prompt_len: int, max_len: int) -> str:
    total = prompt_len + len(cont.tokens)
    return (f"The text is now {total:,} tokens long, more than the model's context of {max_len:,}: for each new "
            f"token the model reads only the last {max_len:,} tokens. The window slides along the text, and "
            f"what falls out of it is forgotten.")


# --- the KV cache: what writing one more token keeps from the tokens before it ----------------------------

def cache_table(cfg: ModelConfig) -> pd.DataFrame:
    """Per layer, what the KV cache keeps for each token read: keys and values of each key/value head."""
    G, K = cfg.kv_heads, cfg.d_head
    return pd.DataFrame({"layer": range(cfg.n_layers),
                         "keys kept per token": [f"{G} x {K}"] * cfg.n_layers,
                         "values kept per token": [f"{G} x {K}"] * cfg.n_layers,
                         "numbers per token": [2 * G * K] * cfg.n_layers,
                         "trace names": [f"blocks.{i}.attn.k, blocks.{i}.attn.v" for i in range(cfg.n_layers)]})


def byte_size(n_bytes: float) -> str:
    """A size in KB or MB (of 1,024), one decimal."""
    return f"{n_bytes / 2**20:,.1f} MB" if n_bytes >= 2**20 else f"{n_bytes / 2**10:,.1f} KB"


def cache_story(cfg: ModelConfig, n_tokens: int) -> str:
    """What the cache keeps and how big it is, from the model's shape (markdown)."""
    L, H, G, K = cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.d_head
    per_token = cache_bytes_per_token(cfg)
    text = (f"To write the next token the model needs every earlier token's keys and values in every layer. The "
            f"**KV cache** keeps them instead of computing them again: for each token read, each of the {L} "
            f"layer{'s' if L > 1 else ''} keeps a key and a value of {K} numbers for each of its {G} key/value "
            f"head{'s' if G > 1 else ''}: 2 x {L} x {G} x {K} x 4 bytes = **{per_token:,} bytes "
            f"({byte_size(per_token)}) per token**, so {byte_size(per_token * n_tokens)} for the {n_tokens} tokens so far.")
    if G < H:
        full = cache_bytes_per_token(replace(cfg, n_kv_heads=None))
        text += (f" Grouped-query attention makes it smaller: its {H} query heads share {G} key/value heads, so "
                 f"it keeps {G} heads' keys and values, not {H}. With one key/value head per query head it would "
                 f"keep {full:,} bytes per token, {H // G} times as much.")
    else:
        text += (f" Every one of its {H} heads has its own keys and values. Grouped-query attention (today's models, "
                 "such as SmolLM2: 9 query heads sharing 3 key/value heads) lets several query heads share them, "
                 "and the cache shrinks by as much.")
    return text


def times_story(t: TokenTimes) -> str:
    """One new token's measured time with and without the cache (markdown)."""
    ratio = t.uncached / t.cached if t.cached > 0 else float("inf")
    return (f"Measured just now for token {t.position} (after {t.position} tokens): with the cache "
            f"**{t.cached * 1000:.2f} ms** (only the new token's query, key and value are computed; the earlier "
            f"keys and values are read from the cache), without it **{t.uncached * 1000:.2f} ms** (all "
            f"{t.position + 1} tokens read again): {ratio:.1f} times as long. Without the cache the work per new "
            "token grows with the text; with it, only the attention over the kept keys grows.")


def times_figure(times: list[TokenTimes], presenter: bool = False) -> go.Figure:
    """Milliseconds per new token against the position it is written at, with and without the cache."""
    times = sorted(times, key=lambda t: t.position)
    x = [t.position for t in times]
    fig = go.Figure([go.Scatter(x=x, y=[t.cached * 1000 for t in times], name="with the KV cache",
                                mode="lines+markers", marker_color="#228833"),
                     go.Scatter(x=x, y=[t.uncached * 1000 for t in times], name="without (every token read again)",
                                mode="lines+markers", marker_color="#EE6677")])
    fig.update_layout(title="Time per new token as the text grows", xaxis_title="tokens before the new one",
                      yaxis_title="milliseconds", yaxis_rangemode="tozero", legend=dict(orientation="h", y=-0.3))
    return style(fig, presenter, 340)
