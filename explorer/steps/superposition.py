"""Superposition, the toy: five features squeezed into two dimensions (model/superposition.py).

Figure and text builders take a trained toy (`ToyResult`) and return Plotly figures and sentences; the page only
lays them out. Every claim is computed from W: which features it keeps (a column long enough to read back), at
which angles, and which of them share the space (their directions overlap).
"""
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from model.superposition import ToyResult

from explorer.numbers import percent
from explorer.plot import for_a_phone, heatmap, style

INTRO = """\
A model has far more things it could notice (a word's topic, its tense, whether it is a name, and thousands more)
than it has numbers to write them in. So how does it fit them? This toy answers the question at its smallest:
**5 features** (say, five things a picture might contain) have to pass through **2 numbers** and come out again.

Each feature gets a **direction**, an arrow in the plane of the two numbers: to send a feature, the model moves
along its arrow by the feature's value; to read one back, it measures how far the point lies along that arrow.
Two arrows at right angles never disturb each other, and a plane has room for only two such arrows. With more
arrows than that, reading one feature also picks up a little of the others: they **interfere**.

The slider sets the **sparsity**: how often a feature is absent (0). When every feature is present all the time,
interference would spoil every answer, so the model keeps the two that matter most, at right angles, and gives
up the rest. When features are rarely present, two seldom show up at once; then the model can afford to give all
five an arrow, and the small leaks are cut away by its last step, which can subtract a little (a bias) and turns
anything below 0 into 0. Storing more features than there are dimensions, in overlapping directions, is called
**superposition**. Researchers think language models do it too, which would explain why a single neuron often
responds to several unrelated things.
"""

KEPT_NORM = 0.5              # a feature is kept when its column of W is at least this long (a full one is about 1)
INTERFERENCE = 0.1           # two kept features share the space when |wᵢ · wⱼ| is above this
ANGLE_TOLERANCE = 10.0       # degrees: how far from equal gaps (or from 90° or 180°) still counts as such
SHAPES = {3: "a triangle", 4: "a square", 5: "a pentagon"}      # the shape the arrows' tips make, evenly spread
OPPOSITE_COSINE = -0.95      # two kept directions this close to opposite form an antipodal pair


@dataclass(frozen=True)
class Arrangement:
    """What W shows: the kept features and the dropped ones (in order of importance), the angles between
    neighbouring kept directions around the circle, the kept features that overlap another kept one, the largest
    leak between two kept features and the pairs pointing in opposite directions."""
    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    gaps: tuple[float, ...]            # degrees between neighbouring kept directions, going round (they add to 360)
    shared: tuple[int, ...]            # kept features with |wᵢ · wⱼ| > INTERFERENCE for some other kept j
    largest_leak: float                # the largest wᵢ · wⱼ between kept features: what reading i picks up of j
    opposite: tuple[tuple[int, int], ...]


def arrangement(result: ToyResult) -> Arrangement:
    """How the trained toy arranged its features, read from W alone."""
    W = result.W                                                                     # (H, F)
    norms = np.linalg.norm(W, axis=0)                                                # (F,)
    kept = tuple(int(i) for i in np.flatnonzero(norms >= KEPT_NORM))
    dropped = tuple(i for i in range(W.shape[1]) if i not in kept)
    overlaps = W.T @ W                                                               # (F, F): wᵢ · wⱼ
    pairs = [(i, j) for i in kept for j in kept if i != j]
    shared = tuple(sorted({i for i, j in pairs if abs(overlaps[i, j]) > INTERFERENCE}))
    leak = max((float(overlaps[i, j]) for i, j in pairs), default=0.0)
    unit = W[:, list(kept)] / norms[list(kept)]                                      # (H, K)
    cosines = unit.T @ unit                                                          # (K, K)
    opposite = tuple((kept[a], kept[b]) for a in range(len(kept)) for b in range(a + 1, len(kept))
                     if cosines[a, b] < OPPOSITE_COSINE)
    return Arrangement(kept=kept, dropped=dropped, gaps=_gaps(W[:, list(kept)]), shared=shared, largest_leak=leak,
                       opposite=opposite)


def _gaps(directions: np.ndarray) -> tuple[float, ...]:
    """The angles (degrees) between neighbouring directions (H=2, K) going round the circle; () for fewer than 2."""
    if directions.shape[1] < 2 or directions.shape[0] != 2:
        return ()
    around = np.sort(np.degrees(np.arctan2(directions[1], directions[0])))          # (K,)
    return tuple(float(g) for g in np.diff(np.append(around, around[0] + 360)))


