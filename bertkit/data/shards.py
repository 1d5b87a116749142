"""Tokenized corpora on disk as memory-mapped shards.

``prepare_shards`` tokenizes a stream of documents (lists of sentences) once and writes:

* ``tokens-NNNNN.bin``  all token ids of the shard, concatenated (uint16 when the vocabulary
  has at most 65,535 entries, else uint32: half the disk and page cache for BERT vocabularies);
* ``sents-NNNNN.bin``   int64 sentence offsets into the shard's tokens, ``n_sentences + 1``
  entries starting at 0: sentence ``s`` is ``tokens[sents[s]:sents[s+1]]``;
* ``docs-NNNNN.bin``    int64 document offsets into the shard's sentences, ``n_documents + 1``
  entries: document ``d`` is sentences ``docs[d]`` .. ``docs[d+1] - 1``;
* ``meta.json``         dtype, counts per shard, vocabulary size and fingerprint.

A document never spans two shards. A shard is closed once it holds at least ``shard_tokens``
tokens; its files are written under temporary names and moved into place with
``os.replace``, and only then is ``meta.json`` rewritten (also atomically) to list it. An
interrupted run therefore leaves a directory whose ``meta.json`` lists only complete shards,
and ``prepare_shards(..., resume=True)`` skips the documents they hold and goes on.

``ShardedCorpus`` opens such a directory lazily (``np.memmap``: only touched pages are read),
checks it against ``meta.json`` and the tokenizer's vocabulary, and serves documents as
lists of sentence arrays, so corpora larger than memory work.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing as mp
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from bertkit.errors import DataError
from bertkit.io import atomic_write_json, read_json_object
from bertkit.runtime.progress import progress

__all__ = ["prepare_shards", "ShardedCorpus", "vocab_fingerprint", "token_dtype"]

FORMAT = "bertkit-shards"
VERSION = 1
META = "meta.json"


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id (0 .. vocab_size-1) fits in 16 bits with room to spare, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 65535 else np.dtype(np.uint32)


def vocab_fingerprint(vocab) -> str:
    """sha256 over the vocabulary sorted by token: ``token<TAB>id<NL>`` lines.

    ``vocab`` is a tokenizer (anything with ``get_vocab()``), a ``{token: id}`` dict, or an
    already computed fingerprint string (returned unchanged).
    """
    if isinstance(vocab, str):
        return vocab
    if hasattr(vocab, "get_vocab"):
        vocab = vocab.get_vocab()
    h = hashlib.sha256()
    for token, idx in sorted(vocab.items()):
        h.update(f"{token}\t{idx}\n".encode("utf-8"))
    return h.hexdigest()


def _shard_files(directory: Path, index: int) -> dict[str, Path]:
    return {k: directory / f"{k}-{index:05d}.bin" for k in ("tokens", "sents", "docs")}


def _read_meta(directory: Path) -> dict:
    path = directory / META
    if not path.is_file():
        raise DataError(f"{directory} has no {META}; it is not a shard directory: run bertkit prepare first")
    meta = read_json_object(path, "the shard index is corrupt: delete the directory and prepare it again "
                                  "(bertkit prepare, or re-run pretrain)")
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise DataError(f"{path} is not a bertkit shard index (version {VERSION}); re-run bertkit prepare")
    return meta


# ---------------------------------------------------------------------------- tokenizing

_worker_tokenizer = None


def _init_worker(tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _encode_docs(docs: list[list[str]], tokenizer=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Tokenize a batch of documents: per document (token ids, sentence lengths).

    Sentences that tokenize to nothing are dropped (they would be empty segments later).
    """
    tok = tokenizer if tokenizer is not None else _worker_tokenizer
    flat = [s for doc in docs for s in doc]
    ids = tok.encode_batch(flat, add_special_tokens=False) if flat else []
    out, k = [], 0
    for doc in docs:
        sents = [i for i in ids[k:k + len(doc)] if i]
        k += len(doc)
        lengths = np.fromiter((len(s) for s in sents), dtype=np.int64, count=len(sents))
        tokens = np.fromiter(itertools.chain.from_iterable(sents), dtype=np.int64, count=int(lengths.sum()))
        out.append((tokens, lengths))
    return out


