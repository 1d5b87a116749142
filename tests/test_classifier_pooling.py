"""Classification pooling on BERT-family classifiers (config.classifier_pooling): each pooling's
math on a tiny model, checkpoints that keep it, the warning where transformers cannot represent
it, and a fine-tuning run with `--set model.classifier_pooling=mean`."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
from safetensors.torch import load_file

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMultipleChoice, BertForSequenceClassification
from bertkit.models.modern import ModernBertConfig

TOL = dict(atol=1e-6, rtol=1e-5)


def tiny_config(**changes) -> BertConfig:
    values = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=32, num_labels=3)
    return BertConfig(**{**values, **changes})


def padded_batch():
    """Two rows: 7 real tokens, and 4 real tokens + 3 padding."""
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 3], [2, 21, 22, 3, 0, 0, 0]])
    return ids, (ids != 0).long()


def manual_pool(model, ids, mask, pooling):
    """The pooled vector computed from the bare encoder's full output."""
    hidden = model.bert(ids, mask).last_hidden_state
    if pooling == "pooler":
        return torch.tanh(model.bert.pooler.dense(hidden[:, 0]))
    if pooling == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).float()
    return (hidden * m).sum(1) / m.sum(1)


@pytest.mark.parametrize("pooling", ["pooler", "cls", "mean"])
def test_each_pooling_is_its_formula(pooling):
    model = BertForSequenceClassification(tiny_config(classifier_pooling=pooling)).eval()
    ids, mask = padded_batch()
    expected = model.classifier(manual_pool(model, ids, mask, pooling))
    torch.testing.assert_close(model(ids, mask).logits, expected, **TOL)
    assert (model.bert.pooler is not None) == (pooling == "pooler")
    assert any("pooler" in k for k in model.state_dict()) == (pooling == "pooler")


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_padding_does_not_move_the_pooled_vector(pooling):
    model = BertForSequenceClassification(tiny_config(classifier_pooling=pooling)).eval()
    ids, mask = padded_batch()
    alone = model(ids[1:, :4]).logits
    torch.testing.assert_close(model(ids, mask).logits[1:], alone, **TOL)


def test_mean_differs_from_cls_and_pooler():
    """The three poolings are different functions of the same weights (no silent fallback)."""
    ids, mask = padded_batch()
    torch.manual_seed(0)
    base = BertForSequenceClassification(tiny_config()).eval()
    logits = {}
    for pooling in ("pooler", "cls", "mean"):
        model = BertForSequenceClassification(tiny_config(classifier_pooling=pooling)).eval()
        model.load_state_dict(base.state_dict(), strict=False)
        logits[pooling] = model(ids, mask).logits
    assert (logits["mean"] - logits["cls"]).abs().max() > 1e-3
    assert (logits["cls"] - logits["pooler"]).abs().max() > 1e-3


def test_multiple_choice_pools_each_choice():
    model = BertForMultipleChoice(tiny_config(classifier_pooling="mean", num_labels=2)).eval()
    ids, mask = padded_batch()
    choices, choice_mask = ids.unsqueeze(0), mask.unsqueeze(0)  # one question, two choices
    expected = model.classifier(manual_pool(model, ids, mask, "mean")).view(1, 2)
    out = model(choices, choice_mask, labels=torch.tensor([1]))
    torch.testing.assert_close(out.logits, expected, **TOL)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(expected, torch.tensor([1])), **TOL)


def test_regression_reads_the_pooled_vector():
    model = BertForSequenceClassification(tiny_config(classifier_pooling="cls", num_labels=1)).eval()
    ids, mask = padded_batch()
    target = torch.tensor([0.5, -1.0])
    out = model(ids, mask, labels=target)
    prediction = model.classifier(manual_pool(model, ids, mask, "cls")).squeeze(-1)
    torch.testing.assert_close(out.loss, torch.nn.functional.mse_loss(prediction, target), **TOL)


def test_saving_other_poolings_warns_and_round_trips(tmp_path):
    model = BertForSequenceClassification(tiny_config(classifier_pooling="mean")).eval()
    with pytest.warns(UserWarning, match="classifier_pooling='mean'.*transformers"):
        model.save_pretrained(tmp_path / "mean")
    config = json.loads((tmp_path / "mean" / "config.json").read_text())
    assert config["classifier_pooling"] == "mean"
    assert not any("pooler" in k for k in load_file(tmp_path / "mean" / "model.safetensors"))
    reloaded = BertForSequenceClassification.from_pretrained(tmp_path / "mean")
    ids, mask = padded_batch()
    torch.testing.assert_close(reloaded(ids, mask).logits, model(ids, mask).logits, **TOL)


def test_the_default_pooler_saves_silently_and_writes_no_field(tmp_path):
    model = BertForSequenceClassification(tiny_config())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.save_pretrained(tmp_path)
    assert "classifier_pooling" not in json.loads((tmp_path / "config.json").read_text())


def test_bad_poolings_are_refused_by_name():
    with pytest.raises(ConfigError, match="classifier_pooling 'max'.*pooler"):
        tiny_config(classifier_pooling="max")
    with pytest.raises(ConfigError, match="only in BERT-family"):
        ModernBertConfig.preset("tiny", classifier_pooling="pooler")


def test_finetune_with_mean_pooling_end_to_end(tmp_path):
    """`bertkit finetune --set model.classifier_pooling=mean` on a tiny model: the run trains,
    the saved classifier keeps mean pooling (no pooler weights) and reloads."""
    from bertkit.commands.cli import main
    from tests.tasks.helpers import make_tiny_model

    words = "market film vote match chip bank actor party goal phone".split()
    rows = [(" ".join(words[(i + j) % 10] for j in range(5)), "ab"[i % 2]) for i in range(40)]
    for name, part in (("train.csv", rows[:32]), ("dev.csv", rows[32:])):
        with open(tmp_path / name, "w", encoding="utf-8") as f:
            f.write("text,label\n" + "".join(f"{t},{label}\n" for t, label in part))
    tiny = make_tiny_model(tmp_path / "tiny", [t for t, _ in rows])
    out = str(tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["finetune", "--task", "classification", "--model", tiny, "--train", str(tmp_path / "train.csv"),
                     "--dev", str(tmp_path / "dev.csv"), "--out", out, "--no-progress", "--set",
                     "model.classifier_pooling=mean", "train.max_steps=3", "train.batch_size=8",
                     "data.max_length=16"])
    assert code in (0, None)
    with open(os.path.join(out, "finetune_summary.json")) as f:
        assert json.load(f)["model_overrides"] == {"classifier_pooling": "mean"}
    model = BertForSequenceClassification.from_pretrained(out)
    assert model.config.classifier_pooling == "mean" and model.bert.pooler is None
    assert not any("pooler" in k for k in load_file(os.path.join(out, "model.safetensors")))
