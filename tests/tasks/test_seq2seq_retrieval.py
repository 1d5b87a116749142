"""seq2seq's third baseline predictor, retrieval: the target of the training example whose source
is nearest by TF-IDF cosine, chosen on training examples without retrieving the example itself or
its twins, and left out with one line saying so when scikit-learn is missing."""

from __future__ import annotations

import json
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.tasks import seq2seq
from bertkit.tasks.formats import TextExample

from .helpers import make_tiny_model

pytest.importorskip("sklearn")

TOPICS = {"football match goal striker": "team wins the cup", "stock market shares investors": "shares fall sharply",
          "election vote party minister": "party wins the vote", "film actor award director": "actor gets a prize"}


def topic_examples(n: int, offset: int = 0) -> list[TextExample]:
    """Sources that open with a number (so their lead is no headline) and carry their topic's words;
    a topic's examples share its headline: retrieval, not the lead or the most frequent target, gets it."""
    words, heads = list(TOPICS), list(TOPICS.values())
    return [TextExample(text=f"{offset + i} reported today: {words[i % 4]} report", label=heads[i % 4])
            for i in range(n)]


def test_retrieval_is_chosen_and_answers_the_nearest_sources_target():
    train = topic_examples(40)
    test = [TextExample(text="what investors on the stock market did", label="shares fall sharply"),
            TextExample(text="the minister lost the vote", label="party wins the vote")]
    result = seq2seq.baseline(train, test)
    assert result == {"method": seq2seq.RETRIEVAL, "rouge_l": 1.0, "exact_match": 1.0}
    retrieval = seq2seq.Retrieval.fit(train, "fallback")
    assert retrieval.predict(test) == ["shares fall sharply", "party wins the vote"]
    # a source that shares no word 1-2 gram with any training source: the most frequent target, not train[0]'s
    assert retrieval.predict([TextExample(text="zebra xylophone", label="x")]) == ["fallback"]


def test_on_training_examples_an_example_retrieves_neither_itself_nor_its_twins():
    # each target is unique: retrieving itself would score 1.0 on training, any other example 0
    train = [TextExample(text=f"w{i} alpha beta gamma delta", label=f"w{i} zzz{i}") for i in range(30)]
    retrieval = seq2seq.Retrieval.fit(train, "fallback")
    assert retrieval.predict(train[:3]) == [e.label for e in train[:3]]  # at test time its own source is nearest
    left_out = retrieval.left_out(range(30))
    assert all(p != e.label and p.startswith("w") for p, e in zip(left_out, train))
    # so the choice keeps the lead (ROUGE-L 0.5 on training), which the self-retrieving 1.0 would have beaten
    assert seq2seq.baseline(train, train[:3])["method"] == "the source's first 2 words"
    # twins: the same source up to spacing is left out with the example; the next nearest is retrieved
    texts = ["red apple pie recipe", "red  apple pie\nrecipe", "red apple pie tart", "blue sky today"]
    twins = [TextExample(text=text, label=f"t{i}") for i, text in enumerate(texts)]
    retrieval = seq2seq.Retrieval.fit(twins, "t3")
    assert retrieval.left_out([0, 1, 2]) == ["t2", "t2", "t0"]
    assert retrieval.left_out([3]) == ["t3"]  # shares nothing with the others: the fallback


def test_retrieval_blocks_give_the_same_answers(monkeypatch):
    train, test = topic_examples(40), topic_examples(9, offset=100)
    whole = seq2seq.Retrieval.fit(train, "fallback")
    expected = (whole.predict(test), whole.left_out(range(0, 40, 3)))
    monkeypatch.setattr(seq2seq, "RETRIEVAL_BLOCK", 50)  # one query per block (40 training sources)
    assert (whole.predict(test), whole.left_out(range(0, 40, 3))) == expected


def test_without_scikit_learn_the_two_other_predictors_and_a_note(monkeypatch):
    def unavailable():
        raise AssertionError("no vectorizer without scikit-learn")

    monkeypatch.setattr(seq2seq, "sklearn_available", lambda: False)
    monkeypatch.setattr(seq2seq, "tfidf_vectorizer", unavailable)
    result = seq2seq.baseline(topic_examples(40), topic_examples(8, offset=100))
    assert result["method"] in ("the most frequent target", "the source's first 4 words")
    assert result["note"] == seq2seq.RETRIEVAL_HINT and "pip install 'bertkit[baseline]'" in result["note"]
    # with it, the same data chooses retrieval and carries no note
    monkeypatch.undo()
    assert "note" not in seq2seq.baseline(topic_examples(40), topic_examples(8, offset=100))


def test_the_reports_name_retrieval_or_say_why_it_was_not_tried(tmp_path, capsys, monkeypatch):
    def write(name, examples):
        (tmp_path / name).write_text("".join(json.dumps({"source": e.text, "target": e.label}) + "\n"
                                             for e in examples), encoding="utf-8")
        return str(tmp_path / name)

    train, dev = write("train.jsonl", topic_examples(40)), write("dev.jsonl", topic_examples(8, offset=100))
    tiny = make_tiny_model(tmp_path / "tiny", [e.text + " " + e.label for e in topic_examples(12)])
    for available in (True, False):
        monkeypatch.setattr(seq2seq, "sklearn_available", lambda: available)
        out = str(tmp_path / f"run-{available}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(["finetune", "--task", "seq2seq", "--model", tiny, "--train", train, "--dev", dev, "--out", out,
                         "--no-progress", "--set", "train.max_steps=1", "data.max_length=16",
                         "data.max_target_length=4"]) == 0
            printed = capsys.readouterr().out
            assert main(["evaluate", "--model", out, "--data", dev]) == 0
        model_line = capsys.readouterr().out.strip().splitlines()[-2]
        if available:
            assert f"baseline ({seq2seq.RETRIEVAL}): rouge_l=1, exact_match=1" in printed
            assert model_line.endswith(f"baselines' rouge_l: {seq2seq.RETRIEVAL} 1")
        else:  # the note in finetune's line and in evaluate's JSON, as the TF-IDF baseline's install hint
            assert f"baseline (the most frequent target): rouge_l=0.375, exact_match=0.25, " \
                   f"note={seq2seq.RETRIEVAL_HINT}" in printed
            assert json.load(open(f"{out}/finetune_summary.json"))["dev_baseline"]["note"] == seq2seq.RETRIEVAL_HINT
