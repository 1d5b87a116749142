"""Sentence embeddings for search: train a bi-encoder so that a text lands near its match.

`bertkit finetune --task embedding` trains on (text, positive[, negative]) rows: a query or
question and the passage that answers it, a title and its article, two paraphrases. The model
is the checkpoint's encoder with its sentence-transformers pooling (mean pooling and
normalisation for a plain checkpoint), trained with the in-batch negatives loss
(bertkit/models/sentence_embedding.py); the saved directory loads in `bertkit embed`,
`SentenceEncoder` and sentence-transformers.

Scoring is retrieval (bertkit/tasks/retrieval.py): every text of the evaluated set is a query,
ranked by cosine against the corpus of all the set's positives (and negatives); metrics
mrr@10 (selects the checkpoint), recall@1, recall@10. The dev set scores the model before the
first step too (`Task.starts_trained`): a checkpoint that was already an embedding model is
the score to beat, and stays the kept model when fine-tuning does not beat it. Beside the score:
chance (the trivial baseline) and BM25 on the same queries and corpus (the reference).

Files: CSV, TSV or JSONL with a `text` and a `positive` column, and optionally a `negative`
column (a hard negative on every row): `data.text_column`, `data.positive_column`,
`data.negative_column`. Rows may share a positive (several questions, one answer): in a batch,
the copy is left out of the other row's negatives. `predict` reads .txt (one text per line) or a
table's text column and writes {"embedding": [...]} per text (`bertkit embed` writes the same
vectors as .npy).
"""

from __future__ import annotations

import os
import warnings
from typing import Sequence

import numpy as np

from bertkit.errors import DataError
from bertkit.io import check_regular_file, is_json_array, iter_csv_rows, json_lines_fix
from bertkit.models.families import families
from bertkit.models.sentence_embedding import SentenceEmbeddingModel
from bertkit.tasks import retrieval, sequence
from bertkit.tasks.common import (DataConfig, PredictionInput, TaskSpec, check_texts, forward_features,
                                  truncation_warning)
from bertkit.tasks.formats import PairExample
from bertkit.tasks.spec import Task
from bertkit.tasks.tables import is_table, iter_records


