"""`bertkit finetune --peft`, then evaluate/predict on the adapter directory it writes."""

import json
import os

import pytest

from bertkit.commands.cli import main
from bertkit.errors import ConfigError
from bertkit.peft import PeftModel, is_adapter_dir

SETTINGS = ["train.max_steps=2", "data.max_length=32", "data.max_train_examples=32",
            "data.max_eval_examples=16", "train.batch_size=16"]


@pytest.mark.filterwarnings("ignore:.*were cut to data.max_length")
def test_finetune_with_lora_writes_an_adapter_that_evaluate_and_predict_load(minilm_dir, tmp_path, capsys):
    out = tmp_path / "lora"
    code = main(["finetune", "--task", "classification", "--model", minilm_dir, "--train", "bbc",
                 "--out", str(out), "--peft", "lora", "--no-progress",
                 "--set", *SETTINGS, "peft.r=4", 'peft.target_modules=["query","key","value"]'])
    assert code == 0, capsys.readouterr().err
    assert is_adapter_dir(out)
    assert not os.path.exists(out / "model.safetensors")
    assert os.path.getsize(out / "adapter_model.safetensors") < 300_000
    summary = json.loads((out / "finetune_summary.json").read_text())
    peft = summary["peft"]
    assert peft["method"] == "lora" and peft["r"] == 4
    assert peft["trainable_parameters"] == 6 * 3 * 4 * (384 + 384) + 5 * 384 + 5
    assert peft["trainable_share"] < 0.01
    assert summary["train_config"]["lr"] == 2e-3  # the PEFT default, not full fine-tuning's 5e-5
    capsys.readouterr()

    model = PeftModel.from_pretrained(out)
    assert model.config.id2label[0] == "business"

    data = tmp_path / "dev.csv"
    data.write_text("text,label\nShares fell as the bank warned on profits.,business\n"
                    "The striker scored twice in the final.,sports\nThe film won three awards.,entertainment\n")
    assert main(["evaluate", "--model", str(out), "--data", str(data)]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 <= metrics["accuracy"] <= 1

    texts = tmp_path / "texts.txt"
    texts.write_text("Shares fell sharply as the bank warned on profits.\nThe striker scored twice.\n")
    assert main(["predict", "--model", str(out), "--input", str(texts), "--output", str(tmp_path / "p.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["label"] in summary["labels"] for r in rows)


def test_finetune_peft_settings_are_checked_before_training(minilm_dir, tmp_path):
    from bertkit.recipes.finetune import build_recipe

    with pytest.raises(ConfigError, match=r"lora has no setting\(s\) \['kind'\]"):
        build_recipe({"peft": {"method": "lora", "kind": "pfeiffer"}})
    with pytest.raises(ConfigError, match="no method: pass --peft"):
        build_recipe({"peft": {"r": 4}})
    with pytest.raises(ConfigError, match="rank r must be a positive integer"):
        build_recipe({"peft": {"method": "lora", "r": 0}})
    recipe = build_recipe({"peft": {"method": "prefix"}, "train": {"lr": 1e-3}})
    assert recipe.train.lr == 1e-3 and recipe.peft == {"method": "prefix"}
    assert build_recipe({}).peft == {}
