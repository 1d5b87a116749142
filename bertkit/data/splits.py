"""Stratified, duplicate-aware train/dev/test splits of labelled examples.

Torch-free and task-free: an example is anything with `.text`, `.label` and (optionally)
`.text_pair`, so the task readers (`tasks.formats.TextExample`) and the corpora (`data.bbc`)
share one split function and therefore one split.

`assign_splits` is the same idea for a user's file (`bertkit split`): rows given as group keys
(and labels, to stratify), every row assigned a split, a key never in two splits, each class
in proportion with a training row first, and the split sizes as near the whole file's targets as
the classes allow.

`write_tsv_splits` writes rows already in a seeded order as consecutive slices of fixed sizes
(the data scripts under scripts/ that build a task's train/dev/test files from real text).
"""

from __future__ import annotations

import math
import os
import random
from collections import Counter
from typing import Callable, Hashable, Iterable, Iterator, Sequence, TypeVar

from bertkit.errors import DataError

__all__ = ["stratified_split", "assign_splits", "rows_needed", "write_tsv_splits", "SPLITS"]

Example = TypeVar("Example")
Group = TypeVar("Group")


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


SPLITS = ("train", "dev", "test")
HELD_OUT = ("test", "dev")  # the order the held-out splits are filled in, as stratified_split's


def _groups_by_stratum(keys: Sequence[Hashable], labels: Sequence[Hashable] | None
                       ) -> dict[Hashable, list[list[int]]]:
    """Row indices grouped by key (in order of first appearance), the groups by stratum: the
    group's most common label (ties: the first in sorted order; a key under two labels is one
    group all the same), or one stratum, None, without labels."""
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    strata: dict[Hashable, list[list[int]]] = {}
    for members in groups.values():
        if labels is None:
            stratum = None
        else:
            counts = Counter(labels[i] for i in members)
            stratum = min(counts, key=lambda label: (-counts[label], str(label)))
        strata.setdefault(stratum, []).append(members)
    return strata


def _apportion(total: int, ideal: dict, caps: dict) -> dict:
    """`total` rows shared among strata near `ideal` (a float each), none above its cap: the whole
    parts first, then one more to the largest remainders (ties: the larger ideal, then the name),
    then, while rows are left, to any stratum below its cap in that order (Hamilton's method)."""
    given = {name: min(int(ideal[name]), caps[name]) for name in ideal}
    order = sorted(ideal, key=lambda name: (-(ideal[name] - int(ideal[name])), -ideal[name], str(name)))
    left = total - sum(given.values())
    while left > 0 and any(given[name] < caps[name] for name in order):
        for name in order:
            if left > 0 and given[name] < caps[name]:
                given[name] += 1
                left -= 1
    return given


def _split_targets(strata: dict, fractions: dict[str, float]) -> dict[str, dict]:
    """Rows each held-out split takes from each stratum: the whole file's target for the split,
    round(n * fraction), shared among the strata in proportion to their rows, never taking a
    stratum's first (shuffled) group, which is its training row."""
    sizes = {name: sum(len(m) for m in groups) for name, groups in strata.items()}
    room = {name: sizes[name] - len(groups[0]) for name, groups in strata.items()}
    targets = {}
    for split in HELD_OUT:
        fraction = fractions.get(split, 0.0)
        targets[split] = _apportion(_split_size(sum(sizes.values()), fraction),
                                    {name: sizes[name] * fraction for name in strata}, room)
        room = {name: room[name] - targets[split][name] for name in strata}
    return targets


def _fill(groups: list[list[int]], targets: dict[str, int], assigned: list[str]) -> None:
    """Groups of one stratum (shuffled) into splits: the first to train, each later one to the
    first held-out split it brings nearer its target (an empty split with a target takes the next
    group whatever its size: a split is never left empty for want of a small group), else train."""
    filled = dict.fromkeys(SPLITS, 0)
    for position, members in enumerate(groups):
        split = "train"
        if position:
            split = next((name for name in HELD_OUT if filled[name] < targets[name]
                          and (filled[name] == 0 or filled[name] + len(members) / 2 <= targets[name])), "train")
        filled[split] += len(members)
        for index in members:
            assigned[index] = split


