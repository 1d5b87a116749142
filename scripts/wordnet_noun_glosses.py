"""A newcomer's own many-class, imbalanced CSV from real text: WordNet noun glosses (the definition
before its first quoted example) labelled by their synset's supersense (the lexicographer file:
noun.artifact, noun.motive, ...), a seeded random sample that keeps WordNet's own imbalance (26
classes, from about 550 rows down to a handful in 4,000). Walk P's set, for docs/results.md "Many
imbalanced classes".

    python scripts/wordnet_noun_glosses.py --out all.csv [--rows 4000] [--seed 0]
    bertkit split --input all.csv --out data --dev 0.125 --test 0.125
"""

from __future__ import annotations

import argparse
import csv
import random
from collections import Counter

from bertkit.tasks.realdata import LEXNAMES

NOUNS = "/usr/share/wordnet/data.noun"  # Debian's wordnet-base


def noun_glosses() -> list[tuple[str, str]]:
    """(definition, supersense) of every noun synset, in file order."""
    rows = []
    with open(NOUNS, encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the license header
                continue
            head, _, gloss = line.partition("|")
            definition = gloss.strip().split('; "')[0].strip().rstrip(";").strip()
            if definition:
                rows.append((definition, LEXNAMES[int(head.split()[1])]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = noun_glosses()
    random.Random(args.seed).shuffle(rows)
    chosen = rows[:args.rows]
    with open(args.out, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(chosen)
    counts = Counter(label for _, label in chosen)
    print(f"{len(chosen)} rows, {len(counts)} classes, largest {counts.most_common(1)[0]}, "
          f"smallest {counts.most_common()[-1]}: {args.out}")


if __name__ == "__main__":
    main()
