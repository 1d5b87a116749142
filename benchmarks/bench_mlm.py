"""MLM pre-training step (forward, backward, AdamW): bertkit vs transformers, same run.

Shapes (vocab 30522, seq 128, 15% of positions labelled, no padding: packed pre-training rows):
  mini:  4 layers, hidden 256, 4 heads, intermediate 1024, batch 32  (workload a)
  small: 4 layers, hidden 512, 8 heads, intermediate 2048, batch 16  (workload b)

transformers: `BertForMaskedLM` with attn_implementation="sdpa" (logits over every position, as
it computes them). bertkit: `BertForMaskedLM` (vocabulary projection only at labelled positions).
Both start from the same random init (bertkit loads the transformers state dict) and see the
same batch; dropout is on (train mode) in both.

    python benchmarks/bench_mlm.py --shape mini [--repeats N] [--smoke] [--compile]
"""

from __future__ import annotations

import sys

import harness

import torch
import transformers

import bertkit

SHAPES = {  # layers, hidden, heads, intermediate, batch
    "mini": (4, 256, 4, 1024, 32),
    "small": (4, 512, 8, 2048, 16),
    "smoke": (2, 64, 2, 256, 4),
}
SEQ_LEN, VOCAB, MASK_RATE, MASK_ID = 128, 30522, 0.15, 103


def make_batch(batch: int, seq_len: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, VOCAB, (batch, seq_len), generator=g)
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
    selected = torch.rand(batch, seq_len, generator=g) < MASK_RATE
    selected[:, 0] = selected[:, -1] = False
    labels = torch.full_like(ids, -100)
    labels[selected] = ids[selected]
    inputs = ids.masked_fill(selected, MASK_ID)
    return {"input_ids": inputs, "attention_mask": torch.ones_like(ids), "labels": labels}


def train_step(model, batch):
    optimizer = harness.adamw(model, lr=1e-4)

    def step():
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--shape", choices=["mini", "small"], default="mini")
    args = p.parse_args(argv)
    layers, hidden, heads, inter, batch_size = SHAPES["smoke" if args.smoke else args.shape]
    seq_len = 16 if args.smoke else SEQ_LEN
    fields = dict(vocab_size=VOCAB, num_hidden_layers=layers, hidden_size=hidden,
                  num_attention_heads=heads, intermediate_size=inter)
    batch = make_batch(batch_size, seq_len)
    n_labelled = int((batch["labels"] != -100).sum())
    cfg = bertkit.BertConfig(**fields)
    flops = 3 * (harness.encoder_flops(cfg, [seq_len] * batch_size) + harness.mlm_head_flops(cfg, n_labelled))

    def make_calls(only):
        calls = {}
        torch.manual_seed(0)
        hf = None
        if only in (None, "transformers"):
            hf = transformers.BertForMaskedLM(
                transformers.BertConfig(**fields, attn_implementation="sdpa")).train()
        if only in (None, "bertkit"):
            bk = bertkit.BertForMaskedLM(cfg).train()
            if hf is not None:
                missing, unexpected = bk.load_state_dict(hf.state_dict(), strict=False)
                assert not missing and set(unexpected) <= {"cls.predictions.decoder.weight",
                                                          "cls.predictions.decoder.bias"}, (missing, unexpected)
            if args.compile:
                bk.compile_layers()  # the layers only: the labelled-positions head has dynamic shapes
            calls["bertkit"] = train_step(bk, batch)
        if hf is not None:
            calls["transformers"] = train_step(hf, batch)
        return calls

    name = "mlm_" + ("smoke" if args.smoke else args.shape) + ("_compiled" if args.compile else "")
    return harness.run(args, name, "tokens", batch_size * seq_len, flops, make_calls,
                       notes=f"batch {batch_size} x seq {seq_len}, {n_labelled} labelled positions")


if __name__ == "__main__":
    main(sys.argv[1:])
