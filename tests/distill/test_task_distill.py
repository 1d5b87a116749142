"""Token-classification and QA distillation: the losses against their definitions, and a student
that learns the teacher's tags and spans on a tiny fixture."""

import json
import warnings
from pathlib import Path

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.distill import Distiller, TaskDistiller, qa_distillation_loss, token_distillation_loss
from bertkit.errors import ConfigError
from bertkit.models.heads import (BertForMaskedLM, BertForQuestionAnswering, BertForSequenceClassification,
                           BertForTokenClassification)
from bertkit.distill import distillation_loss

TEACHER = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
STUDENT = dict(TEACHER, hidden_size=16, num_hidden_layers=1, intermediate_size=32)


def test_token_loss_is_the_classification_loss_over_real_tokens():
    torch.manual_seed(0)
    s, t = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    labels = torch.tensor([[-100, 1, 2, -100, -100], [-100, 0, -100, -100, -100]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    out = token_distillation_loss(s, t, labels, mask, alpha=0.3, temperature=2.0)
    real = mask.bool()
    expected = distillation_loss(s[real], t[real], labels[real], 0.3, 2.0)  # 7 rows
    assert out.loss.item() == pytest.approx(expected.loss.item(), rel=1e-6)
    # hand check of the rows: the KL averages over the 7 real tokens, the CE over the 3 labelled
    kl = torch.nn.functional.kl_div((s[real] / 2).log_softmax(-1), (t[real] / 2).log_softmax(-1),
                                    reduction="sum", log_target=True) / 7 * 4
    ce = torch.nn.functional.cross_entropy(s[real], labels[real], ignore_index=-100)
    assert out.loss.item() == pytest.approx((0.7 * kl + 0.3 * ce).item(), rel=1e-6)
    assert token_distillation_loss(t, t, None, mask).loss.item() == pytest.approx(0.0, abs=1e-6)


def test_qa_loss_averages_start_and_end_and_skips_truncated_answers():
    torch.manual_seed(0)
    ss, se, ts, te = (torch.randn(3, 6) for _ in range(4))
    start, end = torch.tensor([1, 2, 6]), torch.tensor([2, 4, 6])  # the third answer was cut off
    out = qa_distillation_loss(ss, se, ts, te, start, end, alpha=0.5, temperature=2.0)
    cut = torch.tensor([1, 2, -100]), torch.tensor([2, 4, -100])
    a = distillation_loss(ss, ts, cut[0], 0.5, 2.0)
    b = distillation_loss(se, te, cut[1], 0.5, 2.0)
    assert out.loss.item() == pytest.approx((a.loss + b.loss).item() / 2, rel=1e-6)
    assert out.ce_loss.item() == pytest.approx((a.ce_loss + b.ce_loss).item() / 2, rel=1e-6)
    with pytest.raises(ConfigError, match="both"):
        qa_distillation_loss(ss, se, ts, te, start, None)


def train(model, batch, steps, lr=3e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    return model


def token_fixture():
    """Tags that depend on the token and its left neighbour: (id + previous id) % 3."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 40, (16, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[::3, 9:] = 0
    ids[mask == 0] = 0
    labels = (ids + torch.roll(ids, 1, dims=1)) % 3
    labels[:, 0] = -100
    labels[mask == 0] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def qa_fixture():
    """The answer starts at the token after the single marker id 4 and spans two tokens."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(5, 40, (16, 12), generator=g)
    at = torch.randint(1, 9, (16,), generator=g)
    ids[torch.arange(16), at] = 4
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "start_positions": at + 1,
            "end_positions": at + 2}


@pytest.mark.parametrize("cls,fixture", [(BertForTokenClassification, token_fixture),
                                         (BertForQuestionAnswering, qa_fixture)])
def test_student_learns_the_teacher(cls, fixture):
    batch = fixture()
    torch.manual_seed(0)
    teacher = train(cls(BertConfig(**TEACHER, num_labels=3)), batch, 60).eval()
    torch.manual_seed(1)
    student = cls(BertConfig(**STUDENT, num_labels=3))  # narrower and shallower, random init
    distiller = TaskDistiller(student, teacher, alpha=0.0, temperature=2.0)  # soft targets only
    unlabeled = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        before = distiller(**unlabeled).kd_loss.item()
    train(distiller, batch, 60)
    with torch.no_grad():
        after = distiller(**unlabeled).kd_loss.item()
    assert after < 0.5 * before, (before, after)
    assert all(p.grad is None for p in teacher.parameters())  # the teacher is not trained
    assert set(distiller.state_dict()) == set(student.state_dict())  # checkpoints hold the student


def test_mismatched_models_are_refused():
    token = BertForTokenClassification(BertConfig(**TEACHER))
    with pytest.raises(ConfigError, match="same head"):
        TaskDistiller(token, BertForQuestionAnswering(BertConfig(**TEACHER)))
    with pytest.raises(ConfigError, match="use Distiller for MLM"):
        mlm = BertForMaskedLM(BertConfig(**TEACHER))
        TaskDistiller(mlm, mlm)


def test_sequence_classifiers_get_distillers_loss():
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(BertConfig(**TEACHER, num_labels=3)).eval()
    student = BertForSequenceClassification(BertConfig(**STUDENT, num_labels=3)).eval()
    ids, labels = torch.randint(5, 40, (4, 9)), torch.tensor([0, 2, 1, 1])
    with torch.no_grad():
        ours = TaskDistiller(student, teacher, alpha=0.3, temperature=2.0)(ids, labels=labels)
        theirs = Distiller(student, teacher, alpha=0.3, temperature=2.0)(ids, labels=labels)
    assert ours.loss.item() == pytest.approx(theirs.loss.item(), rel=1e-6)


def test_recipe_and_command_route_tagging_and_qa_to_the_task_distiller(tmp_path, capsys):
    from bertkit.commands import cli
    from bertkit.recipes.distill import DISTILLABLE, distill_finetuned

    assert DISTILLABLE == ("classification", "token-classification", "qa")
    with pytest.raises(ConfigError, match=r"token-classification or qa teacher \(single-label\); .*teacher is a "
                                          r"regression model"):
        distill_finetuned("regression", str(tmp_path / "teacher"), "bbc", None, str(tmp_path / "out"))
    (tmp_path / "teacher").mkdir()  # a teacher path that does not exist is refused first, by resolve_models
    argv = ["distill", "--task", "qa", "--teacher", str(tmp_path / "teacher"), "--train", "wordnet-qa",
            "--out", str(tmp_path / "out"), "--test", "wordnet-qa:test", "--limit", "-1"]
    assert cli.main(argv) == 2
    assert "--limit must be >= 0" in capsys.readouterr().err


SMALL_TAGGING = ["data.max_length=32", "data.max_train_examples=48", "data.max_eval_examples=16", "train.epochs=1",
                 "train.batch_size=16", "train.lr=5e-4"]


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, minilm2_dir):
    """A 2-layer MiniLM tagger fine-tuned for a few steps on WordNet tagging."""
    from bertkit.commands import cli
    out = tmp_path_factory.mktemp("distill") / "teacher"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["finetune", "--task", "token-classification", "--model", minilm2_dir, "--train",
                         "wordnet-tagging", "--out", str(out), "--no-progress", "--set", *SMALL_TAGGING]) == 0
    return out


