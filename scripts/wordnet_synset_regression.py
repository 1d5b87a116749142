"""Regressions from real text where a bag of words is close to the encoder: a WordNet noun gloss -> a
number about its synset, for docs/results.md "A regression blended with TF-IDF".

  --target lemmas (the default): ln of the number of words in the synset (dog, domestic_dog,
      Canis_familiaris: ln 3). Everyday concepts have synonyms, taxonomic and technical ones few (a
      genus has two: Canis, genus_Canis); TF-IDF + ridge is level with fine-tuned MiniLM on dev
      (Pearson 0.303 against 0.326, seed 0).
  --target depth: the fewest hypernym steps (`@` and instance `@i` pointers) up to entity.n.01 (dog: 8;
      a synset with several hypernyms takes its shortest path). MiniLM leads TF-IDF by about 0.1 Pearson
      (dev 0.598 against 0.510, seed 0).

The text is the definition alone, without the example sentences (as in scripts/wordnet_sense_frequency.py:
an example names the lemma, and 9 in 10 noun glosses have none). Each distinct definition is kept once (its
first synset in file order), so no text is in two splits; the rows are in a seeded order.

    python scripts/wordnet_synset_regression.py OUT_DIR [--target lemmas|depth] [--seed 0]

writes OUT_DIR/{train,dev,test}.tsv (text, label): 1,000 / 250 / 500 of the 81,484 distinct definitions
of the 82,115 noun synsets.
"""

from __future__ import annotations

import argparse
import math
import os
import random

from bertkit.data.splits import write_tsv_splits

WORDNET = "/usr/share/wordnet"  # Debian's wordnet-base
ROOT = "00001740"  # entity.n.01
SIZES = {"train": 1000, "dev": 250, "test": 500}


def read_nouns() -> tuple[dict[str, list[str]], dict[str, int], list[tuple[str, str]]]:
    """Every noun synset's hypernyms and word count by offset, and (offset, definition) in file order. A data
    line is offset lex_filenum ss_type w_cnt (word lex_id)* p_cnt (symbol offset pos source/target)* | gloss."""
    hypernyms, words, glosses = {}, {}, []
    with open(os.path.join(WORDNET, "data.noun"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the license header
                continue
            head, _, gloss = line.partition("|")
            fields = head.split()
            words[fields[0]] = int(fields[3], 16)
            at = 4 + 2 * words[fields[0]]
            pointers = [fields[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(int(fields[at]))]
            hypernyms[fields[0]] = [p[1] for p in pointers if p[0] in ("@", "@i") and p[2] == "n"]
            definition = gloss.strip().split('; "')[0].strip().rstrip(";").strip()
            if definition:
                glosses.append((fields[0], definition.replace("\t", " ")))
    return hypernyms, words, glosses


def depths(hypernyms: dict[str, list[str]]) -> dict[str, int]:
    """Shortest hypernym path to the root, by breadth-first search down the hyponym links."""
    hyponyms: dict[str, list[str]] = {}
    for child, parents in hypernyms.items():
        for parent in parents:
            hyponyms.setdefault(parent, []).append(child)
    depth, frontier = {ROOT: 0}, [ROOT]
    while frontier:
        following = []
        for node in frontier:
            for child in hyponyms.get(node, []):
                if child not in depth:
                    depth[child] = depth[node] + 1
                    following.append(child)
        frontier = following
    return depth


def labelled(target: str) -> tuple[list[tuple[str, str]], int]:
    """(definition, label as written) of each distinct definition, sorted by text; and the synset count."""
    hypernyms, words, glosses = read_nouns()
    if target == "depth":
        depth = depths(hypernyms)
        label = {offset: str(depth[offset]) for offset in depth}
    else:
        label = {offset: f"{math.log(count):.4f}" for offset, count in words.items()}
    unique: dict[str, str] = {}
    for offset, definition in glosses:
        if offset in label:
            unique.setdefault(definition, label[offset])
    return sorted(unique.items()), len(hypernyms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--target", choices=("lemmas", "depth"), default="lemmas")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows, synsets = labelled(args.target)
    random.Random(args.seed).shuffle(rows)
    write_tsv_splits(rows, SIZES, args.out)
    print(f"{synsets} noun synsets, {len(rows)} distinct definitions; wrote "
          f"{', '.join(f'{n} {s}' for n, s in SIZES.items())} rows ({args.target}) to {args.out}")


if __name__ == "__main__":
    main()
