"""seq2seq with `--peft lora` and `model.freeze_encoder` through the CLI: finetune, evaluate, predict,
`peft merge` (the merged encoder-decoder generates what the adapter did), and the refusals before any
work. LoRA's maths and PEFT's format on an encoder-decoder: tests/peft/test_seq2seq_lora.py."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.models.checkpoint import read_state_dict
from bertkit.models.encoder_decoder import EncoderDecoderModel

from .helpers import make_tiny_model
from .test_seq2seq import colour_pairs, write_jsonl

SETTINGS = ["train.max_steps=3", "train.batch_size=4", "data.max_length=16", "data.max_target_length=4"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    texts = [row["source"] + " " + row["target"] for row in colour_pairs(6)]
    return make_tiny_model(tmp_path_factory.mktemp("tiny-s2s-peft"), texts * 3)


@pytest.fixture
def data(tmp_path):
    return write_jsonl(tmp_path / "train.jsonl", colour_pairs(12)), write_jsonl(tmp_path / "dev.jsonl", colour_pairs(6))


def _finetune(tiny, data, out, flags=(), settings=()) -> int:
    train, dev = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(["finetune", "--task", "seq2seq", "--model", tiny, "--train", train, "--dev", dev, "--out", out,
                     "--no-progress", "--seed", "0", *flags, "--set", *SETTINGS, *settings])


def _predict(model_dir, inputs, output) -> list[str]:
    assert main(["predict", "--model", model_dir, "--input", str(inputs), "--output", str(output)]) == 0
    return [json.loads(line)["generated"] for line in output.read_text().splitlines()]


def test_lora_finetune_evaluate_predict_and_merge(tiny, data, tmp_path, capsys):
    out = str(tmp_path / "lora")
    assert _finetune(tiny, data, out, ["--peft", "lora"]) == 0
    assert os.path.isfile(f"{out}/adapter_model.safetensors") and not os.path.exists(f"{out}/model.safetensors")
    written = json.load(open(f"{out}/adapter_config.json"))
    assert written["task_type"] == "SEQ_2_SEQ_LM" and written["target_modules"] == ["query", "value"]
    assert written["modules_to_save"] == ["decoder.bert.encoder.layer.0.crossattention",
                                          "decoder.cls.predictions.transform"]
    summary = json.load(open(f"{out}/finetune_summary.json"))
    # LoRA r=8 on 1 encoder + 1 decoder layer's query and value (8 x (32 + 32) each), cross-attention and LM
    # transform in full: far below the whole model
    lora, cross, transform = 4 * 8 * 64, 4 * (32 * 32 + 32) + 2 * 32, 32 * 32 + 32 + 2 * 32
    assert summary["peft"]["trainable_parameters"] == lora + cross + transform
    assert summary["peft"]["trainable_share"] < 0.2
    assert main(["evaluate", "--model", out, "--data", data[1]]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rouge_l"] >= 0
    inputs = tmp_path / "in.txt"
    inputs.write_text("the car is red and fast\nthe car is blue and fast\n", encoding="utf-8")
    generated = _predict(out, inputs, tmp_path / "p.jsonl")
    assert main(["peft", "merge", "--model", out, "--out", str(tmp_path / "merged")]) == 0
    assert "EncoderDecoderModel" in capsys.readouterr().out
    assert EncoderDecoderModel.from_pretrained(str(tmp_path / "merged")) is not None  # a plain checkpoint
    assert _predict(str(tmp_path / "merged"), inputs, tmp_path / "m.jsonl") == generated


def test_adapters_and_prefixes_are_refused_before_any_work(tiny, data, tmp_path, capsys):
    for method in ("adapter", "prefix"):
        out = tmp_path / method
        assert _finetune(tiny, data, str(out), ["--peft", method]) == 2
        err = capsys.readouterr().err
        assert f"--peft {method} is not available for --task seq2seq (an encoder-decoder); use --peft lora" in err
        assert not out.exists()


def test_freeze_encoder_trains_the_decoder_alone(tiny, data, tmp_path):
    out = str(tmp_path / "frozen")
    assert _finetune(tiny, data, out, settings=["model.freeze_encoder=true"]) == 0
    base, saved = read_state_dict(tiny), read_state_dict(out)
    encoder = [k for k in saved if k.startswith("encoder.")]
    assert encoder and all(torch.equal(saved[k], base[k.removeprefix("encoder.")]) for k in encoder)
    decoder = "decoder.bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(saved[decoder], base["encoder.layer.0.attention.self.query.weight"])


def test_an_adapter_peft_saved_is_evaluated_and_predicted_by_the_commands(tiny, data, tmp_path, capsys):
    """PEFT's own SEQ_2_SEQ_LM adapter of transformers' EncoderDecoderModel, loaded from a saved encoder-decoder
    (bertkit's fine-tune, so the base directory is recorded and holds the tokenizer): `bertkit evaluate` and
    `predict` read it (task, base, tokenizer from the base) and generate what PEFT's model does."""
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    base = str(tmp_path / "s2s")
    assert _finetune(tiny, data, base) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.EncoderDecoderModel.from_pretrained(base)
    config = peft.LoraConfig(task_type="SEQ_2_SEQ_LM", r=4, lora_alpha=8, target_modules=["query", "value"])
    wrapped = peft.get_peft_model(model, config)
    with torch.no_grad():  # a trained-looking adapter, not the identity
        generator = torch.Generator().manual_seed(0)
        for name, p in wrapped.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    wrapped.save_pretrained(str(tmp_path / "peft-lora"))
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "peft-lora"), "--data", data[1]]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rouge_l"] >= 0
    inputs = tmp_path / "in.txt"
    inputs.write_text("the car is red and fast\nthe car is blue and fast\n", encoding="utf-8")
    generated = _predict(str(tmp_path / "peft-lora"), inputs, tmp_path / "p.jsonl")
    assert main(["peft", "merge", "--model", str(tmp_path / "peft-lora"), "--out", str(tmp_path / "merged")]) == 0
    assert _predict(str(tmp_path / "merged"), inputs, tmp_path / "m.jsonl") == generated
    ids = transformers.AutoTokenizer.from_pretrained(base)(["the car is red and fast"], return_tensors="pt")
    merged = wrapped.merge_and_unload().eval()
    with torch.no_grad():
        theirs = merged.generate(**ids, max_new_tokens=32, num_beams=1, do_sample=False,  # predict's defaults
                                 decoder_start_token_id=model.config.decoder_start_token_id,
                                 eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id)
    text = transformers.AutoTokenizer.from_pretrained(base).decode(theirs[0], skip_special_tokens=True)
    assert text == generated[0]  # PEFT's merged model generates what bertkit's predict wrote
