"""Pre-training distillation (`bertkit distill --stage pretrain`, DistilBERT's triple loss): the loss
against its definition, the command end to end on a tiny teacher (the combined loss falls; the
student loads in transformers' AutoModelForMaskedLM with the same logits), and the checks."""

import argparse
import json
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

from bertkit.commands import cli
from bertkit.commands import distill
from bertkit.models.config import BertConfig
from bertkit.distill import PretrainDistiller, student_from_teacher
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.encoder import BertModel
from bertkit.objectives.distill import DistilSettings, build_distiller, load_teacher
from bertkit.recipes.distill import pretrain_distillation_config
from bertkit.recipes.pretrain import parse_config

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny-bert.toml")
SMALL = ["data.max_documents=40", "data.max_length=32", "train.batch_size=16", "train.warmup_steps=1",
         "train.log_every=2", "train.save_every=0", "data.max_eval_examples=32"]
TEACHER = ["tokenizer.vocab_size=1000", "model.position_embedding_type=absolute", "model.num_hidden_layers=4",
           "model.hidden_size=64", "model.intermediate_size=128", "model.max_position_embeddings=32",
           "train.lr=2e-3", "train.max_steps=20", "train.eval_every=20"]
# A new student (random init, 1 layer) starts far from the teacher, so its loss has far to fall.
STUDENT = ["distil.student=config", "model.position_embedding_type=absolute", "model.num_hidden_layers=1",
           "model.hidden_size=64", "model.intermediate_size=128", "model.max_position_embeddings=32",
           "train.lr=2e-3", "train.max_steps=20", "train.eval_every=20"]


def sets(items):
    return [x for item in items for x in ("--set", item)]


def test_triple_loss_is_its_definition():
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    teacher = BertForMaskedLM(config).eval()
    student = student_from_teacher(teacher)
    with torch.no_grad():  # a student that differs from its teacher's layers
        for p in student.parameters():
            p.add_(0.05 * torch.randn_like(p))
    distiller = PretrainDistiller(student, teacher, alpha_ce=5.0, alpha_mlm=2.0, alpha_cos=1.0, temperature=3.0)
    ids = torch.randint(5, 50, (3, 9))
    mask = torch.ones_like(ids)
    mask[2, 6:] = 0
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 5], labels[2, 1], labels[2, 3] = 7, 8, 9, 10
    out = distiller(ids, mask, labels=labels)
    # the definition, from full forward passes
    with torch.no_grad():
        s = student(ids, mask, output_hidden_states=True, full_logits=True)
        t = teacher(ids, mask, output_hidden_states=True, full_logits=True)
    where = labels != -100
    s_logits, t_logits = s.logits[where], t.logits[where]
    kl = (F.softmax(t_logits / 3, -1) * (F.log_softmax(t_logits / 3, -1) - F.log_softmax(s_logits / 3, -1))).sum(-1)
    kd = 9 * kl.mean()
    mlm = F.cross_entropy(s_logits, labels[where])
    real = mask.bool()
    cos = (1 - F.cosine_similarity(s.hidden_states[-1][real], t.hidden_states[-1][real], dim=-1)).mean()
    assert out.kd_loss.item() == pytest.approx(kd.item(), rel=1e-4)
    assert out.mlm_loss.item() == pytest.approx(mlm.item(), rel=1e-5)
    assert out.cosine_loss.item() == pytest.approx(cos.item(), rel=1e-4)
    assert out.loss.item() == pytest.approx(5 * kd.item() + 2 * mlm.item() + cos.item(), rel=1e-4)
    out.loss.backward()
    assert all(p.grad is not None for p in student.parameters() if p.requires_grad)
    assert all(p.grad is None for p in teacher.parameters())  # the teacher stays frozen
    assert set(distiller.state_dict()) == set(student.state_dict())  # checkpoints hold the student


def test_checks():
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64)
    teacher = BertForMaskedLM(config)
    with pytest.raises(ConfigError, match="vocabulary"):
        PretrainDistiller(BertForMaskedLM(config.replace(vocab_size=60)), teacher)
    with pytest.raises(ConfigError, match="equal widths"):
        PretrainDistiller(BertForMaskedLM(config.replace(hidden_size=16, intermediate_size=32)), teacher)
    PretrainDistiller(BertForMaskedLM(config.replace(hidden_size=16, intermediate_size=32)), teacher, alpha_cos=0.0)
    with pytest.raises(ConfigError, match="not all 0"):
        PretrainDistiller(BertForMaskedLM(config), teacher, 0.0, 0.0, 0.0)
    with pytest.raises(ConfigError, match="masked batches"):
        PretrainDistiller(BertForMaskedLM(config), teacher)(torch.randint(5, 50, (1, 4)))


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    """A 4-layer MLM teacher pre-trained 20 steps on 40 BBC articles (with its tokenizer)."""
    out = tmp_path_factory.mktemp("teacher")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["pretrain", "--config", CONFIG, "--out", str(out), "--no-progress",
                         *sets(SMALL + TEACHER + ["train.save_every=20"])]) == 0
    return str(out / "checkpoint-20")


