"""The objective registry: built-in entries, registration rules, and how a recipe picks an objective
(data.objective, data.objective_module, the objective's own settings section)."""

import re
from dataclasses import dataclass

import pytest
import torch

from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForPreTraining
from bertkit.objectives import OBJECTIVES, Objective, get_objective, register_objective
from bertkit.objectives.electra import ElectraPretrainer
from bertkit.objectives.mlm import masked_lm, mlm_metrics
from bertkit.recipes.pretrain import build_model, logged_outputs, parse_config, vocab_size_of
from tests.tasks.helpers import train_tokenizer, word_salad

SMALL_MODEL = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "num_hidden_layers": 1}


@pytest.mark.parametrize("name, cls, logged", [
    ("mlm", BertForMaskedLM, {}),
    ("mlm+nsp", BertForPreTraining, {"mlm_loss": "mlm_loss", "nsp_loss": "nsp_loss"}),
    ("mlm+sop", BertForPreTraining, {"mlm_loss": "mlm_loss", "sop_loss": "nsp_loss"}),
    ("electra", ElectraPretrainer, {"generator_loss": "generator_loss", "discriminator_loss": "discriminator_loss"}),
])
def test_builtin_entries_build_their_models(name, cls, logged):
    cfg = parse_config({"model": dict(SMALL_MODEL), "data": {"objective": name}})
    model = build_model(cfg, 200, 0)
    assert type(model) is cls and logged_outputs(cfg.objective, model) == logged
    assert cfg.data.builder == get_objective(name).builders[0]


def test_unknown_names_and_bad_entries_are_refused():
    with pytest.raises(ConfigError, match="'mlm\\+mlm' is not known; use one of mlm, mlm\\+nsp.*register your own"):
        parse_config({"data": {"objective": "mlm+mlm"}})
    with pytest.raises(ConfigError, match="needs data.builder = 'nsp'"):
        parse_config({"data": {"objective": "mlm+nsp", "builder": "full_sentences"}})
    mine = Objective(masked_lm, mlm_metrics)
    with pytest.raises(ConfigError, match="already registered"):
        register_objective("mlm", mine)
    assert register_objective("mlm", mine, replace=True) is get_objective("mlm")
    with pytest.raises(ConfigError, match="builders must name example builders"):
        register_objective("mine", Objective(masked_lm, mlm_metrics, builders=("paragraphs",)))
    with pytest.raises(ConfigError, match="needs an Objective"):
        register_objective("mine", masked_lm)
    with pytest.raises(ConfigError, match="without spaces, dots"):
        register_objective("my.objective", mine)


def test_a_registered_objective_gets_a_checked_settings_section():
    @dataclass
    class Settings:
        weight: float = 1.0

    register_objective("weighted", Objective(masked_lm, mlm_metrics, settings=Settings))
    cfg = parse_config({"data": {"objective": "weighted"}, "weighted": {"weight": 2.0}}, ["weighted.weight=3.0"])
    assert cfg.objective_settings == Settings(3.0) and cfg.to_dict()["weighted"] == {"weight": 3.0}
    with pytest.raises(ConfigError, match="did you mean weighted.weight"):
        parse_config({"data": {"objective": "weighted"}}, ["weighted.wieght=3"])
    with pytest.raises(ConfigError, match="only used with data.objective = \"weighted\""):
        parse_config({"data": {"objective": "mlm"}, "weighted": {"weight": 2.0}})
    cfg.model["init"] = "a/checkpoint"  # init_from_checkpoint is off for this objective
    with pytest.raises(ConfigError, match="the weighted objective starts from scratch"):
        build_model(cfg, 100)


