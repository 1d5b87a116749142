"""The strong simple baseline beside every score: TF-IDF + a linear model on the same split.

A fine-tuned encoder earns its cost only if it beats a bag of words on the user's own data, so
`bertkit finetune` and `bertkit evaluate` on a classification (single- or multi-label) or
regression task also fit

    TF-IDF of word 1-2 grams with sublinear tf (1 + ln tf), L2-normalised rows
    + logistic regression (classification; inverse regularisation strength C; multi-label: one
      per class, a class is in the set at p >= t, t chosen on dev with C from THRESHOLDS)
    + ridge regression (regression; penalty alpha)

on the training split, choose C (alpha) from a small grid by the fine-tune's own dev metric,
and score it like the model: the same metrics, the same examples. The baseline reads whole
texts (it is not cut to data.max_length: what a bag of words would get; data.long_text only
changes what the encoder sees), and a text pair as its two texts joined by a newline.

`evaluate` refits it: finetune records the training source, its seeded subset and a hash of
its examples in finetune_summary.json (`tfidf_baseline`), with the chosen C; evaluate reads the
same training examples again, checks the hash, fits with that C and scores the evaluated
examples. scikit-learn is an optional extra (`pip install 'bertkit[baseline]'`); without it the
reports say so in one line. `train.baseline=false` (`--no-baseline`) skips it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from bertkit.errors import DataError
from bertkit.peft import tokenizer_dir
from bertkit.tasks.builtin import load_examples
from bertkit.tasks.common import SUMMARY_FILE, DataConfig, clean_metrics, subsample
from bertkit.tasks.formats import TextExample, count_shared, input_kind
from bertkit.tasks.metrics import paired_difference
from bertkit.tasks.registry import get_task
from bertkit.tasks.sequence import class_predictions, label_list, label_set_predictions
from bertkit.tasks.tfidf import INSTALL, sklearn_available, tfidf_vectorizer
from bertkit.tokenizer import Tokenizer

C_GRID = (0.1, 1.0, 10.0, 100.0)  # logistic regression: larger C = weaker L2 penalty
ALPHA_GRID = (0.1, 1.0, 10.0, 100.0)  # ridge: larger alpha = stronger L2 penalty
# From this many training texts the logistic regressions use SAGA, not L-BFGS: on 10,000 WordNet
# glosses in 45 classes (90k features) the grid took 18 s against 187 s, dev accuracy within 0.001
# at every C, and 50,000 texts (306k features) 6 s a point against 6 minutes. Below it L-BFGS stays
# (2x faster on BBC's 1,556 long articles, and the measured baselines in docs/ were fitted with it).
SAGA_FROM = 10_000
# Multi-label: a class is in the set at p >= t, t chosen on dev with C (0.5 first: a tie keeps it). One-vs-rest
# logistic regressions on rare labels are unsure: on GCIDE subject fields (20 labels, 6.7% held per row) t = 0.15
# took TF-IDF's test micro-F1 0.546 -> 0.623 and macro-F1 0.271 -> 0.434 (docs/results.md, "Multi-label").
THRESHOLDS = (0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1, 0.05)
LINEAR_MODELS = {"classification": ("logistic_regression", "C", C_GRID),
                 "multi-label-classification": ("one_vs_rest_logistic_regression", "C", C_GRID),
                 "regression": ("ridge", "alpha", ALPHA_GRID)}
INSTALL_HINT = f"TF-IDF baseline: not computed, scikit-learn is missing; {INSTALL} to see it"


def has_tfidf_baseline(task_name: str) -> bool:
    """Tasks the TF-IDF baseline serves: a class, a set of classes or a number per text (or pair)."""
    return task_name in LINEAR_MODELS


def baseline_text(example) -> str:
    """What the bag of words reads: the text, or both texts of a pair (one newline apart)."""
    return example.text if example.text_pair is None else f"{example.text}\n{example.text_pair}"


def examples_hash(examples: Sequence) -> str:
    """sha256 of the examples' texts and labels: evaluate checks it fits the same training data.
    Another task's examples (choices, tags, QA) by their compared fields (a line number is not one)."""
    rows = [[e.text, e.text_pair, e.label] if isinstance(e, TextExample)
            else [getattr(e, f.name) for f in dataclasses.fields(e) if f.compare] for e in examples]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- fit and score
