"""scripts/wordnet_word_in_context.py: sentence pairs sharing a word, `same` when both exemplify one synset and
`different` when two, balanced and split by word (docs/results.md, "Pair classification on one's own data")."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from bertkit.tasks.realdata import Synset

PATH = Path(__file__).resolve().parents[2] / "scripts" / "wordnet_word_in_context.py"
_spec = importlib.util.spec_from_file_location("wordnet_word_in_context", PATH)
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


def synset(offset: str, lemmas: tuple[str, ...], *examples: str, pos: str = "noun") -> Synset:
    return Synset(offset, pos, "noun.Tops", lemmas, "a definition", examples)


def test_a_word_is_found_as_written_or_with_a_regular_ending_and_needs_two_synsets():
    synsets = [synset("1", ("bank",), "he sat on the bank", "the banks of the river", "a bankrupt firm"),
               synset("2", ("bank", "depository"), "the bank raised its rates", "a bank holiday"),
               synset("3", ("worry",), "she worries a lot"), synset("4", ("worry",), "it worried him"),
               synset("5", ("river bank",), "the river bank flooded"), synset("6", ("lone",), "a lone bank")]
    found = script.senses_by_word(synsets)
    assert found[("bank", "noun")] == {"1": ["he sat on the bank", "the banks of the river"],  # not "bankrupt"
                                      "2": ["the bank raised its rates", "a bank holiday"]}
    assert found[("worry", "noun")] == {"3": ["she worries a lot"], "4": ["it worried him"]}
    assert ("depository", "noun") not in found and ("lone", "noun") not in found  # one synset: no pair to make
    assert not any(" " in word for word, _ in found)  # multi-word lemmas are left out


def test_splits_are_full_balanced_and_share_no_word_or_sentence():
    by_word = {}
    for w in range(3000):
        senses = {f"{w}a": [f"w{w} one {k}" for k in range(3)], f"{w}b": [f"w{w} two {k}" for k in range(2)]}
        by_word[(f"w{w}", "noun" if w % 4 else "verb")] = senses
        if w % 7 < 2:  # a sentence of two words (w and w + 1): it may be used in one split only
            senses[f"{w}a"].append(f"shared {w // 7}")
        if w % 5 < 2:  # two sentences of two words: a pair of them, same for one and different for the other
            senses[f"{w}b"] += [f"both {w // 5} x"] + ([] if w % 5 else [f"both {w // 5} y"])
            senses[f"{w}a"] += [f"both {w // 5} y"] if w % 5 else []
    splits = script.split_by_word(by_word, seed=0)
    assert {name: len(rows) for name, rows in splits.items()} == script.SIZES
    for rows in splits.values():
        assert sum(label == "same" for _, _, label, _ in rows) * 2 == len(rows)
        assert all(a != b for a, b, _, _ in rows) and {row[3] for row in rows} <= {w for w, _ in by_word}
    words = {name: {text.split()[0] for row in rows for text in row[:2] if text.startswith("w")}
             for name, rows in splits.items()}
    sentences = {name: {text for row in rows for text in row[:2]} for name, rows in splits.items()}
    for first, second in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not sentences[first] & sentences[second] and not words[first] & words[second]
    inputs = [frozenset(row[:2]) for rows in splits.values() for row in rows]
    assert len(set(inputs)) == len(inputs)
    assert script.split_by_word(by_word, seed=0) == splits and script.split_by_word(by_word, seed=1) != splits


def test_a_sentence_of_two_synsets_is_in_no_pair_of_the_word():
    senses = {"a": ["gave honest answers", "an honest man", "an honest face"],
              "b": ["gave honest answers", "honest work"]}  # WordNet's honest (adj) has such a sentence
    rows = script.word_rows(senses, random.Random(0), banned=set(), taken=set())
    assert sorted(label for _, _, label in rows) == ["different", "same"]  # one clean pair of each
    assert {frozenset(row[:2]) for row in rows if row[2] == "same"} == {frozenset({"an honest man", "an honest face"})}
    assert not any("gave honest answers" in row for row in rows)


def test_mark_puts_the_words_first_use_between_asterisks_as_it_is_spelled():
    assert script.marked("the Banks of the river bank", "bank") == "the *Banks* of the river bank"
    assert script.marked("she worried him", "worry") == "she *worried* him"
