"""The tagging baseline (bertkit/tasks/tagging.py `baseline`): each word's most frequent training
tag. A word seen as often under a tag as under O used to take whichever the file showed first, so
the same data in another order gave another baseline; a tie now goes to O."""

from __future__ import annotations

from bertkit.tasks.formats import TokenExample
from bertkit.tasks.tagging import baseline


def test_a_tie_goes_to_o_whatever_the_order_of_the_training_file():
    tagged = TokenExample(["Paris", "is", "big"], ["B-LOC", "O", "O"])
    plain = TokenExample(["paris", "hilton"], ["O", "O"])
    test = [TokenExample(["Paris", "is"], ["O", "O"])]
    assert baseline([tagged, plain], test) == baseline([plain, tagged], test)
    assert baseline([tagged, plain], test)["tag_accuracy"] == 1.0


def test_the_most_frequent_tag_wins_and_unseen_words_are_o():
    train = [TokenExample(["Paris"], ["B-LOC"])] * 2 + [TokenExample(["Paris"], ["O"])]
    scores = baseline(train, [TokenExample(["Paris", "Rome"], ["B-LOC", "O"])])
    assert scores["f1"] == 1.0 and scores["tag_accuracy"] == 1.0


def test_the_baseline_names_its_method_and_evaluate_shows_it_beside_trivial():
    from bertkit.commands.evaluate import model_line
    from bertkit.tasks import get_task

    scores = baseline([TokenExample(["Paris"], ["B-LOC"])], [TokenExample(["Paris"], ["B-LOC"])])
    assert scores["method"] == "each word's most frequent training tag"
    line = model_line("test.conll", get_task("token-classification"),
                      {"f1": 0.5, "baselines": {"trivial": scores}}, 1)
    assert line.endswith("baselines' f1: each word's most frequent training tag 1")
