"""The attention viewer, checked in a real headless Chromium.

The page exposes a test hook: it reads `location.hash` (layer, heads, hover, side, click),
applies it through the same functions its controls use and writes its state as JSON into
<pre id="state">. Chromium's --dump-dom gives us the DOM after the scripts ran, so we can
check both that state and the actual SVG lines (their opacity must equal the weights).

CI setup: `apt-get install -y chromium` (Debian; the binary is /usr/bin/chromium).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from bertkit.analysis.viewer import attention_from_page_data, render_attention_html, write_attention_html
from bertkit.errors import ConfigError, DataError

CHROMIUM = os.environ.get("BERTKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
needs_browser = pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason="needs a headless Chromium: `apt-get install -y chromium` (or set BERTKIT_CHROMIUM)",
)

XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=1">'
TOKENS = ["[CLS]", "the", XSS_SCRIPT, XSS_IMG, "a&b", "cat", "sat", "[SEP]"]
T, L, H = len(TOKENS), 2, 3


def _attention(seed=0):
    rng = np.random.default_rng(seed)
    a = np.exp(2.0 * rng.normal(size=(L, H, T, T)))
    return a / a.sum(-1, keepdims=True)


ATTN = _attention()


def _chromium_args(profile):
    # These flags keep headless Chromium from trying the network (it would hang offline).
    return [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=1000"]


def _run_many(jobs, tmp):
    """Run several Chromium invocations two at a time (2 cores); return their stdout."""
    outputs, running = {}, []
    pending = list(jobs.items())
    while pending or running:
        while pending and len(running) < 2:
            name, extra = pending.pop(0)
            profile = tempfile.mkdtemp(dir=tmp)  # a fresh profile each time, never a shared one
            proc = subprocess.Popen(_chromium_args(profile) + extra, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            running.append((name, proc))
        name, proc = running.pop(0)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"chromium timed out on {name}")
        outputs[name] = out
    return outputs


def _state(dom):
    m = re.search(r'<pre id="state">(.*?)</pre>', dom, re.S)
    assert m, "the page did not write its state"
    return json.loads(html.unescape(m.group(1)))


def _lines(dom):
    """(head, i, j) -> stroke opacity of every SVG line in the dumped DOM."""
    out = {}
    for tag in re.findall(r"<line [^>]*>", dom):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
        out[int(attrs["data-h"]), int(attrs["data-i"]), int(attrs["data-j"])] = float(attrs["stroke-opacity"])
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip("needs a headless Chromium: `apt-get install -y chromium`")
    tmp = tmp_path_factory.mktemp("viewer")
    page = tmp / "attn.html"
    write_attention_html(ATTN, TOKENS, page, title="<b>title</b>", sentence_b_start=5)
    # The same page made deliberately unsafe (innerHTML, no CSP): proves the XSS check can fail.
    unsafe = tmp / "unsafe.html"
    text = page.read_text()
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
    assert "t.textContent = TOK[i];" in text
    unsafe.write_text(text.replace("t.textContent = TOK[i];", "t.innerHTML = TOK[i];"))
    shot = tmp / "shot.png"
    url = page.as_uri()
    jobs = {
        "layer0": ["--dump-dom", url + "#layer=0"],
        "layer1": ["--dump-dom", url + "#layer=1"],
        "hover": ["--dump-dom", url + "#layer=1&hover=3"],
        # a model-view click, the A->B sentence filter and a hover on a key token, together
        "click": ["--dump-dom", url + "#click=1,2&filter=AB&hover=6&side=right"],
        "unsafe": ["--dump-dom", unsafe.as_uri() + "#layer=0"],
        "shot": [f"--screenshot={shot}", "--window-size=1200,900", url + "#layer=1&hover=2"],
    }
    out = _run_many(jobs, tmp)
    out["shot_path"] = shot
    out["html"] = text
    return out


@needs_browser
def test_tokens_render_as_text_and_markup_never_runs(pages):
    dom = pages["layer0"]
    state = _state(dom)
    assert state["xss"] == 0
    assert state["tokens_rendered"] == 2 * T and state["model_cells"] == L * H
    for tok in TOKENS:  # as text nodes, serialised escaped, once per side of the head view
        assert dom.count(">" + html.escape(tok, quote=False) + "</text>") == 2, tok
    assert "<img" not in dom and "<script>window" not in dom
    assert dom.count("<script") == 2  # the JSON data block and the page's own script
    assert "&lt;b&gt;title&lt;/b&gt;" in dom and "<b>title" not in dom


@needs_browser
def test_xss_check_catches_an_unsafe_page(pages):
    # If tokens went through innerHTML the <img onerror> would run: the hook must see it.
    assert _state(pages["unsafe"])["xss"] == 1


@needs_browser
def test_line_opacity_is_the_weight_and_layer_changes_drawing(pages):
    for layer in (0, 1):
        dom = pages[f"layer{layer}"]
        assert _state(dom)["layer"] == layer
        lines = _lines(dom)
        expected = {(h, i, j): round(float(ATTN[layer, h, i, j]), 4)
                    for h in range(H) for i in range(T) for j in range(T)
                    if round(float(ATTN[layer, h, i, j]), 4) >= 0.005}
        assert lines.keys() == expected.keys()
        assert all(abs(lines[k] - expected[k]) < 1e-9 for k in expected)
    s0, s1 = _state(pages["layer0"]), _state(pages["layer1"])
    assert s0["signature"] != s1["signature"]
    assert _lines(pages["layer0"]) != _lines(pages["layer1"])


@needs_browser
def test_hover_shows_only_the_tokens_lines(pages):
    base, hover = _lines(pages["layer1"]), _lines(pages["hover"])
    assert base.keys() == hover.keys()  # hovering hides lines, it does not redraw
    visible = {k for k, o in hover.items() if o > 0}
    assert visible and all(i == 3 for _, i, _ in visible)
    assert visible == {k for k, o in base.items() if k[1] == 3}
    state = _state(pages["hover"])
    assert state["hover"] == 3 and state["lines_visible"] < _state(pages["layer1"])["lines_visible"]


@needs_browser
def test_model_view_click_sentence_filter_and_key_hover(pages):
    state = _state(pages["click"])
    assert state["layer"] == 1 and state["heads"] == [2] and state["selected"] == [1, 2]
    lines = _lines(pages["click"])
    # only the clicked head, only queries in sentence A (i < 5) to keys in sentence B (j >= 5)
    assert {h for h, _, _ in lines} == {2}
    assert all(i < 5 <= j for _, i, j in lines)
    expected = {(2, i, j) for i in range(5) for j in range(5, T) if round(ATTN[1, 2, i, j], 4) >= 0.005}
    assert lines.keys() == expected
    # hovering key token 6 (right side) leaves only the lines into it
    visible = {k for k, o in lines.items() if o > 0}
    assert visible and visible == {k for k in lines if k[2] == 6}


@needs_browser
def test_screenshot_is_a_real_image(pages):
    shot = pages["shot_path"]
    assert shot.exists() and shot.stat().st_size > 5000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_page_is_self_contained_and_json_escaped(tmp_path):
    text = render_attention_html(ATTN, TOKENS)
    # nothing to fetch: no URLs besides the SVG namespace name, no external tags or CSS urls
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    for fetcher in ("<link", "<img", "<iframe", "url(", "@import", "<script src"):
        assert fetcher not in text
    data = re.search(r'<script type="application/json" id="bertkit-data">(.*?)</script>', text, re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    parsed = json.loads(data)
    assert parsed["tokens"] == TOKENS
    # a short input keeps every link the page can draw (weight >= 0.005), to 4 decimals
    stored = attention_from_page_data(parsed)
    drawable = np.where(np.round(ATTN, 4) >= 0.005, ATTN, 0.0)
    assert np.allclose(stored, drawable, atol=5e-5) and not np.allclose(stored, drawable, atol=1e-6)


def test_bad_inputs_raise_actionable_errors(tmp_path):
    with pytest.raises(DataError, match="tokens"):
        write_attention_html(ATTN, TOKENS[:-1], tmp_path / "x.html")
    with pytest.raises(DataError, match="shape"):
        write_attention_html(ATTN[0], TOKENS, tmp_path / "x.html")
    with pytest.raises(ConfigError, match="sentence_b_start"):
        write_attention_html(ATTN, TOKENS, tmp_path / "x.html", sentence_b_start=T)
    assert not (tmp_path / "x.html").exists()
