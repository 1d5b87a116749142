"""ONNX export: ONNX Runtime gives bertkit's outputs for every head at two batch/sequence shapes
(the axes are dynamic), the real MiniLM sentence encoder agrees with SentenceEncoder, the
command writes the tokenizer beside the graph, and a missing onnx says how to install it."""

import sys

import numpy as np
import pytest
import torch

from bertkit import BertConfig, Tokenizer
from bertkit.commands.cli import main
from bertkit.errors import CheckpointError, ConfigError
from bertkit.inference.onnx import (GRAPHS, ExportGraph, example_inputs, export_model, export_onnx, onnx_session,
                                    run_onnx)
from bertkit.tasks import get_task

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

SHAPES = ((2, 9), (5, 37))


def target(name: str):
    """What export_model takes: a graph that is no task by its name, else the task's entry."""
    return GRAPHS.get(name) or get_task(name)  # neither is the traced (2, 16) shape


def tiny_config(**overrides) -> BertConfig:
    return BertConfig.preset("tiny", vocab_size=1000, num_labels=3, **overrides)


@pytest.mark.parametrize("task", ["encoder", "embedding", "classification", "token-classification",
                                  "qa", "masked-lm"])
def test_every_head_matches_bertkit_at_two_shapes(task, tmp_path):
    config = tiny_config()
    model = target(task).model_class(config)
    result = export_model(model, str(tmp_path / "model.onnx"), target(task), verify=False)
    session = onnx_session(result.path, threads=1)
    graph = ExportGraph(model, target(task))
    for seed, (batch, length) in enumerate(SHAPES):
        inputs = example_inputs(config, batch, length, seed=seed + 10)
        with torch.no_grad():
            expected = graph(*(inputs[name] for name in graph.input_names))
        got = run_onnx(session, inputs)
        assert len(got) == len(expected) == len(graph.output_names)
        for e, g in zip(expected, got):
            assert g.shape == tuple(e.shape)
            assert np.abs(g - e.numpy()).max() < 1e-5
    assert [o.name for o in session.get_outputs()] == graph.output_names


def test_export_keeps_the_models_training_mode(tmp_path):
    model = target("classification").model_class(tiny_config()).train()
    export_model(model, str(tmp_path / "m.onnx"), get_task("classification"), verify=False)
    assert model.training and all(m.training for m in model.modules())


def test_without_segments_there_is_no_token_type_input(tmp_path):
    config = tiny_config(type_vocab_size=0)
    result = export_model(target("encoder").model_class(config), str(tmp_path / "m.onnx"), "encoder")
    assert [i.name for i in onnx_session(result.path).get_inputs()] == ["input_ids", "attention_mask"]
    assert result.max_difference < 1e-5


