"""A second multi-label set from real text: a WordNet verb gloss -> the generic sentence frames of its synset
("Somebody ----s something", "Something ----s", ...), for docs/results.md "Multi-label classification on
one's own data" beside the GCIDE subject fields (scripts/gcide_subject_fields.py).

    python scripts/wordnet_verb_frames.py OUT_DIR [--seed 0] [--definition-only]

writes OUT_DIR/{train,dev,test}.jsonl, one `{"text": ..., "label": [...]}` per line (the list makes the task
multi-label): 2,000 / 500 / 1,000 rows (a split may end one headword over its size) of the 13,767 verb
synsets of Debian's wordnet-base (data.verb).

Labels: a data.verb line lists its frames as `f_cnt + f_num w_num ...` (wndb(5WN)); w_num 00 means the frame
holds for every word of the synset, another w_num for one word only. The labels are the w_num 00 frames: a
property of the sense that the gloss describes, not of one of its words (they are 98.7% of all frame
entries; every synset has at least one). The frames are named by the text of WordNet's 35 generic frames
(FRAMES, wninput(5WN), as the WordNet library prints them). Frames held by fewer than MIN_SHARE of the verb
synsets (23 of the 35, 1 to 102 synsets each: 0 to 15 training rows at this size) are dropped, not merged
(merging, say, "to INFINITIVE" with "INFINITIVE" would make a label WordNet does not have); the 12 kept
frames are on 1.51 per synset (39% have two or more), and the 235 synsets left with none are left out.

Text: the definition and the example sentences, `definition; "example"; "example"`, as in the gloss (7 in 10
verb glosses have examples). The examples show the verb used, so they are evidence for a frame, as they would
be for a person labelling it; they do not name a frame, and one example shows one usage of a synset that
has 1.5 frames on average. They did not give the frames away: TF-IDF + logistic regression (C and threshold
chosen on dev) scored test micro-F1 0.518 with them, 0.494 without (seed 0); `--definition-only` writes the
definition alone.

Rows are split by the synset's first lemma (lower-cased; the headword): all of a verb's senses listed first
under that lemma are in one split, drawn in a seeded order by the GCIDE script's `split_by_headword`
(a gloss text that is already in another split is left out, so no test text is a training text).
"""

from __future__ import annotations

import argparse
import collections
import json
import os

from gcide_subject_fields import SIZES, describe, split_by_headword  # the sibling script (run from scripts/)

from bertkit.data.assets import wordnet_dir
from bertkit.tasks.realdata import read_wordnet

MIN_SHARE = 0.01  # of the 13,767 verb synsets: 138, about 20 training rows of 2,000
FRAMES = (
    "Something ----s", "Somebody ----s", "It is ----ing", "Something is ----ing PP",
    "Something ----s something Adjective/Noun", "Something ----s Adjective/Noun", "Somebody ----s Adjective",
    "Somebody ----s something", "Somebody ----s somebody", "Something ----s somebody",
    "Something ----s something", "Something ----s to somebody", "Somebody ----s on something",
    "Somebody ----s somebody something", "Somebody ----s something to somebody",
    "Somebody ----s something from somebody", "Somebody ----s somebody with something",
    "Somebody ----s somebody of something", "Somebody ----s something on somebody",
    "Somebody ----s somebody PP", "Somebody ----s something PP", "Somebody ----s PP",
    "Somebody's (body part) ----s", "Somebody ----s somebody to INFINITIVE", "Somebody ----s somebody INFINITIVE",
    "Somebody ----s that CLAUSE", "Somebody ----s to somebody", "Somebody ----s to INFINITIVE",
    "Somebody ----s whether INFINITIVE", "Somebody ----s somebody into V-ing something",
    "Somebody ----s something with something", "Somebody ----s INFINITIVE", "Somebody ----s VERB-ing",
    "It ----s that CLAUSE", "Something ----s INFINITIVE",
)  # frame n is FRAMES[n - 1]


def synset_frames(line: str) -> tuple[str, set[int]]:
    """(offset, the frame numbers with w_num 00) of one data.verb line: offset lex_filenum ss_type w_cnt
    (word lex_id)* p_cnt (symbol offset pos source/target)* f_cnt (+ f_num w_num)* | gloss."""
    fields = line.partition(" | ")[0].split()
    at = 4 + 2 * int(fields[3], 16)
    at += 1 + 4 * int(fields[at])
    frames = fields[at + 1:at + 1 + 3 * int(fields[at])]
    return fields[0], {int(frames[i + 1]) for i in range(0, len(frames), 3) if int(frames[i + 2], 16) == 0}


def read_frames(directory: str) -> dict[str, set[int]]:
    """Every verb synset's generic frame numbers by offset (the license header's lines start with spaces)."""
    with open(os.path.join(directory, "data.verb"), encoding="utf-8") as f:
        return dict(synset_frames(line) for line in f if not line.startswith("  "))


def kept_frames(frames: dict[str, set[int]]) -> set[int]:
    """The frame numbers held by at least MIN_SHARE of the synsets."""
    counts = collections.Counter(n for numbers in frames.values() for n in numbers)
    return {n for n, count in counts.items() if count >= MIN_SHARE * len(frames)}


def labelled_synsets(directory: str, definition_only: bool = False) -> list[tuple[str, str, list[str]]]:
    """(headword, text, frame names) of every verb synset with a kept frame, in file order."""
    frames = read_frames(directory)
    kept = kept_frames(frames)
    rows = []
    for synset in read_wordnet(directory, pos=("verb",)):
        labels = sorted(FRAMES[n - 1] for n in frames[synset.offset] & kept)
        text = synset.definition
        if not definition_only:
            text = "; ".join([text] + [f'"{example}"' for example in synset.examples])
        if labels and text:
            rows.append((synset.lemmas[0].lower(), text, labels))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--definition-only", action="store_true", help="leave the example sentences out")
    args = parser.parse_args()
    rows = labelled_synsets(wordnet_dir(), args.definition_only)
    splits = split_by_headword(rows, args.seed)
    os.makedirs(args.out, exist_ok=True)
    print(f"{len(rows)} verb synsets with a kept frame")
    for name in SIZES:
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": text, "label": labels}) + "\n" for _, text, labels in splits[name])
        print(describe(name, splits[name]))


if __name__ == "__main__":
    main()
