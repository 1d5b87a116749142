"""Early stopping with the best model kept: the Trainer hook (also across a resume) and the
pre-training recipe's [early_stopping] section on a real tiny run."""

import json
import os

import pytest
import torch
from helpers import tiny_config

from tests.cli_checks import run_command
from bertkit.commands.options import rounded
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.train import Trainer, TrainConfig, list_checkpoints
from bertkit.train.early_stopping import BestKeeper, EarlyStoppingSection
from bertkit.recipes.pretrain import parse_config

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny.toml")
SMALL = ["data.max_documents=40", "tokenizer.vocab_size=1000", "data.max_length=32",
         "model.max_position_embeddings=32", "model.hidden_size=64", "model.intermediate_size=128",
         "train.batch_size=16", "train.warmup_steps=0", "train.schedule=constant", "train.log_every=2",
         "train.eval_every=2", "train.save_every=2", "train.keep_last=10", "data.max_eval_examples=32"]
# Held-out losses by step: 4 is the best; 8 improves on it by less than min_delta = 0.1.
SCRIPTED = {2: 3.0, 4: 2.0, 6: 2.05, 8: 1.95, 10: 1.5, 12: 1.4}


def scripted_run(out, max_steps, snapshots, resume=False, save_every=2):
    torch.manual_seed(0)
    model = BertForMaskedLM(tiny_config(50, dropout=0.0))
    ids = torch.randint(5, 50, (4, 10))
    batch = {"input_ids": ids, "labels": ids}
    config = TrainConfig(max_steps=max_steps, lr=1e-3, schedule="constant", eval_every=2, save_every=save_every,
                         keep_last=10, log_every=2, device="cpu")
    keeper = EarlyStoppingSection(patience=2, min_delta=0.1).keeper(str(out), tokenizer=None)
    trainer = None

    def eval_fn(m):
        snapshots[trainer.step] = m.bert.embeddings.word_embeddings.weight.detach().clone()
        return {"mlm_loss": SCRIPTED[trainer.step], "mlm_accuracy": 0.1}

    trainer = Trainer(model, [batch], config, str(out), eval_fn=eval_fn, progress=False, keeper=keeper)
    trainer.train(resume=resume)
    return trainer


def best_weights(out):
    return BertForMaskedLM.from_pretrained(os.path.join(out, "best")).bert.embeddings.word_embeddings.weight


def test_trainer_stops_after_patience_and_keeps_the_best(tmp_path):
    snapshots = {}
    trainer = scripted_run(tmp_path, 12, snapshots, save_every=-1)
    # 6: worse, 8: better by 0.05 < min_delta -> two evaluations without improvement, stop.
    assert trainer.step == 8 and trainer.keeper.best_step == 4
    assert sorted(snapshots) == [2, 4, 6, 8]
    assert torch.equal(best_weights(tmp_path), snapshots[4])
    assert not torch.equal(snapshots[4], snapshots[8])  # training went on after the best


@pytest.mark.filterwarnings("ignore:the lr schedule differs")  # max_steps 6 -> 12
def test_resumed_run_keeps_its_patience_and_best_model(tmp_path):
    snapshots = {}
    scripted_run(tmp_path, 6, snapshots)  # ends at step 6, one evaluation without improvement
    first_best = best_weights(tmp_path).clone()
    resumed = scripted_run(tmp_path, 12, snapshots, resume=True)
    # Without the replay a fresh keeper would take step 8 as its best and run on to 12.
    assert resumed.step == 8 and resumed.keeper.best_step == 4
    assert torch.equal(best_weights(tmp_path), first_best)
    assert torch.equal(first_best, snapshots[4])


def test_early_stopping_without_evaluations_is_refused(tmp_path):
    keeper = EarlyStoppingSection(patience=2).keeper(str(tmp_path), None)
    model = BertForMaskedLM(tiny_config(50))
    with pytest.raises(ConfigError, match="train.eval_every"):
        Trainer(model, [], TrainConfig(eval_every=0, device="cpu"), str(tmp_path), progress=False, keeper=keeper)


def test_best_keeper_min_delta_and_direction():
    keeper = BestKeeper("unused", "mlm_accuracy", patience=1, tokenizer=None, min_delta=0.01)
    assert keeper._record(1, {"mlm_accuracy": 0.20})
    assert not keeper._record(2, {"mlm_accuracy": 0.205}) and keeper.should_stop  # below min_delta
    section = EarlyStoppingSection(patience=3)
    assert section.lower_is_better and not EarlyStoppingSection(patience=1, metric="rtd_accuracy").lower_is_better
    assert EarlyStoppingSection().keeper("out", None) is None  # patience 0: off
    with pytest.raises(ConfigError, match="early_stopping.patience"):
        EarlyStoppingSection(patience=-1)
    with pytest.raises(ConfigError, match="did you mean early_stopping.patience"):
        parse_config({}, ["early_stopping.patiense=2"])
    with pytest.raises(ConfigError, match="early_stopping.metric='mlm_los'.*measured: mlm_accuracy, mlm_loss"):
        BestKeeper("unused", "mlm_los", 1, None, setting="early_stopping.metric")._record(
            1, {"mlm_loss": 1.0, "mlm_accuracy": 0.5})



