"""Tokenizers for BERT-family encoders: a thin wrapper over the Rust `tokenizers` library.

Two kinds are supported, matching the two conventions checkpoints use in practice:

* ``"wordpiece"`` (BERT): Unicode cleanup + optional lowercasing, whitespace/punctuation
  pre-tokenization, WordPiece with ``##`` continuation pieces, and ``[CLS] A [SEP] B [SEP]``
  with token type ids 0 for the first segment and 1 for the second.
* ``"bpe"`` (RoBERTa): byte-level BPE (every byte string is encodable, so no unknowns in
  practice), and ``<s> A </s></s> B </s>`` with all token type ids 0.

All the per-token work (normalizing, splitting, truncating with stride, padding, offsets)
runs inside the Rust library; Python only validates inputs and stacks the results into
arrays. Files written by `Tokenizer.save_pretrained` load in `transformers`
(`BertTokenizerFast` / `RobertaTokenizerFast`) and vice versa.

The package: `core.py` (the `Tokenizer` class and its call API), `training.py` (WordPiece and
BPE training), `files.py` (loading and saving the files), `kinds.py` (special tokens and pair
templates), `encoding.py` (call arguments and `BatchEncoding`), `extend.py` (a WordPiece
vocabulary grown with the words of new text), `coverage.py` ([UNK] counts: texts a vocabulary
cannot read), `display.py` (tokens as text to show: byte-level BPE symbols decoded).
"""

from bertkit.tokenizer.core import Tokenizer
from bertkit.tokenizer.encoding import BatchEncoding

__all__ = ["Tokenizer", "BatchEncoding"]
