"""Hugging Face state-dict names of the non-BERT families, as a thin rename at save and load.

bertkit's modules always carry BERT's names (`bert.encoder.layer.0.attention.self.query`, ...);
`config.model_type` says which family's names the files on disk use. `to_hf` renames our
state dict before saving and `from_hf` renames a loaded one back, so a RoBERTa checkpoint saved
here loads in `transformers.RobertaForMaskedLM` and the other way round, without a second
model class. Renames are key *prefixes*, tried in order, first match wins; ALBERT's layer
groups also renumber the layers.

Which class to build is never read from the file: every bertkit class (BertModel,
BertForMaskedLM, ...) builds any family, because the family is a set of config switches.
`BertForMaskedLM.from_pretrained(roberta_dir)` therefore reads `model_type: "roberta"` from
config.json and gives a RoBERTa MLM; `BertForPreTraining.from_pretrained(albert_dir)` gives
ALBERT's MLM + sentence-order model.
"""

from __future__ import annotations

import re
import warnings

import torch

from bertkit.models.config import BertConfig

# The attribute transformers keeps the encoder under, per family (ours is always `bert`).
HF_BASE_PREFIX = {"bert": "bert", "roberta": "roberta", "albert": "albert", "electra": "electra",
                  "deberta-v2": "deberta"}

_ALBERT_MLM = [
    ("cls.predictions.transform.dense.", "predictions.dense."),
    ("cls.predictions.transform.LayerNorm.", "predictions.LayerNorm."),
    ("cls.predictions.decoder.", "predictions.decoder."),
    ("cls.predictions.bias", "predictions.bias"),
]
# (bertkit prefix, Hugging Face prefix) per family and head class.
HEAD_RENAMES: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("roberta", "BertForMaskedLM"): [
        ("cls.predictions.transform.dense.", "lm_head.dense."),
        ("cls.predictions.transform.LayerNorm.", "lm_head.layer_norm."),
        ("cls.predictions.decoder.", "lm_head.decoder."),
        ("cls.predictions.bias", "lm_head.bias"),
    ],
    # RoBERTa's classifier is dropout-dense-tanh-dropout-out_proj on <s>; BERT's pooler (dense,
    # tanh) followed by dropout and `classifier` computes the same function, so only names change.
    ("roberta", "BertForSequenceClassification"): [
        ("bert.pooler.dense.", "classifier.dense."),
        ("classifier.", "classifier.out_proj."),
    ],
    ("albert", "BertForMaskedLM"): _ALBERT_MLM,
    # ELECTRA's generator; its classifier is our pooler (with GELU) + classifier, as RoBERTa's.
    ("electra", "BertForMaskedLM"): [
        ("cls.predictions.transform.dense.", "generator_predictions.dense."),
        ("cls.predictions.transform.LayerNorm.", "generator_predictions.LayerNorm."),
        ("cls.predictions.decoder.weight", "generator_lm_head.weight"),
        ("cls.predictions.bias", "generator_lm_head.bias"),
    ],
    ("electra", "BertForSequenceClassification"): [
        ("bert.pooler.dense.", "classifier.dense."),
        ("classifier.", "classifier.out_proj."),
    ],
    ("albert", "BertForPreTraining"): _ALBERT_MLM + [("cls.seq_relationship.", "sop_classifier.classifier.")],
}
# Keys transformers' class does not have, dropped on load (its pooler is our classifier.dense).
DROPPED_ON_LOAD: dict[tuple[str, str], tuple[str, ...]] = {
    ("roberta", "BertForSequenceClassification"): ("bert.pooler.", "pooler."),
    ("electra", "BertForSequenceClassification"): ("bert.pooler.", "pooler."),
}
# DeBERTa names its attention projections query_proj/key_proj/value_proj.
DEBERTA_LAYER = [(f"attention.self.{name}.", f"attention.self.{name}_proj.") for name in ("query", "key", "value")]
# ELECTRA keeps the E -> H projection beside the embeddings, not in the encoder.
ELECTRA_ENCODER = [("encoder.embedding_hidden_mapping_in.", "embeddings_project.")]
# Inside one ALBERT layer: (bertkit, transformers) names.
ALBERT_LAYER = [
    ("attention.self.query.", "attention.query."),
    ("attention.self.key.", "attention.key."),
    ("attention.self.value.", "attention.value."),
    ("attention.self.distance_embedding.", "attention.distance_embedding."),
    ("attention.output.dense.", "attention.dense."),
    ("attention.output.LayerNorm.", "attention.LayerNorm."),
    ("intermediate.dense.", "ffn."),
    ("output.dense.", "ffn_output."),
    ("output.LayerNorm.", "full_layer_layer_norm."),
]
# Class names transformers has for each family (saved in config.json "architectures").
_COMMON = ("BertModel", "BertForMaskedLM", "BertForSequenceClassification",
           "BertForTokenClassification", "BertForQuestionAnswering", "BertForMultipleChoice")
HF_CLASSES = {"roberta": _COMMON, "albert": _COMMON + ("BertForPreTraining",),
              "electra": _COMMON[:-1],  # its multiple-choice head differs: not mapped
              "deberta-v2": ("BertModel", "BertForMaskedLM", "BertForTokenClassification",
                             "BertForQuestionAnswering")}
HF_CLASS_PREFIX = {"deberta-v2": "DebertaV2"}