def _features(indices) -> str:
    """"feature 3", "features 3 and 4", "features 0, 2 and 4"."""
    names = [str(i) for i in indices]
    if len(names) == 1:
        return f"feature {names[0]}"
    return f"features {', '.join(names[:-1])} and {names[-1]}"


def _how_often(sparsity: float) -> str:
    """What the sparsity means for one feature, in words."""
    if sparsity == 0:
        return "every feature is present in every example"
    return f"each feature is absent from {percent(sparsity, 2)} of examples"


def _angles(gaps: tuple[float, ...]) -> str:
    """The angles between the kept directions, in words; "" for fewer than two."""
    if len(gaps) == 2:
        angle = min(gaps)                                                            # the angle between the two
        if abs(angle - 90) <= ANGLE_TOLERANCE:
            return "at right angles"
        if angle >= 180 - ANGLE_TOLERANCE:
            return "pointing in opposite directions"
        return f"{angle:.0f}° apart"
    if len(gaps) > 2:
        even = 360 / len(gaps)
        if max(abs(g - even) for g in gaps) <= ANGLE_TOLERANCE:
            shape = SHAPES.get(len(gaps), "evenly spread around the circle")
            return f"about {even:.0f}° apart: {shape}"
        return f"{min(gaps):.0f}° to {max(gaps):.0f}° apart from their neighbours"
    return ""


def kept_sentence(result: ToyResult) -> str:
    """What the trained toy did with its features, computed from W and b, in words a teacher can read aloud
    (markdown): how many it keeps, at which angles, and whether they share the space (superposition)."""
    cfg, a = result.config, arrangement(result)
    n, k, d = cfg.n_features, len(a.kept), cfg.d_hidden
    by_importance = a.kept == tuple(range(k))
    if k == n:
        keeps = f"keeps **all {n}** features in its {d} dimensions"
    elif k <= 1:
        keeps = f"keeps only {_features(a.kept)}" if k else "keeps none of its features"
    elif by_importance:
        keeps = f"keeps the **{k}** most important feature{'s' if k != 1 else ''}"
    else:
        keeps = f"keeps **{k}** of its {n} features ({_features(a.kept)})"
    angles = _angles(a.gaps)
    text = f"At sparsity {cfg.sparsity:g} ({_how_often(cfg.sparsity)}) the model {keeps}"
    text += f", {angles}" if angles else ""
    if a.dropped and k:
        many = by_importance and len(a.dropped) > 1
        text += f", and drops {f'the other **{len(a.dropped)}**' if many else _features(a.dropped)}"
    text += "."
    if a.opposite and k > 2:                                    # two kept: the angle said so already
        pairs = [f"{i} and {j}" for i, j in a.opposite]
        text += (f" Features {pairs[0]} point in opposite directions" +
                 "".join(f", and so do features {p}" for p in pairs[1:]) + ".")
    if not a.shared:
        return text + (" Each kept feature has a direction no other kept feature overlaps: no superposition."
                       if k else "")
    who = ("Both" if k == 2 else f"All {k}") if len(a.shared) == k else f"{len(a.shared)} of the {k}"
    text += f" {who} kept features share the space with others: that is **superposition**."
    if a.largest_leak <= INTERFERENCE:
        text += (" Their overlaps are all negative: when a feature is present, reading its opposite gives a "
                 "number below 0, which the ReLU turns into 0.")
    else:
        text += f" Reading a feature also picks up as much as {a.largest_leak:.2f} times a neighbour's value"
        biases = result.b[list(a.kept)]
        if (biases < 0).all():
            text += (f"; the biases, from {biases.min():.2f} to {biases.max():.2f}, keep a smaller leak below 0, "
                     "where the ReLU turns it into 0")
        text += "."
    both = round((1 - cfg.sparsity) ** 2, 12)                    # rounded: 0.1 ** 2 is 0.010000000000000002
    return text + (f" Two given features are present together in {percent(both, 2)} of examples: the rarer that "
                   "is, the less the leaks cost.")


# --- figures --------------------------------------------------------------------------------------------------------

IMPORTANCE_COLOURS = ("Plasma", 0.375, 0.625)   # most important at 0.375 (magenta), least at 0.625 (coral): every
                                                # colour in between reads at 3:1 or more on white and on dark pages
LABEL_POSITIONS = ("middle right", "top right", "top center", "top left", "middle left", "bottom left",
                   "bottom center", "bottom right")        # a label beyond an arrow's tip, by the arrow's heading
