"""A self-contained HTML attention viewer: one file, no network, safe against token text.

`write_attention_html` writes one HTML page with two views of an (L, H, T, T) attention
array:

- head view: pick a layer and any set of heads (one colour per head); query tokens are
  listed on the left, key tokens on the right, and a line from left token i to right token j
  has opacity attn[layer, head, i, j]. Hovering a token shows only its lines.
- model view: every layer x head as a small heatmap; clicking one opens it in the head view.

Size: the page keeps, per layer, head and query token, its strongest links (keys) with weight
at least 0.005 (fainter lines are not drawn), at most `links_per_token` of them: all of them on
short inputs, so the page is exact there; on long ones the budget MAX_LINKS bounds the page
(a 512-token MiniLM page is about 3 MB where the dense JSON was 121 MB). Weights are stored as
integers in 1e-4 units (the 4 decimals opacity can show) and key indices as uint16, base64
coded. When links were cut, or many lines would be drawn at once, the page says so and starts
with one head selected.

Safety: tokens come from user text and may contain markup. The data is embedded as JSON in a
`<script type="application/json">` block with `<`, `>` and `&` written as \\u003c, \\u003e,
\\u0026, so no token can close the script element; the page builds every token with
`textContent`, never `innerHTML`. A Content-Security-Policy allows only the page's own
script (by its sha256 hash) and forbids every fetch, as a second line of defence. Direction
controls (U+202A-U+202E, U+2066-U+2069, U+200E/F, U+061C), which would silently reorder the
title or a token's text on screen, are shown as visible "[U+202E]" marks.

Test hook: the page reads `location.hash`, e.g. ``#layer=1&heads=0,2&hover=3&side=left``
(also ``filter=AB`` and ``click=layer,head``), applies it through the same functions the
controls use, and writes its state as JSON into ``<pre id="state">``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from typing import Sequence

import numpy as np

from bertkit.analysis.attention import check_attention
from bertkit.errors import ConfigError
from bertkit.io import atomic_write_text

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; } h2 { font-size: 15px; margin: 18px 0 6px; }
.controls { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin-bottom: 8px; }
.head-box { display: inline-flex; align-items: center; gap: 2px; padding: 1px 4px;
            border-radius: 3px; color: white; font-size: 12px; cursor: pointer; }
svg text { font-size: 13px; cursor: default; }
svg text.hovered { font-weight: bold; fill: #c00; }
svg text.dimmed { fill: #bbb; }
#grid { display: grid; gap: 6px; }
.cell { text-align: center; font-size: 10px; cursor: pointer; }
.cell canvas { width: 64px; height: 64px; image-rendering: pixelated; border: 1px solid #ccc; }
.cell.selected canvas { border: 2px solid #c00; }
#state { font-size: 10px; color: #888; white-space: pre-wrap; }
.note { font-size: 13px; color: #555; }
"""

