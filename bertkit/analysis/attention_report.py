"""One text through an encoder with output_attentions=True: a printed summary, and the viewer,
heatmaps and per-head statistics as files (what `bertkit attention` runs).

The summary names the heads that attend most to [CLS] / [SEP], the most local heads (smallest
mean distance) and the previous/next-token heads (Clark et al. 2019's categories); with
rollout (Abnar & Zuidema 2020), the input tokens [CLS] at the last layer draws on.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from bertkit.analysis.attention import (attention_rollout, head_statistics, plot_grid, plot_head,
                                        stack_attentions, statistics_records)
from bertkit.analysis.loading import load_encoder, model_name
from bertkit.analysis.viewer import write_attention_html
from bertkit.models.checkpoint import read_config
from bertkit.peft import refuse_adapter_dir
from bertkit.errors import ConfigError
from bertkit.io import atomic_open
from bertkit.tokenizer.display import display_tokens

TOP_HEADS = 3  # heads listed per category in the summary


@dataclass
class TextAttention:
    """One text's attention with the padding cut off."""

    name: str  # the model's short name (model_name)
    attn: np.ndarray  # (layers, heads, n, n)
    tokens: list[str]  # the n tokens
    sentence_b_start: int | None  # index of the pair's first token, if a pair was given
    stats: dict[str, np.ndarray]  # head_statistics: each (layers, heads)
    rollout: np.ndarray | None  # (layers, n, n) if asked for


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


def text_attention(model_dir: str, text: str, pair: str | None = None, *, max_length: int | None = None,
                   head: tuple[int, int] | None = None, rollout: bool = False,
                   device: torch.device | str = "cpu") -> TextAttention:
    """Run the model once on `text` (and `pair`) on `device` and keep the real tokens' attention."""
    refuse_adapter_dir(model_dir, "analyse")
    check_head(read_config(model_dir), head)  # fail fast, before loading weights
    model, tokenizer = load_encoder(model_dir)
    enc = encode(tokenizer, text, pair, model_limit(model, tokenizer, max_length))
    model.to(device)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                    token_type_ids=enc["token_type_ids"].to(device), output_attentions=True)
    attn, n = stack_attentions(tuple(a.float().cpu() for a in out.attentions), 0, enc["attention_mask"])
    tokens = display_tokens(tokenizer, enc["input_ids"][0, :n].tolist())  # 'שלום', not '×©×ľ×ķ×Ŀ'
    sequence_ids = enc.sequence_ids(0)[:n]
    b_start = next((t for t, s in enumerate(sequence_ids) if s == 1), None)
    return TextAttention(model_name(model_dir), attn, tokens, b_start, head_statistics(attn, tokens),
                         attention_rollout(attn) if rollout else None)


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


def describe(result: TextAttention, top: int) -> list[str]:
    """The printed summary: shape and tokens, the top heads per category, the rollout."""
    L, H, n = result.attn.shape[0], result.attn.shape[1], len(result.tokens)
    lines = [f"{result.name}: {L} layers x {H} heads, {n} tokens: {' '.join(result.tokens)}"]
    lines += summary_lines(result.stats, min(top, L * H))
    lines.append(f"(uniform attention over {n} tokens has entropy log {n} = {np.log(n):.2f} nats)")
    if result.rollout is not None:
        last = result.rollout[-1, 0]
        order = np.argsort(-last, kind="stable")[:5]
        lines.append("rollout: [CLS] at the last layer draws on " +
                     ", ".join(f"{result.tokens[j]}@{j} ({last[j]:.2f})" for j in order))
    return lines


def write_statistics(stats: dict[str, np.ndarray], path: str) -> None:
    """One JSON line per (layer, head); a 1-token input has no previous/next token: null, not NaN."""
    with atomic_open(path, "w", encoding="utf-8") as f:
        for record in statistics_records(stats):
            clean = {k: None if isinstance(v, float) and v != v else v for k, v in record.items()}
            f.write(json.dumps(clean, allow_nan=False, ensure_ascii=False) + "\n")


def write_files(result: TextAttention, title: str, *, html: str | None = None, png: str | None = None,
                head: tuple[int, int] | None = None, stats: str | None = None,
                log: Callable[[str], None] = print) -> None:
    """The viewer (html), heatmaps (png: the grid, or one head; plus the rollout) and statistics."""
    attn, tokens, L = result.attn, result.tokens, result.attn.shape[0]
    if html:
        write_attention_html(attn, tokens, html, title=title[:200], sentence_b_start=result.sentence_b_start)
        log(f"wrote {html} (viewer, {os.path.getsize(html) / 1e3:.0f} kB)")
    if png:
        if head is not None:
            plot_head(attn, tokens, head[0], head[1], png)
        else:
            plot_grid(attn, tokens, png)
        log(f"wrote {png}")
        if result.rollout is not None:
            root, ext = os.path.splitext(png)
            path = f"{root}-rollout{ext or '.png'}"
            plot_head(result.rollout[:, None], tokens, L - 1, 0, path,
                      title=f"attention rollout after layer {L - 1} (all heads, with residual)")
            log(f"wrote {path}")
    if stats:
        write_statistics(result.stats, stats)
        log(f"wrote {stats} ({L * attn.shape[1]} heads)")


def attention_report(model_dir: str, text: str, pair: str | None = None, *, max_length: int | None = None,
                     top: int = TOP_HEADS, head: tuple[int, int] | None = None, rollout: bool = False,
                     html: str | None = None, png: str | None = None, stats: str | None = None,
                     log: Callable[[str], None] = print, device: torch.device | str = "cpu") -> TextAttention:
    """Analyse one text: log the summary, write the files asked for, return the attention."""
    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}")
    if png is not None and not png.lower().endswith(".png"):  # the heatmaps are PNG bytes, whatever the name
        raise ConfigError(f"--png {png}: the heatmaps are written as PNG; give a file name ending in .png")
    result = text_attention(model_dir, text, pair, max_length=max_length, head=head, rollout=rollout, device=device)
    for line in describe(result, top):
        log(line)
    title = f"{result.name}: {text}" + (f" / {pair}" if pair else "")
    write_files(result, title, html=html, png=png, head=head, stats=stats, log=log)
    return result
