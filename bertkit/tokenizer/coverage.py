"""How much of a text a vocabulary reads. A WordPiece vocabulary without a script (Chinese in an
English model) or without emoji reads each such word as one [UNK]; a text that is nothing but
[UNK] tokens ("🎉🎉", "😍😍😍") is then the same input as every other such text, so it gets the
same vector (cosine 1.000 in `nearest`) and the same prediction. Fine-tuning warns about the
[UNK] share of its training text; `embed`, `nearest` and `predict` about the texts they cannot
tell apart.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

UNKNOWN_SHARE = 0.05  # above this share of [UNK] tokens the vocabulary misses much of the text


@dataclass
class UnknownTokens:
    """[UNK] counts over sequences of ids: every token, the [UNK] ones, and the indices of the
    sequences whose tokens (special ones left out) are all [UNK]."""

    tokens: int = 0
    unknown: int = 0
    all_unknown: list[int] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.unknown / self.tokens if self.tokens else 0.0


def count_unknown(sequences: Iterable, unk_id: int, special_ids: Iterable[int] = ()) -> UnknownTokens:
    """Count [UNK] (`unk_id`) in each id sequence of `sequences` (lists or arrays). A sequence
    that is a list of sequences (an embedding row's text and positive) counts as its parts. A
    sequence with no token but specials is not "all unknown"."""
    counts = UnknownTokens()
    special = np.asarray(sorted(set(special_ids) - {unk_id}), dtype=np.int64)
    for index, ids in enumerate(sequences):
        parts = ids if len(ids) and not np.isscalar(ids[0]) else [ids]
        for part in map(np.asarray, parts):
            unknown = int((part == unk_id).sum())
            counts.tokens, counts.unknown = counts.tokens + part.size, counts.unknown + unknown
            if unknown and unknown == part.size - int(np.isin(part, special).sum()):
                counts.all_unknown.append(index)
    return counts


def warn_about_unknown_texts(texts: Sequence[str], tokenizer, model_dir: str, what: str = "texts",
                             outcome: str = "one vector") -> None:
    """One warning when texts the model is given (`what`: "texts of corpus.txt") read as nothing
    but [UNK] (how many, and one of them: the model cannot tell them apart, they get `outcome`), or
    when the [UNK] share of their tokens is above UNKNOWN_SHARE. Blank texts are not counted."""
    unk = tokenizer.unk_token_id
    texts = [text for text in texts if text.strip()]
    if unk is None or not texts:
        return
    counts = count_unknown(tokenizer.encode_batch(texts), unk)
    said = []
    if counts.all_unknown:
        said.append(f"{len(counts.all_unknown)} of the {len(texts)} {what} are nothing but [UNK] tokens (e.g. "
                    f"{texts[counts.all_unknown[0]][:40]!r}): the model cannot tell such texts apart (they get "
                    f"{outcome})")
    if counts.share > UNKNOWN_SHARE:
        whose = "their tokens" if said else f"the tokens of the {what}"
        said.append(f"{counts.share:.1%} of {whose} are [UNK]")
    if said:
        warnings.warn(f"{'; '.join(said)}: {model_dir}'s vocabulary does not cover this text (another script, "
                      "emoji); use a model whose vocabulary does (a multilingual one)", stacklevel=2)
