"""Extractive question answering (SQuAD 1.1 / 2.0): the answer is a span of the context.

A long context becomes several overlapping windows ("doc stride"); each window keeps
`example_index`, `offsets` (T, 2) character spans in the context and `context_mask` (T,), and
in training `start_positions`/`end_positions`: the answer's first/last token when the window
holds the whole answer, else 0 ([CLS], "no answer in this window"). The prediction is the best
span over all windows, or "" when the null score wins (`qa_spans.merge_features`). Metrics:
SQuAD exact match and F1 (percent). Files: SQuAD JSON; for `predict` also .jsonl
{"id"?, "question", "context"}.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import replace
from typing import Sequence

import numpy as np

from bertkit.distill.tasks import TaskDistiller
from bertkit.errors import ConfigError, DataError
from bertkit.models.families import architectures_for
from bertkit.models.heads import BertForQuestionAnswering
from bertkit.io import iter_jsonl
from bertkit.tasks.common import (DataConfig, PredictionInput, TaskSpec, baseline_choice_rows, check_texts,
                                  forward_features, json_float)
from bertkit.tasks.formats import QAExample, read_squad
from bertkit.tasks.metrics import normalize_answer, squad_evaluate, tokens_f1
from bertkit.tasks.qa_spans import QAFeature, SpanPrediction, merge_features
from bertkit.tasks.spec import Task


# ---------------------------------------------------------------------------- reading
def read(path: str, data: DataConfig) -> list[QAExample]:
    return read_squad(path)


def read_inputs(path: str, data: DataConfig) -> PredictionInput:
    if os.path.splitext(path)[1].lower() != ".jsonl":
        return PredictionInput(read_squad(path, keep_all_questions=True))  # one row per question
    examples = []
    for line_number, record in iter_jsonl(path, blanks=True):
        if record is None:  # a blank line gets its (blank) row
            examples.append(QAExample(str(len(examples)), "", "", line=line_number))
            continue
        missing = [k for k in ("question", "context") if not isinstance(record.get(k), str)]
        if missing:
            raise DataError(f"{path}: line {line_number} needs a string field {missing[0]!r}")
        examples.append(QAExample(str(record.get("id", len(examples))), record["question"], record["context"],
                                  line=line_number))
    if all(not e.question for e in examples):  # none, or blank lines only
        raise DataError(f"{path}: no records")
    return PredictionInput(examples)


# ---------------------------------------------------------------------------- features
def encode_qa(tokenizer, examples: Sequence[QAExample], max_length: int, doc_stride: int,
              with_positions: bool = False, name: str = "data") -> list[dict]:
    """Windows over each (question, context); start/end token positions when `with_positions`."""
    if doc_stride >= max_length // 2:
        raise ConfigError(f"data.doc_stride={doc_stride} must be below half of data.max_length={max_length} "
                          f"(it is the overlap of neighbouring windows); e.g. doc_stride={max_length // 4}")
    questions = [e.question for e in examples]
    contexts = [e.context for e in examples]
    check_texts(questions, "question", name)
    check_texts(contexts, "context", name)
    try:
        enc = tokenizer(questions, contexts, padding=False, truncation=True, max_length=max_length,
                        stride=doc_stride, return_overflowing_tokens=True, return_offsets=True,
                        return_tensors=None)
    except DataError as e:  # windows the tokenizer cannot cut (a question leaving no more than the overlap)
        raise DataError(f"{name}: {e} (here the first text of pair N is question N, max_length is "
                        f"data.max_length={max_length} and the stride data.doc_stride={doc_stride})") from None
    features = []
    for row, ids in enumerate(enc["input_ids"]):
        example_index = enc["overflow_to_sample_mapping"][row]
        sequence_ids = enc.sequence_ids(row)
        context_mask = np.array([s == 1 for s in sequence_ids], dtype=bool)
        if not context_mask.any():
            raise DataError(f"{name}: question {example_index + 1} leaves no room for its context in "
                            f"data.max_length={max_length} tokens; shorten it or raise max_length")
        offsets = np.asarray(enc["offsets"][row], dtype=np.int64).reshape(-1, 2)
        feature = {"input_ids": np.asarray(ids, dtype=np.int64),
                   "token_type_ids": np.asarray(enc["token_type_ids"][row], dtype=np.int64),
                   "example_index": example_index, "offsets": offsets, "context_mask": context_mask}
        if with_positions:
            start, end = answer_positions(examples[example_index], offsets, context_mask)
            feature["start_positions"] = np.int64(start)
            feature["end_positions"] = np.int64(end)
        features.append(feature)
    return features


def answer_positions(example: QAExample, offsets: np.ndarray, context_mask: np.ndarray) -> tuple[int, int]:
    """(first, last) token of the example's first answer in this window, or (0, 0) for [CLS]
    when the question has no answer or the answer is not wholly inside the window."""
    if example.is_impossible or not example.answers:
        return 0, 0
    answer = example.answers[0]
    start_char = answer["answer_start"]
    end_char = start_char + len(answer["text"])
    positions = np.flatnonzero(context_mask)
    first, last = positions[0], positions[-1]
    if not (offsets[first, 0] <= start_char and offsets[last, 1] >= end_char):
        return 0, 0
    context_offsets = offsets[positions]
    # the token holding start_char, and the token holding the answer's last character
    start = positions[np.searchsorted(context_offsets[:, 1], start_char, side="right")]
    end = positions[np.searchsorted(context_offsets[:, 1], end_char, side="left")]
    return int(start), int(max(end, start))


def encode(tokenizer, examples, data: DataConfig, label2id: dict | None, training: bool, name: str):
    return encode_qa(tokenizer, examples, data.max_length, data.doc_stride, with_positions=training, name=name)


# ---------------------------------------------------------------------------- decoding
def cross_entropy(logits: np.ndarray, target: int) -> float:
    """-ln softmax(logits)[target], in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    return float(np.logaddexp.reduce(logits) - logits[target])