def test_objective_module_is_imported_once_from_a_file_or_the_python_path(tmp_path, monkeypatch):
    path = tmp_path / "extra_objectives.py"
    path.write_text("from bertkit.objectives import Objective, register_objective\n"
                    "from bertkit.objectives.mlm import masked_lm, mlm_metrics\n"
                    "register_objective('plain', Objective(masked_lm, mlm_metrics))\n")
    for _ in range(2):  # a second import is a no-op, not a duplicate registration
        cfg = parse_config({"data": {"objective_module": str(path)}}, ["data.objective=plain"])
    assert cfg.data.objective == "plain" and "plain" in OBJECTIVES
    del OBJECTIVES["plain"]
    monkeypatch.syspath_prepend(str(tmp_path))
    assert parse_config({"data": {"objective": "mlm"}}, ["data.objective_module=extra_objectives"])
    assert "plain" in OBJECTIVES
    with pytest.raises(ConfigError, match="does not exist"):
        parse_config({"data": {"objective_module": str(tmp_path / "missing.py")}})
    with pytest.raises(ConfigError, match="cannot be imported"):
        parse_config({"data": {"objective_module": "no_such_module_here"}})


def test_a_pair_objective_on_a_family_without_segments_is_refused_when_the_config_is_read(tmp_path):
    # walk V: mlm+nsp on the default (modern) recipe was refused only after the tokenizer and shards
    with pytest.raises(ConfigError, match="mlm\\+nsp.*modern encoder has not.*'modernbert'.*pretrain-tiny-bert"):
        parse_config({"model": {"model_type": "modernbert"}, "data": {"objective": "mlm+nsp"}})
    from bertkit.models.modern import ModernBertConfig
    ModernBertConfig.preset("tiny", vocab_size=100).save_pretrained(str(tmp_path))
    with pytest.raises(ConfigError, match="mlm\\+sop.*model.init .* holds a 'modernbert' model"):
        parse_config({"model": {"init": str(tmp_path)}, "data": {"objective": "mlm+sop"}})
    assert parse_config({"data": {"objective": "mlm+sop"}}).objective.pairs  # BERT: accepted


@pytest.mark.parametrize("objective, metric, suggested", [
    ("mlm", "mlm_los", "mlm_loss"), ("mlm+nsp", "sop_accuracy", "nsp_accuracy"),
    ("electra", "rtd_acc", "rtd_accuracy"), ("mlm+sop", "sop_acc", "sop_accuracy")])
def test_a_misspelt_early_stopping_metric_is_refused_when_the_config_is_read(objective, metric, suggested):
    # walk V: it was refused at the first evaluation, after tokenizing and eval_every steps
    raw = {"data": {"objective": objective}, "early_stopping": {"patience": 2, "metric": metric}}
    with pytest.raises(ConfigError, match=f"early_stopping.metric '{metric}' is not.*did you mean {suggested}"):
        parse_config(raw)
    raw["early_stopping"]["metric"] = suggested
    assert parse_config(raw).early_stopping.metric == suggested
    raw["data"]["general_corpus"] = "wordnet"  # general text adds general_ forms
    raw["early_stopping"]["metric"] = f"general_{suggested}"
    assert parse_config(raw).early_stopping.metric == f"general_{suggested}"
    raw["early_stopping"] = {"patience": 0, "metric": metric}  # off: a metric there would do nothing (walk X)
    with pytest.raises(ConfigError, match="early_stopping.metric is read only by early stopping"):
        parse_config(raw)
    register_objective("unnamed", Objective(masked_lm, mlm_metrics))  # names no metrics: checked at evaluation
    assert parse_config({"data": {"objective": "unnamed"}, "early_stopping": {"patience": 1, "metric": "x"}})


