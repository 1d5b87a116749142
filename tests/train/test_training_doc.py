"""docs/training.md's table of every `[train]` key: each key of TrainConfig and of fine-tuning's
FinetuneOptions is in it once, with the defaults the code has (walk V: the page named none of
precision, llrd, grad_accum, save_every, ... that README sends readers there for)."""

import dataclasses
import os
import re

from bertkit.recipes.finetune import TRAIN_DEFAULTS, FinetuneOptions
from bertkit.train.config import TrainConfig

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "training.md")
DERIVED = {"max_steps": "from `epochs`", "eval_every": "per `evals_per_epoch`"}  # fine-tuning sets them


def shown(value) -> str:
    """A default as the table writes it: TOML literals in backticks, None as 'unset'."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f'`"{value}"`' if isinstance(value, str) else f"`{value!r}`"


def table_rows() -> dict[str, list[str]]:
    text = open(DOC, encoding="utf-8").read()
    section = text.split("## Every `[train]` key", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if re.match(r"\| `\w+` \|", line)]
    keys = [row[0].strip("| `") for row in rows]
    assert len(keys) == len(set(keys)), "a key listed twice"
    return {key: [cell.strip() for cell in row[1:3]] for key, row in zip(keys, rows)}


def test_every_train_key_is_in_the_table_with_its_defaults():
    rows = table_rows()
    train = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    finetune = {f.name: f.default for f in dataclasses.fields(FinetuneOptions)}
    assert set(rows) == set(train) | set(finetune)
    for key, default in train.items():
        assert rows[key][0] == shown(default), key
        assert rows[key][1] == DERIVED.get(key, shown(TRAIN_DEFAULTS.get(key, default))), key
    for key, default in finetune.items():
        assert rows[key] == ["—", shown(default)], key
