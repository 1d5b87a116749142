"""Linux kernel documentation passages labelled with their subsystem: the `linux-docs-topics` set.

Source: Debian `linux-doc` (the kernel's Sphinx sources, ``html/_sources/**/*.rst.txt``), read
with `sphinx_text.rst_paragraphs`, the reader of the `linux-docs` pre-training corpus, so markup,
titles, tables, literal blocks and code directives are already gone. The label of a page is the
top-level directory it lives in, for the topical directories in `TOPICS` (directories named for a
kind of page rather than a subject, such as admin-guide, driver-api, userspace-api, core-api,
process and translations, are left out).

A passage is consecutive prose of one page, about `TARGET_WORDS` words: paragraphs are joined in
order until a passage holds at least 100 words, and a paragraph that would push it past 150 words
starts the next one; a paragraph longer than 150 words is cut between sentences first
(`corpus.split_sentences`). Passages under 30 words (a page's last scraps, short pages) are
dropped, and so are passages in which under 80% of the words hold a letter (tables of registers
and numbers that survive as prose lines: Gopher's rule, as `data.min_alpha_fraction`) and every
passage whose text (case and spacing aside) occurs on two or more pages (licence boilerplate,
copied notes: they would sit in two splits). Then, with the
seed, at most `PER_PAGE` passages are kept per page (so a few huge pages do not make a class) and
at most `PER_CLASS` per class (networking and filesystems alone have thousands). All passages of a
page go to one split (`stratified_split` grouped by page, 70/10/20 of each class's passages).

Counts with linux-doc 6.1 (Debian 12) and seed 0 are in `linux_topic_split`'s docstring. The
`linux-docs` pre-training corpus reads the same pages (all of them): a model pre-trained on it has
seen this set's test passages, so score such a model here with that in mind.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from pathlib import Path

from bertkit.data.cleaning import CleaningRules, sentence_passes
from bertkit.data.corpus import split_sentences
from bertkit.data.sphinx_text import SPHINX_SOURCES, page_paragraphs, sphinx_pages, sphinx_sources_dir
from bertkit.data.splits import stratified_split
from bertkit.errors import DataError

__all__ = ["TOPICS", "LINUX_DOC_HINT", "Passage", "page_passages", "linux_passages", "linux_topic_split"]

LINUX_DOC_HINT = "install it with: apt-get install linux-doc"
# Subject directories with enough prose for a class (see `linux_topic_split` for their counts).
TOPICS = ("PCI", "RCU", "bpf", "filesystems", "gpu", "hwmon", "i2c", "input", "mm", "networking", "power",
          "scsi", "security", "sound", "trace", "usb", "virt")
TARGET_WORDS, MAX_WORDS, MIN_WORDS = 100, 150, 30
# Gopher's share of words holding a letter (data.min_alpha_fraction), the corpus cleaner's own rule:
# drops register tables
LETTER_RULE = CleaningRules(min_alpha_fraction=0.8)
PER_PAGE, PER_CLASS = 20, 600


@dataclass(frozen=True)
class Passage:
    text: str
    label: str  # the page's top-level directory: networking, hwmon, ...
    page: str  # the page's path under _sources: what the split keeps together


def _words(text: str) -> int:
    return len(text.split())


def _pack(units: list[str]) -> list[str]:
    """Join consecutive units (paragraphs or sentences) into pieces of TARGET_WORDS or more; a
    unit that would take a piece past MAX_WORDS starts the next piece."""
    pieces: list[str] = []
    current: list[str] = []
    count = 0
    for unit in units:
        size = _words(unit)
        if current and count + size > MAX_WORDS:
            pieces.append(" ".join(current))
            current, count = [], 0
        current.append(unit)
        count += size
        if count >= TARGET_WORDS:
            pieces.append(" ".join(current))
            current, count = [], 0
    if current:
        pieces.append(" ".join(current))
    return pieces


def page_passages(paragraphs: list[str]) -> list[str]:
    """The passages of one page's paragraphs (see the module docstring)."""
    units: list[str] = []
    for paragraph in paragraphs:  # a long paragraph is cut between sentences, not mid-sentence
        units.extend(_pack(split_sentences(paragraph)) if _words(paragraph) > MAX_WORDS else [paragraph])
    return [p for p in _pack(units) if _words(p) >= MIN_WORDS and sentence_passes(p, LETTER_RULE)]


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _sources(root: str | None) -> Path:
    """`root`, else the `_sources` directory of the installed linux-doc (DataError with the apt-get line)."""
    if root is not None:
        return Path(root)
    try:
        return sphinx_sources_dir("linux-docs")
    except DataError:
        raise DataError(f"the linux-docs-topics data set needs the Linux kernel documentation "
                        f"({SPHINX_SOURCES['linux-docs'][0]}); {LINUX_DOC_HINT}") from None


