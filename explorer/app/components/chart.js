// The keyed Plotly chart's front end (a Streamlit components v2 module; explorer/app/plotly_component.py loads it).
//
// Runs for every chart update. The chart's div is created once per mounted component; later calls redraw it
// with Plotly.react (no new chart). Around it, one focusable element a screen reader announces by the chart's
// sentence (explorer/chart_text.py); the SVG's own text (every tick, every cell) is hidden from it, and the
// toolbar's buttons are out of the tab order. On a narrow column (a phone) `fit` adapts a copy of the figure to
// the measured width first: long titles wrap, tick labels thin out or stand upright, cell labels that do not fit
// their cell are left out (hover still shows every value), legends go below the plot. A ResizeObserver follows
// the column's width (the sidebar opening, a phone turned); the cleanup runs when Streamlit unmounts it.

const NARROW = 640;                       // px: below this a chart is fitted to its width
const DIAGRAM = 720;                      // px: a diagram's width on a phone (its frame scrolls)
const CHAR = 0.58;                        // a character's width in em, roughly, for the app's sans-serif font

// plotly.js, loaded once per page from the app's static files (`file`: its name there, data.plotly)
function loadPlotly(file) {
  if (!window.__explorerPlotly) {
    window.__explorerPlotly = new Promise((resolve, reject) => {
      if (window.Plotly) return resolve(window.Plotly);
      const script = document.createElement("script");
      script.src = new URL("app/static/" + file, document.baseURI).href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => { window.__explorerPlotly = null; reject(new Error("plotly.js did not load")); };
      document.head.appendChild(script);
    });
  }
  return window.__explorerPlotly;
}

const plainText = t => String(t ?? "").replace(/<br\s*\/?>/gi, " ").replace(/<[^>]+>/g, "")
  .replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

// `text` (Plotly label text) broken into lines of at most `chars` characters, at spaces (its own line breaks kept);
// (text, lines)
function wrap(text, chars) {
  const out = [];
  for (const part of String(text).split(/<br\s*\/?>/i)) {
    const lines = [];
    for (const word of part.split(/\s+/).filter(Boolean)) {
      const last = lines.length ? lines[lines.length - 1] : null;
      if (last !== null && plainText(last + " " + word).length <= chars) lines[lines.length - 1] = last + " " + word;
      else lines.push(word);
    }
    out.push(...(lines.length ? lines : [""]));
  }
  return [out.join(" <br>"), Math.max(1, out.length)];      // the space keeps words apart in the text
}

// Presenter mode: the height left between the top of `element` (as it stands with the page scrolled to its top)
// and the bottom of the window, or 0 when less than MIN_HEIGHT is left (the chart then keeps its own height).
const MIN_HEIGHT = 300;
function roomBelow(element) {
  let top = element.getBoundingClientRect().top;
  for (let e = element.parentElement; e; e = e.parentElement) top += e.scrollTop || 0;
  const room = Math.floor(window.innerHeight - top - 8);
  return room >= MIN_HEIGHT ? room : 0;
}

// A chart of horizontal bars keeps a readable row per bar: its height with every row labelled. A figure may
// name its own least height (`layout.meta.min_height`: rows of token chips).
function rowsHeight(figure) {
  const layout = figure.layout || {}, font = (layout.font && layout.font.size) || 13;
  if (layout.meta && layout.meta.min_height) return layout.meta.min_height;
  const rows = new Set(figure.data.filter(t => t.type === "bar" && t.orientation === "h")
                                  .flatMap(t => Array.isArray(t.y) ? t.y : [])).size;
  const margin = layout.margin || {};
  return rows ? Math.ceil(rows * font * 1.4 + (margin.t || 50) + (margin.b || 40) + font * 3) : 0;
}

const axisKey = (letter, ref) => letter + "axis" + String(ref || letter).slice(1);
const longest = labels => Math.max(0, ...labels.map(l => plainText(l).length));