def window_loss(example: QAExample, feature: QAFeature) -> float:
    """One window's training loss (`heads.span_loss`): the mean of the start and end cross-entropies
    at the example's first answer's tokens, or at [CLS] when the window does not hold it whole."""
    start, end = answer_positions(example, np.asarray(feature.offsets), np.asarray(feature.context_mask))
    return (cross_entropy(feature.start_logits, start) + cross_entropy(feature.end_logits, end)) / 2


def decode(model, tokenizer, examples: Sequence[QAExample], spec: TaskSpec, name: str = "data",
           features: list | None = None) -> list[SpanPrediction]:
    """The best span (or no answer) of each question, over all windows of its context, with each
    window's loss against the question's answer (`window_loss`; the dev loss)."""
    data = spec.data
    if features is None:
        features = encode_qa(tokenizer, examples, data.max_length, data.doc_stride, name=name)
    outputs = forward_features(model, features, data.eval_batch_size, tokenizer.pad_token_id, data.eval_batching)
    by_example: list[list[QAFeature]] = [[] for _ in examples]
    for feature, (start, end) in zip(features, outputs):
        by_example[feature["example_index"]].append(
            QAFeature(start, end, feature["offsets"], feature["context_mask"]))
    return [replace(merge_features(windows, example.context, data.null_threshold, spec.allow_no_answer,
                                   data.n_best, data.max_answer_length),
                    window_losses=tuple(window_loss(example, window) for window in windows))
            for example, windows in zip(examples, by_example)]


def _scores(examples: Sequence[QAExample], answers: dict) -> dict:
    scores = squad_evaluate(examples, answers)
    return {k: float(v) for k, v in scores.items() if k != "missing"}


def metrics(examples: Sequence[QAExample], predictions: Sequence[SpanPrediction]) -> dict:
    """SQuAD exact match and F1 (percent), with HasAns/NoAns parts when both kinds occur, and the
    dev `loss` when every prediction carries its windows' losses: their mean over all windows, the
    model's own training loss on these questions. F1 and exact match over a small dev set tie
    between checkpoints; the loss still tells them apart, and the report reads it for its advice."""
    scores = _scores(examples, {e.id: p.text or "" for e, p in zip(examples, predictions)})
    if predictions and all(p.window_losses for p in predictions):
        scores["loss"] = float(np.mean([loss for p in predictions for loss in p.window_losses]))
    return scores


_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


_WORD = re.compile(r"\w+")
WINDOW = 5  # words each side of a candidate whose overlap with the question scores it


