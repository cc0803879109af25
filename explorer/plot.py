"""Plotly conventions every figure follows: readable on a projector and for colour-blind viewers.

- Signed values (embeddings, scores, activations) use a diverging blue-white-red scale centred at 0.
- Non-negative values (attention weights, probabilities) use Viridis, a colour-blind-safe sequential scale.
- Token axes are numeric positions labelled with the tokens, so a repeated word ("the" twice) keeps
  two separate rows instead of being merged.
- Every hover shows the exact value and the token labels.
- Plotly reads a few HTML tags in labels, so every token goes through `safe` first: "<b>" stays text.
"""
import html

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import torch

DIVERGING = "RdBu_r"       # blue (negative) - white (0) - red (positive)
SEQUENTIAL = "Viridis"

# The look of Streamlit's own chart theme (its font, left-aligned bold titles, light grid, axes that make room
# for their labels, its categorical colours), written out: our charts are drawn by plotly.js directly
# (explorer/app/plotly_component.py), where Streamlit's theme is not applied. Darker axis text than Streamlit's,
# for a projector. One template per page theme (light, dark) and a high-contrast variant of each, for a
# washed-out projector: `template_for` picks one.
FONT = '"Source Sans", "Source Sans Pro", sans-serif'
INK, FADED, GRID = "#111111", "#3d4050", "#e6eaf1"
COLORWAY = ["#0068c9", "#83c9ff", "#ff2b2b", "#ffabab", "#29b09d", "#7defa1", "#ff8700", "#ffd16a", "#6d3fc0",
            "#d5dae5"]
DARK_COLORWAY = ["#83c9ff", "#0068c9", "#ffabab", "#ff2b2b", "#7defa1", "#29b09d", "#ffd16a", "#ff8700", "#b28ff0",
                 "#d5dae5"]
MASKED = "#BBBBBB"   # a masked attention cell (no value), on every chart and theme: a grey outside every colour scale


def _template(paper: str, ink: str, faded: str, grid: str, colorway: list[str], line: str) -> go.layout.Template:
    axis = dict(gridcolor=grid, zerolinecolor=grid, tickcolor=grid, linecolor=grid, automargin=True,
                tickfont=dict(color=faded), title=dict(font=dict(color=faded)))
    return go.layout.Template(layout=dict(
        font=dict(family=FONT, color=ink), colorway=colorway, paper_bgcolor=paper, plot_bgcolor=paper,
        title=dict(x=0, xanchor="left", font=dict(weight=600, color=ink)),
        xaxis=dict(axis, showgrid=False, zeroline=False, title_standoff=12),
        yaxis=dict(axis, title_standoff=16),
        legend=dict(font=dict(color=faded)),
        hoverlabel=dict(bgcolor=paper, bordercolor=line, font=dict(family=FONT, color=ink)),
        annotationdefaults=dict(font=dict(color=ink)),
        coloraxis=dict(colorbar=dict(thickness=16, outlinewidth=0, tickfont=dict(color=faded),
                                     title=dict(font=dict(color=faded)))),
    ))


TEMPLATE = _template("#ffffff", INK, FADED, GRID, COLORWAY, "#d5dae5")
# Streamlit's dark theme's background; text and grid chosen for at least 4.5:1 and 3:1 on it
DARK_TEMPLATE = _template("#0e1117", "#fafafa", "#c9ccd6", "#31333f", DARK_COLORWAY, "#555867")
HIGH_CONTRAST = _template("#ffffff", "#000000", "#000000", "#8a8a8a", COLORWAY, "#000000")
DARK_HIGH_CONTRAST = _template("#000000", "#ffffff", "#ffffff", "#8a8a8a", DARK_COLORWAY, "#ffffff")
TEMPLATES = {("light", False): TEMPLATE, ("dark", False): DARK_TEMPLATE, ("light", True): HIGH_CONTRAST,
             ("dark", True): DARK_HIGH_CONTRAST}


