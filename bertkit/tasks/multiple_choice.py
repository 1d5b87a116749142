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
from bertkit.tasks.common import (DataConfig, PredictionInput, TaskSpec, baseline_choice_rows, check_texts,
                                  forward_features, softmax, truncation_warning)
from bertkit.tasks.formats import ChoiceExample, read_choices
from bertkit.tasks.metrics import accuracy, mean_nll
from bertkit.tasks.spec import Task
from bertkit.tasks.tfidf import not_tried, sklearn_available, tfidf_vectorizer


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


# Softmax temperatures of the TF-IDF cosines (in [0, 1]), the one with the lowest loss on training examples kept.
# Walk AD's headlines chose 0.01 (training loss 0.100, 0.121 at 0.005, 0.172 at 0.02; dev 0.190, 0.183 at 0.02).
TEMPERATURES = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
POSITION = "the most frequent answer position"
TFIDF = "TF-IDF cosine of the context and each choice"
TFIDF_HINT = not_tried("TF-IDF cosine predictor")


def position_predictor(train: Sequence[ChoiceExample], choices: int):
    """examples -> the training prior over the C positions for each (add-one smoothed): argmax is the
    answer position seen most often in training."""
    counts = Counter(e.label for e in train)
    prior = (np.array([counts[c] for c in range(choices)], dtype=np.float64) + 1) / (len(train) + choices)
    return lambda examples: [prior] * len(examples)


def tfidf_cosines(vectorizer, examples: Sequence[ChoiceExample]) -> np.ndarray:
    """(N, C) cosines between each example's context and its choices (the rows are L2-normalised)."""
    choices = len(examples[0].choices)
    contexts = vectorizer.transform([e.context for e in examples])
    options = vectorizer.transform([c for e in examples for c in e.choices])
    return np.asarray(contexts[np.repeat(np.arange(len(examples)), choices)].multiply(options).sum(axis=1),
                      dtype=np.float64).reshape(len(examples), choices)


def tfidf_predictor(train: Sequence[ChoiceExample], sample: Sequence[ChoiceExample]):
    """examples -> softmax(cos(context, choice_c) / T) over the choices, TF-IDF (word 1-2 grams, sublinear tf)
    fitted on the training contexts and choices, T the temperature of TEMPERATURES with the lowest loss on
    `sample` (training examples: the vectorizer never sees a label, T is its one fitted number); None when the
    training texts hold no word for it."""
    vectorizer = tfidf_vectorizer()
    try:
        vectorizer.fit([e.context for e in train] + [c for e in train for c in e.choices])
    except ValueError:  # "empty vocabulary": no word of two letters or more in any training text
        return None
    cosines = tfidf_cosines(vectorizer, sample)
    temperature = min(TEMPERATURES, key=lambda t: choice_loss(sample, [softmax(row / t) for row in cosines]))
    return lambda examples: [softmax(row / temperature) for row in tfidf_cosines(vectorizer, examples)]


def baseline(train: Sequence[ChoiceExample], examples: Sequence[ChoiceExample]) -> dict:
    """The better by accuracy on the training examples (up to 2,000 of them) of two predictors without a
    model (the first where they tie): the answer position seen most often in training, its loss from the
    training positions' frequencies; and the choice most like the context, TF-IDF cosine (`tfidf_predictor`;
    without scikit-learn the position alone, and "note" says so, as seq2seq's retrieval does). "method"
    names the one chosen; "chance": a random choice, accuracy 1/C and loss ln C. Walk AD (an article's headline among three of its topic's):
    TF-IDF 0.953 on dev and test, the position 0.240 and 0.277."""
    choices = len(examples[0].choices) if examples else len(train[0].choices) if train else 2
    chance = {"method": f"a random choice of {choices}", "accuracy": 1 / choices, "loss": float(np.log(choices))}
    if not train or not examples:
        return {"method": POSITION, "accuracy": float("nan"), "loss": float("nan"), "chance": chance}
    sample = [train[i] for i in baseline_choice_rows(len(train))]
    predictors = {POSITION: position_predictor(train, choices)}
    available = sklearn_available()
    tfidf = tfidf_predictor(train, sample) if available else None
    if tfidf is not None:
        predictors[TFIDF] = tfidf
    chosen = max(predictors, key=lambda name: metrics(sample, predictors[name](sample))["accuracy"])
    note = {} if available else {"note": TFIDF_HINT}
    return {"method": chosen, **metrics(examples, predictors[chosen](examples)), "chance": chance, **note}


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
    check_data="check that each label is the index (from 0) of its line's right choice",
)
