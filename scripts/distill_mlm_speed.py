"""Size and inference speed of a pre-training-distilled MLM student against its teacher.

Both models read the same inputs: the first `--examples` texts of a built-in data set's split,
cut to `--max-length` tokens by the teacher's tokenizer; passes alternate teacher, student,
teacher, ... (`bertkit.recipes.distill.compare_speed`: length-sorted batches, no_grad, one
untimed warm-up each), full MLM logits included. Prints parameters, the median seconds per pass
and the teacher/student ratio (of the medians, and per alternating pair).

    OMP_NUM_THREADS=1 python scripts/distill_mlm_speed.py --teacher runs/tiny-bert/checkpoint-2500 \
        --student runs/distilled/checkpoint-1000 --data bbc:test --repeats 7
"""

from __future__ import annotations

import argparse

from bertkit.models.heads import BertForMaskedLM
from bertkit.recipes.distill import compare_speed, speed_ratios
from bertkit.tasks import DataConfig, load_examples
from bertkit.tasks.sequence import encode_texts
from bertkit.tokenizer import Tokenizer


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", required=True)
    parser.add_argument("--student", required=True)
    parser.add_argument("--data", default="bbc:test", help="built-in classification data NAME:split")
    parser.add_argument("--examples", type=int, default=0, help="first N texts (0 = all)")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    tokenizer = Tokenizer.from_pretrained(args.teacher)
    examples = load_examples("classification", args.data, "test", DataConfig())
    examples = examples[:args.examples] if args.examples else examples
    features = encode_texts(tokenizer, examples, args.max_length, name=args.data)
    models = {name: BertForMaskedLM.from_pretrained(path).eval()
              for name, path in (("teacher", args.teacher), ("student", args.student))}
    for name, model in models.items():
        print(f"{name}: {model.config.num_hidden_layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M "
              f"parameters ({sum(p.numel() for p in getattr(model, model.base_model_prefix).encoder.parameters()) / 1e6:.2f}M in the layers)")
    ratios = speed_ratios(compare_speed(models, features, tokenizer.pad_token_id, args.batch_size, args.repeats))
    median, pair = ratios["median_seconds"], ratios["speedup_per_pair"]
    tokens = sum(len(f["input_ids"]) for f in features)
    print(f"{len(features)} texts, {tokens} tokens, batch {args.batch_size}: teacher {median['teacher']:.3f} s, "
          f"student {median['student']:.3f} s per pass (median of {args.repeats}); speed-up "
          f"{ratios['speedup']:.2f}x (per alternating pair: median {pair['median']:.2f}x, "
          f"range {pair['min']:.2f}-{pair['max']:.2f}x)")


if __name__ == "__main__":
    main()