def _answer_words(train: Sequence[QAExample]) -> int:
    """The median length in words of the training answers (1 to 5; 1 without any)."""
    lengths = sorted(len(_WORD.findall(a["text"])) for e in train for a in (e.answers or [])[:1])
    return min(5, max(1, lengths[len(lengths) // 2])) if lengths else 1


def sliding_window_answer(question: str, context: str, width: int = 1) -> str:
    """The sliding-window baseline of the SQuAD paper (Rajpurkar et al. 2016, after Richardson et
    al. 2013): the `width` consecutive context words, none a question word, whose WINDOW words on
    each side hold the most question words, each occurrence weighted log(1 + 1/its count in the
    context) so rare words count most (ties: the earliest); "" when no candidate. Vectorised
    (running sums), so a long context costs linear time."""
    spans = [m.span() for m in _WORD.finditer(context)]
    words = [context[a:b].lower() for a, b in spans]
    n = len(words) - width + 1
    if n <= 0:
        return ""
    asked_words = {w.lower() for w in _WORD.findall(question)}
    counts = Counter(words)
    asked = np.array([w in asked_words for w in words])
    weight = np.where(asked, [np.log1p(1 / counts[w]) for w in words], 0.0)
    total, hits = np.r_[0.0, np.cumsum(weight)], np.r_[0, np.cumsum(asked)]
    start = np.arange(n)
    end = start + width
    score = (total[start] - total[np.maximum(0, start - WINDOW)]
             + total[np.minimum(len(words), end + WINDOW)] - total[end])
    score[hits[end] - hits[start] > 0] = 0.0  # a candidate holding a question word is no answer
    best = int(np.argmax(score))  # the first of the best
    return context[spans[best][0]:spans[best + width - 1][1]] if score[best] > 0 else ""


def _span_tokens(context: str, width: int) -> list[list[str]]:
    """The normalised tokens of every span of `width` consecutive context words (the whole context
    when it has fewer words; none without a word)."""
    spans = [m.span() for m in _WORD.finditer(context)]
    if not spans:
        return []
    starts = range(len(spans) - width + 1) if len(spans) >= width else [0]
    return [normalize_answer(context[spans[i][0]:spans[min(i + width, len(spans)) - 1][1]]).split() for i in starts]


def chance(examples: Sequence[QAExample], width: int) -> dict:
    """Chance level: the expected SQuAD exact match and F1 (percent) of answering each question with a
    span of `width` consecutive context words drawn uniformly at random, computed exactly (the mean
    over every such span, not a sample). On wordnet-usage-qa (1-word answers, ~31 words a context):
    exact 3.4; scripts/finetune_baselines.py's random *candidate* (one of the 5 words a context's
    questions ask about: 19.9) knows that set's construction, which chance does not."""
    exact = f1 = 0.0
    spans_of: dict[str, list[list[str]]] = {}  # a context's spans, once for all its questions
    for e in examples:
        spans = spans_of.setdefault(e.context, _span_tokens(e.context, width))
        golds = [g.split() for g in (normalize_answer(a["text"]) for a in e.answers or []) if g] or [[]]
        if spans:
            exact += sum(any(tokens == g for g in golds) for tokens in spans) / len(spans)
            f1 += sum(max(tokens_f1(tokens, g) for g in golds) for tokens in spans) / len(spans)
        else:  # no word to draw: the answer is ""
            exact, f1 = exact + (golds == [[]]), f1 + (golds == [[]])
    count = max(1, len(examples))
    return {"method": f"a random {width}-word span", "exact": 100 * exact / count, "f1": 100 * f1 / count}


def baseline(train, examples: Sequence[QAExample]) -> dict:
    """The best (by F1 on the training questions, up to ~2,000 of them, as seq2seq's and multiple choice's
    baselines choose; on the scored questions themselves only where no training question is given) of
    simple answers given to every question: the context's first sentence; the sliding-window answer
    (`sliding_window_answer`, as long as the median training answer); and, where some training questions
    have no answer (SQuAD 2.0), "no answer": the score of a model that learnt only to abstain; "method"
    names the one chosen. Beside it, "chance": the expected scores of a random span as long as the median
    training answer (`chance`), the level a model must clear whatever the heuristics score (walk W: first
    sentence scored exact 0 on wordnet-usage-qa). Session 36: the pick was made on the scored questions,
    a choice of the test set's best of three."""
    width = _answer_words(train)
    answerers = {"first sentence": lambda e: _SENTENCE_END.split(e.context, maxsplit=1)[0],
                 "sliding window": lambda e: sliding_window_answer(e.question, e.context, width)}
    if any(e.is_impossible for e in (train or examples)):
        answerers["no answer"] = lambda e: ""
    train = list(train)
    sample = [train[i] for i in baseline_choice_rows(len(train))] or list(examples)

    def scores(name: str, questions: Sequence[QAExample]) -> dict:
        return {"method": name, **_scores(questions, {e.id: answerers[name](e) for e in questions})}

    chosen = max(answerers, key=lambda name: scores(name, sample)["f1"])  # the first of the best
    return {**scores(chosen, examples), "chance": chance(examples, width)}


def rows(model, predictions: Sequence[SpanPrediction], inputs: PredictionInput) -> list[dict]:
    """{"id", "answer", "start", "end", "score", "no_answer"}, offsets into the context."""
    return [{"id": e.id, "answer": a.text or "", "start": a.start_char, "end": a.end_char,
             "score": json_float(a.score), "no_answer": a.is_impossible}
            for e, a in zip(inputs.examples, predictions)]


QA = Task(
    name="qa",
    description="extractive question answering: the answer is a span of the context (SQuAD 1.1/2.0)",
    model_class=BertForQuestionAnswering,
    read=read, read_inputs=read_inputs, encode=encode, decode=decode, metrics=metrics, baseline=baseline,
    rows=rows, metric_names=("f1", "exact", "loss"), lower_is_better=frozenset({"loss"}),
    head_config=lambda labels: {"num_labels": 2, "id2label": None, "label2id": None, "problem_type": None},
    architectures=architectures_for(BertForQuestionAnswering),
    # SQuAD 2.0 data (some questions unanswerable) lets the model answer "" as well
    allows_no_answer=lambda train: any(e.is_impossible for e in train),
    blank_row=lambda example: {"id": example.id, "answer": None, "start": None, "end": None, "score": None,
                               "no_answer": None},
    # a QA set has answers, not labels (the file reader has already checked each answer's answer_start)
    check_data="check that each answer is the span that answers its question and is at most "
               "data.max_answer_length tokens (a longer one cannot be predicted)",
    file_only=True, distiller=TaskDistiller,
    export_outputs={"start_logits": ("batch", "sequence"), "end_logits": ("batch", "sequence")},
)
