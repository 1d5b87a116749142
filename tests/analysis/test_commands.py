"""The analysis commands (`bertkit attention`, `probe`, `scale`), run in-process through the CLI."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from bertkit.analysis.viewer import attention_from_page_data
from bertkit.commands.cli import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


# ----------------------------------------------------------------------------- attention
def test_attention_writes_viewer_png_and_stats(minilm_dir, tmp_path, capsys):
    html, png, stats = tmp_path / "a.html", tmp_path / "a.png", tmp_path / "a.jsonl"
    code = main(["attention", "--model", minilm_dir, "The cat sat on the mat.", "--pair", "It purred.",
                 "--html", str(html), "--png", str(png), "--stats", str(stats), "--rollout"])
    assert code == 0
    out = capsys.readouterr().out
    tokens = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", ".", "[SEP]", "it", "pu", "##rred", ".", "[SEP]"]
    assert " ".join(tokens) in out

    # the viewer holds exactly the real tokens (no padding) and where sentence B starts
    page = html.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="bertkit-data">(.*?)</script>', page).group(1))
    assert data["tokens"] == tokens and data["sentence_b_start"] == tokens.index("it")
    attn = attention_from_page_data(data)
    assert attn.shape == (6, 12, len(tokens), len(tokens))
    # rows sum to 1 less the links under 0.005 the page neither draws nor stores
    sums = attn.sum(-1)
    assert (sums <= 1 + 1e-3).all() and (sums >= 1 - 0.005 * len(tokens)).all()

    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 20_000  # a 6 x 12 grid
    assert (tmp_path / "a-rollout.png").read_bytes()[:8] == PNG_MAGIC

    records = [json.loads(line) for line in stats.read_text().splitlines()]
    assert len(records) == 72 and {(r["layer"], r["head"]) for r in records} == {(l, h) for l in range(6) for h in range(12)}
    # the statistics describe the attention in the page: [CLS] share of head (l, h) = column 0
    for r in records[::7]:
        assert r["cls"] == pytest.approx(attn[r["layer"], r["head"], :, 0].mean(), abs=1e-3)
    # the summary's top [CLS] head is the arg-max of the written statistics
    top = max(records, key=lambda r: r["cls"])
    assert re.search(rf"most \[CLS\]-focused heads[^:]*: L{top['layer']}H{top['head']} ", out)
    assert "rollout: [CLS] at the last layer draws on" in out


def test_fill_mask_and_attention_show_byte_level_tokens_as_text(tmp_path, capsys):
    """walk M #11: a byte-level BPE model's fillers read 'Ġ', 'ãĢĤ' (for '。') and its attention labels
    'Ġ×©×ľ×ķ×Ŀ' (for ' שלום'): now the text, a leading space as '▁', a split character's bytes as <0xE5>."""
    import torch

    from bertkit.models.config import BertConfig
    from bertkit.models.heads import BertForMaskedLM
    from bertkit.tokenizer import Tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("שלום עולם 😍 İstanbul 北京。 Die Straße ist schön.\n" * 20, encoding="utf-8")
    tok = Tokenizer.train_bpe([str(corpus)], vocab_size=400, show_progress=False)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, pad_token_id=tok.pad_token_id)
    model = str(tmp_path / "mlm")
    BertForMaskedLM(config).save_pretrained(model, tokenizer=tok)
    assert main(["fill-mask", "--model", model, "Die Straße in <mask> ist schön.", "--top-k", "400"]) == 0
    fillers = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert len(fillers) == tok.vocab_size and {"。", "▁עולם", "▁", "<0xE5>"} <= set(fillers)
    assert not [f for f in fillers if any(c in f for c in "ĠãĢĤ×")], fillers
    html = tmp_path / "a.html"
    assert main(["attention", "--model", model, "שלום עולם 😍 İstanbul 北京", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    tokens = out.splitlines()[0].split(" tokens: ")[1].split()
    assert "▁עולם" in tokens and "Ġ" not in out and "×" not in out
    page = html.read_text(encoding="utf-8")
    assert json.loads(re.search(r'id="bertkit-data">(.*?)</script>', page).group(1))["tokens"] == tokens


def test_attention_single_head_png_and_bad_indexes(minilm_dir, tmp_path, capsys):
    assert main(["attention", "--model", minilm_dir, "A cat.", "--png", str(tmp_path / "a.jpg")]) == 2
    assert "give a file name ending in .png" in _one_line_error(capsys)
    png = tmp_path / "head.png"
    assert main(["attention", "--model", minilm_dir, "Dogs bark.", "--png", str(png), "--head", "5", "11"]) == 0
    assert png.read_bytes()[:8] == PNG_MAGIC
    capsys.readouterr()

    assert main(["attention", "--model", minilm_dir, "Dogs bark.", "--head", "6", "0"]) == 2
    assert "layers 0..5" in _one_line_error(capsys)
    assert main(["attention", "--model", minilm_dir, "Dogs bark.", "--head", "0", "12", "--png", str(png)]) == 2
    assert "heads 0..11" in _one_line_error(capsys)


def test_attention_truncates_long_text_with_a_warning(minilm2_dir, tmp_path, capsys):
    stats = tmp_path / "s.jsonl"
    html = tmp_path / "v.html"
    text = " ".join(["word"] * 40)
    assert main(["attention", "--model", minilm2_dir, text, "--max-length", "16",
                 "--stats", str(stats), "--html", str(html)]) == 0
    captured = capsys.readouterr()
    assert "42 tokens" in captured.err and "truncated to the first 16" in captured.err
    assert "16 tokens" in captured.out
    data = json.loads(re.search(r'id="bertkit-data">(.*?)</script>', html.read_text()).group(1))
    assert len(data["tokens"]) == 16 and data["tokens"][-1] == "[SEP]"
    assert len(stats.read_text().splitlines()) == 2 * 12


# ----------------------------------------------------------------------------- probe
ANIMALS = "cat dog horse cow sheep goat mouse tiger lion wolf fox bear".split()
MONEY = "bank loan stock bond price tax profit budget cash debt fund wage".split()
FILLER = "the a of and with near then also very quite".split()


def _topic_files(tmp_path, n=120):
    """A sentence task (topic from content words) and a token task (word class), both linearly easy."""
    rng = random.Random(0)
    rows, conll = ["text\tlabel"], []
    for k in range(n):
        label = "animal" if k % 2 else "money"
        words = rng.sample(ANIMALS if k % 2 else MONEY, 3) + rng.sample(FILLER, 3)
        rng.shuffle(words)
        rows.append(f"{' '.join(words)}\t{label}")
        conll += [f"{w}\t{'ANIMAL' if w in ANIMALS else 'MONEY' if w in MONEY else 'O'}" for w in words] + [""]
    (tmp_path / "topics.tsv").write_text("\n".join(rows) + "\n")
    (tmp_path / "words.conll").write_text("\n".join(conll) + "\n")
    return tmp_path / "topics.tsv", tmp_path / "words.conll"


def _results(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_probe_finds_labels_that_are_in_the_features(minilm2_dir, tmp_path, capsys):
    # Row/label misalignment (e.g. after the length sort) would drop these to chance.
    sentences, words = _topic_files(tmp_path)
    out = tmp_path / "sent"
    assert main(["probe", "--model", minilm2_dir, "--task", str(sentences), "--out", str(out)]) == 0
    rows = _results(out)
    assert [r["layer"] for r in rows] == [0, 1, 2] and rows[0]["majority"] == pytest.approx(0.5)
    assert max(r["accuracy"] for r in rows) >= 0.95

    out = tmp_path / "tok"
    assert main(["probe", "--model", minilm2_dir, "--task", str(words), "--level", "token",
                 "--control", "--out", str(out)]) == 0
    rows = _results(out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 120 * 6 and summary["classes"] == 3
    assert max(r["accuracy"] for r in rows) >= 0.95
    for r in rows:
        assert r["selectivity"] == pytest.approx(r["accuracy"] - r["control_accuracy"])
    capsys.readouterr()

    assert main(["probe", "--model", minilm2_dir, "--task", str(words), "--level", "sentence",
                 "--out", str(out)]) == 2
    assert "--level token" in _one_line_error(capsys)


def test_probe_reads_other_columns_and_refuses_a_numeric_target(minilm2_dir, tmp_path, capsys):
    rows = [f"the striker scored goal {i}\tsport" if i % 2 else f"shares fell {i} percent\tbusiness" for i in range(40)]
    (tmp_path / "t.tsv").write_text("body\ttopic\n" + "\n".join(rows) + "\n")
    base = ["probe", "--model", minilm2_dir, "--data", str(tmp_path / "t.tsv"), "--out", str(tmp_path / "o")]
    assert main(base) == 2
    assert "--set data.text_column=NAME" in _one_line_error(capsys)  # the hint names an option probe has
    assert main(base + ["--set", "data.text_column=body", "data.label_column=topic"]) == 0
    printed = capsys.readouterr().out
    assert "32 train / 8 test" in printed and "rest on 8 test items" in printed
    numbers = [f"page {i} of the manual\t{1 + i / 7:.4f}" for i in range(40)]  # a regression file
    (tmp_path / "r.tsv").write_text("text\tlabel\n" + "\n".join(numbers) + "\n")
    assert main(["probe", "--model", minilm2_dir, "--data", str(tmp_path / "r.tsv"), "--out", str(tmp_path / "r")]) == 2
    assert "the labels are 40 distinct numbers; a probe predicts classes" in _one_line_error(capsys)


def test_probe_wordnet_tokens_with_baselines(minilm2_dir, tmp_path, capsys):
    out = tmp_path / "wn"
    assert main(["probe", "--model", minilm2_dir, "--task", "wordnet-tokens", "--limit", "80",
                 "--control", "--random-init", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = _results(out)
    assert [(r["encoder"], r["layer"]) for r in rows] == [(e, k) for e in ("pretrained", "random-init") for k in range(3)]
    for r in rows:
        assert 0.0 <= r["control_accuracy"] <= 1.0 and r["train_accuracy"] >= r["accuracy"] - 0.5
    assert (out / "probe.png").read_bytes()[:8] == PNG_MAGIC
    table = [line for line in printed.splitlines() if re.match(r"\s+\d\s+0\.\d{3}", line)]
    assert len(table) == 3 and "random-init" in printed and "selectivity" in printed

    assert main(["probe", "--model", minilm2_dir, "--task", "nosuch-task", "--out", str(out)]) == 2
    assert "neither a built-in task" in _one_line_error(capsys)


# ----------------------------------------------------------------------------- scale
def test_scale_formula(capsys):
    assert main(["scale", "formula", "--compute", "5.76e23", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["chinchilla_optimal"]
    # the published constants give N = 3.2e10, D = 3.0e12 at Chinchilla's budget (scaling.py docstring)
    assert result["params"] == pytest.approx(3.2e10, rel=0.02)
    assert result["tokens"] == pytest.approx(3.0e12, rel=0.02)
    assert main(["scale", "formula", "--params", "7e10", "--tokens", "1.4e12"]) == 0
    assert "given N = 7e+10" in capsys.readouterr().out
    assert main(["scale", "formula", "--params", "1e8"]) == 2
    assert "--params and --tokens together" in _one_line_error(capsys)


def test_scale_fit_recovers_the_exponent(tmp_path, capsys):
    rng = np.random.default_rng(0)
    sizes = np.geomspace(1e5, 1e8, 7)
    losses = (2e12 / sizes) ** 0.12 + 1.5 + rng.normal(0, 0.005, sizes.size)
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("".join(json.dumps({"size": {"k": k}, "n_params": float(n), "loss": float(l), "status": "ok"})
                             + "\n" for k, (n, l) in enumerate(zip(sizes, losses))))
    plot = tmp_path / "fit.png"
    assert main(["scale", "fit", str(sweep), "--plot", str(plot), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert abs(fit["alpha"] - 0.12) < 4 * fit["alpha_se"] and fit["alpha_se"] < 0.05
    assert plot.read_bytes()[:8] == PNG_MAGIC

    few = tmp_path / "few.jsonl"
    few.write_text("".join(sweep.read_text().splitlines(keepends=True)[:3]))
    assert main(["scale", "fit", str(few)]) == 2
    assert "need at least 4" in _one_line_error(capsys)
    assert main(["scale", "fit", str(tmp_path / "missing.jsonl")]) == 2
    assert "does not exist" in _one_line_error(capsys)


def test_scale_sweep_refuses_a_budget_or_size_list_too_small(tmp_path, capsys):
    small = ["--set", "train.batch_size=4", "--set", "data.max_length=16", "--threads", "1", "--out", str(tmp_path / "sw")]
    assert main(["scale", "sweep", "--sizes", "1x16,1x32,2x32,2x64", "--tokens", "1e8",
                 "--time-budget", "1", *small]) == 2
    err = capsys.readouterr().err
    assert "--time-budget 1s is too small" in err and "raise --time-budget to about" in err
    assert not (tmp_path / "sw" / "data").exists()  # refused before any data preparation

    assert main(["scale", "sweep", "--sizes", "1x16,1x32,2x32", "--tokens", "1e4", "--time-budget", "60", *small]) == 2
    assert "needs at least 4" in _one_line_error(capsys)
    assert main(["scale", "sweep", "--sizes", "1x16,big", "--tokens", "1e4", "--time-budget", "60", *small]) == 2
    assert "LAYERSxHIDDEN" in _one_line_error(capsys)


def test_scale_sweep_end_to_end_on_a_small_corpus(tmp_path, capsys, bbc_dir, monkeypatch):
    # 40 BBC articles, a 300-token vocabulary and 4 very small models: the whole pipeline
    # (tokenizer, shards, 4 pre-training runs, fit) in a few seconds.
    import shutil
    from pathlib import Path

    from bertkit.train.trainer import Trainer

    # each run's curves.png (the trainer's, tested there) would be most of this test's time
    monkeypatch.setattr(Trainer, "plot", lambda self: None)

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in sorted(Path(bbc_dir, "business").glob("*.txt"))[:40]:
        shutil.copy(f, corpus / f.name)
    out = tmp_path / "sweep"
    code = main(["scale", "sweep", "--sizes", "1x8,1x16,1x32,2x32", "--tokens", "3000", "--time-budget", "120", "--threads", "1",
                 "--set", f"data.corpus='{corpus}'", "--set", "tokenizer.vocab_size=300",
                 "--set", "data.max_length=32", "--set", "train.batch_size=8", "--set", "data.eval_fraction=0.2",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    records = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    assert [r["name"] for r in records] == ["1x8x2", "1x16x2", "1x32x2", "2x32x2"]  # at least 2 heads
    assert all(r["status"] == "ok" and r["steps"] == 12 for r in records)
    # N = the modern encoder's layer parameters, one layer of width 8 (GeGLU width 12, no biases):
    # Wqkv, Wo, Wi (8 -> 2 x 12), Wo (12 -> 8), the MLP norm (layer 0 has no attention norm)
    assert records[0]["n_params"] == 3 * 8 * 8 + 8 * 8 + 8 * 24 + 12 * 8 + 8
    # a learning curve per size: an evaluation every step (12 steps < 10 per run), C = 6 N D
    curve = records[0]["curve"]
    assert [p["step"] for p in curve] == list(range(1, 13))
    assert curve[-1]["compute"] == 6 * records[0]["n_params"] * 12 * 8 * 32 == records[0]["compute"]
    fit = json.loads((out / "fit.json").read_text())
    assert fit["n_points"] == 4 and np.isfinite(fit["alpha"])
    assert (out / "scaling.png").read_bytes()[:8] == PNG_MAGIC and "alpha =" in printed
    frontier = json.loads((out / "frontier.json").read_text())
    assert len(frontier["frontier"]) >= 4 and "alpha_C =" in printed
    assert (out / "frontier.png").read_bytes()[:8] == PNG_MAGIC
