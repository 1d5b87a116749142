"""GCIDE (the GNU Collaborative International Dictionary of English) as pre-training text.

Debian's `dict-gcide` ships it as a dictd database: `/usr/share/dictd/gcide.dict.dz` (gzip
compatible) holds the entries, `gcide.index` one line per headword: `word <TAB> offset <TAB>
length`, offset and length in base64 digits (A-Z a-z 0-9 + /). About 5.4M words of English:
the 1913 Webster's definitions, usage notes and quotations from two centuries of writers.

An entry is turned into plain sentences: the Webster markup is dropped (`[1913 Webster]` source
lines, the headword lines at column 0 with their pronunciations `\\A*buse"\\` and etymologies
`[F. abus, ...]`, what a headword line wrapped onto the next line leaves at a paragraph's start (a
respelled pronunciation, a part of speech: `n. The act ...`; a paragraph that is only an inflection's
pointer, `imp. & p. p. of Bend.`, goes whole), derived words run on at a paragraph's end in Webster's
respelling (`-- Need"less*ly, adv.`), `{braces}` around cross-references, the `--Author.` of a
quotation, the next entries' headwords that dictd ends an entry with, after its last source tag:
`   [1913 Webster] Parral`), letters written as codes are letters (`co["o]peration` -> coöperation,
`Carabid[ae]` -> Carabidae, `90[deg]` -> 90°), an editor's words opening a quotation lose their brackets
(`[He] throws ...`), wrapped lines are joined into paragraphs, and numbered senses become one paragraph each.
One document per index entry (the entries of one headword are adjacent, so a word's senses stay together).
"""

from __future__ import annotations

import gzip
import re
import unicodedata
from pathlib import Path
from typing import Iterator

from bertkit.errors import DataError

GCIDE_DIR = Path("/usr/share/dictd")
GCIDE_HINT = "install it with: apt-get install dict-gcide"
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

# a source line, "   [1913 Webster]"; dictd sometimes puts the next entry's headword after it on its line
_SOURCE = re.compile(r"^\s*\[(?:1913 Webster|WordNet 1\.5|PJC|Century Dict\.|RH|Webster 1913 Suppl\.)[^\]]*\]")
_HEADWORD_WORDS = 5  # the headword lines an entry ends with: "hop, skip, and a jump"; a usage note's lines are longer
_OPEN_ETYMOLOGY = re.compile(r"^[^\[\]]*\]\s*")  # the end of an etymology begun on the headword line
_ETYMOLOGY = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]")  # [F. abus, L. abusus ...], nested once
_AUTHOR = re.compile(r"\s*--\s*[A-Z][\w.' ]{0,40}\.?\s*$")  # the quotation's "--Macaulay."
_SENSE = re.compile(r"^\s*(?:\d+\.|\([a-z]\))\s+")
# A part of speech left at a paragraph's start ("pl. Tiles laid at the eaves", "n. (Physics) An instrument ..."):
# a sense's own label, or a headword line wrapped onto the next line ("Amperemeter ..., Amperometer ...,\n   n.").
_POS = "n|a|adj|adv|v|pl|p|imp|prep|conj|interj|pron|superl|compar|comp|vb"
_GRAMMAR = re.compile(rf"^(?:{_POS})\.(?:\s*[&,;]?\s*(?:{_POS}|t|i|pr|sing)\.)*\s+")
_INFLECTION = re.compile(r"^(?:of|from)\s")  # "imp. & p. p. of Bend.", "pl. of Beau.": a pointer, no sentence
# Webster's respelling marks syllables and stress inside a word: Re*ap`pli*ca"tion, Need"less*ly
_RESPELLED = r"[^\s,()]*[^\W\d_][*`\"][^\W\d_][^\s,()]*"
_LEADING_PRONUNCIATION = re.compile(r"^\(?[^()]*\)[,;.]?\s*")  # "(rē*ăp`plĭ*kā\"shŭn), n. The act of ..."
# derived words run on at a paragraph's end: "Not passionate. -- Un*pas"sion*ate*ly, adv. -- Un*pas"sion*ate*ness, n."
_RUN_ON = re.compile(rf"(?:\s*--\s*{_RESPELLED}(?:\s{_RESPELLED})?,\s*(?:{_POS})\.(?:\s*[&,]?\s*(?:{_POS}|t|i)\.)*)+$")
# Letters GCIDE writes as bracketed codes: co["o]peration, Carabid[ae], 90[deg], [`a] cheval. Read as brackets, they
# went with the etymologies and left "coperation", "Carabid". A mark before a letter is a combining accent.
_CODE = re.compile(r"\[([`'\"^~=,.*-]?[A-Za-z]|[A-Za-z]{2,5}|=ae)\]")
# An editor's words opening a quotation, for the words it left out: "[He] throws his stone". (Within a quotation
# they are as often a gloss, "his [Carlyle's] pen", and go with the brackets.)
_INSERTION = re.compile(r"^\[([A-Za-z][A-Za-z']*(?: [A-Za-z']+){0,3})\](?=\s+[a-z])")
_MARKS = {"`": "\u0300", "'": "\u0301", '"': "\u0308", "^": "\u0302", "~": "\u0303", "=": "\u0304", ",": "\u0327",
          "*": "\u030a", ".": "", "-": ""}  # (. and - mark Webster's pronunciation; the letter alone)
