import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bertkit.errors import DataError
from bertkit.tasks.alignment import IGNORE_INDEX, align_labels_to_tokens, word_predictions

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


def one_hot(classes, width=10):
    """Logits whose argmax at each token is the given class."""
    return np.eye(width)[classes]


def test_word_predictions_take_first_subword():
    token_pred = [9, 1, 2, 0, 0, 3, 4, 9, 9]
    words = word_predictions([4], [{"word_ids": WORD_IDS}], [one_hot(token_pred)])
    assert words[0].tolist() == [1, 0, 0, 3]


def test_truncated_words_get_ignore_index():
    words = word_predictions([4], [{"word_ids": [None, 0, 1, None]}], [one_hot([5, 6, 7, 5])])
    assert words[0].tolist() == [6, 7, IGNORE_INDEX, IGNORE_INDEX]


def test_errors():
    with pytest.raises(DataError, match="word id 3 has no label: only 2 word labels"):
        align_labels_to_tokens([None, 0, 3], [1, 2])
    with pytest.raises(DataError, match="3 word ids but logits for 2 tokens"):
        word_predictions([1], [{"word_ids": [None, 0, None]}], [one_hot([1, 2])])
    with pytest.raises(DataError, match="word id 2 is beyond example 0's 2 words"):
        word_predictions([2], [{"word_ids": [None, 0, 2, None]}], [one_hot([1, 2, 3, 4])])


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
    predicted = [0 if label == IGNORE_INDEX else label for label in token_labels]
    assert word_predictions([len(labels)], [{"word_ids": word_ids}], [one_hot(predicted)])[0].tolist() == labels