def assign_splits(keys: Sequence[Hashable], fractions: dict[str, float], seed: int = 0,
                  labels: Sequence[Hashable] | None = None) -> list[str]:
    """The split ("train", "dev" or "test") of each row, deterministic for `seed`.

    `keys[i]` is row i's group key: rows with one key share a split (no text in two splits).
    `fractions` gives "dev" and "test" (each >= 0, together < 1); train takes the rest. With
    `labels` the split is stratified: per label (the groups' most common one, sorted), the groups are
    shuffled with random.Random(f"{seed}:{label}"), the first goes to train (so every class is
    trained on), and the held-out targets, round(n * fraction) of the whole file, are shared among
    the classes in proportion (largest remainders), so that small classes together still give a
    dev split. Without labels: one seeded shuffle of the groups, the same rules.
    """
    if not all(0 <= fractions.get(name, 0.0) < 1 for name in HELD_OUT) or sum(fractions.values()) >= 1:
        raise DataError(f"split fractions {fractions} must each be in [0, 1) and sum to < 1")
    strata = _groups_by_stratum(keys, labels)
    for name in strata:
        random.Random(f"{seed}:{'' if name is None else name}").shuffle(strata[name])
    targets = _split_targets(strata, fractions)
    assigned = ["train"] * len(keys)
    for name in sorted(strata, key=str):
        _fill(strata[name], {split: targets[split][name] for split in HELD_OUT}, assigned)
    return assigned


def rows_needed(fractions: dict[str, float]) -> int:
    """The fewest rows (each its own group) with which every split of a positive fraction gets one,
    and train one: round(n * fraction) >= 1 needs n >= 0.5 / fraction."""
    wanted = [fractions[name] for name in HELD_OUT if fractions.get(name, 0.0) > 0]
    n = max([max(1, math.floor(0.5 / f) - 1) for f in wanted] + [1 + len(wanted)])
    while True:
        takes = [_split_size(n, f) for f in wanted]
        if all(takes) and n - sum(takes) >= 1:
            return n
        n += 1


def groups_in_turn(groups: Iterable[Group], sizes: dict[str, int], splits: dict[str, list]
                   ) -> Iterator[tuple[Group, str]]:
    """Each of `groups` (e.g. headwords, in the caller's seeded order) with the split it goes to: the first
    split, in `sizes` order, whose list in `splits` (filled by the caller as it goes) is still below its
    size; stops when every split is full. A group may carry its split past its size: the caller decides
    what of it to keep."""
    names, at = list(sizes), 0
    for group in groups:
        while at < len(names) and len(splits[names[at]]) >= sizes[names[at]]:
            at += 1
        if at == len(names):
            return
        yield group, names[at]


def write_tsv_splits(rows: Sequence[tuple[str, str]], sizes: dict[str, int], out: str,
                     header: tuple[str, str] = ("text", "label")) -> None:
    """OUT/<name>.tsv for each split in `sizes`, in its order: the next sizes[name] rows (text, label as
    written), after a header line; the rows' order is the caller's (seeded), rows past the last split are
    not written. A tab or line end in a field would shift or split its row: refused before any write."""
    wanted = rows[:sum(sizes.values())]
    bad = next((row for row in wanted if any(ch in field for field in row for ch in "\t\r\n")), None)
    if bad is not None:
        raise DataError(f"the row {bad!r} holds a tab or line end; replace it before writing a TSV split")
    os.makedirs(out, exist_ok=True)
    start = 0
    for name, size in sizes.items():
        with open(os.path.join(out, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("\t".join(header) + "\n")
            f.writelines(f"{text}\t{label}\n" for text, label in wanted[start:start + size])
        start += size
