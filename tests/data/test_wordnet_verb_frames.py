"""scripts/wordnet_verb_frames.py: a WordNet verb gloss -> the generic sentence frames of its synset (w_num 00
only), named by WordNet's frame text; split by the synset's first lemma (docs/results.md, walk AB)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the script imports its sibling gcide_subject_fields, as it does when run
_spec = importlib.util.spec_from_file_location("wordnet_verb_frames", SCRIPTS / "wordnet_verb_frames.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)
sys.path.remove(str(SCRIPTS))

WORDNET = "/usr/share/wordnet"
needs_wordnet = pytest.mark.skipif(not os.path.exists(os.path.join(WORDNET, "data.verb")),
                                   reason="Debian's wordnet-base is not installed")
# breathe.v.01, as in data.verb but with one word-specific frame (+ 09 03) added and the pointers cut to two
BREATHE = ("00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 002 * 00005041 v 0000 "
           "+ 03110323 a 0301 03 + 02 00 + 08 00 + 09 03 | draw air into, and expel out of, the lungs; "
           '"I can breathe better when the air is clean"; "The patient is respiring"  \n')


def test_the_labels_are_the_frames_that_hold_for_every_word():
    offset, frames = script.synset_frames(BREATHE)
    assert offset == "00001740" and frames == {2, 8}  # + 09 03 holds for the third word only
    assert [script.FRAMES[n - 1] for n in sorted(frames)] == ["Somebody ----s", "Somebody ----s something"]
    assert len(script.FRAMES) == 35 and script.FRAMES[34] == "Something ----s INFINITIVE"


@needs_wordnet
def test_rows_are_glosses_with_their_kept_frames():
    rows = script.labelled_synsets(WORDNET)
    breathe = next(row for row in rows if row[1].startswith("draw air into, and expel out of, the lungs"))
    assert breathe == ("breathe", 'draw air into, and expel out of, the lungs; "I can breathe better when the air '
                       'is clean"; "The patient is respiring"', ["Somebody ----s", "Somebody ----s something"])
    kept = {label for _, _, labels in rows for label in labels}
    assert len(kept) == 12 and "Something ----s INFINITIVE" not in kept  # frame 35: one synset
    assert not any('"' in text for _, text, _ in script.labelled_synsets(WORDNET, definition_only=True)[:500])


@needs_wordnet
def test_the_splits_are_deterministic_and_keep_a_lemma_in_one_split(tmp_path, monkeypatch):
    written = []
    for out in ("a", "b"):
        monkeypatch.setattr(sys, "argv", ["wordnet_verb_frames.py", str(tmp_path / out), "--seed", "3"])
        script.main()
        written.append({name: (tmp_path / out / f"{name}.jsonl").read_text() for name in script.SIZES})
    assert written[0] == written[1]
    splits = {name: [json.loads(line) for line in text.splitlines()] for name, text in written[0].items()}
    assert all(script.SIZES[name] <= len(rows) < script.SIZES[name] + 60 for name, rows in splits.items())
    texts = {name: {row["text"] for row in rows} for name, rows in splits.items()}
    assert not (texts["train"] & texts["dev"] or texts["train"] & texts["test"] or texts["dev"] & texts["test"])
    assert all(isinstance(row["label"], list) and row["label"] for rows in splits.values() for row in rows)
