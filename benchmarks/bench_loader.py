"""The pre-training data loader alone, in tokens per second: shards -> packing -> masking -> device.

The GPU recipe (configs/pretrain-gpu-10min.toml) must be fed faster than the GPU trains. This
times the recipe's own data path, with no model, in three stages:

1. prepare: the corpus tokenized into memory-mapped shards (`shard_documents`; once per run);
2. pack: the training documents packed into full rows (`PackedBuilder`, data.builder = "packed";
   once per run, in memory);
3. load: the steady state the trainer sees every step, batches drawn from `LengthBucketedBatches`
   and masked by `MLMCollator` (30% token masking: data.masking, data.mlm_probability), then, when
   CUDA is present, copied to the GPU from pinned memory with non-blocking copies (the copy of
   batch i overlaps the collation of batch i+1; one synchronisation at the end).

The line to compare with a training run's tokens/s is ``LOADER load``: tokens (padding included:
what the GPU computes on) per second of the steady state. On the shared 2-core CPU machine the
numbers are a lower bound (other jobs run beside it).

    python benchmarks/bench_loader.py [--corpus bbc:train+gcide] [--max-length 512] [--batch-size 64]
                                      [--batches 200] [--device auto] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bertkit.data.assets import minilm_dir  # noqa: E402
from bertkit.data.collate import MLMCollator  # noqa: E402
from bertkit.data.documents import CorpusDocuments, shard_documents, split_documents  # noqa: E402
from bertkit.data.examples import SpecialTokens  # noqa: E402
from bertkit.data.packing import PackedBuilder, packing_efficiency  # noqa: E402
from bertkit.tokenizer import Tokenizer  # noqa: E402
from bertkit.train.batching import LengthBucketedBatches  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default="bbc:train+gcide", help="a corpus as data.corpus takes it")
    p.add_argument("--max-documents", type=int, default=0, help="the first N documents (0 = all)")
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=200, help="batches timed in the steady state")
    p.add_argument("--mlm-probability", type=float, default=0.3)
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the collator's masking)")
    p.add_argument("--tokenizer", default="",
                   help="a tokenizer or run directory (default MiniLM's vocabulary; the GPU machine, which lacks "
                        "that package, passes the recipe run's own)")
    p.add_argument("--json", default="", help="also write the result here")
    p.add_argument("--tiny", action="store_true", help="200 BBC articles, 128 tokens, 20 batches: a smoke run")
    args = p.parse_args(argv)
    if args.tiny:
        args.corpus, args.max_documents, args.max_length, args.batch_size, args.batches = "bbc:train", 200, 128, 16, 20
    return args


def prepare(args, tokenizer, directory: str):
    """Stage 1: the corpus in shards; (documents, seconds, tokens)."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one Latin-1 BBC file
        docs = shard_documents(CorpusDocuments(args.corpus, max_documents=args.max_documents, keep=False), tokenizer,
                               directory)
    return docs, time.perf_counter() - start, docs.num_tokens


def pack(args, tokenizer, docs):
    """Stage 2: the training documents (95%, the recipe's split) packed into rows."""
    train_docs, _ = split_documents(len(docs), 0.05, seed=0)
    start = time.perf_counter()
    examples = PackedBuilder(args.max_length, SpecialTokens.from_tokenizer(tokenizer)).build(docs, train_docs)
    return examples, time.perf_counter() - start


def load(args, tokenizer, examples, device: torch.device):
    """Stage 3: (tokens in the timed batches, seconds): collate + mask (+ pinned non-blocking copies)."""
    collator = MLMCollator(tokenizer, mlm_probability=args.mlm_probability, seed=0)
    batches = LengthBucketedBatches(examples, args.batch_size, collator, seed=0)
    cuda = device.type == "cuda"
    tokens, done, it = 0, 0, None
    start = None
    while done < args.batches + 2:
        if it is None:
            it = iter(batches)
        batch = next(it, None)
        if batch is None:  # an epoch ends: the next one (a new shuffle)
            batches.set_epoch(batches.epoch + 1)
            it = None
            continue
        if cuda:  # page-locked host memory is what lets the copy run beside the next collation
            batch = {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
        done += 1
        if done == 2:  # two untimed batches: first-call costs
            start = time.perf_counter()
        elif done > 2:
            tokens += batch["input_ids"].numel()
    if cuda:
        torch.cuda.synchronize(device)
    return tokens, time.perf_counter() - start


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    tokenizer = Tokenizer.from_pretrained(args.tokenizer or minilm_dir())
    with tempfile.TemporaryDirectory() as tmp:
        docs, prep_s, n_tokens = prepare(args, tokenizer, os.path.join(tmp, "shards"))
        examples, pack_s = pack(args, tokenizer, docs)
        efficiency = packing_efficiency(examples, args.max_length)
        tokens, load_s = load(args, tokenizer, examples, device)
    packed_tokens = sum(len(ex["input_ids"]) for ex in examples)
    result = {"corpus": args.corpus, "documents": len(docs), "corpus_tokens": int(n_tokens),
              "rows": len(examples), "packing_efficiency": efficiency, "device": str(device),
              "prepare_tokens_per_s": n_tokens / prep_s, "pack_tokens_per_s": packed_tokens / pack_s,
              "load_tokens_per_s": tokens / load_s, "max_length": args.max_length, "batch_size": args.batch_size}
    print(f"corpus {args.corpus}: {len(docs)} documents, {n_tokens} tokens -> {len(examples)} rows of "
          f"{args.max_length}, packing efficiency {efficiency:.2%}")
    print(f"LOADER prepare (tokenize into shards, once): {result['prepare_tokens_per_s']:,.0f} tokens/s ({prep_s:.1f} s)")
    print(f"LOADER pack (best-fit rows, once): {result['pack_tokens_per_s']:,.0f} tokens/s ({pack_s:.1f} s)")
    print(f"LOADER load (collate + mask {args.mlm_probability:.0%}"
          f"{' + pinned non-blocking copy to ' + str(device) if device.type == 'cuda' else ''}, every step): "
          f"{result['load_tokens_per_s']:,.0f} tokens/s (batch {args.batch_size} x {args.max_length}, "
          f"{args.batches} batches, {torch.get_num_threads()} torch thread(s))")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
