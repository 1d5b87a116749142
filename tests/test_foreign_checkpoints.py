"""Checkpoints of another architecture, saved by transformers itself, are named for what they are
before any work: a user who points bertkit at a GPT-2 directory is told bertkit does not run that
architecture, not to edit a field of its config.json (walk R #1: predict, embed, export and finetune
said "pad_token_id must be an integer, got None; fix it in config.json")."""

import pytest

import bertkit
from bertkit.errors import ConfigError
from tests.cli_checks import assert_refused

transformers = pytest.importorskip("transformers")


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
