"""GCIDE as pre-training text: dictd's base64 index numbers, Webster markup to sentences, and
the real dictionary when Debian's dict-gcide is installed (scripts/setup.sh installs it)."""

from __future__ import annotations

import gzip

import pytest

from bertkit.data.gcide import GCIDE_DIR, b64_number, entry_paragraphs, gcide_documents, read_index
from bertkit.errors import DataError

ENTRY = ('Abuse \\A*buse"\\, n. [F. abus, L. abusus, fr. abuti. See {Abuse},\n'
         '   v. t.]\n'
         '   1. Improper treatment or use; misuse; as, an abuse of our\n'
         '      natural powers.\n'
         '      [1913 Webster]\n'
         '\n'
         '            Liberty may be endangered by the abuses of liberty.\n'
         '                                                  --Madison.\n'
         '      [1913 Webster]\n'
         '\n'
         '   2. Physical ill treatment; injury.\n'
         '      [1913 Webster]\n')


def test_index_numbers_are_base64_digits():
    assert b64_number("A") == 0 and b64_number("B") == 1 and b64_number("/") == 63
    assert b64_number("BA") == 64 and b64_number("5I") == 57 * 64 + 8


def test_an_entry_becomes_plain_paragraphs():
    assert entry_paragraphs(ENTRY) == ["Improper treatment or use; misuse; as, an abuse of our natural powers.",
                                       "Liberty may be endangered by the abuses of liberty.",
                                       "Physical ill treatment; injury."]


# Ends of real entries (dict-gcide 0.48). "Parrakeet": dictd writes the next entry's headword, "Parral", after
# the last source tag. "Skillful": derived forms follow a source tag on its line, then a source tag ends them.
NEXT_HEADWORD = ('   Note: The American parrakeets mostly belong to the\n'
                 '         genus {Conurus}, as the Carolina parrakeet ({Conurus\n'
                 '         Carolinensis}).\n'
                 '         [1913 Webster] Parral\n'
                 '\n')
TEXT_AFTER_SOURCE = ('   Syn: Expert; skilled; dexterous; adept; masterly; adroit;\n'
                     '        clever; cunning.\n'
                     '        [1913 Webster] -- {Skill"ful*ly}, adv. --\n'
                     '        {Skill"ful*ness}, n.\n'
                     '        [1913 Webster]\n')


def test_the_next_headword_after_the_last_source_tag_is_not_text():
    assert entry_paragraphs(NEXT_HEADWORD) == ["Note: The American parrakeets mostly belong to the genus Conurus, as "
                                               "the Carolina parrakeet (Conurus Carolinensis)."]
    # several headwords, one a line, to the end of the entry ("Asiphonate", then "Asiphonata" and "Asiphonea")
    entry = ("Asiphonate \\A*si\"phon*ate\\, a. (Zool.)\n   Destitute of a siphon or breathing tube.\n"
             "   [1913 Webster] Asiphonata\n   Asiphonea\n")
    assert entry_paragraphs(entry) == ["Destitute of a siphon or breathing tube."]


def test_text_after_a_source_tag_within_an_entry_is_a_paragraph_of_its_own():
    assert entry_paragraphs(TEXT_AFTER_SOURCE) == [
        "Syn: Expert; skilled; dexterous; adept; masterly; adroit; clever; cunning.",
        '-- Skill"ful*ly, adv. -- Skill"ful*ness, n.']


def test_a_database_on_disk_is_read_entry_by_entry(tmp_path):
    second = 'Zebra \\Ze"bra\\, n. (Zool.)\n   Any of three species of African wild horses.\n'
    blob = (ENTRY + second).encode("utf-8")
    with gzip.open(tmp_path / "gcide.dict.dz", "wb") as f:
        f.write(blob)
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def b64(n):
        return digits[n // 64] + digits[n % 64]

    size = len(ENTRY.encode())
    (tmp_path / "gcide.index").write_text(f"00-database-info\tA\tB\nabuse\t{b64(0)}\t{b64(size)}\n"
                                          f"zebra\t{b64(size)}\t{b64(len(blob) - size)}\n", encoding="utf-8")
    assert [w for w, _, _ in read_index(tmp_path / "gcide.index")] == ["abuse", "zebra"]
    docs = list(gcide_documents(tmp_path))
    assert len(docs) == 2 and docs[1] == ["Any of three species of African wild horses."]
    with pytest.raises(DataError, match="dict-gcide"):
        list(gcide_documents(tmp_path / "missing"))


@pytest.mark.skipif(not (GCIDE_DIR / "gcide.index").is_file(), reason="Debian dict-gcide is not installed")
def test_the_real_dictionary_gives_plain_english():
    docs = []
    for doc in gcide_documents():
        docs.append(doc)
        if len(docs) == 2000:
            break
    text = " ".join(s for d in docs for s in d)
    assert len(text.split()) > 50_000
    assert "[1913 Webster]" not in text and "{" not in text and "\\" not in text
