"""Words and characters in any script (`bertkit.tasks.unicode_text`), and the raw-text reader of
token classification that splits with them. Inputs are walk M's (non-English data)."""

from __future__ import annotations

import random
import re

import pytest

from bertkit.tasks import DataConfig
from bertkit.tasks.tagging import entities_with_spans, read_inputs, words_of_text
from bertkit.tasks.unicode_text import fold_case, grapheme_span, word_spans, words

OLD_RULE = re.compile(r"\w+(?:['\-.]\w+)*|[^\w\s]")  # the splitter before: Latin text must not move


def test_chinese_and_japanese_are_one_character_a_word_and_hindi_stays_whole():
    """Walk M #3: '李明住在北京' was one word, so the PER entity covered the whole clause; Hindi's
    vowel signs (category Mc/Mn) were words of their own."""
    assert words("李明住在北京。") == ["李", "明", "住", "在", "北", "京", "。"]
    assert words("東京タワーへ行った") == ["東", "京", "タ", "ワ", "ー", "へ", "行", "っ", "た"]
    assert words("서울에 갔다") == ["서", "울", "에", "갔", "다"]
    assert words("राहुल दिल्ली में रहता है।") == ["राहुल", "दिल्ली", "में", "रहता", "है", "।"]
    assert words("مُحَمَّد في القاهرة") == ["مُحَمَّد", "في", "القاهرة"]  # Arabic vowel marks kept
    assert words("Zhang住在Berlin") == ["Zhang", "住", "在", "Berlin"]


def test_marks_and_emoji_sequences_stay_in_their_word():
    """Walk M #4: NFD 'Jose\u0301' lost its accent to a word of its own; a ZWJ family was 5 words."""
    assert words("Heute fährt Jose\u0301 nach Zürich 🚆.") == ["Heute", "fährt", "Jose\u0301", "nach", "Zürich",
                                                              "🚆", "."]
    assert words("Gestern 👨\u200d👩\u200d👧 👍🏽 🏖\ufe0f 🇩🇪🇫🇷 1\ufe0f\u20e3") == [
        "Gestern", "👨\u200d👩\u200d👧", "👍🏽", "🏖\ufe0f", "🇩🇪", "🇫🇷", "1\ufe0f\u20e3"]
    assert words("Gülşen\u200bwohnt \ufeffhier") == ["Gülşen", "wohnt", "hier"]  # ZWSP, BOM: no words
    assert words("می\u200cخواهم") == ["می\u200cخواهم"]  # a ZWNJ inside a Persian word
    assert words("ＭüＬＬＥＲ wohnt") == ["ＭüＬＬＥＲ", "wohnt"]


def test_latin_text_splits_exactly_as_before():
    """The ASCII fast path and the per-character path agree with the old regular expression on
    any text without CJK, marks or format characters (ASCII, accents, NBSP, Greek, Cyrillic)."""
    alphabet = list("ab Z09_'-.,;:!?$£€äöüßéñçİıĞ\t\n()\"/@#%&*+=«»—–…¿¡ΩЖж²½") + ["\u00a0", "\u2003"]
    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert words(text) == OLD_RULE.findall(text), text
    assert words("U.S. don't £5m well-known 3.5") == ["U.S", ".", "don't", "£", "5m", "well-known", "3.5"]
    assert words("İbrahim İzmir'de yaşıyor.") == ["İbrahim", "İzmir'de", "yaşıyor", "."]  # documented (#5)


def test_every_word_span_slices_the_text():
    for text in ("李明住在北京。", "Heute fährt Jose\u0301 nach Zürich 🚆.", "\ufeffMüller\u00a0wohnt",
                 "a\u0301\u0301 b", "🇩🇪🇫", "x-\u0301y"):
        spans = word_spans(text)
        assert all(0 <= s < e <= len(text) for s, e in spans)
        assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))
        assert [text[s:e] for s, e in spans] == words(text)


def test_grapheme_span_takes_whole_characters():
    """Walk M #6: spans from token offsets end before a combining mark or U+FE0F."""
    nfd = "in Bogota\u0301 und"
    assert grapheme_span(nfd, 3, 9) == (3, 10) and nfd[3:10] == "Bogota\u0301"
    beach = "Nice 🏖\ufe0f und"
    assert grapheme_span(beach, 0, 6) == (0, 7)
    family = "x 👨\u200d👩\u200d👧 y"
    assert grapheme_span(family, 2, 3) == (2, 7)
    assert grapheme_span(family, 4, 7) == (2, 7)  # a start inside the sequence moves to its base
    assert grapheme_span("plain text", 0, 5) == (0, 5) and grapheme_span("ab", 1, 1) == (1, 1)


def test_fold_case_is_locale_free_and_keeps_istanbul_one_word():
    """Walk M #15: 'İ'.lower() is 'i' + U+0307, which split 'İstanbul' into 'i', 'stanbul'."""
    assert fold_case("İstanbul") == fold_case("ISTANBUL") == "istanbul"
    assert fold_case("Straße") == fold_case("STRASSE") and fold_case("Ｍüller") == "müller"
    assert fold_case("Żółw") == "żółw"  # a composed dot above stays
    assert fold_case("The Cat") == "the cat"


# ---------------------------------------------------------------------------- NER on raw text
def test_ner_raw_text_words_and_entities_keep_cjk_names_and_accents(tmp_path):
    """Walk M #3/#4 through the reader `predict` uses: '李明' and '北京' can be entities of their own
    and the entity over NFD 'José' keeps its accent; a line of invisible characters is a blank row."""
    path = tmp_path / "in.txt"
    path.write_text("李明住在北京。\nHeute fährt Jose\u0301 nach Zürich 🚆.\n\u200b\n", encoding="utf-8")
    inputs = read_inputs(str(path), DataConfig())
    assert inputs.examples[0].tokens == ["李", "明", "住", "在", "北", "京", "。"]
    tags = ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O"]
    assert entities_with_spans(tags, inputs.spans[0], inputs.texts[0]) == [
        {"type": "PER", "start": 0, "end": 2, "text": "李明"}, {"type": "LOC", "start": 4, "end": 6, "text": "北京"}]
    german = inputs.examples[1].tokens
    tags = ["B-PER" if w == "Jose\u0301" else "O" for w in german]
    assert entities_with_spans(tags, inputs.spans[1], inputs.texts[1]) == [
        {"type": "PER", "start": 12, "end": 17, "text": "Jose\u0301"}]
    assert inputs.examples[2].tokens == []
    assert words_of_text("Zoë loves Paris 😍😍!") == (["Zoë", "loves", "Paris", "😍", "😍", "!"],
                                                      [(0, 3), (4, 9), (10, 15), (16, 17), (17, 18), (18, 19)])


@pytest.mark.parametrize("text", ["The baker sold fresh bread to the village.", "U.S. shares fell 5.3% to £5m."])
def test_ner_raw_text_on_english_is_unchanged(text):
    found, spans = words_of_text(text)
    assert found == OLD_RULE.findall(text) and [text[s:e] for s, e in spans] == found
