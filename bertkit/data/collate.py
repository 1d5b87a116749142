"""Collating examples into padded, masked MLM batches.

`MLMCollator` is a DataLoader ``collate_fn``: it pads a list of examples (dicts with
``input_ids`` and optionally ``token_type_ids`` and ``next_sentence_label``) into tensors and
masks them with one of the strategies of `bertkit.data.masking`.

Dynamic masking (default, RoBERTa): fresh masks on every call, drawn from a
``torch.Generator`` owned by the collator, whose state is saved by ``state_dict()`` so a
resumed run masks the next batches exactly as the uninterrupted run would have. Static
masking (``static=True``, original BERT): every example is masked by a generator seeded from
``(seed, example key)``, where the key is ``example["example_id"]`` if present, else a hash of
its tokens, so an example gets the same mask every time it is seen.

With DataLoader worker processes each worker would hold a copy of the generator and the
workers would repeat each other's masks; collate in the main process (``num_workers=0``),
where vectorised masking costs well under a millisecond per batch.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import torch

from bertkit.data import masking as M
from bertkit.errors import ConfigError, DataError

__all__ = ["MLMCollator", "pad_examples", "STRATEGIES"]

STRATEGIES = ("token", "whole_word", "span", "keyword")


def pad_examples(examples: Sequence[dict], pad_id: int, pad_to_multiple_of: int | None = 8) -> dict[str, torch.Tensor]:
    """Right-pad ``input_ids``/``token_type_ids`` to a common length; add ``attention_mask``.

    The length is the longest example rounded up to a multiple of ``pad_to_multiple_of``
    (tensor-core friendly shapes on GPUs, fewer distinct shapes for torch.compile).
    """
    if not examples:
        raise DataError("cannot collate an empty list of examples; check the dataset is not empty")
    lengths = [len(ex["input_ids"]) for ex in examples]
    if min(lengths) == 0:
        raise DataError("an example has no input_ids; the example builder produced an empty sequence")
    L = max(lengths)
    if pad_to_multiple_of:
        L = -(-L // pad_to_multiple_of) * pad_to_multiple_of
    B = len(examples)
    ids = np.full((B, L), pad_id, dtype=np.int64)  # filled in numpy: one copy per row, no torch dispatch
    types = np.zeros((B, L), dtype=np.int64)
    for b, ex in enumerate(examples):
        ids[b, :lengths[b]] = ex["input_ids"]
        if "token_type_ids" in ex:
            types[b, :lengths[b]] = ex["token_type_ids"]
    attention = np.arange(L)[None, :] < np.array(lengths)[:, None]
    batch = {"input_ids": torch.from_numpy(ids), "token_type_ids": torch.from_numpy(types),
             "attention_mask": torch.from_numpy(attention.astype(np.int64))}
    has_label = ["next_sentence_label" in ex for ex in examples]
    if any(has_label):
        if not all(has_label):
            raise DataError("some examples have next_sentence_label and some do not; build them with one objective")
        batch["next_sentence_label"] = torch.tensor([int(ex["next_sentence_label"]) for ex in examples])
    return batch


class MLMCollator:
    """Pad examples and mask them for masked language modelling.

    ``tokenizer_or_vocab_info``: a bertkit `Tokenizer` or a `masking.VocabInfo`.
    ``mlm_probability``: share of real, non-special tokens to mask (the budget).
    ``mask_replace_prob`` / ``random_replace_prob``: of the masked positions, the share set to
    [MASK] / to a random non-special token (the rest keep their token).
    ``strategy``: "token", "whole_word", "span" (``max_span`` words, Geometric(``span_p``)
    lengths) or "keyword" (``keywords``: words masked with ``keyword_probability``; needs a
    tokenizer to spell them, or pre-tokenized id tuples).
    Output: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``labels`` (original id on
    masked positions, -100 elsewhere) and ``next_sentence_label`` when the examples have it.
    """

    def __init__(self, tokenizer_or_vocab_info, mlm_probability: float = 0.15, mask_replace_prob: float = 0.8,
                 random_replace_prob: float = 0.1, strategy: str = "token", max_span: int = 10,
                 span_p: float = 0.2, keywords=None, keyword_probability: float = 0.5,
                 pad_to_multiple_of: int | None = 8, static: bool = False, seed: int | None = None):
        src = tokenizer_or_vocab_info
        self.vocab = src if isinstance(src, M.VocabInfo) else M.VocabInfo.from_tokenizer(src)
        for name, v in [("mlm_probability", mlm_probability), ("mask_replace_prob", mask_replace_prob),
                        ("random_replace_prob", random_replace_prob), ("keyword_probability", keyword_probability)]:
            if not 0 <= v <= 1:
                raise ConfigError(f"{name} must be in [0, 1], got {v}")
        if mask_replace_prob + random_replace_prob > 1:
            raise ConfigError("mask_replace_prob + random_replace_prob must not exceed 1")
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown masking strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        if max_span < 1 or not 0 < span_p <= 1:
            raise ConfigError(f"need max_span >= 1 and span_p in (0, 1]; got {max_span}, {span_p}")
        self.mlm_probability, self.strategy = mlm_probability, strategy
        self.mask_replace_prob, self.random_replace_prob = mask_replace_prob, random_replace_prob
        self.max_span, self.span_p = max_span, span_p
        self.keyword_probability = keyword_probability
        self.pad_to_multiple_of, self.static = pad_to_multiple_of, static
        self.keywords = _keyword_ids(keywords, src) if strategy == "keyword" else set()
        if strategy == "keyword" and not self.keywords:
            raise ConfigError("strategy='keyword' needs a non-empty keywords list")
        self.seed = int(seed) if seed is not None else int(torch.randint(2**62, (1,)).item())
        self.generator = torch.Generator().manual_seed(self.seed)

    def state_dict(self) -> dict:
        return {"seed": self.seed, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.seed = int(state["seed"])
        self.generator.set_state(state["generator"])

    def __call__(self, examples: Sequence[dict]) -> dict[str, torch.Tensor]:
        batch = pad_examples(examples, self.vocab.pad_id, self.pad_to_multiple_of)
        ids = batch["input_ids"]
        if int(ids.max()) >= self.vocab.vocab_size or int(ids.min()) < 0:
            raise DataError(f"token id {int(ids.max())} is outside the vocabulary (size {self.vocab.vocab_size}); "
                            f"build the data with the same tokenizer as the collator")
        candidates = batch["attention_mask"].bool() & ~M.lookup(self.vocab.is_special, ids)
        if self.static:
            rows = [self.mask(ids[b:b + 1], candidates[b:b + 1], self._static_generator(ex))
                    for b, ex in enumerate(examples)]
            batch["input_ids"] = torch.cat([r[0] for r in rows])
            batch["labels"] = torch.cat([r[1] for r in rows])
        else:
            batch["input_ids"], batch["labels"] = self.mask(ids, candidates, self.generator)
        return batch

    def mask(self, ids: torch.Tensor, candidates: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Choose positions by the strategy, then corrupt them: (input_ids, labels)."""
        k = M.masking_budget(candidates, self.mlm_probability, g)
        groups = None
        if self.strategy == "token":
            chosen = M.token_mask(candidates, k, g)
        else:
            wid = M.word_ids(ids, candidates, self.vocab)
            if self.strategy == "whole_word":
                chosen = M.whole_word_mask(candidates, wid, k, g)
            elif self.strategy == "span":
                chosen, groups = M.span_mask(candidates, wid, k, g, self.max_span, self.span_p)
            else:
                chosen = M.keyword_mask(ids, candidates, wid, k, self.keywords, self.keyword_probability, g)
        return M.apply_replacement(ids, chosen, self.vocab, g, self.mask_replace_prob,
                                   self.random_replace_prob, groups)

    def _static_generator(self, example: dict) -> torch.Generator:
        if "example_id" in example:
            key = str(int(example["example_id"])).encode()
        else:
            key = np.asarray(example["input_ids"], dtype=np.int64).tobytes()
        digest = hashlib.sha256(self.seed.to_bytes(8, "little", signed=True) + key).digest()
        return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def _keyword_ids(keywords, tokenizer) -> set[tuple[int, ...]]:
    """Token-id tuples for every spelling of every keyword.

    Strings are spelled as given, lower-cased and capitalised (cased vocabularies split these
    differently), with a leading space for byte-level BPE (where a word inside a sentence
    carries the space marker). Tuples of ints are used as they are.
    """
    if not keywords:
        return set()
    out: set[tuple[int, ...]] = set()
    words = []
    for kw in keywords:
        if isinstance(kw, str):
            kw = kw.strip()
            if kw:
                words.extend({kw, kw.lower(), kw.capitalize()})
        else:
            out.add(tuple(int(t) for t in kw))
    if words:
        if not hasattr(tokenizer, "encode_batch"):
            raise ConfigError("string keywords need a tokenizer to spell them; pass the tokenizer, or token-id tuples")
        spellings = words + ([" " + w for w in words] if getattr(tokenizer, "kind", "") == "bpe" else [])
        out.update(tuple(ids) for ids in tokenizer.encode_batch(spellings, add_special_tokens=False) if ids)
    return out
