"""Built-in real data sets: names that stand in for data files (`--train bbc`, `--data bbc:test`).

Each has fixed, seeded train/dev/test splits built from installable assets (BBC News; the Debian
packages wordnet-base, linux-doc and fortunes); see `realdata.py` for how each is made. The
classification sets: `bbc` (news topics, 5 classes, whole articles), `wordnet-supersense`
(dictionary definitions, 45 classes), `linux-docs-topics` (100-word passages of the kernel
documentation -> subsystem, 17 classes, split by page) and `fortunes` (fortune cookies ->
category, 14 classes, short texts). A data source is read as, in this order: a
built-in name, a file or directory that exists, a data set in the local Hugging Face datasets
cache (`resolve_source`, hub_datasets.py).
"""

from __future__ import annotations

import contextlib
import functools
import os

from bertkit.errors import DataError
from bertkit.io import is_json_array, missing_file
from bertkit.tasks import embedding, multiple_choice, qa, realdata, seq2seq, sequence, similarity, tagging
from bertkit.tasks.hub_datasets import DEFAULT_SPLITS, is_reference, parse_name, resolve
from bertkit.tasks.common import DataConfig
from bertkit.tasks.registry import TASKS, get_task
from bertkit.tasks.spec import Task

# name -> the task it is for
BUILTIN_DATA: dict[str, Task] = {
    "bbc": sequence.CLASSIFICATION, "wordnet-supersense": sequence.CLASSIFICATION,
    "linux-docs-topics": sequence.CLASSIFICATION, "fortunes": sequence.CLASSIFICATION,
    "wordnet-tagging": tagging.TOKEN_CLASSIFICATION, "wordnet-qa": qa.QA, "wordnet-usage-qa": qa.QA,
    "wordnet-gloss-choice": multiple_choice.MULTIPLE_CHOICE, "wordnet-reverse-dictionary": seq2seq.SEQ2SEQ,
    "wordnet-definitions": seq2seq.SEQ2SEQ, "bbc-headlines": embedding.EMBEDDING,
    "wordnet-usage-definitions": embedding.EMBEDDING, "wordnet-gloss-similarity": similarity.SIMILARITY}
SPLITS = ("train", "dev", "test")
# Extensions of the files the task readers take: a missing name with one is a file, not a data set name.
FILE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".json", ".txt", ".conll", ".parquet")


def parse_source(source: str) -> tuple[str, str | None]:
    """"bbc:test" -> ("bbc", "test"); a file path -> (path, None)."""
    name, _, split = source.partition(":")
    if name in BUILTIN_DATA:
        if split and split not in SPLITS:
            raise DataError(f"unknown split {split!r} of built-in data {name}; use {name}:train, "
                            f"{name}:dev or {name}:test")
        return name, split or None
    return source, None


def source_name(source: str, split: str) -> str:
    """How a message names the data read from `source` for `split`: a built-in name with its split
    ("bbc:train"; the split is implied when the name gives none), anything else as given."""
    name, explicit = parse_source(source)
    return f"{name}:{explicit or split}" if name in BUILTIN_DATA else source


def is_builtin(source: str) -> bool:
    return parse_source(source)[0] in BUILTIN_DATA


def _contiguous_split(items: list, key, dev_fraction: float = 0.1, test_fraction: float = 0.2) -> dict:
    """Cut an already shuffled list into test, dev, train, moving each cut forward to where
    `key` changes, so items sharing a key (a context, a synset) stay in one split."""
    n = len(items)

    def boundary(index: int) -> int:
        while 0 < index < n and key(items[index]) == key(items[index - 1]):
            index += 1
        return index

    test_end = boundary(int(n * test_fraction + 0.5))
    dev_end = boundary(test_end + int(n * dev_fraction + 0.5))
    return {"test": items[:test_end], "dev": items[test_end:dev_end], "train": items[dev_end:]}


