"""Trivial baselines of the built-in real data sets on the test subsets that
scripts/finetune_results.sh scores (`bertkit evaluate --limit 2000`), one JSON line each.

    python scripts/finetune_baselines.py [NAME ...]     # default: every set below

classification: the majority training label; tagging: each word's most frequent training tag; multiple
choice: the better on training examples of the most frequent answer position and TF-IDF cosine of the context
and each choice (wordnet-gloss-choice: TF-IDF, test 0.450 from all training examples; the position 0.237);
QA: the best of the context's first sentence and the sliding window, with "chance" beside it
(the exact expectation of a random span as long as the median training answer: wordnet-usage-qa
exact 3.4 on its test subset), and for wordnet-usage-qa also the expected exact match of picking
one of the k candidate words the context's questions ask about at random (1/k: 19.9, a level
that knows the set's construction, 5 questions per context, which chance does not); for
wordnet-qa also a lookup heuristic (the text after "<lemma>: " up to the next ". ", or no answer
when the lemma is not in the context), which shows how much of that task is string matching; for
the seq2seq sets (wordnet-reverse-dictionary, wordnet-definitions) the task's own baseline (the best on
training examples of the most frequent training target, the source's lead and word TF-IDF retrieval)
and copying the source; for wordnet-definitions also two nearest-neighbour lookups: the
definition of the training word with the most similar spelling (cosine of character 2-4-gram
TF-IDF vectors) and of the one with the most similar all-MiniLM-L6-v2 sentence embedding (cosine
of mean-pooled vectors).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import Counter

import numpy as np

from bertkit.data import assets
from bertkit.inference.encode import SentenceEncoder
from bertkit.tasks import builtin_splits, get_task, subsample
from bertkit.tasks.metrics import squad_evaluate

LIMIT = 2000
NAMES = ("wordnet-supersense", "wordnet-tagging", "wordnet-qa", "wordnet-usage-qa", "wordnet-gloss-choice",
         "wordnet-reverse-dictionary", "wordnet-definitions")
TASKS = {"wordnet-supersense": "classification", "wordnet-tagging": "token-classification",
         "wordnet-gloss-choice": "multiple-choice", "wordnet-reverse-dictionary": "seq2seq",
         "wordnet-definitions": "seq2seq"}


def lemma_lookup(question: str, context: str) -> str:
    lemma = question.removeprefix("What is the definition of ").removesuffix("?")
    start = context.find(f"{lemma}: ")
    if start < 0:
        return ""
    start += len(lemma) + 2
    end = context.find(". ", start)
    return context[start:] if end < 0 else context[start:end]


def nearest_targets(train_vectors, test_vectors, train) -> list[str]:
    """The target of the training example whose (L2-normalised) vector is closest to each test vector."""
    best = np.asarray((test_vectors @ train_vectors.T).argmax(axis=1)).ravel()
    return [train[i].label for i in best]


def spelling_neighbours(train, test) -> list[str]:
    from sklearn.feature_extraction.text import TfidfVectorizer  # a baseline-only dependency

    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True)
    train_vectors = vectorizer.fit_transform([e.text for e in train])
    return nearest_targets(train_vectors, vectorizer.transform([e.text for e in test]), train)


def embedding_neighbours(train, test) -> list[str]:
    encoder = SentenceEncoder.from_pretrained(assets.minilm_dir())

    def embed(examples):
        return encoder.encode([e.text for e in examples], batch_size=256, normalize=True, show_progress=False)

    return nearest_targets(embed(train), embed(test), train)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=NAMES, default=NAMES, help="built-in data sets (default: all)")
    for name in parser.parse_args().names:
        splits = builtin_splits(name)
        test = subsample(splits["test"], LIMIT, 0)  # the subset `bertkit evaluate --limit` takes
        task = get_task(TASKS.get(name, "qa"))
        scores = task.baseline(splits["train"], test)
        if name == "wordnet-qa":
            scores["lemma_lookup"] = {k: v for k, v in squad_evaluate(
                test, {e.id: lemma_lookup(e.question, e.context) for e in test}).items()
                if k in ("exact", "f1")}
        if name == "wordnet-usage-qa":
            per_context = Counter(e.context for e in splits["test"])
            scores["random_candidate_exact"] = 100 * statistics.mean(1 / per_context[e.context] for e in test)
        if TASKS.get(name) == "seq2seq":
            scores["copy_source"] = task.metrics(test, [e.text for e in test])
        if name == "wordnet-definitions":
            scores["nearest_spelling"] = task.metrics(test, spelling_neighbours(splits["train"], test))
            scores["nearest_minilm"] = task.metrics(test, embedding_neighbours(splits["train"], test))
        print(json.dumps({"data": name, "test_examples": len(test), "baseline": scores}), flush=True)


if __name__ == "__main__":
    main()
