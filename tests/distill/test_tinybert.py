"""TinyBERT layer distillation: the loss against its definition (zero for a student that is the
teacher's first layers), and a narrower student learning MiniLM's states and attention maps."""

import pytest
import torch
import torch.nn.functional as F

import bertkit
from bertkit.models.config import BertConfig
from bertkit.distill import LayerDistiller, uniform_layer_map
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForSequenceClassification
from bertkit.models.encoder import BertModel
from bertkit.distill import student_from_teacher

SMALL = dict(vocab_size=40, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.",
    "The new movie is awesome, said the critic who had seen it twice on Sunday.",
    "Shares in the company fell sharply after the announcement.",
]


def test_uniform_layer_map():
    assert uniform_layer_map(12, 4) == [3, 6, 9, 12]  # TinyBERT's g(m) = 3m
    assert uniform_layer_map(6, 3) == [2, 4, 6] and uniform_layer_map(4, 4) == [1, 2, 3, 4]
    with pytest.raises(ConfigError, match="cannot be mapped"):
        uniform_layer_map(4, 6)


def test_loss_is_zero_for_the_teachers_own_first_layers_and_follows_the_formula():
    torch.manual_seed(0)
    teacher = BertModel(BertConfig(**SMALL)).eval()
    ids = torch.randint(5, 40, (3, 10))
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    student = student_from_teacher(teacher, layer_map=[0, 1]).eval()  # = the teacher's layers 1 and 2
    same = LayerDistiller(student, teacher, layer_map=[1, 2])
    assert isinstance(same.projection, torch.nn.Identity)
    with torch.no_grad():
        out = same(ids, mask)
    assert out.loss.item() == pytest.approx(0.0, abs=1e-10)
    # With the uniform map the student's layers m = 1, 2 are compared with the teacher's 2 and 4.
    uniform = LayerDistiller(student, teacher)
    assert uniform.layer_map == [2, 4]
    with torch.no_grad():
        out = uniform(ids, mask)
        s = student(ids, mask, output_hidden_states=True, output_attentions=True)
        t = teacher(ids, mask, output_hidden_states=True, output_attentions=True)
    real = mask.bool()
    hidden = sum(F.mse_loss(s.hidden_states[m][real], t.hidden_states[g][real]) for m, g in [(0, 0), (1, 2), (2, 4)])
    rows = real[:, None, :].expand(-1, 4, -1)
    attention = sum(F.mse_loss(s.attentions[m - 1][rows], t.attentions[g - 1][rows]) for m, g in [(1, 2), (2, 4)])
    assert out.hidden_loss.item() == pytest.approx(hidden.item(), rel=1e-6)
    assert out.attention_loss.item() == pytest.approx(attention.item(), rel=1e-6)
    assert out.hidden_loss.item() > 0 and out.attention_loss.item() > 0


def test_narrow_student_learns_minilm_layers(minilm_dir):
    teacher = BertModel.from_pretrained(minilm_dir)  # 6 layers, width 384, 12 heads
    tok = bertkit.Tokenizer.from_pretrained(minilm_dir)
    batch = tok(SENTENCES)
    torch.manual_seed(0)
    config = teacher.config.replace(hidden_size=96, num_hidden_layers=2, intermediate_size=192,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    student = BertModel(config)  # 12 heads of width 8, random init
    distiller = LayerDistiller(student, teacher)  # student layers 1, 2 <- teacher layers 3, 6
    assert distiller.layer_map == [3, 6] and distiller.projection.weight.shape == (384, 96)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        before = distiller(**inputs)
    opt = torch.optim.AdamW(distiller.parameters(), lr=3e-3)  # student and projection
    for _ in range(15):
        out = distiller(**inputs)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        after = distiller(**inputs)
    assert after.hidden_loss < 0.5 * before.hidden_loss, (before.hidden_loss, after.hidden_loss)
    assert after.attention_loss < 0.6 * before.attention_loss, (before.attention_loss, after.attention_loss)
    assert all(p.grad is None for p in teacher.parameters())


def test_prediction_layer_term_and_bad_settings(tmp_path):
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(BertConfig(**SMALL, num_labels=3)).eval()
    student = BertForSequenceClassification(BertConfig(**dict(SMALL, hidden_size=16, num_hidden_layers=2),
                                                       num_labels=3))
    distiller = LayerDistiller(student, teacher, prediction_weight=1.0, temperature=2.0)
    ids = torch.randint(5, 40, (2, 8))
    out = distiller(ids)
    with torch.no_grad():
        kd = 4.0 * F.kl_div((student(ids).logits / 2).log_softmax(-1), (teacher(ids).logits / 2).log_softmax(-1),
                            reduction="batchmean", log_target=True)
    assert out.prediction_loss.item() == pytest.approx(kd.item(), rel=1e-5)
    assert out.loss.item() == pytest.approx((out.hidden_loss + out.attention_loss + kd).item(), rel=1e-5)
    distiller.save_pretrained(tmp_path)  # the student alone, a plain model directory
    again = BertForSequenceClassification.from_pretrained(tmp_path)
    assert again.config.hidden_size == 16 and again.config.num_hidden_layers == 2
    with pytest.raises(ConfigError, match="heads"):
        LayerDistiller(BertModel(BertConfig(**dict(SMALL, num_attention_heads=2))), teacher)
    with pytest.raises(ConfigError, match="layer_map"):
        LayerDistiller(student, teacher, layer_map=[1, 5])
    with pytest.raises(ConfigError, match="bare encoder"):
        LayerDistiller(BertModel(student.config), BertModel(teacher.config), prediction_weight=1.0)(ids)