def test_metric_or_min_delta_without_patience_is_refused_not_ignored():
    """Walk X: `--set early_stopping.metric=letter_accuracy` alone (patience 0, the default) trained on
    with no early stopping and no OUT/best, and nothing said that the key did nothing."""
    for values, named in (({"metric": "mlm_accuracy"}, "early_stopping.metric is"),
                          ({"min_delta": 0.01}, "early_stopping.min_delta is"),
                          ({"metric": "mlm_accuracy", "min_delta": 0.01}, "early_stopping.metric and "
                                                                          "early_stopping.min_delta are")):
        with pytest.raises(ConfigError, match=f"^{named} read only by early stopping, which "
                                              "early_stopping.patience = 0 .*set early_stopping.patience = N"):
            EarlyStoppingSection(**values)
        assert EarlyStoppingSection(patience=2, **values).keeper("out", None) is not None
    with pytest.raises(ConfigError, match="early_stopping.metric is read only by early stopping"):
        parse_config({}, ["early_stopping.metric=mlm_accuracy"])


def tie_keeper(patience=0, **kwargs):
    return BestKeeper("unused", "accuracy", patience, tokenizer=None, tie_metric="loss", **kwargs)


def test_a_tie_goes_to_the_lower_loss_and_counts_as_an_improvement():
    keeper = tie_keeper(patience=2)
    assert keeper._record(1, {"accuracy": 0.955, "loss": 0.40})
    assert not keeper._record(2, {"accuracy": 0.928, "loss": 0.30})  # lower loss, lower score: no
    assert keeper.bad_evals == 1
    assert keeper._record(3, {"accuracy": 0.955, "loss": 0.20})  # tie, lower loss: the new best
    assert keeper.best_step == 3 and keeper.bad_evals == 0 and not keeper.should_stop
    assert not keeper._record(4, {"accuracy": 0.955, "loss": 0.25})  # tie, higher loss: kept 3
    assert not keeper._record(5, {"accuracy": 0.955, "loss": 0.20})  # tie, equal loss: the first stays
    assert keeper.best_step == 3 and keeper.should_stop
    assert keeper.best_metrics == {"accuracy": 0.955, "loss": 0.20}


def test_a_better_score_wins_whatever_its_loss():
    keeper = tie_keeper()
    keeper._record(1, {"accuracy": 0.90, "loss": 0.10})
    assert keeper._record(2, {"accuracy": 0.91, "loss": 5.0})
    assert not keeper._record(3, {"accuracy": 0.90, "loss": 0.01})  # a lower score never wins on the loss
    assert keeper.best_step == 2


def test_tie_rules_at_the_edges():
    keeper = tie_keeper()  # an unmeasured loss never wins a tie and loses one to any measured loss
    keeper._record(1, {"accuracy": 0.5, "loss": float("nan")})
    assert not keeper._record(2, {"accuracy": 0.5})
    assert keeper._record(3, {"accuracy": 0.5, "loss": float("inf")}) is False
    assert keeper._record(4, {"accuracy": 0.5, "loss": 9.0}) and keeper.best_step == 4
    nan = tie_keeper()  # NaN scores are no tie, whatever the loss
    nan._record(1, {"accuracy": float("nan"), "loss": 1.0})
    assert not nan._record(2, {"accuracy": float("nan"), "loss": 0.5}) and nan.best_step == 1
    # a tie is exact equality: a gain under min_delta is neither an improvement nor a tie
    banded = tie_keeper(min_delta=0.01)
    banded._record(1, {"accuracy": 0.5, "loss": 1.0})
    assert not banded._record(2, {"accuracy": 0.505, "loss": 0.5})
    assert not banded._record(3, {"accuracy": 0.495, "loss": 0.5})
    assert banded._record(4, {"accuracy": 0.5, "loss": 0.5}) and banded.best_step == 4
    plain = BestKeeper("unused", "accuracy", 0, tokenizer=None)  # no tie metric: the first of equal scores
    plain._record(1, {"accuracy": 0.5, "loss": 1.0})
    assert not plain._record(2, {"accuracy": 0.5, "loss": 0.5}) and plain.best_step == 1
    lower = BestKeeper("unused", "mse", 0, tokenizer=None, lower_is_better=True, tie_metric="loss")
    lower._record(1, {"mse": 2.0, "loss": 1.0})
    assert lower._record(2, {"mse": 2.0, "loss": 0.5}) and not lower._record(3, {"mse": 2.5, "loss": 0.1})


