"""Hugging Face state-dict names of the non-BERT families, as a thin rename at save and load.

bertkit's modules always carry BERT's names (`bert.encoder.layer.0.attention.self.query`, ...);
`config.model_type` says which family's names the files on disk use. `to_hf` renames our
state dict before saving and `from_hf` renames a loaded one back, so a RoBERTa checkpoint saved
here loads in `transformers.RobertaForMaskedLM` and the other way round, without a second
model class. Renames are key *prefixes*, tried in order, first match wins.

Which class to build is never read from the file: every bertkit class (BertModel,
BertForMaskedLM, ...) builds any family, because the family is a set of config switches.
`BertForMaskedLM.from_pretrained(roberta_dir)` therefore reads `model_type: "roberta"` from
config.json and gives a RoBERTa MLM.
"""

from __future__ import annotations

import torch

# The attribute transformers keeps the encoder under, per family (ours is always `bert`).
HF_BASE_PREFIX = {"bert": "bert", "roberta": "roberta", "albert": "albert", "electra": "electra"}

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
}
# Keys transformers' class does not have, dropped on load (its pooler is our classifier.dense).
DROPPED_ON_LOAD: dict[tuple[str, str], tuple[str, ...]] = {
    ("roberta", "BertForSequenceClassification"): ("bert.pooler.", "pooler."),
}
# Class names transformers has for each family (saved in config.json "architectures").
HF_CLASSES = {
    "roberta": ("BertModel", "BertForMaskedLM", "BertForSequenceClassification",
                "BertForTokenClassification", "BertForQuestionAnswering", "BertForMultipleChoice"),
}


def _rename(key: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def to_hf(state: dict[str, torch.Tensor], model_type: str, class_name: str) -> dict[str, torch.Tensor]:
    """Our state dict -> the key names transformers' class of that family expects."""
    pairs = HEAD_RENAMES.get((model_type, class_name), [])
    prefix = [("bert.", HF_BASE_PREFIX.get(model_type, "bert") + ".")]
    return {_rename(_rename(k, pairs), prefix): v for k, v in state.items()}


def from_hf(state: dict[str, torch.Tensor], model_type: str, class_name: str) -> dict[str, torch.Tensor]:
    """A family's checkpoint keys -> ours (a bare encoder's keys stay bare; load adds `bert.`)."""
    base = HF_BASE_PREFIX.get(model_type, "bert")
    state = {_rename(k, [(base + ".", "bert.")]): v for k, v in state.items()}
    dropped = DROPPED_ON_LOAD.get((model_type, class_name), ())
    state = {k: v for k, v in state.items() if not k.startswith(dropped)}
    pairs = [(hf, ours) for ours, hf in HEAD_RENAMES.get((model_type, class_name), [])]
    return {_rename(k, pairs): v for k, v in state.items()}


def hf_architecture(class_name: str, model_type: str) -> str:
    """The transformers class name for config.json: BertForMaskedLM + roberta -> RobertaForMaskedLM."""
    if class_name in HF_CLASSES.get(model_type, ()):
        return model_type.capitalize() + class_name[len("Bert"):]
    return class_name