// The plot area's width, roughly: the column less the row labels, margins and a colour bar.
function plotWidth(layout, data, width, font) {
  const rows = Object.keys(layout).filter(k => /^yaxis\d*$/.test(k) && layout[k] && layout[k].showticklabels !== false)
    .map(k => longest(layout[k].ticktext || []) * ((layout[k].tickfont && layout[k].tickfont.size) || font) * CHAR);
  const scale = data.some(t => t.type === "heatmap") ? 80 : 0;
  return Math.max(60, width - 30 - Math.max(20, ...rows) - scale);
}

// A diagram (boxes and arrows: every axis hidden) keeps its drawn width; on a phone its frame scrolls sideways.
const isDiagram = layout => {
  const axes = Object.keys(layout).filter(k => /^[xy]axis\d*$/.test(k));
  return axes.length > 0 && axes.every(k => layout[k] && layout[k].visible === false);
};

// Rows a horizontal legend of these names takes in `width` px.
function legendRows(names, width, font) {
  let rows = 1, x = 0;
  for (const name of names) {
    const item = plainText(name).length * font * CHAR + 44;
    if (x && x + item > width) { rows += 1; x = 0; }
    x += item;
  }
  return rows;
}

// A copy of `figure` fitted to a `width` px wide column (the figure itself is left as the server sent it): at any
// width, text that would not fit wraps, thins out or is left out; on a narrow one (a phone) panels stack too.
function fit(figure, width, screen = false) {
  const layout = JSON.parse(JSON.stringify(figure.layout || {}));
  const data = figure.data.map(trace => Object.assign({}, trace));
  const narrow = width < NARROW;          // a phone: panels stack and legends move; any width: text must fit
  const font = (layout.font && layout.font.size) || 13;
  const margin = layout.margin = Object.assign({l: 10, r: 10, t: 50, b: 10}, layout.margin);
  let height = layout.height || 450;
  const xaxes = Object.keys(layout).filter(k => /^xaxis\d*$/.test(k)).sort();
  // several panels side by side on one row axis (Q, K, V): stacked one above the other instead
  const sideBySide = narrow && xaxes.length > 1 && xaxes.length <= 4 && !Object.keys(layout).some(k => /^yaxis\d+$/.test(k))
    && data.every(t => !t.yaxis || t.yaxis === "y");
  if (sideBySide) {
    // panels on the same columns (Q, K, V) show their x axis once, under the last; a panel's rows keep ~20 px each
    const same = k => JSON.stringify(Object.assign({}, layout[k], {domain: null}));
    const shared = xaxes.every(k => same(k) === same(xaxes[0]));
    const n = xaxes.length, gapPx = shared ? 36 : 90;   // room for the next title (and a panel's ticks, axis title)
    const rows = ((layout.yaxis || {}).ticktext || []).length;
    const plot = Math.min((height - (margin.t || 0) - (margin.b || 0)) * 0.8, rows ? rows * 20 + 8 : Infinity);
    const total = n * plot + (n - 1) * gapPx;
    const share = plot / total, gap = gapPx / total;
    const order = xaxes.map(k => ({k, x0: ((layout[k] || {}).domain || [0, 1])[0]})).sort((a, b) => a.x0 - b.x0);
    const notes = (layout.annotations || []).filter(a => a.yref === "paper" && a.y >= 1 && a.yanchor === "bottom")
      .sort((a, b) => a.x - b.x);
    const base = layout.yaxis || {};
    order.forEach(({k}, i) => {
      const y = i === 0 ? "y" : "y" + (i + 1), top = 1 - i * (share + gap);
      layout[axisKey("y", y)] = Object.assign({}, base, {domain: [Math.max(0, top - share), top],
                                                         anchor: "x" + k.slice(5)});
      layout[k] = Object.assign({}, layout[k], {domain: [0, 1], anchor: y},
                                shared && i < n - 1 ? {showticklabels: false, title: {text: ""}} : {});
      data.filter(t => (t.xaxis || "x") === "x" + k.slice(5)).forEach(t => { t.yaxis = y; });
      if (notes[i]) Object.assign(notes[i], {x: 0.5, y: top, xanchor: "center"});
    });
    height = Math.round((margin.t || 0) + (margin.b || 0) + total);
  }
  const columns = sideBySide ? 1 : Math.max(1, new Set(xaxes.map(k => JSON.stringify((layout[k] || {}).domain ||
                                                                                     [0, 1]))).size);
  const plotW = plotWidth(layout, data, width, font);
  // panel titles (annotations over a panel): wrapped to their panel's width
  let panelHeight = 0;
  for (const note of layout.annotations || []) {
    if (note.yref === "paper" && note.yanchor === "bottom" && note.showarrow === false && note.text) {
      const size = (note.font && note.font.size) || font;
      const share = (columns > 1 ? plotW / Math.min(columns, 8) : width - 20) * 0.9;
      const word = Math.max(...plainText(note.text).split(/\s+/).map(w => w.length));
      const fitted = Math.max(9, Math.min(size, Math.floor(share / (word * CHAR * 1.08))));   // bold is wider
      note.font = Object.assign({}, note.font, {size: fitted});
      const [text, lines] = wrap(note.text, Math.max(4, Math.floor(share / (fitted * CHAR * 1.08))));
      note.text = text;
      if (note.y >= 1) panelHeight = Math.max(panelHeight, lines * size * 1.25 + 4);
    }
  }
  // a legend: in rows between the title and the plot (below, it would meet the axis title)
  const named = data.filter(t => t.name && t.showlegend !== false && t.type !== "heatmap").map(t => t.name);   // (a
                                                                          // heatmap is never in a legend)
  let legendHeight = 0;
  if ((narrow || screen) && layout.showlegend !== false && (named.length > 1 || layout.showlegend === true)) {
    const size = (layout.legend && layout.legend.font && layout.legend.font.size) || font;
    legendHeight = legendRows(named, plotW, size) * size * 1.9 + 10;
    layout.legend = Object.assign({}, layout.legend, {orientation: "h", x: 0, xanchor: "left", xref: "paper",
                                                      y: 1, yref: "paper", yanchor: "bottom"});
  }
  // the title: wrapped to the width left of the toolbar, at the top
  const title = layout.title && (typeof layout.title === "string" ? {text: layout.title} : layout.title);
  let titleHeight = 0, titleLift = 0;
  if (title && title.text) {
    const size = (title.font && title.font.size) || Math.round(font * 1.3);
    const [text, lines] = wrap(title.text, Math.floor((width - 70) / (size * CHAR)));
    titleHeight = lines * size * 1.3 + 12;
    layout.title = Object.assign({}, title, {text, x: 0, xref: "container", xanchor: "left", yref: "container",
                                             yanchor: "top"});
    titleLift = 8 + (lines > 1 ? 0.92 : 0.25) * size;      // plotly.js sets a title's first line this far too high
  }
  let extraTop = 0;
  if (titleHeight || panelHeight || legendHeight) {
    const top = Math.ceil(titleHeight + legendHeight + panelHeight + 6 + font * 0.6);   // + half a top tick label
    extraTop = Math.max(0, top - margin.t);
    margin.t = Math.max(margin.t, top);
  }
  layout.height = height + extraTop;
  if (titleLift) layout.title.y = 1 - titleLift / layout.height;
  // colour bars: their title along the bar, not over its top number
  const upright = bar => Object.assign({}, bar, {title: Object.assign({}, (bar || {}).title, {side: "right"})});
  for (const key of Object.keys(layout).filter(k => /^coloraxis\d*$/.test(k)))
    layout[key] = Object.assign({}, layout[key], {colorbar: upright((layout[key] || {}).colorbar)});
  data.filter(t => t.type === "heatmap" && !t.coloraxis).forEach(t => { t.colorbar = upright(t.colorbar); });
  // tick labels: upright, or every k-th, where they would run into each other
  // the plot's height, roughly: less the x axes' labels (tall when they stand upright) and titles, measured
  // after the x axes are done (they come first below)
  let below = 0, grow = 0;
  const plotHeight = () => layout.height + grow - margin.t - (margin.b || 0) - below - 10;
  const rowNames = JSON.stringify((layout.yaxis || {}).ticktext || null);
  if (data.some(t => t.type === "bar" && (!t.xaxis || t.xaxis === "x"))) layout.xaxis = layout.xaxis || {};
  const axes = Object.keys(layout).filter(k => /^[xy]axis\d*$/.test(k)).sort((a, b) => a[0] === b[0] ? 0 :
                                                                                     a[0] === "x" ? -1 : 1);
  for (const key of axes) {
    const axis = layout[key];
    const isX = key[0] === "x";
    if (!isX && !below) below = font * 2;
    if (!axis || axis.showticklabels === false) continue;
    if (narrow && isX && columns > 2 && JSON.stringify(axis.ticktext || null) === rowNames) {
      axis.showticklabels = false;        // a grid of square panels: the rows already name the same tokens
      continue;
    }
    const size = (axis.tickfont && axis.tickfont.size) || font;
    const domain = axis.domain || [0, 1];
    const length = (isX ? plotW : plotHeight()) * (domain[1] - domain[0]);
    const named = axis.title && (typeof axis.title === "string" ? {text: axis.title} : axis.title);
    if (named && named.text) {                       // the axis title wrapped to the axis' length
      const titleSize = (named.font && named.font.size) || font;
      axis.title = Object.assign({}, named, {text: wrap(named.text, Math.max(6, Math.floor(length /
                                                                              (titleSize * CHAR))))[0]});
    }
    if (!Array.isArray(axis.tickvals) || !Array.isArray(axis.ticktext)) {
      // categories (bar charts of tokens): upright when there are more than a few
      const names = [...new Set(data.filter(t => (t[isX ? "xaxis" : "yaxis"] || key[0]) === key[0] + key.slice(5))
        .flatMap(t => (t.type === "bar" && Array.isArray(t[key[0]]) ? t[key[0]] : [])))];
      const slot = length / Math.max(1, names.length), chars = Math.floor((slot - 6) / (size * CHAR));
      const wrapped = isX && names.length && chars >= 6 && names.every(n => typeof n === "string")
        && names.length * (longest(names) * size * CHAR + 6) > length ? names.map(n => wrap(n, chars)) : [];
      if (wrapped.length && Math.max(...wrapped.map(([, lines]) => lines)) <= 3) {   // a few words each: wrapped
        Object.assign(axis, {tickmode: "array", tickvals: names, ticktext: wrapped.map(([text]) => text)});
        below = Math.max(below, Math.max(...wrapped.map(([, lines]) => lines)) * size * 1.3 +
                                (named && named.text ? size * 2 : 0));
        continue;
      }
      if (isX && names.length && names.some(n => typeof n === "string") &&
          names.length * (longest(names) * size * CHAR + 6) > length) {
        axis.tickangle = -90;
        axis.ticklabelstandoff = 8;                  // clear of the row axis' lowest number
        grow = Math.max(grow, longest(names) * size * CHAR - size * 1.5);
      }
      if (isX) below = Math.max(below, (axis.tickangle === -90 ? longest(names) * size * CHAR + 8 : size * 1.5) +
                                       (named && named.text ? size * 2 : 0));
      continue;
    }
    const gap = length / Math.max(1, axis.tickvals.length);
    const wide = longest(axis.ticktext) * size * CHAR + 6;
    const standing = Math.abs(axis.tickangle || 0) === 90;
    const needed = isX && !standing ? wide : size * 1.35;
    let every = 1;
    const chars = Math.floor((gap - 6) / (size * CHAR));
    const wrapped = isX && !standing && gap < needed && chars >= 6 ? axis.ticktext.map(t => wrap(t, chars)) : [];
    if (wrapped.length && Math.max(...wrapped.map(([, lines]) => lines)) <= 3) {   // names of a few words: wrapped
      axis.ticktext = wrapped.map(([text]) => text);
      below = Math.max(below, Math.max(...wrapped.map(([, lines]) => lines)) * size * 1.3 +
                              (named && named.text ? size * 2 : 0));
      continue;
    }
    if (gap < needed) {
      if (isX && !standing && gap >= size * 1.6 && axis.ticktext.some(t => isNaN(Number(t)))) {
        axis.tickangle = -90;
        axis.ticklabelstandoff = 8;
        grow = Math.max(grow, longest(axis.ticktext) * size * CHAR - size * 1.5);   // the plot keeps its height
      } else every = Math.ceil(needed / gap);
    }
    if (every > 1) {
      axis.tickvals = axis.tickvals.filter((_, i) => i % every === 0);
      axis.ticktext = axis.ticktext.filter((_, i) => i % every === 0);
    }
    if (isX) {
      const up = Math.abs(axis.tickangle || 0) === 90;
      below = Math.max(below, (up ? longest(axis.ticktext) * size * CHAR + 8 : size * 1.5) +
                              (named && named.text ? size * 2 : 0));
    }
  }
  // cell labels a cell cannot hold are left out (hover still shows every value)
  for (const trace of data) {
    if (trace.type !== "heatmap" || !trace.texttemplate) continue;
    const domain = (layout[axisKey("x", trace.xaxis)] || {}).domain || [0, 1];
    const z = trace.z;
    const n = Array.isArray(z) && Array.isArray(z[0]) ? z[0].length :
              (z && z.shape ? Number(String(z.shape).split(",").pop()) : 1);
    const cell = plotW * (domain[1] - domain[0]) / Math.max(1, n);
    const texts = Array.isArray(trace.text) ? trace.text.flat() : [];
    const chars = texts.length ? longest(texts) : 4;
    const size = (trace.textfont && trace.textfont.size) || font;
    if (cell < chars * size * CHAR + 4) trace.texttemplate = "";
  }
  // text on bars too thin to hold it is left out (hover still shows it)
  const bars = data.filter(t => t.type === "bar" && t.orientation !== "h");
  for (const trace of bars) {
    if (!trace.text && !trace.texttemplate) continue;
    const n = Math.max(1, ...bars.map(t => (Array.isArray(t.x) ? t.x.length : 1)));
    const barWidth = plotW / n / bars.length * 0.8;
    const texts = Array.isArray(trace.text) ? trace.text : [trace.text || "100%"];
    const size = (trace.textfont && trace.textfont.size) || font;
    if (barWidth < longest(texts) * size * CHAR + 2) { trace.text = null; trace.texttemplate = ""; }
  }
  if (grow) {                              // labels stood upright: the figure grows by them, its plot does not shrink
    layout.height = Math.round(layout.height + grow);
    if (titleLift) layout.title.y = 1 - titleLift / layout.height;
  }
  return {data, layout};
}

