"""A newcomer's own sentence-pair set from real text: Word-in-Context from WordNet's example sentences,
for docs/results.md "Pair classification on one's own data" (a cross-encoder, `finetune --task
classification --set data.pair_column=text_pair`).

    python scripts/wordnet_word_in_context.py OUT_DIR [--seed 0] [--mark]

writes OUT_DIR/{train,dev,test}.csv with the columns text, text_pair, label: 3,000 / 600 / 1,200 rows,
half `same` and half `different` in each split.

A row is two of WordNet's example sentences (the quoted parts of the glosses, Debian's `wordnet-base`
read by `bertkit.tasks.realdata.read_wordnet`) that both use one word of the same part of speech: `same`
when both exemplify the same synset ("he sat on the bank of the river" / "the bank of the creek"),
`different` when they exemplify two synsets of that word ("he sat on the bank of the river" / "the bank
raised its rates"). The word must occur in each sentence as a whole word (`realdata.lemma_occurrence`,
case-insensitive), as it is written or with a regular ending (FORMS: -s, -es, -ed, -d, -ing, -er, -est,
-ies/-ied for a final y, -ing for a final e dropped); multi-word lemmas are left out. The word is not
marked (the model has to find the one word the sentences share) unless --mark puts it between asterisks in
both sentences ("the *bank* of the river"), as the original WiC gives the target word; the rows are the same.

Only words with examples of two synsets or more take part, and each gives as many `different` rows as
`same` ones (at most PER_WORD of each, drawn with the seed), so neither a word nor its sense count tells
the label. The split is by word: all of a word's rows (every part of speech) are in one split, words
taken in a seeded order until each split is full; a sentence used in one split is not used in
another (a sentence can show two shared words), and two sentences are paired once (sharing two words, they
would be one input with the label of each). Which sentence is `text` is drawn with the seed.
"""

from __future__ import annotations

import argparse
import collections
import csv
import itertools
import os
import random

from bertkit.tasks.realdata import lemma_occurrence, read_wordnet

SIZES = {"train": 3000, "dev": 600, "test": 1200}
PER_WORD = 3  # `same` rows (and as many `different`) per word and part of speech: many words, not a few common ones
FORMS = ("", "s", "es", "ed", "d", "ing", "er", "est")


def forms(lemma: str) -> list[str]:
    """The spellings of `lemma` looked for in a sentence (FORMS; y -> ies/ied, a final e dropped before ing)."""
    word = lemma.lower()
    found = {word + ending for ending in FORMS}
    if word.endswith("y"):
        found |= {word[:-1] + "ies", word[:-1] + "ied"}
    if word.endswith("e"):
        found.add(word[:-1] + "ing")
    return sorted(found)


def senses_by_word(synsets) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(word, part of speech) -> synset offset -> its example sentences using the word, for single-word lemmas
    whose examples use them in two synsets or more."""
    found: dict = collections.defaultdict(dict)
    for synset in synsets:
        for lemma in synset.lemmas:
            spellings = forms(lemma)
            using = [s for s in dict.fromkeys(synset.examples) if lemma_occurrence(s, spellings)]
            if using and " " not in lemma:  # a lemma written twice ("AI", "ai") gives its sentences once
                known = found[(lemma.lower(), synset.pos)].setdefault(synset.offset, [])
                known.extend(s for s in using if s not in known)
    return {key: senses for key, senses in found.items() if len(senses) >= 2}


def word_rows(senses: dict[str, list[str]], rng: random.Random, banned: set[str],
              taken: set[frozenset]) -> list[tuple[str, str, str]]:
    """A word's balanced rows: up to PER_WORD `same` pairs and as many `different` ones, none with a sentence
    in `banned` (those used by another split), nor a pair in `taken` (two sentences sharing two words would be one
    input with the label of each word), nor a pair both `same` and `different` (WordNet gives "gave honest answers"
    and "honest reporting" as examples of two synsets of honest)."""
    usable = [[s for s in sentences if s not in banned] for sentences in senses.values()]
    same = [pair for sentences in usable for pair in itertools.combinations(sentences, 2)]
    different = [(a, b) for first, second in itertools.combinations(usable, 2) for a in first for b in second]
    skip = taken | ({frozenset(pair) for pair in same} & {frozenset(pair) for pair in different})
    same, different = ([p for p in pairs if p[0] != p[1] and frozenset(p) not in skip] for pairs in (same, different))
    count = min(PER_WORD, len(same), len(different))
    rows = [(*pair, "same") for pair in rng.sample(same, count)]
    rows += [(*pair, "different") for pair in rng.sample(different, count)]
    return [(b, a, label) if rng.random() < 0.5 else (a, b, label) for a, b, label in rows]


def split_by_word(by_word: dict, seed: int) -> dict[str, list[tuple[str, str, str, str]]]:
    """SIZES rows (text, text_pair, label, the word) per split, a word's rows all in one split (a word too big for
    what a split lacks goes to the next); a sentence of one split is not used in another."""
    rng = random.Random(seed)
    words = sorted({word for word, _ in by_word})
    rng.shuffle(words)
    splits: dict[str, list] = {name: [] for name in SIZES}
    used: dict[str, set[str]] = {name: set() for name in SIZES}
    names, at, pairs = list(SIZES), 0, set()
    for word in words:
        while at < len(names) and len(splits[names[at]]) >= SIZES[names[at]]:
            at += 1
        if at == len(names):
            break
        name = names[at]
        banned = set().union(*(used[other] for other in names if other != name))
        rows = []
        for pos in ("noun", "verb", "adj", "adv"):
            if (word, pos) in by_word:
                rows += [(*row, word) for row in word_rows(by_word[(word, pos)], rng, banned,
                                                          pairs | {frozenset(row[:2]) for row in rows})]
        if len(splits[name]) + len(rows) > SIZES[name]:
            continue
        splits[name].extend(rows)
        pairs.update(frozenset(row[:2]) for row in rows)
        used[name].update(sentence for row in rows for sentence in row[:2])
    return splits


def marked(sentence: str, word: str) -> str:
    """The sentence with its first use of `word` (as `forms` spells it) between asterisks: "the *bank* of the river"."""
    start, end = lemma_occurrence(sentence, forms(word))
    return f"{sentence[:start]}*{sentence[start:end]}*{sentence[end:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mark", action="store_true",
                        help="put the word the pair is about between asterisks in both sentences (the same rows)")
    args = parser.parse_args()
    by_word = senses_by_word(read_wordnet())
    splits = split_by_word(by_word, args.seed)
    os.makedirs(args.out, exist_ok=True)
    print(f"{len({word for word, _ in by_word})} words with examples of two synsets or more")
    for name, rows in splits.items():
        with open(os.path.join(args.out, f"{name}.csv"), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "text_pair", "label"])
            writer.writerows((marked(a, word), marked(b, word), label) if args.mark else (a, b, label)
                             for a, b, label, word in rows)
        same = sum(row[2] == "same" for row in rows)
        print(f"{name}: {len(rows)} rows ({same} same, {len(rows) - same} different)")


if __name__ == "__main__":
    main()
