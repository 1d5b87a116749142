"""Write the training texts of a built-in classification set as JSONL (one {"text": ...} per
line): what a user's own train.jsonl holds, for continued pre-training on a task's text
(configs/tapt-mini.toml). Only the training split is written, never dev or test; with
--max-train-examples N, the same seeded subset `bertkit finetune --set data.max_train_examples=N
--seed SEED` trains on.

    python scripts/train_texts.py fortunes runs/fortunes-train.jsonl [--max-train-examples 4000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bertkit.io import atomic_write_text  # noqa: E402
from bertkit.tasks.builtin import BUILTIN_DATA, builtin_splits  # noqa: E402
from bertkit.tasks.common import subsample  # noqa: E402
from bertkit.tasks.sequence import CLASSIFICATION  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sets = [name for name, task in BUILTIN_DATA.items() if task is CLASSIFICATION]
    p.add_argument("set", choices=sets, help="a built-in classification set")
    p.add_argument("out", help="the JSONL file to write")
    p.add_argument("--max-train-examples", type=int, default=0, help="a seeded subset, as finetune's (0 = all)")
    p.add_argument("--seed", type=int, default=0, help="the fine-tune's --seed (it seeds the subset)")
    args = p.parse_args(argv)
    train = subsample(builtin_splits(args.set)["train"], args.max_train_examples, args.seed)
    atomic_write_text(args.out, "".join(json.dumps({"text": example.text}) + "\n" for example in train))
    print(f"{args.out}: {len(train)} training texts of {args.set}, {sum(len(e.text.split()) for e in train):,} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
