"""`bertkit peft merge|info`: a merged LoRA checkpoint predicts as the adapter in bertkit and transformers."""

import json
import os

import pytest
import torch

import bertkit
from bertkit.commands.cli import main
from bertkit.peft import AdapterConfig, LoraConfig, PeftLinear, get_peft_model
from bertkit.tasks import read_spec
from bertkit.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers")


def test_merge_writes_a_checkpoint_transformers_loads_with_the_same_predictions(
        minilm_classifier, minilm_batch, minilm_dir, tmp_path, capsys):
    peft = get_peft_model(minilm_classifier, LoraConfig(r=8, target_modules=["query", "key", "value", "dense"]),
                          base_model_path=minilm_dir).eval()
    with torch.no_grad():
        for module in peft.modules():
            if isinstance(module, PeftLinear) and "default" in module.lora:
                module.lora["default"].B.normal_(std=0.05)
        peft.model.classifier.copies["default"].weight.normal_(std=0.5)
        expected = peft(**minilm_batch).logits
    adapter, out = tmp_path / "adapter", tmp_path / "merged"
    peft.save_pretrained(adapter, tokenizer=Tokenizer.from_pretrained(minilm_dir))

    spec = {"task": "classification", "data": {"max_length": 64}}  # what finetune --peft records beside it
    (adapter / "finetune_summary.json").write_text(json.dumps({"spec": spec}), encoding="utf-8")
    assert main(["peft", "merge", "--model", str(adapter), "--out", str(out)]) == 0
    # the merged model is read with the fine-tune's data settings, as the adapter was (it had been
    # evaluated at the default max_length: other scores, silently)
    assert read_spec(str(out)).data.max_length == 64
    said = capsys.readouterr().out
    assert "merged lora adapter" in said and f"into {os.path.abspath(out)}:" in said
    assert f"into {minilm_dir}" not in said  # the base directory is read, not changed
    assert {"config.json", "model.safetensors", "tokenizer.json", "vocab.txt"} <= set(os.listdir(out))

    ours = bertkit.BertForSequenceClassification.from_pretrained(out)
    theirs = transformers.BertForSequenceClassification.from_pretrained(out).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(out)
    texts = ["Shares in the company fell sharply after the announcement.", "The striker scored twice.",
             "The new movie is awesome, said the critic who had seen it twice on Sunday."]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], minilm_batch["input_ids"])
    with torch.no_grad():
        a = ours(**minilm_batch).logits
        b = theirs(**batch).logits
    assert (a - expected).abs().max() < 1e-4
    assert (b - expected).abs().max() < 1e-4
    # the adapter's winning label is (within the tolerance above) the merged model's best
    # too: a bare argmax comparison could flip on a near tie between two code paths
    picked = a.gather(-1, expected.argmax(-1, keepdim=True)).squeeze(-1)
    assert (a.max(-1).values - picked).max() < 2e-4

    assert main(["peft", "info", "--model", str(adapter)]) == 0
    text = capsys.readouterr().out
    assert "changes 37 modules: " in text and "target_modules" not in text, text  # the modules: listed once
    assert text.count("classifier") == 1, text
    assert main(["peft", "info", str(adapter), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["method"] == "lora" and info["base_model"] == os.path.abspath(minilm_dir)
    # per layer: query, key, value, attention.output.dense (384 -> 384), intermediate.dense and
    # output.dense (384 <-> 1536); plus pooler.dense ("dense" matches it) and the 5-way head
    lora = 6 * (4 * 8 * (384 + 384) + 2 * 8 * (384 + 1536)) + 8 * (384 + 384)
    assert info["parameters"] == lora + 5 * 384 + 5


def test_merge_errors_are_one_line(minilm_classifier, minilm_dir, tmp_path, capsys):
    peft = get_peft_model(minilm_classifier, AdapterConfig(kind="pfeiffer"), base_model_path=minilm_dir)
    peft.save_pretrained(tmp_path / "ad")
    assert main(["peft", "merge", "--model", str(tmp_path / "ad"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("bertkit peft: error: adapter 'default' is a bottleneck adapter") and "\n" not in err
    assert not os.path.exists(tmp_path / "m")

    assert main(["peft", "merge", "--model", str(tmp_path / "ad"), "--out", str(tmp_path / "ad")]) == 2
    assert "is --model" in capsys.readouterr().err

    assert main(["peft", "merge", "--model", minilm_dir, "--out", str(tmp_path / "m")]) == 2
    assert "plain model directory" in capsys.readouterr().err

    lora = get_peft_model(bertkit.BertForSequenceClassification(minilm_classifier.config), LoraConfig())
    lora.save_pretrained(tmp_path / "lora")  # no base recorded
    assert main(["peft", "merge", "--model", str(tmp_path / "lora"), "--out", str(tmp_path / "m")]) == 2
    assert "is empty); set it to the base model directory, or pass base=DIR in Python or --base DIR to" in capsys.readouterr().err
    # a base that is not the one it was trained on (random weights vs MiniLM)
    assert main(["peft", "merge", "--model", str(tmp_path / "lora"), "--base", minilm_dir,
                 "--out", str(tmp_path / "m")]) == 2
    assert "other base weights" in capsys.readouterr().err


def test_merge_never_writes_over_the_base_and_replaces_a_model_only_with_overwrite(
        minilm_classifier, minilm_dir, tmp_path, capsys):
    base = tmp_path / "base"
    minilm_classifier.save_pretrained(base, tokenizer=Tokenizer.from_pretrained(minilm_dir))
    peft = get_peft_model(minilm_classifier, LoraConfig(r=4), base_model_path=str(base))
    peft.save_pretrained(tmp_path / "lora")
    base_bytes = (base / "model.safetensors").read_bytes()
    for out in (base, base / "sub"):  # the base, or a folder inside it: refused, even with --overwrite
        assert main(["peft", "merge", "--model", str(tmp_path / "lora"), "--out", str(out), "--overwrite"]) == 2
        assert f"--out {out} " in capsys.readouterr().err
    assert (base / "model.safetensors").read_bytes() == base_bytes and not (base / "sub").exists()

    full = tmp_path / "full"  # another model's run folder
    full.mkdir()
    (full / "model.safetensors").write_bytes(b"the full fine-tune")
    (full / "finetune_summary.json").write_text("{}")
    assert main(["peft", "merge", "--model", str(tmp_path / "lora"), "--out", str(full)]) == 2
    assert "is not empty (finetune_summary.json, model.safetensors); choose a new --out" in capsys.readouterr().err
    assert (full / "model.safetensors").read_bytes() == b"the full fine-tune"
    # --overwrite replaces it whole: the old run's summary does not stay beside the merged weights
    assert main(["peft", "merge", "--model", str(tmp_path / "lora"), "--out", str(full), "--overwrite"]) == 0
    assert "finetune_summary.json" not in os.listdir(full) and "config.json" in os.listdir(full)


def test_merge_and_unload_with_no_active_adapter_is_refused(minilm_classifier, minilm_dir):
    """set_active(None) then merge_and_unload() had returned the plain base, merging nothing."""
    peft = get_peft_model(minilm_classifier, LoraConfig(r=2), base_model_path=minilm_dir)
    peft.set_active(None)
    with pytest.raises(bertkit.ConfigError, match=r"no adapter is active .*set_active\(NAME\)"):
        peft.merge_and_unload()
    peft.set_active("default")
    assert not any(isinstance(m, PeftLinear) for m in peft.merge_and_unload().modules())
