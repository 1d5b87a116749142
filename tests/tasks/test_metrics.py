import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertkit.errors import DataError
from bertkit.tasks.metrics import (
    accuracy,
    entity_prf,
    entity_spans,
    label_set_loss,
    log_loss,
    macro_f1,
    micro_f1,
    normalize_answer,
    order_correlations,
    paired_difference,
    proportion_standard_error,
    pearson,
    per_class_prf,
    spearman,
    squad_em_f1,
    squad_evaluate,
)
from bertkit.tasks.metrics import average_ranks
from bertkit.tasks.formats import TextExample
from bertkit.tasks.sequence import MULTI_LABEL, majority_set_baseline

# ---------------------------------------------------------------- classification (by hand)

GOLD = ["a", "a", "a", "b", "b", "c"]
PRED = ["a", "a", "b", "b", "c", "c"]


def test_accuracy_and_per_class_by_hand():
    assert accuracy(GOLD, PRED) == pytest.approx(4 / 6)
    report = per_class_prf(GOLD, PRED)
    # a: tp 2, fp 0, fn 1 ; b: tp 1, fp 1, fn 1 ; c: tp 1, fp 1, fn 0
    assert report["a"] == pytest.approx({"precision": 1.0, "recall": 2 / 3, "f1": 0.8, "support": 3})
    assert report["b"] == pytest.approx({"precision": 0.5, "recall": 0.5, "f1": 0.5, "support": 2})
    assert report["c"] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1})
    assert macro_f1(GOLD, PRED) == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert micro_f1(GOLD, PRED) == pytest.approx(accuracy(GOLD, PRED))


def test_absent_class_counts_zero_in_macro():
    assert macro_f1(["a", "a"], ["a", "a"], labels=["a", "b"]) == pytest.approx(0.5)


def test_multilabel_by_hand():
    gold = [["x", "y"], ["y"], []]
    pred = [["x"], ["y", "z"], ["z"]]
    # x: tp1 ; y: tp1 fn1 ; z: fp2  -> micro tp2 fp2 fn1: P=.5 R=2/3
    assert micro_f1(gold, pred) == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert macro_f1(gold, pred) == pytest.approx((1.0 + 2 / 3 + 0.0) / 3)
    assert accuracy(gold, pred) == 0.0
    assert accuracy([["x", "y"]], [["y", "x"]]) == 1.0


def test_length_mismatch_is_data_error():
    with pytest.raises(DataError, match="2 gold labels but 1 predictions"):
        accuracy(["a", "b"], ["a"])


def test_against_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(0)
    gold = [rng.choice("abcd") for _ in range(300)]
    pred = [g if rng.random() < 0.6 else rng.choice("abcde") for g in gold]
    assert macro_f1(gold, pred) == pytest.approx(metrics.f1_score(gold, pred, average="macro", zero_division=0))
    assert micro_f1(gold, pred) == pytest.approx(metrics.f1_score(gold, pred, average="micro"))



def test_log_loss_by_hand_and_against_sklearn():
    probs = [{"a": 0.5, "b": 0.25, "c": 0.25}, {"a": 0.1, "b": 0.8, "c": 0.1}]
    assert log_loss(["a", "c"], probs) == pytest.approx(-(math.log(0.5) + math.log(0.1)) / 2)
    assert log_loss(["a"], [{"a": 1.0, "b": 0.0}]) == 0.0
    assert log_loss(["b"], [{"a": 1.0}]) == math.inf  # the gold class got nothing: no clipping
    assert math.isnan(log_loss([], []))
    with pytest.raises(DataError, match="2 gold labels but 1 predictions"):
        log_loss(["a", "b"], probs[:1])
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    labels = ["a", "b", "c", "d"]
    gold = [labels[i] for i in rng.integers(0, 4, 200)]
    rows = rng.dirichlet(np.ones(4), 200)
    ours = log_loss(gold, [dict(zip(labels, row)) for row in rows])
    assert ours == pytest.approx(metrics.log_loss(gold, rows, labels=labels), rel=1e-12)


# ---------------------------------------------------------------- correlations


def test_pearson_by_hand():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x=[1,2,3,4], y=[1,3,2,4]: cov sum = 4, var sums = 5 and 5 -> r = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))


def test_average_ranks_ties():
    assert average_ranks([10, 20, 20, 5, 20]).tolist() == [2.0, 4.0, 4.0, 1.0, 4.0]


