"""The Python and Linux kernel manuals as pre-training text (bertkit/data/sphinx_text.py): rst
markup to prose paragraphs, the named corpora and "+"-joined corpora (scripts/setup.sh installs
Debian's python3-doc and linux-doc)."""

from __future__ import annotations

import itertools

import pytest

from bertkit.data import sphinx_text
from bertkit.data.corpus import NAMED_CORPORA, open_corpus
from bertkit.data.sphinx_text import rst_paragraphs, sphinx_documents
from bertkit.errors import DataError

PAGE = """\
.. _json-page:

:mod:`json` --- JSON encoder and decoder
========================================

.. module:: json
   :synopsis: Encode and decode the JSON format.

:Author: Bob Ippolito

`JSON <https://json.org>`_, specified by :rfc:`7159`, is a lightweight data
interchange format [#errata]_.

.. warning::
   Be cautious when parsing **untrusted** data.

Encoding basic objects::

    >>> import json
    >>> json.dumps([1, 2])

.. code-block:: c

   int main(void) { return 0; }

* Use :func:`~json.dumps` to encode.
* Use ``loads`` to decode.

+------+------+
| a    | b    |
+------+------+

.. function:: dumps(obj)

   Serialize *obj* to a JSON formatted string.

.. This is a comment
   that spans two lines.

Last paragraph, with a :ref:`link text <target>`.
"""


def test_markup_goes_and_prose_stays():
    assert rst_paragraphs(PAGE) == [
        "JSON, specified by 7159, is a lightweight data interchange format.",
        "Be cautious when parsing untrusted data.",
        "Encoding basic objects:",
        "Use json.dumps to encode.",
        "Use loads to decode.",
        "Serialize obj to a JSON formatted string.",
        "Last paragraph, with a link text.",
    ]


def test_pages_are_documents_in_path_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.rst.txt").write_text("Title\n=====\n\nSecond page text here.\n", encoding="utf-8")
    (tmp_path / "a.rst.txt").write_text("First page.\n\nIts second paragraph.\n", encoding="utf-8")
    (tmp_path / "empty.rst.txt").write_text(".. toctree::\n\n   a\n   b/two\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a page\n", encoding="utf-8")
    assert list(sphinx_documents(tmp_path)) == [["First page.", "Its second paragraph."],
                                                ["Second page text here."]]


def test_a_manual_that_is_not_installed_names_its_package(monkeypatch, tmp_path):
    monkeypatch.setitem(sphinx_text.SPHINX_SOURCES, "python-docs",
                        (str(tmp_path / "nowhere" / "_sources"), "apt-get install python3-doc"))
    with pytest.raises(DataError, match="apt-get install python3-doc"):
        open_corpus("python-docs")


def test_only_named_corpora_join_with_a_plus():
    with pytest.raises(DataError, match="'novels' is not a named corpus"):
        open_corpus("gcide+novels")


installed = {name: bool(list(sphinx_text.Path("/").glob(pattern.lstrip("/"))))
             for name, (pattern, _) in sphinx_text.SPHINX_SOURCES.items()}


@pytest.mark.skipif(not installed["python-docs"], reason="Debian python3-doc is not installed")
def test_the_python_manual_gives_english_prose():
    corpus = open_corpus("python-docs")
    docs = list(corpus)
    words = sum(len(s.split()) for doc in docs for s in doc)
    assert "python-docs" in NAMED_CORPORA and len(docs) > 400 and words > 900_000
    sentences = [s for doc in docs for s in doc]
    assert "The Python Tutorial" not in sentences  # titles go
    assert not any(s.endswith("::") or ":func:`" in s or ":ref:`" in s for s in sentences)
    # rare: a literal holding a backtick or cut by the sentence splitter keeps its ``; the
    # glossary's entry for the ">>>" prompt
    assert sum("``" in s or s.startswith(">>>") for s in sentences) < 0.001 * len(sentences)


@pytest.mark.skipif(not all(installed.values()), reason="Debian python3-doc and linux-doc are not installed")
def test_joined_corpora_read_one_after_another():
    joined = open_corpus("python-docs+linux-docs")
    first = list(itertools.islice(open_corpus("python-docs"), 3))
    linux_first = next(iter(open_corpus("linux-docs")))
    docs = list(joined)
    assert docs[:3] == first and linux_first in docs
    assert joined.stats["documents"] == len(docs) > 3000
