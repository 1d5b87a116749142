"""Keywords for keyword masking (`MLMCollator(strategy="keyword")`), from a list or a file."""

from __future__ import annotations

import os

from bertkit.errors import ConfigError

__all__ = ["read_keywords"]


def read_keywords(spec) -> list[str]:
    """Keywords from a list of strings or a text file (one per line, `#` comments)."""
    if isinstance(spec, str):
        if not os.path.isfile(spec):
            raise ConfigError(f"data.keywords file {spec} does not exist; give a file with one word "
                              "per line, or a list of words")
        with open(spec, encoding="utf-8") as f:
            words = [line.split("#", 1)[0].strip() for line in f]
    else:
        words = [str(w).strip() for w in spec]
    words = [w for w in words if w]
    multi = [w for w in words if len(w.split()) > 1]
    if multi:
        raise ConfigError(f"keywords are single words; {multi[0]!r} has several (list its words apart)")
    if not words:
        raise ConfigError("data.keywords holds no word")
    return words
