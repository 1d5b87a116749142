"""A newcomer's own regression from real text: a WordNet noun gloss -> how often its sense occurs in
the SemCor tagged corpus, ln(tag count) (cntlist.rev: every sense key's count; a synset's count is
the sum over its words). Only senses SemCor tagged at least once (13,739 of 82,115 noun synsets), in
a seeded order; a hard target (TF-IDF + ridge: dev Pearson 0.21), for docs/results.md "A regression
blended with TF-IDF".

Each definition text is kept once, in one split: 21 definitions are shared by two or more counted synsets
(the same text with different counts, e.g. "a state in northwestern United States on the Pacific"), so a
text is kept at its first row in the seeded order and its later rows are left out. No split holds a text
twice and no text is in two splits (which also leaves train and dev as they were before this rule, seed 0).

    python scripts/wordnet_sense_frequency.py OUT_DIR [--seed 0]

writes OUT_DIR/{train,dev,test}.tsv (text, label): 1,000 / 250 / 500 rows.
"""

from __future__ import annotations

import argparse
import math
import os
import random

from bertkit.data.splits import write_tsv_splits

WORDNET = "/usr/share/wordnet"  # Debian's wordnet-base
SIZES = {"train": 1000, "dev": 250, "test": 500}


def sense_counts() -> dict[str, int]:
    """SemCor tag count per sense key ("dog%1:05:00::" -> 42)."""
    counts = {}
    with open(os.path.join(WORDNET, "cntlist.rev"), encoding="utf-8") as f:
        for line in f:
            key, _, count = line.split()
            counts[key] = int(count)
    return counts


def counted_glosses() -> list[tuple[str, float]]:
    """(definition, ln count) of every noun synset SemCor tagged, in file order. A noun's sense key
    is lemma%1:lex_filenum:lex_id:: with the lemma lower-cased."""
    counts, rows = sense_counts(), []
    with open(os.path.join(WORDNET, "data.noun"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the license header
                continue
            head, _, gloss = line.partition("|")
            fields = head.split()
            lex_file, n_words = int(fields[1]), int(fields[3], 16)
            words = [(fields[4 + 2 * i].lower(), int(fields[5 + 2 * i], 16)) for i in range(n_words)]
            total = sum(counts.get(f"{word}%1:{lex_file:02d}:{lex_id:02d}::", 0) for word, lex_id in words)
            definition = gloss.strip().split('; "')[0].strip().rstrip(";").strip()
            if definition and total > 0:
                rows.append((definition.replace("\t", " "), math.log(total)))
    return rows


def distinct_texts(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Each text once, at its first row (with that row's label), in the given order."""
    first: dict[str, float] = {}
    for text, value in rows:
        first.setdefault(text, value)
    return list(first.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = counted_glosses()
    random.Random(args.seed).shuffle(rows)
    rows = distinct_texts(rows)
    write_tsv_splits([(text, f"{value:.4f}") for text, value in rows], SIZES, args.out)
    print(f"{len(rows)} distinct definitions of the counted noun senses; wrote "
          f"{', '.join(f'{n} {s}' for n, s in SIZES.items())} rows to {args.out}")


if __name__ == "__main__":
    main()
