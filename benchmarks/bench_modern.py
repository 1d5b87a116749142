"""The modern encoder (bertkit/modern): its speed against bertkit's BERT and transformers' ModernBert.

Workloads (each a pair of zero-argument calls timed alternately, harness.alternate):

  mlm       MLM training step (forward, backward, fused AdamW) at the mini shape: 4 layers,
            hidden 256, 4 heads, vocab 30522, batch 32 x 128, 15% labelled, no padding (packed
            pre-training rows). bertkit's ModernBertForMaskedLM (intermediate 384, GeGLU: the
            preset) against bertkit's BertForMaskedLM (intermediate 1024, absolute positions),
            both without dropout as the pre-training recipes run them, both with the vocabulary
            projection at the labelled positions only. `--intermediate 683` gives the GeGLU the
            BERT feed-forward's parameter count (3 x 256 x 683 ~ 2 x 256 x 1024).
  encode    forward of ModernBertModel on varied-length batches: 512 BBC paragraphs tokenized
            with MiniLM's WordPiece (truncated at 128), batches of 32 in the given order, each
            padded to its longest row. bertkit (unpadded) against transformers' ModernBertModel
            with attn_implementation="sdpa" (on CPU it runs the padded batch with a 4-D mask;
            its unpadding exists only with flash-attention-2) on the same weights.
  finetune  the same batches, ModernBertForSequenceClassification training step (5 labels,
            forward, backward, fused AdamW), bertkit against transformers, same weights.
  unpad     the encode workload, bertkit unpadded against bertkit padded (the lever alone).

Outputs of bertkit and transformers are checked equal (1e-4 at real tokens) before timing.
Ratio of a repeat = time(second) / time(first): > 1 means the first (bertkit's modern encoder)
is faster.

    python benchmarks/bench_modern.py --workload mlm|encode|finetune|unpad [--threads 1] [--repeats 7]
"""

from __future__ import annotations

import statistics
import sys
import tempfile

import harness
from bench_mlm import make_batch, train_step  # bench_mlm.py's workload (a): its batch and optimizer step

import torch
import transformers

import bertkit
from bertkit.data.assets import minilm_dir
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification, ModernBertModel

LAYERS, HIDDEN, HEADS, VOCAB, SEQ_LEN, BATCH = 4, 256, 4, 30522, 128, 32
SMOKE = dict(layers=2, hidden=64, heads=2, batch=4, seq_len=32, texts=8)