@dataclass
class FittedBaseline:
    task: str
    vectorizer: object
    linear: object
    classes: list  # class names in the order of predict_proba's columns ([] for regression)
    threshold: float = 0.5  # multi-label: a class is in the set at p >= threshold

    def predict(self, examples: Sequence) -> list:
        """Predictions in the task's form: (label, {class: probability}) or a number."""
        features = self.vectorizer.transform([baseline_text(e) for e in examples])
        if self.task == "regression":
            return [float(v) for v in self.linear.predict(features)]
        return self.decide(self.linear.predict_proba(features))

    def decide(self, probs) -> list:
        """(label or label set, {class: probability}) per row of predict_proba's (N, K) probabilities."""
        if self.task == "multi-label-classification":
            return label_set_predictions(self.classes, probs, self.threshold)
        return class_predictions(self.classes, probs)

    def metrics(self, examples: Sequence) -> dict:
        return get_task(self.task).metrics(examples, self.predict(examples))


def fit_tfidf(task_name: str, train: Sequence, strength: float, threshold: float = 0.5) -> FittedBaseline:
    """TF-IDF (word 1-2 grams, sublinear tf) + logistic regression (C) or ridge (alpha) on `train`
    (multi-label: a class in the set at p >= threshold)."""
    return dataclasses.replace(fit_linear(task_name, train, *vectorize(train), strength), threshold=threshold)


def vectorize(train: Sequence) -> tuple[object, object]:
    """(the TF-IDF vectorizer fitted on `train`, train's feature matrix): one per grid, not per point."""
    vectorizer = tfidf_vectorizer()
    return vectorizer, vectorizer.fit_transform([baseline_text(e) for e in train])


def fit_linear(task_name: str, train: Sequence, vectorizer, features, strength: float) -> FittedBaseline:
    """The linear model of one grid point on `train`'s features."""
    from sklearn.linear_model import LogisticRegression, Ridge  # optional: bertkit[baseline]
    from sklearn.multiclass import OneVsRestClassifier  # optional: bertkit[baseline]
    from sklearn.preprocessing import MultiLabelBinarizer  # optional: bertkit[baseline]

    if task_name == "regression":
        return FittedBaseline(task_name, vectorizer, Ridge(alpha=strength).fit(features, [float(e.label) for e in train]), [])
    solver = "saga" if len(train) >= SAGA_FROM else "lbfgs"
    logistic = LogisticRegression(C=strength, max_iter=2000, solver=solver, random_state=0)  # (SAGA's order is drawn)
    if task_name == "multi-label-classification":
        binarizer = MultiLabelBinarizer()
        targets = binarizer.fit_transform([label_list(e.label) for e in train])
        linear = OneVsRestClassifier(logistic).fit(features, targets)
        return FittedBaseline(task_name, vectorizer, linear, [str(c) for c in binarizer.classes_])
    linear = logistic.fit(features, [str(e.label) for e in train])
    return FittedBaseline(task_name, vectorizer, linear, [str(c) for c in linear.classes_])


def better_result(task, metric: str, tie: str | None, new: dict, old: dict | None) -> bool:
    """Is `new` a better dev result than `old`: the selected metric first, then the tie metric
    (as the fine-tune chooses its checkpoint); equal results keep the earlier grid point."""
    if old is None:
        return True
    for name in (metric, tie):
        if name is None or new.get(name) == old.get(name):
            continue
        sign = -1 if name in task.lower_is_better else 1
        a, b = (sign * float(x) for x in (new[name], old[name]))
        return not math.isnan(a) and (math.isnan(b) or a > b)  # an undefined score loses
    return False


