"""The QA baseline (bertkit/tasks/qa.py `baseline`): the best of the first sentence, the SQuAD
paper's sliding window and abstaining. The first sentence alone scored 5 F1 on the newcomer walk's
definition questions, where the sliding window scored 18.75: a baseline that weak flatters the model."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from bertkit.commands.evaluate import model_line
from bertkit.commands.finetune import training_hints
from bertkit.commands.options import metrics_text
from bertkit.tasks import builtin_splits, get_task
from bertkit.tasks.formats import QAExample
from bertkit.tasks.metrics import squad_em_f1
from bertkit.tasks.qa import _WORD, baseline, chance, sliding_window_answer

CONTEXT = ("A person who plays an instrument: the pianist bowed to the hall. A stringed instrument played "
           "with a bow: she tuned her violin before the concert.")


def test_the_sliding_window_picks_the_word_beside_the_question_words():
    question = 'Which word is used in the sense "a stringed instrument played with a bow"?'
    assert sliding_window_answer(question, CONTEXT) == "hall"  # 5 question words beside it: 'the' and 4 after
    assert sliding_window_answer(question, CONTEXT[CONTEXT.index("A stringed"):]) == "she"  # 5 before it
    # "her" and "violin" both have tuned/before/the/concert beside them: the earlier wins
    assert sliding_window_answer("Who tuned it before the concert?", CONTEXT) == "her"
    assert sliding_window_answer("Why?", "") == ""  # no candidate
    assert sliding_window_answer("Which is it?", "it is") == ""  # every word a question word: none


def test_the_answer_is_as_long_as_the_median_training_answer():
    question = QAExample("x", "Who tuned it before the concert?", CONTEXT,
                         [{"text": "her violin", "answer_start": CONTEXT.index("her violin")}])
    train = [replace(question, id=str(i)) for i in range(3)]  # two-word answers
    assert baseline(train, [question])["exact"] == pytest.approx(100.0)  # "her violin": two words
    assert baseline(train, [question])["method"] == "sliding window"
    assert baseline([], [question])["f1"] == pytest.approx(200 / 3)  # "her" alone: F1 2/3


def test_the_method_is_chosen_on_training_questions_not_on_the_scored_ones():
    """Session 36: the best of the three was picked on the questions it was scored on (dev, test)."""
    lead = QAExample("1", "What is said?", "Tea is hot. Tea is hot.", [{"text": "Tea is hot.", "answer_start": 0}])
    beside = QAExample("x", "Who tuned it before the concert?", CONTEXT,
                       [{"text": "her", "answer_start": CONTEXT.index("her violin")}])
    train = [replace(lead, id=str(i)) for i in range(3)]  # the first sentence answers the training questions
    scored = baseline(train, [beside])
    assert scored["method"] == "first sentence" and scored["f1"] == 0.0  # though the sliding window gets 'her'
    assert baseline([], [beside])["method"] == "sliding window"  # no training questions: chosen on these


def test_the_first_sentence_still_counts_where_it_is_better():
    question = QAExample("1", "What is said?", "Tea is hot. Tea is hot.", [{"text": "Tea is hot.", "answer_start": 0}])
    assert baseline([], [question])["exact"] == pytest.approx(100.0)
    assert baseline([], [question])["method"] == "first sentence"


def test_finetune_warns_when_dev_has_unanswerable_questions_and_train_none(tmp_path):
    """A SQuAD v1 training file with a v2 dev file: the model cannot abstain (the task allows "no
    answer" only when training shows it), so every unanswerable dev question scores 0; say so."""
    import json
    import warnings

    from bertkit.recipes.finetune import build_recipe, load_task_data
    from bertkit.tasks import get_task

    def squad(path, impossible):
        qas = [{"id": "1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 15}]}]
        if impossible:
            qas.append({"id": "2", "question": "Who?", "answers": [], "is_impossible": True})
        path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
            {"context": "Alice lives in Paris.", "qas": qas}]}]}), encoding="utf-8")
        return str(path)

    train, dev = squad(tmp_path / "train.json", False), squad(tmp_path / "dev.json", True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = load_task_data(get_task("qa"), train, dev, build_recipe({}))
    assert not data.spec.allow_no_answer
    assert any("never learns to answer \"no answer\"" in str(w.message) for w in caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_task_data(get_task("qa"), dev, dev, build_recipe({}))
    assert not any("never learns" in str(w.message) for w in caught)


def test_the_sliding_window_takes_linear_time_on_a_long_context():
    import time

    context = " ".join(f"word{i % 997} filler" for i in range(100_000)) + " the violin tuned here"
    began = time.perf_counter()
    # every word of "word299 filler the violin" has "tuned here" within 5 words: the earliest wins
    assert sliding_window_answer("What was tuned here?", context) == "word299"
    assert time.perf_counter() - began < 5  # ~0.2 s vectorised; a Python loop per window took far longer


def test_evaluate_warns_when_a_model_that_cannot_abstain_meets_unanswerable_questions():
    import warnings

    from bertkit.tasks import DataConfig, TaskSpec, check_model_labels, get_task

    answered = QAExample("1", "Where?", "Alice lives in Paris.", [{"text": "Paris", "answer_start": 15}])
    unanswerable = QAExample("2", "Who?", "Alice lives in Paris.", [], True)
    for allow, examples, warned in ((False, [answered, unanswerable], True), (True, [answered, unanswerable], False),
                                    (False, [answered], False)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_model_labels(None, TaskSpec(get_task("qa"), DataConfig(), allow), examples, "dev.json")
        assert any("never answers \"no answer\"" in str(w.message) for w in caught) == warned


def test_chance_is_the_exact_expectation_of_a_random_span_as_long_as_the_typical_answer():
    """Walk W: wordnet-usage-qa's model at exact 13 stood beside the first sentence's exact 0 only."""
    tea = QAExample("1", "How is the tea?", "Tea is hot and sweet", [{"text": "hot", "answer_start": 7}])
    assert chance([tea], 1) == {"method": "a random 1-word span", "exact": pytest.approx(20.0),
                                "f1": pytest.approx(20.0)}  # 1 of 5 words
    # "Tea is", "is hot", "hot and", "and sweet": two halves of a match, F1 2/3 each
    assert chance([tea], 2)["exact"] == 0.0 and chance([tea], 2)["f1"] == pytest.approx(100 / 3)
    assert chance([tea], 9)["f1"] == pytest.approx(100 * 2 / 6)  # longer than the context: the whole of it
    abstain = QAExample("2", "Who?", "", [], True)
    assert chance([abstain], 1)["exact"] == 100.0  # no word to draw: "", right for a question without answer
    examples = builtin_splits("wordnet-usage-qa")["dev"][:60]
    for width in (1, 2):  # the mean of SQuAD's own scoring over every span
        scores = []
        for e in examples:
            spans = [m.span() for m in _WORD.finditer(e.context)]
            texts = [e.context[spans[i][0]:spans[i + width - 1][1]] for i in range(len(spans) - width + 1)]
            each = [squad_em_f1(t, [a["text"] for a in e.answers]) for t in texts]
            scores.append([sum(x[k] for x in each) / len(each) for k in (0, 1)])
        expected = chance(examples, width)
        assert expected["exact"] == pytest.approx(100 * sum(s[0] for s in scores) / len(scores))
        assert expected["f1"] == pytest.approx(100 * sum(s[1] for s in scores) / len(scores))
    rng = random.Random(0)  # and a sample of random words agrees with it
    drawn = [squad_em_f1(rng.choice(_WORD.findall(e.context)), [a["text"] for a in e.answers])[0]
             for e in examples for _ in range(200)]
    assert 100 * sum(drawn) / len(drawn) == pytest.approx(chance(examples, 1)["exact"], abs=1.5)


def test_the_report_stands_beside_chance_and_compares_with_the_strongest_row():
    first = {"method": "first sentence", "exact": 0.0, "f1": 8.85,
             "chance": {"method": "a random 1-word span", "exact": 3.4, "f1": 3.7}}
    assert baseline(builtin_splits("wordnet-usage-qa")["train"][:50], [])["chance"]["method"] == \
        "a random 1-word span"
    assert metrics_text(first) == ("method=first sentence, exact=0, f1=8.85, "
                                   "chance=(a random 1-word span: exact=3.4, f1=3.7)")

    def hints(metric, ours):
        return training_hints({"select_metric": metric, "best_dev": {"exact": ours, "f1": ours}, "best_step": 60,
                               "dev_history": [{"step": 30, "exact": ours, "f1": ours}, {"step": 60, "exact": ours,
                                                                                        "f1": ours}],
                               "stopped_early": True, "stopped_by": "patience", "dev_baseline": first,
                               "spec": {"task": "qa"}, "options": {"epochs": 6.0, "min_steps": 300},
                               "stretched_to_min_steps": True, "train_config": {"max_steps": 60}})
    (hint,) = hints("exact", 2.0)  # above the first sentence's exact 0, below chance's
    assert "not above chance (a random 1-word span) on dev (exact 2 against 3.4)" in hint
    (hint,) = hints("f1", 6.0)  # above chance's F1, below the first sentence's: that one
    assert "not above the baseline (first sentence) on dev (f1 6 against 8.85): check that each answer" in hint
    assert hints("exact", 13.0) == []
    line = model_line("dev.json", get_task("qa"), {"f1": 20.0, "exact": 13.0, "baselines": {"trivial": first}}, 500)
    assert line.endswith("baselines' f1: first sentence 8.85, chance (a random 1-word span) 3.7")
