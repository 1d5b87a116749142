"""A sentence-embedding model: an encoder, a pooling and the contrastive loss that trains it.

sentence-transformers' bi-encoder: a text's vector is its token states pooled (`pool`, the modes
of the model's sentence-transformers layout, sentence_layout.py). Fine-tuning on (anchor,
positive[, negative]) text pairs minimises the in-batch negatives loss (sentence-transformers'
MultipleNegativesRankingLoss; Henderson et al. 2017, "Efficient Natural Language Response
Suggestion"): for a batch of B anchors a_i, their positives p_i and optional hard negatives n_i,

    s_ij = scale * cos(a_i, c_j),    c = (p_1 .. p_B, n_1 .. n_B)
    loss = mean_i CE(softmax_j s_ij, i)

so every other anchor's positive (and every hard negative) is a negative of a_i; scale = 20
(sentence-transformers' default; a temperature of 0.05). A candidate that is the same text as
p_i (two rows sharing a positive) is left out of a_i's softmax rather than counted as a negative.

Fine-tuning on scored pairs (a_i, b_i, y_i) (`--task similarity`, STS-style scores of any range)
minimises the CoSENT loss instead (Su 2022; sentence-transformers' CoSENTLoss): with
c_i = scale * cos(a_i, b_i),

    loss = log(1 + sum_{(i, j): y_i > y_j} exp(c_j - c_i))

so only the order of the scores counts: every pair the gold ranks above another must get the
higher cosine (pairs of equal score add nothing), scale = 20 as above. Saved, the directory is an ordinary
checkpoint with sentence-transformers' files beside it: `SentenceEncoder`, `bertkit embed` and
`sentence_transformers.SentenceTransformer` load it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import DataError
from bertkit.data.batches import length_batches
from bertkit.models.checkpoint import LoadReport
from bertkit.models.encoder import BertModel, ModelOutput
from bertkit.models.heads import mean_pool
from bertkit.models.hub_cache import resolve_model_dir
from bertkit.models.sentence_layout import SentenceLayout, read_layout, write_layout

SCALE = 20.0  # 1 / temperature of the cosine scores (sentence-transformers' default)


def pool(hidden: torch.Tensor, mask: torch.Tensor, modes: Sequence[str], prompt_length: int = 0
         ) -> torch.Tensor:
    """(B, T, H) states and a right-padded (B, T) 0/1 mask -> (B, len(modes) * H): each mode of
    sentence_layout.POOLING_MODES, concatenated. `prompt_length` > 0 leaves the first tokens out.

        mean                  e = sum_t m_t h_t / sum_t m_t
        mean_sqrt_len_tokens  e = sum_t m_t h_t / sqrt(sum_t m_t)
        weightedmean          e = sum_t t m_t h_t / sum_t t m_t          (t = 1, 2, ... the position)
        max                   e_j = max_{t: m_t = 1} h_tj
        cls                   e = h at the first counted token ([CLS] unless a prompt is left out)
        lasttoken             e = h at the last counted token
    """
    if prompt_length:
        mask = mask.clone()
        mask[:, :prompt_length] = 0
    batch, length, _ = hidden.shape
    rows = torch.arange(batch, device=hidden.device)
    m = mask.unsqueeze(-1).to(hidden.dtype)
    counted = m.sum(1).clamp(min=1e-9)
    out = []
    for mode in modes:
        if mode == "mean":
            out.append(mean_pool(hidden, mask))
        elif mode == "mean_sqrt_len_tokens":
            out.append((hidden * m).sum(1) / counted.sqrt())
        elif mode == "weightedmean":
            weights = m * torch.arange(1, length + 1, device=hidden.device, dtype=hidden.dtype).view(1, -1, 1)
            out.append((hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9))
        elif mode == "max":
            out.append(hidden.masked_fill(m == 0, float("-inf")).max(1).values)
        elif mode == "cls":
            out.append(hidden[rows, mask.int().argmax(1)])
        elif mode == "lasttoken":
            last = length - 1 - mask.flip(1).int().argmax(1)
            out.append((hidden * m)[rows, last])
        else:
            raise DataError(f"unknown pooling mode {mode!r}")
    return torch.cat(out, dim=-1)


def in_batch_negatives_loss(anchors: torch.Tensor, candidates: torch.Tensor, scale: float = SCALE,
                            copies: torch.Tensor | None = None) -> torch.Tensor:
    """(B, D) anchors and (N >= B, D) candidates whose first B rows are the anchors' positives:
    mean_i CE(scale * cos(a_i, c_.), i) (the module docstring). `copies` (B, N), True where
    candidate j is the same text as anchor i's positive but not that row (two rows sharing a
    positive): left out of anchor i's softmax, so the right answer is never a negative."""
    scores = scale * F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T
    if copies is not None:
        scores = scores.masked_fill(copies, float("-inf"))
    return F.cross_entropy(scores.float(), torch.arange(len(anchors), device=anchors.device))


def cosent_loss(first: torch.Tensor, second: torch.Tensor, scores: torch.Tensor, scale: float = SCALE
                ) -> torch.Tensor:
    """(B, D) first and second texts of B pairs and their (B,) gold scores:
    log(1 + sum_{y_i > y_j} exp(scale * (cos_j - cos_i))) (the module docstring); 0 when every
    score is the same (no pair is ordered)."""
    cosines = scale * F.cosine_similarity(first.float(), second.float(), dim=-1)
    differences = cosines[None, :] - cosines[:, None]  # [i, j] = c_j - c_i
    ordered = scores[:, None] > scores[None, :]  # y_i > y_j
    terms = torch.cat([differences.new_zeros(1), differences[ordered]])  # the 0: the "1 +"
    return torch.logsumexp(terms, dim=0)