def test_without_task_the_teacher_s_own_task_is_distilled(tagger, tmp_path, monkeypatch):
    """No --task: the task the teacher was fine-tuned for, not classification (which had named a
    --task the user never gave)."""
    from bertkit.commands import cli, distill

    seen = {}
    monkeypatch.setattr(distill, "distill_finetuned", lambda task, *a, **k: seen.setdefault("task", task) and {})
    cli.main(["distill", "--teacher", str(tagger), "--train", "wordnet-tagging", "--out", str(tmp_path / "s")])
    assert seen["task"].name == "token-classification"


def test_a_bad_test_file_or_zero_layers_is_refused_before_any_training(tagger, tmp_path, capsys, monkeypatch):
    """--test was read after the distillation (hours, the student saved), --layers 0 read as unset."""
    from bertkit.commands import cli, distill

    monkeypatch.setattr(distill, "distill_finetuned", lambda *a, **k: pytest.fail("trained before the refusal"))
    base = ["distill", "--teacher", str(tagger), "--train", "wordnet-tagging", "--out", str(tmp_path / "s")]
    assert cli.main([*base, "--test", str(tmp_path / "nosuch.conll")]) == 2
    assert "nosuch.conll: no such file" in capsys.readouterr().err
    assert cli.main([*base, "--layers", "0"]) == 2
    assert "--layers must be at least 1, got 0" in capsys.readouterr().err
    # --speed-repeats 0 was refused by the timing, after the whole distillation
    assert cli.main([*base, "--test", "wordnet-tagging:test", "--speed-repeats", "0"]) == 2
    assert "--speed-repeats must be at least 1, got 0" in capsys.readouterr().err
    # --compare-only before any student: "no config file at OUT" did not say which model was missing
    assert cli.main([*base, "--compare-only", "--test", "wordnet-tagging:test"]) == 2
    assert "--compare-only compares the student already in --out" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_stopped_distillation_resumes_to_the_same_student(tagger, tmp_path, capsys, monkeypatch):
    """The stop message said to run again with --resume, which task distillation then refused."""
    import signal

    from safetensors.torch import load_file

    from bertkit.commands import cli
    from bertkit.train import trainer as trainer_module

    def argv(out, *extra):
        return ["distill", "--task", "token-classification", "--teacher", str(tagger), "--train", "wordnet-tagging",
                "--out", str(out), "--layers", "1", "--no-progress", "--set", *SMALL_TAGGING, "train.batch_size=8",
                "train.save_every=2", *extra]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(argv(tmp_path / "whole")) == 0
        original = trainer_module.Trainer._train_step

        def step_with_signal(self, batches):
            if self.step + 1 == 3:
                signal.raise_signal(signal.SIGTERM)
            return original(self, batches)
        monkeypatch.setattr(trainer_module.Trainer, "_train_step", step_with_signal)
        assert cli.main(argv(tmp_path / "stopped")) == 143
        assert "run the same command with --resume to continue" in capsys.readouterr().err
        monkeypatch.undo()
        assert cli.main(argv(tmp_path / "stopped", "--resume")) == 0
    whole, resumed = (load_file(tmp_path / name / "model.safetensors") for name in ("whole", "stopped"))
    assert whole.keys() == resumed.keys() and all(torch.equal(whole[k], resumed[k]) for k in whole)


