"""Fine-tuning step for sequence classification: MiniLM on real BBC articles (workload c).

Both libraries load all-MiniLM-L6-v2 with a new 5-way classifier (bertkit copies the
transformers classifier init, so the weights are identical), and run forward, backward and
AdamW on the same batches: 16 BBC articles per batch, tokenised with truncation at 256 tokens
and padded to the longest in the batch; a few batches cycle so lengths vary. Dropout is on.

    python benchmarks/bench_finetune.py [--repeats N] [--smoke] [--max-length 256]
"""

from __future__ import annotations

import itertools
import sys

import harness

import torch
import transformers

import bertkit
from bertkit.data.assets import minilm_dir

BATCH, N_BATCHES, NUM_LABELS = 16, 4, 5


def train_step(model, batches):
    optimizer = harness.adamw(model, lr=2e-5)
    cycle = itertools.cycle(batches)

    def step():
        loss = model(**next(cycle)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def make_batches(directory: str, batch_size: int, n_batches: int, max_len: int) -> list[dict]:
    texts, labels = harness.bbc_articles(batch_size * n_batches, seed=0)
    tok = transformers.BertTokenizerFast.from_pretrained(directory)
    batches = []
    for i in range(0, len(texts), batch_size):
        enc = tok(texts[i:i + batch_size], padding=True, truncation=True, max_length=max_len,
                  return_tensors="pt")
        batches.append(dict(enc, labels=torch.tensor(labels[i:i + batch_size])))
    return batches


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--max-length", type=int, default=256)
    args = p.parse_args(argv)
    batch_size, n_batches, max_len = (2, 1, 16) if args.smoke else (BATCH, N_BATCHES, args.max_length)
    directory = minilm_dir()
    batches = make_batches(directory, batch_size, n_batches, max_len)
    lengths = [int(n) for b in batches for n in b["attention_mask"].sum(1)]
    padded = sum(b["input_ids"].numel() for b in batches)
    cfg = bertkit.BertConfig.from_pretrained(directory)
    # per step, averaged over the cycled batches; x3 for forward + backward
    flops = 3 * harness.encoder_flops(cfg, lengths) / len(batches)

    def make_calls(only):
        calls = {}
        torch.manual_seed(0)
        hf = None
        if only in (None, "transformers"):
            hf = transformers.BertForSequenceClassification.from_pretrained(
                directory, num_labels=NUM_LABELS, attn_implementation="sdpa").train()
        if only in (None, "bertkit"):
            bk = bertkit.BertForSequenceClassification.from_pretrained(directory, num_labels=NUM_LABELS).train()
            if hf is not None:
                bk.classifier.load_state_dict(hf.classifier.state_dict())
            if args.compile:
                bk.compile_layers()
            calls["bertkit"] = train_step(bk, batches)
        if hf is not None:
            calls["transformers"] = train_step(hf, batches)
        return calls

    name = "finetune" + ("_smoke" if args.smoke else "") + ("_compiled" if args.compile else "")
    return harness.run(args, name, "tokens", sum(lengths) / len(batches), flops, make_calls,
                       notes=f"{len(batches)} batches of {batch_size} BBC articles, truncation at {max_len}: "
                             f"{sum(lengths) / len(batches):.0f} real tokens per step, "
                             f"{100 * (1 - sum(lengths) / padded):.0f}% padding")


if __name__ == "__main__":
    main(sys.argv[1:])
