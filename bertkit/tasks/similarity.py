"""Sentence similarity on scored pairs (STS-style): train a bi-encoder whose cosine ranks pairs as the gold scores do.

`bertkit finetune --task similarity` trains on (text, text_pair, score) rows: two sentences and how
alike they are, on any scale (STS-B's 0-5, 0-1, a count). The model is the embedding task's
(bertkit/models/sentence_embedding.py: the checkpoint's encoder with its sentence-transformers
pooling; the saved directory loads in `bertkit embed`, `SentenceEncoder` and sentence-transformers),
trained with the CoSENT loss (Su 2022; sentence-transformers' CoSENTLoss, scale 20): for the B
pairs of a batch, with c_i = 20 cos(u_i, v_i) the scaled cosine of pair i's two vectors,

    loss = log(1 + sum_{(i, j): y_i > y_j} exp(c_j - c_i))

which asks only that a pair scored higher by the gold get the higher cosine: the scale of the
scores does not matter, and neither does the cosine's absolute value. (A regression head on the
concatenated pair, `--task regression`, is the cross-encoder alternative: often more accurate,
but it scores a pair, not a sentence, so it cannot index a corpus.)

Scoring: the cosine of each evaluated pair against its gold score; metrics spearman (selects the
checkpoint: the STS standard, the order alone) and pearson. The dev set scores the model before
the first step (`Task.starts_trained`): an embedding model may already rank well, and stays the
kept model when fine-tuning does not beat it. Beside the score: chance (the trivial baseline: a
constant or random score has no order, spearman and pearson 0 in expectation) and TF-IDF cosine
(the reference, `tfidf_cosines`).

Files: CSV, TSV or JSONL (or Parquet / a saved `datasets` directory) with a `text`, a `text_pair`
and a `label` column, the label a number: `data.text_column`, `data.pair_column` (empty: "text_pair")
and `data.label_column`, read by the regression task's reader. `predict` reads the same files without
the label and writes {"score": cosine} per pair; a pair with an empty text gets {"score": null}.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import Sequence

import numpy as np

from bertkit.errors import DataError
from bertkit.models.sentence_embedding import SentenceEmbeddingModel
from bertkit.tasks import embedding
from bertkit.tasks.common import DataConfig, PredictionInput, TaskSpec, check_texts
from bertkit.tasks.formats import PAIR_COLUMN, TextExample, read_text_dataset
from bertkit.tasks.metrics import order_correlations
from bertkit.tasks.retrieval import words
from bertkit.tasks.spec import Task

METRIC_NAMES = ("spearman", "pearson")


# ---------------------------------------------------------------------------- reading
def pair_column(data: DataConfig) -> str:
    return data.pair_column or PAIR_COLUMN


def read(path: str, data: DataConfig) -> list[TextExample]:
    """Scored pairs: the regression reader with the pair column required and the label a number;
    a file whose scores are all the same is refused (nothing to order)."""
    examples = read_text_dataset(path, data.text_column, pair_column(data), data.label_column, "number")
    if not examples:
        raise DataError(f"{path}: no rows; put one (text, text_pair, score) row per line")
    missing = next((e for e in examples if e.label is None), None)
    if missing is not None:
        raise DataError(f"{path}: line {missing.line} has no score in {data.label_column!r}; give every pair a number")
    refuse_one_score(path, examples)
    return examples


def refuse_one_score(source: str, examples: Sequence[TextExample], kept: int = 0) -> None:
    """Pairs that all have one score, named by their source (a file, or a built-in name and split)
    and the score: the CoSENT loss and spearman compare pairs scored differently, so there is
    nothing to learn or measure. `kept`: the data.max_train_examples that cut them to these."""
    if not examples or len({e.label for e in examples}) > 1:
        return
    which = f"every pair of the {len(examples)} data.max_train_examples={kept} keeps" if kept else "every pair"
    raise DataError(f"{source}: {which} has the score {examples[0].label:g}; similarity needs pairs of at least 2 "
                    "different scores (the loss and spearman compare pairs scored differently)")


def read_inputs(path: str, data: DataConfig) -> PredictionInput:
    """Unlabelled pairs from a CSV, TSV or JSONL file (a .txt line holds one text, not a pair)."""
    if os.path.splitext(path)[1].lower() == ".txt":
        raise DataError(f"{path}: similarity scores text pairs; a .txt file holds one text per line: give a CSV, "
                        f"TSV or JSONL file with {data.text_column!r} and {pair_column(data)!r} columns")
    return PredictionInput(read_text_dataset(path, data.text_column, pair_column(data), None))


def _has_both(example: TextExample) -> bool:
    return bool(example.text.strip()) and bool((example.text_pair or "").strip())


# ---------------------------------------------------------------------------- features
def encode(tokenizer, examples: Sequence[TextExample], data: DataConfig, label2id: dict | None, training: bool,
           name: str) -> list[dict]:
    """Training: one feature per pair, its two texts as a multiple-choice feature's rows (the
    collator makes (B, 2, T) batches) and its score as `labels`. Otherwise one feature per text,
    each recording its pair ("example") for `decode` to regroup."""
    check_texts([e.text for e in examples], "text", name)
    check_texts([e.text_pair or "" for e in examples], "second text (text_pair)", name)
    if training:  # a set with several scores may keep one after data.max_train_examples's cut
        cut = data.max_train_examples == len(examples)
        refuse_one_score(name, examples, data.max_train_examples if cut else 0)
    rows = embedding.token_rows(tokenizer, [text for e in examples for text in (e.text, e.text_pair)], data, name)
    if not training:
        return [{"input_ids": row, "token_type_ids": np.zeros_like(row), "example": index // 2}
                for index, row in enumerate(rows)]
    return [{"input_ids": rows[2 * i:2 * i + 2], "token_type_ids": [np.zeros_like(r) for r in rows[2 * i:2 * i + 2]],
             "labels": np.float32(e.label)} for i, e in enumerate(examples)]


# ---------------------------------------------------------------------------- decoding
def decode(model, tokenizer, examples: Sequence[TextExample], spec: TaskSpec, name: str = "data",
           features: list | None = None) -> list[float | None]:
    """Per pair, the cosine of its two texts' vectors; None for a pair with an empty text (predict)."""
    if features is None:  # a pair with an empty text is not embedded
        kept = [i for i, e in enumerate(examples) if _has_both(e)]
        features = encode(tokenizer, [examples[i] for i in kept], spec.data, None, False, name)
    else:  # the caller's features of every pair (fine-tuning's dev set)
        kept = list(range(len(examples)))
    # per kept pair its two L2-normalised vectors, regrouped by the features' "example"
    vectors = embedding.decode(model, tokenizer, kept, spec, name, features) if kept else []
    cosines = dict(zip(kept, (float(pair[0] @ pair[1]) for pair in vectors)))
    return [cosines.get(i) for i in range(len(examples))]