def test_test_comparison_of_a_tagger_scores_the_evaluate_subset_and_times_both(tmp_path, tagger, capsys):
    """--test works for token classification: both models scored on the --limit subset that
    bertkit evaluate --limit scores (same numbers), and both timed."""
    from bertkit.commands import cli
    student = tmp_path / "student"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["distill", "--task", "token-classification", "--teacher", str(tagger), "--train",
                         "wordnet-tagging", "--out", str(student), "--layers", "1", "--no-progress",
                         "--set", *SMALL_TAGGING, "--test", "wordnet-tagging:test", "--limit", "30",
                         "--speed-repeats", "2"]) == 0
    result = json.load(open(student / "finetune_summary.json"))["distillation"]["test"]
    assert result["examples"] == 30 == result["features"] and len(result["seconds"]["teacher"]) == 2
    assert set(result["student"]) == {"f1", "precision", "recall", "tag_accuracy", "loss"}
    capsys.readouterr()
    assert cli.main(["evaluate", "--model", str(student), "--data", "wordnet-tagging:test", "--limit", "30"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "trivial" in printed.pop("baselines")  # evaluate adds the task's trivial baseline
    assert printed == pytest.approx(result["student"])


def test_tinybert_stage_one_lowers_the_layer_loss_and_distill_continues_from_it(tmp_path, tagger):
    """scripts/tinybert_task.py trains the cut student on the teacher's layers (the layer loss
    falls); `bertkit distill --student` then starts from that student, not from a new cut."""
    import importlib.util

    from bertkit.commands import cli
    from bertkit.tasks import load_model

    path = Path(__file__).resolve().parents[2] / "scripts" / "tinybert_task.py"
    spec = importlib.util.spec_from_file_location("tinybert_task", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    stage1, stage2 = tmp_path / "stage1", tmp_path / "stage2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        script.main(["--task", "token-classification", "--teacher", str(tagger), "--train", "wordnet-tagging",
                     "--out", str(stage1), "--layers", "1", "--measure-limit", "40",
                     "--set", *SMALL_TAGGING, "train.epochs=3", "train.lr=2e-3"])
    losses = json.load(open(stage1 / "layer_losses.json"))
    print(losses)
    assert losses["uniform_teacher_layers"] == [2] and losses["examples"] == 40
    assert losses["stage1"]["hidden_loss"] < 0.8 * losses["cut"]["hidden_loss"]
    student = load_model(str(stage1), "token-classification")
    assert student.config.num_hidden_layers == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        argv = ["distill", "--task", "token-classification", "--teacher", str(tagger), "--train", "wordnet-tagging",
                "--out", str(stage2), "--student", str(stage1), "--no-progress", "--set", *SMALL_TAGGING,
                "train.lr=1e-9"]  # a step this small leaves the starting student as it was
        assert cli.main(argv) == 0
    info = json.load(open(stage2 / "finetune_summary.json"))["distillation"]
    assert info["initial_student"] == str(stage1) and info["layer_map"] == [0]
    start, end = student.state_dict(), load_model(str(stage2), "token-classification").state_dict()
    assert max((start[k] - end[k]).abs().max().item() for k in start) < 1e-4
    assert cli.main(argv[:-1] + ["--layer-map", "0,1", "--overwrite"]) == 2  # its depth must be the map's


def test_distill_reports_the_student_beside_the_dev_baselines(tmp_path, capsys, monkeypatch):
    """distill printed the student's best dev score alone: a student behind TF-IDF on dev, or still
    improving at its last evaluation, went unsaid (walk S: 0.857 against TF-IDF's 0.914)."""
    from bertkit.commands import cli, distill

    summary = {"distillation": {"layer_map": [0, 2, 4], "teacher_layers": 6, "student_parameters": 17.4e6,
                                "teacher_parameters": 22.7e6},
               "select_metric": "accuracy", "best_dev": {"accuracy": 0.8571, "loss": 1.0}, "best_step": 54,
               "wall_time_s": 71.3, "dev_baseline": {"accuracy": 0.2}, "spec": {"task": "classification"},
               "tfidf_baseline": {"param": "C", "value": 100.0, "dev": {"accuracy": 0.9143, "loss": 0.41}},
               "dev_history": [{"step": 18, "accuracy": 0.6}, {"step": 54, "accuracy": 0.8571}],
               "stopped_by": None, "options": {"epochs": 3}, "train_config": {"max_steps": 54}}
    monkeypatch.setattr(distill, "distill_finetuned", lambda *a, **k: summary)
    assert cli.main(["distill", "--task", "classification", "--teacher", str(tmp_path), "--train", "bbc",
                     "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "trivial baseline: accuracy=0.2" in out and 'TF-IDF baseline (C=100, chosen on dev)' in out
    assert "TF-IDF is ahead of the student on dev (accuracy 0.9143 against 0.8571)" in out
    assert "the best dev accuracy came at the last evaluation" in out and "train.epochs, now 3" in out
    summary.update(best_dev={"accuracy": 0.95, "loss": 0.3}, best_step=18)  # ahead, and best before the end
    assert cli.main(["distill", "--task", "classification", "--teacher", str(tmp_path), "--train", "bbc",
                     "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "TF-IDF is" not in out and "last evaluation" not in out and "model saved in" in out


def test_too_many_student_layers_name_the_limit_and_the_command_s_option():
    """--layers 9 on a 6-layer teacher said "pass layer_map explicitly": the Python name, no limit."""
    from bertkit.distill.kd import every_other_layer

    assert every_other_layer(6) == [0, 2, 4] and every_other_layer(6, 2) == [0, 2]
    with pytest.raises(ConfigError, match=r"every other of the teacher's 6 \(at most 3\): give a smaller --layers, "
                                          r"or name the teacher layers with --layer-map .*e\.g\. 0,1,2,3"):
        every_other_layer(6, 4)


def test_compare_says_when_the_teacher_was_scored_at_the_student_s_length(tmp_path, capsys, monkeypatch):
    """A student distilled with --set data.max_length=64 from a teacher tuned at 128: --test scores
    both at 64, and the teacher's line read as its own score (the share kept overstated)."""
    from types import SimpleNamespace

    from bertkit.commands import cli, distill

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "finetune_summary.json").write_text("{}")
    result = {"teacher": {"accuracy": 0.9}, "student": {"accuracy": 0.88}, "median_seconds": {"teacher": 2.0,
              "student": 1.0}, "retained": {"accuracy": 0.978}, "speedup": 2.0,
              "speedup_per_pair": {"median": 2.0, "min": 1.9, "max": 2.1}, "examples": 10, "features": 10,
              "batch_size": 64, "max_length": 64, "threads": 1}
    monkeypatch.setattr(distill, "compare_on_test", lambda *a, **k: result)
    monkeypatch.setattr(distill, "read_spec", lambda *a, **k: SimpleNamespace(data=SimpleNamespace(max_length=128)))
    argv = ["distill", "--teacher", str(tmp_path), "--train", "bbc", "--out", str(tmp_path / "s"),
            "--compare-only", "--test", "bbc:test"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "scored and timed at the student's data.max_length 64; the teacher was fine-tuned at 128" in out
    result["max_length"] = 128
    assert cli.main(argv) == 0 and "fine-tuned at" not in capsys.readouterr().out
