"""The BERT family's entry: the one encoder (bertkit/models/encoder.py) with its switches
(variants/), read and written as BERT, RoBERTa, ALBERT, ELECTRA or DeBERTa-v2 checkpoints."""

from __future__ import annotations

from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.models.family import ModelFamily
from bertkit.models.heads import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                                  BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                                  BertForTokenClassification)
from bertkit.models.variants.keymaps import hf_architecture
from bertkit.models.variants.switches import may_skip_parameters, switch_fields


def config_from_recipe(overrides: dict, preset: str, vocab_size: int, pad_token_id: int | None,
                       max_length: int) -> BertConfig:
    """The preset and the model type's defaults, the [model] overrides, the tokenizer's vocabulary
    size and pad id, and room in the position table for data.max_length tokens."""
    overrides = dict(overrides)
    overrides.setdefault("vocab_size", vocab_size)
    if overrides["vocab_size"] < vocab_size:
        raise ConfigError(f"model.vocab_size={overrides['vocab_size']} is smaller than the "
                          f"tokenizer's {vocab_size} ids; remove it or raise it")
    if pad_token_id is not None:
        # The embedding's padding row and RoBERTa's position numbering both key on this id.
        if overrides.setdefault("pad_token_id", pad_token_id) != pad_token_id:
            raise ConfigError(f"model.pad_token_id={overrides['pad_token_id']} but the tokenizer pads with "
                              f"id {pad_token_id}; remove model.pad_token_id (it follows the tokenizer)")
    model_type = overrides.get("model_type", "bert")
    # RoBERTa numbers positions from pad_token_id + 1, so pad_token_id + 1 rows come first.
    offset = overrides.get("pad_token_id", 1) + 1 if model_type == "roberta" else 0
    # DeBERTa-v3 adds no absolute positions; its 512 is the far end of the 256 log-buckets.
    least = 512 if model_type == "deberta-v2" else 128
    overrides.setdefault("max_position_embeddings", max(max_length, least) + offset)
    config = BertConfig.preset(preset, **overrides)
    if config.max_sequence_length < max_length:
        extra = f" + {offset} (RoBERTa's rows up to the pad row)" if offset else ""
        raise ConfigError(f"data.max_length={max_length} exceeds the model's "
                          f"{config.max_sequence_length} positions; set model.max_position_embeddings = "
                          f"{max_length}{extra} or leave it unset")
    return config


def layer_parameters(layers: int, hidden: int, intermediate: int) -> int:
    """Q, K, V, O and two FFN matrices with biases, two LayerNorms (weight + bias) per layer."""
    attention = 4 * (hidden * hidden + hidden)
    ffn = hidden * intermediate + intermediate + intermediate * hidden + hidden
    return layers * (attention + ffn + 4 * hidden)


def mlm_head(model: nn.Module) -> tuple[nn.Module, tuple[str, ...]]:
    """`BertLMPredictionHead` (transform.dense, transform.LayerNorm, bias) under `cls.`."""
    return model.cls.predictions, ("cls.predictions.",)


BERT = ModelFamily(
    name="BERT", config_class=BertConfig, base_class=BertModel,
    heads=(BertForMaskedLM, BertForPreTraining, BertForNextSentencePrediction, BertForSequenceClassification,
           BertForTokenClassification, BertForQuestionAnswering, BertForMultipleChoice),
    config_from_recipe=config_from_recipe,
    # dropout, pooling, and attention_low_rank (+ _sharing), which turns a dense encoder into a
    # Linformer one (variants/linformer.py's init_segment_means starts the new projections)
    finetune_keys=("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "classifier_pooling",
                   "attention_low_rank", "attention_low_rank_sharing"),
    dropout_key="hidden_dropout_prob",
    task_head_prefixes=("classifier.", "qa_outputs."),
    mlm_head=mlm_head, has_segments=True,
    layer_modules=r"encoder\.layer\.\d+",
    layer_linears=(r"encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|"
                   r"intermediate\.dense|output\.dense)"),
    ffn_width=lambda hidden: 4 * hidden,  # SIZE_PRESETS: 4 H, as BERT and the Turc et al. mini-BERTs
    layer_parameters=layer_parameters,
    may_skip_parameters=may_skip_parameters,  # each switch says (variants/switches.py)
    transformers_names=hf_architecture,
    extra_keys=lambda: tuple(switch_fields()))