def test_spearman_by_hand_with_ties():
    # ranks x = [1, 2.5, 2.5, 4], y = [1, 2, 3, 4] -> pearson of ranks
    expected = pearson([1, 2.5, 2.5, 4], [1, 2, 3, 4])
    assert spearman([1, 5, 5, 9], [0.1, 0.2, 0.3, 0.4]) == pytest.approx(expected)
    assert spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)  # monotone, not linear


def test_a_constant_input_is_no_correlation_and_a_constant_prediction_no_order():
    """Equal floats minus their mean need not be 0: pearson of a constant 0.7 gave nan for 10
    values and -2.3e-16 for 7. Undefined is nan every time; `order_correlations` (similarity)
    scores a constant prediction 0, chance's level, and leaves other inputs as they were."""
    rng = np.random.default_rng(0)
    for n in (3, 7, 10, 1000):
        gold = rng.random(n)
        assert math.isnan(pearson(gold, [0.7] * n)) and math.isnan(spearman(gold, [0.7] * n))
        assert order_correlations(gold, [0.7] * n) == {"spearman": 0.0, "pearson": 0.0}
        other = rng.random(n)
        assert order_correlations(gold, other) == {"spearman": spearman(gold, other), "pearson": pearson(gold, other)}
    both = order_correlations([0.5, 0.5, 0.5], [0.1, 0.1, 0.1])  # gold of one score: nothing to order
    assert math.isnan(both["spearman"]) and math.isnan(both["pearson"])


def test_correlations_need_two_points():
    with pytest.raises(DataError, match="at least 2"):
        spearman([1.0], [2.0])


def test_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 200).astype(float)  # many ties
    y = x + rng.normal(size=200)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])


# ---------------------------------------------------------------- entity spans (conlleval)