def template_for(theme: str | None, high_contrast: bool = False) -> go.layout.Template:
    """The charts' template for the page's theme ("light" or "dark"; anything else is light), in its
    high-contrast variant when asked."""
    return TEMPLATES[("dark" if theme == "dark" else "light", bool(high_contrast))]


def use_explorer_template() -> None:
    """Make TEMPLATE every new figure's template (importing Streamlit sets its own, which only its
    st.plotly_chart knows how to finish)."""
    pio.templates["explorer"] = TEMPLATE
    pio.templates.default = "explorer"


def as_numpy(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def safe(text: str) -> str:
    """A token or any user text as Plotly label text: HTML-escaped, so it is shown, never interpreted."""
    return html.escape(str(text), quote=False)


_SPACES = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "↵"}


def visible(token: str) -> str:
    """A token as a label a class can see: whitespace as a glyph (" " -> "␣", newline -> "↵") and punctuation
    alone in angle brackets ("." -> "⟨.⟩"); any other token unchanged (a newline inside it still shows as ↵)."""
    token = str(token)
    if not token:
        return "⟨⟩"
    if token.isspace():
        return "".join(_SPACES.get(c, "␣") for c in token)
    if not any(c.isalnum() for c in token):                      # "." "," "!?"
        return f"⟨{token}⟩"
    return token.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵")


def token_label(token: str) -> str:
    """`visible(token)` made safe for a Plotly label (bars, cells, titles)."""
    return safe(visible(token))


def style(fig: go.Figure, presenter: bool = False, height: int | None = None) -> go.Figure:
    """Common layout; presenter mode enlarges every font for the back of a classroom."""
    size = 20 if presenter else 13
    fig.update_layout(font=dict(size=size), hoverlabel=dict(font_size=size + 2),
                      margin=dict(l=10, r=10, t=50 if fig.layout.title.text else 20, b=10))
    if height:
        fig.update_layout(height=int(height * (1.3 if presenter else 1.0)))
    return fig


def for_a_phone(fig: go.Figure) -> go.Figure:
    """Mark a diagram laid out for a phone's narrow screen (explorer/view.py, `View.phone`): the chart component
    draws it at the screen's width, where a diagram drawn for a wide screen keeps its width in a frame that scrolls
    sideways (explorer/app/plotly_component.py)."""
    return fig.update_layout(meta={**(fig.layout.meta or {}), "phone": True})


DIMS_SHOWN = 64       # columns a wide heatmap shows at once (GPT-2's 768 dimensions would be a barcode)


def window(n: int, dims: tuple[int, int] | None) -> range:
    """The columns to draw out of `n`: `dims` as (start, stop), by default the first DIMS_SHOWN."""
    start, stop = dims if dims is not None else (0, DIMS_SHOWN)
    start = min(max(0, start), max(n - 1, 0))
    return range(start, min(n, max(stop, start + 1)))


