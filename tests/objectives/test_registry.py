"""The objective registry: built-in entries, registration rules, and how a recipe picks an objective
(data.objective, data.objective_module, the objective's own settings section)."""

from dataclasses import dataclass

import pytest

from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForPreTraining
from bertkit.objectives import OBJECTIVES, Objective, get_objective, register_objective
from bertkit.objectives.electra import ElectraPretrainer
from bertkit.objectives.mlm import masked_lm, mlm_metrics
from bertkit.recipes.pretrain import build_model, logged_outputs, parse_config

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
    with pytest.raises(ConfigError, match="'mlm\\+mlm' is not known; use one of mlm, mlm\\+nsp.*docs/objectives.md"):
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
