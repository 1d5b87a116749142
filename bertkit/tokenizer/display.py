"""Tokens as text a reader can read, for output meant for people (fill-mask's fillers, the
attention viewer's labels). A byte-level BPE token (RoBERTa, GPT-2) is spelt in a 256-symbol
alphabet standing for bytes: 'Ġ' is a space, 'ãĢĤ' the three UTF-8 bytes of '。', '×©×ľ×ķ×Ŀ'
is 'שלום'. Shown here: the bytes decoded as UTF-8, a leading space as '▁' (the word-start
mark of SentencePiece tokenizers; a space at the start of a label is invisible), a byte that
is part of a character split between tokens as <0xE5>, control characters escaped ('\\n'),
and invisible ones (a zero-width space, NBSP, a direction control) as <U+200B>. Special and
added tokens, and WordPiece tokens (## continuation kept), are unchanged. `bertkit tokenize`
keeps the raw tokens: it is a token inspector.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Iterable

from tokenizers import decoders, pre_tokenizers

SPACE_MARK = "\u2581"  # '▁', LOWER ONE EIGHTH BLOCK
INVISIBLE = ("Cf", "Zs", "Zl", "Zp", "Cc")  # shown as <U+200B>: a token of them alone would look empty
ZWJ = "\u200d"  # kept: it joins the emoji of a sequence


@lru_cache(maxsize=1)
def byte_alphabet() -> dict[str, int]:
    """The byte-level alphabet (GPT-2's bytes_to_unicode), symbol -> byte: printable Latin-1
    bytes stand for themselves, the others for chr(256 + k) in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    symbols = {byte: chr(byte) for byte in kept}
    for byte in range(256):
        if byte not in symbols:
            symbols[byte] = chr(256 + len(symbols) - len(kept))
    return {symbol: byte for byte, symbol in symbols.items()}


def is_byte_level(tokenizer) -> bool:
    """Whether `tokenizer` (a bertkit Tokenizer) spells its tokens in the byte-level alphabet."""
    backend = tokenizer.backend_tokenizer
    return isinstance(backend.decoder, decoders.ByteLevel) or isinstance(backend.pre_tokenizer,
                                                                         pre_tokenizers.ByteLevel)


def byte_token_text(token: str) -> str:
    """One byte-level token as readable text (see the module's docstring)."""
    alphabet = byte_alphabet()
    raw = b"".join(bytes([alphabet[c]]) if c in alphabet else c.encode("utf-8") for c in token)
    text = raw.decode("utf-8", errors="surrogateescape")
    out = []
    for c in text:
        if "\udc80" <= c <= "\udcff":  # a byte of a character this token holds only part of
            out.append(f"<0x{ord(c) - 0xDC00:02X}>")
        elif c == " ":
            out.append(SPACE_MARK)
        elif c in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"<0x{ord(c):02X}>")
        elif c != ZWJ and unicodedata.category(c) in INVISIBLE:  # a zero-width space, NBSP, bidi control
            out.append(f"<U+{ord(c):04X}>")
        else:
            out.append(c)
    return "".join(out)


def display_tokens(tokenizer, ids: Iterable[int]) -> list[str]:
    """The tokens of `ids` as text to show: byte-level tokens decoded (byte_token_text), special,
    added and WordPiece tokens as convert_ids_to_tokens gives them."""
    ids = [int(i) for i in ids]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    if not is_byte_level(tokenizer):
        return tokens
    added = set(tokenizer.backend_tokenizer.get_added_tokens_decoder())
    return [token if i in added or token is None else byte_token_text(token) for i, token in zip(ids, tokens)]
