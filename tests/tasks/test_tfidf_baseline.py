"""The TF-IDF baseline beside the score (bertkit/tasks/baseline.py): `finetune` chooses C (alpha)
on dev and `evaluate` scores the same baseline on its data; both checked against scikit-learn
fitted here directly on the same split with the same grid."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import accuracy_score, f1_score, log_loss, mean_squared_error

from bertkit.commands.cli import main
from bertkit.commands.evaluate import model_line
from bertkit.tasks.registry import get_task
from bertkit.tasks import baseline, builtin_splits, subsample

from .helpers import make_tiny_model, write_csv

FAST = ["--no-progress", "--set", "train.max_steps=2", "train.batch_size=8", "data.max_length=16"]


def run_cli(argv, capsys) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    return capsys.readouterr().out.strip().splitlines()


@pytest.fixture(scope="module")
def bbc_files(tmp_path_factory):
    """Small real BBC splits as CSV files, and a tiny model whose vocabulary knows them."""
    root = tmp_path_factory.mktemp("bbc_tfidf")
    splits = builtin_splits("bbc")
    data = {"train": subsample(splits["train"], 120, 0), "dev": subsample(splits["dev"], 40, 0),
            "test": subsample(splits["test"], 50, 0)}
    tiny = make_tiny_model(root / "tiny", [e.text[:300] for e in data["train"][:40]])
    return root, tiny, data, {name: write_csv(root / f"{name}.csv", rows) for name, rows in data.items()}


def sklearn_classifier(train, c):
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    model = LogisticRegression(C=c, max_iter=2000).fit(vectorizer.fit_transform([e.text for e in train]),
                                                       [e.label for e in train])
    return lambda rows: model.predict_proba(vectorizer.transform([e.text for e in rows])), model.classes_


def sklearn_scores(train, rows, c) -> dict:
    predict, classes = sklearn_classifier(train, c)
    probs = predict(rows)
    gold = [e.label for e in rows]
    predicted = classes[probs.argmax(axis=1)]
    return {"accuracy": accuracy_score(gold, predicted), "loss": log_loss(gold, probs, labels=classes),
            "macro_f1": f1_score(gold, predicted, average="macro", labels=sorted(set(gold) | set(predicted)))}


def test_finetune_and_evaluate_report_the_baseline_scikit_learn_gives(bbc_files, capsys):
    root, tiny, data, files = bbc_files
    out = str(root / "clf")
    printed = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                       "--dev", files["dev"], "--out", out, *FAST], capsys)
    with open(f"{out}/finetune_summary.json") as f:
        record = json.load(f)["tfidf_baseline"]
    # the grid scored on dev by scikit-learn; the best accuracy wins, a tie goes to the lower dev loss
    dev = {c: sklearn_scores(data["train"], data["dev"], c) for c in baseline.C_GRID}
    chosen = max(baseline.C_GRID, key=lambda c: (dev[c]["accuracy"], -dev[c]["loss"]))
    assert record["param"] == "C" and record["value"] == chosen
    assert record["train_examples"] == 120 and record["train_data"] == files["train"]
    for row in record["grid"]:
        assert row["accuracy"] == pytest.approx(dev[row["C"]]["accuracy"])
        assert row["loss"] == pytest.approx(dev[row["C"]]["loss"], rel=1e-6)
        assert row["macro_f1"] == pytest.approx(dev[row["C"]]["macro_f1"])
    last = json.loads(printed[-1])
    assert last["baselines"]["tfidf"] == {"C": chosen, **record["dev"]}
    assert any(line.startswith(f"TF-IDF baseline (C={chosen:g}, chosen on dev)") for line in printed)

    printed = run_cli(["evaluate", "--model", out, "--data", files["test"]], capsys)
    test = sklearn_scores(data["train"], data["test"], chosen)
    scores = json.loads(printed[-1])["baselines"]
    assert scores["tfidf"]["C"] == chosen
    assert scores["tfidf"]["accuracy"] == pytest.approx(test["accuracy"])
    assert scores["tfidf"]["loss"] == pytest.approx(test["loss"], rel=1e-6)
    majority = max(set(e.label for e in data["train"]), key=[e.label for e in data["train"]].count)
    assert scores["trivial"]["accuracy"] == pytest.approx(np.mean([e.label == majority for e in data["test"]]))
    # the model's own score labelled before the JSON line (walk N #7), its accuracy with one standard error
    model = json.loads(printed[-1])
    error = math.sqrt(model["accuracy"] * (1 - model["accuracy"]) / 50)
    assert printed[-3] == (f"model on {files['test']}: accuracy={model['accuracy']:.4g} (± {error:.2g}, one standard "
                           f"error over 50 examples), macro_f1={model['macro_f1']:.4g}, loss={model['loss']:.4g}; "
                           f"baselines' accuracy: TF-IDF {scores['tfidf']['accuracy']:.4g}, "
                           f"trivial {scores['trivial']['accuracy']:.4g}")
    # the lead over TF-IDF with the paired error (walk P #5): from the model's predictions and scikit-learn's
    run_cli(["predict", "--model", out, "--input", files["test"], "--output", str(root / "test-predictions.jsonl")],
            capsys)
    ours = [json.loads(line)["label"] == e.label
            for line, e in zip(open(root / "test-predictions.jsonl", encoding="utf-8"), data["test"])]
    predict, classes = sklearn_classifier(data["train"], chosen)
    theirs = [classes[row.argmax()] == e.label for row, e in zip(predict(data["test"]), data["test"])]
    difference = np.array(ours, dtype=float) - np.array(theirs, dtype=float)
    paired = scores["tfidf"]["paired"]
    assert paired["only_ours"] == int((difference > 0).sum()) and paired["only_theirs"] == int((difference < 0).sum())
    assert paired["difference"] == pytest.approx(model["accuracy"] - scores["tfidf"]["accuracy"])
    assert paired["standard_error"] == pytest.approx(difference.std() / math.sqrt(50))
    assert printed[-2] == (f"model - TF-IDF accuracy: {paired['difference']:+.4g} (± {paired['standard_error']:.2g}, one "
                           "standard error of the paired difference over 50 examples; right where the other is "
                           f"wrong: the model on {paired['only_ours']}, TF-IDF on {paired['only_theirs']})")

    # --per-class: TF-IDF's F1 beside each class's, and the classes the model never gets right (walk P #7)
    printed = run_cli(["evaluate", "--model", out, "--data", files["test"], "--per-class"], capsys)
    table = printed[printed.index(next(line for line in printed if line.startswith("class "))):]
    assert table[0].split() == ["class", "precision", "recall", "f1", "support", "TF-IDF", "f1"]
    report = json.loads(printed[-1])["per_class"]
    gold = [e.label for e in data["test"]]
    their_predictions = classes[predict(data["test"]).argmax(axis=1)]
    for label, row in zip(report, table[1:]):
        f1 = f1_score(gold, their_predictions, labels=[label], average="macro")
        assert row.split()[0] == label and float(row.split()[-1]) == pytest.approx(f1, abs=5e-4)
    missed = [label for label, row in report.items() if row["support"] and row["recall"] == 0]
    said = [line for line in printed if "never right" in line]
    assert said == ([f"{len(missed)} of the {len(report)} classes in the file never right (recall 0; gold count): "
                     + ", ".join(f"{label} ({report[label]['support']})" for label in missed)] if missed else [])

    # the training file changed after the fine-tune: evaluate says so in one line, scores the model
    write_csv(files["train"] + ".changed.csv", data["train"][:100])
    with open(files["train"] + ".changed.csv") as src, open(files["train"], "w") as dst:
        dst.write(src.read())
    printed = run_cli(["evaluate", "--model", out, "--data", files["test"]], capsys)
    assert "baselines" not in json.loads(printed[-1])
    assert printed[-2].startswith(f"model on {files['test']}: accuracy=") and "baselines'" not in printed[-2]
    assert printed[-3].startswith("baselines: not computed") and "changed" in printed[-3]
    # the overlap check is lost with them, and the line says so and why (walk N #4: a new split)
    assert ("so whether the evaluated texts were its training texts can no longer be checked (the usual cause: "
            "a new split after fine-tuning; run split again with the --seed it had then") in printed[-3]
    write_csv(files["train"], data["train"])  # restored for the other tests


def test_regression_chooses_ridge_alpha_on_dev(bbc_files, capsys):
    root, tiny, data, _ = bbc_files
    length = lambda e: math.log(len(e.text.split()))  # a number the words predict in part
    files = {name: write_csv(root / f"reg-{name}.csv", rows, length) for name, rows in data.items()}
    out = str(root / "reg")
    printed = run_cli(["finetune", "--task", "regression", "--model", tiny, "--train", files["train"],
                       "--dev", files["dev"], "--out", out, *FAST], capsys)
    record = json.load(open(f"{out}/finetune_summary.json"))["tfidf_baseline"]
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    features = vectorizer.fit_transform([e.text for e in data["train"]])
    gold = np.array([length(e) for e in data["dev"]])
    pearson = {}
    for alpha in baseline.ALPHA_GRID:
        predicted = Ridge(alpha=alpha).fit(features, [length(e) for e in data["train"]]).predict(
            vectorizer.transform([e.text for e in data["dev"]]))
        pearson[alpha] = (np.corrcoef(gold, predicted)[0, 1], mean_squared_error(gold, predicted))
    chosen = max(baseline.ALPHA_GRID, key=lambda a: pearson[a][0])
    assert (record["model"], record["param"], record["value"]) == ("ridge", "alpha", chosen)
    assert record["dev"]["pearson"] == pytest.approx(pearson[chosen][0], rel=1e-6)
    assert record["dev"]["mse"] == pytest.approx(pearson[chosen][1], rel=1e-6)
    assert json.loads(printed[-1])["baselines"]["tfidf"]["alpha"] == chosen
    assert main(["evaluate", "--model", out, "--data", files["test"], "--per-class"]) == 2  # no classes to score
    assert "--per-class scores the classes of (multi-label) classification and the entity types of token " \
           "classification; this is a regression model" in capsys.readouterr().err


def test_no_baseline_and_no_scikit_learn_say_so(bbc_files, capsys, monkeypatch):
    root, tiny, _, files = bbc_files
    out = str(root / "off")
    printed = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                       "--dev", files["dev"], "--out", out, "--no-baseline", *FAST], capsys)
    assert "baselines" not in json.loads(printed[-1]) and not any("TF-IDF" in line for line in printed)
    assert json.load(open(f"{out}/finetune_summary.json"))["tfidf_baseline"] is None
    printed = run_cli(["evaluate", "--model", out, "--data", files["test"], "--no-baseline"], capsys)
    assert "baselines" not in json.loads(printed[-1]) and len(printed) == 3
    assert printed[-2].startswith(f"model on {files['test']}: accuracy=") and "baselines'" not in printed[-2]

    monkeypatch.setattr(baseline, "sklearn_available", lambda: False)
    out = str(root / "without")
    printed = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                       "--dev", files["dev"], "--out", out, *FAST], capsys)
    assert baseline.INSTALL_HINT in printed and "bertkit[baseline]" in baseline.INSTALL_HINT
    assert list(json.loads(printed[-1])["baselines"]) == ["trivial"]  # as evaluate's last line
    # scikit-learn installed afterwards: evaluate gives the trivial baseline at once (it needs only
    # the recorded training data) and says how to get TF-IDF's, which was not chosen on dev then
    monkeypatch.setattr(baseline, "sklearn_available", lambda: True)
    printed = run_cli(["evaluate", "--model", out, "--data", files["test"]], capsys)
    assert set(json.loads(printed[-1])["baselines"]) == {"trivial"}
    assert printed[-4].startswith("trivial baseline: ")
    assert printed[-3].startswith(baseline.INSTALL_HINT) and "--overwrite" in printed[-3]
    assert "; baselines' accuracy: trivial " in printed[-2]


def test_multi_label_fits_one_logistic_regression_per_class(bbc_files, capsys):
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import MultiLabelBinarizer

    root, tiny, data, _ = bbc_files
    tags = lambda e: sorted({e.label, "long" if len(e.text.split()) > 350 else "short"})  # noqa: E731
    files = {}
    for name, rows in data.items():
        path = root / f"multi-{name}.jsonl"
        path.write_text("".join(json.dumps({"text": e.text, "label": tags(e)}) + "\n" for e in rows), encoding="utf-8")
        files[name] = str(path)
    out = str(root / "multi")
    run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
             "--dev", files["dev"], "--out", out, *FAST], capsys)
    record = json.load(open(f"{out}/finetune_summary.json"))["tfidf_baseline"]
    binarizer = MultiLabelBinarizer().fit([tags(e) for e in data["train"]])
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    features = vectorizer.fit_transform([e.text for e in data["train"]])
    micro = {}  # (C, threshold) -> dev micro-F1, C and then the threshold in grid order
    for c in baseline.C_GRID:
        model = OneVsRestClassifier(LogisticRegression(C=c, max_iter=2000)).fit(
            features, binarizer.transform([tags(e) for e in data["train"]]))
        probs = model.predict_proba(vectorizer.transform([e.text for e in data["dev"]]))
        for t in baseline.THRESHOLDS:
            micro[c, t] = f1_score(binarizer.transform([tags(e) for e in data["dev"]]), probs >= t, average="micro")
    chosen = max(micro, key=lambda point: micro[point])  # the first of equal scores
    assert (record["model"], record["value"], record["threshold"]) == ("one_vs_rest_logistic_regression", *chosen)
    assert record["dev"]["micro_f1"] == pytest.approx(micro[chosen])
    assert len(record["grid"]) == len(micro) and max(micro.values()) > max(micro[c, 0.5] for c in baseline.C_GRID)
    # evaluate refits the chosen C and decides at the chosen threshold, and says both
    printed = run_cli(["evaluate", "--model", out, "--data", files["dev"]], capsys)
    tfidf = json.loads(printed[-1])["baselines"]["tfidf"]
    assert (tfidf["C"], tfidf["threshold"]) == chosen and tfidf["micro_f1"] == pytest.approx(micro[chosen])
    assert f"TF-IDF baseline (C={chosen[0]:g}, threshold {chosen[1]:g}, chosen on dev)" in "\n".join(printed)
    # --per-class: each label of the sets, its support the rows that hold it
    report = json.loads(run_cli(["evaluate", "--model", out, "--data", files["test"], "--per-class",
                                 "--no-baseline"], capsys)[-1])["per_class"]
    held = [label for e in data["test"] for label in tags(e)]
    assert {label: row["support"] for label, row in report.items() if row["support"]} == \
        {label: held.count(label) for label in set(held)}


def test_the_trivial_multi_label_baseline_predicts_the_fixed_set_best_on_the_training_rows():
    from bertkit.tasks.formats import TextExample
    from bertkit.tasks.sequence import MULTI_LABEL, constant_label_set

    rows = lambda *sets: [TextExample(f"t{i}", label=list(s)) for i, s in enumerate(sets)]  # noqa: E731
    train = rows(["options"], ["options"], ["options"], ["bugs"], [])  # options: 3 of 5, bugs: 1 of 5
    test = rows(["options"], ["options", "bugs"], ["examples"], [])
    scores = MULTI_LABEL.baseline(train, test)
    gold = [["options"], ["options", "bugs"], ["examples"], []]
    assert scores["micro_f1"] == pytest.approx(f1_score(  # {options} for every example, not the empty set
        *[[[name in s for name in ("bugs", "examples", "options")] for s in sets]
          for sets in (gold, [["options"]] * 4)], average="micro"))
    assert scores["exact_match"] == 0.25
    # walk Y: no label in half the rows made the empty set, micro-F1 0, beside a model that predicted nothing
    assert MULTI_LABEL.baseline(rows(["a"], ["b"]), rows(["a"], ["b"]))["micro_f1"] == pytest.approx(2 / 3)  # {a, b}
    for sets in ([["a"], ["b"], ["a", "c"]], [["z"], ["z", "y"], ["x"], ["y"], []], [[], ["a"]]):
        names = sorted({name for labels in sets for name in labels}) + [""]  # "": never held, 2+ columns for sklearn
        onehot = [[name in labels for name in names] for labels in sets]
        best = max((f1_score(onehot, [[name in subset for name in names]] * len(sets), average="micro",
                             zero_division=0), -len(subset), subset)
                   for subset in ([n for i, n in enumerate(names) if mask >> i & 1] for mask in range(2 ** len(names))))
        assert constant_label_set(sets) == sorted(best[2])  # the best fixed set of all, found by brute force


def test_a_fine_tune_that_does_not_beat_tfidf_on_dev_says_what_to_try():
    from bertkit.commands.finetune import baseline_hint

    def summary(ours: float, theirs: float | None, task="classification", metric="accuracy", **extra) -> dict:
        record = None if theirs is None else {"param": "C", "value": 10.0, "dev": {metric: theirs}}
        return {"select_metric": metric, "best_dev": {metric: ours}, "tfidf_baseline": record,
                "spec": {"task": task, "data": {"max_length": 128}}, **extra}

    assert baseline_hint(summary(0.62, 0.61)) is None  # the model wins: nothing to say
    assert baseline_hint(summary(0.60, None)) is None  # no baseline fitted (--no-baseline, no scikit-learn)
    hint = baseline_hint(summary(0.60, 0.61))
    assert hint.startswith("TF-IDF is ahead of the model on dev (accuracy 0.61 against 0.6)")
    assert "--search" in hint and "data.max_length (now 128)" in hint and "configs/tapt-mini.toml" in hint
    assert baseline_hint(summary(0.61, 0.61)).startswith("TF-IDF is level with")
    assert "--search" not in baseline_hint(summary(0.60, 0.61, search={"best_trial": 0}))  # it was a search
    assert baseline_hint(summary(0.5, 0.7, task="regression", metric="mse")) is None  # lower mse wins
    assert baseline_hint(summary(0.7, 0.5, task="regression", metric="mse")).startswith("TF-IDF is ahead")
    assert "configs/dapt-minilm-head.toml" in hint  # a pretrained encoder's route too (walk P #4)
    assert "to beat it, try: --set train.blend_tfidf=true" in hint  # the lever measured first (docs/finetune.md)
    assert "blend_tfidf" not in baseline_hint(summary(0.60, 0.61, options={"blend_tfidf": True}))
    assert "blend_tfidf" in baseline_hint(summary(0.7, 0.5, task="regression", metric="mse"))  # a ridge blends too
    assert "blend_tfidf" in baseline_hint(summary(0.6, 0.61, task="multi-label-classification", metric="micro_f1"))
    assert "blend_tfidf" not in baseline_hint(summary(0.6, 0.61, task="token-classification", metric="f1"))
    # ahead on accuracy, behind on macro-F1 (walk P #2: a LoRA run, 0.66 against 0.622 and 0.32 against 0.50)
    split_lead = summary(0.66, 0.622)
    split_lead["best_dev"]["macro_f1"], split_lead["tfidf_baseline"]["dev"]["macro_f1"] = 0.3226, 0.4988
    assert baseline_hint(split_lead) == ("TF-IDF is ahead of the model on dev macro_f1 (0.4988 against 0.3226), "
                                         "though not on accuracy")
    split_lead["best_dev"]["macro_f1"] = 0.51
    assert baseline_hint(split_lead) is None
    # walk Y: a multi-label model ahead on micro-F1, behind on macro-F1, is told what lifts its small labels
    multi = summary(0.6544, 0.5786, task="multi-label-classification", metric="micro_f1")
    multi["best_dev"]["macro_f1"], multi["tfidf_baseline"]["dev"]["macro_f1"] = 0.2302, 0.2967
    assert baseline_hint(multi) == ("TF-IDF is ahead of the model on dev macro_f1 (0.2967 against 0.2302), though not "
                                    "on micro_f1; small labels the model never puts in a set count 0 in macro_f1: a "
                                    "larger lr (--set train.lr; 0.0001 lifted them from 5e-05 on GCIDE subject "
                                    "fields) or a longer run (evaluate --per-class names them)")
    multi["train_config"] = {"lr": 5e-05}
    assert "(--set train.lr, now 5e-05; 0.0001 lifted them" in baseline_hint(multi)
    # walk AB: a run already at lr 1e-4 (WordNet verb frames, seed 1) was told to try a larger lr, "now 0.0001"
    multi["train_config"] = {"lr": 1e-04}
    hint = baseline_hint(multi)
    assert "a larger lr" not in hint and "now 0.0001" not in hint
    assert hint.endswith("small labels the model never puts in a set count 0 in macro_f1: a longer run (evaluate "
                         "--per-class names them); train.lr is already 0.0001 (0.0001 lifted them from 5e-05 on "
                         "GCIDE subject fields, a larger one is unmeasured)")


def test_with_dev_texts_that_are_training_texts_the_hint_points_at_the_overlap_not_at_tuning(bbc_files, capsys):
    """walk N #11: --dev equal to --train; TF-IDF's dev score is memory, so "to beat it, try --search"
    sent the user tuning against it."""
    root, tiny, _, files = bbc_files
    out = str(root / "dev-is-train")
    printed = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                       "--dev", files["train"], "--out", out, *FAST], capsys)
    assert json.load(open(f"{out}/finetune_summary.json"))["dev_in_training"] == 120
    (hint,) = [line for line in printed if line.startswith("TF-IDF is ahead of the model on dev")]
    assert hint.endswith(", but 120 of the dev split's 120 texts are training texts, so the dev score (TF-IDF's "
                         "above all) is not a held-out score: keep each text on one side (bertkit split) before "
                         "comparing or tuning")
    assert not any("to beat it" in line for line in printed)


def test_large_training_sets_fit_with_saga_to_the_same_scores(bbc_files, monkeypatch):
    """L-BFGS took 26 minutes on 50,000 texts in 45 classes; SAGA a few seconds a C."""
    _, _, data, _ = bbc_files
    small = baseline.fit_tfidf("classification", data["train"], 10.0)
    monkeypatch.setattr(baseline, "SAGA_FROM", len(data["train"]))
    large = baseline.fit_tfidf("classification", data["train"], 10.0)
    assert (small.linear.solver, large.linear.solver) == ("lbfgs", "saga")
    a, b = small.metrics(data["dev"]), large.metrics(data["dev"])
    assert a["accuracy"] == pytest.approx(b["accuracy"], abs=1 / len(data["dev"]))
    assert a["loss"] == pytest.approx(b["loss"], rel=0.02)


def test_ctrl_c_during_the_baseline_skips_it_and_keeps_the_model(bbc_files, capsys, monkeypatch, tmp_path):
    """A Ctrl-C while a large baseline was fitted lost finetune_summary.json: evaluate then
    disowned the model. The fit is announced on large sets (it had been silent for minutes)."""
    from bertkit.recipes import finetune as recipe

    root, tiny, data, files = bbc_files

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(baseline, "choose_on_dev", interrupted)
    monkeypatch.setattr(recipe, "ANNOUNCE_BASELINE_FROM", 100)
    out = str(tmp_path / "clf")
    printed = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
                       "--dev", files["dev"], "--out", out, *FAST], capsys)
    assert "TF-IDF baseline: fitting on 120 training texts, one model per value of C (Ctrl-C skips it; " \
           "the model is saved)" in printed
    with open(f"{out}/finetune_summary.json") as f:
        record = json.load(f)["tfidf_baseline"]
    assert record["note"] == "TF-IDF baseline: skipped (Ctrl-C while it was fitted)"
    assert record["train_examples"] == 120
    printed = run_cli(["evaluate", "--model", out, "--data", files["test"]], capsys)
    assert "accuracy" in json.loads(printed[-1])


def test_a_run_killed_during_the_baseline_leaves_a_summary_that_says_so(bbc_files, capsys, monkeypatch, tmp_path):
    """Killed there, the summary had said nothing of the baseline, and evaluate blamed
    train.baseline=false or an older bertkit."""
    root, tiny, data, files = bbc_files

    def killed(*args, **kwargs):
        raise SystemExit(137)  # what a kill looks like from inside: the process ends here
    monkeypatch.setattr(baseline, "choose_on_dev", killed)
    out = str(tmp_path / "clf")
    with pytest.raises(SystemExit), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main(["finetune", "--task", "classification", "--model", tiny, "--train", files["train"],
              "--dev", files["dev"], "--out", out, *FAST])
    with open(f"{out}/finetune_summary.json") as f:
        note = json.load(f)["tfidf_baseline"]["note"]
    assert note == "TF-IDF baseline: not computed, the run ended while it was fitted"
    capsys.readouterr()
    printed = run_cli(["evaluate", "--model", out, "--data", files["test"]], capsys)
    assert "TF-IDF baseline: not computed, the run ended while it was fitted (then fine-tune again: --overwrite)" \
        in printed


def test_evaluates_words_line_compares_the_baselines_on_the_metric_that_selects():
    """A regression's line names the baselines' mse (the trivial mean has no correlation, so it was
    left out when the line named Pearson, the first metric); a classifier's their accuracy."""
    scores = {"pearson": 0.6, "spearman": 0.55, "mse": 3.2,
              "baselines": {"trivial": {"mse": 4.6}, "tfidf": {"alpha": 1.0, "pearson": 0.48, "mse": 3.6}}}
    line = model_line("test.tsv", get_task("regression"), scores, 500)
    assert line.startswith("model on test.tsv: pearson=0.6, spearman=0.55, mse=3.2")
    assert line.endswith("; baselines' mse: TF-IDF 3.6, trivial 4.6")
    scores = {"accuracy": 0.9, "baselines": {"trivial": {"accuracy": 0.2}}}
    assert model_line("t.csv", get_task("classification"), scores, 100).endswith("baselines' accuracy: trivial 0.2")
