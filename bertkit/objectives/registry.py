"""The objective registry: name -> `Objective`, the one place `bertkit pretrain` learns what to train.

An objective is everything that differs between pre-training tasks; the recipe
(`bertkit/recipes/pretrain.py`) does the rest the same way for all of them (tokenizer, shards,
examples, batches, the Trainer, checkpoints, evaluations):

    build_model(config, settings) -> module    the module trained; `module(**batch).loss` is the
                                               loss the optimizer minimises
    collator(tokenizer, data, seed) -> fn      examples -> batch (padding, masks, labels)
    evaluate(module, batches, seed) -> dict    held-out metrics, logged at every evaluation

Built-in: "mlm", "mlm+nsp", "mlm+sop" (`mlm.py`), "electra" (`electra.py`) and "distil"
(`distill.py`: DistilBERT's pre-training distillation from a teacher). Your own:

    from bertkit.objectives import Objective, register_objective
    register_objective("first-letter", Objective(build_model=..., evaluate=..., collator=...))

and in the recipe TOML `[data] objective = "first-letter"`, `objective_module = "my_objectives"`
(a module on the Python path, or a .py file) so `bertkit pretrain` imports it first. A worked
example that trains is docs/objectives.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from bertkit.data.examples import BUILDERS
from bertkit.errors import ConfigError
from bertkit.runtime.user_modules import import_user_module
from bertkit.objectives import distill, electra, mlm
from bertkit.objectives.metrics import MLM_METRICS


@dataclass(frozen=True)
class Objective:
    """One pre-training objective.

    build_model     (BertConfig, settings or None) -> nn.Module whose forward(**batch) returns an
                    output with `.loss`; it is saved with `save_pretrained` (subclass
                    `bertkit.models.checkpoint.PretrainedMixin`) and resumed by its state dict
    evaluate        (module, held-out batches, seed) -> {metric: float}; batches are collated
                    once with a fixed seed, so evaluations of one run compare
    collator        (tokenizer, [data] section, seed) -> callable turning a list of examples
                    into a batch of tensors; with `state_dict` / `load_state_dict` a resumed
                    run continues its random stream exactly
    builders        example builders it accepts (`bertkit.data.examples.BUILDERS`); the
                    first is the default of data.builder
    logged          {train-row key: output field}: parts of the loss averaged into the train
                    rows of metrics.jsonl beside the loss
    settings        a dataclass for the objective's own TOML section, named as the objective
                    (`[electra]`), or None
    model_type      the model_type the objective needs (set when the config leaves it out); without
                    it, `bertkit pretrain` builds the module once on the meta device as the config
                    is read, so a module that cannot read this family's config is refused then
    init_from_checkpoint  model.init may start it from a trained encoder: build_model's module
                    has the encoder as `.bert` and an MLM head as `.cls.predictions`
    unigram_baseline  the batches' labels are vocabulary ids at masked positions, so the
                    context-free unigram score is computed and written to baseline.json
    pairs           its examples are sentence pairs told apart by segments (token_type_ids):
                    a model family without segment embeddings is refused
                    when the config is read, before the tokenizer and shards are built
    metrics         the held-out metric names `evaluate` returns: `[early_stopping] metric` is
                    checked against them when the config is read; empty (yours, by default):
                    checked at the first evaluation
    """

    build_model: Callable[..., Any]
    evaluate: Callable[..., dict]
    collator: Callable[..., Callable] = mlm.mlm_collator
    builders: tuple[str, ...] = mlm.MLM_BUILDERS
    logged: Mapping[str, str] = field(default_factory=dict)
    settings: type | None = None
    model_type: str | None = None
    init_from_checkpoint: bool = False
    unigram_baseline: bool = False
    pairs: bool = False
    metrics: tuple[str, ...] = ()


MLM_LOGGED = {"mlm_loss": "mlm_loss"}  # the pair objectives' MLM part; the pair part follows

OBJECTIVES: dict[str, Objective] = {
    "mlm": Objective(mlm.masked_lm, mlm.mlm_metrics, init_from_checkpoint=True, unigram_baseline=True,
                     metrics=MLM_METRICS),
    "mlm+nsp": Objective(mlm.pre_training, mlm.pair_metrics("nsp"), builders=("nsp",),
                         logged={**MLM_LOGGED, "nsp_loss": "nsp_loss"},
                         init_from_checkpoint=True, unigram_baseline=True, pairs=True,
                         metrics=(*MLM_METRICS, "nsp_accuracy")),
    "mlm+sop": Objective(mlm.pre_training, mlm.pair_metrics("sop"), builders=("sop",),
                         logged={**MLM_LOGGED, "sop_loss": "nsp_loss"},  # the 2-way head's loss
                         init_from_checkpoint=True, unigram_baseline=True, pairs=True,
                         metrics=(*MLM_METRICS, "sop_accuracy")),
    "electra": Objective(electra.build_pretrainer, electra.evaluate_electra, settings=electra.ElectraSettings,
                         logged={"generator_loss": "generator_loss", "discriminator_loss": "discriminator_loss"},
                         model_type="electra", unigram_baseline=True, metrics=electra.METRICS),
    # DistilBERT's pre-training distillation (objectives/distill.py; bertkit distill --stage pretrain)
    "distil": Objective(distill.build_distiller, distill.distil_metrics, settings=distill.DistilSettings,
                        logged={"kd_loss": "kd_loss", "mlm_loss": "mlm_loss", "cosine_loss": "cosine_loss"},
                        unigram_baseline=True, metrics=(*MLM_METRICS, "teacher_mlm_loss", "teacher_mlm_accuracy")),
}
BUILT_IN = tuple(OBJECTIVES.values())  # tested here; a registered one is built once as its config is read


def register_objective(name: str, objective: Objective, replace: bool = False) -> Objective:
    """Make `objective` available as `[data] objective = name`; returns it."""
    if not isinstance(objective, Objective):
        raise ConfigError(f"register_objective({name!r}, ...) needs an Objective, got {type(objective).__name__}")
    if not name or not isinstance(name, str) or any(c in name for c in ". =[]\"'"):
        raise ConfigError(f"objective name {name!r} must be a non-empty string without spaces, dots, "
                          "'=', brackets or quotes (it names a TOML section and a --set key)")
    unknown = [b for b in objective.builders if b not in BUILDERS]
    if not objective.builders or unknown:
        raise ConfigError(f"objective {name!r}: builders must name example builders among "
                          f"{', '.join(BUILDERS)} (got {list(objective.builders)})")
    if name in OBJECTIVES and OBJECTIVES[name] is not objective and not replace:
        raise ConfigError(f"objective {name!r} is already registered; choose another name, or pass "
                          "replace=True to replace it")
    OBJECTIVES[name] = objective
    return objective


# the data.objective_module the config being read named ("" none): an unknown objective's error says
# that module was imported and registered no such name (walk X: a module that never called
# register_objective got "register your own and name its module in data.objective_module", as if unnamed)
_named_module = ""


def get_objective(name: str) -> Objective:
    """The registered objective `name`, or a ConfigError listing the known ones."""
    if name not in OBJECTIVES:
        fix = (f"data.objective_module {_named_module!r} was imported but registered no objective {name!r}: call "
               f"register_objective({name!r}, ...) in it" if _named_module else
               "register your own and name its module in data.objective_module")
        raise ConfigError(f"data.objective {name!r} is not known; use one of {', '.join(OBJECTIVES)}, or {fix} "
                          "(docs/objectives.md)")
    return OBJECTIVES[name]


def import_objective_module(spec: str) -> None:
    """Import the user's module that registers objectives: a dotted module name on the Python
    path, or a path to a .py file. Each is imported once per process."""
    global _named_module
    _named_module = spec
    import_user_module(spec, "data.objective_module", "registers your objective")
