"""Held-out MLM scores of a pre-training checkpoint at other masking rates than its run's own.

    python scripts/pretrain_heldout.py runs/mini [--checkpoint runs/mini/checkpoint-9400] [--rates 0.15 0.3 0.4]

A run is scored on its held-out documents masked at its own training rate, so runs trained at
different rates are scored on different tasks (40% masking hides more context than 30%). This
rebuilds the run's held-out batches (its pretrain_config.json, tokenizer and shards in RUN) at
each rate, with the run's fixed evaluation seed, and scores the checkpoint (the newest by
default) on BBC and, when the run mixed one in, on the general corpus: loss, accuracy, and
accuracy where the input was replaced ([MASK] or a random token).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import torch

from bertkit.models.checkpoint import family_class
from bertkit.models.heads import BertForMaskedLM
from bertkit.data.documents import CorpusDocuments
from bertkit.recipes.pretrain import build_data, evaluation, parse_config, tokenizer_and_config
from bertkit.runtime.process_group import init_distributed
from bertkit.runtime.run_dir import latest_checkpoint

KEYS = ("mlm_loss", "mlm_accuracy", "mlm_replaced_accuracy")


def scores(run: str, cfg, tokenizer, ctx, model, rate: float) -> dict:
    """`model` on the run's held-out batches (config `cfg`) rebuilt at masking `rate`."""
    cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, mlm_probability=rate))
    corpus = CorpusDocuments(cfg.data.corpus, cfg.data.mode, cfg.data.max_documents)  # not read: the run's shards
    data = build_data(cfg.data, cfg.train, cfg.objective, tokenizer, corpus, run, ctx)
    with torch.no_grad():
        metrics = evaluation(cfg.objective, data, cfg.train.seed)(model)
    return {k: v for k, v in metrics.items() if k.removeprefix("general_") in KEYS}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a `bertkit pretrain` output directory")
    p.add_argument("--checkpoint", help="default: the run's newest checkpoint")
    p.add_argument("--rates", type=float, nargs="+", default=[0.15, 0.3, 0.4])
    args = p.parse_args(argv)
    checkpoint = args.checkpoint or latest_checkpoint(args.run)
    print(f"{checkpoint}\n| masking rate | BBC loss | accuracy | where replaced | general loss / accuracy / where replaced |")
    print("|---|---|---|---|---|")
    model = family_class(BertForMaskedLM, checkpoint).from_pretrained(checkpoint).eval()
    with open(os.path.join(args.run, "pretrain_config.json"), encoding="utf-8") as f:
        cfg = parse_config(json.load(f))
    ctx = init_distributed("cpu")
    corpus = CorpusDocuments(cfg.data.corpus, cfg.data.mode, cfg.data.max_documents)
    tokenizer, _ = tokenizer_and_config(cfg, corpus, args.run, ctx)  # the run's own: it exists, nothing is trained
    for rate in args.rates:
        m = scores(args.run, cfg, tokenizer, ctx, model, rate)
        general = (f"{m['general_mlm_loss']:.2f} / {m['general_mlm_accuracy']:.1%} / "
                   f"{m['general_mlm_replaced_accuracy']:.1%}" if "general_mlm_loss" in m else "")
        print(f"| {rate:.0%} | {m['mlm_loss']:.2f} | {m['mlm_accuracy']:.1%} | {m['mlm_replaced_accuracy']:.1%} | "
              f"{general} |", flush=True)


if __name__ == "__main__":
    main()
