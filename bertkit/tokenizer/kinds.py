"""What a tokenizer of each kind has: its special tokens (in the id order training gives them)
and the template that puts them around one text or a pair."""

from __future__ import annotations

from tokenizers import AddedToken, processors
from tokenizers import Tokenizer as _RustTokenizer

from bertkit.errors import ConfigError

# Default special tokens per kind, in the id order training assigns them.
SPECIALS = {
    "wordpiece": {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"},
    # RoBERTa's order: <s>=0 <pad>=1 </s>=2 <unk>=3, <mask> last.
    "bpe": {"cls": "<s>", "pad": "<pad>", "sep": "</s>", "unk": "<unk>", "mask": "<mask>"},
}
ROLES = ("pad", "unk", "cls", "sep", "mask")
REQUIRED_ROLES = ("pad", "unk", "cls", "sep")  # a tokenizer without [MASK] is fine for fine-tuning
DEFAULT_MAX_LENGTH = 512


def check_positive(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def bert_post_processor(backend: _RustTokenizer, specials: dict[str, str]):
    """[CLS] A [SEP] (type 0) and [CLS] A [SEP] B [SEP] with B and its [SEP] as type 1."""
    cls, sep = specials["cls"], specials["sep"]
    return processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, backend.token_to_id(cls)), (sep, backend.token_to_id(sep))],
    )


def roberta_post_processor(backend: _RustTokenizer, specials: dict[str, str], add_prefix_space: bool):
    """<s> A </s> and <s> A </s></s> B </s>, all type 0; trims the byte-level space from offsets."""
    cls, sep = specials["cls"], specials["sep"]
    return processors.RobertaProcessing(
        (sep, backend.token_to_id(sep)),  # positional: the binding rejects these as keywords
        (cls, backend.token_to_id(cls)),
        trim_offsets=True,
        add_prefix_space=add_prefix_space,
    )


def add_bpe_specials(backend: _RustTokenizer, specials: dict[str, str]) -> None:
    """Mark RoBERTa specials as unsplittable; <mask> swallows the space before it, so
    "a <mask>" masks the word " x" the model was trained to predict."""
    tokens = [AddedToken(specials[r], special=True, normalized=False) for r in ("cls", "pad", "sep", "unk")]
    tokens.append(AddedToken(specials["mask"], special=True, lstrip=True, normalized=False))
    backend.add_special_tokens(tokens)
