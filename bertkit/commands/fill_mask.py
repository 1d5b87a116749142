"""`bertkit fill-mask --model DIR "text with [MASK]" [--top-k 5]`: the model's best fillers."""

from __future__ import annotations

import sys
import warnings

HELP = "print the top-k tokens (with probabilities) a masked-LM model predicts for each [MASK]"


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model directory with an MLM head and a tokenizer")
    parser.add_argument("text", help="text containing the tokenizer's mask token, e.g. [MASK]")
    parser.add_argument("--top-k", type=int, default=5)


def fill_mask(model_dir: str, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each mask token in `text`, the top_k (token, probability) pairs, best first."""
    import torch

    from ..errors import CheckpointError, ConfigError, DataError
    from ..heads import BertForMaskedLM
    from ..tokenizer import Tokenizer

    if top_k < 1:
        raise ConfigError(f"--top-k must be at least 1, got {top_k}")
    tok = Tokenizer.from_pretrained(model_dir)
    with warnings.catch_warnings():  # unused NSP/pooler weights are expected; missing ones checked below
        warnings.simplefilter("ignore")
        model, report = BertForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
    if report.missing_keys:
        raise CheckpointError(f"{model_dir} has no trained MLM head ({report.missing_keys[0]} ...); "
                              "fill-mask needs a masked-LM checkpoint such as one from bertkit pretrain")
    enc = tok(text, truncation=True, max_length=model.config.max_position_embeddings)
    ids = enc["input_ids"]
    positions = (ids[0] == tok.mask_token_id).nonzero().flatten()
    if positions.numel() == 0:
        raise DataError(f"no {tok.mask_token} in the text; put {tok.mask_token} where a word should be predicted")
    with torch.no_grad():
        logits = model(ids, attention_mask=enc["attention_mask"],
                       token_type_ids=enc["token_type_ids"]).logits[0]
    out = []
    for p in positions.tolist():
        probs = logits[p].softmax(-1)
        top = probs.topk(min(top_k, probs.numel()))
        out.append([(tok.convert_ids_to_tokens(int(i)), float(v)) for v, i in zip(top.values, top.indices)])
    return out


def run(args) -> int:
    for n, fillers in enumerate(fill_mask(args.model, args.text, args.top_k), 1):
        print(f"mask {n}:")
        for token, prob in fillers:
            print(f"  {token:<20} {prob:.4f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run this command alone: `python -m bertkit.commands.fill_mask ...`."""
    from ..cli import main as cli_main

    return cli_main(["fill-mask", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