# The page logic. Tokens only ever reach the DOM through textContent.
_SCRIPT = r"""
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("bertkit-data").textContent);
  const TOK = DATA.tokens, T = TOK.length, L = DATA.shape[0], H = DATA.shape[1];
  function decode(b64, Kind) {  // base64 of little-endian integers -> a typed array
    const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
    return new Kind(bytes.buffer);
  }
  // The links of (layer l, head h, query i) are KEY/WEIGHT[START[r]..START[r + 1]), r = (l H + h) T + i.
  const START = decode(DATA.row_start, Uint32Array), KEY = decode(DATA.key, Uint16Array);
  const WEIGHT = decode(DATA.weight, Uint16Array);
  const row = (l, h, i) => (l * H + h) * T + i;
  const B = DATA.sentence_b_start;  // first token of sentence B, or null
  const MIN_DRAW = 0.005;  // fainter lines are invisible anyway; skipping them keeps the SVG small
  const VISIBLE = 0.01;    // a line counts as "visible" in the state above this opacity
  const SVGNS = "http://www.w3.org/2000/svg";
  const ROW = 20, LEFT_X = 180, RIGHT_X = 480, TOP = 16;
  const state = { layer: 0, heads: new Set(DATA.default_heads), hover: null, side: "left",
                  filter: "all", selected: null };
  const colour = h => "hsl(" + Math.round(360 * h / H) + ", 70%, 42%)";
  const $ = id => document.getElementById(id);

  function svg(tag, attrs) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  // Which (query, key) pairs the sentence filter allows: "AB" = A queries to B keys, etc.
  function inSentence(i, s) { return B === null || s === "*" || (s === "A") === (i < B); }
  function allowed(i, j) {
    if (state.filter === "all" || B === null) return true;
    return inSentence(i, state.filter[0]) && inSentence(j, state.filter[1]);
  }

  // ---------------------------------------------------------------- head view
  const lines = $("lines"), lineGroup = svg("g", {}), leftTexts = [], rightTexts = [];
  lines.setAttribute("width", RIGHT_X + 200);
  lines.setAttribute("height", TOP + ROW * T);
  lines.appendChild(lineGroup);
  for (let i = 0; i < T; i++) {
    for (const side of ["left", "right"]) {
      const t = svg("text", { x: side === "left" ? LEFT_X - 6 : RIGHT_X + 6, y: TOP + ROW * i,
                              "text-anchor": side === "left" ? "end" : "start",
                              "dominant-baseline": "middle", "data-i": i, "class": "token " + side });
      t.textContent = TOK[i];
      t.addEventListener("mouseenter", () => { setHover(i, side); });
      t.addEventListener("mouseleave", () => { setHover(null, side); });
      lines.appendChild(t);
      (side === "left" ? leftTexts : rightTexts).push(t);
    }
  }

  function drawLines() {
    lineGroup.replaceChildren();
    for (const h of [...state.heads].sort((a, b) => a - b)) {
      if (h < 0 || h >= H) continue;
      for (let i = 0; i < T; i++) {
        const r = row(state.layer, h, i);
        for (let k = START[r]; k < START[r + 1]; k++) {
          const j = KEY[k], w = WEIGHT[k] / 1e4;
          if (w < MIN_DRAW || !allowed(i, j)) continue;
          lineGroup.appendChild(svg("line", {
            x1: LEFT_X, y1: TOP + ROW * i, x2: RIGHT_X, y2: TOP + ROW * j, stroke: colour(h),
            "stroke-width": 2, "data-i": i, "data-j": j, "data-h": h, "data-w": w }));
        }
      }
    }
    applyHover();
  }

  function applyHover() {
    const hv = state.hover, side = state.side;
    for (const line of lineGroup.children) {
      const i = +line.dataset.i, j = +line.dataset.j;
      const mine = hv === null || (side === "left" ? i === hv : j === hv);
      line.setAttribute("stroke-opacity", mine ? line.dataset.w : 0);
    }
    const filtering = B !== null && state.filter !== "all";
    leftTexts.forEach((t, i) => {
      t.classList.toggle("hovered", side === "left" && i === hv);
      t.classList.toggle("dimmed", filtering && !inSentence(i, state.filter[0]));
    });
    rightTexts.forEach((t, j) => {
      t.classList.toggle("hovered", side === "right" && j === hv);
      t.classList.toggle("dimmed", filtering && !inSentence(j, state.filter[1]));
    });
    writeState();
  }

  function setHover(i, side) { state.hover = i; state.side = side; applyHover(); }
  function setLayer(l) { state.layer = l; $("layer").value = String(l); drawLines(); }
  function setHeads(hs) {
    state.heads = new Set(hs);
    document.querySelectorAll(".head-box input").forEach(cb => { cb.checked = state.heads.has(+cb.value); });
    drawLines();
  }

  const layerSelect = $("layer");
  for (let l = 0; l < L; l++) {
    const o = document.createElement("option");
    o.value = String(l); o.textContent = "layer " + l;
    layerSelect.appendChild(o);
  }
  layerSelect.addEventListener("change", () => setLayer(+layerSelect.value));
  for (let h = 0; h < H; h++) {
    const lab = document.createElement("label"), cb = document.createElement("input");
    lab.className = "head-box"; lab.style.background = colour(h);
    cb.type = "checkbox"; cb.value = String(h); cb.checked = true;
    cb.addEventListener("change", () => {
      if (cb.checked) state.heads.add(h); else state.heads.delete(h);
      drawLines();
    });
    lab.appendChild(cb); lab.appendChild(document.createTextNode(String(h)));
    $("heads").appendChild(lab);
  }
  $("all-heads").addEventListener("click", () => setHeads([...Array(H).keys()]));
  $("no-heads").addEventListener("click", () => setHeads([]));
  if (B === null) $("filter-label").style.display = "none";
  $("filter").addEventListener("change", () => { state.filter = $("filter").value; drawLines(); });

  // ---------------------------------------------------------------- model view
  const grid = $("grid"), cells = [];
  grid.style.gridTemplateColumns = "repeat(" + H + ", 70px)";
  for (let l = 0; l < L; l++) {
    for (let h = 0; h < H; h++) {
      const cell = document.createElement("div"), canvas = document.createElement("canvas");
      const caption = document.createElement("div");
      cell.className = "cell"; canvas.width = T; canvas.height = T;
      const ctx = canvas.getContext("2d"), img = ctx.createImageData(T, T);
      for (let i = 0; i < T; i++) {
        const r = row(l, h, i);
        for (let k = START[r]; k < START[r + 1]; k++) {  // one pixel per kept (query, key), alpha = weight
          const p = 4 * (i * T + KEY[k]);
          img.data[p] = 31; img.data[p + 1] = 119; img.data[p + 2] = 180;
          img.data[p + 3] = Math.round(255 * WEIGHT[k] / 1e4);
        }
      }
      ctx.putImageData(img, 0, 0);
      caption.textContent = "L" + l + " H" + h;
      cell.appendChild(canvas); cell.appendChild(caption);
      cell.addEventListener("click", () => openInHeadView(l, h));
      grid.appendChild(cell);
      cells.push(cell);
    }
  }

  function openInHeadView(l, h) {
    state.selected = [l, h];
    cells.forEach((c, k) => c.classList.toggle("selected", k === l * H + h));
    state.layer = l; layerSelect.value = String(l);
    setHeads([h]);
    $("head-view").scrollIntoView();
  }

  // ---------------------------------------------------------------- state + test hook
  function writeState() {
    let visible = 0, sum = 0, signature = 0;
    for (const line of lineGroup.children) {
      const o = +line.getAttribute("stroke-opacity");
      if (o <= VISIBLE) continue;
      const i = +line.dataset.i, j = +line.dataset.j, h = +line.dataset.h;
      visible += 1; sum += o; signature += o * (i * T + j + 1) * (h + 1);
    }
    $("state").textContent = JSON.stringify({
      layer: state.layer, heads: [...state.heads].sort((a, b) => a - b), hover: state.hover,
      side: state.side, filter: state.filter, selected: state.selected,
      lines_drawn: lineGroup.children.length, lines_visible: visible,
      visible_weight: Math.round(sum * 1e4) / 1e4, signature: Math.round(signature * 1e4) / 1e4,
      tokens_rendered: document.querySelectorAll("svg text.token").length,
      model_cells: cells.length, xss: window.__xss || 0 });
  }

  function applyHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    if (p.has("click")) { const [l, h] = p.get("click").split(",").map(Number); openInHeadView(l, h); }
    if (p.has("layer")) state.layer = Math.max(0, Math.min(L - 1, +p.get("layer")));
    if (p.has("heads")) state.heads = new Set(p.get("heads").split(",").filter(s => s !== "").map(Number));
    if (p.has("filter")) state.filter = p.get("filter");
    if (p.has("side")) state.side = p.get("side");
    state.hover = p.has("hover") ? +p.get("hover") : null;
    layerSelect.value = String(state.layer);
    $("filter").value = state.filter;
    setHeads([...state.heads]);
  }
  window.addEventListener("hashchange", applyHash);
  applyHash();
  // Re-check after load and a moment later, so anything running late (it never should) shows up.
  window.addEventListener("load", () => { writeState(); setTimeout(writeState, 50); });
})();
"""

