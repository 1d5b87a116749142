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
    # Skillful's is its derived words in Webster's respelling, run on: no text, so that paragraph goes
    assert entry_paragraphs(TEXT_AFTER_SOURCE) == [
        "Syn: Expert; skilled; dexterous; adept; masterly; adroit; clever; cunning."]
    prose = "   Syn: Expert; adept.\n   [1913 Webster] Said of a hand that knows\n   its work.\n   [1913 Webster]\n"
    assert entry_paragraphs(prose) == ["Syn: Expert; adept.", "Said of a hand that knows its work."]


def test_derived_words_run_on_at_a_paragraphs_end_are_not_text():
    entry = 'X \\x\\, a.\n   Not passionate; dispassionate. -- Un*pas"sion*ate*ly, adv. -- Un*pas"sion*ate*ness, n.\n'
    assert entry_paragraphs(entry) == ["Not passionate; dispassionate."]


# A headword line wrapped onto the next line leaves its part of speech at the definition's start (dict-gcide 0.48).
WRAPPED_HEADWORD = ('Amperemeter \\Am`p[`e]re"me`ter\\, Amperometer \\Am`pe*rom"e*ter\\,\n'
                    '   n. [Amp[`e]re + meter.] (Physics)\n'
                    '   An instrument for measuring the strength of an electrical\n'
                    '   current in amp[`e]res.\n'
                    '   [1913 Webster]\n')


def test_a_part_of_speech_at_a_paragraphs_start_is_not_text():
    assert entry_paragraphs(WRAPPED_HEADWORD) == [
        "(Physics) An instrument for measuring the strength of an electrical current in amp\u00e8res."]
    senses = "Eave \\Eave\\, n.\n   1. pl. Tiles laid at the eaves of a house.\n   [1913 Webster]\n"
    assert entry_paragraphs(senses) == ["Tiles laid at the eaves of a house."]
    # an inflection's entry points at its word and says nothing else: no paragraph
    assert entry_paragraphs("Slank \\Slank\\,\n   imp. & p. p. of {Slink}.\n   [1913 Webster]\n") == []
    # a pronunciation left at the start by a wrapped headword line goes too
    wrapped = 'Reapplication \\Re*ap`pli*ca"tion\\\n   (r[=e]*[a^]p`pl[i^]*k[=a]"sh[u^]n), n. The act of reapplying.\n'
    assert entry_paragraphs(wrapped) == ["The act of reapplying."]
    # a sentence that begins with a word, not a label, keeps it
    assert entry_paragraphs("Pa \\Pa\\, n.\n   A child's word for father.\n") == ["A child's word for father."]


def test_letters_written_as_codes_are_letters():
    entry = ('X \\x\\, n.\n   Without co["o]peration; of the family {Carabid[ae]}; an angle of 90[deg];'
             ' [`a] cheval. [Obs.]\n')
    assert entry_paragraphs(entry) == ["Without co\u00f6peration; of the family Carabidae; an angle of 90\u00b0;"
                                       " \u00e0 cheval."]
    # an editor's words opening a quotation stand for the words it left out; within it they are a gloss
    quotation = "X \\x\\, v. t.\n   1. To throw.\n   [1913 Webster]\n\n         [He] throws his [the boy's] stone.\n"
    assert entry_paragraphs(quotation) == ["He throws his stone."]


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