def copies_of_positives(candidate_ids: torch.Tensor, batch: int) -> torch.Tensor:
    """(N, T) token rows of the candidates (the first `batch` the positives, padded alike) ->
    (batch, N): True where candidate j holds the same tokens as positive i and j != i. Compared on
    the device, with no read back to the host."""
    same = (candidate_ids[:batch, None, :] == candidate_ids[None, :, :]).all(-1)
    own = torch.arange(batch, device=same.device)[:, None] == torch.arange(len(candidate_ids), device=same.device)
    return same & ~own


@dataclass
class SentenceEmbeddingOutput(ModelOutput):
    loss: torch.Tensor | None = None
    embeddings: torch.Tensor | None = None  # (B, D) pooled vectors (normalised when the layout says so)


class SentenceEmbeddingModel(nn.Module):
    """`encoder` + `layout`: forward(input_ids (B, T)) -> embeddings; forward(input_ids (B, C, T))
    with C = 2 (anchor, positive) or 3 (+ a hard negative) texts per row -> the in-batch
    negatives loss; with C = 2 and `labels` (B,), the pairs' gold scores -> the CoSENT loss. Any
    family's encoder serves (`BertModel.from_pretrained` finds the family)."""

    base_model_prefix = "encoder"

    def __init__(self, encoder: nn.Module, layout: SentenceLayout | None = None, scale: float = SCALE):
        super().__init__()
        self.encoder = encoder
        if getattr(encoder, "pooler", None) is not None:
            # BERT's pooler is no part of the vector: frozen, it is saved as loaded, and DDP meets
            # no parameter left without a gradient
            encoder.pooler.requires_grad_(False)
        self.config = encoder.config
        self.layout = layout or SentenceLayout()
        self.scale = scale

    def embed(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        """(B, T) inputs -> (B, D) pooled vectors (not normalised: the loss normalises)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.encoder(input_ids, attention_mask, token_type_ids).last_hidden_state
        return pool(hidden, attention_mask, self.layout.pooling)

    def embed_by_length(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """`embed` of (N, T) rows in runs of similar length (`length_batches`: cut where the padding
        saved is worth more than a forward call), in the rows' order. A training batch's texts
        differ widely in length (a query, its passage): on the CPU this step measured 1.6x faster
        than one forward padded to the longest (docs/embedding.md). On a GPU one call: the encoder
        runs padded batches on their real tokens there, and the lengths would be read back."""
        if input_ids.is_cuda:
            return self.embed(input_ids, attention_mask, token_type_ids)
        lengths = attention_mask.sum(1).tolist()
        parts, order = [], []
        for rows in length_batches(lengths, len(lengths)):
            width = max(lengths[i] for i in rows)
            index = torch.tensor(rows, device=input_ids.device)
            parts.append(self.embed(input_ids[index, :width], attention_mask[index, :width],
                                    None if token_type_ids is None else token_type_ids[index, :width]))
            order.append(index)
        return torch.cat(parts)[torch.argsort(torch.cat(order))]

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                **_) -> SentenceEmbeddingOutput:
        if input_ids.dim() == 2:
            vectors = self.embed(input_ids, attention_mask, token_type_ids)
            return SentenceEmbeddingOutput(embeddings=F.normalize(vectors, dim=-1) if self.layout.normalize
                                           else vectors)
        batch, texts, width = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        flat = [None if t is None else t.reshape(batch * texts, width) for t in (attention_mask, token_type_ids)]
        vectors = self.embed_by_length(input_ids.reshape(batch * texts, width), *flat).view(batch, texts, -1)
        if labels is not None:  # scored pairs
            if texts != 2:
                raise ValueError(f"scored pairs have 2 texts per row, got {texts}")
            return SentenceEmbeddingOutput(loss=cosent_loss(vectors[:, 0], vectors[:, 1], labels, self.scale),
                                           embeddings=vectors[:, 0])
        # candidates: the positives first (row i is anchor i's), then every hard negative
        candidates = vectors[:, 1:].transpose(0, 1).reshape(batch * (texts - 1), -1)
        copies = copies_of_positives(input_ids[:, 1:].transpose(0, 1).reshape(batch * (texts - 1), width), batch)
        return SentenceEmbeddingOutput(loss=in_batch_negatives_loss(vectors[:, 0], candidates, self.scale, copies),
                                       embeddings=vectors[:, 0])

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, output_loading_info: bool = False, **config_overrides):
        """The encoder of `directory` (a sentence-transformers directory or a plain checkpoint:
        mean pooling + normalisation) with its layout; `config_overrides` change the encoder's
        config (dropout). The report lists the encoder's missing weights under "encoder."."""
        directory = resolve_model_dir(directory)
        layout = read_layout(directory)
        encoder, report = BertModel.from_pretrained(os.path.join(directory, layout.transformer_path),
                                                    output_loading_info=True, **config_overrides)
        model = cls(encoder, layout)
        report = LoadReport([f"encoder.{k}" for k in report.missing_keys], list(report.unexpected_keys))
        return (model, report) if output_loading_info else model

    def save_pretrained(self, directory: str | os.PathLike, tokenizer=None) -> None:
        """The encoder's checkpoint and tokenizer, and sentence-transformers' files beside them."""
        self.encoder.save_pretrained(directory, tokenizer=tokenizer)
        layout = SentenceLayout(**{**self.layout.__dict__, "transformer_path": ""})
        write_layout(directory, layout, self.config.hidden_size)