def choose_on_dev(task_name: str, train: Sequence, dev: Sequence, metric: str, tie: str | None = None) -> dict:
    """Fit every grid point on `train`, score each on `dev`, keep the best by `metric` (then
    `tie`). Returns {"model", "param", "value", "grid": [{param: value, **dev metrics}], "dev": metrics}."""
    task = get_task(task_name)
    name, param, grid = LINEAR_MODELS[task_name]
    best_value, best, tried, chosen = None, None, [], {}
    vectorizer, features = vectorize(train)  # the same for every grid point
    for value in grid:
        for threshold, metrics in _scored_thresholds(fit_linear(task_name, train, vectorizer, features, value), dev):
            extra = {} if threshold is None else {"threshold": threshold}
            tried.append(clean_metrics({param: value, **extra, **metrics}))
            if better_result(task, metric, tie, metrics, best):
                best_value, best, chosen = value, metrics, extra
    return {"model": name, "param": param, "value": best_value, **chosen, "grid": tried, "dev": clean_metrics(best)}


def _scored_thresholds(fitted: FittedBaseline, dev: Sequence) -> list[tuple[float | None, dict]]:
    """(threshold, dev metrics) for each of THRESHOLDS on a multi-label model (its probabilities
    computed once), else [(None, dev metrics)]."""
    if fitted.task != "multi-label-classification":
        return [(None, fitted.metrics(dev))]
    probs = fitted.linear.predict_proba(fitted.vectorizer.transform([baseline_text(e) for e in dev]))
    task = get_task(fitted.task)
    return [(t, task.metrics(dev, dataclasses.replace(fitted, threshold=t).decide(probs))) for t in THRESHOLDS]


# ---------------------------------------------------------------------------- the record
def training_data_record(train_source: str, train: Sequence, data: DataConfig, seed: int) -> dict:
    """What evaluate needs to read the fine-tune's training examples again: the source, its
    subset, a hash of the examples (the trivial baseline needs these alone, TF-IDF its choice too)."""
    where = os.path.abspath(train_source) if os.path.exists(train_source) else train_source  # a file from anywhere
    return {"train_data": where, "max_train_examples": data.max_train_examples, "seed": seed,
            "train_examples": len(train), "train_sha256": examples_hash(train)}


def summary_entry(enabled: bool, task_name: str, train_source: str, train: Sequence, dev: Sequence,
                  data: DataConfig, seed: int, metric: str, tie: str | None = None) -> dict | None:
    """`tfidf_baseline` of a fine-tune's summary: the choice on dev and the training data it was
    fitted on; without scikit-learn or with one class the training data and {"note": why not}
    (evaluate still gives the trivial baseline); None when switched off or for a task it does not serve."""
    if not enabled or not has_tfidf_baseline(task_name):
        return None
    record = training_data_record(train_source, train, data, seed)
    if not sklearn_available():
        return {"note": INSTALL_HINT, **record}
    if task_name == "classification" and len({e.label for e in train}) < 2:
        return {"note": "TF-IDF baseline: none, the training data has one class", **record}
    return {**choose_on_dev(task_name, train, dev, metric, tie), "select_metric": metric, **record}


def trivial_entry(enabled: bool, task, train_source: str, train: Sequence, data: DataConfig, seed: int) -> dict | None:
    """`trivial_baseline` of a fine-tune's summary: the training data a task's trivial baseline is
    refitted from by evaluate (seq2seq's most frequent target, multiple choice's most frequent answer
    position), for the tasks TF-IDF does not serve (its record holds the same) and that have no
    reference (whose baseline needs no training data); None otherwise or when switched off."""
    if not enabled or has_tfidf_baseline(task.name) or task.reference is not None:
        return None
    return training_data_record(train_source, train, data, seed)


def recorded_training_examples(record: dict, task_name: str, data: DataConfig) -> list:
    """The fine-tune's training examples, read again; DataError when they are gone or changed."""
    train = load_examples(task_name, record["train_data"], "train", data)
    train = subsample(train, record["max_train_examples"], record["seed"])
    if examples_hash(train) != record["train_sha256"]:
        # the overlap check (warn_if_trained_on) reads the same examples: it is lost with the baselines
        raise DataError(f"the training data {record['train_data']} changed since the fine-tune, so whether the "
                        "evaluated texts were its training texts can no longer be checked (the usual cause: a new "
                        "split after fine-tuning; run split again with the --seed it had then, 0 by default, "
                        "or fine-tune again on the new training file)")
    return train


def recorded_result(record: dict | None) -> dict | None:
    """The chosen setting and its dev metrics from a summary's record ({"C": 10.0, "accuracy": ...})."""
    if not record or "value" not in record:
        return None
    return {record["param"]: record["value"], **chosen_threshold(record), **record["dev"]}


