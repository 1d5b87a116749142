"""The prepare recipe: a corpus tokenized once into memory-mapped token shards.

    bertkit prepare --corpus bbc --tokenizer runs/tiny/tokenizer --out shards/bbc

The corpus is streamed (never held whole in memory); the shards keep document and sentence
boundaries (format: `bertkit/data/shards.py`); `resume` continues an interrupted run.
"""

from __future__ import annotations

import os
import shlex
import signal

from bertkit.data.corpus import open_corpus
from bertkit.data.documents import PREPARED_BY, check_document_count, shard_origin
from bertkit.data.shards import META, prepare_shards
from bertkit.errors import BertkitError, DataError, RunInterrupted
from bertkit.io import loads_json, read_text
from bertkit.runtime.run_dir import check_apart, run_lock
from bertkit.tokenizer import Tokenizer


def prepare(corpus: str, tokenizer: str, out_dir: str, mode: str = "file", text_field: str = "text",
            shard_tokens: int = 1 << 24, workers: int = 0, resume: bool = False, progress: bool = True) -> dict:
    """Tokenize `corpus` (bbc, wordnet, a file or directory) with the tokenizer in directory
    `tokenizer` into shards in `out_dir`; returns the shards' meta.json as a dict. The run owns
    `out_dir` while it writes (runtime/run_dir.py: a second prepare into it is refused)."""
    if os.path.isdir(corpus):  # the shards' files inside the corpus folder would be read as documents
        check_apart(corpus, out_dir, "--corpus", inside_only=True)
    refuse_earlier_shards(out_dir, resume)
    check_document_count(corpus, mode)  # pretrain would refuse the shards only after all the tokenizing
    documents, tok = open_corpus(corpus, mode, text_field), Tokenizer.from_pretrained(tokenizer)
    created = not os.path.exists(out_dir)
    with run_lock(out_dir, f"prepare --corpus {corpus}"):
        try:
            return prepare_shards(documents, tok, out_dir, shard_tokens=shard_tokens, num_workers=workers,
                                  progress=progress, resume=resume, built_from=shard_origin(corpus, documents),
                                  made_by=PREPARED_BY)
        except DataError:  # bad input: a folder this run made holds nothing worth keeping
            meta = os.path.join(out_dir, META)  # (not written yet when the settings were refused)
            if created and os.path.isfile(meta) and not any(name.endswith(".bin") for name in os.listdir(out_dir)):
                os.remove(meta)
            raise
        except KeyboardInterrupt:
            path = os.path.join(out_dir, META)
            done = len(loads_json(read_text(path), path).get("shards", [])) if os.path.isfile(path) else 0
            raise RunInterrupted(f"interrupted; {done} complete shard(s) kept in {out_dir}: run the same command with "
                                 "--resume to continue after them", signal.SIGINT) from None


def refuse_earlier_shards(out_dir: str, resume: bool) -> None:
    """Shards already in `out_dir` are continued only with --resume: a new prepare rewrote their
    index first, so another corpus replaced them, and a failed one left them unusable."""
    path = os.path.join(out_dir, META)
    if os.path.isfile(path) and not resume:
        state = "complete shards" if loads_json(read_text(path), path).get("complete") else "an unfinished prepare"
        raise BertkitError(f"{out_dir} already holds {state} ({META}); pass --resume to continue an unfinished one, "
                           f"choose a new --out, or delete it to prepare again (rm -r {shlex.quote(out_dir)})")
