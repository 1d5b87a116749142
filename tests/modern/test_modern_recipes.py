"""The modern encoder through bertkit's recipes: pre-training from a TOML config
(model_type = "modernbert"), fine-tuning a classifier from that checkpoint through the CLI, and
the results loading in transformers with the same outputs."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

from bertkit.commands.cli import main

CONFIG = """
[model]
preset = "tiny"
model_type = "modernbert"
global_attn_every_n_layers = 2
local_attention = 16

[tokenizer]
vocab_size = 600
min_frequency = 1

[data]
corpus = "{corpus}"
objective = "mlm"
max_length = 32
mlm_probability = 0.3
eval_fraction = 0.2
max_eval_examples = 16

[train]
max_steps = 6
batch_size = 8
lr = 1e-3
eval_every = 6
save_every = 6
log_every = 2
"""

TEXTS = [f"the match ended {i} nil after a late goal by the striker." for i in range(30)] + \
        [f"shares in the bank fell {i} percent on monday after the warning." for i in range(30)]


def labelled_csv(tmp_path, pairs: int):
    """A tiny two-topic training file: `pairs` sport and `pairs` business lines."""
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"the match ended {i} nil,sport\nshares fell {i} percent,business\n"
                                              for i in range(pairs)), encoding="utf-8")
    return train


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    root = tmp_path_factory.mktemp("modern-pretrain")
    corpus = root / "corpus"
    corpus.mkdir()
    for i, text in enumerate(TEXTS):
        (corpus / f"{i}.txt").write_text(text + " " + text, encoding="utf-8")
    config = root / "modern.toml"
    config.write_text(CONFIG.format(corpus=corpus), encoding="utf-8")
    out = root / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["pretrain", "--config", str(config), "--out", str(out), "--no-progress", "--seed", "0"]) == 0
    return str(out / "checkpoint-6")


def test_pretraining_writes_a_modernbert_checkpoint_transformers_runs_alike(pretrained):
    import transformers

    from bertkit.inference.fill_mask import fill_mask

    with open(os.path.join(pretrained, "config.json")) as f:
        assert json.load(f)["model_type"] == "modernbert"
    text = "the match ended [MASK] nil after a late goal."
    ours = fill_mask(pretrained, text, top_k=5)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = transformers.pipeline("fill-mask", model=pretrained, tokenizer=pretrained, top_k=5)
        theirs = pipe(text)
    assert [t for t, _ in ours] == [r["token_str"].replace(" ", "") for r in theirs]
    for (_, p), r in zip(ours, theirs):
        assert p == pytest.approx(r["score"], abs=1e-5)


def test_a_classifier_fine_tuned_from_it_loads_in_transformers(pretrained, tmp_path, capsys):
    import transformers

    train = labelled_csv(tmp_path, 8)
    out = str(tmp_path / "clf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", pretrained, "--train", str(train),
                     "--dev", str(train), "--out", out, "--no-progress", "--set", "train.max_steps=3",
                     "data.max_length=32"]) == 0
        capsys.readouterr()
        assert main(["evaluate", "--model", out, "--data", str(train)]) == 0
        assert "accuracy" in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        from bertkit.models.heads import BertForSequenceClassification
        ours = BertForSequenceClassification.from_pretrained(out).eval()  # dispatches to the modern class
        theirs = transformers.AutoModelForSequenceClassification.from_pretrained(
            out, attn_implementation="eager").eval()
    assert type(ours).__name__ == "ModernBertForSequenceClassification"
    assert theirs.config.id2label == {0: "business", 1: "sport"}
    ids = torch.tensor([[2, 40, 41, 42, 43, 3, 0, 0], [2, 50, 51, 52, 53, 54, 55, 3]])
    mask = (ids != 0).long()
    with torch.no_grad():
        torch.testing.assert_close(ours(ids, attention_mask=mask).logits, theirs(ids, attention_mask=mask).logits,
                                   rtol=0, atol=1e-5)


def _finetune_args(pretrained, train, out, *settings):
    return ["finetune", "--task", "classification", "--model", pretrained, "--train", str(train), "--dev", str(train),
            "--out", out, "--no-progress", "--set", "train.max_steps=2", "data.max_length=32", *settings]


def test_fine_tuning_dropout_uses_the_modern_names_and_refuses_berts(pretrained, tmp_path, capsys):
    train = labelled_csv(tmp_path, 4)
    out = str(tmp_path / "clf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(_finetune_args(pretrained, train, out, "model.hidden_dropout_prob=0.1")) == 2
        err = capsys.readouterr().err
        assert "model.hidden_dropout_prob is not a setting of this modernbert checkpoint" in err
        assert "mlp_dropout" in err and not os.path.exists(os.path.join(out, "config.json"))
        assert main(_finetune_args(pretrained, train, out, "model.mlp_dropout=0.1", "model.attention_dropout=0.05")) == 0
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    assert (config["mlp_dropout"], config["attention_dropout"]) == (0.1, 0.05)


def test_bert_and_encoder_decoder_checkpoints_refuse_the_modern_dropout_names():
    from bertkit.models.config import BertConfig
    from bertkit.errors import ConfigError
    from bertkit.recipes.finetune import check_model_overrides

    check_model_overrides(BertConfig(), {"hidden_dropout_prob": 0.2, "decoder_layers": 2})
    with pytest.raises(ConfigError, match=r"model.mlp_dropout is not a setting of this bert checkpoint; .*hidden_dropout_prob"):
        check_model_overrides(BertConfig(), {"mlp_dropout": 0.2})
    from bertkit.models.encoder_decoder import EncoderDecoderConfig

    pair = EncoderDecoderConfig(encoder=BertConfig(), decoder=BertConfig(is_decoder=True, add_cross_attention=True))
    check_model_overrides(pair, {"hidden_dropout_prob": 0.2, "decoder_layers": 2})  # seq2seq: both halves
    with pytest.raises(ConfigError, match=r"model.mlp_dropout is not a setting of this encoder-decoder checkpoint"):
        check_model_overrides(pair, {"mlp_dropout": 0.2})


CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "configs")


def test_every_finetune_config_parses():
    from bertkit.recipes.finetune import build_recipe
    from bertkit.settings.config_io import load_toml

    names = sorted(n for n in os.listdir(CONFIG_DIR) if n.startswith("finetune-") and n.endswith(".toml"))
    assert "finetune-bbc-scratch.toml" in names
    for name in names:
        build_recipe(load_toml(os.path.join(CONFIG_DIR, name)))


def test_the_from_scratch_finetune_config_sets_the_modern_dropouts(pretrained, tmp_path):
    train = labelled_csv(tmp_path, 4)
    out = str(tmp_path / "clf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", pretrained, "--train", str(train),
                     "--dev", str(train), "--out", out, "--no-progress", "--config",
                     os.path.join(CONFIG_DIR, "finetune-bbc-scratch.toml"),
                     "--set", "train.max_steps=2", "data.max_length=32"]) == 0
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    assert (config["embedding_dropout"], config["mlp_dropout"], config["attention_dropout"]) == (0.1, 0.1, 0.1)


def test_a_modern_classifier_distils_and_probes_with_a_random_twin(pretrained, tmp_path, capsys):
    """distill (a teacher with no ALBERT sharing field, layers under model.layers.N) and probe
    --random-init (the random encoder of the model's own family) on the modern encoder."""
    from bertkit.models.heads import BertForSequenceClassification

    train = labelled_csv(tmp_path, 8)
    teacher, student = str(tmp_path / "teacher"), str(tmp_path / "student")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(_finetune_args(pretrained, train, teacher)) == 0
        assert main(["distill", "--teacher", teacher, "--train", str(train), "--dev", str(train), "--out", student,
                     "--no-progress", "--set", "train.max_steps=1", "train.lr=1e-9"]) == 0
    big, small = (BertForSequenceClassification.from_pretrained(d) for d in (teacher, student))
    assert type(small).__name__ == "ModernBertForSequenceClassification"
    assert small.config.num_hidden_layers == big.config.num_hidden_layers // 2
    # student layer 0 is teacher layer 0 (a step at lr 1e-9 moves nothing measurable)
    torch.testing.assert_close(small.model.layers[0].attn.Wqkv.weight, big.model.layers[0].attn.Wqkv.weight,
                               rtol=0, atol=1e-6)
    capsys.readouterr()
    probe = tmp_path / "probe.csv"
    probe.write_text("text,label\n" + "".join(f"the match ended {i} nil,sport\nshares fell {i} percent,business\n"
                                              for i in range(10)), encoding="utf-8")
    assert main(["probe", "--model", pretrained, "--data", str(probe), "--random-init", "--out",
                 str(tmp_path / "p")]) == 0
    assert "random-init" in capsys.readouterr().out


def test_pre_training_distillation_of_a_modern_teacher_is_refused_with_the_task_stage_named(pretrained, tmp_path,
                                                                                         capsys):
    assert main(["distill", "--stage", "pretrain", "--teacher", pretrained, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "is a modernbert model; pre-training distillation takes BERT-family teachers" in err
    assert "at the task stage" in err and not (tmp_path / "s").exists()
