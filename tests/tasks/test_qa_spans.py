import itertools

import numpy as np
import pytest

from bertkit.errors import DataError
from bertkit.tasks.qa_spans import QAFeature, best_spans, merge_features, null_score

# tokens: [CLS] where ? [SEP] the cat sat on the mat [SEP]
CONTEXT = "the cat sat on the mat"
OFFSETS = [None, None, None, None, (0, 3), (4, 7), (8, 11), (12, 14), (15, 18), (19, 22), None]
MASK = [o is not None for o in OFFSETS]


def logits(start_peaks, end_peaks, length=len(OFFSETS)):
    start, end = np.full(length, -5.0), np.full(length, -5.0)
    for position, value in start_peaks.items():
        start[position] = value
    for position, value in end_peaks.items():
        end[position] = value
    return start, end


def brute_force(start, end, offsets, mask, n_best, max_len):
    """Every allowed (i, j) pair scored by a double loop: the definition."""
    spans = []
    for i, j in itertools.product(range(len(start)), repeat=2):
        if mask[i] and mask[j] and offsets[i] is not None and offsets[j] is not None and 0 <= j - i < max_len:
            spans.append((start[i] + end[j], offsets[i][0], offsets[j][1]))
    spans.sort(key=lambda s: -s[0])
    return spans[:n_best]


def test_best_span_picks_peak():
    start, end = logits({5: 4.0}, {6: 3.0})
    best = best_spans(start, end, OFFSETS, MASK)[0]
    assert best == (pytest.approx(7.0), 4, 11)
    assert CONTEXT[best[1]:best[2]] == "cat sat"


def test_end_before_start_and_question_tokens_excluded():
    # highest raw logits are in the question and at end < start
    start, end = logits({1: 9.0, 8: 4.0}, {2: 9.0, 5: 5.0, 9: 1.0})
    spans = best_spans(start, end, OFFSETS, MASK)
    assert spans[0] == (pytest.approx(5.0), 15, 22)  # "the mat": start 8, end 9
    assert all(s[2] > s[1] for s in spans)


def test_max_answer_length():
    start, end = logits({4: 5.0}, {9: 5.0, 5: 1.0})
    assert best_spans(start, end, OFFSETS, MASK, max_answer_length=6)[0][1:] == (0, 22)
    assert best_spans(start, end, OFFSETS, MASK, max_answer_length=5)[0][1:] == (0, 7)


def test_matches_brute_force_on_random_logits():
    rng = np.random.default_rng(0)
    length = 40
    offsets = [None] * 6 + [(4 * k, 4 * k + 3) for k in range(33)] + [None]
    mask = np.array([o is not None for o in offsets])
    for _ in range(20):
        start, end = rng.normal(size=length), rng.normal(size=length)
        got = best_spans(start, end, offsets, mask, n_best=15, max_answer_length=7)
        want = brute_force(start, end, offsets, mask, 15, 7)
        assert [s[1:] for s in got] == [s[1:] for s in want]
        assert [s[0] for s in got] == pytest.approx([s[0] for s in want])


def test_no_allowed_span_and_shape_errors():
    start, end = logits({}, {})
    assert best_spans(start, end, OFFSETS, [False] * len(OFFSETS)) == []
    with pytest.raises(DataError, match="11 start logits but 3 end logits"):
        best_spans(start, end[:3], OFFSETS, MASK)


def test_null_score_is_cls():
    start, end = logits({0: 2.0}, {0: 1.5})
    assert null_score(start, end) == pytest.approx(3.5)


def feature(start_peaks, end_peaks, cls=(0.0, 0.0)):
    start, end = logits(start_peaks, end_peaks)
    start[0], end[0] = cls
    return QAFeature(start, end, OFFSETS, MASK)


def test_merge_takes_best_window_and_dedupes():
    weak = feature({5: 1.0}, {5: 1.0})
    strong = feature({8: 3.0}, {9: 3.0})
    duplicate = feature({8: 2.0}, {9: 2.0})
    prediction = merge_features([weak, strong, duplicate], context=CONTEXT, null_threshold=0.0)
    assert (prediction.text, prediction.start_char, prediction.end_char) == ("the mat", 15, 22)
    assert prediction.score == pytest.approx(6.0) and not prediction.is_impossible
    keys = [s[1:] for s in prediction.n_best]
    assert len(keys) == len(set(keys))


def test_merge_no_answer_decision_uses_min_null_and_threshold():
    # null scores 8 and 5 -> example null = 5; best span 4; 5 - 4 = 1
    features = [feature({5: 2.0}, {5: 2.0}, cls=(4.0, 4.0)), feature({6: 1.0}, {6: 1.0}, cls=(2.5, 2.5))]
    no_answer = merge_features(features, context=CONTEXT, null_threshold=0.5)
    assert no_answer.is_impossible and no_answer.text == "" and no_answer.null_score == pytest.approx(5.0)
    answered = merge_features(features, context=CONTEXT, null_threshold=1.5)
    assert not answered.is_impossible and answered.text == "cat"
    forced = merge_features(features, context=CONTEXT, null_threshold=0.5, allow_no_answer=False)
    assert forced.text == "cat"


def test_merge_accepts_dicts():
    f = feature({4: 3.0}, {4: 3.0})
    prediction = merge_features([vars(f)], context=CONTEXT, null_threshold=100.0)
    assert prediction.text == "the"


@pytest.mark.parametrize("context, answer", [("Er wohnt in Bogota\u0301 seit Jahren.", "Bogota\u0301"),
                                             ("Urlaub in Nice 🏖\ufe0f jetzt", "Nice 🏖\ufe0f")])
def test_an_answer_keeps_its_trailing_combining_mark_or_variation_selector(minilm_dir, context, answer):
    """Walk M #6: MiniLM's normalizer deletes the NFD accent and U+FE0F, so the answer's last token
    ends before them ('Bogota', 'Nice 🏖'); the span is widened to whole characters."""
    from bertkit.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    offsets = [tuple(o) for o in tokenizer([context], return_offsets=True, return_tensors=None)["offsets"][0]]
    start_char = context.index(answer)
    first = next(t for t, o in enumerate(offsets) if t and o[0] == start_char)
    last = max(t for t, o in enumerate(offsets) if t and 0 < o[1] <= start_char + len(answer))
    assert offsets[last][1] < start_char + len(answer)  # the cause: the offset stops short
    mask = [0 < t < len(offsets) - 1 for t in range(len(offsets))]
    start, end = logits({first: 5.0}, {last: 5.0}, length=len(offsets))
    prediction = merge_features([QAFeature(start, end, offsets, mask)], context=context)
    assert prediction.text == answer and context[prediction.start_char:prediction.end_char] == answer
    assert merge_features([QAFeature(start, end, offsets, mask)]).end_char == offsets[last][1]  # no context