def _topic_pages(root: Path) -> list[tuple[str, Path]]:
    """(label, page) for the pages of the TOPICS directories, in sorted path order."""
    missing = [t for t in TOPICS if not (root / t).is_dir()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(f"{root} has no {missing[0]}/ directory{more}: the linux-docs-topics data set needs the "
                        f"Linux kernel documentation; {LINUX_DOC_HINT}")
    return [(topic, page) for topic in TOPICS for page in sphinx_pages(root / topic)]


@functools.lru_cache(maxsize=2)
def linux_passages(root: str | None = None) -> tuple[Passage, ...]:
    """Every passage of the TOPICS pages under `root` (default: the installed linux-doc's
    `_sources`), page by page, before any cap; passages found on two or more pages are left out."""
    root_dir = _sources(root)
    passages = [Passage(text, label, str(page.relative_to(root_dir)))
                for label, page in _topic_pages(root_dir) for text in page_passages(page_paragraphs(page))]
    pages_of: dict[str, set[str]] = {}
    for passage in passages:
        pages_of.setdefault(_normal(passage.text), set()).add(passage.page)
    return tuple(p for p in passages if len(pages_of[_normal(p.text)]) == 1)


def _capped(passages: list[Passage], seed: int) -> list[Passage]:
    """At most PER_PAGE passages of each page, then at most PER_CLASS of each class, drawn with
    the seed (kept in page order)."""
    rng = random.Random(f"linux-docs-topics:{seed}")
    by_page: dict[str, list[int]] = {}
    for index, passage in enumerate(passages):
        by_page.setdefault(passage.page, []).append(index)
    kept = sorted(i for page in sorted(by_page) for i in _sample(by_page[page], PER_PAGE, rng))
    by_label: dict[str, list[int]] = {}
    for index in kept:
        by_label.setdefault(passages[index].label, []).append(index)
    kept = sorted(i for label in sorted(by_label) for i in _sample(by_label[label], PER_CLASS, rng))
    return [passages[i] for i in kept]


def _sample(indices: list[int], limit: int, rng: random.Random) -> list[int]:
    return indices if len(indices) <= limit else rng.sample(indices, limit)


def linux_topic_split(seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2,
                      root: str | None = None) -> dict[str, list[Passage]]:
    """{"train", "dev", "test"} passages, every page in one split, stratified by class.

    With linux-doc 6.1 (Debian 12) and seed 0: 965 pages give 9,382 passages (median 110 words);
    per class pages / passages / kept after the caps: filesystems 116/1625/600, hwmon 218/811/600,
    networking 198/2280/600, trace 40/551/373, virt 44/656/345, sound 42/534/332, scsi 39/416/308,
    gpu 31/270/251, power 27/348/248, input 30/256/247, mm 31/286/244, RCU 19/430/238,
    bpf 28/224/207, i2c 42/198/198, usb 22/171/164, PCI 19/155/145, security 19/171/137. That is
    5,237 passages in 17 classes: train 3,599 (635 pages), dev 564 (95 pages), test 1,074
    (189 pages), 68.7 / 10.8 / 20.5 %; the largest class (hwmon) is 11.3 % of test. Dev is
    small per class (15 to 64 passages from a few pages each): its scores are noisy. Reading
    the 1,079 pages takes about 1.7 s (one CPU core).
    """
    passages = _capped(list(linux_passages(root)), seed)
    if not passages:
        raise DataError(f"{_sources(root)} holds no prose passages in {', '.join(TOPICS)}; {LINUX_DOC_HINT}")
    return stratified_split(passages, seed, dev_fraction, test_fraction, group=lambda p: p.page)
