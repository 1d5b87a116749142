"""scripts/wordnet_synset_regression.py: a WordNet noun gloss -> ln of its synset's word count, or its depth
below entity.n.01 (docs/results.md, "A regression blended with TF-IDF"), read from Debian's wordnet-base."""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "scripts" / "wordnet_synset_regression.py"
_spec = importlib.util.spec_from_file_location("wordnet_synset_regression", PATH)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(script.WORDNET, "data.noun")),
                                reason="Debian's wordnet-base is not installed")
DOG, PUPPY = "02084071", "01322604"  # dog.n.01 (dog, domestic_dog, Canis_familiaris), puppy.n.01


def test_depth_is_the_shortest_hypernym_path_and_lemmas_the_synsets_word_count():
    hypernyms, words, _ = script.read_nouns()
    depth = script.depths(hypernyms)
    assert depth[script.ROOT] == 0 and depth[DOG] == 8  # NLTK's min_depth of dog.n.01
    assert set(hypernyms[PUPPY]) == {"01322343", DOG} and depth[PUPPY] == 9  # the shorter of its two paths
    assert len(depth) == len(hypernyms)  # every noun synset reaches entity.n.01
    assert words[DOG] == 3


def test_the_splits_have_their_sizes_and_no_text_in_two(tmp_path, monkeypatch):
    for target in ("lemmas", "depth"):
        monkeypatch.setattr(sys, "argv", ["wordnet_synset_regression.py", str(tmp_path / target), "--target", target])
        script.main()
        splits = {name: list(csv.DictReader(open(tmp_path / target / f"{name}.tsv", encoding="utf-8"),
                                            delimiter="\t")) for name in script.SIZES}
        assert {name: len(rows) for name, rows in splits.items()} == script.SIZES
        texts = [row["text"] for rows in splits.values() for row in rows]
        assert len(set(texts)) == len(texts)
        labels = [float(row["label"]) for row in splits["train"]]
        if target == "lemmas":
            assert all(any(abs(label - math.log(n)) < 1e-4 for n in range(1, 40)) for label in labels)
        else:
            assert all(label == int(label) for label in labels)
