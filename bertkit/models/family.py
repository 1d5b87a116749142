"""`ModelFamily`: what the rest of bertkit may know about one family of encoders.

A family is one model implementation with its config class and head classes, e.g. BERT (whose
RoBERTa, ALBERT, ELECTRA and DeBERTa-v2 types are switches of the one encoder). Recipes, the trainer, the inference copies and the tasks ask a model's family
(`bertkit.models.families.family_of(config)` / `family_for(model_type)`) instead of testing its
model type, so a new family is one entry module plus one line in `families.py`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from bertkit.errors import ConfigError

# (overrides: the [model] section without "preset", preset, vocab_size, pad_token_id or None,
#  data.max_length) -> the family's config
RecipeConfigBuilder = Callable[[dict, str, int, "int | None", int], Any]


def _never(config: Any) -> bool:
    return False


@dataclass(frozen=True)
class ModelFamily:
    """One family's entry.

    name                the family's name in messages ("BERT", ...)
    config_class        reads and writes its config.json; its MODEL_TYPES are the family's model
                        types and its CLASS_PREFIX the name prefix of its model classes
    base_class          the encoder without a head (`<prefix>Model`)
    heads               its head classes: masked LM first, then the task heads
    config_from_recipe  the config a pre-training recipe's [model] section and data describe
    finetune_keys       the config fields a fine-tuning [model] section may override
    dropout_key         the encoder's main dropout among them (what `finetune --search` varies)
    task_head_prefixes  state-dict prefixes of the task heads (dropped when fine-tuning on new labels)
    mlm_head            model with an MLM head -> (its head module, the head's state-dict prefixes)
    has_segments        whether it embeds token_type_ids (sentence-pair objectives need them)
    layer_modules       a regex of the module names of its transformer layers (FSDP's units)
    layer_linears       a regex of its layers' linear maps (what inference copies pack and quantize)
    ffn_width           hidden width -> the feed-forward width of the family's size presets
    layer_parameters    (layers, hidden, intermediate) -> the parameters of its transformer layers
                        (Kaplan's N: no embeddings, no heads), from the shape alone
    may_skip_parameters config -> whether a training step may leave a parameter without a gradient
                        (DDP must then look for unused parameters)
    transformers_names  class name, model type -> transformers' class name (config.json's
                        `architectures`; tasks recognise a checkpoint's head by these names)
    extra_keys          () -> config keys beyond the config class's fields (BERT: the fields of
                        registered switches, kept in `config.extra`)
    """

    name: str
    config_class: type
    base_class: type
    heads: tuple[type, ...]
    config_from_recipe: RecipeConfigBuilder
    finetune_keys: tuple[str, ...]
    dropout_key: str
    task_head_prefixes: tuple[str, ...]
    mlm_head: Callable[[nn.Module], tuple[nn.Module, tuple[str, ...]]]
    has_segments: bool
    layer_modules: str
    layer_linears: str
    ffn_width: Callable[[int], int]
    layer_parameters: Callable[[int, int, int], int]
    may_skip_parameters: Callable[[Any], bool] = _never
    transformers_names: Callable[[str, str], str] = lambda class_name, model_type: class_name
    extra_keys: Callable[[], tuple[str, ...]] = tuple

    @property
    def model_types(self) -> tuple[str, ...]:
        return self.config_class.MODEL_TYPES

    @property
    def class_prefix(self) -> str:
        return self.config_class.CLASS_PREFIX

    @property
    def recipe_keys(self) -> tuple[str, ...]:
        """The config keys a pre-training [model] section may set."""
        return tuple(f.name for f in dataclasses.fields(self.config_class) if f.name != "extra") + self.extra_keys()

    @staticmethod
    def role(model_class: type) -> str:
        """A class's role, its name without its family's prefix: "ForMaskedLM", "Model", ..."""
        # a class of no family (the sentence-embedding model) has no config_class: its role is its name
        prefix = getattr(getattr(model_class, "config_class", None), "CLASS_PREFIX", "")
        name = model_class.__name__
        return name[len(prefix):] if name.startswith(prefix) else name

    def head_for(self, model_class: type) -> type:
        """This family's class of `model_class`'s role: `model_class` itself when it is built from
        this family's config, else the head of the same role (the masked-LM class for
        BertForMaskedLM, ...); a ConfigError when the family has none."""
        if model_class.config_class is self.config_class:
            return model_class
        wanted = self.role(model_class)
        for cls in (self.base_class, *self.heads):
            if self.role(cls) == wanted:
                return cls
        raise ConfigError(f"the {self.name} family has no {wanted} model (it has "
                          f"{', '.join(cls.__name__ for cls in self.heads)})")

    def architectures(self, model_class: type) -> tuple[str, ...]:
        """transformers' class names of `model_class`'s role in every model type of this family."""
        try:
            own = self.head_for(model_class).__name__
        except ConfigError:
            return ()
        return tuple(dict.fromkeys(self.transformers_names(own, t) for t in self.model_types))