def _rename(key: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def _split_base(key: str, base: str) -> tuple[str, str]:
    """'bert.encoder.x' -> ('bert.', 'encoder.x'); a bare encoder key has no prefix."""
    return (base + ".", key[len(base) + 1:]) if key.startswith(base + ".") else ("", key)


def _albert_to_hf(key: str, config: BertConfig) -> str:
    head, body = _split_base(key, "bert")
    match = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", body)
    if match:
        group, inner = divmod(int(match.group(1)), config.inner_group_num)
        body = (f"encoder.albert_layer_groups.{group}.albert_layers.{inner}."
                + _rename(match.group(2), ALBERT_LAYER))
    elif body.startswith("pooler.dense."):  # ALBERT's pooler is a bare Linear
        body = "pooler." + body[len("pooler.dense."):]
    return head + body


def _albert_from_hf(key: str, config: BertConfig) -> str:
    head, body = _split_base(key, "bert")
    match = re.fullmatch(r"encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)", body)
    if match:
        index = int(match.group(1)) * config.inner_group_num + int(match.group(2))
        body = f"encoder.layer.{index}." + _rename(match.group(3), [(b, a) for a, b in ALBERT_LAYER])
    elif body in ("pooler.weight", "pooler.bias"):
        body = "pooler.dense." + body[len("pooler."):]
    return head + body


def _rename_layer_part(key: str, pairs: list[tuple[str, str]]) -> str:
    """Rename inside `...encoder.layer.N.`: the part after the layer index."""
    match = re.fullmatch(r"(.*encoder\.layer\.\d+\.)(.+)", key)
    return match.group(1) + _rename(match.group(2), pairs) if match else key


def to_hf(state: dict[str, torch.Tensor], config: BertConfig, class_name: str) -> dict[str, torch.Tensor]:
    """Our state dict -> the key names transformers' class of that family expects."""
    family = config.model_type
    pairs = HEAD_RENAMES.get((family, class_name), [])
    prefix = [("bert.", HF_BASE_PREFIX.get(family, "bert") + ".")]
    out = {}
    for key, value in state.items():
        key = _rename(key, pairs)
        if family == "albert":
            key = _albert_to_hf(key, config)
        elif family == "electra":
            head, body = _split_base(key, "bert")
            key = head + _rename(body, ELECTRA_ENCODER)
        elif family == "deberta-v2":
            key = _rename_layer_part(key, DEBERTA_LAYER)
        out[_rename(key, prefix)] = value
    return out


def from_hf(state: dict[str, torch.Tensor], config: BertConfig, class_name: str) -> dict[str, torch.Tensor]:
    """A family's checkpoint keys -> ours (a bare encoder's keys stay bare; load adds `bert.`)."""
    family = config.model_type
    if family not in HF_BASE_PREFIX:  # another family: its names are transformers' already
        tied = getattr(config, "tie_word_embeddings", False)  # a tied decoder is the embeddings
        return {k: v for k, v in state.items() if not (tied and k == "decoder.weight")}
    base = HF_BASE_PREFIX.get(family, "bert")
    state = {_rename(k, [(base + ".", "bert.")]): v for k, v in state.items()}
    dropped = DROPPED_ON_LOAD.get((family, class_name), ())
    state = {k: v for k, v in state.items() if not k.startswith(dropped)}
    pairs = [(hf, ours) for ours, hf in HEAD_RENAMES.get((family, class_name), [])]
    out = {}
    for key, value in state.items():
        key = _rename(key, pairs)
        if family == "albert":
            key = _albert_from_hf(key, config)
        elif family == "electra":
            head, body = _split_base(key, "bert")
            key = head + _rename(body, [(b, a) for a, b in ELECTRA_ENCODER])
        elif family == "deberta-v2":
            key = _rename_layer_part(key, [(b, a) for a, b in DEBERTA_LAYER])
        out[key] = value
    return out


def hf_architecture(class_name: str, model_type: str) -> str:
    """The transformers class name for config.json: BertForMaskedLM + roberta -> RobertaForMaskedLM."""
    if class_name in HF_CLASSES.get(model_type, ()):
        return HF_CLASS_PREFIX.get(model_type, model_type.capitalize()) + class_name[len("Bert"):]
    return class_name


# Position types bertkit runs that transformers 5 does not: its BERT-family classes read no
# `position_embedding_type`, so such a checkpoint loads there without an error and computes
# something else. Each entry says what transformers then does.
TRANSFORMERS_CANNOT_RUN = {
    "relative_key": "it ignores the distance_embedding weights and uses learned absolute positions "
                    "(transformers 4.x still runs relative_key)",
    "relative_key_query": "it ignores the distance_embedding weights and uses learned absolute "
                          "positions (transformers 4.x still runs relative_key_query)",
    "sinusoidal": "it has no sinusoidal positions and newly initialises a learned position table "
                  "(bertkit rebuilds the fixed table from the config; it is not in the file)",
    "t5_bias": "it ignores the relative_attention_bias table and newly initialises a learned position "
               "table (T5's bias exists in transformers only in T5 models)",
}


def warn_if_transformers_cannot_run(config: BertConfig) -> None:
    """Warn when a checkpoint of this config would load in transformers 5 but give wrong outputs."""
    own_words = getattr(config, "transformers_warning", None)  # another family's config says it itself
    if own_words is not None:
        message = own_words()
        if message:
            warnings.warn(message, UserWarning, stacklevel=3)
        return
    reason = TRANSFORMERS_CANNOT_RUN.get(getattr(config, "position_embedding_type", "absolute"))
    if reason is not None:
        # No directory in the message: Python then shows it once per process, not per checkpoint.
        warnings.warn(f"position_embedding_type={config.position_embedding_type!r} checkpoints load in "
                      f"transformers 5 with wrong outputs: {reason}. Run them with bertkit, or train "
                      "with absolute positions to use transformers", UserWarning, stacklevel=3)