// Labels of points (a map of words) that would cover another label move aside or are hidden: the last trace
// (your sentence, drawn on top) first, each of its labels tried above, below, right and left of its point; the
// others' labels only stay where they are free. What is drawn is measured, so this holds at any width and after
// a zoom. Hover still names every point.
function declutter(plot) {
  const kept = [...plot.querySelectorAll("svg text")].filter(t => !t.closest(".textpoint") && !t.closest(".hoverlayer"))
    .map(t => t.getBoundingClientRect()).filter(r => r.width > 0);
  const overlaps = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 &&
                             Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const free = r => !kept.some(k => overlaps(k, r));
  const traces = [...plot.querySelectorAll(".scatterlayer .trace")].reverse();
  traces.forEach((trace, n) => {
    for (const text of trace.querySelectorAll(".textpoint text")) {
      text.style.display = "";
      text.removeAttribute("transform");
      let r = text.getBoundingClientRect();
      if (!text.textContent.trim() || r.width === 0) continue;
      const h = r.height, w = r.width;
      const moves = n === 0 ? [[0, 0], [0, h + 8], [w / 2 + 10, h / 2 + 4], [-(w / 2 + 10), h / 2 + 4]] : [[0, 0]];
      const place = moves.find(([dx, dy]) => {
        if (dx || dy) text.setAttribute("transform", `translate(${dx},${dy})`);
        r = text.getBoundingClientRect();
        return free(r);
      });
      if (place) kept.push(r);
      else { text.removeAttribute("transform"); text.style.display = "none"; }
    }
  });
}

