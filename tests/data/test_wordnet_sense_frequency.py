"""scripts/wordnet_sense_frequency.py: a WordNet noun gloss -> ln of its SemCor tag count (docs/results.md,
"A regression blended with TF-IDF"), read from Debian's wordnet-base."""

from __future__ import annotations

import csv
import importlib.util
import os
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "scripts" / "wordnet_sense_frequency.py"
_spec = importlib.util.spec_from_file_location("wordnet_sense_frequency", PATH)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(script.WORDNET, "cntlist.rev")),
                                reason="Debian's wordnet-base is not installed")


def test_a_text_is_written_once_in_one_split(tmp_path, monkeypatch):
    # seed 0 drew "a state in northwestern United States on the Pacific" (two synsets, counts 3 and 2)
    # twice into test, with two labels
    monkeypatch.setattr(sys, "argv", ["wordnet_sense_frequency.py", str(tmp_path)])
    script.main()
    splits = {name: list(csv.DictReader(open(tmp_path / f"{name}.tsv", encoding="utf-8"), delimiter="\t"))
              for name in script.SIZES}
    assert {name: len(rows) for name, rows in splits.items()} == script.SIZES
    texts = [row["text"] for rows in splits.values() for row in rows]
    assert len(set(texts)) == len(texts)


def test_distinct_texts_keeps_the_first_row_of_a_text():
    rows = [("b", 1.0), ("a", 2.0), ("b", 3.0), ("c", 0.0)]
    assert script.distinct_texts(rows) == [("b", 1.0), ("a", 2.0), ("c", 0.0)]
