"""A newcomer's own token-tagging (NER-style) set from real text: the words GCIDE's editors marked in
its definitions, as IOB2 tags in CoNLL files, for docs/results.md "Token classification on one's own
data".

    python scripts/gcide_tagging.py OUT_DIR [--seed 0]

writes OUT_DIR/{train,dev,test}.conll (one `word tag` line per word, a blank line after each
sentence): 2,000 / 400 / 800 sentences, split by headword (lower-cased), so a word's entries are all
in one split.

A sentence is one paragraph of a GCIDE entry (a numbered sense, a note) of Debian's `dict-gcide`,
read by `bertkit.data.gcide.entry_paragraphs` (the Webster markup, etymologies, headword lines and a
quotation's `--Author.` dropped) with the entry's `{braces}` kept as marks. In the dictd text a brace
is what is left of GCIDE's markup for a marked word or phrase; two kinds are told apart:

- TAXON: a scientific name, GCIDE's `<spn>` (species name) markup, which dictd writes as a braced
  span opening a parenthesis or following a rank word: "a lauraceous tree ({Persea Indica})",
  "a plant of the genus {Medeola}";
- XREF: every other braced span, a cross-referenced headword: "See {Nasturtium}", "Same as
  {Cassava}", "a starch called {arum}".

Both are real markup (the dictionary's, not a rule of ours guessing at the words) and learnable from
the words and their context (Latin binomials, "See ..."). They are the dictionary's marks, not a
complete annotation: a name its editors left unmarked is O ("({Anhinga anhinga} syn. Plotus
anhinga)" and the reverse occur), and a genus marked inside a plain list is XREF ("Polytelis,
{Platycercus}, Psephotus"); in 24 spans drawn from a test split, 2 had such a type. Paragraphs that begin with a braced
sub-entry head ("{Indian club}, a wooden club ..."), synonym lists ("Syn: ..."), sentences holding
a pronunciation left by a wrapped headword line ("(d`mw`zl\"), n. See Damsel.") and paragraphs
longer than MAX_WORDS are left out. Sentences with no mark are kept at about a quarter of the set,
as a real tagging set has sentences without entities (PLAIN_ODDS). At most PER_HEADWORD sentences
per headword, so one long entry ("Indian", dozens of compounds) does not fill a split.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import random
import re

from bertkit.data.gcide import GCIDE_DIR, entry_paragraphs, read_index
from bertkit.data.splits import groups_in_turn
from bertkit.tasks.formats import TokenExample, write_conll
from bertkit.tasks.realdata import tokenize_words

SIZES = {"train": 2000, "dev": 400, "test": 800}
MAX_WORDS = 60  # a sense, not a whole usage note: well inside MiniLM's data.max_length=128 tokens
PLAIN_ODDS = 0.12  # a headword with no marked sentence gives a plain one with these odds: about a quarter of the set
PER_HEADWORD = 4
OPEN, CLOSE = "\ue000", "\ue001"  # braces carried through entry_paragraphs (which deletes { and })
_LIST_GAP = re.compile(r"^[\s,;]*(?:or|and|syn\.|also)?[\s,;]*$")  # between two names of one list
# a pronunciation a wrapped headword line left inside a paragraph, "(d`mw`zl\")" (entry_paragraphs drops one at the start)
_PRONUNCIATION = {"`", "*"}
_NOT_WORDS = re.compile(r"[0-9()`\"*=+/]")
RANKS = ("genus", "genera", "family", "subfamily", "order", "suborder", "class", "subclass", "tribe", "species")


def marked_paragraphs(raw: str) -> list[str]:
    """The plain paragraphs of one raw dictd entry with its braces kept as OPEN/CLOSE marks."""
    return entry_paragraphs(raw.replace("{", OPEN).replace("}", CLOSE))


def span_kind(before: str, gap: str, previous: str | None) -> str:
    """TAXON for a braced span opening a parenthesis, after a rank word ("genus {Medeola}") or
    listed after a TAXON ("({Copernicia australis} or {Copernicia cerifera})"), else XREF; `before`
    is the paragraph's text before the span, `gap` the text since the previous span."""
    before = before.rstrip()
    if before.endswith("(") or before.lower().endswith(RANKS):
        return "TAXON"
    return "TAXON" if previous == "TAXON" and _LIST_GAP.match(gap) else "XREF"


