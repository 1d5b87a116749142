"""Choosing which tokens to mask for masked language modelling, and what to put there.

All functions work on a padded batch: ``input_ids`` (B, L) int64 and ``candidates`` (B, L)
bool, true on real, non-special tokens (the only positions that may ever be masked). Every
random draw comes from the ``torch.Generator`` passed in, so a caller that owns the generator
can save and restore it and reproduce the masks exactly.

Budget. A sequence with ``n`` candidate tokens gets ``k = floor(rate * n + U)``, U ~ U[0, 1)
(stochastic rounding: E[k] = rate * n exactly, also for short sequences, where plain
rounding would mask 1 of 5 tokens = 20% for rate 0.15).

Strategies (which positions):
* ``token_mask``       exactly ``k`` candidates, uniformly without replacement (BERT).
* ``whole_word_mask``  random words until their tokens reach ``k``; a word is never split.
* ``span_mask``        SpanBERT: spans of whole words with length ~ Geometric(p) clipped at
                       ``max_span`` words, at random start words, until ``k`` tokens.
* ``keyword_mask``     words listed as keywords are masked with probability ``q`` each; the
                       rest of the budget (``k`` minus those tokens, if positive) is filled by
                       ``token_mask`` over the other candidates.
Words come from the vocabulary: a token continues the previous word when it is a WordPiece
``##`` piece, or a byte-level BPE piece without the leading-space marker ``Ġ``; the first
token after a special token (or the sequence start) always starts a word.

Replacement (``apply_replacement``): each chosen position (or each span, for span masking)
becomes ``[MASK]`` with probability ``mask_replace_prob`` (0.8), a token drawn uniformly from
the non-special vocabulary with probability ``random_replace_prob`` (0.1), and stays
unchanged otherwise. Labels are the original id at chosen positions and -100 elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import torch

from bertkit.errors import ConfigError

IGNORE_INDEX = -100  # the label that carries no loss: torch's cross-entropy skips it by default

__all__ = [
    "VocabInfo", "continuation_table", "lookup", "masking_budget", "word_ids", "token_mask",
    "whole_word_mask", "span_mask", "keyword_mask", "apply_replacement", "IGNORE_INDEX",
]


def continuation_table(tokens_by_id: list[str | None], kind: str, special_ids: Iterable[int]) -> np.ndarray:
    """Boolean array: ``table[id]`` is true when token ``id`` continues the previous word."""
    special = set(special_ids)
    table = np.zeros(len(tokens_by_id), dtype=bool)
    for i, tok in enumerate(tokens_by_id):
        if tok is None or i in special:
            continue
        table[i] = tok.startswith("##") if kind == "wordpiece" else not tok.startswith("\u0120")
    return table


@dataclass
class VocabInfo:
    """What masking needs to know about a vocabulary (built once, from a tokenizer)."""

    vocab_size: int
    pad_id: int
    mask_id: int
    special_ids: tuple[int, ...]
    is_continuation: np.ndarray  # bool [vocab_size]
    kind: str = "wordpiece"
    is_special: torch.Tensor = field(init=False, repr=False)
    continues: torch.Tensor = field(init=False, repr=False)
    replacement_ids: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self):
        if self.mask_id is None:
            raise ConfigError("the tokenizer has no mask token; masked language modelling needs one")
        self.is_special = torch.zeros(self.vocab_size, dtype=torch.bool)
        self.is_special[list(self.special_ids)] = True
        self.continues = torch.from_numpy(np.asarray(self.is_continuation, dtype=bool))
        # Random replacements are drawn from here: every id that is not a special token.
        self.replacement_ids = torch.nonzero(~self.is_special).flatten()

    @classmethod
    def from_tokenizer(cls, tok) -> "VocabInfo":
        vocab = tok.get_vocab()
        size = max(int(tok.vocab_size), max(vocab.values()) + 1)
        by_id: list[str | None] = [None] * size
        for token, i in vocab.items():
            by_id[i] = token
        specials = tuple(int(i) for i in tok.all_special_ids)
        return cls(size, int(tok.pad_token_id), tok.mask_token_id, specials,
                   continuation_table(by_id, tok.kind, specials), tok.kind)


def lookup(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``table[ids]`` through numpy: torch's multi-threaded gather was measured 28 ms for a
    32x128 batch on a busy 2-core machine (thread hand-off), numpy 0.01 ms."""
    return torch.from_numpy(table.numpy()[ids.numpy()])


