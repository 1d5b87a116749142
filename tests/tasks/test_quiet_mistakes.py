"""Mistakes that used to pass without a word, or with a message that did not say what to do
(found by a newcomer walking the README with their own data): a pair model given single texts,
a pair file read as single texts, words that predict split differently from the user, a file of
another task's format, a QA model that only abstains, a run whose best score came last."""

from __future__ import annotations

import json
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.commands.finetune import baseline_hint, training_hints
from bertkit.errors import DataError
from bertkit.tasks import DataConfig, builtin_splits, get_task, load_examples
from bertkit.tasks.formats import QAExample, TokenExample, check_labels_known, read_text_dataset
from bertkit.tasks.inference import read_prediction_input
from bertkit.tasks.tagging import (TagPrediction, baseline, entities_with_spans, per_type_scores, plain_tag_reading,
                                   tag_metrics)

from .helpers import make_tiny_model


def test_a_pair_model_refuses_single_texts_in_a_txt_file(tmp_path):
    path = tmp_path / "new.txt"
    path.write_text("a gloss\tan example\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"reads text pairs \(columns 'text' and 'example'\); a .txt file holds one"):
        read_prediction_input("classification", str(path), DataConfig(pair_column="example"))
    assert len(read_prediction_input("classification", str(path), DataConfig()).examples) == 1


def test_a_second_text_column_left_unread_is_named_with_the_setting_that_reads_it(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text('text,example,id,label\n"a gloss of many words","he sat on the bank",7,match\n',
                    encoding="utf-8")
    with pytest.warns(UserWarning, match=r"column 'example' holds text but is not read; .*data.pair_column=example"):
        read_text_dataset(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read as a pair: nothing to say (and "id" holds no text)
        assert read_text_dataset(str(path), pair_column="example")[0].text_pair == "he sat on the bank"
    path.write_text("sentence1,sentence2,label\na b c,d e f,x\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"data.text_column=NAME \(and a pair's second text: data.pair_column=NAME\)"):
        read_text_dataset(str(path))


def test_a_text_pair_column_is_named_even_when_its_first_value_is_short(tmp_path):
    """Walk AA: a Word-in-Context file whose first text_pair was "honest reporting" (two words) trained on
    its first sentences alone without a word; `text_pair` is the usual name of a pair's second text."""
    path = tmp_path / "wic.csv"
    path.write_text("text,text_pair,label\ngave honest answers,honest reporting,same\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"column 'text_pair' holds text but is not read; .*pair_column=text_pair"):
        read_text_dataset(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_text_dataset(str(path), pair_column="text_pair")[0].text_pair == "honest reporting"


def test_finetune_reads_a_column_named_text_pair_as_the_second_text_and_says_so(tmp_path, capsys):
    """Walk AA: `text,text_pair,label` fine-tuned by the README's line trained on the first texts alone (dev
    accuracy 0.497 on balanced pairs), the warning aside. A column named text_pair is now read as the pair's
    second text, said on stdout and recorded, so that predict and evaluate read pairs too."""
    rows = [("the bank of the river", "he sat on the bank", "same"), ("a bank account", "the river bank", "different"),
            ("run a mile", "run the company", "different"), ("a long run", "run fast", "same")] * 4
    for name in ("train", "dev"):
        (tmp_path / f"{name}.csv").write_text("text,text_pair,label\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows),
                                              encoding="utf-8")
    model = make_tiny_model(tmp_path / "tiny", [f"{a} {b}" for a, b, _ in rows])
    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", model, "--train", str(tmp_path / "train.csv"),
                     "--dev", str(tmp_path / "dev.csv"), "--out", str(out), "--no-progress", "--no-baseline",
                     "--set", "train.max_steps=1"]) == 0
    assert f"{tmp_path / 'train.csv'}: column 'text_pair' is read as each row's second text" in capsys.readouterr().out
    assert json.load(open(out / "finetune_summary.json"))["spec"]["data"]["pair_column"] == "text_pair"
    (tmp_path / "new.txt").write_text("the bank of the river\n", encoding="utf-8")
    assert main(["predict", "--model", str(out), "--input", str(tmp_path / "new.txt"), "--output",
                 str(tmp_path / "p.jsonl")]) == 2  # the model reads pairs: single texts are refused
    assert "reads text pairs (columns 'text' and 'text_pair')" in capsys.readouterr().err


def test_predict_takes_conll_words_without_tags_as_the_user_split_them(tmp_path):
    path = tmp_path / "words.conll"
    path.write_text("Gordon\nBrown\npaid\n£5m\n\nHi\nthere\n", encoding="utf-8")
    examples = read_prediction_input("token-classification", str(path), DataConfig()).examples
    assert [e.tokens for e in examples] == [["Gordon", "Brown", "paid", "£5m"], ["Hi", "there"]]
    with pytest.raises(DataError, match="need at least 2"):  # training data still needs its tags
        load_examples("token-classification", str(path), "train", DataConfig())


def test_a_tag_without_a_prefix_among_prefixed_ones_is_refused_before_training_and_bioes_tags_are_scored(
        tmp_path, tiny_encoder, capsys):
    """Walk AC: a file mixing 'PER' with B-/I- tags trained, then stopped at its first evaluation ("convert
    the tags to the scheme you pass", a scheme no option sets); now refused when read. BIOES tags are scored."""
    from tests.cli_checks import assert_refused

    train, dev = tmp_path / "train.conll", tmp_path / "dev.conll"
    train.write_text("Alice B-PER\nlives O\n\nBob PER\nruns O\n", encoding="utf-8")
    dev.write_text("Alice B-PER\nlives O\n", encoding="utf-8")
    assert_refused(["finetune", "--task", "token-classification", "--model", tiny_encoder, "--train", train,
                    "--dev", dev, "--out", tmp_path / "run"], capsys, tmp_path,
                   f"{train}: line 4 has the tag 'PER' without a B-/I- prefix, but other tags have one ('B-PER')",
                   "IOB1 and BIOES are read too", "write it B-PER or I-PER")
    train.write_text("New B-LOC\nYork E-LOC\nis O\n\nParis S-LOC\n", encoding="utf-8")
    examples = load_examples("token-classification", str(train), "train", DataConfig())  # read, not refused
    assert tag_metrics([e.tags for e in examples], [e.tags for e in examples])["f1"] == 1.0
    assert tag_metrics([["B-LOC", "E-LOC", "O"]], [["S-LOC", "S-LOC", "O"]])["f1"] == 0.0  # two one-word LOCs


def test_plain_tags_are_read_as_io_entities_with_o_and_as_per_word_labels_without(tmp_path):
    """Walk AC refused IO ('PER' ... 'O') and part-of-speech ('NN') files. A file of plain tags with O reads
    as IO entities (a run of one tag is one entity); without O as per-word labels, each word its own unit,
    so F1 is word accuracy and two NNPs in a row are two units. Both are said when the file is read."""
    io, pos = tmp_path / "io.conll", tmp_path / "pos.conll"
    io.write_text("New LOC\nYork LOC\nis O\nbig O\n", encoding="utf-8")
    pos.write_text("New NNP\nYork NNP\nis VBZ\nbig JJ\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="read as IO entity tags"):
        [io_example] = load_examples("token-classification", str(io), "train", DataConfig())
    with pytest.warns(UserWarning, match="read as per-word labels"):
        [pos_example] = load_examples("token-classification", str(pos), "train", DataConfig())
    assert plain_tag_reading(io_example.tags) == "io" and plain_tag_reading(pos_example.tags) == "word"
    assert plain_tag_reading(["B-LOC", "O"]) is None
    assert tag_metrics([io_example.tags], [["LOC", "O", "O", "O"]])["f1"] == 0.0  # "New" alone is not "New York"
    word = tag_metrics([pos_example.tags], [["NNP", "VBZ", "VBZ", "JJ"]])
    assert word["f1"] == word["tag_accuracy"] == 0.75  # 3 of 4 one-word units right
    spans = [(0, 3), (4, 8), (9, 11), (12, 15)]
    assert [e["text"] for e in entities_with_spans(io_example.tags, spans, "New York is big", "io")] == ["New York"]
    assert [e["text"] for e in entities_with_spans(pos_example.tags, spans, "New York is big", "word")] == [
        "New", "York", "is", "big"]
    assert per_type_scores([pos_example], [TagPrediction(pos_example.tags)])["NNP"]["support"] == 2
    # the word lookup's unseen word gets the most frequent tag (NNP here), not O, which no word has
    unseen = TokenExample(["Old", "Paris"], ["NNP", "NNP"])
    assert baseline([pos_example], [unseen])["tag_accuracy"] == 1.0


def test_a_dev_file_in_iob2_beside_a_plain_training_file_is_told_to_write_both_one_way():
    """Walk AC's IO training file with its IOB2 dev file gave "4 label(s) never seen in training ...; add
    training examples for them", which no training example can fix."""
    with pytest.raises(DataError, match=r"the files write tags two ways \(training has 'O', 'XREF', this split "
                                        r"'B-XREF'\).*write both files in IOB2"):
        check_labels_known(["O", "B-XREF", "I-XREF"], {"O": 0, "XREF": 1}, "dev")
    with pytest.raises(DataError, match="write both files in IOB2"):  # the reverse
        check_labels_known(["O", "XREF"], {"O": 0, "B-XREF": 1, "I-XREF": 2}, "dev")
    with pytest.raises(DataError, match="add training examples for them"):  # a class training lacks
        check_labels_known(["O", "I-LOC"], {"O": 0, "B-LOC": 1}, "dev")


def test_a_part_of_speech_file_fine_tunes_and_predicts_a_tag_per_word(tmp_path, tiny_encoder, capsys):
    sentences = ["The/DT dog/NN runs/VBZ", "A/DT cat/NN sleeps/VBZ", "The/DT bird/NN sings/VBZ"]
    conll = "\n\n".join("\n".join(pair.replace("/", " ") for pair in s.split()) for s in sentences) + "\n"
    (tmp_path / "train.conll").write_text(conll, encoding="utf-8")
    (tmp_path / "dev.conll").write_text(conll, encoding="utf-8")
    out = tmp_path / "run"
    with pytest.warns(UserWarning, match="per-word labels"):
        assert main(["finetune", "--task", "token-classification", "--model", tiny_encoder, "--train",
                     str(tmp_path / "train.conll"), "--dev", str(tmp_path / "dev.conll"), "--out", str(out),
                     "--no-progress", "--set", "train.max_steps=2"]) == 0
    best = json.loads((out / "finetune_summary.json").read_text())["best_dev"]
    assert best["f1"] == pytest.approx(best["tag_accuracy"])  # no word is O: each word one unit
    (tmp_path / "in.txt").write_text("The cat runs\n", encoding="utf-8")
    assert main(["predict", "--model", str(out), "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "p.jsonl")]) == 0
    [row] = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(row["tags"]) == 3 and set(row["tags"]) <= {"DT", "NN", "VBZ"}
    assert [e["text"] for e in row["entities"]] == ["The", "cat", "runs"]  # a unit per word, whatever the tags


def test_embed_reads_a_tables_text_column_and_a_pair_file_names_its_task(tmp_path, tiny_encoder, capsys):
    import numpy as np

    from bertkit.commands.cli import main

    path = tmp_path / "pairs.csv"
    path.write_text("text,positive\n\"the striker scored\",a goal\n\"shares fell\",the market dropped\n",
                    encoding="utf-8")
    assert main(["embed", "--model", tiny_encoder, "--input", str(path), "--output", str(tmp_path / "v.npy")]) == 0
    assert np.load(tmp_path / "v.npy").shape[0] == 2  # the rows' texts, not the header and whole lines
    with pytest.raises(DataError, match="a text and its positive .* is the embedding format: --task embedding"):
        load_examples("classification", str(path), "train", DataConfig())



@pytest.mark.parametrize("command", ["embed", "nearest"])
def test_embed_and_nearest_name_their_own_column_option(command, tmp_path, tiny_encoder, capsys):
    """They said "--set data.text_column=NAME", an option neither command has."""
    from tests.cli_checks import assert_refused

    path = tmp_path / "texts.csv"
    path.write_text("body,id\nthe striker scored,1\n", encoding="utf-8")
    where = ["--input", path, "--output", tmp_path / "v.npy"] if command == "embed" else ["--corpus", path, "goal"]
    assert_refused([command, "--model", tiny_encoder, *where], capsys, tmp_path,
                   "no column 'text' (columns: body, id); name the column that holds the texts with --text-column NAME")


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    from .helpers import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-encoder"), ["the striker scored a goal", "shares fell"] * 5)


@pytest.mark.parametrize("task", ["classification", "qa", "embedding"])
def test_a_file_of_another_tasks_format_names_that_task(tmp_path, task):
    path = tmp_path / "train.conll"
    path.write_text("Alice B-PER\nlives O\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"\.conll is the token-classification format: did you mean --task "
                                        "token-classification\\?"):
        load_examples(task, str(path), "train", DataConfig())


def test_the_qa_baseline_abstains_where_abstaining_scores_better():
    answered = QAExample("1", "Where?", "Alice lives in Paris. She likes it.", [{"text": "Paris", "answer_start": 15}])
    unanswerable = [QAExample(str(i), "Who?", "Nobody is here. Really.", [], True) for i in range(2, 5)]
    baseline = get_task("qa").baseline
    assert baseline([], [answered, *unanswerable])["exact"] == pytest.approx(75.0)  # "no answer" on all four
    squad1 = builtin_splits("wordnet-usage-qa")["dev"][:50]
    assert baseline(squad1, squad1) == baseline([], squad1)  # no unanswerable question: the first sentence


def summary(history, *, stopped_early=False, trivial=0.5, task="classification", metric="accuracy"):
    best = max(history, key=lambda row: row[metric])
    return {"select_metric": metric, "best_dev": best, "best_step": best["step"], "dev_history": history,
            "stopped_early": stopped_early, "dev_baseline": {metric: trivial}, "spec": {"task": task},
            "options": {"epochs": 6.0}, "train_config": {"max_steps": 60}}


def test_the_report_says_when_the_best_score_came_last_or_is_not_above_the_trivial_one():
    rising = [{"step": 20, "accuracy": 0.6}, {"step": 40, "accuracy": 0.7}, {"step": 60, "accuracy": 0.8}]
    (hint,) = training_hints(summary(rising))
    assert "came at the last evaluation" in hint and "train.epochs, now 6" in hint
    assert training_hints(summary(rising, stopped_early=True)) == []  # a budget stop is said elsewhere
    once = [{"step": 0, "accuracy": 0.55}, {"step": 19, "accuracy": 0.6}]  # 1 epoch: one evaluation after step 0
    (hint,) = training_hints(summary(once))
    assert "came at its end, the run's one evaluation after step 0, so it may still be improving" in hint
    (hint,) = training_hints(summary(once[1:]))  # no step 0 (train.eval_at_start=false)
    assert "came at the run's one evaluation, its end, so it may still be improving" in hint
    peaked = [{"step": 20, "accuracy": 0.45}, {"step": 40, "accuracy": 0.4}]
    (hint,) = training_hints(summary(peaked))
    assert "not above the trivial baseline on dev (accuracy 0.45 against 0.5): check the labels" in hint
    assert "--set train.class_weights=balanced train.select_metric=macro_f1" in hint  # the imbalance settings
    weighted = summary(peaked)
    weighted["options"]["class_weights"] = "balanced"
    assert "class_weights" not in training_hints(weighted)[0]  # already on: not suggested again
    tagging = summary([{"step": 20, "f1": 0.0}], metric="f1", task="token-classification", trivial=0.0093)
    (hint,) = [hint for hint in training_hints(tagging) if "trivial" in hint]  # walk W: entity f1, no macro_f1
    assert hint.endswith("also --set train.class_weights=balanced")  # select_metric=macro_f1 would be refused
    collapsed = summary([{"step": 20, "pearson": 0.66, "mse": 184.5}], metric="pearson", task="regression")
    collapsed["dev_baseline"] = {"mse": 28.03}  # the training mean: no correlation, only mse
    assert any("not above the trivial baseline on dev (mse 184.5 against 28.03)" in hint
               for hint in training_hints(collapsed))
    # WordNet glosses -> ln sense count, seed 1: a correlation that orders 250 dev texts, at an mse above the
    # mean's: off in scale, kept on mse instead (test mse 1.113 against 1.294), not "check the labels"
    ordered = summary([{"step": 252, "pearson": 0.286, "mse": 1.339}], metric="pearson", task="regression")
    ordered.update(dev_baseline={"mse": 1.289}, dev_examples=250)
    hints = [hint for hint in training_hints(ordered) if "mse" in hint]
    assert hints == ["dev pearson 0.286 says the model orders the texts, but its dev mse 1.339 is not below the "
                     "training mean's 1.289: its values are off in scale; to keep the checkpoint with the least "
                     "error, --set train.select_metric=mse"]
    unordered = {**ordered, "best_dev": {"step": 252, "pearson": 0.1, "mse": 1.339}}  # below 2 / sqrt(250) = 0.126
    assert any("not above the trivial baseline on dev (mse 1.339 against 1.289)" in h for h in training_hints(unordered))
    spans = summary([{"step": 13, "f1": 23.13}], metric="f1", task="qa", trivial=25.69)  # walk W: 200 wordnet-qa
    (hint,) = [hint for hint in training_hints(spans) if "trivial" in hint]  # questions, 39 steps: no labels
    assert "(f1 23.13 against 25.69): check that each answer is the span that answers its question" in hint
    lead = summary([{"step": 20, "rouge_l": 0.09}], metric="rouge_l", task="seq2seq", trivial=0.16)
    (hint,) = [hint for hint in training_hints(lead) if "trivial" in hint]  # a seq2seq run has targets, not labels
    assert "(rouge_l 0.09 against 0.16): check that each target (data.target_column) is the text to generate" in hint
    headlines = summary([{"step": 63, "accuracy": 0.77}], task="multiple-choice", trivial=0.953)  # walk AD
    headlines["dev_baseline"]["method"] = "TF-IDF cosine of the context and each choice"  # the baseline it chose
    (hint,) = [hint for hint in training_hints(headlines) if "not above" in hint]  # named by its method, not trivial
    assert ("not above the baseline (TF-IDF cosine of the context and each choice) on dev (accuracy 0.77 against "
            "0.953): check that each label is the index (from 0) of its line's right choice") in hint
    behind_bm25 = {**summary(peaked, trivial=0.1), "reference_baseline": {"method": "BM25", "accuracy": 0.6}}
    (hint,) = training_hints(behind_bm25)
    assert hint.startswith("BM25 is ahead of the model on dev (accuracy 0.6 against 0.45)")


def test_a_run_the_clock_stopped_while_improving_is_told_to_take_more_time():
    """walk P #3: a search trial cut by its time budget was marked stopped early, and the "still
    improving" hint, meant to be silent after a patience stop, was silent after the clock's too."""
    rising = [{"step": 20, "accuracy": 0.6}, {"step": 40, "accuracy": 0.7}]
    (hint,) = training_hints({**summary(rising, stopped_early=True), "stopped_by": "train.max_minutes"})
    assert hint.endswith("so it may still be improving: try more time (train.max_minutes; the run was stopped by "
                         "the clock)")
    searched = {**summary(rising, stopped_early=True), "stopped_by": "train.max_minutes", "search": {"trials": []}}
    assert "(search.max_minutes;" in training_hints(searched)[0]
    assert training_hints({**summary(rising, stopped_early=True), "stopped_by": "patience"}) == []


def test_small_classes_missed_get_the_imbalance_settings():
    """walk P #1: 26 supersenses, dev accuracy 0.786 and macro-F1 0.519, and nothing said; the
    imbalance settings then gave 0.818 / 0.700."""
    missed = [{"step": 20, "accuracy": 0.786, "macro_f1": 0.519}, {"step": 40, "accuracy": 0.7, "macro_f1": 0.5}]
    (hint,) = training_hints(summary(missed, trivial=0.138))
    assert hint == ("dev macro_f1 0.519 is far below accuracy 0.786: the large classes are right and small ones "
                    "missed (bertkit evaluate --per-class names them); try --set train.class_weights=balanced "
                    "train.select_metric=macro_f1 (docs/finetune.md, \"Imbalanced classes\")")
    weighted = summary(missed, trivial=0.138)
    weighted["options"]["class_weights"] = "balanced"
    assert training_hints(weighted) == []  # already on
    close = [{"step": 20, "accuracy": 0.786, "macro_f1": 0.7}, {"step": 40, "accuracy": 0.7, "macro_f1": 0.6}]
    assert training_hints(summary(close, trivial=0.138)) == []
    by_f1 = summary([{"step": 20, "accuracy": 0.786, "macro_f1": 0.519}, {"step": 40, "accuracy": 0.7, "macro_f1": 0.5}],
                    trivial=0.01, metric="macro_f1")
    assert training_hints(by_f1)[0].endswith("try --set train.class_weights=balanced (docs/finetune.md, "
                                             "\"Imbalanced classes\")")
    searched = {**summary(missed, trivial=0.138), "search": {"trials": [{"trial": 0, "epochs": 6.0}]}}
    assert "try --set search.class_weights=[none,balanced] train.select_metric=macro_f1" in \
        " ".join(training_hints(searched))  # a search tries both weightings
    searched["search"]["trials"][0]["class_weights"] = "none"
    assert "class_weights" not in " ".join(training_hints(searched))  # tried, and dev chose none


def test_under_search_the_longer_run_hint_names_search_epochs():
    """walk N #10: a search sets each trial's train.epochs from search.epochs, so the hint named a
    setting that would change nothing."""
    rising = [{"step": 4, "accuracy": 0.6}, {"step": 8, "accuracy": 0.7}]
    searched = {**summary(rising), "search": {"trials": [{"trial": 0, "epochs": 1.0}, {"trial": 1, "epochs": 1.0},
                                                         {"trial": 2, "epochs": 1.0, "status": "not run (budget)"}]}}
    (hint,) = training_hints(searched)
    assert hint.endswith("so it may still be improving: try longer trials (search.epochs, now 1)")
    assert "train." not in hint
    halving = {**searched, "search": {"trials": [{"epochs": 1 / 3}, {"epochs": 1.0}, {"epochs": 3.0}]}}
    assert "(search.epochs, now 3)" in training_hints(halving)[0]  # the last rung's, the most


def test_the_report_says_what_ended_the_run(capsys):
    from bertkit.commands.finetune import report

    base = {**summary([{"step": 10, "accuracy": 0.9}, {"step": 20, "accuracy": 0.8}]), "steps": 20,
            "epochs_run": 2.0, "wall_time_s": 1.0, "tfidf_baseline": None}
    for stopped_by, said in (("patience", "stopped early: no better dev score in train.patience evaluations"),
                             ("train.max_minutes", "stopped by the time budget, train.max_minutes"),
                             (None, "all it planned")):
        report({**base, "stopped_by": stopped_by, "stopped_early": stopped_by is not None}, "out")
        assert said in capsys.readouterr().out


def test_a_run_whose_patience_runs_out_at_its_last_step_trained_as_many_as_asked(tmp_path, tiny_encoder, capsys):
    """It said "stopped early" though it trained every step asked: patience ran out at the end."""
    rows = "text,label\nthe striker scored a goal,sport\nshares fell,business\nthe goal,sport\nshares,business\n"
    (tmp_path / "t.csv").write_text(rows, encoding="utf-8")
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a tiny vocabulary's notes)
        assert main(["finetune", "--task", "classification", "--model", tiny_encoder, "--train", str(tmp_path / "t.csv"),
                     "--dev", str(tmp_path / "t.csv"), "--out", str(out), "--no-progress", "--set", "train.max_steps=2",
                     "train.eval_every=1", "train.patience=1", "train.lr=1e-30", "data.max_length=16"]) == 0
    summary = json.loads((out / "finetune_summary.json").read_text())
    assert [row["step"] for row in summary["dev_history"]] == [1, 2]  # step 2 no better: patience 1 ran out
    assert summary["stopped_by"] is None and not summary["stopped_early"]
    assert "(2.00 epochs, all it planned;" in capsys.readouterr().out


def test_a_training_label_missing_from_dev_is_warned_about():
    from bertkit.recipes.finetune import prepare_labels
    from bertkit.tasks import get_task
    from bertkit.tasks.formats import TextExample

    train = [TextExample("a", label="de"), TextExample("b", label="fr"), TextExample("c", label="ru")]
    dev = [TextExample("d", label="de"), TextExample("e", label="fr")]
    with pytest.warns(UserWarning, match=r"the dev split has no example of 1 training label\(s\) \('ru'\)"):
        assert prepare_labels(get_task("classification"), "train.csv", train, dev) == ["de", "fr", "ru"]


def test_dev_texts_seen_in_training_and_texts_with_two_labels_are_warned_about(recwarn):
    from bertkit.recipes.finetune import warn_about_shared_texts
    from bertkit.tasks.formats import TextExample

    train = [TextExample("shares fell", label="business"), TextExample("a late goal", label="sport"),
             TextExample("a late goal ", label="business")]
    dev = [TextExample("shares fell", label="business"), TextExample("rain later", label="weather")]
    with pytest.warns(UserWarning) as seen:
        warn_about_shared_texts(train, dev)
    messages = [str(w.message) for w in seen]
    assert any(m.startswith("1 of the dev split's 2 texts are also training texts") for m in messages)
    assert any(m.startswith("1 training text(s) are given different labels (e.g. 'a late goal')") for m in messages)
    recwarn.clear()
    warn_about_shared_texts(train[:2], dev[1:])
    assert not recwarn.list


def test_shared_pairs_are_counted_as_pairs(recwarn):
    """A pair task's overlap said "2 of the dev split's 2 texts are also training texts" for 2 pairs (4 texts)."""
    from bertkit.recipes.finetune import warn_about_shared_texts
    from bertkit.tasks.baseline import warn_if_trained_on
    from bertkit.tasks.formats import TextExample

    pairs = [TextExample("a cat", "a feline", 4.0), TextExample("a car", "the sea", 0.5)]
    with pytest.warns(UserWarning) as seen:
        warn_about_shared_texts(pairs + [TextExample("a car", "the sea", 1.0)], pairs)
    messages = [str(w.message) for w in seen]
    assert any(m.startswith("2 of the dev split's 2 pairs are also training pairs") and "keep each pair on one side"
               in m for m in messages), messages
    assert any(m.startswith("1 training pair(s) are given different labels") for m in messages), messages
    with pytest.warns(UserWarning, match="2 of the 2 evaluated pairs are training pairs of this model"):
        warn_if_trained_on(pairs, pairs)


def test_a_vocabulary_that_misses_the_text_is_warned_about(minilm_dir, recwarn):
    from bertkit.recipes.finetune import warn_about_unknown_tokens
    from bertkit.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    chinese = [{"input_ids": tokenizer("系统管理员 配置 文件 😀 🚀")["input_ids"]}] * 3
    with pytest.warns(UserWarning, match=r"% of the training tokens are \[UNK\]: .*vocabulary does not cover"):
        warn_about_unknown_tokens(chinese, tokenizer, minilm_dir)
    recwarn.clear()
    warn_about_unknown_tokens([{"input_ids": tokenizer("shares fell on monday")["input_ids"]}], tokenizer, minilm_dir)
    assert not recwarn.list


def test_texts_that_are_all_unknown_tokens_are_counted():
    from bertkit.tokenizer.coverage import count_unknown

    counts = count_unknown([[101, 100, 100, 102], [101, 7, 100, 102], [101, 102], [[101, 100, 102], [5]]], 100,
                           special_ids=[101, 102])
    assert (counts.tokens, counts.unknown, counts.all_unknown) == (14, 4, [0, 3])  # specials alone: not unknown


@pytest.mark.parametrize("command", ["embed", "nearest"])
def test_embed_and_nearest_warn_about_texts_that_are_all_unknown_tokens(command, minilm_dir, tmp_path, capsys):
    """walk M #13: emoji-only posts were each [CLS] [UNK] [SEP] to MiniLM, cosine 1.000 to each other, silently."""
    corpus = tmp_path / "near.txt"
    corpus.write_text("\U0001F60D\U0001F60D\U0001F60D\n\U0001F525\U0001F525\n"
                      "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466\n\n"
                      "Die B\u00f6rse f\u00e4llt stark.\nThe stock market fell sharply.\n", encoding="utf-8")
    def argv(query):
        return (["embed", "--model", minilm_dir, "--input", str(corpus), "--output", str(tmp_path / "v.npy")]
                if command == "embed" else ["nearest", "--model", minilm_dir, "--corpus", str(corpus), query])

    with pytest.warns(UserWarning) as caught:
        assert main(argv("\U0001F389\U0001F389")) == 0
    said = [str(w.message) for w in caught if "[UNK]" in str(w.message)]
    texts = f"5 texts of {corpus}" if command == "embed" else f"6 texts ({corpus} and the queries)"
    assert len(said) == 1 and said[0].startswith(
        f"{3 if command == 'embed' else 4} of the {texts} are nothing but [UNK] tokens (e.g. "
        "'\U0001F60D\U0001F60D\U0001F60D'): the model cannot tell such texts apart"), said
    corpus.write_text("shares fell on monday\nthe striker scored\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # texts the vocabulary reads: nothing to say
        assert main(argv("goal")) == 0


def test_a_patience_stop_while_the_dev_loss_still_fell_says_the_model_may_be_undertrained():
    """100 BBC articles (session 29): accuracy 0.39, 0.30, 0.39 stopped the run at step 21 while its
    dev loss fell 1.586, 1.540, 1.464; without patience and with 20 epochs the run reached 0.95."""
    wobbling = [{"step": 7, "accuracy": 0.3946, "loss": 1.586}, {"step": 14, "accuracy": 0.3004, "loss": 1.54},
                {"step": 21, "accuracy": 0.3901, "loss": 1.464}]
    hints = training_hints(summary(wobbling, stopped_early=True, trivial=0.23))
    assert hints == ["train.patience stopped the run while the dev loss was still falling (1.586 to 1.464 over 3 "
                     "evaluations, lowest at the last) and dev accuracy wobbled: the model may be undertrained; try "
                     "--set train.patience=0 (the best dev score is still kept) and a longer run (train.epochs, now 6; "
                     "or train.max_steps, now 60)"]
    overfitting = [{**row, "loss": loss} for row, loss in zip(wobbling, (1.5, 1.4, 1.45))]
    assert training_hints(summary(overfitting, stopped_early=True, trivial=0.23)) == []  # the loss turned
    assert training_hints(summary(wobbling, trivial=0.23)) == []  # not a patience stop: every step ran
    searched = {**summary(wobbling, stopped_early=True, trivial=0.23), "search": {"trials": [{"epochs": 6.0}]}}
    assert "--set search.patience=0" in training_hints(searched)[0]
    near_prior = summary(wobbling, stopped_early=True, trivial=0.23)
    near_prior["dev_baseline"]["loss"] = 1.62  # the trivial loss: 1.464 is still near it
    assert len(training_hints(near_prior)) == 1


def test_a_learned_model_whose_loss_still_fell_gets_no_undertrained_hint():
    """100 BBC articles trained 300 steps (session 30): patience stopped it at step 200 as the loss
    fell to 0.200 (trivial 1.62) at dev accuracy 0.946; train.patience=0 gave the same model."""
    learned = [{"step": 50, "accuracy": 0.9193, "loss": 0.8714}, {"step": 100, "accuracy": 0.9462, "loss": 0.2804},
               {"step": 150, "accuracy": 0.9417, "loss": 0.2128}, {"step": 200, "accuracy": 0.9417, "loss": 0.2004}]
    stopped = summary(learned, stopped_early=True, trivial=0.23)
    stopped["dev_baseline"]["loss"] = 1.62
    assert training_hints(stopped) == []


def test_a_tie_won_at_the_end_or_a_perfect_dev_score_gets_no_advice_to_train_longer():
    """90 articles in 3 topics (session 30): dev accuracy 1 on 9 texts from step 50 of 300, the last
    evaluation kept for its lower loss, TF-IDF also 1: neither a longer run nor a lever can beat it."""
    perfect = [{"step": 50, "accuracy": 1.0, "loss": 0.2}, {"step": 300, "accuracy": 1.0, "loss": 0.01}]
    run = {**summary(perfect, trivial=0.33), "best_step": 300, "best_dev": perfect[-1], "dev_examples": 9,
           "tfidf_baseline": {"param": "C", "value": 100.0, "dev": {"accuracy": 1.0, "macro_f1": 1.0}}}
    assert training_hints(run) == []
    hint = baseline_hint({**run, "spec": {"task": "classification", "data": {"max_length": 128}}})
    assert hint.startswith("TF-IDF and the model both score dev accuracy 1 on the 9 dev texts: this dev split "
                           "cannot tell them apart")
    rising = [{"step": 50, "accuracy": 0.9}, {"step": 300, "accuracy": 1.0}]
    (hint,) = training_hints(summary(rising, trivial=0.33))
    assert "came at the last evaluation" in hint
