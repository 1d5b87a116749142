"""Trivial baselines of the built-in real data sets on the test subsets that
scripts/finetune_results.sh scores (`bertkit evaluate --limit 2000`), one JSON line each.

    python scripts/finetune_baselines.py

classification: the majority training label; tagging: each word's most frequent training tag;
QA: the first sentence of the context (SQuAD's sliding-window-free baseline), and for
wordnet-usage-qa also the expected exact match of picking one of the context's k candidate
words at random (1/k); for wordnet-qa also a lookup heuristic (the text after "<lemma>: " up to
the next ". ", or no answer when the lemma is not in the context), which shows how much of
that task is string matching; for wordnet-reverse-dictionary (seq2seq) also copying the source.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter

from bertkit.tasks import builtin_splits, get_task, subsample
from bertkit.tasks.metrics import squad_evaluate

LIMIT = 2000


def lemma_lookup(question: str, context: str) -> str:
    lemma = question.removeprefix("What is the definition of ").removesuffix("?")
    start = context.find(f"{lemma}: ")
    if start < 0:
        return ""
    start += len(lemma) + 2
    end = context.find(". ", start)
    return context[start:] if end < 0 else context[start:end]


def main() -> None:
    for name in ("wordnet-supersense", "wordnet-tagging", "wordnet-qa", "wordnet-usage-qa", "wordnet-gloss-choice",
                 "wordnet-reverse-dictionary"):
        splits = builtin_splits(name)
        test = subsample(splits["test"], LIMIT, 0)  # the subset `bertkit evaluate --limit` takes
        task = {"wordnet-supersense": "classification", "wordnet-tagging": "token-classification",
                "wordnet-gloss-choice": "multiple-choice", "wordnet-reverse-dictionary": "seq2seq"}.get(name, "qa")
        scores = get_task(task).baseline(splits["train"], test)
        if name == "wordnet-qa":
            scores["lemma_lookup"] = {k: v for k, v in squad_evaluate(
                test, {e.id: lemma_lookup(e.question, e.context) for e in test}).items()
                if k in ("exact", "f1")}
        if name == "wordnet-usage-qa":
            per_context = Counter(e.context for e in splits["test"])
            scores["random_candidate_exact"] = 100 * statistics.mean(1 / per_context[e.context] for e in test)
        if name == "wordnet-reverse-dictionary":
            scores["copy_source"] = get_task(task).metrics(test, [e.text for e in test])
        print(json.dumps({"data": name, "test_examples": len(test), "baseline": scores}))


if __name__ == "__main__":
    main()