def test_replayed_evaluations_give_the_live_decisions():
    evaluations = [{"accuracy": a, "loss": loss} for a, loss in
                   [(0.955, 0.41), (0.928, 0.30), (0.946, 0.35), (0.955, 0.2345678901234567), (0.955, 0.25),
                    (0.955, float("nan")), (0.96, 0.5), (0.96, 0.49)]]
    live, decisions = tie_keeper(patience=3), []
    for step, metrics in enumerate(evaluations, start=1):
        decisions.append(live._record(step, metrics))
    assert decisions == [True, False, False, True, False, False, True, True]
    # what a resumed run reads back: the eval rows of metrics.jsonl (JSON, between train rows)
    rows = [json.loads(json.dumps({"step": step, "split": "eval", **metrics, "train_seconds": 1.0}))
            for step, metrics in enumerate(evaluations, start=1)]
    rows[2:2] = [{"step": 3, "split": "train", "loss": 0.1}]
    resumed = tie_keeper(patience=3)
    resumed.replay(rows)
    assert (resumed.best_step, resumed.best_value, resumed.best_tie, resumed.bad_evals) == \
        (live.best_step, live.best_value, live.best_tie, live.bad_evals) == (8, 0.96, 0.49, 0)
    for step, metrics in ((9, {"accuracy": 0.96, "loss": 0.48}), (10, {"accuracy": 0.96, "loss": 0.6})):
        assert resumed._record(step, metrics) == live._record(step, metrics)
    assert resumed.best_step == live.best_step == 9
    # walk T: the resumed run's finetune_summary.json and final line carried train_seconds (the
    # trainer's bookkeeping in each row, not a metric) for the evaluations before the stop
    assert json.dumps(resumed.history) == json.dumps(live.history)  # as text: a NaN loss is not == itself
    assert resumed.best_metrics == live.best_metrics


def test_pretraining_stops_when_the_held_out_loss_stops_improving(tmp_path, capsys):
    # lr 1e-7: the weights move, the held-out loss barely does, so no evaluation after the first
    # improves it by min_delta = 0.01 and the run stops two evaluations later.
    out = str(tmp_path / "run")
    args = ["--config", CONFIG, "--out", out, "--no-progress", *[x for item in SMALL for x in ("--set", item)],
            "--set", "train.max_steps=40", "--set", "train.lr=1e-7",
            "--set", "early_stopping.patience=2", "--set", "early_stopping.min_delta=0.01"]
    capsys.readouterr()
    assert run_command("pretrain", args) == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    evals = [r for r in rows if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4, 6]
    # the report says which step OUT/best holds: the final line is step 6's
    kept = f"model saved in {os.path.join(out, 'best')} (early stopping kept step 2: best_mlm_loss={rounded(evals[0]['mlm_loss'])}"
    assert kept in capsys.readouterr().out  # the loss as measured (it had been printed negated)
    assert abs(evals[2]["mlm_loss"] - evals[0]["mlm_loss"]) < 0.01
    assert [s for s, _ in list_checkpoints(out)] == [2, 4, 6]  # stopped at 6 of 40 steps
    best = BertForMaskedLM.from_pretrained(os.path.join(out, "best"))
    at_2 = BertForMaskedLM.from_pretrained(os.path.join(out, "checkpoint-2"))
    at_6 = BertForMaskedLM.from_pretrained(os.path.join(out, "checkpoint-6"))
    def same(a, b):
        return all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())

    assert same(best, at_2) and not same(best, at_6)
    assert os.path.isfile(os.path.join(out, "best", "tokenizer.json"))  # a complete model directory
    saved = json.load(open(os.path.join(out, "pretrain_config.json")))
    assert saved["early_stopping"] == {"patience": 2, "min_delta": 0.01, "metric": "mlm_loss"}


def test_a_run_kept_on_accuracy_compares_the_kept_steps_loss_with_the_unigram_loss(tmp_path, capsys):
    out = str(tmp_path / "run")
    args = ["--config", CONFIG, "--out", out, "--no-progress", *[x for item in SMALL for x in ("--set", item)],
            "--set", "train.max_steps=6", "--set", "train.lr=1e-7", "--set", "early_stopping.patience=1",
            "--set", "early_stopping.metric=mlm_accuracy", "--set", "early_stopping.min_delta=0.5"]
    capsys.readouterr()
    assert run_command("pretrain", args) == 0
    evals = [r for r in map(json.loads, open(os.path.join(out, "metrics.jsonl"))) if r["split"] == "eval"]
    said = capsys.readouterr().out
    assert "early stopping kept step 2" in said and evals[-1]["step"] > 2
    assert f"held-out mlm_loss {evals[0]['mlm_loss']:.3f}" in said  # step 2's, the model in OUT/best
