"""The `linux-docs-topics` and `fortunes` built-in classification sets (Debian linux-doc, fortunes):
how passages and fortunes are made on small hand-made files, then the real sets when installed."""

import functools
import glob
import os
from collections import Counter

import pytest

from bertkit.data import fortunes, linux_topics
from bertkit.data.splits import stratified_split
from bertkit.errors import DataError
from bertkit.tasks import realdata
from bertkit.tasks.builtin import BUILTIN_DATA, builtin_labels, builtin_splits, load_examples
from bertkit.tasks.common import DataConfig
from bertkit.tasks.formats import TextExample

HAVE_LINUX_DOC = bool(glob.glob("/usr/share/doc/linux-doc-*/html/_sources/networking"))
HAVE_FORTUNES = os.path.isfile("/usr/share/games/fortunes/computers")


def needs(present: bool, package: str):
    return pytest.mark.skipif(not present, reason=f"Debian package {package} is not installed: apt-get install {package}")


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * (n - 1) + [word + "."])


# ---------------------------------------------------------------- passages of a page


def test_paragraphs_merge_to_about_100_words_without_cutting_sentences():
    paragraphs = [words(40, "a"), words(40, "b"), words(40, "c"), words(90, "d"), words(10, "e")]
    passages = linux_topics.page_passages(paragraphs)
    # a+b reach only 80, c takes the passage to 120 (at most 150); d+e reach 100
    assert [len(p.split()) for p in passages] == [120, 100]
    long = " ".join(f"Sentence {i} " + words(28, "x").replace("x.", "end.") for i in range(10))  # 10 x 30 words
    pieces = linux_topics.page_passages([long])
    assert all(p.endswith("end.") for p in pieces)  # cut between sentences
    assert [len(p.split()) for p in pieces] == [120, 120, 60]


def test_short_scraps_and_number_tables_are_dropped():
    assert linux_topics.page_passages([words(20)]) == []
    table = " ".join(f"0x{i:04x} {i} {i * 2}" for i in range(20)) + " register values"
    assert linux_topics.page_passages([table]) == []


def test_stratified_split_by_group_keeps_groups_whole_and_near_the_targets():
    examples = [TextExample(f"{label}{page}-{i}", label=label) for label in "ab" for page in range(20) for i in range(5)]
    page = {e.text: e.text.split("-")[0] for e in examples}
    splits = stratified_split(examples, seed=1, group=lambda e: page[e.text])
    homes = {}
    for name, part in splits.items():
        for example in part:
            assert homes.setdefault(page[example.text], name) == name
    assert {name: len(part) for name, part in splits.items()} == {"train": 140, "dev": 20, "test": 40}


def write_pages(root):
    """10 pages per topic, each 6 paragraphs of 46 words (2 passages) and a note found on every page."""
    for topic in linux_topics.TOPICS:
        for number in range(10):
            body = "\n\n".join(f"{topic} {words(45, f'p{number}x{k}')}" for k in range(6))
            page = root / topic / f"page{number}.rst.txt"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(f"Title\n=====\n\n{body}\n\n.. note::\n\n   Same note on every page of every topic, "
                            f"{words(40, 'n')}\n", encoding="utf-8")


def test_linux_split_on_hand_made_pages(tmp_path):
    write_pages(tmp_path)
    passages = linux_topics.linux_passages(str(tmp_path))
    assert not any("Same note" in p.text for p in passages)  # found on every page: no label of its own
    assert Counter(p.label for p in passages) == {t: 10 * 2 for t in linux_topics.TOPICS}
    splits = linux_topics.linux_topic_split(seed=0, root=str(tmp_path))
    pages = [{p.page for p in part} for part in splits.values()]
    assert not (pages[0] & pages[1] or pages[0] & pages[2] or pages[1] & pages[2])
    assert Counter(p.label for p in splits["test"]) == {t: 4 for t in linux_topics.TOPICS}
    assert splits == linux_topics.linux_topic_split(seed=0, root=str(tmp_path))


def test_linux_missing_gives_the_apt_get_line(tmp_path):
    with pytest.raises(DataError, match="apt-get install linux-doc"):
        linux_topics.linux_passages(str(tmp_path))


# ---------------------------------------------------------------- fortunes


def test_parse_fortunes_collapses_whitespace_keeps_attribution_removes_overstrikes():
    text = ("A celebrity is a person\n\tknown for his well-knownness.\n\t\t-- Somebody\n%\n"
            "This is the ____\b\b\b\bLAST time.\n%\n\n%\nLast one without a final %\n")
    assert fortunes.parse_fortunes(text) == [
        "A celebrity is a person known for his well-knownness. -- Somebody", "This is the LAST time.",
        "Last one without a final %"]
    assert fortunes.dedup_key("Don't  PANIC!") == fortunes.dedup_key("don t panic")


