"""The model families, keyed by config.json's `model_type` (see `family.ModelFamily`).

Ask `family_of(config)` or `family_for(model_type)`; never test a model type outside a family's
own modules. Add a family with one entry module and one line in `BUILT_IN`, or from your own
code with `register_family(entry)`.
"""

from __future__ import annotations

from typing import Any

from bertkit.errors import ConfigError
from bertkit.models.bert_family import BERT
from bertkit.models.family import ModelFamily
from bertkit.models.modern.family import MODERN

BUILT_IN = (BERT, MODERN)
FAMILIES: dict[str, ModelFamily] = {}  # model_type -> its family


def register_family(family: ModelFamily) -> None:
    """Make `family` answer for each of its model types (a type another family holds is refused)."""
    taken = [t for t in family.model_types if t in FAMILIES and FAMILIES[t] is not family]
    if taken:
        raise ConfigError(f"model_type {taken[0]!r} already belongs to the {FAMILIES[taken[0]].name} family; "
                          "give the new family's config class its own MODEL_TYPES")
    for model_type in family.model_types:
        FAMILIES[model_type] = family


for _family in BUILT_IN:
    register_family(_family)


def families() -> list[ModelFamily]:
    """Every registered family, once each."""
    return list({id(f): f for f in FAMILIES.values()}.values())


def family_for(model_type: str) -> ModelFamily:
    """The family of a config.json `model_type`, or one ConfigError listing the known types."""
    if model_type not in FAMILIES:
        raise ConfigError(f"model_type {model_type!r} is not supported; use one of {', '.join(sorted(FAMILIES))}")
    return FAMILIES[model_type]


def family_of(config: Any) -> ModelFamily:
    """The family of a model config (an encoder-decoder's is its encoder's)."""
    return family_for(getattr(config, "encoder", config).model_type)


def architectures_for(model_class: type) -> tuple[str, ...]:
    """transformers' class names of `model_class`'s role in every family and model type, e.g.
    BertForSequenceClassification -> (BertFor..., RobertaFor..., ..., ModernBertFor...)."""
    return tuple(name for family in families() for name in family.architectures(model_class))
