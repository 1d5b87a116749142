"""The strongest simple baseline for BBC topics: TF-IDF (word 1-2 grams, sublinear tf) + logistic
regression, trained on bertkit's `bbc` train split and scored on its test split, on whole
articles and on their first N words (about the tokens a 128-token model sees), for a few
regularisation strengths C. Each C is also scored on the dev split, and the C with the best dev
accuracy on the first N words is reported: the baseline chosen the way a fine-tuned model's
settings are chosen. The best C on test is an upper bound for the baseline. `--train-examples N`
trains on the seeded subset that `bertkit finetune --set data.max_train_examples=N` (train.seed 0)
trains on, for a baseline beside a model fine-tuned on it; `--test-examples M` scores the subset
`bertkit evaluate --limit M` scores.

    python scripts/tfidf_baseline.py [--words 100] [--train-examples N] [--test-examples M]
"""

from __future__ import annotations

import argparse
import json

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score

from bertkit.tasks import builtin_splits, subsample


def score(train, test, words: int | None, c: float) -> float:
    def cut(text: str) -> str:
        return text if words is None else " ".join(text.split()[:words])

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    features = vectorizer.fit_transform([cut(e.text) for e in train])
    classifier = LogisticRegression(max_iter=2000, C=c).fit(features, [e.label for e in train])
    predicted = classifier.predict(vectorizer.transform([cut(e.text) for e in test]))
    return float(accuracy_score([e.label for e in test], predicted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--train-examples", type=int, default=0, help="0 = the whole training split")
    parser.add_argument("--test-examples", type=int, default=0, help="0 = the whole test split")
    args = parser.parse_args()
    splits = builtin_splits("bbc")
    splits["train"] = subsample(splits["train"], args.train_examples, seed=0)  # finetune's train.seed default
    splits["test"] = subsample(splits["test"], args.test_examples, seed=0)  # evaluate's --seed default
    rows = []
    for c in (1.0, 10.0, 100.0):
        rows.append({"C": c, "train": len(splits["train"]), "test": len(splits["test"]),
                     "whole_articles": score(splits["train"], splits["test"], None, c),
                     f"first_{args.words}_words": score(splits["train"], splits["test"], args.words, c),
                     f"dev_first_{args.words}_words": score(splits["train"], splits["dev"], args.words, c)})
        print(json.dumps(rows[-1]))
    chosen = max(rows, key=lambda r: r[f"dev_first_{args.words}_words"])  # ties: the smallest C
    print(json.dumps({"chosen_on_dev": chosen["C"], f"test_first_{args.words}_words": chosen[f"first_{args.words}_words"]}))


if __name__ == "__main__":
    main()
