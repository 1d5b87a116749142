"""Stratified, duplicate-aware train/dev/test splits of labelled examples.

Torch-free and task-free: an example is anything with `.text`, `.label` and (optionally)
`.text_pair`, so the task readers (`tasks.formats.TextExample`) and the corpora (`data.bbc`)
share one split function and therefore one split.
"""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

from bertkit.errors import DataError

__all__ = ["stratified_split"]

Example = TypeVar("Example")


def _split_size(n: int, fraction: float) -> int:
    """round(n * fraction) with halves rounded up: floor(n * fraction + 0.5)."""
    return int(n * fraction + 0.5)


def stratified_split(
    examples: Sequence[Example], seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2
) -> dict[str, list[Example]]:
    """Stratified, duplicate-aware train/dev/test split.

    Per label (sorted): the label's examples are grouped so that identical (text, text_pair)
    copies stay together, the groups are shuffled with random.Random(f"{seed}:{label}"), and
    the shuffled sequence is cut into test, dev and train. Each cut is the first group
    boundary at or after floor(n*fraction + 0.5), so the label proportions are kept and no
    text is in two splits (sizes can exceed the target by a duplicate or two).
    """
    if not (0 <= dev_fraction and 0 <= test_fraction and dev_fraction + test_fraction < 1):
        raise DataError(
            f"dev_fraction={dev_fraction} and test_fraction={test_fraction} must be >= 0 and sum to < 1"
        )
    by_label: dict[str, dict[tuple, list[Example]]] = {}
    for example in examples:
        groups = by_label.setdefault(str(example.label), {})
        groups.setdefault((example.text, getattr(example, "text_pair", None)), []).append(example)
    splits: dict[str, list[Example]] = {"train": [], "dev": [], "test": []}
    for label in sorted(by_label):
        groups = list(by_label[label].values())
        random.Random(f"{seed}:{label}").shuffle(groups)
        n = sum(len(group) for group in groups)
        targets = {"test": _split_size(n, test_fraction), "dev": _split_size(n, dev_fraction)}
        filled = {"test": 0, "dev": 0, "train": 0}
        for group in groups:
            name = next((k for k in ("test", "dev") if filled[k] < targets[k]), "train")
            filled[name] += len(group)
            splits[name] += group
    return splits