ROOM, PHONE_ROOM = 1.6, 1.9                     # the axes reach this many times the longest arrow: room for labels
DIRECTIONS_HEIGHT, OVERLAP_HEIGHT = 480, 420
PHONE_DIRECTIONS_HEIGHT, PHONE_OVERLAP_HEIGHT = 400, 400     # a phone's plot is as wide as its screen: about
                                                             # square under the title (the legend goes above)


def importance_colours(importance: np.ndarray) -> list[str]:
    """A colour per feature, along IMPORTANCE_COLOURS from the most important to the least."""
    scale, most, least = IMPORTANCE_COLOURS
    spread = float(importance.max() - importance.min()) or 1.0
    where = most + (importance.max() - importance) / spread * (least - most)
    return sample_colorscale(scale, [float(t) for t in where])


def _label_position(x: float, y: float) -> str:
    octant = int(np.round(np.degrees(np.arctan2(y, x)) / 45)) % 8
    return LABEL_POSITIONS[octant]


def directions_figure(result: ToyResult, presenter: bool = False, phone: bool = False) -> go.Figure:
    """Each feature's direction (a column of W) as an arrow from the origin in the 2-D hidden space, coloured by its
    importance, on equal axes, with the circle of length 1; a dropped feature (shorter than KEPT_NORM) dashed, with
    neither arrowhead nor label."""
    W, weights = result.W, result.importance                                         # (2, F), (F,)
    colours = importance_colours(weights)
    norms = np.linalg.norm(W, axis=0)                                                # (F,)
    title = (f"{W.shape[1]} features in {W.shape[0]} dimensions" if phone else
             f"Where the {W.shape[1]} features point in the {W.shape[0]} hidden dimensions")
    fig = go.Figure(layout=dict(title=title))
    circle = np.linspace(0, 2 * np.pi, 121)
    fig.add_trace(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines", name="length 1", hoverinfo="skip",
                             showlegend=False, line=dict(color="#9a9a9a", width=1, dash="dot")))
    head = 20 if presenter else 15
    for i in range(W.shape[1]):
        x, y = float(W[0, i]), float(W[1, i])
        kept = norms[i] >= KEPT_NORM
        fig.add_trace(go.Scatter(
            x=[0.0, x], y=[0.0, y], name=f"feature {i}" + ("" if kept else " (dropped)"),
            mode="lines+markers+text" if kept else "lines",
            text=["", f"feature {i}"] if kept else None, textposition=_label_position(x, y),
            line=dict(color=colours[i], width=5 if presenter else 4, dash=None if kept else "dash"),
            marker=dict(symbol=["circle", "arrow"], angleref="previous", size=[0, head], color=colours[i],
                        opacity=1, line=dict(width=0)),
            cliponaxis=False,
            hovertemplate=(f"feature {i}<br>importance {weights[i]:.2f}<br>length {norms[i]:.3f}"
                           f"<br>direction ({x:.3f}, {y:.3f})<extra></extra>")))
    reach = (PHONE_ROOM if phone else ROOM) * max(1.0, float(norms.max()))
    fig.update_xaxes(range=[-reach, reach], title="hidden dimension 1", constrain="domain", showgrid=False)
    fig.update_yaxes(range=[-reach, reach], title="hidden dimension 2", constrain="domain", showgrid=False,
                     scaleanchor="x", scaleratio=1)
    fig.update_layout(legend=dict(title=dict(text="colour: importance", side="top" if phone else None),
                                  **(dict(orientation="h", y=-0.25) if phone else {})))
    fig = style(fig, presenter, PHONE_DIRECTIONS_HEIGHT if phone else DIRECTIONS_HEIGHT)
    return for_a_phone(fig) if phone else fig


def overlap_figure(result: ToyResult, presenter: bool = False, phone: bool = False) -> go.Figure:
    """Wᵀ W, 5 x 5: on the diagonal each feature's squared length (about 1: kept, about 0: dropped); off it, in row i
    and column j, how much of feature j's value reading feature i picks up (0: no interference)."""
    W = result.W                                                                     # (2, F)
    gram = W.T @ W                                                                   # (F, F)
    names = [f"feature {i}" for i in range(W.shape[1])]
    largest = max(1.0, float(np.abs(gram).max()))
    title = ("Leaks between features (Wᵀ W)" if phone else
             "How much reading each feature picks up of the others (Wᵀ W)")
    fig = heatmap(gram, names, [str(i) for i in range(W.shape[1])] if phone else names, title=title,
                  row_title="feature read", col_title="feature present", value_name="wᵢ · wⱼ",
                  zmin=-largest, zmax=largest, text=True, presenter=presenter,
                  height=PHONE_OVERLAP_HEIGHT if phone else OVERLAP_HEIGHT)
    return for_a_phone(fig) if phone else fig