@contextmanager
def _tokenizers_single_threaded():
    """Workers each use one thread: 2 processes x N Rust threads would oversubscribe cores.

    Set before fork so that the `tokenizers` fork hook sees parallelism configured and does
    not print its deadlock warning in every child.
    """
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def _batches(docs: Iterable[list[str]], size: int) -> Iterator[list[list[str]]]:
    it = iter(docs)
    while batch := list(itertools.islice(it, size)):
        yield batch


# ---------------------------------------------------------------------------- writing


class _ShardWriter:
    """Accumulates one shard: tokens stream to a temp file, offsets stay in memory."""

    def __init__(self, directory: Path, index: int, dtype: np.dtype):
        self.files = _shard_files(directory, index)
        self.index, self.dtype = index, dtype
        self.tmp = {k: p.with_name(p.name + ".tmp") for k, p in self.files.items()}
        self.f = open(self.tmp["tokens"], "wb")
        self.sent_lengths: list[np.ndarray] = []
        self.doc_sent_counts: list[int] = []
        self.tokens = 0

    def add(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        self.f.write(tokens.astype(self.dtype).tobytes())
        self.sent_lengths.append(lengths)
        self.doc_sent_counts.append(len(lengths))
        self.tokens += len(tokens)

    def close(self) -> dict:
        """Move the shard's files into place and return its counts for meta.json."""
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        lengths = np.concatenate(self.sent_lengths) if self.sent_lengths else np.zeros(0, np.int64)
        sents = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        docs = np.concatenate([[0], np.cumsum(self.doc_sent_counts)]).astype(np.int64)
        sents.tofile(self.tmp["sents"])
        docs.tofile(self.tmp["docs"])
        for k in ("tokens", "sents", "docs"):
            os.replace(self.tmp[k], self.files[k])
        return {"index": self.index, "tokens": self.tokens, "sentences": len(lengths), "documents": len(self.doc_sent_counts)}

    def abandon(self) -> None:
        self.f.close()
        self.tmp["tokens"].unlink(missing_ok=True)


def prepare_shards(
    docs: Iterable[list[str]],
    tokenizer,
    out_dir: str | Path,
    shard_tokens: int = 1 << 24,
    num_workers: int = 0,
    progress: bool = True,
    resume: bool = False,
    batch_docs: int = 64,
    built_from: dict | None = None,
    made_by: str | None = None,
) -> dict:
    """Tokenize documents (lists of sentences) into memory-mapped shards under ``out_dir``.

    ``shard_tokens``: a shard closes after the document that brings it to this many tokens
    (default 16M tokens = 32 MB as uint16). ``num_workers``: 0 or 1 tokenizes in this process
    with the Rust tokenizer's own thread pool over each batch; >= 2 uses that many processes,
    one thread each. On the 2-core machine the in-process path was as fast or faster (BBC
    News, 1.08M tokens: 3.6 s vs 4.8-5.3 s with 2 processes), hence the default. ``resume=True``
    continues an interrupted run: the documents held by complete shards are skipped in
    ``docs`` (which must yield the same documents in the same order, as `Corpus` does).
    ``built_from`` (JSON values: the corpus, its fingerprint, the settings) is recorded in
    meta.json so a later run can tell whether these shards are still its data; resuming
    shards built from something else is refused. ``made_by`` names the command that owns them
    (`bertkit prepare`: a pretrain run must never rebuild them over, as it does its own).
    Returns the final meta dict (also written to ``out_dir/meta.json``).
    """
    if shard_tokens < 1:
        raise DataError(f"shard_tokens must be positive, got {shard_tokens}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = _starting_meta(out, tokenizer, shard_tokens, resume, built_from)
    if made_by:
        meta["made_by"] = made_by
    if meta["complete"]:
        return meta
    atomic_write_json(out / META, _with_totals(meta))
    docs_iter = itertools.islice(iter(docs), meta["documents_read"], None)  # skip finished work
    pool = None
    if num_workers >= 2:
        with _tokenizers_single_threaded():
            pool = mp.get_context("fork").Pool(num_workers, initializer=_init_worker, initargs=(tokenizer,))
        encoded = pool.imap(_encode_docs, _batches(docs_iter, batch_docs), chunksize=1)
    else:
        encoded = (_encode_docs(b, tokenizer) for b in _batches(docs_iter, batch_docs))
    bar = _progress(progress, meta)
    try:
        _write_shards(encoded, out, meta, shard_tokens, bar)
    finally:
        if pool is not None:
            pool.terminate()
        if bar is not None:
            bar.close()
    if not meta["shards"]:
        raise DataError("no tokens were produced: the corpus is empty or every document tokenized to nothing")
    meta["complete"] = True
    meta = _with_totals(meta)
    atomic_write_json(out / META, meta)
    return meta


def _starting_meta(out: Path, tokenizer, shard_tokens: int, resume: bool, built_from: dict | None) -> dict:
    """The meta record to build on: new, or (resume) the shards an interrupted run completed,
    or the finished meta as it is (its "complete" is true); resuming other data is refused."""
    vocab_size = int(tokenizer.vocab_size)
    fingerprint = vocab_fingerprint(tokenizer)
    meta = {
        "format": FORMAT, "version": VERSION, "dtype": token_dtype(vocab_size).name, "vocab_size": vocab_size,
        "vocab_fingerprint": fingerprint, "tokenizer_kind": getattr(tokenizer, "kind", None),
        "shard_tokens": int(shard_tokens), "complete": False, "documents_read": 0, "shards": [],
        "built_from": built_from,
    }
    if resume and (out / META).is_file():
        old = _read_meta(out)
        if old["vocab_fingerprint"] != fingerprint:
            raise DataError(
                f"{out} holds shards built with a different vocabulary; resume with the same "
                f"tokenizer, or prepare into an empty directory"
            )
        # shards from before the record (no key) resume as they did; compared as meta.json holds it
        if "built_from" in old and old["built_from"] != json.loads(json.dumps(built_from)):
            raise DataError(f"{out} holds shards built from another corpus or settings ({old.get('built_from')}); "
                            "resume with the same ones, or prepare into an empty directory")
        if old["complete"]:
            return old
        meta.update(shards=old["shards"], documents_read=old["documents_read"])
    return meta


def _write_shards(encoded: Iterable, out: Path, meta: dict, shard_tokens: int, bar) -> None:
    """Write the encoded documents into shards, closing one when it reaches `shard_tokens`;
    `meta` gains each closed shard (and is saved then: an interrupted run resumes after it)."""
    dtype = np.dtype(meta["dtype"])
    writer = None
    pending_docs = 0  # input documents read since the last closed shard
    try:
        for batch in encoded:
            for tokens, lengths in batch:
                pending_docs += 1
                if len(tokens) == 0:
                    continue
                if writer is None:
                    writer = _ShardWriter(out, len(meta["shards"]), dtype)
                writer.add(tokens, lengths)
                if writer.tokens >= shard_tokens:
                    meta["shards"].append(writer.close())
                    writer = None
                    meta["documents_read"] += pending_docs
                    pending_docs = 0
                    atomic_write_json(out / META, _with_totals(meta))
            if bar is not None:
                bar.update(len(batch))
                done = sum(s["tokens"] for s in meta["shards"]) + (writer.tokens if writer else 0)
                bar.set_postfix(tokens=done, refresh=False)
        if writer is not None:
            meta["shards"].append(writer.close())
            writer = None
        meta["documents_read"] += pending_docs
    finally:
        if writer is not None:
            writer.abandon()


def _with_totals(meta: dict) -> dict:
    meta = dict(meta)
    for key in ("tokens", "sentences", "documents"):
        meta[f"num_{key}"] = int(sum(s[key] for s in meta["shards"]))
    return meta


def _progress(enabled: bool, meta: dict):
    return progress(desc="tokenizing", unit="doc", initial=meta["documents_read"], enabled=enabled)


# ---------------------------------------------------------------------------- reading


class ShardedCorpus:
    """Documents from a shard directory, read lazily through memory maps.

    ``corpus[i]`` is document ``i`` as a list of 1-D integer arrays (one per sentence, views
    into the memory map: copy them before writing). ``expected_vocab`` (a tokenizer, a
    ``{token: id}`` dict or a fingerprint string) is checked against the shards' vocabulary.
    """

    def __init__(self, directory: str | Path, expected_vocab=None):
        self.directory = Path(directory)
        meta = _read_meta(self.directory)
        if not meta.get("complete"):
            raise DataError(
                f"{self.directory} holds an unfinished prepare run; re-run bertkit prepare with "
                f"resume to finish it"
            )
        if expected_vocab is not None:
            want = vocab_fingerprint(expected_vocab)
            if want != meta["vocab_fingerprint"]:
                raise DataError(
                    f"shards were built with a different vocabulary (fingerprint "
                    f"{meta['vocab_fingerprint'][:12]}, tokenizer has {want[:12]}); pre-train with the tokenizer "
                    f"they were prepared with (--set tokenizer.path=DIR, the --tokenizer given to bertkit prepare), "
                    f"or re-run bertkit prepare with this tokenizer"
                )
        self.meta = meta
        self.dtype = np.dtype(meta["dtype"])
        self.vocab_size = int(meta["vocab_size"])
        self.shards = meta["shards"]
        for s in self.shards:
            self._check_sizes(s)
        self.num_tokens = int(sum(s["tokens"] for s in self.shards))
        self.num_sentences = int(sum(s["sentences"] for s in self.shards))
        self.num_documents = int(sum(s["documents"] for s in self.shards))
        # doc_starts[k] = global index of shard k's first document (for bisection).
        self._doc_starts = np.cumsum([0] + [s["documents"] for s in self.shards])
        self._maps: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # memory-mapped

    def _check_sizes(self, shard: dict) -> None:
        files = _shard_files(self.directory, shard["index"])
        want = {
            "tokens": shard["tokens"] * self.dtype.itemsize,
            "sents": (shard["sentences"] + 1) * 8,
            "docs": (shard["documents"] + 1) * 8,
        }
        for key, path in files.items():
            if not path.is_file():
                raise DataError(f"{path} is missing; the shard directory is incomplete: re-run bertkit prepare")
            size = path.stat().st_size
            if size != want[key]:
                raise DataError(
                    f"{path} has {size} bytes but meta.json expects {want[key]}; the shard is "
                    f"truncated or corrupt: re-run bertkit prepare"
                )

    def _shard(self, k: int):
        if k not in self._maps:
            files = _shard_files(self.directory, self.shards[k]["index"])
            # plain ndarray views of the maps: slicing a memmap makes a memmap per sentence, whose
            # bookkeeping took a third of the time cleaning spent reading 110k documents
            tokens, sents, docs = (np.memmap(files[key], dtype=dtype, mode="r").view(np.ndarray) for key, dtype in
                                   (("tokens", self.dtype), ("sents", np.int64), ("docs", np.int64)))
            if sents[-1] != len(tokens) or docs[-1] != len(sents) - 1:
                raise DataError(f"shard {k} of {self.directory} has inconsistent offsets; re-run bertkit prepare")
            self._maps[k] = (tokens, sents, docs)
        return self._maps[k]

    def __len__(self) -> int:
        return self.num_documents

    def __getitem__(self, i: int) -> list[np.ndarray]:
        if not -self.num_documents <= i < self.num_documents:
            raise IndexError(f"document {i} out of range ({self.num_documents} documents)")
        i %= self.num_documents
        k = int(np.searchsorted(self._doc_starts, i, side="right")) - 1
        tokens, sents, docs = self._shard(k)
        d = i - int(self._doc_starts[k])
        s0, s1 = int(docs[d]), int(docs[d + 1])
        bounds = sents[s0:s1 + 1]
        return [tokens[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        for i in range(self.num_documents):
            yield self[i]

    def sentence_counts(self) -> np.ndarray:
        """Number of sentences of every document (int64, reads only the document indexes)."""
        return np.concatenate([np.diff(self._shard(k)[2]) for k in range(len(self.shards))])

    def document_lengths(self) -> np.ndarray:
        """Number of tokens of every document (int64)."""
        out = []
        for k in range(len(self.shards)):
            _, sents, docs = self._shard(k)
            out.append(np.diff(np.asarray(sents)[np.asarray(docs)]))
        return np.concatenate(out)

    def __repr__(self) -> str:
        return (f"ShardedCorpus({str(self.directory)!r}, documents={self.num_documents}, "
                f"sentences={self.num_sentences}, tokens={self.num_tokens}, dtype={self.dtype.name})")

