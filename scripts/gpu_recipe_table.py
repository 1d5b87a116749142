"""The table of a GPU recipe check (scripts/gpu_recipe_check.sh): pre-training and BBC fine-tuning.

    python scripts/gpu_recipe_table.py OUT PRETRAIN_WALL_SECONDS

OUT holds `pretrain/` (the run: metrics.jsonl, pretrain_config.json, shards/ and general-shards/
meta.json), `ft-sS/finetune_summary.json` (the best dev accuracy) and `test-sS.json` (what
`bertkit evaluate --data bbc:test` printed) per seed. Prints a markdown table and writes
OUT/gpu_recipe.json with the same numbers.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys

BASELINES = [("TF-IDF + logistic regression, whole articles (DESIGN.md's reference)", 0.973),
             ("TF-IDF + logistic regression, first 100 words, C chosen on dev", 0.953),
             ("MiniLM fine-tuned (pre-trained elsewhere on 1B sentence pairs)", 0.980)]


def read_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def pretraining(run: str, wall_s: float) -> dict:
    """Steps, training seconds, tokens/s, the last held-out scores and the passes over each corpus."""
    rows = [json.loads(line) for line in open(os.path.join(run, "metrics.jsonl"), encoding="utf-8")]
    config = read_json(os.path.join(run, "pretrain_config.json"))
    train = [r for r in rows if r["split"] == "train"]
    final = [r for r in rows if r["split"] == "eval"][-1]
    data, t = config["data"], config["train"]
    steps = train[-1]["step"]
    tokens = steps * t["batch_size"] * t["grad_accum"] * data["max_length"]  # one process
    out = {"wall_s": wall_s, "steps": steps, "max_steps": t["max_steps"], "train_seconds": final["train_seconds"],
           "tokens": tokens, "tokens_per_s": statistics.median(r["tokens_per_s"] for r in train[1:] or train),
           "heldout": {k: final[k] for k in final if k not in ("step", "split", "train_seconds")}}
    shares = {"shards": 1.0 - data["general_fraction"], "general-shards": data["general_fraction"]}
    for name, share in shares.items():
        meta = os.path.join(run, name, "meta.json")
        if share and os.path.isfile(meta):
            corpus_tokens = read_json(meta)["num_tokens"] * (1 - data["eval_fraction"])
            out[f"passes_{name}"] = tokens * share / corpus_tokens
    return out


def finetuning(out_dir: str) -> list[dict]:
    """Per seed: the best dev accuracy and the test accuracy."""
    seeds = []
    for path in sorted(glob.glob(os.path.join(out_dir, "ft-s*", "finetune_summary.json"))):
        seed = int(re.search(r"ft-s(\d+)", path).group(1))
        test_path = os.path.join(out_dir, f"test-s{seed}.json")
        lines = open(test_path, encoding="utf-8").read().strip().splitlines() if os.path.isfile(test_path) else []
        scores = json.loads(lines[-1]) if lines else {}
        tfidf = scores.get("baselines", {}).get("tfidf", {}).get("accuracy")  # C chosen on dev, same split and length
        seeds.append({"seed": seed, "dev": read_json(path)["best_dev"]["accuracy"], "test": scores.get("accuracy"),
                      "tfidf_test": tfidf})
    return seeds


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def mean_sd(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} +- {sd:.3f}"


def main(argv=None) -> dict:
    out_dir, wall = (argv or sys.argv[1:])[:2]
    pre = pretraining(os.path.join(out_dir, "pretrain"), float(wall))
    seeds = finetuning(out_dir)
    h = pre["heldout"]
    passes = ", ".join(f"{k[7:]} {v:.3g}" for k, v in pre.items() if k.startswith("passes_"))
    print(f"| pre-training | wall {pre['wall_s']:.0f} s (data preparation included) | {pre['steps']} of "
          f"{pre['max_steps']} steps in {pre['train_seconds']:.0f} s of training | {pre['tokens_per_s']:,.0f} "
          f"tokens/s | {pre['tokens'] / 1e6:.1f}M tokens; passes: {passes} |")
    print(f"| held-out MLM | loss {h.get('mlm_loss', float('nan')):.2f} | accuracy {h.get('mlm_accuracy', 0):.1%} "
          f"| where replaced {h.get('mlm_replaced_accuracy', 0):.1%} | general loss "
          f"{h.get('general_mlm_loss', float('nan')):.2f} |")
    print("\n| fine-tuned on BBC topics | dev accuracy | test accuracy | TF-IDF, same split (whole texts, C chosen on dev) |"
          "\n|---|---|---|---|")
    for s in seeds:
        print(f"| seed {s['seed']} | {s['dev']:.3f} | {number(s['test'])} | {number(s['tfidf_test'])} |")
    tests = [s["test"] for s in seeds if s["test"] is not None]
    print(f"| mean +- sd | {mean_sd([s['dev'] for s in seeds])} | {mean_sd(tests)} | |")
    for name, score in BASELINES:
        print(f"| {name} | | {score:.3f} | |")
    result = {"pretraining": pre, "finetuning": seeds}
    with open(os.path.join(out_dir, "gpu_recipe.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