def test_every_builtin_entry_names_the_metrics_its_evaluation_returns():
    # the names early_stopping.metric is checked against must be the evaluations' own; ELECTRA's
    # now has the MLM metrics docs/objectives.md says it has (perplexity, mlm_replaced_accuracy)
    import math
    import torch
    from bertkit.objectives.electra import evaluate_electra
    from bertkit.objectives.metrics import MLM_METRICS
    cfg = parse_config({"model": dict(SMALL_MODEL), "data": {"objective": "electra"}})
    model = build_model(cfg, 200, 0).eval()
    torch.manual_seed(0)
    ids = torch.randint(5, 200, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 2:8] = torch.randint(5, 200, (2, 6))
    labels[:, 6:8] = ids[:, 6:8]  # kept: the input shows the answer
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    with torch.no_grad():
        metrics = evaluate_electra(model, [batch])
        out = model(ids, labels, batch["attention_mask"])
    assert set(metrics) == set(OBJECTIVES["electra"].metrics)
    hits = out.generator_logits.argmax(-1) == labels[labels != -100]
    replaced = (ids != labels)[labels != -100]
    assert metrics["mlm_replaced_accuracy"] == pytest.approx(float(hits[replaced].float().mean()))
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["mlm_loss"]))
    for name, objective in OBJECTIVES.items():
        assert set(MLM_METRICS) <= set(objective.metrics), name


def test_an_untyped_objective_is_built_on_the_cpu_when_meta_tensors_fail_it_and_keeps_the_random_state():
    """The config-time build runs on the meta device; a module whose code cannot (a value read from a
    tensor) is built for real instead, without moving the random state the run's seed set."""
    devices = []

    def reads_a_value(config, settings):
        model = masked_lm(config, settings)
        devices.append(model.cls.predictions.bias.device.type)
        float(model.cls.predictions.bias.detach().sum())  # no data on the meta device: an error there
        return model

    register_objective("reads-a-value", Objective(reads_a_value, mlm_metrics), replace=True)
    state = torch.random.get_rng_state()
    assert parse_config({"model": dict(SMALL_MODEL), "data": {"objective": "reads-a-value"}})
    assert torch.equal(torch.random.get_rng_state(), state) and devices == ["meta", "cpu"]

    def bert_only(config, settings):
        return masked_lm(config.replace(no_such_field=1) if config.model_type != "bert" else config, settings)

    register_objective("bert-only", Objective(bert_only, mlm_metrics), replace=True)
    assert parse_config({"model": dict(SMALL_MODEL), "data": {"objective": "bert-only"}})
    refused = ("data.objective = \"bert-only\" cannot build its model from this recipe's 'modernbert' config "
               "\\(.*\\); if its module is written for one model family")
    with pytest.raises(ConfigError, match=refused):
        parse_config({"model": {"model_type": "modernbert"}, "data": {"objective": "bert-only"}})


def test_an_objective_module_that_registers_nothing_is_named_in_the_refusal(tmp_path):
    """Walk X: a data.objective_module that never called register_objective got "register your own and
    name its module in data.objective_module", as if no module had been named."""
    module = tmp_path / "noreg.py"
    module.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"data.objective 'first-letter' is not known; use one of .*, or "
                                          f"data.objective_module '{re.escape(str(module))}' was imported but "
                                          "registered no objective 'first-letter': call "
                                          "register_objective\\('first-letter', ...\\) in it"):
        parse_config({"data": {"objective": "first-letter", "objective_module": str(module)}})


def test_the_config_time_build_embeds_the_vocabulary_of_tokenizer_path(tmp_path):
    """With tokenizer.path the model embeds that tokenizer's ids, not tokenizer.vocab_size (the size a
    trained one would have): an objective that checks its vocabulary was built at 8000 and refused."""
    tokenizer = train_tokenizer(tmp_path, word_salad(["alpha", "beta", "gamma", "delta"], 50, 6), 120)
    tokenizer.save_pretrained(str(tmp_path / "tok"))
    seen = []

    def checks_vocabulary(config, settings):
        if config.vocab_size != vocab_size_of(tokenizer):
            raise ValueError(f"built for {config.vocab_size} ids")
        seen.append(config.vocab_size)
        return masked_lm(config, settings)

    register_objective("checks-vocabulary", Objective(checks_vocabulary, mlm_metrics), replace=True)
    assert parse_config({"model": dict(SMALL_MODEL), "tokenizer": {"path": str(tmp_path / "tok")},
                         "data": {"objective": "checks-vocabulary"}})
    assert seen == [vocab_size_of(tokenizer)]