// Keyboard and screen reader: the toolbar's buttons leave the tab order (the chart itself is one stop).
function quietToolbar(plot) {
  plot.querySelectorAll(".modebar-btn, .modebar a").forEach(b => b.setAttribute("tabindex", "-1"));
}

// The page's theme ("light" or "dark"), read as Streamlit infers it: from the app's background colour.
function pageTheme() {
  const app = document.querySelector("[data-testid=stApp]");
  const rgb = (app ? getComputedStyle(app).backgroundColor : "").match(/[\d.]+/g);
  if (!rgb) return null;
  const [r, g, b] = rgb.map(Number);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b < 128 ? "dark" : "light";
}

// A chart is drawn in the theme the server saw on its run (`data.theme`). When the device switches between light and
// dark (a phone at sunset), Streamlit restyles the page without a run, so the charts would keep the old theme: the
// first chart to notice asks for a run, once per change, and that run sends every chart in the new theme.
function followTheme(plot) {
  const drawnIn = plot.dataset.theme, now = pageTheme();
  if (!plot.__send || !now || drawnIn === now || window.__explorerThemeAsked === now) return;
  window.__explorerThemeAsked = now;
  plot.__send("theme", now);
}

function watchTheme() {
  if (window.__explorerThemeWatch) return;
  window.__explorerThemeWatch = true;
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
    // Streamlit restyles the page in its own time (later on a busy machine): look every 100 ms, for up to 10 s,
    // for a chart drawn in the other theme than the page's
    let looks = 0;
    const look = setInterval(() => {
      const now = pageTheme();
      const stale = [...document.querySelectorAll(".explorer-plot[data-drawn=yes]")]
        .find(p => p.__send && p.dataset.theme !== now);
      if (stale) followTheme(stale);
      if (stale || ++looks >= 100) clearInterval(look);
    }, 100);
  });
}

