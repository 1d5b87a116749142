"""The same fine-tune in plain `transformers` + torch, as a reference for `bertkit finetune`.

    python benchmarks/finetune_reference.py --task classification --data bbc --max-length 128 \
        --epochs 3 --lr 5e-5 --batch-size 16 [--max-train N --max-eval N] [--out DIR]

Same data (bertkit's built-in splits and seeded subsets), same recipe: AdamW (betas 0.9/0.999,
eps 1e-6, weight decay 0.01 except biases and LayerNorm), linear warmup over 10% of the steps
then linear decay, gradient clipping at 1.0, batch 16, the model's own pooler/head. Data
order is a seeded shuffle (no length bucketing) and there is no early stopping: the model after
the last epoch is evaluated on the test split. Prints one JSON line with the scores and time.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
import warnings

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("classification", "token-classification"), required=True)
    parser.add_argument("--data", required=True, help="bertkit built-in data name (bbc, wordnet-supersense, ...)")
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--max-train", type=int, default=0)
    parser.add_argument("--max-eval", type=int, default=0, help="subset of the test split (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import transformers

    from bertkit.data.assets import minilm_dir
    from bertkit.tasks import builtin_labels, builtin_splits, subsample
    from bertkit.tasks.sequence import classification_metrics
    from bertkit.tasks.tagging import metrics as tagging_metrics

    transformers.logging.set_verbosity_error()
    warnings.simplefilter("ignore")
    started = time.time()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    model_dir = args.model or minilm_dir()
    splits = builtin_splits(args.data)
    train = subsample(splits["train"], args.max_train, args.seed)
    test = subsample(splits["test"], args.max_eval, 0)  # the subset `bertkit evaluate --limit` takes
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)

    if args.task == "classification":
        labels = builtin_labels(args.data) or sorted({e.label for e in train})
        label2id = {n: i for i, n in enumerate(labels)}
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id)

        def encode(examples, with_labels=True):
            enc = tokenizer([e.text for e in examples], truncation=True, max_length=args.max_length,
                            padding=True, return_tensors="pt")
            if with_labels:
                enc["labels"] = torch.tensor([label2id[e.label] for e in examples])
            return enc
    else:
        labels = builtin_labels(args.data) or sorted({t for e in train for t in e.tags})
        label2id = {n: i for i, n in enumerate(labels)}
        model = transformers.AutoModelForTokenClassification.from_pretrained(
            model_dir, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id)

        def encode(examples, with_labels=True):
            enc = tokenizer([e.tokens for e in examples], is_split_into_words=True, truncation=True,
                            max_length=args.max_length, padding=True, return_tensors="pt")
            rows = []
            for i, e in enumerate(examples):
                previous, row = None, []
                for w in enc.word_ids(i):  # loss on the first sub-word of each word
                    row.append(-100 if w is None or w == previous else label2id[e.tags[w]])
                    previous = w
                rows.append(row)
            enc["labels"] = torch.tensor(rows)
            return enc

    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, eps=1e-6)
    steps_per_epoch = math.ceil(len(train) / args.batch_size)
    total = math.ceil(args.epochs * steps_per_epoch)
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, round(args.warmup_ratio * total), total)
    model.train()
    step, losses = 0, []
    while step < total:
        order = list(range(len(train)))
        random.shuffle(order)
        for start in range(0, len(order), args.batch_size):
            if step >= total:
                break
            batch = encode([train[i] for i in order[start:start + args.batch_size]])
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(float(loss))
            step += 1
    train_time = time.time() - started

    model.eval()
    predictions = []
    with torch.no_grad():
        for start in range(0, len(test), 64):
            chunk = test[start:start + 64]
            enc = encode(chunk)
            enc.pop("labels")  # the model is scored on the decoded labels below
            logits = model(**enc).logits
            if args.task == "classification":
                predictions += [labels[j] for j in logits.argmax(-1).tolist()]
            else:
                pred = logits.argmax(-1)
                for i, e in enumerate(chunk):
                    tags, previous = ["O"] * len(e.tokens), None
                    for t, w in enumerate(enc.word_ids(i)):
                        if w is not None and w != previous:
                            tags[w] = labels[int(pred[i, t])]
                        previous = w
                    predictions.append(tags)
    if args.task == "classification":
        metrics = classification_metrics(test, [(p, None) for p in predictions])
    else:
        metrics = tagging_metrics(test, predictions)
    print(json.dumps({"library": f"transformers {transformers.__version__}", "task": args.task,
                      "data": args.data, "train_examples": len(train), "test_examples": len(test),
                      "steps": step, "first_loss": losses[0], "last_loss": float(np.mean(losses[-10:])),
                      "test": metrics, "train_time_s": round(train_time, 1),
                      "wall_time_s": round(time.time() - started, 1)}))


if __name__ == "__main__":
    main()