def tag_paragraph(paragraph: str) -> TokenExample | None:
    """(words, IOB2 tags) of one marked paragraph, or None when it is not a sentence to keep."""
    if paragraph.startswith(OPEN) or paragraph.startswith("Syn") or OPEN + OPEN in paragraph:
        return None
    pieces = re.split(f"({OPEN}[^{OPEN}{CLOSE}]*{CLOSE})", paragraph)
    words, tags, text_before, gap, kind = [], [], "", "", None
    for piece in pieces:
        if piece.startswith(OPEN) and piece.endswith(CLOSE):
            if _NOT_WORDS.search(piece):  # a formula "{(CH2)}" or a pronunciation "{Os`te*al}": no name
                return None
            inside = tokenize_words(piece[1:-1])
            kind = span_kind(text_before, gap, kind)
            words.extend(inside)
            tags.extend([f"B-{kind}"] + [f"I-{kind}"] * (len(inside) - 1) if inside else [])
        else:
            if OPEN in piece or CLOSE in piece:  # a brace left open across the paragraph: unreadable
                return None
            words.extend(tokenize_words(piece))
            tags.extend(["O"] * len(tokenize_words(piece)))
        gap = "" if piece.startswith(OPEN) else piece
        text_before += piece
    if len(words) < 4 or len(words) > MAX_WORDS or _PRONUNCIATION.intersection(words):
        return None
    return TokenExample(words, tags)


def tagged_sentences() -> dict[str, list[TokenExample]]:
    """headword -> its kept sentences, every GCIDE entry read once (index entries sharing an offset)."""
    with gzip.open(GCIDE_DIR / "gcide.dict.dz") as f:
        blob = f.read()
    by_headword, seen = collections.defaultdict(list), set()
    for headword, offset, length in read_index(GCIDE_DIR / "gcide.index"):
        if offset in seen:
            continue
        seen.add(offset)
        for paragraph in marked_paragraphs(blob[offset:offset + length].decode("utf-8", errors="replace")):
            example = tag_paragraph(paragraph)
            if example is not None:
                by_headword[headword.lower()].append(example)
    return by_headword


def pick(examples: list[TokenExample], rng: random.Random) -> list[TokenExample]:
    """At most PER_HEADWORD of a headword's marked sentences; a headword with none gives one plain
    sentence with PLAIN_ODDS odds."""
    marked = [e for e in examples if any(t != "O" for t in e.tags)]
    if marked:
        return rng.sample(marked, min(len(marked), PER_HEADWORD))
    return [rng.choice(examples)] if rng.random() < PLAIN_ODDS else []


def split_by_headword(by_headword: dict[str, list[TokenExample]], seed: int) -> dict[str, list[TokenExample]]:
    """SIZES sentences per split, whole headwords at a time in a seeded order; a sentence already
    placed (the same text under two headwords) is not repeated in another split."""
    rng = random.Random(seed)
    order = sorted(by_headword)
    rng.shuffle(order)
    splits, placed = {name: [] for name in SIZES}, {}
    for headword, name in groups_in_turn(order, SIZES, splits):
        for example in pick(by_headword[headword], rng):
            key = " ".join(example.tokens)
            if placed.setdefault(key, name) == name and len(splits[name]) < SIZES[name]:
                splits[name].append(example)
    return splits


def describe(name: str, examples: list[TokenExample]) -> str:
    spans = collections.Counter(t[2:] for e in examples for t in e.tags if t.startswith("B-"))
    plain = sum(all(t == "O" for t in e.tags) for e in examples)
    words = sum(len(e.tokens) for e in examples)
    return (f"{name}: {len(examples)} sentences, {words} words, {plain} without a mark; "
            + ", ".join(f"{kind} {n}" for kind, n in sorted(spans.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    splits = split_by_headword(tagged_sentences(), args.seed)
    os.makedirs(args.out, exist_ok=True)
    for name, examples in splits.items():
        write_conll(os.path.join(args.out, f"{name}.conll"), examples)
        print(describe(name, examples))


if __name__ == "__main__":
    main()
