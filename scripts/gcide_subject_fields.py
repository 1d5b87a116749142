"""A newcomer's own multi-label set from real text: a GCIDE dictionary entry -> the subject fields
its senses are marked with ("(Zool.)", "(Bot.)", "(Law)", "(Naut.)", ...), for docs/results.md
"Multi-label classification on one's own data".

    python scripts/gcide_subject_fields.py OUT_DIR [--seed 0]

writes OUT_DIR/{train,dev,test}.jsonl, one `{"text": ..., "label": [...]}` per line (the list makes
the task multi-label): 2,000 / 500 / 1,000 rows drawn with the seed from the 26,749 entries that
carry one of the fields (seed 0, training rows: 1.32 labels per row, 28% with two or more).

One document per entry of Debian's `dict-gcide` (`bertkit.data.gcide`: index entries de-duplicated
by offset, Webster markup dropped by `entry_paragraphs`, which also drops the headword line with its
pronunciation and etymology). An entry is read in its blank-line separated blocks (a sense, a
quotation, a note) until MAX_WORDS words of text (the last block cut there): the labels are the
fields marked in the blocks read, the headword line's included, so every label is marked in the
part of the entry kept. Labels: the FIELDS below, the 20 most frequent markers, with "Zoöl." (written
`Zo["o]l.`) one label with "Zool." and the compound laws ("Eng. Law", "Scots Law", ...) with "Law";
entries marked with none of them are left out. Every parenthesised field marker (kept or not, any
of the dictionary's capitalised abbreviations in parentheses) is removed from the text, so the label
is not in the input. Rows are split by headword (lower-cased): a word's entries (noun, verb, ...)
are all in one split, and a text found under two headwords in the split it came to first.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import random
import re

from bertkit.data.gcide import GCIDE_DIR, entry_paragraphs, read_index
from bertkit.data.splits import groups_in_turn

SIZES = {"train": 2000, "dev": 500, "test": 1000}
MULTI_SHARE = 0.3  # rows with 2+ labels are 7% of the entries: single-label headwords are thinned to this share
MAX_WORDS = 120  # about what MiniLM reads at the default data.max_length=128 tokens
FIELDS = ("Zool", "Bot", "Chem", "Med", "Anat", "Law", "Naut", "Min", "Biol", "Mus", "Arch", "Physiol",
          "Mil", "Physics", "Geol", "Math", "Astron", "Mach", "Geom", "Her")
ALIASES = {'Zo["o]l': "Zool", "Zol": "Zool", "Zoöl": "Zool"}
# "(Zool.)", "(Zo["o]l.)", "(Physiol. Chem.)", "(R. C. Ch.)", "(Law)": capitalised words in parentheses
_MARKER = re.compile(r"\(((?:[A-Z][A-Za-zö\[\]\"]*\.?)(?:,? ?(?:&|and)? ?[A-Z][A-Za-zö\[\]\"]*\.?){0,3})\)")


def field_of(marker: str) -> str | None:
    """The label a marker's text stands for ("Zo["o]l." -> "Zool", "Scots Law" -> "Law"), or None."""
    name = ALIASES.get(marker.rstrip("."), marker.rstrip("."))
    if name.endswith(" Law"):
        name = "Law"
    return name if name in FIELDS else None


def fields_in(raw: str) -> set[str]:
    """The kept fields marked anywhere in a piece of raw entry text ("(Anat. & Zool.)" gives both)."""
    found = set()
    for match in _MARKER.finditer(raw):
        for part in re.split(r",? ?(?:&|and) ?|, ", match.group(1)):
            field = field_of(part.strip())
            if field:
                found.add(field)
    return found


def strip_markers(text: str) -> str:
    """The text without any parenthesised field marker, spacing and punctuation around it tidied."""
    text = _MARKER.sub("", text)
    text = re.sub(r"\s+([,;.:])", r"\1", re.sub(r"\s{2,}", " ", text))
    return text.strip(" ,;")


def entry_row(raw: str) -> tuple[str, list[str]]:
    """(text, labels) of one raw dictd entry: its blocks read until MAX_WORDS words (docstring)."""
    words, labels = [], set()
    for block in re.split(r"\n\s*\n", raw):
        if len(words) >= MAX_WORDS:
            break
        labels |= fields_in(block)
        for paragraph in entry_paragraphs(block):
            words.extend(strip_markers(paragraph).split())
    return " ".join(words[:MAX_WORDS]), sorted(labels)


def labelled_entries() -> list[tuple[str, str, list[str]]]:
    """(headword, text, labels) of every entry with a kept field, in index order."""
    with gzip.open(GCIDE_DIR / "gcide.dict.dz") as f:
        blob = f.read()
    rows, seen = [], set()
    for headword, offset, length in read_index(GCIDE_DIR / "gcide.index"):
        if offset in seen:  # several headwords can point at one entry
            continue
        seen.add(offset)
        text, labels = entry_row(blob[offset:offset + length].decode("utf-8", errors="replace"))
        if labels and len(text.split()) >= 3:
            rows.append((headword.lower(), text, labels))
    return rows


def split_by_headword(rows: list, seed: int) -> dict[str, list]:
    """SIZES rows per split, whole headwords at a time in a seeded order (a split may end one
    headword's entries over its size); a headword with no 2+ label entry is kept with the
    probability that makes MULTI_SHARE of the rows multi-label. A text already in another split
    (one definition under two headwords) is left out, so no dev or test text is a training text."""
    groups = collections.defaultdict(list)
    for row in rows:
        groups[row[0]].append(row)
    multi = sum(len(row[2]) >= 2 for row in rows)
    keep_single = min(1.0, multi * (1 - MULTI_SHARE) / MULTI_SHARE / (len(rows) - multi))
    rng = random.Random(seed)
    order = sorted(groups)
    rng.shuffle(order)
    order = [h for h in order if any(len(r[2]) >= 2 for r in groups[h]) or rng.random() < keep_single]
    splits, placed = {name: [] for name in SIZES}, {}
    for headword, name in groups_in_turn(order, SIZES, splits):
        # another headword's entry with the same text (a variant spelling) stays in the split it is in
        splits[name].extend(row for row in groups[headword] if placed.setdefault(row[1], name) == name)
    return splits


def describe(name: str, rows: list) -> str:
    counts = collections.Counter(label for _, _, labels in rows for label in labels)
    cardinality = sum(len(labels) for _, _, labels in rows) / len(rows)
    multi = sum(len(labels) >= 2 for _, _, labels in rows) / len(rows)
    per_label = ", ".join(f"{label} {n}" for label, n in counts.most_common())
    return f"{name}: {len(rows)} rows, {cardinality:.2f} labels per row, {multi:.1%} with 2+; {per_label}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = labelled_entries()
    splits = split_by_headword(rows, args.seed)
    os.makedirs(args.out, exist_ok=True)
    print(f"{len(rows)} GCIDE entries with a kept field")
    for name, part in splits.items():
        with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": text, "label": labels}) + "\n" for _, text, labels in part)
        print(describe(name, part))


if __name__ == "__main__":
    main()
