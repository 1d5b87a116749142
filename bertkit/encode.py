"""Sentence embeddings: mean of the encoder's last hidden states over real tokens, L2-normalised.

This is sentence-transformers' definition (all-MiniLM-L6-v2 and friends were trained with it):

    e = sum_t m_t h_t / sum_t m_t,   then   e / ||e||_2

with m the attention mask (1 on real tokens, 0 on padding). Texts are encoded in batches of
similar length: sorting by token count before batching removes most padding, which is pure
waste (measured 1.7x on BBC paragraphs, see docs/benchmarks.md); results come back in the
caller's order.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch

from .errors import CheckpointError, DataError
from .fastpath import pack_for_cpu
from .model import BertModel
from .quantize import check_quantize, quantize_int8

PROGRESS_MIN_BATCHES = 20  # show_progress=None: a bar only when there are at least this many batches


class SentenceEncoder:
    """A tokenizer and a `BertModel`, with `encode(texts) -> (n, hidden)` embeddings.

    `quantize="int8"` runs an int8 copy of the model's transformer layers (bertkit/quantize.py;
    cosine >= 0.99 to fp32 vectors measured on BBC, docs/inference.md). In fp32 on CPU it runs
    a copy with oneDNN-packed weights (bertkit/fastpath.py; same numbers, faster).
    """

    sort_by_length = True  # False only to measure what sorting buys (benchmarks/bench_levers.py)
    pack_weights = True  # fp32 on CPU: oneDNN-packed copy (fastpath.py); False to measure it

    def __init__(self, model: BertModel, tokenizer, quantize: str | None = None) -> None:
        vocab = tokenizer.vocab_size
        if vocab > model.config.vocab_size:
            raise CheckpointError(
                f"the tokenizer's vocabulary ({vocab} tokens) is larger than the model's "
                f"({model.config.vocab_size}): ids past {model.config.vocab_size - 1} have no "
                "embedding; use the tokenizer saved with this model")
        self.model = model.eval()  # as given: what save_pretrained writes and attributes read
        # What encode() runs: an int8 or packed inference copy (a copy given runs as it is).
        self.runner = model
        if check_quantize(quantize):
            self.runner = quantize_int8(model, tokenizer)
        elif (self.pack_weights and next(model.parameters()).device.type == "cpu"
              and not getattr(model, "inference_copy", None)):
            self.runner = pack_for_cpu(model)
        self.tokenizer = tokenizer

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, quantize: str | None = None) -> "SentenceEncoder":
        """Load the tokenizer and the encoder saved in one model directory."""
        from .tokenizer import Tokenizer

        return cls(BertModel.from_pretrained(directory), Tokenizer.from_pretrained(directory), quantize)

    @property
    def dim(self) -> int:
        return self.model.config.hidden_size

    def encode(self, texts: Sequence[str] | str, batch_size: int = 32, max_length: int = 256,
               normalize: bool = True, show_progress: bool | None = None) -> np.ndarray:
        """Embed `texts` as an (n, hidden) float32 array, row i for texts[i].

        Texts longer than `max_length` tokens are truncated (the tokenizer warns once).
        `show_progress=None` shows a bar when there are many batches.
        """
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise DataError("encode() got no texts; pass a non-empty list of strings")
        if batch_size <= 0:
            raise DataError(f"batch_size must be positive, got {batch_size}")
        # Tokenize everything at once (fast, in Rust), unpadded: one truncation warning at most.
        encoded = self.tokenizer(texts, padding=False, truncation=True, max_length=max_length,
                                 return_tensors=None)
        ids, types = encoded["input_ids"], encoded["token_type_ids"]
        # Longest first: similar lengths share a batch, and the peak memory comes early.
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i])) if self.sort_by_length \
            else list(range(len(texts)))
        batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        if show_progress is None:
            show_progress = len(batches) >= PROGRESS_MIN_BATCHES

        out = np.empty((len(texts), self.dim), dtype=np.float32)
        pad_id = self.model.config.pad_token_id
        with torch.inference_mode():
            for rows in _progress(batches, show_progress):
                width = max(len(ids[i]) for i in rows)
                input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
                token_types = torch.zeros((len(rows), width), dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for j, i in enumerate(rows):
                    n = len(ids[i])
                    input_ids[j, :n] = torch.tensor(ids[i])
                    token_types[j, :n] = torch.tensor(types[i])
                    mask[j, :n] = 1
                hidden = self.runner(input_ids, mask, token_types).last_hidden_state
                pooled = mean_pool(hidden, mask)
                if normalize:
                    pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[rows] = pooled.float().numpy()
        return out


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, H) states and a (B, T) 0/1 mask -> (B, H) mean over the masked-in tokens."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def _progress(items, show: bool):
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc="encode", unit="batch", disable=None)  # None: no bar when not a terminal
