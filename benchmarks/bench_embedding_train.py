"""Embedding fine-tuning step: MiniLM with in-batch negatives on real pairs, bertkit against
sentence-transformers.

Both start from all-MiniLM-L6-v2 (mean pooling, normalisation) and run forward, backward and
AdamW on the same batches of (text, positive) pairs: bertkit's `SentenceEmbeddingModel` on the
(B, 2, T) batches `finetune --task embedding` trains on, sentence-transformers'
`MultipleNegativesRankingLoss` over its `SentenceTransformer` on the features its `preprocess`
gives (what its trainer runs per step, without the trainer's bookkeeping). Dropout is on in both.
The two losses are checked equal (dropout off) before timing.

Pairs: `wordnet-usage-definitions` (a sentence -> its definition, short texts) or `bbc-headlines`
(a title -> its article, cut at 128 tokens), a few batches of 32 cycled.

    python benchmarks/bench_embedding_train.py [--pairs wordnet-usage-definitions|bbc-headlines] [--repeats N] [--smoke]
"""

from __future__ import annotations

import itertools
import statistics
import sys
import warnings

import harness

import torch

from bertkit.data.assets import minilm_dir
from bertkit.models.sentence_embedding import SentenceEmbeddingModel
from bertkit.tasks import Collator, DataConfig, builtin_splits, get_task
from bertkit.tokenizer import Tokenizer

BATCH, N_BATCHES, MAX_LEN = 32, 4, 128


def bertkit_step(directory: str, pairs: list, batch_size: int):
    tokenizer = Tokenizer.from_pretrained(directory)
    features = get_task("embedding").encode(tokenizer, pairs, DataConfig(max_length=MAX_LEN), None, True, "pairs")
    collate = Collator(tokenizer.pad_token_id)
    batches = [collate(features[i:i + batch_size]) for i in range(0, len(features), batch_size)]
    model = SentenceEmbeddingModel.from_pretrained(directory).train()
    return model, batches, lambda batch: model(**batch).loss


def sentence_transformers_step(directory: str, pairs: list, batch_size: int):
    from sentence_transformers import SentenceTransformer  # test-only reference
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SentenceTransformer(directory, device="cpu")
    model.max_seq_length = MAX_LEN
    model.train()
    loss = MultipleNegativesRankingLoss(model)
    batches = []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i:i + batch_size]
        batches.append([model.preprocess([p.text for p in chunk]), model.preprocess([p.positive for p in chunk])])
    return model, batches, lambda batch: loss(batch, None)


def training(model, batches, loss_of):
    optimizer = harness.adamw(model, lr=2e-5)
    cycle = itertools.cycle(batches)

    def step():
        loss = loss_of(next(cycle))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def check_equal_losses(built: dict) -> float:
    """The first batch's loss in both, dropout off: the same model, the same loss."""
    losses = {}
    for name, (model, batches, loss_of) in built.items():
        model.eval()
        with torch.no_grad():
            losses[name] = float(loss_of(batches[0]))
        model.train()
    gap = abs(losses["bertkit"] - losses["sentence-transformers"])
    assert gap < 1e-4 * max(1.0, losses["bertkit"]), f"losses differ: {losses}"
    return gap


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--pairs", default="wordnet-usage-definitions", choices=["wordnet-usage-definitions",
                                                                            "bbc-headlines"])
    args = p.parse_args(argv)
    harness.setup_threads(args.threads)
    batch_size, n_batches = (4, 1) if args.smoke else (BATCH, N_BATCHES)
    pairs = builtin_splits(args.pairs)["train"][:batch_size * n_batches]
    directory = minilm_dir()
    built = {"bertkit": bertkit_step(directory, pairs, batch_size),
             "sentence-transformers": sentence_transformers_step(directory, pairs, batch_size)}
    gap = check_equal_losses(built)
    calls = {name: training(*parts) for name, parts in built.items()}
    times = harness.alternate(calls, 1 if args.smoke else args.repeats, 0 if args.smoke else args.warmup, args.steps)
    ratios = harness.speedups(times, "sentence-transformers", "bertkit")
    tokens = sum(int(b["attention_mask"].sum()) for b in built["bertkit"][1]) / n_batches
    print(f"embedding training step, {args.pairs}, batches of {batch_size} pairs (~{tokens:.0f} real tokens), "
          f"{args.threads} thread(s); equal losses (|difference| {gap:.1e})")
    for name, seconds in times.items():
        print(f"  {name}: {1000 * statistics.median(seconds):.0f} ms per step (median)")
    print(f"  bertkit / sentence-transformers speed: {harness.ratio_text(ratios)}")
    print(f"  command: python benchmarks/bench_embedding_train.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    return ratios


if __name__ == "__main__":
    main(sys.argv[1:])
