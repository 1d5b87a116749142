"""Words and characters of text in any script: one rule for every task that splits raw text.

A *cluster* is what a reader sees as one character: a base character and what continues it,
i.e. combining marks (Unicode category M*, which includes the variation selectors U+FE0E /
U+FE0F and the vowel signs and viramas of Indic scripts), ZWNJ / ZWJ, a soft hyphen, emoji
skin-tone modifiers (U+1F3FB-1F3FF), emoji tag characters, Hangul vowel/final jamo, the
character after a ZWJ (emoji ZWJ sequences such as a family) and the second regional indicator
of a flag. No offset returned here falls inside a cluster, so a span never ends before an accent
written as a combining mark (NFD "Bogota\u0301") or before the U+FE0F of an emoji.

Words (`word_spans`): a run of letter/digit clusters, joined across one of `joiners` (by
default ' - . as in "don't", "well-known", "3.5"); each CJK ideograph, kana and Hangul syllable a word of
its own (no spaces separate them; BERT's BasicTokenizer splits CJK ideographs the same way);
every other non-space cluster (punctuation, symbols, emoji) a one-cluster word. Whitespace and
invisible format characters that are not part of a cluster (ZWSP, BOM, direction marks) only
separate words. On ASCII text this is exactly the regular expression \\w+(?:['\\-.]\\w+)*|[^\\w\\s].
"""

from __future__ import annotations

import functools
import re
import unicodedata

ZWJ = "\u200d"
_CONTINUING = frozenset("\u200c\u200d\u00ad\u2060")  # ZWNJ, ZWJ, soft hyphen, word joiner
_CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3130, 0x318F),  # Hangul compatibility jamo
    (0x31F0, 0x31FF),  # katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9D),  # half-width katakana
    (0x20000, 0x3134F),  # CJK extensions B-G, compatibility supplement
)


def _extends(char: str) -> bool:
    """Whether `char` continues the cluster before it, whatever that is."""
    code = ord(char)
    return (unicodedata.category(char)[0] == "M" or char in _CONTINUING
            or 0x1F3FB <= code <= 0x1F3FF  # emoji skin tones
            or 0xE0020 <= code <= 0xE007F  # emoji tags (subdivision flags)
            or 0x1160 <= code <= 0x11FF or 0xD7B0 <= code <= 0xD7FF)  # Hangul vowel and final jamo


def _regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def continues(text: str, i: int) -> bool:
    """Whether text[i] belongs to the cluster of text[i - 1] (False at either end of the text)."""
    if i <= 0 or i >= len(text):
        return False
    char, before = text[i], text[i - 1]
    if _extends(char):
        return True
    if before == ZWJ:  # an emoji ZWJ sequence (👨‍👩‍👧) or an Indic ZWJ form
        return not char.isspace()
    if _regional_indicator(char) and _regional_indicator(before):
        run = 0  # the indicators before i: a flag is a pair, so i joins when the run is odd
        while i - run - 1 >= 0 and _regional_indicator(text[i - run - 1]):
            run += 1
        return run % 2 == 1
    return False


def cluster_end(text: str, i: int) -> int:
    """The end of the cluster that starts at text[i]."""
    end = i + 1
    while continues(text, end):
        end += 1
    return end


def grapheme_span(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) widened to whole clusters: the start moved back to its cluster's base, the
    end moved past the marks, variation selectors and ZWJ continuations after it. Offsets of
    tokenizers end before characters their normalizer deletes (accents, U+FE0F), so a span built
    from them can cut "Bogota\u0301" after the a or "🏖\ufe0f" before its selector."""
    while continues(text, start):
        start -= 1
    if end > start:
        while continues(text, end):
            end += 1
    return start, end


def is_cjk(char: str) -> bool:
    """A CJK ideograph, kana or Hangul syllable: one word each."""
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _kind(char: str) -> str:
    """'space', 'cjk', 'word' (letters, digits, _, a lone mark) or 'other'."""
    if char.isspace() or unicodedata.category(char) == "Cf":
        return "space"  # ZWSP, BOM, direction marks (joiners reach here only without a base)
    if is_cjk(char):
        return "cjk"
    if char.isalnum() or char == "_" or unicodedata.category(char)[0] == "M":
        return "word"
    return "other"


@functools.lru_cache(maxsize=None)
def _ascii_pattern(joiners: str, symbols: bool) -> re.Pattern:
    word = r"\w+(?:[" + re.escape(joiners) + r"]\w+)*" if joiners else r"\w+"
    return re.compile(word + (r"|[^\w\s]" if symbols else ""))


def word_spans(text: str, joiners: str = "'-.", symbols: bool = True) -> list[tuple[int, int]]:
    """(start, end) of each word of `text` (the module docstring); `symbols=False` leaves out the
    punctuation, symbol and emoji words (what \\w+ finds)."""
    if text.isascii():
        return [m.span() for m in _ascii_pattern(joiners, symbols).finditer(text)]
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(text):
        end, kind = cluster_end(text, i), _kind(text[i])
        if kind == "word":
            end = _word_run_end(text, end, joiners)
        if kind != "space" and (symbols or kind != "other"):
            spans.append((i, end))
        i = end
    return spans


def _word_run_end(text: str, end: int, joiners: str) -> int:
    """The end of the word whose first cluster ends at `end`: more letter/digit clusters, and a
    joiner followed by one."""
    while end < len(text):
        at = end + 1 if text[end] in joiners and not continues(text, end + 1) else end
        if at >= len(text) or _kind(text[at]) != "word":
            return end
        end = cluster_end(text, at)
    return end


def words(text: str, joiners: str = "'-.", symbols: bool = True) -> list[str]:
    """The words of `word_spans`, as strings."""
    return [text[start:end] for start, end in word_spans(text, joiners, symbols)]


def fold_case(text: str) -> str:
    """Text for matching words regardless of case and Unicode form, the same in every locale:
    casefold and NFKC ("Straße" matches "STRASSE", full-width "Ｍ" matches "m"), and the
    U+0307 that lower-casing "İ" leaves after "i" dropped, so "İstanbul" is "istanbul", one
    word (a composed ż, ȧ keeps its dot). ASCII text is only lower-cased."""
    if text.isascii():
        return text.lower()
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return folded.replace("\u0307", "")