def chosen_threshold(record: dict) -> dict:
    """{"threshold": t} of a multi-label baseline's record (chosen on dev with C), else {}."""
    return {"threshold": record["threshold"]} if "threshold" in record else {}


def _recorded_training(model_dir: str, key: str, task_name: str, data: DataConfig) -> tuple[dict, list | None, str]:
    """(the summary's record under `key`, the fine-tune's training examples read again, "") or, when
    that cannot be done, ({...}, None, the one-line note saying why)."""
    path = os.path.join(model_dir, SUMMARY_FILE)
    if not os.path.isfile(path):
        return {}, None, (f"baselines: none, {model_dir} has no {SUMMARY_FILE} naming its training data (it was "
                          "not saved by `bertkit finetune`: from Python, or by another library)")
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f).get(key)
    except (OSError, ValueError):
        record = None
    if not record or "train_sha256" not in record:
        return {}, None, (f"baselines: none, {model_dir} records no training data for them "
                          "(fine-tuned with train.baseline=false or by an older bertkit)")
    try:
        return record, recorded_training_examples(record, task_name, data), ""
    except DataError as e:
        return record, None, f"baselines: not computed, {e}"


def score_trivial(model_dir: str, task_name: str, data: DataConfig, examples: Sequence
                  ) -> tuple[dict, str, list | None]:
    """For `evaluate` on a task without TF-IDF or reference: ({"trivial": metrics}, "", its predictions of
    `examples` where the task gives them (`Task.baseline_predict`), else None), refitted on the fine-tune's
    training examples (`trivial_entry`); or ({}, why not, None)."""
    _, train, note = _recorded_training(model_dir, "trivial_baseline", task_name, data)
    if train is None:
        return {}, note, None
    warn_if_trained_on(train, examples)
    task, scope = get_task(task_name), _baseline_scope(model_dir, task_name, data, examples)
    predictions = task.baseline_predict(train, examples, **scope) if task.baseline_predict else None
    return {"trivial": clean_metrics(task.baseline(train, examples, **scope))}, "", predictions


def trivial_scores(model_dir: str, task_name: str, data: DataConfig, train: Sequence, examples: Sequence) -> dict:
    """The task's trivial baseline on `examples`, held to what the model in `model_dir` reads of them
    (`_baseline_scope`), as finetune scored it."""
    return clean_metrics(get_task(task_name).baseline(train, examples,
                                                      **_baseline_scope(model_dir, task_name, data, examples)))


def _baseline_scope(model_dir: str, task_name: str, data: DataConfig, examples: Sequence) -> dict:
    """The keyword arguments that hold a task's baseline to what the model in `model_dir` reads of `examples`,
    where the task says how (`Task.baseline_reads`: its tokenizer is loaded for that alone); else {}."""
    task = get_task(task_name)
    if not task.baseline_reads:
        return {}
    return task.baseline_reads(Tokenizer.from_pretrained(tokenizer_dir(model_dir)), examples, data)


def warn_if_trained_on(train: Sequence, examples: Sequence) -> None:
    """Evaluated texts that are also the model's training texts: its score on them is memory."""
    shared, kind = count_shared(train, examples), input_kind([*train, *examples])  # pairs are counted as pairs
    if shared:
        warnings.warn(f"{shared} of the {len(examples)} evaluated {kind} are training {kind} of this model: its score "
                      f"on them overstates how it does on new text; evaluate on {kind} it was not trained on")


def score_like_finetune(model_dir: str, task_name: str, data: DataConfig, examples: Sequence
                        ) -> tuple[dict, str, list | None]:
    """For `evaluate`: ({"trivial": metrics, "tfidf": {C: ..., metrics}}, note, TF-IDF's predictions
    of `examples` or None) on `examples`, both fitted on the fine-tune's training examples. What
    cannot be done is left out and said in the note, one line: no record or the training data gone
    or changed (neither baseline), no TF-IDF choice (fine-tuned without scikit-learn) or no
    scikit-learn now (the trivial one only)."""
    record, train, note = _recorded_training(model_dir, "tfidf_baseline", task_name, data)
    if train is None:
        return {}, note, None
    warn_if_trained_on(train, examples)
    baselines = {"trivial": trivial_scores(model_dir, task_name, data, train, examples)}
    if "value" not in record:  # the fine-tune could not choose one: say why, and how to get it
        return baselines, f"{record.get('note', 'TF-IDF baseline: none')} (then fine-tune again: --overwrite)", None
    if not sklearn_available():
        return baselines, INSTALL_HINT, None
    threshold = chosen_threshold(record)
    fitted = fit_tfidf(task_name, train, record["value"], **threshold)
    predictions = fitted.predict(examples)
    scores = get_task(task_name).metrics(examples, predictions)
    tfidf = clean_metrics({record["param"]: record["value"], **threshold, **scores})
    return {**baselines, "tfidf": tfidf}, "", predictions


