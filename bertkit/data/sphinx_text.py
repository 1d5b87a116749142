"""Technical documentation as pre-training text: the reStructuredText sources of Sphinx manuals.

Debian ships two large English manuals with their Sphinx sources beside the HTML
(``html/_sources/**/*.rst.txt``, one file per page):

* ``python-docs``: the Python documentation (``apt-get install python3-doc``: 12.6 MB download;
  497 pages, 1.4M words of source: the tutorial, the language reference, the library reference,
  the HOWTOs, What's New);
* ``linux-docs``: the Linux kernel documentation (``apt-get install linux-doc``: 37 MB download;
  3,183 pages, 3.1M words of source: admin guide, driver and subsystem documentation).

One document per page, its prose as paragraphs (corpus.py splits them into sentences). Markup
goes, text stays: section titles and their underlines, comments and link targets, field lists
(``:Author: ...``), tables, doctest lines, literal blocks (the indented block after a paragraph
ending in ``::``) and the bodies of code-like directives (``code-block``, ``toctree``,
``kernel-doc``, ...) are dropped; the bodies of the other directives (``note``, ``warning``,
``function``: a function's description) are kept as prose; inline roles and links keep their text
(``:func:`len``` -> ``len``, ```JSON <https://json.org>`_`` -> ``JSON``). Code that survives in
prose lines is what the sentence filters (``data.min_words``, ``data.min_alpha_fraction``) are for.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from bertkit.errors import DataError
from bertkit.io import iter_text_lines

__all__ = ["SPHINX_SOURCES", "sphinx_sources_dir", "rst_paragraphs", "page_paragraphs", "sphinx_pages", "page_documents", "sphinx_documents"]

# corpus name -> (where Debian puts the sources (a glob), the install line)
SPHINX_SOURCES = {
    "python-docs": ("/usr/share/doc/python3*/html/_sources", "apt-get install python3-doc"),
    "linux-docs": ("/usr/share/doc/linux-doc-*/html/_sources", "apt-get install linux-doc"),
}
# Directives whose body is code, a table, a list of files or a formula, not prose.
CODE_DIRECTIVES = frozenset(
    "code code-block sourcecode highlight literalinclude include toctree kernel-doc kernel-abi "
    "kernel-feat kernel-include csv-table list-table table flat-table math productionlist index "
    "image figure raw doctest testcode testoutput testsetup testcleanup graphviz contents "
    "module moduleauthor sectionauthor only tabularcolumns parsed-literal".split())

_DIRECTIVE = re.compile(r"^\.\.\s+(?:[\w-]+:)?([\w-]+)::")  # .. note::  .. c:function::
_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.<>_])\1{2,}\s*$")
_TABLE_BORDER = re.compile(r"^[=+\-|\s]+$")  # +----+ and ===  === rows, | rows are caught separately
_FIELD = re.compile(r"^:[\w .-]+:(?:\s|$)")
_BULLET = re.compile(r"^(?:[*+\-\u2022]|#\.|\d+[.)]|\(?[a-zA-Z0-9]\))\s+")
_ROLE = re.compile(r":[\w:+.-]+:`([^`]*)`")
_LINK = re.compile(r"`([^`<]*?)\s*(?:<[^>]*>)?`__?")
_LITERAL = re.compile(r"``([^`]+)``")
_EMPHASIS = re.compile(r"\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\|([\w -]+)\|")  # **strong**, *emphasis*, |substitution|
_FOOTNOTE = re.compile(r"\s*\[(?:#[\w-]*|\d+|\*)\]_")


def sphinx_sources_dir(name: str) -> Path:
    """The `_sources` directory of a named manual; DataError with the install line when absent."""
    pattern, hint = SPHINX_SOURCES[name]
    found = sorted(Path("/").glob(pattern.lstrip("/")))
    if not found:
        raise DataError(f"the {name!r} corpus needs {pattern}: install it with: {hint}")
    return found[-1]  # the newest version when several are installed


def inline_text(line: str) -> str:
    """A line with its inline markup replaced by the text it shows."""
    def role(m: re.Match) -> str:
        text = m.group(1)
        shown = re.match(r"(.*?)\s*<[^>]*>$", text)  # :ref:`text <target>`
        return (shown.group(1) if shown else text).lstrip("!~")

    line = _FOOTNOTE.sub("", line)
    line = _ROLE.sub(role, line)
    line = _LITERAL.sub(lambda m: m.group(1).replace("*", "\\*"), line)  # a literal's * is no emphasis
    line = _LINK.sub(lambda m: m.group(1), line)
    line = line.replace("\\*", "\0")  # an escaped * ("char\*") is no emphasis either
    line = _EMPHASIS.sub(lambda m: next(g for g in m.groups() if g is not None), line)
    return line.replace("\0", "*").replace("\\", "")


def rst_paragraphs(text: str) -> list[str]:
    """The prose paragraphs of one reStructuredText page (see the module docstring)."""
    paragraphs: list[str] = []
    current: list[str] = []
    skip_deeper_than = None  # inside a dropped block: skip lines indented more than this

    def close() -> None:  # inline markup is replaced per paragraph: a role may span two lines
        if current:
            paragraphs.append(inline_text(" ".join(current)))
            current.clear()

    for raw in text.splitlines():
        line = raw.expandtabs(8)
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_deeper_than is not None:
            if not stripped or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if not stripped:
            close()
            continue
        directive = _DIRECTIVE.match(stripped)
        if stripped.startswith(".."):  # a directive, a comment or a link target
            close()
            if directive is None or directive.group(1) in CODE_DIRECTIVES:
                skip_deeper_than = indent  # its whole indented body goes
            continue
        if _UNDERLINE.match(stripped):  # a section title's underline (or overline): the title goes
            if current:
                current.pop()
            close()
            continue
        if (_FIELD.match(stripped) or stripped.startswith(("|", ">>>", "...")) or _TABLE_BORDER.match(stripped)):
            close()
            continue
        if _BULLET.match(stripped):
            close()
            stripped = _BULLET.sub("", stripped)
        if stripped.endswith("::"):  # a literal block follows: skip it, keep the sentence before it
            stripped = stripped[:-2].rstrip() + (":" if not stripped[:-2].endswith(" ") else "")
            if stripped.strip(":"):
                current.append(stripped)
            close()
            skip_deeper_than = indent
            continue
        current.append(stripped)
    close()
    return [p for p in (re.sub(r"\s+", " ", p).strip() for p in paragraphs) if p]


def sphinx_pages(root: Path) -> list[Path]:
    """The ``*.rst.txt`` pages under `root`, in sorted path order (a corpus's files: its fingerprint
    sees each page's size and time)."""
    return sorted(root.rglob("*.rst.txt"))


def page_paragraphs(path: Path) -> list[str]:
    """The prose paragraphs of one ``*.rst.txt`` page (none for a page without prose)."""
    return rst_paragraphs("\n".join(line for _, line in iter_text_lines(path)))


def page_documents(pages: list[Path]) -> Iterator[list[str]]:
    """One document (its prose paragraphs) per page; pages without prose give none."""
    for path in pages:
        paragraphs = page_paragraphs(path)
        if paragraphs:
            yield paragraphs


def sphinx_documents(root: Path) -> Iterator[list[str]]:
    """One document per ``*.rst.txt`` page under `root`, in sorted path order."""
    yield from page_documents(sphinx_pages(root))
