"""Fortune cookies labelled with their category: the `fortunes` set.

Source: Debian `fortunes` (/usr/share/games/fortunes/<category>, entries separated by lines
holding only "%"). The categories are the topical files in `CATEGORIES`; the offensive ones
(/usr/share/games/fortunes/off/, package fortunes-off) are never read. A fortune's text is the
entry with its whitespace collapsed to single spaces and its typewriter overstrikes removed (a
character and a backspace, so that the next one prints over it: "_" underlining a word); an
attribution line ("-- Robert Heinlein", "-- Kirk, ..., stardate 3012.4") is part of the entry, so
it stays. Duplicates are compared on a key that ignores case,
whitespace and punctuation: a fortune repeated within a category is kept once, and a fortune found
in two or more categories is dropped from all of them (it has no single label). Every fortune is a
document of its own: `stratified_split` with the seed, 70/10/20 of each category.

Counts with fortunes 1:1.99.1-7.3 (Debian 12) and seed 0 are in `fortune_split`'s docstring.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from bertkit.data.splits import stratified_split
from bertkit.errors import DataError
from bertkit.io import read_text

__all__ = ["CATEGORIES", "FORTUNES_DIR", "FORTUNES_HINT", "Fortune", "parse_fortunes", "read_fortunes", "fortune_split"]

FORTUNES_DIR = "/usr/share/games/fortunes"
FORTUNES_HINT = "install it with: apt-get install fortunes"
# Topical categories (the others are a kind of text: riddles, definitions, songs-poems, ...).
CATEGORIES = ("art", "computers", "drugs", "education", "food", "law", "literature", "love", "men-women",
              "politics", "science", "sports", "startrek", "work")


@dataclass(frozen=True)
class Fortune:
    text: str
    label: str  # the category file it comes from


_OVERSTRUCK = re.compile(r"[^\x08]\x08")  # a character and the backspace that lets the next one overprint it


def parse_fortunes(text: str) -> list[str]:
    """The entries of a fortune file, whitespace collapsed, overstrikes removed, empty ones dropped."""
    entries = []
    for entry in re.split(r"^%$", text, flags=re.MULTILINE):
        while _OVERSTRUCK.search(entry):  # "___\b\b\band" -> "and": repeated, the pairs nest
            entry = _OVERSTRUCK.sub("", entry)
        entry = " ".join(entry.replace("\x08", "").split())
        if entry:
            entries.append(entry)
    return entries


def dedup_key(text: str) -> str:
    """What two copies of a fortune share: its words in lower case, punctuation and spacing aside."""
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


@functools.lru_cache(maxsize=2)
def read_fortunes(directory: str = FORTUNES_DIR) -> tuple[Fortune, ...]:
    """Every fortune of `CATEGORIES`, once, in file order; those in two or more categories left out."""
    files = [Path(directory) / name for name in CATEGORIES]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(f"the fortunes data set needs {directory}/{missing[0]}{more}: the Debian package "
                        f"fortunes; {FORTUNES_HINT}")
    first: dict[tuple[str, str], Fortune] = {}
    categories: dict[str, set[str]] = {}
    for file in files:
        for text in parse_fortunes(read_text(file)):
            key = dedup_key(text)
            first.setdefault((file.name, key), Fortune(text, file.name))
            categories.setdefault(key, set()).add(file.name)
    return tuple(f for (_, key), f in first.items() if len(categories[key]) == 1)


def fortune_split(seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2,
                  directory: str = FORTUNES_DIR) -> dict[str, list[Fortune]]:
    """{"train", "dev", "test"} fortunes, stratified by category (each fortune its own document).

    With fortunes 1:1.99.1-7.3 (Debian 12) and seed 0: 5,657 entries, 2 repeated within a
    category and 4 texts (8 entries) found in two categories, leave 5,647 fortunes (median 19
    words) in 14 classes: computers 1051, politics 702, work 630, science 623, men-women 580,
    art 464, literature 261, startrek 227, drugs 208, education 203, law 203, food 198,
    love 150, sports 147. Train 3,953, dev 564, test 1,130 (70 / 10 / 20 %); the largest
    class (computers) is 18.6 % of test. About 1 % of test fortunes share most of their words
    with a training one (a reworded quote, a copy without its attribution), near copies that
    the exact-duplicate rule does not catch.
    """
    return stratified_split(read_fortunes(directory), seed, dev_fraction, test_fraction)
