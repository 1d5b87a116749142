"""Distillation: the loss on hand values, DistilBERT's student initialisation, the Distiller."""

import math

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification
from bertkit.distill import Distiller, distillation_loss, student_from_teacher

BASE = dict(vocab_size=40, hidden_size=32, num_attention_heads=4, intermediate_size=64,
            num_hidden_layers=4, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def softmax(xs):
    e = [math.exp(x) for x in xs]
    return [v / sum(e) for v in e]


def test_loss_on_hand_values():
    s, t, y, alpha, T = [1.0, 2.0, 3.0], [3.0, 2.0, 1.0], 2, 0.3, 2.0
    ps, pt = softmax([x / T for x in s]), softmax([x / T for x in t])
    kl = sum(p * math.log(p / q) for p, q in zip(pt, ps))  # KL(teacher || student)
    ce = -math.log(softmax(s)[y])
    expected = alpha * ce + (1 - alpha) * T * T * kl
    out = distillation_loss(torch.tensor([s]), torch.tensor([t]), torch.tensor([y]), alpha, T)
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert out.ce_loss.item() == pytest.approx(ce, rel=1e-6)
    assert out.kd_loss.item() == pytest.approx(T * T * kl, rel=1e-6)
    # identical distributions: no soft loss; -100 rows carry no CE
    same = distillation_loss(torch.tensor([s, s]), torch.tensor([s, s]), torch.tensor([y, -100]), 0.0, T)
    assert same.loss.item() == pytest.approx(0.0, abs=1e-7)
    # hidden-state cosine term: orthogonal vectors cost 1, equal vectors 0, padding is skipped
    h_s = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [5.0, 5.0]]])
    h_t = torch.tensor([[[0.0, 1.0], [2.0, 0.0], [-1.0, 0.0]]])
    cos = distillation_loss(torch.tensor([s]), torch.tensor([s]), None, 0.5, T, h_s, h_t,
                            torch.tensor([[1, 1, 0]]), cosine_weight=2.0)
    assert cos.cosine_loss.item() == pytest.approx(0.5) and cos.loss.item() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("cls", [BertForMaskedLM, BertForSequenceClassification])
def test_student_copies_every_other_teacher_layer(cls):
    teacher = cls(BertConfig(**BASE))
    student = student_from_teacher(teacher)
    assert student.config.num_hidden_layers == 2 and type(student) is cls
    t, s = teacher.state_dict(), student.state_dict()
    for i, j in [(0, 0), (1, 2)]:
        for name in ("attention.self.query.weight", "output.LayerNorm.bias", "intermediate.dense.weight"):
            assert torch.equal(s[f"bert.encoder.layer.{i}.{name}"], t[f"bert.encoder.layer.{j}.{name}"])
    others = [k for k in s if ".encoder.layer." not in k]
    assert others and all(torch.equal(s[k], t[k]) for k in others)  # embeddings and heads
    custom = student_from_teacher(teacher, layer_map=[1, 3])
    assert torch.equal(custom.state_dict()["bert.encoder.layer.1.output.dense.weight"],
                       t["bert.encoder.layer.3.output.dense.weight"])
    with pytest.raises(ConfigError, match="layer_map"):
        student_from_teacher(teacher, layer_map=[0, 7])


def test_distiller_trains_only_the_student_on_mlm_and_classification(tmp_path):
    teacher = BertForMaskedLM(BertConfig(**BASE))
    distiller = Distiller(student_from_teacher(teacher), teacher, alpha=0.5, temperature=2.0, cosine_weight=1.0)
    ids = torch.randint(1, 40, (2, 7))
    labels = torch.full_like(ids, -100)
    labels[:, 2] = ids[:, 2]
    out = distiller(ids, torch.ones_like(ids), labels=labels)
    assert out.logits.shape == (2, 40) and out.cosine_loss is not None
    out.loss.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert distiller.student.bert.embeddings.word_embeddings.weight.grad is not None
    assert set(distiller.state_dict()) == set(distiller.student.state_dict())
    distiller.save_pretrained(tmp_path)
    assert BertForMaskedLM.from_pretrained(tmp_path).config.num_hidden_layers == 2

    clf_teacher = BertForSequenceClassification(BertConfig(**BASE, num_labels=3))
    clf = Distiller(student_from_teacher(clf_teacher, num_layers=1), clf_teacher)
    result = clf(ids, labels=torch.tensor([0, 2]))
    assert result.logits.shape == (2, 3) and result.ce_loss is not None
