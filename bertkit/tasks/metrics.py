"""Evaluation metrics for fine-tuning tasks, in numpy and plain Python.

* classification: accuracy, per-class precision/recall/F1, macro and micro F1 (single-label
  and multi-label); the log loss (mean cross-entropy of the gold class) of class probabilities;
* regression: Pearson and Spearman correlation;
* token tagging: entity spans and entity-level P/R/F1 as defined by conlleval (the default,
  non-strict mode of seqeval);
* extractive QA: the official SQuAD v1.1/v2.0 exact match and token F1;
* generated text: exact match and ROUGE-L F1 over the tokens of rouge-score's default
  tokenizer (lowercase alphanumeric runs).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Hashable, Iterable, Mapping, Sequence

import numpy as np

from bertkit.errors import DataError
from bertkit.tasks.unicode_text import fold_case, words

__all__ = [
    "accuracy",
    "proportion_standard_error",
    "per_class_prf",
    "macro_f1",
    "micro_f1",
    "log_loss",
    "mean_nll",
    "pearson",
    "spearman",
    "order_correlations",
    "entity_spans",
    "entity_prf",
    "normalize_answer",
    "squad_em_f1",
    "tokens_f1",
    "squad_evaluate",
    "text_tokens",
    "text_exact_match",
    "rouge_l",
]


# ----------------------------------------------------------------------------------------
# classification
# ----------------------------------------------------------------------------------------


def _check_lengths(y_true: Sequence, y_pred: Sequence) -> None:
    if len(y_true) != len(y_pred):
        raise DataError(f"{len(y_true)} gold labels but {len(y_pred)} predictions; give one prediction per example")


def accuracy(y_true: Sequence, y_pred: Sequence) -> float:
    """Fraction of examples whose prediction equals the gold label (exact set match for
    multi-label). Empty input gives 0.0."""
    _check_lengths(y_true, y_pred)
    if not y_true:
        return 0.0
    same = sum(_as_set(t) == _as_set(p) if _is_multi(t) else t == p for t, p in zip(y_true, y_pred))
    return same / len(y_true)


def proportion_standard_error(p: float, n: int) -> float:
    """One standard error of a share `p` of `n` independent examples scored right (an accuracy):
    sqrt(p (1 - p) / n), the binomial one: how much the score would move on another draw of n
    examples like these."""
    if n < 1:
        raise DataError(f"a standard error needs at least one example, got n={n}")
    return float(np.sqrt(p * (1.0 - p) / n))


def paired_difference(ours: Sequence[bool], theirs: Sequence[bool]) -> dict:
    """Two methods scored on the same examples (right or wrong each): mean(ours) - mean(theirs) and
    its standard error sqrt(var(d) / n) over the per-example differences d in {-1, 0, 1}. Paired:
    an example both get right (or wrong) adds no noise, so this is smaller than the two scores'
    own errors combined, and it is what says whether a lead is more than the draw of examples
    (with `only_ours` and `only_theirs`, the discordant counts McNemar's test reads)."""
    if len(ours) != len(theirs) or not len(ours):
        raise DataError(f"a paired difference needs the same examples on both sides, got {len(ours)} and {len(theirs)}")
    difference = np.asarray(ours, dtype=np.float64) - np.asarray(theirs, dtype=np.float64)
    return {"difference": float(difference.mean()), "standard_error": float(difference.std() / np.sqrt(len(ours))),
            "only_ours": int((difference > 0).sum()), "only_theirs": int((difference < 0).sum())}


def _is_multi(label) -> bool:
    return isinstance(label, (list, tuple, set, frozenset))


def _as_set(label) -> frozenset:
    return frozenset(label) if _is_multi(label) else frozenset([label])


def _label_counts(y_true: Sequence, y_pred: Sequence) -> dict[Hashable, list[int]]:
    """Per label [tp, fp, fn]. A single label is treated as the one-element set {label}, so the
    same counting serves single-label and multi-label data."""
    _check_lengths(y_true, y_pred)
    counts: dict[Hashable, list[int]] = {}
    for gold, pred in zip(y_true, y_pred):
        gold_set, pred_set = _as_set(gold), _as_set(pred)
        for label in gold_set | pred_set:
            entry = counts.setdefault(label, [0, 0, 0])
            entry[0] += label in gold_set and label in pred_set
            entry[1] += label in pred_set and label not in gold_set
            entry[2] += label in gold_set and label not in pred_set
    return counts


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """precision = tp/(tp+fp), recall = tp/(tp+fn), F1 = 2PR/(P+R); 0 where undefined."""
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def per_class_prf(y_true: Sequence, y_pred: Sequence, labels: Iterable | None = None) -> dict:
    """{label: {"precision", "recall", "f1", "support"}} for every label in `labels` (default:
    every label seen in gold or predictions, sorted). support = number of gold occurrences."""
    counts = _label_counts(y_true, y_pred)
    chosen = sorted(counts, key=str) if labels is None else list(labels)
    report = {}
    for label in chosen:
        tp, fp, fn = counts.get(label, [0, 0, 0])
        precision, recall, f1 = _prf(tp, fp, fn)
        report[label] = {"precision": precision, "recall": recall, "f1": f1, "support": tp + fn}
    return report


def macro_f1(y_true: Sequence, y_pred: Sequence, labels: Iterable | None = None) -> float:
    """Unweighted mean of per-class F1 over `labels` (default: labels in gold or predictions),
    as sklearn's f1_score(average="macro") with zero_division=0."""
    report = per_class_prf(y_true, y_pred, labels)
    return float(np.mean([row["f1"] for row in report.values()])) if report else 0.0


def micro_f1(y_true: Sequence, y_pred: Sequence, labels: Iterable | None = None) -> float:
    """F1 of the summed tp/fp/fn over all classes. For single-label data over all classes it
    equals accuracy."""
    counts = _label_counts(y_true, y_pred)
    chosen = counts if labels is None else [label for label in labels]
    tp = sum(counts.get(label, [0, 0, 0])[0] for label in chosen)
    fp = sum(counts.get(label, [0, 0, 0])[1] for label in chosen)
    fn = sum(counts.get(label, [0, 0, 0])[2] for label in chosen)
    return _prf(tp, fp, fn)[2]


def log_loss(y_true: Sequence, probabilities: Sequence[Mapping[Hashable, float]]) -> float:
    """Mean cross-entropy of the gold class, -1/N sum_i ln p_i(y_i) (natural log), from each
    example's class probabilities {label: p} (sklearn's log_loss of a single-label problem).

    No clipping: a gold class with probability 0 (or missing from the mapping) makes the loss
    inf, as the cross-entropy is; a softmax in float64 reaches 0 only past a logit gap of ~745.
    Empty input gives nan (a mean of nothing)."""
    _check_lengths(y_true, probabilities)
    return mean_nll([p.get(y, 0.0) for y, p in zip(y_true, probabilities)])


def label_set_loss(gold_sets: Sequence[Sequence[Hashable]],
                   probabilities: Sequence[Mapping[Hashable, float]]) -> float:
    """Mean binary cross-entropy over every example and every class it has a probability for,
    -1/(N K) sum_i sum_k ln(p_ik if k in y_i else 1 - p_ik): a multi-label head's training loss
    (BCE with logits, the mean over the (N, K) targets). A gold class with no probability (never in
    training) is left out: no model of these classes scores it."""
    _check_lengths(gold_sets, probabilities)
    sides = [p if name in set(gold) else 1.0 - p
             for gold, probs in zip(gold_sets, probabilities) for name, p in probs.items()]
    return mean_nll(sides)


def mean_nll(gold_probabilities: Sequence[float]) -> float:
    """-1/N sum ln p over the probabilities the model gave the gold answers (every task's dev
    `loss`): inf when one is 0, nan when there are none."""
    if len(gold_probabilities) == 0:
        return float("nan")
    gold = np.asarray(gold_probabilities, dtype=np.float64)
    with np.errstate(divide="ignore"):  # ln 0 = -inf is the answer, not a numerical accident
        return float(-np.mean(np.log(gold)))


# ----------------------------------------------------------------------------------------
# regression
# ----------------------------------------------------------------------------------------


def _paired_arrays(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    _check_lengths(x, y)
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.size < 2:
        raise DataError(f"correlation needs at least 2 pairs, got {a.size}")
    return a, b


def _constant(values: np.ndarray) -> bool:
    return bool(np.all(values == values[0]))


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson r = sum((x-mx)(y-my)) / sqrt(sum((x-mx)^2) sum((y-my)^2)); nan when either
    input is constant (undefined; `order_correlations` scores a constant prediction 0)."""
    a, b = _paired_arrays(x, y)
    if _constant(a) or _constant(b):  # tested as such: x - mean(x) of equal floats need not be 0 (r was noise)
        return float("nan")
    da, db = a - a.mean(), b - b.mean()
    denominator = np.sqrt(np.dot(da, da) * np.dot(db, db))
    if denominator == 0:  # nonzero values too small to square
        return float("nan")
    return float(np.clip(np.dot(da, db) / denominator, -1.0, 1.0))


def average_ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks 1..n of `values`; tied values all get the mean of the ranks they span."""
    a = np.asarray(values, dtype=np.float64)
    order = np.argsort(a, kind="mergesort")
    sorted_values = a[order]
    # boundaries of runs of equal values in sorted order
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], a.size]  # exclusive
    run_rank = (starts + 1 + ends) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(a.size)
    ranks[order] = np.repeat(run_rank, ends - starts)
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rho = Pearson r of the average ranks (ties share their mean rank)."""
    a, b = _paired_arrays(x, y)
    return pearson(average_ranks(a), average_ranks(b))


def order_correlations(gold: Sequence[float], predicted: Sequence[float]) -> dict:
    """{"spearman", "pearson"} of predicted scores against gold ones, where a constant prediction
    scores 0 for both: it ranks no pair above another, chance's level (the similarity task's
    trivial baseline), not an undefined score that JSON writes as null. Gold scores all equal
    leave nothing to order: nan, as `pearson` and `spearman` give for any constant input."""
    a, b = _paired_arrays(gold, predicted)
    if _constant(b) and not _constant(a):
        return {"spearman": 0.0, "pearson": 0.0}
    return {"spearman": spearman(a, b), "pearson": pearson(a, b)}


# ----------------------------------------------------------------------------------------
# entity-level tagging metrics (conlleval / seqeval default mode)
# ----------------------------------------------------------------------------------------

_SCHEMES = {"IOB2": "BIO", "BIO": "BIO", "IOB1": "BIO", "IOBES": "BIOES", "BIOES": "BIOES"}


def _split_tag(tag: str, allowed: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', '')."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if not dash or len(prefix) != 1 or prefix not in allowed or not kind:
        raise DataError(
            f"tag {tag!r} is not 'O' or '<prefix>-<type>' with prefix in {', '.join(allowed)}; "
            "convert the tags to the scheme you pass"
        )
    return prefix, kind


def _chunk_ends(prev_prefix: str, prev_kind: str, prefix: str, kind: str) -> bool:
    """conlleval: does the chunk that contains the previous token end before this token?"""
    if prev_prefix in ("O", ""):
        return False
    if prev_prefix in ("E", "S"):
        return True
    if prefix in ("B", "S", "O"):
        return True
    return prev_kind != kind


def _chunk_starts(prev_prefix: str, prev_kind: str, prefix: str, kind: str) -> bool:
    """conlleval: does a chunk start at this token? (An I- or E- after O, after the end of a
    chunk, or after a different type starts one: the lenient reading.)"""
    if prefix == "O":
        return False
    if prefix in ("B", "S"):
        return True
    if prev_prefix in ("O", "", "E", "S"):
        return True
    return prev_kind != kind


def entity_spans(tags: Sequence[str], scheme: str = "IOB2") -> list[tuple[str, int, int]]:
    """Entities of one tag sequence as (type, first_index, last_index), inclusive.

    Decoding follows conlleval (seqeval's default, non-strict mode): an entity starts at B-
    (or S-), and also at an I-/E- that follows O, follows the end of another entity, or has a
    different type than the previous token; it ends before B-/S-/O, before a type change, or
    after E-/S-. This single rule reads IOB1, IOB2 (= BIO) and IOBES correctly.
    """
    if scheme not in _SCHEMES:
        raise DataError(f"unknown tagging scheme {scheme!r}; use one of {', '.join(_SCHEMES)}")
    allowed = _SCHEMES[scheme]
    spans = []
    prev_prefix, prev_kind, begin = "", "", 0
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = _split_tag(tag, allowed)
        if _chunk_ends(prev_prefix, prev_kind, prefix, kind):
            spans.append((prev_kind, begin, index - 1))
        if _chunk_starts(prev_prefix, prev_kind, prefix, kind):
            begin = index
        prev_prefix, prev_kind = prefix, kind
    return spans


def entity_prf(
    true_seqs: Sequence[Sequence[str]], pred_seqs: Sequence[Sequence[str]], scheme: str = "IOB2"
) -> dict:
    """Entity-level micro precision/recall/F1 over sentences, and per entity type.

    An entity counts as correct only when type, start and end all match. Returns
    {"precision", "recall", "f1", "per_type": {type: {"precision","recall","f1","support"}}}.
    Matches seqeval's default `f1_score`/`classification_report` (conlleval definition).
    """
    _check_lengths(true_seqs, pred_seqs)
    gold_all, pred_all = set(), set()
    for sentence, (gold_tags, pred_tags) in enumerate(zip(true_seqs, pred_seqs)):
        if len(gold_tags) != len(pred_tags):
            raise DataError(
                f"sentence {sentence}: {len(gold_tags)} gold tags but {len(pred_tags)} predicted; "
                "predict one tag per word"
            )
        gold_all.update((sentence,) + span for span in entity_spans(gold_tags, scheme))
        pred_all.update((sentence,) + span for span in entity_spans(pred_tags, scheme))
    correct = gold_all & pred_all
    precision, recall, f1 = _prf(len(correct), len(pred_all - gold_all), len(gold_all - pred_all))
    per_type = {}
    for kind in sorted({span[1] for span in gold_all | pred_all}):
        g = {s for s in gold_all if s[1] == kind}
        p = {s for s in pred_all if s[1] == kind}
        tp_p, tp_r, tp_f = _prf(len(g & p), len(p - g), len(g - p))
        per_type[kind] = {"precision": tp_p, "recall": tp_r, "f1": tp_f, "support": len(g)}
    return {"precision": precision, "recall": recall, "f1": f1, "per_type": per_type}


# ----------------------------------------------------------------------------------------
# SQuAD
# ----------------------------------------------------------------------------------------

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Official SQuAD normalisation: lowercase, drop ASCII punctuation, replace the articles
    a/an/the by spaces, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _exact(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _token_f1(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 of the normalised strings; two empty strings score 1 (SQuAD v2)."""
    return tokens_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def tokens_f1(pred_tokens: Sequence[str], gold_tokens: Sequence[str]) -> float:
    """SQuAD's bag-of-tokens F1 of two token lists already normalised (`normalize_answer`); two
    empty lists score 1."""
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_em_f1(prediction: str, gold_answers: Sequence[str]) -> tuple[float, float]:
    """(exact match, F1) of one prediction: the maximum over the gold answers.

    As in the official v2.0 script, gold answers that normalise to "" are ignored, and a
    question with no (remaining) gold answer is a no-answer question whose only gold is "":
    there the empty prediction scores 1 and anything else 0.
    """
    golds = [gold for gold in gold_answers if normalize_answer(gold)] or [""]
    return (max(_exact(prediction, gold) for gold in golds),
            max(_token_f1(prediction, gold) for gold in golds))


def squad_evaluate(dataset_answers, predictions: Mapping[str, str]) -> dict:
    """Official-style SQuAD scores in percent.

    dataset_answers: {question id: [gold answer texts]} (empty list = no answer), or a list
    of QAExample. predictions: {question id: predicted text} ("" = no answer). A question
    without a prediction scores 0 and is counted in "missing".
    Returns exact, f1, total, missing, and HasAns_*/NoAns_* breakdowns when both occur.
    """
    if not isinstance(dataset_answers, Mapping):
        dataset_answers = {ex.id: [a["text"] for a in ex.answers] for ex in dataset_answers}
    scores: dict[str, list[tuple[float, float]]] = {"HasAns": [], "NoAns": []}
    missing = 0
    for qid, golds in dataset_answers.items():
        if qid in predictions:
            exact, f1 = squad_em_f1(predictions[qid], golds)
        else:
            missing += 1
            exact, f1 = 0.0, 0.0
        has_answer = any(normalize_answer(gold) for gold in golds)
        scores["HasAns" if has_answer else "NoAns"].append((exact, f1))
    result = _percent_scores(scores["HasAns"] + scores["NoAns"], "")
    result["missing"] = missing
    for name, rows in scores.items():
        if rows:
            result.update(_percent_scores(rows, name + "_"))
    return result


def _percent_scores(rows: list[tuple[float, float]], prefix: str) -> dict:
    """{prefix+"exact", prefix+"f1"} as percentages and {prefix+"total"}."""
    return {
        prefix + "exact": 100.0 * float(np.mean([r[0] for r in rows])) if rows else 0.0,
        prefix + "f1": 100.0 * float(np.mean([r[1] for r in rows])) if rows else 0.0,
        prefix + "total": len(rows),
    }


# ----------------------------------------------------------------------------------------
# generated text
# ----------------------------------------------------------------------------------------

def text_tokens(text: str) -> list[str]:
    """Case-folded runs of letters and digits (`unicode_text.words`), so "Well-known" and a
    WordPiece decode's "well - known" are the same two tokens: on ASCII text rouge-score's default
    tokenizer (no stemming). In other scripts a letter keeps its marks and each CJK character is a
    token; rouge-score drops every non-ASCII letter, so Chinese, Hebrew or Cyrillic targets scored
    ROUGE-L 0 and any two of them matched exactly ("Größe" matched "Grüße")."""
    return words(fold_case(text).replace("_", " "), joiners="", symbols=False)


def text_exact_match(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of predictions whose tokens equal the reference's (case and punctuation aside)."""
    _check_lengths(references, predictions)
    if not predictions:
        return float("nan")
    return float(np.mean([text_tokens(p) == text_tokens(r) for p, r in zip(predictions, references)]))


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, one row at a time)."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 of one prediction: with L = LCS(prediction tokens, reference tokens),
    P = L / |prediction|, R = L / |reference|, F1 = 2PR / (P + R); 0 when either is empty or L = 0
    (rouge-score's `rougeL` fmeasure)."""
    pred, ref = text_tokens(prediction), text_tokens(reference)
    common = _lcs_length(pred, ref) if pred and ref else 0
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