_NAMED = {"ae": "ae", "AE": "Ae", "=ae": "ae", "oe": "oe", "OE": "Oe", "deg": "\u00b0", "sect": "\u00a7",
          "eth": "\u00f0", "thorn": "\u00fe", "yogh": "\u021d", "imac": "\u012b", "aum": "\u00e4",
          "alpha": "\u03b1", "beta": "\u03b2", "gamma": "\u03b3", "delta": "\u03b4", "pi": "\u03c0", "mu": "\u03bc"}


def b64_number(digits: str) -> int:
    """dictd's index numbers: base64 digits, most significant first."""
    value = 0
    for ch in digits:
        value = value * 64 + _B64.index(ch)
    return value


def read_index(path: Path) -> list[tuple[str, int, int]]:
    """(headword, offset, length) per index line, in file order; dictd's own 00-database-* lines left out."""
    entries = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0].startswith("00"):  # dictd's own 00-database-* / 00-gcide-* notes
                continue
            entries.append((parts[0], b64_number(parts[1]), b64_number(parts[2])))
    return entries


def entry_paragraphs(text: str) -> list[str]:
    """The plain paragraphs of one dictd entry (see the module docstring for what goes)."""
    out = []
    for words in _paragraph_lines(text):
        paragraph = _INSERTION.sub(r"\1", _CODE.sub(_letter, " ".join(w for w in words if w)))
        paragraph = _OPEN_ETYMOLOGY.sub("", paragraph)
        paragraph = _ETYMOLOGY.sub("", paragraph).replace("{", "").replace("}", "")
        paragraph = _AUTHOR.sub("", re.sub(r"\s+", " ", paragraph)).strip(" ,;")
        paragraph = _RUN_ON.sub("", _without_pronunciation(paragraph))
        label = _GRAMMAR.match(paragraph)
        if label:
            paragraph = paragraph[label.end():]
            if _INFLECTION.match(paragraph):
                continue
        # Stray fragments ("n.", "Syn:") carry no sentence; brackets left over are an etymology
        # the patterns above could not delimit (accents are written [e'] inside them): drop it.
        if len(paragraph.split()) >= 3 and not any(ch in paragraph for ch in "[]\\"):
            out.append(paragraph)
    return out


def _without_pronunciation(paragraph: str) -> str:
    """The paragraph without a respelled pronunciation at its start (a headword line wrapped onto the next)."""
    leading = _LEADING_PRONUNCIATION.match(paragraph)
    if leading and re.search(_RESPELLED, leading.group(0)):
        return paragraph[leading.end():]
    return paragraph


def _letter(code: re.Match) -> str:
    """The text a bracketed letter code stands for; a code that is not one ("[Obs.]", "[He]") stays as it was."""
    name = code.group(1)
    if name in _NAMED:
        return _NAMED[name]
    if len(name) == 2 and name[0] in _MARKS:
        return unicodedata.normalize("NFC", name[1] + _MARKS[name[0]])
    return code.group(0)


def _paragraph_lines(text: str) -> list[list[str]]:
    """The entry's text lines grouped into paragraphs: a blank line, a source line, a headword line and a
    numbered sense each begin one. Text after a source tag on its line begins one too; where that runs
    to the end of the entry in short lines it is the next entries' headwords, which dictd's entries end
    with ("   [1913 Webster] Parral" before the entry "Parral \\Par"ral\\, ..."), and goes."""
    paragraphs: list[list[str]] = []
    after_source = -1  # the paragraph begun by text after a source tag
    for line in text.splitlines():
        source = _SOURCE.match(line)
        rest = line[source.end():] if source else ""
        if not line.strip() or source or not line[0].isspace():  # (a headword line: word, pronunciation, etymology)
            paragraphs.append([])
            if line.strip():  # a source or headword line: the text before it is no trailing headword list
                after_source = len(paragraphs) - 1 if rest.strip() else -1
            if not rest.strip():
                continue
            line = rest
        if _SENSE.match(line):
            paragraphs.append([])
            line = _SENSE.sub("", line)
        if not paragraphs:
            paragraphs.append([])
        paragraphs[-1].append(line.strip())
    filled = [index for index, lines in enumerate(paragraphs) if any(lines)]
    if filled and filled[-1] == after_source and all(len(line.split()) <= _HEADWORD_WORDS
                                                     for line in paragraphs[after_source]):
        del paragraphs[after_source]
    return paragraphs


def gcide_documents(directory: Path = GCIDE_DIR) -> Iterator[list[str]]:
    """One document (its plain paragraphs; corpus.py splits them into sentences) per GCIDE index
    entry, in index order."""
    index, data = directory / "gcide.index", directory / "gcide.dict.dz"
    if not (index.is_file() and data.is_file()):
        raise DataError(f"the 'gcide' corpus needs {index} and {data}; {GCIDE_HINT}")
    with gzip.open(data) as f:
        blob = f.read()
    seen_offsets = set()
    for _, offset, length in read_index(index):
        if offset in seen_offsets:  # several headwords can point at one entry
            continue
        seen_offsets.add(offset)
        text = blob[offset:offset + length].decode("utf-8", errors="replace")
        paragraphs = entry_paragraphs(text)
        if paragraphs:
            yield paragraphs
