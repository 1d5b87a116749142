"""The time-to-quality benchmark's yardstick scores both libraries alike: the same weights give
the same held-out metrics through bertkit's BertForMaskedLM and, via the benchmark's adapter,
through transformers' BertForMaskedLM. (The whole benchmark is smoke-run by hand: its shortest
run takes minutes; docs/benchmarks.md.)"""

import json
import os
import sys

import numpy as np
import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.data.collate import MLMCollator
from bertkit.data.masking import VocabInfo
from bertkit.models.heads import BertForMaskedLM

transformers = pytest.importorskip("transformers")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import bench_time_to_quality as bench  # noqa: E402  (a script directory, not a package)

sys.path.pop(0)


def test_the_yardstick_gives_both_libraries_the_same_metrics(tmp_path):
    config = BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    ours = BertForMaskedLM(config).eval()
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertForMaskedLM.from_pretrained(tmp_path).eval()
    vocab = VocabInfo(vocab_size=120, pad_id=0, mask_id=4, special_ids=(0, 1, 2, 3, 4),
                      is_continuation=np.zeros(120, dtype=bool))
    collate = MLMCollator(vocab, mlm_probability=0.15, seed=3)
    generator = torch.Generator().manual_seed(0)
    examples = [{"input_ids": [2, *torch.randint(5, 120, (n,), generator=generator).tolist(), 3]}
                for n in (30, 12, 25, 40)]
    batches = [collate(examples[:2]), collate(examples[2:])]
    mine, reference = bench.heldout(ours, batches), bench.heldout(bench.LabelledLogits(theirs), batches)
    assert set(mine) == {"mlm_loss", "mlm_accuracy", "mlm_replaced_accuracy"}
    for key in mine:
        assert mine[key] == pytest.approx(reference[key], abs=1e-5), key


def test_the_transformers_arm_trains_on_the_device_it_is_given(tmp_path):
    """run_mlm.py's loop on --device (here the CPU; the same code moves model and batches to a
    GPU and times each step to its end): its clock stops at the budget, its curve starts at step
    0, and it records the precision it trained in."""
    from types import SimpleNamespace

    from bertkit.data.assets import minilm_dir
    from bertkit.recipes.pretrain import load_config
    from bertkit.tokenizer import Tokenizer

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cfg = load_config(os.path.join(root, "configs", "pretrain-tiny.toml"), [])
    tokenizer = Tokenizer.from_pretrained(minilm_dir())
    generator = torch.Generator().manual_seed(0)
    examples = [{"input_ids": [101, *torch.randint(1000, 5000, (30,), generator=generator).tolist(), 102]}
                for _ in range(24)]
    batches = [MLMCollator(tokenizer, mlm_probability=0.15, seed=0)(examples[:4])]
    args = SimpleNamespace(minutes=0.02, eval_every=0.5, device="cpu", hf_precision="bf16", work=str(tmp_path))
    points, info = bench.transformers_arm(args, cfg, tokenizer, minilm_dir(), examples, batches)
    assert points[0]["step"] == 0 and points[-1]["step"] == info["steps"] >= 1
    assert points[-1]["train_seconds"] >= 60 * args.minutes or info["stopped_by"] == "epochs"
    assert info["recipe"]["precision"] == "fp32"  # bf16 autocast is a GPU setting: the CPU runs fp32
    assert next(transformers.BertForMaskedLM.from_pretrained(info["checkpoint"]).parameters()).device.type == "cpu"


def test_a_machine_without_matplotlib_keeps_the_results(tmp_path, monkeypatch, capsys):
    """A bare GPU image may lack matplotlib: the JSON is written and the run ends without a
    traceback (it raised after minutes of GPU time), saying why there is no PNG."""
    monkeypatch.setattr(bench, "can_plot", lambda: False)
    point = {"train_seconds": 30.0, "mlm_loss": 6.0, "mlm_accuracy": 0.1, "mlm_replaced_accuracy": 0.05}
    bench.write_results({"arms": {}}, str(tmp_path / "ttq"), {"bertkit": [point]}, 1.0, "cpu")
    assert json.loads((tmp_path / "ttq.json").read_text()) == {"arms": {}}
    assert not (tmp_path / "ttq.png").exists()
    assert "no " + str(tmp_path / "ttq.png") + ": matplotlib is not installed" in capsys.readouterr().out