def metrics(examples: Sequence[TextExample], predictions: Sequence[float]) -> dict:
    """Spearman's and Pearson's correlation of the predicted scores with the gold ones; a constant
    prediction (TF-IDF cosines of pairs that share no word: all 0) has no order and scores 0 for
    both, as the trivial baseline does."""
    return order_correlations([e.label for e in examples], predictions)


def baseline(train: Sequence[TextExample], examples: Sequence[TextExample]) -> dict:
    """Chance: a score with no relation to the pair (a random one; a constant has no order at
    all). Both correlations are 0 in expectation."""
    return {"spearman": 0.0, "pearson": 0.0}


def tfidf_cosines(examples: Sequence[TextExample], fitted_on: Sequence[str] | None = None) -> list[float]:
    """Per pair, the cosine of its two texts' TF-IDF vectors over case-folded words (`retrieval.words`):

        tfidf(t, d) = (1 + ln tf(t, d)) * (1 + ln((1 + N) / (1 + df(t))))

    rows L2-normalised (scikit-learn's TfidfVectorizer with sublinear_tf and its smoothed idf).
    The vocabulary and document frequencies are those of `fitted_on` (N texts), by default the
    pairs' own texts: no score is read, so it needs no training data. A word the fitted texts
    lack is left out (as scikit-learn's transform does)."""
    texts = [text for e in examples for text in (e.text, e.text_pair)]
    fitted = texts if fitted_on is None else fitted_on
    df = Counter(term for text in fitted for term in set(words(text)))
    n = len(fitted)

    def vector(text: str) -> dict:
        weights = {t: (1 + math.log(c)) * (1 + math.log((1 + n) / (1 + df[t])))
                   for t, c in Counter(words(text)).items() if t in df}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {t: w / norm for t, w in weights.items()}

    cosines = []
    for e in examples:
        a, b = vector(e.text), vector(e.text_pair)
        cosines.append(sum(w * b[t] for t, w in a.items() if t in b))
    return cosines


def reference(examples: Sequence[TextExample]) -> dict:
    """TF-IDF cosine of each pair, its idf counted over the evaluated pairs' texts."""
    return {"method": "TF-IDF cosine", **metrics(examples, tfidf_cosines(examples))}


def rows(model, predictions: Sequence[float | None], inputs: PredictionInput) -> list[dict]:
    return [{"score": None if score is None else round(score, 6)} for score in predictions]


SIMILARITY = Task(
    name="similarity",
    description="sentence similarity: (text, text_pair, score) pairs, a bi-encoder trained by CoSENT",
    model_class=SentenceEmbeddingModel,
    read=read, read_inputs=read_inputs, encode=encode, decode=decode, metrics=metrics, baseline=baseline,
    rows=rows, metric_names=METRIC_NAMES,
    build_model=embedding.build_model,
    head_classes=embedding.EMBEDDING.head_classes,
    blank_row=lambda example: {"score": None},
    reference=reference,
    peft=False,  # as embedding: PEFT's adapter files name a transformers head class, a sentence model has none
    freeze_encoder=False,  # a sentence model is its encoder: frozen, nothing would train
    starts_trained=True,
)
