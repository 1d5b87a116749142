"""The shared Trainer trains a PeftModel, writes adapter-only checkpoints and resumes from them."""

import os
import shutil

import torch

import bertkit
from bertkit.peft import LoraConfig, get_peft_model, is_adapter_dir
from bertkit.train import Trainer, TrainConfig

from .conftest import padded_batch, tiny_config


def build():
    torch.manual_seed(0)
    model = bertkit.BertForSequenceClassification(tiny_config(hidden_dropout_prob=0.1))
    return get_peft_model(model, LoraConfig(r=2, dropout=0.1))


def batches():
    torch.manual_seed(1)
    out = []
    for _ in range(3):
        ids, mask = padded_batch()
        out.append({"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (3,))})
    return out


CONFIG = TrainConfig(max_steps=5, lr=1e-2, save_every=2, keep_last=5, log_every=1, device="cpu", seed=3)


def test_resume_of_a_lora_run_matches_an_uninterrupted_one(tmp_path):
    straight = build()
    Trainer(straight, batches(), CONFIG, tmp_path / "run", progress=False).train()
    checkpoint = tmp_path / "run" / "checkpoint-2"
    assert is_adapter_dir(checkpoint) and not os.path.exists(checkpoint / "model.safetensors")
    for later in ("checkpoint-4", "checkpoint-5"):  # as if the run had been killed after step 2
        shutil.rmtree(tmp_path / "run" / later)

    resumed = build()
    Trainer(resumed, batches(), CONFIG, tmp_path / "run", progress=False).train(resume=True)
    expected = straight.adapter_state()
    got = resumed.adapter_state()
    assert set(got) == set(expected)
    for key in expected:
        assert torch.allclose(got[key], expected[key], atol=1e-6), key
    assert not torch.allclose(got["classifier.weight"], build().adapter_state()["classifier.weight"])
