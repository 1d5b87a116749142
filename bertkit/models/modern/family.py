"""The modern encoder's family entry (ModernBERT's architecture; model_type "modernbert")."""

from __future__ import annotations

from torch import nn

from bertkit.models.family import ModelFamily
from bertkit.models.modern.config import ModernBertConfig
from bertkit.models.modern.heads import (ModernBertForMaskedLM, ModernBertForMultipleChoice,
                                         ModernBertForQuestionAnswering, ModernBertForSequenceClassification,
                                         ModernBertForTokenClassification)
from bertkit.models.modern.model import ModernBertModel
from bertkit.settings.config_io import check_keys


def config_from_recipe(overrides: dict, preset: str, vocab_size: int, pad_token_id: int | None,
                       max_length: int) -> ModernBertConfig:
    """ModernBertConfig.preset with the [model] overrides (its own field names), the tokenizer's
    vocabulary size and pad id; rotary positions need no table, only a length bound."""
    overrides = {k: v for k, v in overrides.items() if k != "model_type"}
    check_keys(overrides, list(MODERN.recipe_keys), "model")
    overrides.setdefault("vocab_size", vocab_size)
    if pad_token_id is not None:
        overrides.setdefault("pad_token_id", pad_token_id)
    overrides.setdefault("max_position_embeddings", max(max_length, 128))
    return ModernBertConfig.preset(preset, **overrides)


def layer_parameters(layers: int, hidden: int, intermediate: int) -> int:
    """The default layer: Wqkv and Wo without biases, the GeGLU Wi (H -> 2 I) and Wo (I -> H)
    without biases, LayerNorms without biases; the first layer has no attention norm (the
    embedding norm precedes it)."""
    per_layer = 4 * hidden * hidden + 2 * hidden * intermediate + intermediate * hidden + 2 * hidden
    return layers * per_layer - hidden  # layer 0's attention norm is an identity


def mlm_head(model: nn.Module) -> tuple[nn.Module, tuple[str, ...]]:
    """`ModernBertPredictionHead` (dense, norm); its decoder bias lives in the decoder."""
    return model.head, ("head.", "decoder.")


MODERN = ModelFamily(
    name="modern encoder", config_class=ModernBertConfig, base_class=ModernBertModel,
    heads=(ModernBertForMaskedLM, ModernBertForSequenceClassification, ModernBertForTokenClassification,
           ModernBertForQuestionAnswering, ModernBertForMultipleChoice),
    config_from_recipe=config_from_recipe,
    finetune_keys=("embedding_dropout", "mlp_dropout", "attention_dropout", "classifier_dropout",
                   "classifier_pooling"),
    dropout_key="mlp_dropout",
    task_head_prefixes=("classifier.", "qa_outputs."),
    mlm_head=mlm_head, has_segments=False,
    layer_modules=r"layers\.\d+",
    # Q, K, V are one map already, and the GeGLU gate and pre-LN residual add are not a map's
    # post-op: each map is packed as it is
    layer_linears=r"layers\.\d+\.(attn\.(Wqkv|Wo)|mlp\.(Wi|Wo))",
    ffn_width=lambda hidden: hidden * 3 // 2,  # the presets' GeGLU width
    layer_parameters=layer_parameters)