def test_minilm_sentence_encoder_and_command(minilm_dir, tmp_path, capsys):
    from bertkit.inference.encode import SentenceEncoder

    out = tmp_path / "minilm-onnx"
    assert main(["export", "--model", minilm_dir, "--out", str(out), "--format", "onnx"]) == 0
    assert "embedding graph" in capsys.readouterr().out
    # another export (or a model) in --out is replaced only with --overwrite; --model itself never
    assert main(["export", "--model", minilm_dir, "--out", str(out), "--no-verify"]) == 2
    assert "already holds a model or an export (config.json, model.onnx" in capsys.readouterr().err
    assert main(["export", "--model", minilm_dir, "--out", minilm_dir, "--no-verify", "--overwrite"]) == 2
    assert f"--out {minilm_dir} is --model {minilm_dir}" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("x")
    assert main(["export", "--model", minilm_dir, "--out", str(tmp_path / "a-file"), "--no-verify"]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    for name in ("model.onnx", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "config.json"):
        assert (out / name).is_file()
    texts = ["A man is eating food.", "A man is eating a piece of bread.",
             "The shares rose by five per cent after the company reported a record quarter.", "Hi",
             "Rain is expected across the north of the country tomorrow, with snow on high ground."]
    tokenizer = Tokenizer.from_pretrained(out)  # the files beside the graph tokenize as the model's
    encoder = SentenceEncoder.from_pretrained(minilm_dir)
    session = onnx_session(str(out / "model.onnx"), threads=1)
    for rows in (texts[:2], texts):  # two batch sizes and padded widths
        batch = tokenizer(rows, padding=True, return_tensors="pt")
        got = run_onnx(session, batch)[0]
        assert got.shape == (len(rows), 384)
        assert np.abs(got - encoder.encode(rows)).max() < 1e-5
    a, b = run_onnx(session, tokenizer(texts[:2], padding=True, return_tensors="pt"))[0]
    assert abs(float(a @ b) - 0.755) <= 0.001  # the model's reference cosine


def test_task_model_from_a_directory(minilm_dir, tmp_path, capsys):
    config = BertConfig.preset("tiny", num_labels=4)  # MiniLM's vocabulary size: its tokenizer fits
    model = target("token-classification").model_class(config)
    model.save_pretrained(tmp_path / "tagger", tokenizer=Tokenizer.from_pretrained(minilm_dir))
    assert main(["export", "--model", str(tmp_path / "tagger"), "--out", str(tmp_path / "x")]) == 0
    assert "token-classification graph" in capsys.readouterr().out  # read from config.json
    assert BertConfig.from_pretrained(tmp_path / "x").num_labels == 4
    # another task's graph on this head (4 tag logits called a regression score) is refused by name
    assert main(["export", "--model", str(tmp_path / "tagger"), "--out", str(tmp_path / "y"),
                 "--task", "classification"]) == 2
    assert "--task classification but " in capsys.readouterr().err and not (tmp_path / "y").exists()
    choice = target("multiple-choice").model_class(config)  # a task with no graph, --task never given
    choice.save_pretrained(tmp_path / "mc", tokenizer=Tokenizer.from_pretrained(minilm_dir))
    assert main(["export", "--model", str(tmp_path / "mc"), "--out", str(tmp_path / "z")]) == 2
    assert "mc is a multiple-choice model, which has no ONNX graph" in capsys.readouterr().err


def test_an_export_given_back_as_a_model_is_named(minilm_dir, tmp_path, capsys):
    """walk R: predict / embed on the export directory said only "no weights in DIR"."""
    config = BertConfig.preset("tiny", num_labels=2)
    target("classification").model_class(config).save_pretrained(tmp_path / "clf",
                                                                  tokenizer=Tokenizer.from_pretrained(minilm_dir))
    assert main(["export", "--model", str(tmp_path / "clf"), "--out", str(tmp_path / "x"), "--no-verify"]) == 0
    (tmp_path / "in.txt").write_text("a text\n")
    for argv in (["predict", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "p.jsonl")],
                 ["embed", "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "v.npy")]):
        capsys.readouterr()
        assert main([argv[0], "--model", str(tmp_path / "x"), *argv[1:]]) == 2
        err = capsys.readouterr().err
        assert "is an ONNX export (`bertkit export`): run its model.onnx with ONNX Runtime" in err, err
        assert not (tmp_path / "p.jsonl").exists() and not (tmp_path / "v.npy").exists()


def test_head_the_checkpoint_lacks_is_refused(minilm_dir, tmp_path):
    with pytest.raises(CheckpointError, match="no trained qa head"):
        export_onnx(minilm_dir, str(tmp_path / "x"), task=get_task("qa"), verify=False)


def test_missing_onnx_says_how_to_install(minilm_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` now raises ImportError
    with pytest.raises(ConfigError, match=r"pip install bertkit\[onnx\]"):
        export_onnx(minilm_dir, str(tmp_path / "x"))
    assert main(["export", "--model", minilm_dir, "--out", str(tmp_path / "x")]) == 2
    assert "pip install bertkit[onnx]" in capsys.readouterr().err


def test_verification_catches_a_graph_that_differs(tmp_path):
    from bertkit.inference.onnx import verify_onnx

    config = tiny_config()
    exported = target("encoder").model_class(config)
    export_model(exported, str(tmp_path / "m.onnx"), "encoder", verify=False)
    other = target("encoder").model_class(config)  # other random weights
    with pytest.raises(CheckpointError, match="differs from bertkit"):
        verify_onnx(str(tmp_path / "m.onnx"), ExportGraph(other, "encoder"))


MODERN_CLASSES = {"encoder": "ModernBertModel", "embedding": "ModernBertModel",
                  "classification": "ModernBertForSequenceClassification",
                  "token-classification": "ModernBertForTokenClassification",
                  "qa": "ModernBertForQuestionAnswering", "masked-lm": "ModernBertForMaskedLM"}


@pytest.mark.parametrize("task", sorted(MODERN_CLASSES))
def test_modern_encoder_heads_export_and_match_bertkit(task, tmp_path):
    from bertkit.models import modern
    config = modern.ModernBertConfig.preset("tiny", vocab_size=1000, num_labels=3, local_attention=16)
    model = getattr(modern, MODERN_CLASSES[task])(config).eval()
    result = export_model(model, str(tmp_path / "model.onnx"), target(task))  # verified at three shapes
    assert result.max_difference < 1e-4
    assert "unpad" not in vars(model.model if hasattr(model, "model") else model)  # the switch restored
    session = onnx_session(result.path, threads=1)
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask"]
    graph = ExportGraph(model, target(task))
    for seed, (batch, length) in enumerate(((2, 9), (3, 40))):  # 40: past the 8-token sliding window
        inputs = example_inputs(config, batch, length, seed=seed + 10)
        with torch.no_grad():  # bertkit's own (unpadded) path against the traced padded one
            expected = graph(*(inputs[name] for name in graph.input_names))
        real = inputs["attention_mask"].bool().numpy()
        for e, g in zip(expected, run_onnx(session, inputs)):
            e = e.numpy()
            if e.ndim >= 2 and e.shape[1] == length:  # per-token outputs: real tokens only
                e, g = e[real], g[real]
            assert np.abs(g - e).max() < 1e-4


def test_the_docs_serving_block_runs_a_classifier_export(minilm_dir, tmp_path):
    """docs/inference.md's ONNX Runtime block (the error for an export given to predict points there,
    which showed no code): run as written on an export, it gives bertkit's logits and label names."""
    import re
    from pathlib import Path

    config = BertConfig.preset("tiny", num_labels=3)  # MiniLM's vocabulary size: its tokenizer fits
    model = target("classification").model_class(config).eval()
    tok = Tokenizer.from_pretrained(minilm_dir)
    model.save_pretrained(tmp_path / "clf", tokenizer=tok)
    assert main(["export", "--model", str(tmp_path / "clf"), "--out", str(tmp_path / "onnx")]) == 0
    doc = (Path(__file__).parent.parent / "docs" / "inference.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "ort.InferenceSession" in b)
    scope = {}
    exec(block.replace('"runs/bbc-onnx"', repr(str(tmp_path / "onnx"))), scope)
    with torch.no_grad():
        expected = model(**tok(["The striker scored twice in the final.",
                                "Shares fell after the profit warning."])).logits.numpy()
    assert np.abs(scope["logits"] - expected).max() < 1e-4
    assert scope["labels"] == [config.id2label[int(i)] for i in expected.argmax(-1)]
    # a text past the model's positions: the block's tokenizer call cuts it (uncut, ONNX Runtime
    # failed in the position-embedding Gather on a newcomer's BBC batch, walk S)
    long = scope["tok"](["word " * 700])
    got = scope["session"].run(["logits"], {i.name: long[i.name].numpy() for i in scope["session"].get_inputs()})[0]
    with torch.no_grad():
        assert np.abs(got - model(**long).logits.numpy()).max() < 1e-4