def describe_reference(result: dict) -> str:
    """One line for a task's reference method ({"method": "BM25", metrics...}, Task.reference)."""
    scores = {k: v for k, v in result.items() if k != "method"}
    return f"{result['method']} baseline (no training, same examples): {json.dumps(scores, ensure_ascii=False)}"


def describe(result: dict) -> str:
    """One line for a report: {"C": 10.0, "accuracy": ...} -> TF-IDF baseline (C=10, chosen on dev): {...}
    (multi-label: "C=10, threshold 0.15")."""
    (param, value), *scores = result.items()
    scores = dict(scores)
    threshold = f", threshold {scores.pop('threshold'):g}" if "threshold" in scores else ""
    return f"TF-IDF baseline ({param}={value:g}{threshold}, chosen on dev): {json.dumps(scores, ensure_ascii=False)}"


@dataclass
class EvaluationBaselines:
    """The baselines `evaluate` (the command, and Predictor.evaluate) sets beside a model's scores."""

    scores: dict  # {"trivial": ..., "tfidf": {..., "paired": ...}, "reference": ...}: those that could be fitted
    note: str  # why TF-IDF (or every baseline) is missing, one line; "" when nothing is
    rival: tuple[str, list] | None  # (name, predictions) of the baseline whose classes --per-class shows


def evaluation_baselines(model_dir: str, spec, examples: Sequence, predictions: Sequence,
                         metrics: dict) -> EvaluationBaselines:
    """The baselines of a model's `metrics` on `examples`: TF-IDF and trivial refitted on the fine-tune's
    training data (with the paired difference to TF-IDF), the task's reference method (BM25) and its own
    baseline (no training data needed), or the task's own baseline alone, refitted the same way."""
    task = spec.task
    if has_tfidf_baseline(task.name):
        scores, note, theirs = score_like_finetune(model_dir, task.name, spec.data, examples)
        paired = theirs and paired_accuracy(examples, predictions, theirs, metrics, scores["tfidf"])
        if paired:
            scores["tfidf"]["paired"] = paired
        return EvaluationBaselines(scores, note, theirs and ("TF-IDF", theirs))
    if task.reference is not None:
        return EvaluationBaselines({"trivial": clean_metrics(task.baseline([], examples)),
                                    "reference": clean_metrics(task.reference(examples))}, "", None)
    scores, note, theirs = score_trivial(model_dir, task.name, spec.data, examples)
    return EvaluationBaselines(scores, note, theirs and ("trivial", theirs))


def paired_accuracy(examples, predictions, theirs, ours_scores: dict, their_scores: dict) -> dict | None:
    """The model's accuracy minus TF-IDF's on the same examples, with the paired standard error
    (metrics.paired_difference), for a task whose prediction is (label, probabilities) and whose
    accuracy is the share of labels equal to the gold one; None where that does not reproduce both
    accuracies (a multi-label set's, say), so a number is never paired from the wrong rule."""
    def right(predicted) -> list[bool] | None:
        if not all(isinstance(p, tuple) and len(p) == 2 for p in predicted):
            return None
        return [p[0] == e.label for p, e in zip(predicted, examples)]

    ours, rivals = right(predictions), right(theirs)
    if ours is None or rivals is None or "accuracy" not in ours_scores:
        return None
    if abs(np.mean(ours) - ours_scores["accuracy"]) > 1e-9 or abs(np.mean(rivals) - their_scores["accuracy"]) > 1e-9:
        return None
    return paired_difference(ours, rivals)