def write_fortunes(directory, extra: dict[str, str]):
    for category in fortunes.CATEGORIES:
        entries = [f"A {category} fortune number {i}." for i in range(10)]
        (directory / category).write_text("\n%\n".join(entries) + "\n%\n" + extra.get(category, ""), encoding="utf-8")


def test_fortune_duplicates_within_and_across_categories(tmp_path):
    write_fortunes(tmp_path, {"art": "Shared wisdom.\n%\nArt twice!\n%\nart  TWICE\n%\n",
                              "law": "shared, wisdom\n%\n"})
    read = fortunes.read_fortunes(str(tmp_path))
    texts = [f.text for f in read]
    assert "Art twice!" in texts and "art TWICE" not in texts  # the first copy stays
    assert not any("hared" in t for t in texts)  # in two categories: dropped from both
    assert Counter(f.label for f in read) == {c: 10 + (c == "art") for c in fortunes.CATEGORIES}
    splits = fortunes.fortune_split(seed=0, directory=str(tmp_path))
    assert Counter(f.label for f in splits["test"]) == {c: 2 for c in fortunes.CATEGORIES}


def test_fortunes_missing_gives_the_apt_get_line(tmp_path):
    with pytest.raises(DataError, match="apt-get install fortunes"):
        fortunes.read_fortunes(str(tmp_path))


# ---------------------------------------------------------------- the real sets


@functools.lru_cache(maxsize=None)
def real_split(name: str) -> dict:
    if name == "linux-docs-topics":
        return linux_topics.linux_topic_split(seed=0)
    return fortunes.fortune_split(seed=0)


def check_split(name: str, classes: int, total: tuple[int, int]):
    splits = real_split(name)
    sizes = {part: len(items) for part, items in splits.items()}
    assert total[0] <= sum(sizes.values()) <= total[1], sizes
    n = sum(sizes.values())
    assert abs(sizes["test"] / n - 0.2) < 0.02 and abs(sizes["dev"] / n - 0.1) < 0.02, sizes
    labels = builtin_labels(name)
    assert BUILTIN_DATA[name].name == "classification" and len(labels) == classes
    for part in splits.values():  # every split holds every label
        assert sorted({item.label for item in part}) == labels
    builtin = builtin_splits(name)  # the built-in name gives the same examples
    assert {part: [(e.text, e.label) for e in items] for part, items in builtin.items()} == {
        part: [(item.text, item.label) for item in items] for part, items in splits.items()}
    for part in ("train", "dev", "test"):
        assert load_examples("classification", f"{name}:{part}", "train", DataConfig()) == builtin[part]
    assert load_examples("classification", name, "dev", DataConfig()) == builtin["dev"]


@needs(HAVE_LINUX_DOC, "linux-doc")
def test_linux_docs_topics_real():
    check_split("linux-docs-topics", classes=17, total=(4500, 6000))  # 5,237 with linux-doc 6.1
    splits = real_split("linux-docs-topics")
    pages = [{p.page for p in part} for part in splits.values()]
    assert not (pages[0] & pages[1] or pages[0] & pages[2] or pages[1] & pages[2])
    label_of = {}
    for part in splits.values():
        for passage in part:
            assert passage.page.split("/")[0] == passage.label
            assert label_of.setdefault(passage.text.lower(), passage.label) == passage.label
    per_page = Counter(p.page for part in splits.values() for p in part)
    assert max(per_page.values()) <= linux_topics.PER_PAGE
    assert max(Counter(p.label for part in splits.values() for p in part).values()) <= linux_topics.PER_CLASS
    assert all(len(p.text.split()) >= linux_topics.MIN_WORDS for part in splits.values() for p in part)
    assert linux_topics.linux_topic_split(seed=0) == splits  # deterministic
    assert linux_topics.linux_topic_split(seed=1)["test"] != splits["test"]


@needs(HAVE_FORTUNES, "fortunes")
def test_fortunes_real():
    check_split("fortunes", classes=14, total=(5000, 6000))  # 5,647 with fortunes 1:1.99.1
    splits = real_split("fortunes")
    home, label_of = {}, {}
    for name, part in splits.items():
        for fortune in part:
            key = fortunes.dedup_key(fortune.text)
            assert home.setdefault(key, name) == name  # no normalised text in two splits ...
            assert label_of.setdefault(key, fortune.label) == fortune.label  # ... or two categories
            assert "\n" not in fortune.text and "\b" not in fortune.text
    assert sum(len(part) for part in splits.values()) == len(home)  # and none twice
    assert fortunes.fortune_split(seed=0) == splits  # deterministic
    assert fortunes.fortune_split(seed=1)["test"] != splits["test"]
    assert realdata.fortune_categories()["test"] == builtin_splits("fortunes")["test"]
