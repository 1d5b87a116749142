"""The attention viewer on long text (issue 17): a 512-token page stays under 5 MB, keeps each
token's strongest links, loads in Chromium, and shows direction controls as visible marks."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile

import numpy as np
import pytest

from bertkit.analysis.viewer import (MAX_LINKS, attention_from_page_data, render_attention_html,
                                     show_controls)
from bertkit.commands.cli import main

from .test_viewer import _chromium_args, _state, needs_browser

FIVE_MB = 5 * 2**20
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def _page_data(text: str) -> dict:
    return json.loads(re.search(r'id="bertkit-data">(.*?)</script>', text, re.S).group(1))


@pytest.fixture(scope="module")
def long_attention():
    """MiniLM's shape (6 layers x 12 heads) on 512 tokens, peaked like trained attention."""
    rng = np.random.default_rng(0)
    a = np.exp(3.0 * rng.normal(size=(6, 12, 512, 512)).astype(np.float32))
    return a / a.sum(-1, keepdims=True)


def test_512_token_page_is_small_and_keeps_each_tokens_strongest_links(long_attention):
    text = render_attention_html(long_attention, [f"w{i}" for i in range(512)])
    assert len(text.encode("utf-8")) < FIVE_MB  # the dense JSON page was 121.5 MB
    data = _page_data(text)
    k = data["links_per_token"]
    assert k == MAX_LINKS // (6 * 12 * 512) and 0 < k < 512
    assert data["default_heads"] == [0] and "strongest links" in text
    stored = attention_from_page_data(data)
    for layer, head, query in [(0, 0, 0), (3, 7, 200), (5, 11, 511)]:
        row = long_attention[layer, head, query].astype(np.float64)
        kept = np.flatnonzero(stored[layer, head, query])
        strongest = np.argsort(-row)[:k]
        expected = strongest[np.round(row[strongest], 4) >= 0.005]
        assert set(kept) == set(expected)
        assert np.allclose(stored[layer, head, query, kept], row[kept], atol=5e-5)


def test_attention_command_on_long_text_writes_a_small_page(tmp_path, capsys):
    from bertkit.models.config import BertConfig
    from bertkit.models.encoder import BertModel
    from bertkit.tokenizer import Tokenizer

    words = [f"word{i % 300}" for i in range(2000)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(words) + "\n", encoding="utf-8")
    tokenizer = Tokenizer.train_wordpiece([str(corpus)], vocab_size=400, min_frequency=1, show_progress=False)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=32, max_position_embeddings=512)
    BertModel(config).save_pretrained(tmp_path / "model", tokenizer=tokenizer)
    page = tmp_path / "long.html"
    assert main(["attention", "--model", str(tmp_path / "model"), " ".join(words), "--html", str(page)]) == 0
    assert "512 tokens" in capsys.readouterr().out
    assert page.stat().st_size < FIVE_MB
    assert _page_data(page.read_text(encoding="utf-8"))["shape"] == [6, 12, 512]


@needs_browser
def test_512_token_page_loads_in_chromium(long_attention, tmp_path):
    page = tmp_path / "long.html"
    page.write_text(render_attention_html(long_attention, [f"w{i}" for i in range(512)]), encoding="utf-8")
    profile = tempfile.mkdtemp(dir=tmp_path)
    result = subprocess.run(_chromium_args(profile) + ["--dump-dom", page.as_uri() + "#layer=2"],
                            capture_output=True, text=True, timeout=120)
    state = _state(result.stdout)
    assert state["layer"] == 2 and state["heads"] == [0] and state["model_cells"] == 72
    assert 0 < state["lines_drawn"] <= 512 * MAX_LINKS // (6 * 12 * 512)
    assert state["tokens_rendered"] == 2 * 512


def test_direction_controls_are_shown_not_obeyed():
    tokens = ["[CLS]", "abc\u202edcba", "x\u2066y\u2069", "\u200f", "[SEP]"]
    a = np.full((1, 1, 5, 5), 0.2)
    text = render_attention_html(a, tokens, title="invoice\u202etxt.exe " + BIDI)
    assert not any(c in text for c in BIDI)
    assert "<title>invoice[U+202E]txt.exe [U+202A]" in text
    assert _page_data(text)["tokens"] == ["[CLS]", "abc[U+202E]dcba", "x[U+2066]y[U+2069]", "[U+200F]", "[SEP]"]
    assert show_controls("plain \u05d0 text") == "plain \u05d0 text"  # Hebrew letters stay; only controls change