def heatmap(values, rows: list[str], cols: list[str], *, title: str = "", row_title: str = "",
            col_title: str = "", value_name: str = "value", signed: bool = True,
            zmin: float | None = None, zmax: float | None = None, text: bool = False,
            presenter: bool = False, height: int | None = None) -> go.Figure:
    """A (rows x cols) heatmap with labelled rows/columns and exact values on hover."""
    z = as_numpy(values).astype(float)
    rows, cols = [safe(r) for r in rows], [safe(c) for c in cols]
    rows_idx, cols_idx = list(range(len(rows))), list(range(len(cols)))
    hover_rows = np.repeat(np.array(rows, dtype=object)[:, None], len(cols), axis=1)
    hover_cols = np.repeat(np.array(cols, dtype=object)[None, :], len(rows), axis=0)
    scale = dict(colorscale=DIVERGING, zmid=0) if signed else dict(colorscale=SEQUENTIAL)
    if zmin is not None:
        scale.update(zmin=zmin, zmax=zmax)
        scale.pop("zmid", None)
    trace = go.Heatmap(
        z=z, x=cols_idx, y=rows_idx, customdata=np.dstack([hover_rows, hover_cols]),
        hovertemplate=(f"{row_title or 'row'} %{{customdata[0]}}<br>{col_title or 'column'} %{{customdata[1]}}"
                       f"<br>{value_name} %{{z:.4f}}<extra></extra>"),
        colorbar=dict(title=dict(text=value_name)), **scale)
    if text:
        trace.update(text=np.round(z, 2), texttemplate="%{text}")
    fig = go.Figure(trace, layout=dict(title=title))
    fig.update_xaxes(tickvals=cols_idx, ticktext=cols, title=col_title, side="bottom")
    fig.update_yaxes(tickvals=rows_idx, ticktext=rows, title=row_title, autorange="reversed")
    return style(fig, presenter, height or max(260, 28 * len(rows) + 120))


def labels(tokens: list[str]) -> list[str]:
    """Axis labels for token positions: '0 the', '1 cat', ... (unique even when words repeat)."""
    return [f"{i} {visible(t)}" for i, t in enumerate(tokens)]     # heatmap() escapes them; escape elsewhere


def heatmap_panels(panels: list[tuple[str, np.ndarray]], rows: list[str], *, row_title: str = "",
                   col_title: str = "", presenter: bool = False) -> go.Figure:
    """Several (rows x columns) heatmaps side by side in ONE figure, sharing the row axis and one colour
    scale (diverging, centred at 0): the same colour is the same number in every panel.

    One figure instead of one per panel because the browser pays a fixed cost per Plotly chart on every
    redraw (measured in docs/figures.md, "Measured once, behind a design choice").
    Each panel is a trace named by its title; hover shows the panel, row, column and exact value.
    """
    rows = [safe(r) for r in rows]
    gap = 0.04
    width = (1 - gap * (len(panels) - 1)) / len(panels)
    largest = max(float(np.nanmax(np.abs(as_numpy(z)))) for _, z in panels) or 1.0
    layout = dict(annotations=[], coloraxis=dict(colorscale=DIVERGING, cmin=-largest, cmax=largest,
                                                  colorbar=dict(title=dict(text="value"))))
    data = []
    for n, (title, values) in enumerate(panels):
        z = as_numpy(values).astype(float)
        axis = "" if n == 0 else str(n + 1)
        x0 = n * (width + gap)
        cols = list(range(z.shape[1]))
        every = 1 if len(cols) <= 8 else 4
        layout[f"xaxis{axis}"] = dict(domain=[x0, min(1.0, x0 + width)], anchor="y", title=col_title,
                                      tickvals=cols[::every], ticktext=[str(c) for c in cols[::every]])
        shown = safe(title).replace(": ", ":<br>") if presenter else safe(title)   # large type: two lines
        layout["annotations"].append(dict(text=shown, x=x0 + width / 2, y=1.0, xref="paper", yref="paper",
                                          showarrow=False, yanchor="bottom", font=dict(size=20 if presenter else 14)))
        data.append(go.Heatmap(
            z=z, x=cols, y=list(range(len(rows))), xaxis=f"x{axis}", yaxis="y", coloraxis="coloraxis",
            name=title, customdata=np.repeat(np.array(rows, dtype=object)[:, None], len(cols), axis=1),
            hovertemplate=(f"{safe(title)}<br>{row_title or 'row'} %{{customdata}}<br>{col_title or 'column'} "
                           "%{x}<br>value %{z:.4f}<extra></extra>")))
    fig = go.Figure(data, layout=layout)
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=rows, title=row_title, autorange="reversed")
    fig = style(fig, presenter, max(260, 24 * len(rows) + 120))
    fig.update_layout(margin_t=70 if presenter else 40)       # room for the panel titles
    return fig