def modern_config(args, **overrides) -> ModernBertConfig:
    return ModernBertConfig.preset("mini", num_hidden_layers=args.layers, hidden_size=args.hidden,
                                   num_attention_heads=args.heads, vocab_size=VOCAB,
                                   intermediate_size=args.intermediate or args.hidden * 3 // 2, **overrides)


def mlm_calls(args):
    """Modern MLM step vs BERT MLM step (bertkit both), same batch."""
    batch = make_batch(args.batch, args.seq_len)
    torch.manual_seed(0)
    modern = ModernBertForMaskedLM(modern_config(args)).train()
    bert = bertkit.BertForMaskedLM(bertkit.BertConfig(
        vocab_size=VOCAB, num_hidden_layers=args.layers, hidden_size=args.hidden, num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).train()
    notes = (f"batch {args.batch} x {args.seq_len}, modern {modern.num_parameters():,} params "
             f"(intermediate {modern.config.intermediate_size}), BERT {bert.num_parameters():,}")
    return {"modern": train_step(modern, batch), "bert": train_step(bert, batch)}, \
        args.batch * args.seq_len, notes


def varied_batches(args):
    """Batches of real BBC paragraph lengths (MiniLM WordPiece ids), each padded to its longest."""
    tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir())
    texts = harness.bbc_paragraphs(args.texts, seed=0)
    batches = []
    for i in range(0, len(texts), args.batch):
        enc = tok(texts[i:i + args.batch], padding=True, truncation=True, max_length=args.seq_len,
                  return_tensors="pt", return_token_type_ids=False)
        batches.append(dict(enc))
    return batches


def same_weights(ours, theirs_cls, config, **hf_kwargs):
    """The transformers model with bertkit's weights (saved and loaded through config.json)."""
    with tempfile.TemporaryDirectory() as d:
        ours.save_pretrained(d)
        return theirs_cls.from_pretrained(d, attn_implementation="sdpa", **hf_kwargs)


def check_equal(ours, theirs, batches):
    with torch.no_grad():
        for b in batches[:2]:
            real = b["attention_mask"].bool()
            a, t = ours(**b), theirs(**b)
            a = a.last_hidden_state[real] if hasattr(a, "last_hidden_state") else a.logits
            t = t.last_hidden_state[real] if hasattr(t, "last_hidden_state") else t.logits
            assert (a - t).abs().max() < 1e-4, (a - t).abs().max()


def encode_calls(args):
    batches = varied_batches(args)
    torch.manual_seed(0)
    ours = ModernBertModel(modern_config(args)).eval()
    theirs = same_weights(ours, transformers.ModernBertModel, ours.config).eval()
    check_equal(ours, theirs, batches)

    def run(model):
        def call():
            with torch.inference_mode():
                for b in batches:
                    model(**b)
        return call

    return {"bertkit": run(ours), "transformers": run(theirs)}, *padding_notes(batches)


def padding_notes(batches) -> tuple[int, str]:
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    slots = sum(b["attention_mask"].numel() for b in batches)
    return real, f"{len(batches)} batches, {real} real tokens, {100 * (1 - real / slots):.0f}% padding"


def unpad_calls(args):
    batches = varied_batches(args)
    torch.manual_seed(0)
    model = ModernBertModel(modern_config(args)).eval()

    def run(unpad):
        def call():
            ModernBertModel.unpad = unpad
            try:
                with torch.inference_mode():
                    for b in batches:
                        model(**b)
            finally:
                ModernBertModel.unpad = True
        return call

    return {"unpadded": run(True), "padded": run(False)}, *padding_notes(batches)


def finetune_calls(args):
    batches = varied_batches(args)
    g = torch.Generator().manual_seed(0)
    for b in batches:
        b["labels"] = torch.randint(0, 5, (b["input_ids"].shape[0],), generator=g)
    torch.manual_seed(0)
    ours = ModernBertForSequenceClassification(modern_config(args, num_labels=5)).train()
    theirs = same_weights(ours, transformers.ModernBertForSequenceClassification, ours.config).train()
    check_equal(ours.eval(), theirs.eval(), batches)
    ours.train(), theirs.train()

    def run(model):
        optimizer = harness.adamw(model, lr=2e-5)

        def call():
            for b in batches:
                model(**b).loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        return call

    return {"bertkit": run(ours), "transformers": run(theirs)}, *padding_notes(batches)


WORKLOADS = {"mlm": mlm_calls, "encode": encode_calls, "finetune": finetune_calls, "unpad": unpad_calls}


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="mlm")
    p.add_argument("--intermediate", type=int, default=0, help="GeGLU width (default 1.5 x hidden)")
    p.add_argument("--texts", type=int, default=512, help="BBC paragraphs for encode/finetune")
    args = p.parse_args(argv)
    args.layers, args.hidden, args.heads, args.batch, args.seq_len = LAYERS, HIDDEN, HEADS, BATCH, SEQ_LEN
    if args.smoke:
        for k, v in SMOKE.items():
            setattr(args, k, v)
        args.repeats, args.warmup = 1, 0
    harness.setup_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    calls, work, notes = WORKLOADS[args.workload](args)
    times = harness.alternate(calls, args.repeats, args.warmup, args.steps)
    first, second = list(calls)
    ratios = harness.speedups(times, second, first)
    name = f"modern_{args.workload}" + (f"[{args.label}]" if args.label else "")
    summary = {
        "name": name, "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios), "repeats": len(ratios), "threads": args.threads,
        f"tokens_per_s_{first}": work / statistics.median(times[first]),
        f"tokens_per_s_{second}": work / statistics.median(times[second]),
        "notes": notes, "command": " ".join(["python", *sys.argv]),
    }
    print(f"RATIO {name}: {first} / {second} = {summary['ratio_median']:.2f}x "
          f"(min {summary['ratio_min']:.2f}, max {summary['ratio_max']:.2f}, {len(ratios)} repeats, "
          f"{args.threads} threads)")
    print(f"  tokens/s: {first} {summary[f'tokens_per_s_{first}']:,.0f}, "
          f"{second} {summary[f'tokens_per_s_{second}']:,.0f}  | notes: {notes}")
    if not args.smoke:
        harness.write_result(f"modern_{args.workload}", args.label, summary)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
