"""Stratified, duplicate-aware train/dev/test splits of labelled examples.

Torch-free and task-free: an example is anything with `.text`, `.label` and (optionally)
`.text_pair`, so the task readers (`tasks.formats.TextExample`) and the corpora (`data.bbc`)
share one split function and therefore one split.
"""

from __future__ import annotations

import random
from typing import Callable, Hashable, Sequence, TypeVar

from bertkit.errors import DataError

__all__ = ["stratified_split"]

Example = TypeVar("Example")


def _split_size(n: int, fraction: float) -> int:
    """round(n * fraction) with halves rounded up: floor(n * fraction + 0.5)."""
    return int(n * fraction + 0.5)


def _takes(filled: int, target: int, size: int, named_groups: bool) -> bool:
    """Whether a split below its target takes the next group. Duplicates (small groups) fill it up
    to the target, as always, so the existing splits (bbc, wordnet) do not move; a named group
    only while the split ends nearer its target with it than without it."""
    return filled + size / 2 <= target if named_groups else filled < target


def stratified_split(
    examples: Sequence[Example], seed: int = 0, dev_fraction: float = 0.1, test_fraction: float = 0.2,
    group: Callable[[Example], Hashable] | None = None,
) -> dict[str, list[Example]]:
    """Stratified, duplicate-aware train/dev/test split.

    Per label (sorted): the label's examples are grouped so that identical (text, text_pair)
    copies stay together, the groups are shuffled with random.Random(f"{seed}:{label}"), and
    the shuffled sequence is cut into test, dev and train. Each cut is the first group
    boundary at or after floor(n*fraction + 0.5), so the label proportions are kept and no
    text is in two splits (sizes can exceed the target by a duplicate or two).

    `group(example)` names the groups instead (a passage's page: all passages of a page in one
    split). Such groups can be large, so a group then goes to test (dev) only while that leaves
    the split nearer its target than without it (filled + size / 2 <= target), in shuffled
    order; a group too big for both goes to train.
    """
    if not (0 <= dev_fraction and 0 <= test_fraction and dev_fraction + test_fraction < 1):
        raise DataError(
            f"dev_fraction={dev_fraction} and test_fraction={test_fraction} must be >= 0 and sum to < 1"
        )
    key = group or (lambda e: (e.text, getattr(e, "text_pair", None)))
    by_label: dict[str, dict[Hashable, list[Example]]] = {}
    for example in examples:
        by_label.setdefault(str(example.label), {}).setdefault(key(example), []).append(example)
    splits: dict[str, list[Example]] = {"train": [], "dev": [], "test": []}
    for label in sorted(by_label):
        groups = list(by_label[label].values())
        random.Random(f"{seed}:{label}").shuffle(groups)
        n = sum(len(members) for members in groups)
        targets = {"test": _split_size(n, test_fraction), "dev": _split_size(n, dev_fraction)}
        filled = {"test": 0, "dev": 0, "train": 0}
        for members in groups:
            name = next((k for k in ("test", "dev") if _takes(filled[k], targets[k], len(members), group is not None)),
                        "train")
            filled[name] += len(members)
            splits[name] += members
    return splits