@functools.lru_cache(maxsize=4)
def builtin_splits(name: str) -> dict:
    """{"train", "dev", "test"} of a built-in real data set (fixed, seeded splits)."""
    if name == "bbc":
        return realdata.bbc_topics(split_seed=0)
    if name == "bbc-headlines":  # the bbc split: the same articles in each split
        return realdata.bbc_headlines(split_seed=0)
    if name == "wordnet-supersense":
        return realdata.stratified_split(realdata.wordnet_supersense(seed=0), seed=0)
    if name == "linux-docs-topics":  # all passages of a page in one split
        return realdata.linux_docs_topics(split_seed=0)
    if name == "fortunes":
        return realdata.fortune_categories(split_seed=0)
    if name == "wordnet-tagging":
        # sentences of one synset are adjacent (visited in a seeded order): keep them together
        examples = realdata.wordnet_examples_tagged(seed=0)
        return _contiguous_split(examples, key=lambda e: next(t[2:] for t in e.tags if t != "O"))
    if name == "wordnet-qa":
        examples = realdata.wordnet_qa(seed=0, impossible_fraction=0.1)
        return _contiguous_split(examples, key=lambda e: e.context)
    if name == "wordnet-usage-qa":
        return _contiguous_split(realdata.wordnet_usage_qa(seed=0), key=lambda e: e.context)
    if name == "wordnet-gloss-choice":  # one example per synset: no two share a context
        return _contiguous_split(realdata.wordnet_gloss_choice(seed=0), key=lambda e: e.id)
    if name == "wordnet-reverse-dictionary":  # one example per synset
        return _contiguous_split(realdata.wordnet_reverse_dictionary(seed=0), key=lambda e: e.text)
    if name == "wordnet-usage-definitions":  # one pair per definition
        return _contiguous_split(realdata.wordnet_usage_definitions(seed=0), key=lambda e: e.positive)
    if name == "wordnet-gloss-similarity":  # split by synset before the pairs are made
        return realdata.wordnet_gloss_similarity(seed=0)
    if name == "wordnet-definitions":  # a word's examples are adjacent: test words are unseen
        return _contiguous_split(realdata.wordnet_definitions(seed=0), key=lambda e: realdata.definition_word(e.text))
    raise DataError(f"unknown built-in data {name!r}; use one of {', '.join(BUILTIN_DATA)}")


def builtin_labels(name: str) -> list[str] | None:
    """The full label inventory of a built-in set (rare labels may be missing from train)."""
    if name == "wordnet-supersense":
        return sorted(set(realdata.LEXNAMES))
    if name == "linux-docs-topics":
        return sorted(realdata.LINUX_TOPICS)
    if name == "fortunes":
        return sorted(realdata.FORTUNE_CATEGORIES)
    if name == "wordnet-tagging":
        return sorted(["O"] + [f"{p}-{s}" for s in realdata.LEXNAMES for p in ("B", "I")])
    return None


def load_examples(task: Task | str, source: str, split: str, data: DataConfig) -> list:
    """Labelled examples of `task` from a file or a built-in set (`split` is used for a
    built-in name given without ":split")."""
    task = get_task(task)
    name, explicit = parse_source(source)
    if name in BUILTIN_DATA:
        if BUILTIN_DATA[name] is not task:
            raise DataError(f"built-in data {name} is for --task {BUILTIN_DATA[name].name}, not {task.name}")
        return list(builtin_splits(name)[explicit or split])
    path = resolve_source(task, source, split)
    with naming_the_task_of_the_format(task, path):
        return task.read(path, data)


# Extensions that one task alone reads: a file of another task's format refused by this one is
# more likely the wrong --task than a broken file.
FORMAT_TASKS = {".conll": "token-classification", ".json": "qa"}


@contextlib.contextmanager
def naming_the_task_of_the_format(task: Task, path: str):
    """Add to a reader's DataError which task reads the file's format, when another one does."""
    try:
        yield
    except DataError as e:
        owner = FORMAT_TASKS.get(os.path.splitext(path)[1].lower())
        if owner is None or owner == task.name or is_json_array(path):  # no SQuAD file is an array
            raise
        raise DataError(f"{e} ({os.path.splitext(path)[1]} is the {owner} format: did you mean "
                        f"--task {owner}?)") from None


def resolve_source(task: Task, source: str, split: str) -> str:
    """A source that is not a built-in name as its reader takes it: a path that exists as it is
    (a FIFO or device exists: its reader refuses it by name); else a data set in the local Hugging
    Face datasets cache as "NAME:CONFIG:SPLIT" (`split`, "train", "dev" or "test", picks the split
    when the name gives none); else a DataError saying where it looked."""
    if os.path.exists(source):
        return source
    if os.path.splitext(source)[1].lower() in FILE_SUFFIXES and not is_reference(source):
        raise missing_file(source)  # a misspelt file, not a data set name: say so, and the near name
    if parse_name(source) is None:
        raise DataError(f"{source}: no such file (or built-in data name: {', '.join(BUILTIN_DATA)})")
    if task.file_only and is_reference(source):
        readers = ", ".join(t.name for t in TASKS.values() if not t.file_only)
        raise DataError(f"{source} is a Hugging Face data set; --task {task.name} reads files only (CoNLL, SQuAD "
                        f"JSON, JSONL): a data set name works for {readers}")
    return resolve(source, split)


def default_dev(train_source: str) -> str | None:
    """The dev set that goes with a training source: a built-in name's dev split, a cached hub
    data set's validation (or dev) split; None for a file."""
    name = parse_source(train_source)[0]
    if name in BUILTIN_DATA:
        return name + ":dev"
    if os.path.exists(train_source) or not is_reference(train_source):
        return None
    repo_id, config, _ = parse_name(train_source)
    for candidate in [f"{repo_id}:{config}:{split}" for split in DEFAULT_SPLITS["dev"]] if config else [repo_id]:
        try:
            return resolve(candidate, "dev")
        except DataError:  # not this split (or none cached, several configs): --dev is required
            continue
    return None

