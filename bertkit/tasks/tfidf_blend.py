"""A fine-tuned classifier or regressor blended with its TF-IDF baseline: the mean of the two
models' class probabilities, or of their predicted values, weighted on dev.

    p(class | text) = (1 - w) * p_encoder(class | text) + w * p_tfidf(class | text),   w in WEIGHTS
    y(text) = (1 - w) * y_encoder(text) + w * y_ridge(text)                            (regression)

(multi-label: each class's two sigmoid probabilities blended, the class in the set at p >= t, with t
chosen on dev together with w from tasks/baseline.py's THRESHOLDS: the mean of an encoder that is sure
and a bag of words that is not sits below 0.5 where either alone would not)

The encoder reads the first data.max_length tokens; the bag of words reads the whole text and
knows the exact words of a small training set. Where one is unsure the other decides: measured on
seven training sets (docs/results.md, "The fine-tuned model blended with TF-IDF"), the blend was 0.2 to
2.7 points of test accuracy ahead of the better of the two on six, and 0.2 behind TF-IDF on the
seventh (100 articles, the encoder trained 42 steps; trained 300, train.min_steps, the blend led with
0.951 against TF-IDF's 0.944). `bertkit finetune --set
train.blend_tfidf=true` chooses w on dev (w = 0 keeps the encoder alone and saves nothing) and saves
the TF-IDF model beside the encoder; predict and evaluate then blend, from the saved arrays alone
(no scikit-learn at prediction time, no pickle):

    features  word 1-2 grams of the lower-cased text (tokens: runs of 2+ word characters, as
              scikit-learn's TfidfVectorizer), x_t = (1 + ln count_t) * idf_t, then x / ||x||_2
    scores    coef @ x + intercept; softmax over the classes (binary: sigmoid of the one row);
              multi-label: a sigmoid per class (one-vs-rest, a row per class);
              regression: the one row's score is the value (ridge regression)

Single- and multi-label classification and regression.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save

from bertkit.errors import CheckpointError
from bertkit.io import atomic_write_bytes, atomic_write_text
from bertkit.tasks.baseline import THRESHOLDS, baseline_text, better_result, fit_tfidf
from bertkit.tasks.registry import get_task
from bertkit.tasks.sequence import class_predictions, label_set_predictions

BLEND_FILE = "tfidf_blend.json"  # the weight, the classes and the vocabulary (terms in column order)
ARRAYS_FILE = "tfidf_blend.safetensors"  # idf (F,), coef (K or 1, F), intercept (K or 1,)
# A class every training text holds gets a constant from one-vs-rest, not a logistic regression:
# its score is this logit (sigmoid 1 - 9e-14), a certainty the blend can still weigh.
CONSTANT_LOGIT = 30.0
WEIGHTS = (0.0, 0.25, 0.5, 0.75)  # w, tried on dev in this order (a tie keeps the smaller)
TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token_pattern


def grams(text: str) -> Counter:
    """Counts of the lower-cased text's words and word pairs, as TfidfVectorizer(ngram_range=(1, 2)) sees them."""
    words = TOKEN.findall(text.lower())
    return Counter(words + [f"{a} {b}" for a, b in zip(words, words[1:])])


