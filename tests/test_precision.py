"""Precision "auto" (bertkit/runtime/precision.py): fp32 on the CPU, bf16 on a bf16 GPU, fp16 on an
older one (the GPU cases with torch.cuda's answers monkeypatched: the logic, not a kernel), explicit
values as given; the trainer and the commands that run a model use it by default."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from bertkit.commands.cli import main
from bertkit.errors import ConfigError
from bertkit.models.config import BertConfig
from bertkit.models.heads import BertForMaskedLM
from bertkit.runtime import precision
from bertkit.runtime.precision import autocast, describe, resolve_precision
from bertkit.tokenizer import Tokenizer
from bertkit.runtime.resume_check import changed_options
from bertkit.train.config import TrainConfig


def test_auto_is_fp32_on_the_cpu():
    assert resolve_precision("auto", "cpu") == "fp32"
    assert describe("auto", "cpu") == "fp32 (auto on cpu)"
    assert TrainConfig().precision == "auto"


@pytest.mark.parametrize("bf16, scaler_ok, expected", [(True, True, "bf16"), (False, True, "fp16"),
                                                        (False, False, "fp32"), (True, False, "bf16")])
def test_auto_on_a_gpu_follows_its_bf16_support(monkeypatch, bf16, scaler_ok, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
    assert resolve_precision("auto", torch.device("cuda:0"), scaler_ok=scaler_ok) == expected


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_explicit_values_pass_through(name):
    assert resolve_precision(name, "cpu") == name


def test_impossible_or_unknown_precisions_are_one_line_errors(monkeypatch):
    with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU"):
        resolve_precision("fp16", "cpu")
    with pytest.raises(ConfigError, match="not known"):
        resolve_precision("fp8", "cpu")
    with pytest.raises(ConfigError, match="train.precision 'fp8' is not known"):
        TrainConfig(precision="fp8")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(ConfigError, match="no bf16 support"):
        resolve_precision("bf16", torch.device("cuda"))


def test_autocast_runs_matmuls_in_the_resolved_format():
    a = torch.randn(4, 4)
    with autocast("auto", "cpu"):
        assert (a @ a).dtype == torch.float32
    with autocast("bf16", "cpu"):
        assert (a @ a).dtype == torch.bfloat16


def test_a_run_started_before_auto_resumes_at_the_default():
    saved = {"train": {"precision": "fp32", "lr": 1e-3}}
    assert changed_options(saved, {"train": {"precision": "auto", "lr": 1e-3}}) == []
    explicit = changed_options(saved, {"train": {"precision": "bf16", "lr": 1e-3}})
    assert explicit == ['train.precision: "fp32" -> "bf16"']


def test_trainer_logs_the_precision_it_runs(tmp_path):
    from bertkit.train.trainer import Trainer

    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32, max_position_embeddings=16))
    ids = torch.randint(5, 50, (4, 8))
    batch = {"input_ids": ids, "labels": ids.masked_fill(torch.rand(4, 8) < 0.5, -100)}
    trainer = Trainer(model, [batch] * 2, TrainConfig(max_steps=2, log_every=1, save_every=-1, device="cpu"),
                      out_dir=str(tmp_path), progress=False)
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert trainer.precision == "fp32" and trainer.scaler.is_enabled() is False
    assert {r["precision"] for r in rows if r["split"] == "train"} == {"fp32"}


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory, minilm_dir):
    """A random 1-layer MLM checkpoint with MiniLM's tokenizer: what fill-mask, embed and attention read."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    out = tmp_path_factory.mktemp("tiny_mlm")
    BertForMaskedLM(config).save_pretrained(out, tokenizer=Tokenizer.from_pretrained(minilm_dir))
    return str(out)


def run(argv, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_commands_run_in_bf16_when_asked_and_fp32_by_default_on_the_cpu(tiny_mlm, tmp_path, capsys):
    code, out, err = run(["fill-mask", "--model", tiny_mlm, "the [MASK] sat", "--precision", "bf16"], capsys)
    assert code == 0 and "mask 1:" in out and "running on cpu in bf16" in err
    code, _, err = run(["fill-mask", "--model", tiny_mlm, "the [MASK] sat"], capsys)
    assert code == 0 and err == ""  # auto on the CPU: fp32, nothing extra said
    (tmp_path / "in.txt").write_text("a cat sat on the mat\nthe bank cut rates today\n", encoding="utf-8")
    vectors = {}
    for name in ("auto", "bf16"):
        target = tmp_path / f"{name}.npy"
        code, _, err = run(["embed", "--model", tiny_mlm, "--input", tmp_path / "in.txt", "--output", target,
                            "--precision", name], capsys)
        assert code == 0, err
        vectors[name] = np.load(target)
    assert vectors["bf16"].dtype == np.float32
    assert (vectors["auto"] * vectors["bf16"]).sum(1).min() > 0.99  # unit vectors: cosine
    code, _, err = run(["attention", "the cat sat", "--model", tiny_mlm, "--precision", "bf16",
                        "--stats", tmp_path / "stats.jsonl"], capsys)
    assert code == 0, err
    assert (tmp_path / "stats.jsonl").read_text().strip()


def test_int8_with_a_lower_precision_is_refused(tiny_mlm, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a cat\n", encoding="utf-8")
    code, _, err = run(["embed", "--model", tiny_mlm, "--input", tmp_path / "in.txt", "--output",
                        tmp_path / "o.npy", "--int8", "--precision", "bf16"], capsys)
    assert code == 2 and "--int8 runs fp32" in err and not (tmp_path / "o.npy").exists()


def test_fp16_on_the_cpu_is_refused_before_the_model_runs(tiny_mlm, capsys):
    code, out, err = run(["fill-mask", "--model", tiny_mlm, "the [MASK] sat", "--precision", "fp16"], capsys)
    assert code == 2 and "fp16 needs a CUDA GPU" in err and out == ""


def test_sentence_encoder_takes_a_precision(tiny_mlm):
    from bertkit.inference.encode import SentenceEncoder

    with pytest.raises(ConfigError, match="not known"):
        SentenceEncoder.from_pretrained(tiny_mlm, precision="half")
    assert SentenceEncoder.from_pretrained(tiny_mlm).precision == "auto"
    assert precision.PRECISIONS[0] == "auto"