export default function ({ parentElement, data, setTriggerValue }) {
  let frame = parentElement.querySelector(".explorer-chart");
  let plot = parentElement.querySelector(".explorer-plot");
  if (!frame) {
    frame = document.createElement("div");
    frame.className = "explorer-chart";
    frame.setAttribute("role", "figure");
    frame.setAttribute("tabindex", "0");
    plot = document.createElement("div");
    plot.className = "explorer-plot";
    plot.setAttribute("aria-hidden", "true");        // its SVG text is every tick and cell: the label says it
    frame.appendChild(plot);
    parentElement.appendChild(frame);
  }
  frame.setAttribute("aria-label", data.label || "Chart");
  const figure = JSON.parse(data.figure);
  plot.__figure = figure;
  plot.__config = data.config;
  plot.dataset.drawn = "no";
  plot.style.minHeight = (figure.layout.height || 450) + "px";       // keep the space while plotly.js loads
  const draw = () => {
    const width = parentElement.clientWidth || 800;
    plot.__width = width;
    // on a phone (a narrow window, not a narrow column of a wide one) a diagram keeps its width, unless it was laid
    // out for a phone (explorer/plot.py, for_a_phone)
    const given = plot.__figure.layout || {};
    const wide = window.innerWidth < NARROW && width < NARROW && isDiagram(given) && !(given.meta || {}).phone;
    plot.style.minWidth = wide ? DIAGRAM + "px" : "";       // a diagram keeps its width: its frame scrolls
    frame.style.overflowX = wide ? "auto" : "";
    let fitted = fit(plot.__figure, wide ? DIAGRAM : width);
    plot.__screen = Boolean(data.screen);
    const room = plot.__room = data.screen ? roomBelow(frame) : 0;
    // presenter mode: the whole chart on the first screen, drawn lower (a legend moves on top: measured again)
    const least = Math.max(MIN_HEIGHT, rowsHeight(plot.__figure));
    let height = plot.__figure.layout.height || 450;
    for (let tries = 0; room && fitted.layout.height > room + 1 && height > least && tries < 3; tries++) {
      height = Math.max(least, height - (fitted.layout.height - room));
      const layout = Object.assign({}, plot.__figure.layout, {height});
      fitted = fit(Object.assign({}, plot.__figure, {layout}), wide ? DIAGRAM : width, true);
    }
    return window.Plotly.react(plot, fitted.data, fitted.layout, plot.__config).then(() => {
      plot.style.minHeight = (fitted.layout.height || 450) + "px";
      // drawn while its tab was hidden, plotly.js took its default width (700 px), and nothing resized it once shown
      // (a phone's chart ran past the window's edge, its labels cut): resized to its frame (its height kept)
      const shown = plot.clientWidth, drawnWidth = (plot._fullLayout || {}).width;
      if (!wide && shown && drawnWidth && Math.abs(drawnWidth - shown) > 16)
        return window.Plotly.Plots.resize(plot).catch(() => {});
    }).then(() => {
      quietToolbar(plot);
      if (!isDiagram(fitted.layout)) declutter(plot);
      plot.__send = setTriggerValue;
      if (data.clickable && !plot.__clicks) {       // a click on a bar or a point tells the page which one
        plot.__clicks = true;
        plot.on("plotly_click", event => {
          const point = event.points && event.points[0];
          if (point) plot.__send("click", {x: point.x, y: point.y, curve: point.curveNumber,
                                           point: point.pointNumber, customdata: point.customdata ?? null});
        });
      }
      if (!plot.__afterplot) {                      // a zoom or a resize redraws the labels: declutter again
        plot.__afterplot = () => { if (!isDiagram(plot.layout || {})) declutter(plot); quietToolbar(plot); };
        plot.on("plotly_afterplot", plot.__afterplot);
      }
      plot.dataset.theme = data.theme === "dark" ? "dark" : "light";     // as the server drew it (explorer/plot.py)
      plot.dataset.drawn = "yes";
      if (plot.dataset.theme === pageTheme()) window.__explorerThemeAsked = null;   // in step: ask at the next change
      followTheme(plot);
    });
  };
  watchTheme();
  plot.__draw = draw;
  loadPlotly(data.plotly).then(draw).then(() => {
    if (!plot.__watcher) {
      // a chart hidden at that moment cannot be measured: it is resized when shown again
      plot.__watcher = new ResizeObserver(() => {
        const width = parentElement.clientWidth;
        if (!width) return;
        const crossed = (width < NARROW) !== (plot.__width < NARROW);
        if ((width < NARROW && Math.abs(width - plot.__width) > 16) || crossed) plot.__draw().catch(() => {});
        else window.Plotly.Plots.resize(plot).catch(() => {});
      });
      plot.__watcher.observe(parentElement);
    }
    if (data.screen && !plot.__page) {
      // presenter mode: what is above the chart may settle after it is drawn (a widget, a font): then the room
      // below its top changes, and it is drawn again to fit
      const main = document.querySelector("[data-testid=stMainBlockContainer]");
      plot.__page = new ResizeObserver(() => {
        if (plot.__screen && plot.dataset.drawn === "yes" && Math.abs(roomBelow(frame) - plot.__room) > 4) plot.__draw().catch(() => {});
      });
      if (main) plot.__page.observe(main);
    }
  }).catch(() => {
    plot.dataset.drawn = "yes";
    plot.textContent = "This chart could not be drawn: the page could not load its chart library. " +
                       "Reload the page to try again.";
  });
  return () => {
    if (plot.__watcher) plot.__watcher.disconnect();
    if (plot.__page) plot.__page.disconnect();
    if (window.Plotly) window.Plotly.purge(plot);
  };
}