def masking_budget(candidates: torch.Tensor, rate: float, generator: torch.Generator) -> torch.Tensor:
    """Tokens to mask per row: floor(rate * n + U), an unbiased rounding of rate * n."""
    n = candidates.sum(1).to(torch.float64)
    u = torch.rand(n.shape, generator=generator, dtype=torch.float64)
    return torch.floor(n * rate + u).long().clamp(max=candidates.sum(1))


def token_mask(candidates: torch.Tensor, k: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Exactly ``k[b]`` candidate positions per row, uniformly without replacement.

    Every candidate gets a U[0,1) score, non-candidates 2 (last); a position is chosen when
    its rank in its row is below k.
    """
    scores = torch.rand(candidates.shape, generator=generator)
    scores.masked_fill_(~candidates, 2.0)
    # rank(p) < k  <=>  p is among the k lowest scores of its row: a partial sort (topk) of the
    # max(k) lowest and a scatter. Ranking every position (two full argsorts) was measured 12x
    # slower on a 64 x 512 batch, most of the time of masking it.
    most = int(k.max()) if k.numel() else 0
    if most == 0:
        return torch.zeros_like(candidates)
    lowest = scores.topk(most, dim=1, largest=False, sorted=True).indices
    first_k = torch.arange(most) < k[:, None]
    return torch.zeros_like(candidates).scatter_(1, lowest, first_k) & candidates


def word_ids(input_ids: torch.Tensor, candidates: torch.Tensor, vocab: VocabInfo) -> torch.Tensor:
    """Index of the word each candidate token belongs to (0, 1, ... per row); -1 elsewhere.

    A candidate starts a word unless it is a continuation piece whose previous position is
    also a candidate (after a special token or at the start, a piece starts a word).
    """
    prev = torch.zeros_like(candidates)
    prev[:, 1:] = candidates[:, :-1]
    starts = candidates & (~lookup(vocab.continues, input_ids) | ~prev)
    ids = starts.long().cumsum(1) - 1
    return ids.masked_fill(~candidates, -1)


def _word_lengths(wid: torch.Tensor) -> torch.Tensor:
    """(B, L+1) token count of each word; column L collects the non-candidates."""
    B, L = wid.shape
    slot = wid.masked_fill(wid < 0, L)
    return torch.zeros(B, L + 1, dtype=torch.long).scatter_add_(1, slot, torch.ones_like(slot))


def whole_word_mask(candidates: torch.Tensor, wid: torch.Tensor, k: torch.Tensor,
                    generator: torch.Generator) -> torch.Tensor:
    """Whole words in random order until their tokens reach the budget ``k``.

    Words are sorted by a random score; those whose running token total stays within k are
    taken, and the first word that would pass k is taken with probability
    (k - total_before) / word_length, so the expected number of masked tokens is k while no
    word is ever split. Fully vectorised over the batch.
    """
    B, L = wid.shape
    lengths = _word_lengths(wid)[:, :L]
    exists = lengths > 0
    order = torch.rand(B, L, generator=generator).masked_fill_(~exists, 2.0).argsort(dim=1)
    len_sorted = lengths.gather(1, order)
    total = len_sorted.cumsum(1)
    before = total - len_sorted
    room = (k[:, None] - before).clamp(min=0)
    u = torch.rand(B, L, generator=generator)
    take = (len_sorted > 0) & ((total <= k[:, None]) | (u * len_sorted < room))
    chosen = torch.zeros(B, L + 1, dtype=torch.bool)
    chosen[:, :L].scatter_(1, order, take)
    return chosen.gather(1, wid.masked_fill(wid < 0, L)) & candidates


def span_mask(candidates: torch.Tensor, wid: torch.Tensor, k: torch.Tensor, generator: torch.Generator,
              max_span: int = 10, p: float = 0.2, max_tries: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """SpanBERT span masking; returns (mask, span id per token or -1).

    Repeatedly: length l ~ Geometric(p) on {1, 2, ...} (P(l) = (1-p)^(l-1) p, sampled as
    1 + floor(log(1-U) / log(1-p))), clipped at ``max_span`` words; a start word uniformly;
    the span covers words [start, start + l). Spans overlapping an earlier span are redrawn.
    A span that would pass the budget keeps only the words that fit; if not even its first
    word fits, that word is taken with probability (room / its length) and masking stops.
    """
    B, L = wid.shape
    if not 0 < p <= 1:
        raise ConfigError(f"span_p must be in (0, 1], got {p}")
    lengths_all = _word_lengths(wid)[:, :L].numpy()
    tries = max_tries + 4 * int(k.max().item() if B else 0)
    draws = torch.rand(B, tries, 3, generator=generator, dtype=torch.float64).numpy()
    if p < 1:
        span_len = 1 + np.floor(np.log1p(-draws[..., 0]) / math.log1p(-p)).astype(np.int64)
    else:
        span_len = np.ones(draws.shape[:2], np.int64)
    span_len = np.minimum(span_len, max_span)
    word_span = np.full((B, L + 1), -1, dtype=np.int64)
    for b in range(B):
        lengths = lengths_all[b]
        n_words = int((lengths > 0).sum())
        budget, covered, n_spans = int(k[b]), 0, 0
        for t in range(tries):
            if covered >= budget or n_words == 0:
                break
            start = int(draws[b, t, 1] * n_words)
            end = min(start + int(span_len[b, t]), n_words)
            if (word_span[b, start:end] >= 0).any():
                continue
            fits = np.nonzero(covered + np.cumsum(lengths[start:end]) <= budget)[0]
            if len(fits) == 0:  # not even the first word fits
                if draws[b, t, 2] * lengths[start] < budget - covered:
                    word_span[b, start] = n_spans
                break
            end = start + int(fits[-1]) + 1
            word_span[b, start:end] = n_spans
            covered += int(lengths[start:end].sum())
            n_spans += 1
    word_span_t = torch.from_numpy(word_span)
    span_of_token = word_span_t.gather(1, wid.masked_fill(wid < 0, L))
    span_of_token = span_of_token.masked_fill(~candidates, -1)
    return span_of_token >= 0, span_of_token


def keyword_mask(input_ids: torch.Tensor, candidates: torch.Tensor, wid: torch.Tensor, k: torch.Tensor,
                 keywords: set[tuple[int, ...]], probability: float, generator: torch.Generator) -> torch.Tensor:
    """Mask keyword words with ``probability`` each, then fill the budget by token masking.

    ``keywords`` holds the token-id tuple of every keyword spelling; a word is a keyword when
    its token ids equal one of them. One-token keywords are found vectorised; longer words are
    compared one by one only when their first token starts some keyword.
    """
    B, L = wid.shape
    lengths = _word_lengths(wid)
    slot = wid.masked_fill(wid < 0, L)
    word_len = lengths.gather(1, slot)
    starts = candidates.clone()
    starts[:, 1:] &= wid[:, 1:] != wid[:, :-1]
    single = torch.tensor(sorted(t[0] for t in keywords if len(t) == 1), dtype=torch.long)
    is_kw_start = starts & (word_len == 1) & torch.isin(input_ids, single)
    multi = {t for t in keywords if len(t) > 1}
    if multi:
        firsts = torch.tensor(sorted({t[0] for t in multi}), dtype=torch.long)
        maybe = starts & (word_len > 1) & torch.isin(input_ids, firsts)
        ids_np, len_np = input_ids.numpy(), word_len.numpy()
        for b, pos in torch.nonzero(maybe).tolist():
            if tuple(ids_np[b, pos:pos + len_np[b, pos]].tolist()) in multi:
                is_kw_start[b, pos] = True
    pick_start = is_kw_start & (torch.rand(B, L, generator=generator) < probability)
    picked_word = torch.zeros(B, L + 1, dtype=torch.bool)
    picked_word.scatter_(1, slot.masked_fill(~pick_start, L), pick_start)
    picked_word[:, L] = False
    kw = picked_word.gather(1, slot) & candidates
    rest = (k - kw.sum(1)).clamp(min=0)
    return kw | token_mask(candidates & ~kw, rest, generator)


def apply_replacement(input_ids: torch.Tensor, mask: torch.Tensor, vocab: VocabInfo, generator: torch.Generator,
                      mask_replace_prob: float = 0.8, random_replace_prob: float = 0.1,
                      groups: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (corrupted input_ids, labels) for the chosen positions ``mask``.

    One U[0,1) draw decides each position: < mask_replace_prob -> [MASK]; next
    random_replace_prob -> random non-special token; else unchanged. With ``groups`` (B, L)
    ids >= 0 (span masking), all positions of a group share their draw.
    """
    B, L = input_ids.shape
    u = torch.rand(B, L, generator=generator)
    if groups is not None:
        u = u.gather(1, groups.clamp(min=0))
    pick = torch.randint(len(vocab.replacement_ids), (B, L), generator=generator)
    to_mask = mask & (u < mask_replace_prob)
    to_random = mask & (u >= mask_replace_prob) & (u < mask_replace_prob + random_replace_prob)
    out = input_ids.clone()
    out[to_mask] = vocab.mask_id
    out[to_random] = vocab.replacement_ids[pick[to_random]]
    labels = torch.where(mask, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return out, labels
