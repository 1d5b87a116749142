"""Checkpoints of another architecture, saved by transformers itself, are named for what they are
before any work: a user who points bertkit at a GPT-2 directory is told bertkit does not run that
architecture, not to edit a field of its config.json (walk R #1: predict, embed, export and finetune
said "pad_token_id must be an integer, got None; fix it in config.json")."""

import json
import warnings

import pytest
import torch

import bertkit
from bertkit.commands.cli import main
from bertkit.errors import ConfigError
from tests.cli_checks import assert_refused

transformers = pytest.importorskip("transformers")

NAMES = {0: "business", 1: "sport", 2: "tech"}


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, minilm_dir):
    out = tmp_path_factory.mktemp("gpt2")
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=64, vocab_size=200)
    transformers.GPT2LMHeadModel(config).save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(minilm_dir).save_pretrained(out)  # a tokenizer bertkit reads
    assert transformers.AutoConfig.from_pretrained(out).pad_token_id is None  # what tripped the field check
    return out


def test_python_loaders_name_the_architecture(gpt2_dir):
    for load in (bertkit.BertModel.from_pretrained, bertkit.BertForSequenceClassification.from_pretrained,
                 bertkit.SentenceEncoder.from_pretrained):
        with pytest.raises(ConfigError, match="model_type 'gpt2' is not supported") as error:
            load(str(gpt2_dir))
        assert "pad_token_id" not in str(error.value)
        assert "BERT-family encoders" in str(error.value)


@pytest.mark.parametrize("command", ["predict", "embed", "export"])
def test_commands_name_the_architecture_and_write_nothing(command, gpt2_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a text\n")
    out = {"predict": ["--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "p.jsonl")],
           "embed": ["--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "v.npy")],
           "export": ["--out", str(tmp_path / "onnx")]}[command]
    assert_refused([command, "--model", str(gpt2_dir), *out], capsys, tmp_path,
                   "model_type 'gpt2' is not supported")



def test_a_classifier_transformers_saved_is_read_at_its_tokenizers_length(minilm2_dir, tmp_path):
    """A classifier directory bertkit did not fine-tune (no finetune_summary.json) is read at its
    tokenizer's model_max_length, as `pipeline(..., truncation=True)` reads it: predict cut such a
    model's texts at DataConfig's 128 tokens (walk R #6), so its probabilities were not the pipeline's."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the head is new
        hf = transformers.AutoModelForSequenceClassification.from_pretrained(minilm2_dir, id2label=NAMES)
    hf.save_pretrained(tmp_path / "clf")
    transformers.AutoTokenizer.from_pretrained(minilm2_dir).save_pretrained(tmp_path / "clf")
    texts = [" ".join(f"word{i} shares markets" for i in range(k)) for k in (3, 60, 150)]  # 150: past 128 tokens
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", str(tmp_path / "clf"), "--input", str(tmp_path / "in.txt"),
                     "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
        theirs = transformers.pipeline("text-classification", model=str(tmp_path / "clf"), top_k=None,
                                       device="cpu")(texts, truncation=True)
    ours = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(ours) == len(texts)
    assert len(transformers.AutoTokenizer.from_pretrained(tmp_path / "clf")(texts[2])["input_ids"]) > 128
    for row, scores in zip(ours, theirs):
        assert max(abs(row["probabilities"][s["label"]] - s["score"]) for s in scores) < 1e-5
        assert row["label"] == scores[0]["label"]