@dataclass
class TfidfBlend:
    weight: float  # w: the TF-IDF model's share of the blended probabilities (or values)
    classes: list[str]  # the columns of coef's softmax (binary: coef's one row scores classes[1]; regression: [])
    columns: dict[str, int]  # term -> feature column
    idf: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    multi_label: bool = False  # a sigmoid per class (one row each), not a softmax over them
    threshold: float = 0.5  # multi-label: a class is in the set at blended p >= threshold

    @classmethod
    def from_fitted(cls, fitted, weight: float) -> "TfidfBlend":
        """From a fitted baseline (tasks/baseline.py FittedBaseline: TfidfVectorizer + LogisticRegression,
        one-vs-rest logistic regressions or Ridge, whose one target's coef_ is (F,) and intercept_ a
        number: one row here)."""
        vectorizer, multi_label = fitted.vectorizer, fitted.task == "multi-label-classification"
        coef, intercept = linear_rows(fitted.linear, len(vectorizer.idf_))
        return cls(weight, list(fitted.classes), {t: int(i) for t, i in vectorizer.vocabulary_.items()},
                   np.asarray(vectorizer.idf_, dtype=np.float64), coef, intercept, multi_label)

    @property
    def settings(self) -> str:
        """What was chosen on dev, in words: "weight 0.5" (multi-label: "weight 0.5, threshold 0.3")."""
        return f"weight {self.weight:g}" + (f", threshold {self.threshold:g}" if self.multi_label else "")

    @property
    def task_name(self) -> str:
        """The task whose model this blend belongs to."""
        if not self.classes:
            return "regression"
        return "multi-label-classification" if self.multi_label else "classification"

    def features(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text (columns, values) of its L2-normalised sublinear TF-IDF row."""
        rows = []
        for text in texts:
            found = [(self.columns[g], n) for g, n in grams(text).items() if g in self.columns]
            cols = np.array([c for c, _ in found], dtype=np.int64)
            values = np.array([1.0 + math.log(n) for _, n in found]) * self.idf[cols]
            norm = np.linalg.norm(values)
            rows.append((cols, values / norm if norm > 0 else values))
        return rows

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """(N, rows) linear scores coef @ x + intercept."""
        rows = [self.coef[:, cols] @ values for cols, values in self.features(texts)]
        return (np.stack(rows) if rows else np.zeros((0, self.coef.shape[0]))) + self.intercept

    def values(self, examples: Sequence) -> np.ndarray:
        """(N,) a regression's predictions for `examples`, as Ridge.predict gives them."""
        return self.scores([baseline_text(e) for e in examples])[:, 0]

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """(N, K) class probabilities in `classes` order, as LogisticRegression.predict_proba gives them."""
        scores = self.scores(texts)
        if self.multi_label:  # one-vs-rest: each class's own sigmoid
            return 1.0 / (1.0 + np.exp(-scores))
        if self.coef.shape[0] == 1:  # binary: one score, for the second class
            second = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.stack([1.0 - second, second], axis=1)
        scores -= scores.max(axis=1, keepdims=True)
        exp = np.exp(scores)
        return exp / exp.sum(axis=1, keepdims=True)

    def aligned(self, labels: Sequence[str], examples: Sequence) -> np.ndarray:
        """(N, K) probabilities of `examples` (a pair's two texts a newline apart, as the baseline reads
        them), columns in the model's `labels` order; a class the TF-IDF model never saw gets 0."""
        tfidf = self.probabilities([baseline_text(e) for e in examples])
        index = {name: j for j, name in enumerate(self.classes)}
        return np.stack([tfidf[:, index[name]] if name in index else np.zeros(len(examples)) for name in labels],
                        axis=1)

    def mix(self, encoder_probs: np.ndarray, labels: Sequence[str], examples: Sequence) -> np.ndarray:
        """The blend of the encoder's (N, K) probabilities (columns in `labels` order) with this model's."""
        return blended(encoder_probs, self.aligned(labels, examples), self.weight)

    def mix_values(self, encoder_values: np.ndarray, examples: Sequence) -> np.ndarray:
        """The blend of a regression encoder's (N,) values with this model's."""
        return blended(encoder_values, self.values(examples), self.weight)

    def save(self, directory: str) -> None:
        """The arrays, then the JSON that makes the blend visible (load_blend looks for it first), each atomic."""
        terms = [""] * len(self.columns)
        for term, column in self.columns.items():
            terms[column] = term
        arrays = {"idf": self.idf, "coef": self.coef, "intercept": self.intercept}
        atomic_write_bytes(os.path.join(directory, ARRAYS_FILE),
                           save({name: np.ascontiguousarray(a) for name, a in arrays.items()}))
        atomic_write_text(os.path.join(directory, BLEND_FILE),
                          json.dumps({"weight": self.weight, "classes": self.classes, "multi_label": self.multi_label,
                                      "threshold": self.threshold, "terms": terms}, ensure_ascii=False))


def linear_rows(linear, features: int) -> tuple[np.ndarray, np.ndarray]:
    """((rows, F) coef, (rows,) intercept) of a fitted linear model: one row for a binary logistic
    regression or a ridge, K for a multiclass one, and one per class for one-vs-rest (a class every
    training text holds is scikit-learn's constant predictor: coef 0, intercept CONSTANT_LOGIT)."""
    if not hasattr(linear, "estimators_"):
        return (np.atleast_2d(np.asarray(linear.coef_, dtype=np.float64)),
                np.atleast_1d(np.asarray(linear.intercept_, dtype=np.float64)))
    coef, intercept = np.zeros((len(linear.estimators_), features)), np.zeros(len(linear.estimators_))
    for k, estimator in enumerate(linear.estimators_):
        if hasattr(estimator, "coef_"):
            coef[k], intercept[k] = np.ravel(estimator.coef_), float(np.ravel(estimator.intercept_)[0])
        else:  # _ConstantPredictor: y_ is the one value the class takes in training
            intercept[k] = CONSTANT_LOGIT if float(np.ravel(estimator.y_)[0]) else -CONSTANT_LOGIT
    return coef, intercept


def blended(encoder_probs: np.ndarray, tfidf_probs: np.ndarray, weight: float) -> np.ndarray:
    """(1 - w) * p_encoder + w * p_tfidf, both (N, K) in the same column order (or both (N,) values)."""
    return (1.0 - weight) * encoder_probs + weight * tfidf_probs


def remove_blend(directory: str) -> None:
    """Drop a blend from `directory`: it belongs to the model it was chosen for (a resumed run
    whose first attempt was killed while blending trains that model again)."""
    for name in (BLEND_FILE, ARRAYS_FILE):  # the JSON first: without it the arrays are unread
        if os.path.exists(os.path.join(directory, name)):
            os.remove(os.path.join(directory, name))


def load_blend(directory: str, task_name: str) -> TfidfBlend | None:
    """The blend `directory` holds, or None (a model fine-tuned without train.blend_tfidf). A blend
    of the other kind (a ridge's beside a classifier, or class probabilities beside a regression,
    copied in from another run) is refused: it would mix silently, or be ignored."""
    path, arrays_path = os.path.join(directory, BLEND_FILE), os.path.join(directory, ARRAYS_FILE)
    if not os.path.exists(path):
        return None
    fix = (f"fine-tune again with --set train.blend_tfidf=true, or delete {BLEND_FILE} and {ARRAYS_FILE} "
           "to predict with the encoder alone")
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        arrays = load_file(arrays_path)
        blend = TfidfBlend(float(record["weight"]), [str(c) for c in record["classes"]],
                           {t: i for i, t in enumerate(record["terms"])}, arrays["idf"], arrays["coef"],
                           arrays["intercept"], bool(record.get("multi_label", False)),
                           float(record.get("threshold", 0.5)))
    except (OSError, ValueError, KeyError, TypeError, SafetensorError) as e:
        raise CheckpointError(f"{directory}'s TF-IDF blend is unreadable ({e}); {fix}") from None
    rows = len(blend.classes) if len(blend.classes) > 2 or blend.multi_label else 1
    if blend.coef.shape != (rows, len(blend.idf)) or len(blend.columns) != len(blend.idf) or not 0 <= blend.weight < 1 \
            or not 0 < blend.threshold < 1:
        raise CheckpointError(f"{directory}'s TF-IDF blend does not fit together (coef {blend.coef.shape}, "
                              f"{len(blend.columns)} terms, {len(blend.classes)} classes); {fix}")
    if blend.task_name != task_name:
        kind = f"a {blend.task_name} model's" + (f" ({len(blend.classes)} classes)" if blend.classes else "")
        raise CheckpointError(f"{directory}'s TF-IDF blend is {kind}, but the model is a {task_name} model: it "
                              f"belongs to another run; {fix}")
    return blend


def blended_predictions(blend: TfidfBlend, dev: Sequence, encoder_predictions: list, labels: Sequence[str]):
    """A function of (w, threshold) giving the dev predictions of the blend in the task's form: values
    for a regression (`encoder_predictions` numbers), else (label or label set at the threshold, {class:
    probability}); the two models' outputs are computed once, only the weight and threshold change."""
    if not blend.classes:  # regression
        encoder_values, tfidf_values = np.asarray(encoder_predictions, dtype=np.float64), blend.values(dev)
        return lambda weight, threshold: [float(v) for v in blended(encoder_values, tfidf_values, weight)]
    encoder_probs = np.array([[probs[name] for name in labels] for _, probs in encoder_predictions])
    tfidf_probs = blend.aligned(labels, dev)
    if blend.multi_label:
        return lambda weight, threshold: label_set_predictions(
            list(labels), blended(encoder_probs, tfidf_probs, weight), threshold)
    return lambda weight, threshold: class_predictions(list(labels), blended(encoder_probs, tfidf_probs, weight))


def grid(multi_label: bool) -> list[tuple[float, float]]:
    """The (w, threshold) points tried on dev, in order (a tie keeps the earlier): each weight at 0.5, and
    for multi-label each weight at each of THRESHOLDS (w = 0: the model alone, at the threshold fine-tuning
    chose for it by the same metrics from the same grid, recipes/decision.py)."""
    if not multi_label:
        return [(weight, 0.5) for weight in WEIGHTS]
    return [(weight, threshold) for weight in WEIGHTS for threshold in THRESHOLDS]


def choose_blend(task_name: str, train: Sequence, dev: Sequence, strength: float, encoder_predictions: list,
                 labels: Sequence[str], metric: str, tie: str | None = None) -> tuple[TfidfBlend, list[dict]]:
    """The TF-IDF model of the baseline's chosen C or alpha (`strength`) on `train`, its weight
    chosen on `dev` from WEIGHTS by `metric` (then `tie`), as the fine-tune chooses its checkpoint.
    `encoder_predictions`: the fine-tuned model's predictions for `dev` ((label, {class:
    probability}), or values). Returns (the blend, [{"weight": w, **dev metrics}] for every w tried)."""
    task = get_task(task_name)
    blend = TfidfBlend.from_fitted(fit_tfidf(task_name, train, strength), 0.0)
    predict = blended_predictions(blend, dev, encoder_predictions, labels)
    best, tried = None, []
    for weight, threshold in grid(blend.multi_label):
        metrics = task.metrics(dev, predict(weight, threshold))
        tried.append({"weight": weight, **({"threshold": threshold} if blend.multi_label else {}), **metrics})
        if better_result(task, metric, tie, metrics, best):
            best, blend.weight, blend.threshold = metrics, weight, threshold
    return blend, tried
