"""Ranking metrics and the lexical baseline of retrieval: numpy only.

A query's relevant document is ranked among a corpus by a score (cosine of embeddings, or
BM25). With h other documents scoring higher and t others the same, ties are broken at random:
its rank is equally likely any of h + 1 .. h + t + 1, and each metric is its expected value
over those ranks (exact, not sampled). So a method that scores every document alike (BM25 for a
query sharing no word with the corpus) gets chance, neither the first place nor the last.
Metrics, means over queries of

    mrr@10     1 / rank when rank <= 10, else 0 (mean reciprocal rank, MS MARCO's cut-off)
    recall@k   1 when rank <= k, else 0 (the relevant document is in the top k)

Chance (a random order of N documents): recall@k = k / N, mrr@10 = (1 / N) sum_{r <= min(10, N)} 1 / r.

BM25 (Robertson et al.) as Lucene scores it, the strongest simple retrieval method and the
baseline an embedding model must beat on the same queries and corpus:

    score(q, d) = sum_{t in q} idf(t) * tf(t, d) / (tf(t, d) + k1 (1 - b + b |d| / avgdl))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),   k1 = 1.2, b = 0.75

over case-folded words (`words`: runs of letters and digits in any script, each CJK character a
word; on ASCII text `\\w+` of the lower-cased text), a query term counted once per occurrence
(Lucene drops the classic (k1 + 1) factor of the numerator: the same order).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from bertkit.tasks.unicode_text import fold_case
from bertkit.tasks.unicode_text import words as unicode_words

METRIC_NAMES = ("mrr@10", "recall@1", "recall@10")
BM25_K1, BM25_B = 1.2, 0.75


def ranks(scores: np.ndarray, relevant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Q, N) scores and each query's relevant document (Q,) -> the best and the worst rank it
    may get (1 = first): (1 + h, 1 + h + t) with h documents above it and t others tied with it."""
    own = scores[np.arange(len(scores)), relevant][:, None]
    higher = (scores > own).sum(axis=1)
    return higher + 1, (scores >= own).sum(axis=1)  # its own document is one of the ">=": worst >= best


def ranking_metrics(best: np.ndarray, worst: np.ndarray | None = None) -> dict:
    """Means over queries of each metric's expected value over ranks best .. worst (inclusive;
    `worst` None: the rank is `best`)."""
    best = np.asarray(best, dtype=np.int64)
    worst = best if worst is None else np.asarray(worst, dtype=np.int64)
    places = (worst - best + 1).astype(np.float64)
    reciprocal = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, 11))])  # sum_{r <= k} 1/r, k = 0..10

    def within(k: int) -> np.ndarray:  # how many of the ranks best .. worst are <= k
        return np.clip(np.minimum(worst, k) - best + 1, 0, None)

    mrr = reciprocal[np.minimum(worst, 10)] - reciprocal[np.minimum(best - 1, 10)]
    return {"mrr@10": float((mrr / places).mean()), "recall@1": float((within(1) / places).mean()),
            "recall@10": float((within(10) / places).mean())}


def chance_metrics(documents: int) -> dict:
    """The expected metrics of a random order of `documents` documents: every rank alike."""
    return ranking_metrics(np.array([1]), np.array([documents]))


def corpus_of(candidates: Sequence[Sequence[str]]) -> tuple[list[str], list[list[int]]]:
    """Per query, its candidate texts (the relevant one first) -> (the distinct texts, in order
    of first appearance; per query, its candidates' indices there). A text shared by several
    queries is one document of the corpus."""
    index: dict[str, int] = {}
    ids = [[index.setdefault(text, len(index)) for text in texts] for texts in candidates]
    return list(index), ids


def words(text: str) -> list[str]:
    """The terms of BM25 (and of similarity's TF-IDF baseline): `unicode_text.word_spans` of the
    case-folded text without joiners or punctuation, so "股市今天" is four terms and "İstanbul"
    one, "istanbul"."""
    return unicode_words(fold_case(text), joiners="", symbols=False)


def bm25_scores(queries: Sequence[str], documents: Sequence[str], k1: float = BM25_K1, b: float = BM25_B
                ) -> np.ndarray:
    """(Q, N) BM25 scores of each query against each document (the module docstring)."""
    counts = [Counter(words(d)) for d in documents]
    lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
    norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
    postings: dict[str, list[tuple[int, int]]] = {}
    for doc, count in enumerate(counts):
        for term, tf in count.items():
            postings.setdefault(term, []).append((doc, tf))
    n = len(documents)
    scores = np.zeros((len(queries), n))
    for row, query in enumerate(queries):
        for term in words(query):
            posting = postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            docs = np.fromiter((d for d, _ in posting), dtype=np.int64, count=len(posting))
            tf = np.fromiter((t for _, t in posting), dtype=np.float64, count=len(posting))
            scores[row, docs] += idf * tf / (tf + norm[docs])
    return scores


def bm25_metrics(queries: Sequence[str], candidates: Sequence[Sequence[str]]) -> dict:
    """BM25's ranking metrics: each query against the corpus of every query's candidates."""
    documents, ids = corpus_of(candidates)
    relevant = np.array([own[0] for own in ids])
    return ranking_metrics(*ranks(bm25_scores(queries, documents), relevant))


def top_matches(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(Q, D) and (N, D) L2-normalised vectors -> per query the k best corpus rows by cosine,
    best first: (indices (Q, min(k, N)), scores); equal scores keep corpus order."""
    scores = queries @ corpus.T
    k = min(k, corpus.shape[0])
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)