def test_entity_spans_iob2():
    tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "O"]
    assert entity_spans(tags) == [("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 5)]


def test_entity_spans_lenient_i_start_and_type_change():
    # I- after O starts an entity; a type change inside I- splits; entity at the very end.
    tags = ["I-PER", "I-PER", "I-LOC", "O", "B-ORG", "I-PER", "O", "I-MISC"]
    assert entity_spans(tags) == [("PER", 0, 1), ("LOC", 2, 2), ("ORG", 4, 4), ("PER", 5, 5), ("MISC", 7, 7)]


def test_entity_spans_iob1_and_iobes():
    # IOB1: B- only separates adjacent entities of the same type
    assert entity_spans(["I-PER", "I-PER", "B-PER", "O"], scheme="IOB1") == [("PER", 0, 1), ("PER", 2, 2)]
    assert entity_spans(["S-PER", "B-LOC", "E-LOC", "I-LOC"], scheme="IOBES") == [
        ("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3)]


def test_entity_spans_bad_tag():
    with pytest.raises(DataError, match="'PER' is not 'O'"):
        entity_spans(["PER"])
    with pytest.raises(DataError, match="E-PER"):
        entity_spans(["E-PER"], scheme="IOB2")
    with pytest.raises(DataError, match="unknown tagging scheme"):
        entity_spans(["O"], scheme="XYZ")


def test_entity_prf_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["I-ORG", "O"]]
    # gold: PER(0,1) LOC(3,3) ORG(s1 0,0); pred: PER(0,1) ORG(3,3) ORG(s1 0,0) -> tp 2 of 3/3
    result = entity_prf(gold, pred)
    assert result["precision"] == pytest.approx(2 / 3) and result["recall"] == pytest.approx(2 / 3)
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert result["per_type"]["ORG"]["precision"] == pytest.approx(0.5)
    assert result["per_type"]["ORG"]["support"] == 1


def test_entity_prf_entities_do_not_cross_sentences():
    # the I-PER at the start of sentence 2 is a new entity, not a continuation
    result = entity_prf([["B-PER"], ["I-PER"]], [["B-PER"], ["B-PER"]])
    assert result["f1"] == pytest.approx(1.0)


def _random_tags(rng, n):
    return [rng.choice(["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC"]) for _ in range(n)]


def test_against_seqeval():
    seqeval = pytest.importorskip("seqeval.metrics")
    rng = random.Random(1)
    gold = [_random_tags(rng, rng.randint(1, 12)) for _ in range(200)]
    pred = [[t if rng.random() < 0.7 else rng.choice(["O", "B-PER", "I-LOC"]) for t in s] for s in gold]
    result = entity_prf(gold, pred)
    assert result["f1"] == pytest.approx(seqeval.f1_score(gold, pred))
    assert result["precision"] == pytest.approx(seqeval.precision_score(gold, pred))
    assert result["recall"] == pytest.approx(seqeval.recall_score(gold, pred))


# ---------------------------------------------------------------- SQuAD (official examples)


def test_normalize_answer_official_rules():
    assert normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # article removal is whole-word only


def test_squad_em_f1_official_style():
    assert squad_em_f1("the Denver Broncos", ["Denver Broncos", "Broncos"]) == (1.0, 1.0)
    # pred "Broncos won" vs gold "Denver Broncos": common 1, P=1/2, R=1/2 -> F1 .5
    exact, f1 = squad_em_f1("Broncos won", ["Denver Broncos"])
    assert exact == 0.0 and f1 == pytest.approx(0.5)
    # max over golds: "Broncos" matches exactly
    assert squad_em_f1("Broncos.", ["Denver Broncos", "Broncos"]) == (1.0, 1.0)
    assert squad_em_f1("Santa Clara", ["Levi's Stadium"]) == (0.0, 0.0)


def test_squad_v2_no_answer():
    assert squad_em_f1("", []) == (1.0, 1.0)
    assert squad_em_f1("anything", []) == (0.0, 0.0)
    assert squad_em_f1("", ["Paris"]) == (0.0, 0.0)
    # gold answers that normalise to "" count as no answer (official v2 script)
    assert squad_em_f1("", ["the"]) == (1.0, 1.0)


def test_squad_evaluate_breakdown_and_missing():
    gold = {"q1": ["Denver Broncos"], "q2": [], "q3": ["blue sky"], "q4": ["x"]}
    preds = {"q1": "Denver Broncos", "q2": "", "q3": "sky"}
    result = squad_evaluate(gold, preds)
    assert result["total"] == 4 and result["missing"] == 1
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 1 + 2 / 3 + 0) / 4)
    assert result["HasAns_total"] == 3 and result["NoAns_total"] == 1
    assert result["NoAns_exact"] == pytest.approx(100.0)
    assert result["HasAns_exact"] == pytest.approx(100 / 3)


def test_paired_difference_is_the_mean_and_error_of_the_per_example_differences():
    # walk P's test set: 500 texts, 109 right by the model alone, 22 by TF-IDF alone, 300 by both
    ours = [True] * 109 + [False] * 22 + [True] * 300 + [False] * 69
    theirs = [False] * 109 + [True] * 22 + [True] * 300 + [False] * 69
    paired = paired_difference(ours, theirs)
    assert paired["difference"] == pytest.approx((109 - 22) / 500)
    # var(d) = E[d^2] - E[d]^2 = 131/500 - 0.174^2; the error is sqrt(var / n)
    assert paired["standard_error"] == pytest.approx(np.sqrt((131 / 500 - 0.174 ** 2) / 500)) == pytest.approx(0.0215, abs=1e-4)
    assert (paired["only_ours"], paired["only_theirs"]) == (109, 22)
    # the same two scores unpaired would carry about sqrt(2) times more noise here
    assert paired["standard_error"] < np.hypot(proportion_standard_error(409 / 500, 500),
                                               proportion_standard_error(322 / 500, 500))
    with pytest.raises(DataError, match="same examples"):
        paired_difference([True], [True, False])


def test_the_multi_label_dev_loss_is_the_heads_binary_cross_entropy():
    """label_set_loss over sigmoid probabilities equals BCE with logits (the training loss) on the
    same targets; a gold class no model column scores is left out."""
    classes = ["a", "b", "c"]
    logits = torch.tensor([[2.0, -1.0, 0.5], [-3.0, 4.0, 0.0], [0.1, 0.2, -6.0]], dtype=torch.float64)
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    probs = [dict(zip(classes, row.tolist())) for row in torch.sigmoid(logits)]
    gold = [["a", "c"], ["b", "unseen"], []]
    assert label_set_loss(gold, probs) == pytest.approx(float(F.binary_cross_entropy_with_logits(logits, targets)))
    examples = [TextExample(text=str(i), label=labels) for i, labels in enumerate(gold)]
    predictions = [([c for c in classes if p[c] >= 0.5], p) for p in probs]
    assert MULTI_LABEL.metrics(examples, predictions)["loss"] == pytest.approx(label_set_loss(gold, probs))
    assert "loss" not in MULTI_LABEL.metrics(examples, [(labels, None) for labels, _ in predictions])
    # the majority baseline's loss: each training label's add-one-smoothed share, for every example
    train = [TextExample(text="x", label=["a"]), TextExample(text="y", label=["a", "b"])]
    shares = {"a": 3 / 4, "b": 2 / 4}
    assert majority_set_baseline(train, examples)["loss"] == pytest.approx(label_set_loss(gold, [shares] * 3))