MIN_LINK = 0.005  # the page's MIN_DRAW: fainter links are neither drawn nor stored
MAX_LINKS = 600_000  # stored links over all layers, heads and tokens: about 3.2 MB of page
MAX_DRAWN = 20_000  # more lines than this at once start the head view on one head
# Direction controls: LRE RLE PDF LRO RLO, LRI RLI FSI PDI, LRM RLM, ALM.
_BIDI_CONTROLS = {c: f"[U+{c:04X}]" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def show_controls(text: str) -> str:
    """`text` with every direction control written as a visible mark such as "[U+202E]"."""
    return str(text).translate(_BIDI_CONTROLS)


def sparse_links(a: np.ndarray, links_per_token: int) -> dict:
    """The page's attention data: per (layer, head, query) row, its strongest keys (at most
    `links_per_token`, weight >= MIN_LINK, in key order), as base64 arrays: row_start
    (uint32, one per row plus one), key (uint16) and weight (uint16, 1e-4 units)."""
    L, H, T, _ = a.shape
    k = min(links_per_token, T)
    keys, weights, counts = [], [], []
    for layer in a:  # one layer at a time: float64 copies of all layers of a large model are GBs
        rows = np.round(layer.reshape(H * T, T).astype(np.float64) * 1e4).astype(np.int64)
        top = np.sort(np.argpartition(-rows, k - 1, axis=1)[:, :k], axis=1) if k < T else \
            np.broadcast_to(np.arange(T), rows.shape)
        w = np.take_along_axis(rows, top, axis=1)
        kept = w >= round(MIN_LINK * 1e4)
        keys.append(top[kept].astype("<u2"))
        weights.append(w[kept].astype("<u2"))
        counts.append(kept.sum(axis=1))
    row_start = np.zeros(L * H * T + 1, dtype="<u4")
    np.cumsum(np.concatenate(counts), out=row_start[1:])

    def b64(x: np.ndarray) -> str:
        return base64.b64encode(np.ascontiguousarray(x).tobytes()).decode("ascii")

    return {"row_start": b64(row_start), "key": b64(np.concatenate(keys)),
            "weight": b64(np.concatenate(weights))}


def attention_from_page_data(data: dict) -> np.ndarray:
    """The (L, H, T, T) attention a page stores (links it dropped are 0): the inverse of
    `sparse_links`, for reading a page's data back."""
    L, H, T = data["shape"]
    start = np.frombuffer(base64.b64decode(data["row_start"]), dtype="<u4")
    key = np.frombuffer(base64.b64decode(data["key"]), dtype="<u2")
    weight = np.frombuffer(base64.b64decode(data["weight"]), dtype="<u2")
    out = np.zeros((L * H * T, T))
    rows = np.repeat(np.arange(L * H * T), np.diff(start))
    out[rows, key] = weight / 1e4
    return out.reshape(L, H, T, T)


_FILTERS = (("all", "all pairs"), ("AA", "A → A"), ("AB", "A → B"), ("BA", "B → A"), ("BB", "B → B"))


def _json_for_script(data) -> str:
    """JSON that is safe inside a <script> element: no `<`, `>` or `&` survive literally.

    Inside a script element the HTML parser only looks for `</script` (and `<!--`); writing
    those characters as JSON unicode escapes keeps the JSON value identical while making
    it impossible for a token to end the element. U+2028/2029 are escaped by ensure_ascii.
    """
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page_data(a, tokens: Sequence[str], sentence_b_start: int | None) -> tuple[dict, str]:
    """(the page's JSON data: tokens, shape, each token's strongest links, the heads shown
    first; the note on what was left out, as HTML)."""
    L, H, T = a.shape[:3]
    links = max(1, MAX_LINKS // (L * H * T))
    data = {"tokens": [str(t) for t in tokens], "shape": [L, H, T], "links_per_token": min(links, T),
            "sentence_b_start": sentence_b_start, **sparse_links(a, links)}
    # more lines than MAX_DRAWN at once make the page slow to draw: start on head 0 then
    one_head = H * T * min(links, T) > MAX_DRAWN
    data["default_heads"] = [0] if one_head else list(range(H))
    notes = []
    if links < T:
        notes.append(f"Long input: each token keeps its {links} strongest links per head.")
    if one_head:
        notes.append("Head 0 is shown first; tick more heads above.")
    return data, f'<p class="note">{html.escape(" ".join(notes))}</p>' if notes else ""


def render_attention_html(
    attn, tokens: Sequence[str], title: str = "bertkit attention", sentence_b_start: int | None = None
) -> str:
    """The viewer page as a string; see the module docstring. Weights are rounded to 4 decimals."""
    tokens = [show_controls(t) for t in tokens]
    a = check_attention(attn, tokens)
    T = a.shape[-1]
    if sentence_b_start is not None and not 0 < sentence_b_start < T:
        raise ConfigError(
            f"sentence_b_start must be between 1 and {T - 1} (the first token of sentence B), "
            f"got {sentence_b_start}"
        )
    data, note = _page_data(a, tokens, sentence_b_start)
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode()
    csp = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'"
    t = html.escape(show_controls(title))
    options = "".join(f'<option value="{v}">{html.escape(label)}</option>' for v, label in _FILTERS)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{t}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>{t}</h1>
{note}
<section id="head-view">
<h2>Head view</h2>
<div class="controls">
<label>Layer <select id="layer"></select></label>
<label id="filter-label">Sentences <select id="filter">{options}</select></label>
<span id="heads"></span>
<button id="all-heads" type="button">all heads</button>
<button id="no-heads" type="button">no heads</button>
</div>
<svg id="lines" xmlns="http://www.w3.org/2000/svg"></svg>
</section>
<section id="model-view">
<h2>Model view (click a head to open it above)</h2>
<div id="grid"></div>
</section>
<pre id="state"></pre>
<script type="application/json" id="bertkit-data">{_json_for_script(data)}</script>
<script>{_SCRIPT}</script>
</body>
</html>
"""


def write_attention_html(
    attn,
    tokens: Sequence[str],
    path: str | os.PathLike,
    title: str = "bertkit attention",
    sentence_b_start: int | None = None,
) -> None:
    """Write the viewer for `attn` (L, H, T, T; numpy or torch) and `tokens` to `path`, atomically."""
    atomic_write_text(path, render_attention_html(attn, tokens, title, sentence_b_start))
