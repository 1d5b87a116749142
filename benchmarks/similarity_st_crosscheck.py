"""Does fine-tuning on wordnet-gloss-similarity lower MiniLM's dev Spearman in sentence-transformers too?

A cross-check of the `--task similarity` measurement in docs/embedding.md, outside bertkit's
trainer: sentence-transformers' own `CoSENTLoss` (scale 20) over its `SentenceTransformer`, a plain
AdamW loop (weight decay 0.01, linear warmup over 10% of the steps, then linear decay), on the same
seeded subset of the training pairs bertkit's `data.max_train_examples` takes; dev Spearman of the
cosine before training and every `--eval-every` steps (scipy's spearmanr).

    python benchmarks/similarity_st_crosscheck.py --pairs 4000 --lr 2e-5 --batch-size 16 --threads 1
"""

from __future__ import annotations

import argparse
import random
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4000, help="training pairs (a seeded subset, as bertkit's)")
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--eval-every", type=int, default=62)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    from bertkit.data.assets import minilm_dir
    from bertkit.tasks import builtin_splits
    from bertkit.tasks.common import subsample

    warnings.simplefilter("ignore")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    splits = builtin_splits("wordnet-gloss-similarity")
    train, dev = subsample(splits["train"], args.pairs, 0), splits["dev"]
    model = SentenceTransformer(minilm_dir(), device="cpu")

    def dev_spearman() -> float:
        model.eval()
        first = model.encode([e.text for e in dev], normalize_embeddings=True, batch_size=64)
        second = model.encode([e.text_pair for e in dev], normalize_embeddings=True, batch_size=64)
        model.train()
        return float(spearmanr((first * second).sum(1), [e.label for e in dev]).statistic)

    print(f"step 0: dev spearman {dev_spearman():.4f}", flush=True)
    loss_fn = CoSENTLoss(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    order = list(range(len(train)))
    random.Random(0).shuffle(order)
    steps = len(order) // args.batch_size
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: (i + 1) / warmup if i < warmup else max(0.0, (steps - i) / (steps - warmup)))
    model.train()
    for step in range(1, steps + 1):
        batch = [train[i] for i in order[(step - 1) * args.batch_size:step * args.batch_size]]
        features = [model.preprocess([e.text for e in batch]), model.preprocess([e.text_pair for e in batch])]
        loss = loss_fn(features, torch.tensor([e.label for e in batch]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % args.eval_every == 0 or step == steps:
            print(f"step {step}: dev spearman {dev_spearman():.4f}", flush=True)


if __name__ == "__main__":
    main()