# ---------------------------------------------------------------------------- reading
def read(path: str, data: DataConfig) -> list[PairExample]:
    """Rows of a CSV, TSV or JSONL file (or Parquet / a saved `datasets` directory) with the text
    and positive columns; the negative column is read when the file has it."""
    table = is_table(path)
    if not table:
        check_regular_file(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix in (".csv", ".tsv"):
        records = ((line, row) for line, row, _ in iter_csv_rows(path, "\t" if suffix == ".tsv" else ","))
    elif suffix == ".jsonl" or table:
        records = iter_records(path)
    elif suffix == ".json" and is_json_array(path):
        raise DataError(f"{path} is one JSON array; embedding data is .csv, .tsv or JSON lines (.jsonl): "
                        f"{json_lines_fix(path)}")
    else:
        raise DataError(f"{path}: unknown extension {suffix!r}; embedding data is .csv, .tsv or .jsonl with "
                        f"{data.text_column!r} and {data.positive_column!r} columns")
    examples = [_example(path, line, record, data) for line, record in records]
    if not examples:
        raise DataError(f"{path}: no rows; put one (text, positive) pair per row")
    with_negative = [e.negative is not None for e in examples]
    if any(with_negative) and not all(with_negative):
        line = examples[with_negative.index(False)].line
        raise DataError(f"{path}: line {line} has no {data.negative_column!r} while other rows have one; give "
                        f"every row a hard negative, or none (drop the column)")
    return examples


def _example(path: str, line: int, record: dict, data: DataConfig) -> PairExample:
    columns = {"text": data.text_column, "positive": data.positive_column}
    missing = [role for role, column in columns.items() if column not in record]
    if missing:
        names = " and ".join(repr(columns[role]) for role in missing)
        settings = " ".join(f"data.{role}_column=NAME" for role in missing)
        raise DataError(f"{path}: line {line} has no {names} column (columns: {', '.join(record)}); name the "
                        f"column{'s' if len(missing) > 1 else ''} that hold{'' if len(missing) > 1 else 's'} "
                        f"the {' and the '.join(missing)} with --set {settings}")
    values = {role: record[column] for role, column in columns.items()}
    negative = record.get(data.negative_column)
    if negative is not None and not (isinstance(negative, str) and negative.strip()):
        negative = None  # an empty cell: the row has no hard negative (refused above if others have one)
    for role, value in [*values.items(), ("negative", negative)]:
        if value is not None and not isinstance(value, str):
            raise DataError(f"{path}: line {line}: the {role} must be a string, got {value!r}")
    return PairExample(values["text"], values["positive"], negative, line)


# ---------------------------------------------------------------------------- features
def _texts_of(example) -> list[str]:
    """Every text of an example: a pair's text and candidates, or a text to embed."""
    return [example.text, *example.candidates] if isinstance(example, PairExample) else [example.text]


def encode(tokenizer, examples, data: DataConfig, label2id: dict | None, training: bool, name: str) -> list[dict]:
    """Training: one feature per pair, its rows (text, positive[, negative]) as a multiple-choice
    feature's (the collator makes (B, C, T) batches). Otherwise one feature per text, each
    recording its example ("example") for `decode` to regroup."""
    if examples and isinstance(examples[0], PairExample):
        _check_pairs(examples, training, name)
    else:
        check_texts([e.text for e in examples], "text", name)
    texts, owners = [], []
    for index, example in enumerate(examples):
        own = _texts_of(example)
        texts += own
        owners += [index] * len(own)
    rows = token_rows(tokenizer, texts, data, name)
    if not training:
        return [{"input_ids": row, "token_type_ids": np.zeros_like(row), "example": owner}
                for row, owner in zip(rows, owners)]
    features, start = [], 0
    for example in examples:
        own = rows[start:start + len(_texts_of(example))]
        start += len(own)
        features.append({"input_ids": own, "token_type_ids": [np.zeros_like(r) for r in own]})
    return features


def token_rows(tokenizer, texts: Sequence[str], data: DataConfig, name: str) -> list[np.ndarray]:
    """Each text's token ids, cut to data.max_length, with one summary warning for the cut ones
    (instead of the tokenizer's own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = tokenizer(texts, padding=False, truncation=True, max_length=data.max_length,
                        return_tensors=None)["input_ids"]
    rows = [np.asarray(row, dtype=np.int64) for row in ids]
    truncation_warning(sum(len(r) >= data.max_length for r in rows), len(rows), data.max_length, name, "texts")
    return rows


def _check_pairs(examples: Sequence[PairExample], training: bool, name: str) -> None:
    """Empty texts (by their line), too few pairs to learn or rank."""
    for index, example in enumerate(examples):
        for role in ("text", "positive", "negative"):
            value = getattr(example, role)
            if value is not None and not value.strip():
                where = f"line {example.line}" if example.line else f"example {index + 1}"
                raise DataError(f"{name}: {where} has an empty {role}; fill it in or remove that row")
    same = sum(example.text.strip() == example.positive.strip() for example in examples)
    if training and same:  # a column named twice, or copied: such pairs are solved before any step
        warnings.warn(f"{name}: {same} of {len(examples)} pairs have a positive equal to their text, which teaches "
                      "nothing; check that data.positive_column names the matching text's column")
    if training and len(examples) < 2:
        raise DataError(f"{name}: {len(examples)} pair; the in-batch negatives loss needs at least 2 (each pair's "
                        "negatives are the other pairs' positives): add pairs")
    candidates = {text for example in examples for text in example.candidates}
    if not training and len(candidates) < 2:
        raise DataError(f"{name}: {len(candidates)} distinct positive; ranking needs at least 2 (every score would "
                        "be 1): add pairs")


# ---------------------------------------------------------------------------- decoding
def decode(model, tokenizer, examples: Sequence, spec: TaskSpec, name: str = "data",
           features: list | None = None) -> list[np.ndarray]:
    """Per example, its texts' vectors (text, positive, negative; or the one text), L2-normalised."""
    if features is None:
        features = encode(tokenizer, examples, spec.data, None, False, name)
    vectors = forward_features(model, features, spec.data.eval_batch_size, tokenizer.pad_token_id,
                               spec.data.eval_batching)
    grouped: list[list] = [[] for _ in examples]
    for feature, vector in zip(features, vectors):
        grouped[feature["example"]].append(vector)
    out = [np.stack(rows).astype(np.float64) for rows in grouped]
    return [v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for v in out]


def metrics(examples: Sequence[PairExample], predictions: Sequence[np.ndarray]) -> dict:
    """Each text ranked by cosine against the corpus of every example's candidates."""
    documents, ids = retrieval.corpus_of([e.candidates for e in examples])
    corpus = np.zeros((len(documents), predictions[0].shape[1]))
    for own, vectors in zip(ids, predictions):
        corpus[own] = vectors[1:]
    queries = np.stack([vectors[0] for vectors in predictions])
    relevant = np.array([own[0] for own in ids])
    return retrieval.ranking_metrics(*retrieval.ranks(queries @ corpus.T, relevant))


def baseline(train: Sequence[PairExample], examples: Sequence[PairExample]) -> dict:
    """Chance: a random order of the corpus."""
    return retrieval.chance_metrics(len(retrieval.corpus_of([e.candidates for e in examples])[0]))


def reference(examples: Sequence[PairExample]) -> dict:
    """BM25 on the same queries and corpus."""
    return {"method": "BM25", **retrieval.bm25_metrics([e.text for e in examples], [e.candidates for e in examples])}


def rows(model, predictions: Sequence[np.ndarray], inputs: PredictionInput) -> list[dict]:
    return [{"embedding": [round(float(x), 6) for x in vectors[0]]} for vectors in predictions]


def build_model(model_dir: str, task: Task, labels, overrides: dict) -> SentenceEmbeddingModel:
    """The checkpoint's encoder with its pooling; `overrides` (dropout) change the encoder's config."""
    return SentenceEmbeddingModel.from_pretrained(model_dir, **overrides)


EMBEDDING = Task(
    name="embedding",
    description="sentence embeddings for search: (text, positive[, negative]) pairs, in-batch negatives",
    model_class=SentenceEmbeddingModel,
    # predict's texts to embed: .txt lines or a table's text column, as a text classifier reads them
    read=read, read_inputs=sequence.read_inputs, encode=encode, decode=decode, metrics=metrics, baseline=baseline,
    rows=rows, metric_names=retrieval.METRIC_NAMES,
    build_model=build_model,
    # every family's encoder serves (the model wraps it): no per-family head class
    head_classes={model_type: SentenceEmbeddingModel for family in families() for model_type in family.model_types},
    blank_row=lambda example: {"embedding": None},
    reference=reference,
    peft=False,  # PEFT's adapter files name a transformers head class; a sentence-transformers model has none
    freeze_encoder=False,  # a sentence model is its encoder: frozen, nothing would train
    starts_trained=True,
)
