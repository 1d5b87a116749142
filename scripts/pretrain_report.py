"""Markdown table of a pre-training run's held-out evaluations, with its context-free baseline.

    python scripts/pretrain_report.py runs/mini2 [--fill-mask "text with [MASK]" ...]

Reads OUT/metrics.jsonl and OUT/baseline.json (written by `bertkit pretrain`); with
--fill-mask, also prints the top-5 fillers of the newest checkpoint for each text.
"""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--fill-mask", nargs="*", default=[])
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(os.path.join(args.run, "metrics.jsonl"), encoding="utf-8")]
    baseline_path = os.path.join(args.run, "baseline.json")
    baseline = json.load(open(baseline_path, encoding="utf-8")) if os.path.exists(baseline_path) else {}
    train = {r["step"]: r for r in rows if r.get("split") == "train"}
    print("| step | train loss | held-out MLM loss | MLM accuracy | accuracy where replaced |")
    print("|---|---|---|---|---|")
    if baseline:
        print(f"| baseline (no context) | – | {baseline['unigram_loss']:.2f} (unigram) | "
              f"{baseline['most_frequent_token_accuracy']:.1%} ({baseline['most_frequent_token']!r} always) | "
              f"{baseline['most_frequent_token_accuracy']:.1%} |")
    for r in (r for r in rows if r.get("split") == "eval"):
        near = train.get(r["step"], {})
        replaced = r.get("mlm_replaced_accuracy")
        print(f"| {r['step']} | {near.get('loss', float('nan')):.2f} | {r['mlm_loss']:.2f} | "
              f"{r['mlm_accuracy']:.1%} | {'–' if replaced is None else f'{replaced:.1%}'} |")
    if args.fill_mask:
        from bertkit.runtime.run_dir import latest_checkpoint

        from bertkit.commands.cli import main as bertkit

        for text in args.fill_mask:
            bertkit(["fill-mask", "--model", latest_checkpoint(args.run), text, "--top-k", "5"])


if __name__ == "__main__":
    main()