def test_command_distils_a_tiny_teacher_into_a_student_transformers_loads(teacher_dir, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "student"
    argv = ["distill", "--stage", "pretrain", "--teacher", teacher_dir, "--out", str(out), "--no-progress",
            "--temperature", "2", *sets(SMALL + STUDENT)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(argv) == 0
    assert f"student saved in {out / 'checkpoint-20'}" in capsys.readouterr().out
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    train = [r for r in rows if r["split"] == "train"]
    for row in train:  # the logged loss is DistilBERT's weighted sum of its parts (5, 2, 1)
        assert row["loss"] == pytest.approx(5 * row["kd_loss"] + 2 * row["mlm_loss"] + row["cosine_loss"], rel=1e-4)
    first, last = train[0], train[-1]
    assert last["loss"] < 0.9 * first["loss"], [round(r["loss"], 3) for r in train]
    assert last["kd_loss"] < 0.5 * first["kd_loss"] and last["cosine_loss"] < 0.5 * first["cosine_loss"]
    evaluation = [r for r in rows if r["split"] == "eval"][-1]
    assert {"mlm_loss", "mlm_accuracy", "teacher_mlm_loss", "teacher_mlm_accuracy"} <= set(evaluation)

    student_dir = out / "checkpoint-20"
    ours = BertForMaskedLM.from_pretrained(student_dir).eval()
    assert ours.config.num_hidden_layers == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.AutoModelForMaskedLM.from_pretrained(student_dir).eval()
    assert type(theirs).__name__ == "BertForMaskedLM"
    ids = torch.randint(5, 1000, (2, 20))
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    with torch.no_grad():
        diff = (ours(ids, mask).logits - theirs(input_ids=ids, attention_mask=mask).logits)[mask.bool()]
    assert diff.abs().max() < 1e-4


def test_default_student_is_every_other_teacher_layer(teacher_dir):
    settings = DistilSettings(teacher=teacher_dir)
    distiller = build_distiller(None, settings)  # the [model] config is not read for this student
    teacher, student = distiller.teacher.state_dict(), distiller.student.state_dict()
    assert distiller.student.config.num_hidden_layers == 2 and distiller.training
    for ours, theirs in [(0, 0), (1, 2)]:
        key = "bert.encoder.layer.{}.attention.self.query.weight"
        assert torch.equal(student[key.format(ours)], teacher[key.format(theirs)])
    assert (distiller.alpha_ce, distiller.alpha_mlm, distiller.alpha_cos, distiller.temperature) == (5, 2, 1, 2)
    chosen = build_distiller(None, DistilSettings(teacher=teacher_dir, layer_map=[3]))
    assert torch.equal(chosen.student.state_dict()["bert.encoder.layer.0.output.dense.weight"],
                       teacher["bert.encoder.layer.3.output.dense.weight"])


def test_teacher_needs_an_mlm_head(tmp_path):
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64)
    BertModel(config).save_pretrained(tmp_path)  # an encoder alone: no soft targets to give
    with pytest.raises(CheckpointError, match="no trained MLM head"):
        load_teacher(str(tmp_path))


def test_config_of_the_stage(teacher_dir):
    cfg = pretrain_distillation_config(teacher_dir, CONFIG, ["data.max_length=32", "distil.alpha_cos=0.5",
                                                            "distil.student_layers=1"])
    assert cfg.data.objective == "distil" and cfg.tokenizer.path == teacher_dir
    assert cfg.objective_settings.alpha_cos == 0.5 and cfg.objective_settings.student_layers == 1
    with pytest.raises(ConfigError, match="teacher's"):
        pretrain_distillation_config(teacher_dir, CONFIG, ["data.max_length=32", "tokenizer.path=elsewhere"])
    with pytest.raises(ConfigError, match="data.max_length=64 exceeds the teacher's 32"):
        pretrain_distillation_config(teacher_dir, CONFIG, ["data.max_length=64"])
    with pytest.raises(ConfigError, match="distil.student"):
        pretrain_distillation_config(teacher_dir, None, ["distil.student=config", "distil.student_layers=2"])
    with pytest.raises(ConfigError, match="belong to --stage task"):
        distill.run(parse(["--stage", "pretrain", "--teacher", teacher_dir, "--out", "x", "--train", "bbc"]))
    with pytest.raises(ConfigError, match="belong to --stage pretrain"):
        distill.run(parse(["--teacher", teacher_dir, "--out", "x", "--train", "bbc", "--alpha-cos", "1"]))
    with pytest.raises(ConfigError, match="needs --train"):
        distill.run(parse(["--teacher", teacher_dir, "--out", "x"]))


def parse(argv):
    parser = argparse.ArgumentParser()
    distill.add_arguments(parser)
    return parser.parse_args(argv)


def test_command_options_become_distil_settings(monkeypatch, capsys, tmp_path):
    seen = {}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "T").mkdir()  # a local teacher directory (a bare name would be looked up in the hub cache)

    def fake(teacher, out, config_path, overrides, resume, progress):
        seen.update(teacher=teacher, overrides=overrides, resume=resume)
        return {"metrics": {"mlm_loss": 1.5}, "student": "OUT/checkpoint-9"}

    monkeypatch.setattr(distill, "distill_pretraining", fake)
    args = parse(["--stage", "pretrain", "--teacher", "T", "--out", "OUT", "--layer-map", "0,2", "--alpha-ce", "3",
                  "--alpha-cos", "0", "--temperature", "4", "--seed", "7", "--resume", "--set", "train.lr=1e-4"])
    assert distill.run(args) == 0
    assert seen["teacher"] == "T" and seen["resume"]
    # --set stays text; the typed options arrive as typed values, not text to parse again
    assert seen["overrides"] == ["train.lr=1e-4", ("train.seed", 7), ("distil.alpha_ce", 3.0),
                                 ("distil.alpha_cos", 0.0), ("distil.temperature", 4.0), ("distil.layer_map", [0, 2])]
    assert "student saved in OUT/checkpoint-9" in capsys.readouterr().out
    # the overrides parse into the [distil] section
    settings = parse_config({"data": {"objective": "distil"}, "distil": {"teacher": "T"}},
                            seen["overrides"]).objective_settings
    assert (settings.alpha_ce, settings.alpha_cos, settings.temperature, settings.layer_map) == (3.0, 0.0, 4.0, [0, 2])
