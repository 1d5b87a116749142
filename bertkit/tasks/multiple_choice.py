"""Multiple choice (SWAG, RACE, ARC style): pick the right one of C candidate texts.

Each (context, choice_c) pair is encoded as one row, so an example is C rows; the head scores
each row from its pooled [CLS] vector, s_c = w . pooled_c + b, and the loss is the
cross-entropy of softmax(s_1..s_C) against the index of the right choice
(`BertForMultipleChoice`). The prediction is argmax_c s_c. Metrics: accuracy (chance is 1/C)
and that cross-entropy on the dev examples, `loss`.

File: JSON lines {"id"?, "context": str, "choices": [str, ...], "label": index of the right
choice}; every line has the same number of choices (>= 2). `predict` takes the same lines
without "label" and writes {"id", "choice", "text", "probabilities"}.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Sequence

import numpy as np

from bertkit.models.families import architectures_for
from bertkit.models.heads import BertForMultipleChoice
from bertkit.tasks.common import (DataConfig, PredictionInput, TaskSpec, check_texts, forward_features,
                                  softmax, truncation_warning)
from bertkit.tasks.formats import ChoiceExample, read_choices
from bertkit.tasks.metrics import accuracy, mean_nll
from bertkit.tasks.spec import Task


def read(path: str, data: DataConfig) -> list[ChoiceExample]:
    return read_choices(path)


def read_inputs(path: str, data: DataConfig) -> PredictionInput:
    return PredictionInput(read_choices(path, labelled=False))


# ---------------------------------------------------------------------------- features
# Given when a tenth or more examples were cut. Walk AD: 878 of 1,000 BBC contexts of 100 words were cut at 128
# tokens, and the warning said no more; the tokenizer cuts the longer text of a pair first, so the headline stayed.
CUT_HINT = ("; each row's longer text loses its end first (the context, beside a short choice): if that end matters, "
            "raise data.max_length (up to the model's position limit; a step costs more; compare on dev)")
def encode_choices(tokenizer, examples: Sequence[ChoiceExample], max_length: int, training: bool = False,
                   name: str = "data") -> list[dict]:
    """One feature per example: `input_ids`/`token_type_ids` as C rows of ([CLS] context [SEP]
    choice [SEP]); `labels` = the right choice's index in training."""
    check_texts([e.context for e in examples], "context", name)
    check_texts([c for e in examples for c in e.choices], "choice", name)
    contexts = [e.context for e in examples for _ in e.choices]
    choices = [c for e in examples for c in e.choices]
    with warnings.catch_warnings():  # one summary warning below instead of the tokenizer's
        warnings.simplefilter("ignore")
        enc = tokenizer(contexts, choices, padding=False, truncation=True, max_length=max_length,
                        return_tensors=None)
    features, row, cut = [], 0, 0
    for example in examples:
        ids = [np.asarray(enc["input_ids"][row + c], dtype=np.int64) for c in range(len(example.choices))]
        types = [np.asarray(enc["token_type_ids"][row + c], dtype=np.int64) for c in range(len(example.choices))]
        row += len(example.choices)
        cut += any(len(r) >= max_length for r in ids)
        feature = {"input_ids": ids, "token_type_ids": types}
        if training:
            feature["labels"] = np.int64(example.label)
        features.append(feature)
    truncation_warning(cut, len(features), max_length, name, "examples (some choice)", CUT_HINT)
    return features


def encode(tokenizer, examples, data: DataConfig, label2id: dict | None, training: bool, name: str):
    return encode_choices(tokenizer, examples, data.max_length, training, name)


# ---------------------------------------------------------------------------- decoding
def decode(model, tokenizer, examples: Sequence[ChoiceExample], spec: TaskSpec, name: str = "data",
           features: list | None = None) -> list[np.ndarray]:
    """softmax over the choices' scores, per example."""
    if features is None:
        features = encode_choices(tokenizer, examples, spec.data.max_length, name=name)
    scores = forward_features(model, features, spec.data.eval_batch_size, tokenizer.pad_token_id,
                              spec.data.eval_batching)
    return [softmax(np.asarray(s, dtype=np.float64)) for s in scores]


def choice_loss(examples: Sequence[ChoiceExample], predictions: Sequence[np.ndarray]) -> float:
    """Mean cross-entropy of the right choice, -1/N sum ln p(label) (the model's training loss); nan if empty."""
    return mean_nll([p[e.label] for e, p in zip(examples, predictions)])


def metrics(examples: Sequence[ChoiceExample], predictions: Sequence[np.ndarray]) -> dict:
    """Accuracy, and the dev `loss` (`choice_loss`): on a small dev set accuracy ties between
    checkpoints, the loss tells them apart (fine-tuning settles ties by it)."""
    return {"accuracy": accuracy([e.label for e in examples], [int(p.argmax()) for p in predictions]),
            "loss": choice_loss(examples, predictions)}


def baseline(train: Sequence[ChoiceExample], examples: Sequence[ChoiceExample]) -> dict:
    """The answer position seen most often in training, for every example (chance if balanced); its
    loss predicts the training positions' frequencies, add-one smoothed over the C positions."""
    counts = Counter(e.label for e in train)
    position = counts.most_common(1)[0][0]
    choices = len(examples[0].choices) if examples else 0
    prior = (np.array([counts[c] for c in range(choices)], dtype=np.float64) + 1) / (len(train) + choices)
    return {"accuracy": accuracy([e.label for e in examples], [position] * len(examples)),
            "loss": choice_loss(examples, [prior] * len(examples))}


def rows(model, predictions: Sequence[np.ndarray], inputs: PredictionInput) -> list[dict]:
    return [{"id": e.id, "choice": int(p.argmax()), "text": e.choices[int(p.argmax())],
             "probabilities": [round(float(x), 6) for x in p]}
            for e, p in zip(inputs.examples, predictions)]


MULTIPLE_CHOICE = Task(
    name="multiple-choice",
    description="pick the right one of C candidate texts for a context (SWAG/RACE style)",
    model_class=BertForMultipleChoice,
    read=read, read_inputs=read_inputs, encode=encode, decode=decode, metrics=metrics, baseline=baseline,
    rows=rows, metric_names=("accuracy", "loss"), lower_is_better=frozenset({"loss"}),
    head_config=lambda labels: {"num_labels": 2, "id2label": None, "label2id": None, "problem_type": None},
    architectures=architectures_for(BertForMultipleChoice),
    blank_row=lambda example: {"id": None, "choice": None, "text": None, "probabilities": None},
)
