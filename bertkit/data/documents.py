"""Tokenized documents for a run: a corpus sharded once, the first N documents, a held-out split.

    corpus = CorpusDocuments("bbc", max_documents=500)
    docs = shard_documents(corpus, tokenizer, "runs/x/shards")
    train_docs, eval_docs = split_documents(len(docs), eval_fraction=0.05, seed=0)

`CorpusDocuments` reads a corpus at most once for a run that both trains a tokenizer on it and
shards it (kept in memory after the first reading), or streams it at each use (corpora larger
than memory). `shard_documents` tokenizes it into memory-mapped shards (`shards.prepare_shards`)
unless the directory already holds a complete set built from the same corpus files and settings
(a changed data.corpus, a file edited since, another mode or document limit rebuilds them), and
opens them; a source that already is a shard directory is opened as it is. Under several
processes only the main one writes, the others wait at `barrier` and then open what it wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from bertkit.data.corpus import TABLE_SUFFIXES, Corpus, check_text_file, open_corpus
from bertkit.data.shards import META, ShardedCorpus, prepare_shards
from bertkit.errors import ConfigError, DataError

__all__ = ["CorpusDocuments", "first", "check_document_count", "complete_shards", "is_shard_directory",
           "origin_changes", "shard_documents", "shard_origin", "split_documents"]


def first(docs: Iterable, n: int) -> Iterator:
    """The first `n` documents of `docs` (all of them when n = 0)."""
    for i, doc in enumerate(docs):
        if n and i >= n:
            return
        yield doc


class CorpusDocuments:
    """The documents (lists of sentences) of corpus `source`, its first `max_documents` (0 = all).

    Nothing is read until the documents are first walked; with `keep` they are then held in
    memory and later walks read no file (a tokenizer trained on them and the shards tokenized
    from them read the corpus once), without it every walk streams the corpus again."""

    def __init__(self, source: str | list, mode: str = "file", max_documents: int = 0, keep: bool = True,
                 text_field: str = "text"):
        self.source, self.mode, self.max_documents, self.keep = source, mode, max_documents, keep
        self.text_field = text_field  # a table's text column
        self._kept: list | None = None
        self._corpus: Corpus | None = None

    def opened(self) -> Corpus:
        """The `Corpus` (its files found, none read yet): what the shards record they came from."""
        if self._corpus is None:
            self._corpus = open_corpus(self.source, self.mode, self.text_field)
        return self._corpus

    def __iter__(self) -> Iterator[list[str]]:
        if self._kept is not None:
            return iter(self._kept)
        documents = first(self.opened(), self.max_documents)
        if not self.keep:
            return documents
        self._kept = list(documents)
        return iter(self._kept)

    def lines(self) -> "_Lines":
        """Every sentence of every document as one line of text, as a text file would hold them."""
        return _Lines(self)


class _Lines:
    """The lines of `CorpusDocuments`, walkable again (a tokenizer's trainer walks them twice)."""

    def __init__(self, documents: CorpusDocuments):
        self.documents = documents

    def __iter__(self) -> Iterator[str]:
        for doc in self.documents:
            # a sentence holding a line break is two lines, as in a file of "\n"-joined sentences
            yield from "\n".join(doc).split("\n")


ORIGIN_DATA_KEYS = ("corpus", "mode", "max_documents", "text_field")  # the [data] settings in a shard_origin


def shard_origin(source, corpus: Corpus, max_documents: int = 0) -> dict:
    """What shards of `corpus` are built from, as meta.json records it: the source as given,
    the mode, the document limit and the corpus files' fingerprint (path, size, time)."""
    origin = {"corpus": source if isinstance(source, str) else [str(s) for s in source], "mode": corpus.mode,
              "max_documents": max_documents, "files": corpus.fingerprint()}
    field = getattr(corpus, "text_field", "text")  # (a named corpus has none)
    if field != "text":  # recorded only when set, so shards built before the setting still match
        origin["text_field"] = field
    return origin


def _meta(directory: str) -> dict | None:
    try:
        with open(os.path.join(directory, META), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def is_shard_directory(path: str) -> bool:
    """True when `path` is the output of `bertkit prepare` (token ids, no text to read)."""
    return os.path.isfile(os.path.join(path, META))


PREPARED_BY = "bertkit prepare"  # meta.json's "made_by" in shards the user prepared: never rebuilt by a run


def refuse_prepared_shards(directory: str, setting: str) -> None:
    """Shards `bertkit prepare` wrote where a pretrain run keeps its own (OUT/shards,
    OUT/general-shards) are the user's: refused, never deleted and rebuilt from the corpus."""
    meta = _meta(directory)
    if meta and meta.get("made_by") == PREPARED_BY:
        raise ConfigError(f"{directory} holds shards made by bertkit prepare, and a pretrain run keeps its own there: "
                          f"to pre-train on them, --set {setting}={directory} (with tokenizer.path=the --tokenizer "
                          "given to prepare); else move them or give another --out")


def complete_shards(directory: str, origin: dict | None = None) -> bool:
    """True when `directory` holds shards that `prepare_shards` finished (an interrupted run
    leaves meta.json without "complete", and is resumed), built from `origin` when given."""
    meta = _meta(directory)
    return bool(meta and meta.get("complete")) and (origin is None or meta.get("built_from") == origin)


def _drop_stale(directory: str, origin: dict) -> bool:
    """Remove shards in `directory` built from another corpus or settings than `origin` (a
    failed run's leftovers must not become the next run's data), with a note naming what
    changed. True when what is left is a partial build of `origin` to resume."""
    meta = _meta(directory)
    if meta is None:
        return os.path.isdir(directory)
    changes = origin_changes(meta.get("built_from"), origin)
    if changes is None:
        return True
    warnings.warn(f"{directory} holds shards of other data ({changes}); rebuilding them")
    shutil.rmtree(directory)
    return False


def origin_changes(old, new: dict) -> str | None:
    """None when a recorded origin (`shard_origin`, plus any settings sections) equals `new`,
    else what differs, in the settings' names."""
    if old == new:
        return None
    if not isinstance(old, dict):
        return "no record of what it was built from (an older bertkit)"
    changed = [f"data.{key} {old.get(key)!r} -> {new.get(key)!r}" for key in ORIGIN_DATA_KEYS
               if old.get(key) != new.get(key)]
    if not changed and old.get("files") != new["files"]:
        changed.append("the corpus files changed since")
    changed += [f"the [{key}] settings" for key in new if key not in (*ORIGIN_DATA_KEYS, "files")
                and old.get(key) != new[key]]
    return "; ".join(changed)


def shard_documents(corpus: CorpusDocuments, tokenizer, directory: str, *, is_main: bool = True,
                    barrier: Callable[[], None] | None = None, progress: bool = False) -> ShardedCorpus:
    """A `ShardedCorpus` of `corpus`, tokenized into `directory` once (with a progress bar when
    `progress`) and rebuilt when the corpus or its settings change, or the corpus's source itself
    when it already is a shard directory."""
    if is_shard_directory(corpus.source):
        return ShardedCorpus(corpus.source, expected_vocab=tokenizer)
    if is_main:
        origin = shard_origin(corpus.source, corpus.opened(), corpus.max_documents)
        if not complete_shards(directory, origin):
            prepare_shards(corpus, tokenizer, directory, progress=progress, resume=_drop_stale(directory, origin),
                           built_from=origin)
    if barrier is not None:
        barrier()  # the other processes open the shards once the main one has written them
    return ShardedCorpus(directory, expected_vocab=tokenizer)


def too_few_documents(n: int) -> ConfigError:
    return ConfigError(f"the corpus has {n} document(s); pre-training needs at least 2 (one to train on, one to "
                       "hold out), and a text file is one document: one document per line: --set data.mode=line; "
                       "documents separated by blank lines: --set data.mode=blank (prepare: --mode line, --mode "
                       "blank); or use JSONL, one {\"text\": ...} per line")


def check_document_count(source, mode: str) -> None:
    """Refuse, before a tokenizer or shards are built from it, a corpus that is one text file of
    too few documents: an empty file, a file that is not text (gzip, binary: said so, not counted),
    or a .txt file read whole (mode "file": one document). `pretrain` and `prepare` both call it."""
    if not isinstance(source, (str, os.PathLike)) or not os.path.isfile(source):
        return  # a directory, a named corpus, shards: counted as they are read
    path = Path(source)
    if _is_blank(path):
        raise DataError(f"corpus {path} is empty (no text in it); give a file with your documents")
    check_text_file(path)
    if mode == "file" and path.suffix.lower() not in TABLE_SUFFIXES:
        raise too_few_documents(1)


def _is_blank(path: Path, probe: int = 1 << 16) -> bool:
    """An empty or whitespace-only file (a larger one is not read through for this)."""
    with open(path, "rb") as f:
        head = f.read(probe)
    return not head.strip() and len(head) < probe


def split_documents(n: int, eval_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) document indices from a seeded shuffle; at least one of each."""
    if n < 2:
        raise too_few_documents(n)
    order = np.random.default_rng([seed, 7]).permutation(n)
    n_eval = min(n - 1, max(1, round(eval_fraction * n)))
    return np.sort(order[n_eval:]), np.sort(order[:n_eval])
