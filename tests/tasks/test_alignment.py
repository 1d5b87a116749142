import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertkit.errors import DataError
from bertkit.tasks.alignment import IGNORE_INDEX, align_labels_to_tokens, word_predictions_from_tokens

# "[CLS] Wolf ##gang lives in Ber ##lin [SEP] [PAD]"
WORD_IDS = [None, 0, 0, 1, 2, 3, 3, None, None]
WORD_LABELS = [1, 0, 0, 3]  # B-PER O O B-LOC


def test_first_subword_only():
    assert align_labels_to_tokens(WORD_IDS, WORD_LABELS) == [-100, 1, -100, 0, 0, 3, -100, -100, -100]


def test_label_all_subwords_with_inside_mapping():
    assert align_labels_to_tokens(WORD_IDS, WORD_LABELS, label_all_subwords=True) == [
        -100, 1, 1, 0, 0, 3, 3, -100, -100]
    inside = {1: 2, 3: 4}  # B-PER -> I-PER, B-LOC -> I-LOC
    assert align_labels_to_tokens(WORD_IDS, WORD_LABELS, label_all_subwords=True, inside_label=inside) == [
        -100, 1, 2, 0, 0, 3, 4, -100, -100]


def test_word_predictions_take_first_subword():
    token_pred = [9, 1, 2, 0, 0, 3, 4, 9, 9]
    assert word_predictions_from_tokens(WORD_IDS, token_pred) == [1, 0, 0, 3]


def test_truncated_words_get_missing():
    assert word_predictions_from_tokens([None, 0, 1, None], [5, 6, 7, 5], num_words=4) == [6, 7, -100, -100]


def test_errors():
    with pytest.raises(DataError, match="word id 3 has no label: only 2 word labels"):
        align_labels_to_tokens([None, 0, 3], [1, 2])
    with pytest.raises(DataError, match="3 word ids but 2 token predictions"):
        word_predictions_from_tokens([None, 0, None], [1, 2])


@st.composite
def tokenised(draw):
    """Random words split into 1-3 sub-words, framed by special tokens and padding."""
    n_words = draw(st.integers(0, 8))
    pieces = [draw(st.integers(1, 3)) for _ in range(n_words)]
    word_ids = [None] + [w for w, k in enumerate(pieces) for _ in range(k)] + [None] * draw(st.integers(1, 3))
    labels = [draw(st.integers(0, 5)) for _ in range(n_words)]
    return word_ids, labels


@settings(max_examples=150, deadline=None)
@given(tokenised())
def test_round_trip_recovers_word_labels(case):
    word_ids, labels = case
    token_labels = align_labels_to_tokens(word_ids, labels)
    assert len(token_labels) == len(word_ids)
    assert sum(label != IGNORE_INDEX for label in token_labels) == len(labels)  # one per word
    assert word_predictions_from_tokens(word_ids, token_labels, num_words=len(labels)) == labels
