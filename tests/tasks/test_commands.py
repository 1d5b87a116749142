"""The finetune / evaluate / predict commands through `bertkit.commands.cli.main`: token
classification end to end on WordNet tagging, JSON output contracts, and the errors users cause."""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import Counter

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.models.heads import BertForSequenceClassification, BertForTokenClassification
from bertkit.tasks import Collator, builtin_splits, inference_spec
from bertkit.tasks.baseline import recorded_training_examples
from bertkit.tasks.tagging import encode_words, lookup_predictions, per_type_scores
from bertkit.tasks.formats import write_conll
from bertkit.tasks.metrics import entity_spans
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model


def run_cli(argv, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    texts = [f"the match ended {i} nil" for i in range(5)] + [f"shares fell {i} percent" for i in range(5)]
    texts += ["goal in the last minute", "profits rose", "good film", "bad film", "fine film", "odd film",
              "rain tomorrow", "the striker scored", "the bank cut rates"]
    return make_tiny_model(tmp_path_factory.mktemp("tiny"), texts)


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, minilm2_dir):
    """A token classifier fine-tuned through the CLI on 320 WordNet example sentences."""
    out = str(tmp_path_factory.mktemp("tagger") / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["finetune", "--task", "token-classification", "--model", minilm2_dir, "--train",
                     "wordnet-tagging", "--out", out, "--no-progress", "--seed", "0",
                     "--set", "data.max_length=40", "data.max_train_examples=320",
                     "data.max_eval_examples=100", "train.epochs=2", "train.lr=5e-4", "train.log_every=5"])
    assert code == 0
    return out


def test_token_classification_learns_entities(tagger):
    with open(os.path.join(tagger, "finetune_summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(tagger, "metrics.jsonl")) as f:
        rows = [r for r in map(json.loads, f) if r["split"] == "train"]
    assert rows[-1]["loss"] < 0.5 * rows[0]["loss"]
    assert summary["spec"]["task"] == "token-classification" and summary["select_metric"] == "f1"
    assert len(summary["labels"]) == 91  # O + B-/I- for the 45 supersenses
    # tagging the target word with its supersense: entity F1 well above zero and above a
    # most-frequent-tag-per-word lookup
    assert summary["best_dev"]["f1"] > 0.15
    assert summary["best_dev"]["f1"] > summary["dev_baseline"]["f1"]


def test_evaluate_prints_json_on_the_last_line(tagger, capsys, tmp_path):
    test = builtin_splits("wordnet-tagging")["test"][:60]
    write_conll(tmp_path / "test.conll", test)
    code, out, _ = run_cli(["evaluate", "--model", tagger, "--data", str(tmp_path / "test.conll")], capsys)
    assert code == 0
    metrics = json.loads(out.strip().splitlines()[-1])
    assert set(metrics) == {"f1", "precision", "recall", "tag_accuracy", "loss", "baselines"}
    assert 0.0 <= metrics["f1"] <= 1.0 and metrics["tag_accuracy"] > 0.5
    # the trivial baseline (most frequent tag per word), refitted on the fine-tune's training data
    assert set(metrics["baselines"]) == {"trivial"} and 0.0 <= metrics["baselines"]["trivial"]["f1"] < metrics["f1"]


def test_evaluate_and_predict_run_in_bf16_when_asked(tagger, capsys, tmp_path):
    """--precision bf16 (autocast; on the CPU too, where "auto" is fp32): the same metrics and
    predictions, in the same JSON, as fp32 on this small test set."""
    write_conll(tmp_path / "test.conll", builtin_splits("wordnet-tagging")["test"][:60])
    scores = {}
    for name in ("auto", "bf16"):
        code, out, err = run_cli(["evaluate", "--model", tagger, "--data", str(tmp_path / "test.conll"),
                                  "--precision", name], capsys)
        assert code == 0, err
        scores[name] = json.loads(out.strip().splitlines()[-1])
    assert "running on cpu in bf16" in err
    assert abs(scores["bf16"]["tag_accuracy"] - scores["auto"]["tag_accuracy"]) < 0.05
    (tmp_path / "in.txt").write_text("The baker sold fresh bread to the village.\n", encoding="utf-8")
    code, _, _ = run_cli(["predict", "--model", tagger, "--input", str(tmp_path / "in.txt"),
                          "--output", str(tmp_path / "p.jsonl"), "--precision", "bf16"], capsys)
    assert code == 0 and json.loads((tmp_path / "p.jsonl").read_text())["tags"]

def test_predict_writes_entities_with_character_spans(tagger, capsys, tmp_path):
    texts = ["The baker sold fresh bread to the village.", "She ran quickly across the field!"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out_file = tmp_path / "pred.jsonl"
    code, out, _ = run_cli(["predict", "--model", tagger, "--input", str(tmp_path / "in.txt"),
                            "--output", str(out_file)], capsys)
    assert code == 0 and "wrote 2 predictions" in out
    rows = [json.loads(line) for line in out_file.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2
    for text, row in zip(texts, rows):
        assert len(row["words"]) == len(row["tags"])
        for entity in row["entities"]:
            assert text[entity["start"]:entity["end"]] == entity["text"]
            assert entity["text"].split()[0] in row["words"]


def test_tagger_reloads_in_transformers_auto_class(tagger):
    transformers = pytest.importorskip("transformers")
    ours = BertForTokenClassification.from_pretrained(tagger)
    theirs = transformers.AutoModelForTokenClassification.from_pretrained(tagger).eval()
    assert theirs.config.id2label == ours.config.id2label
    tokenizer = Tokenizer.from_pretrained(tagger)
    batch = Collator(tokenizer.pad_token_id)(encode_words(tokenizer, builtin_splits("wordnet-tagging")["test"][:8], 48))
    with torch.no_grad():
        torch.testing.assert_close(ours(**batch).logits, theirs(**batch).logits, atol=1e-4, rtol=1e-4)


def test_per_class_gives_each_entity_type_of_a_tagger(tagger, capsys, tmp_path):
    """Token classification's --per-class: each entity type's P/R/F1, support = its gold entities
    (seqeval's classification_report), the types' counts adding up to the micro scores."""
    test = builtin_splits("wordnet-tagging")["test"][:60]
    write_conll(tmp_path / "test.conll", test)
    code, out, _ = run_cli(["evaluate", "--model", tagger, "--data", str(tmp_path / "test.conll"), "--per-class",
                            "--no-baseline"], capsys)
    assert code == 0 and re.search(r"^class +precision +recall +f1 +support$", out, re.M)  # the table
    line = json.loads(out.strip().splitlines()[-1])
    report = line["per_class"]
    gold = Counter(kind for e in test for kind, _, _ in entity_spans(e.tags))
    assert {kind: row["support"] for kind, row in report.items() if row["support"]} == dict(gold)
    found = sum(row["recall"] * row["support"] for row in report.values())  # true positives, type by type
    assert found / sum(gold.values()) == pytest.approx(line["recall"])


def test_per_class_of_a_tagger_sets_the_word_lookups_f1_beside_each_type(tagger, capsys, tmp_path):
    """As classification's table shows TF-IDF's F1 per class, a tagger's shows its trivial baseline's (the
    word lookup refitted on the fine-tune's training sentences) per entity type."""
    test = builtin_splits("wordnet-tagging")["test"][:60]
    write_conll(tmp_path / "test.conll", test)
    code, out, _ = run_cli(["evaluate", "--model", tagger, "--data", str(tmp_path / "test.conll"), "--per-class"],
                           capsys)
    printed = out.strip().splitlines()
    assert code == 0 and re.search(r"^class +precision +recall +f1 +support +trivial f1$", out, re.M)
    with open(os.path.join(tagger, "finetune_summary.json")) as f:
        summary = json.load(f)
    train = recorded_training_examples(summary["trivial_baseline"], "token-classification", inference_spec(tagger).data)
    theirs = per_type_scores(test, lookup_predictions(train, test))
    assert any(row["f1"] for row in theirs.values())  # the lookup gets some types right: the column is not all 0
    start = next(i for i, line in enumerate(printed) if line.startswith("class "))
    rows = printed[start + 1:start + 1 + len(json.loads(printed[-1])["per_class"])]
    for row in rows:
        kind, *_, f1 = row.split()
        assert float(f1) == pytest.approx(theirs.get(kind, {}).get("f1", 0.0), abs=5e-4)


def test_evaluate_refuses_labels_the_model_never_saw(tagger, capsys, tmp_path):
    (tmp_path / "odd.conll").write_text("Paris B-LOC\nis O\nnice O\n\n", encoding="utf-8")
    code, _, err = run_cli(["evaluate", "--model", tagger, "--data", str(tmp_path / "odd.conll")], capsys)
    assert code == 2
    assert "'B-LOC'" in err and "never saw" in err and len(err.strip().splitlines()) == 1
    assert "--allow-unseen-labels" in err
    # asked for: scored, the unseen entity a miss (recall 0), the tag accuracy the two O words right
    code, out, err = run_cli(["evaluate", "--model", tagger, "--data", str(tmp_path / "odd.conll"),
                              "--allow-unseen-labels"], capsys)
    assert code == 0, err
    assert "1 label(s) the model never saw (B-LOC): counted as errors" in err
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["recall"] == 0.0 and metrics["tag_accuracy"] <= 2 / 3


def test_classification_predict_and_evaluate_from_files(tiny, capsys, tmp_path):
    train = "text,label\n" + "".join(f"the match ended {i} nil,sport\nshares fell {i} percent,business\n"
                                     for i in range(12))
    (tmp_path / "train.csv").write_text(train, encoding="utf-8")
    (tmp_path / "dev.csv").write_text("text,label\ngoal in the last minute,sport\nprofits rose,business\n",
                                      encoding="utf-8")
    out = str(tmp_path / "clf")
    code, stdout, _ = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train",
                               str(tmp_path / "train.csv"), "--dev", str(tmp_path / "dev.csv"), "--out", out,
                               "--no-progress", "--set", "train.max_steps=4", "train.batch_size=8",
                               "data.max_length=16", "train.class_weights=balanced", "train.llrd=0.9"], capsys)
    assert code == 0
    with open(os.path.join(out, "finetune_summary.json")) as f:
        summary = json.load(f)
    assert summary["options"]["class_weights"] == "balanced" and summary["train_config"]["llrd"] == 0.9
    assert BertForSequenceClassification.from_pretrained(out).config.id2label == {0: "business", 1: "sport"}
    assert set(json.loads(stdout.strip().splitlines()[-1])) == {"accuracy", "macro_f1", "loss", "baselines"}
    (tmp_path / "in.txt").write_text("the striker scored\nthe bank cut rates\n", encoding="utf-8")
    code, _, err = run_cli(["predict", "--model", out, "--input", str(tmp_path / "in.txt"), "--output",
                            str(tmp_path / "p.jsonl"), "--set", "data.eval_batch_size=1"], capsys)
    assert code == 0 and "predict: 2/2 input (100%)" in err  # 100,000 lines had run with no word for minutes
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["label"] in ("sport", "business")
        assert set(row["probabilities"]) == {"business", "sport"}
        assert sum(row["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
    # a file whose labels the model does not know
    (tmp_path / "other.csv").write_text("text,label\nrain tomorrow,weather\nsun,weather\n", encoding="utf-8")
    code, _, err = run_cli(["evaluate", "--model", out, "--data", str(tmp_path / "other.csv")], capsys)
    assert code == 2 and "'weather'" in err
    (tmp_path / "mixed.csv").write_text("text,label\nrain tomorrow,weather\nthe match ended 3 nil,sport\n",
                                        encoding="utf-8")
    code, stdout, err = run_cli(["evaluate", "--model", out, "--data", str(tmp_path / "mixed.csv"),
                                 "--allow-unseen-labels", "--set", "data.eval_batch_size=1"], capsys)
    assert code == 0 and "(weather): counted as errors" in err and "evaluate: 2/2 batch (100%)" in err
    metrics = json.loads(stdout.strip().splitlines()[-1])
    assert metrics["accuracy"] <= 0.5 and metrics["loss"] is None  # ln p(weather) = ln 0: no finite loss
    # each class's scores (an imbalanced user had only accuracy and macro-F1); the same F1s macro-F1 averages
    code, stdout, _ = run_cli(["evaluate", "--model", out, "--data", str(tmp_path / "train.csv"), "--per-class",
                               "--no-baseline"], capsys)
    printed = stdout.strip().splitlines()
    report = json.loads(printed[-1])
    assert code == 0 and set(report["per_class"]) == {"business", "sport"}
    assert {row["support"] for row in report["per_class"].values()} == {12}
    assert report["macro_f1"] == pytest.approx(sum(row["f1"] for row in report["per_class"].values()) / 2)
    assert ["class", "precision", "recall", "f1", "support"] in [line.split() for line in printed]
    assert printed[-2].startswith("model on ") and "one standard error over 24 examples" in printed[-2]
    # evaluated on its own training file: said (the score is memory)
    with pytest.warns(UserWarning, match=r"24 of the 24 evaluated texts are training texts of this model"):
        assert main(["evaluate", "--model", out, "--data", str(tmp_path / "train.csv")]) == 0
    # an existing model in --out is not overwritten silently
    code, _, err = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train",
                            str(tmp_path / "train.csv"), "--dev", str(tmp_path / "dev.csv"), "--out", out,
                            "--no-progress"], capsys)
    assert code == 2 and "--overwrite" in err
    # a fine-tune's data limit given to evaluate or predict would be read by nothing: refused
    for command in (["evaluate", "--data"], ["predict", "--output", str(tmp_path / "p.jsonl"), "--input"]):
        code, _, err = run_cli([command[0], "--model", out, *command[1:], str(tmp_path / "train.csv"),
                                "--set", "data.max_eval_examples=5"], capsys)
        assert code == 2 and "data.max_eval_examples limits a fine-tune's own data" in err and "--limit" in err


def test_evaluate_and_finetune_print_non_ascii_labels_as_text(tiny, capsys, tmp_path):
    """walk M #12: the last JSON line read "Wirtschaft/\\u00d6konomie" while predict wrote the label itself."""
    rows = "".join(f"shares fell {i} percent,Wirtschaft/\u00d6konomie\nthe match ended {i} nil,Sport\n"
                   for i in range(6))
    (tmp_path / "train.csv").write_text("text,label\n" + rows, encoding="utf-8")
    out = str(tmp_path / "clf")
    code, stdout, _ = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train",
                               str(tmp_path / "train.csv"), "--dev", str(tmp_path / "train.csv"), "--out", out,
                               "--no-progress", "--set", "train.max_steps=1", "data.max_length=16"], capsys)
    assert code == 0 and "\\u" not in stdout and json.loads(stdout.strip().splitlines()[-1])
    code, stdout, _ = run_cli(["evaluate", "--model", out, "--data", str(tmp_path / "train.csv"), "--per-class"],
                              capsys)
    last = stdout.strip().splitlines()[-1]
    assert code == 0 and "\"Wirtschaft/\u00d6konomie\"" in last and "\\u" not in stdout
    assert set(json.loads(last)["per_class"]) == {"Sport", "Wirtschaft/\u00d6konomie"}


def test_user_errors_are_one_line_and_say_where(tiny, capsys, tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\ngood film,pos\nbad film,neg\n", encoding="utf-8")
    (tmp_path / "dev.csv").write_text("text,label\nfine film,pos\nodd film,neutral\n", encoding="utf-8")
    base = ["finetune", "--model", tiny, "--out", str(tmp_path / "o"), "--no-progress", "--set", "data.max_length=32"]
    code, _, err = run_cli(base + ["--task", "classification", "--train", str(train), "--dev",
                                   str(tmp_path / "dev.csv")], capsys)
    assert code == 2 and "'neutral'" in err and "dev" in err

    (tmp_path / "empty.csv").write_text('text,label\ngood film,pos\n"  ",neg\n', encoding="utf-8")
    code, _, err = run_cli(base + ["--task", "classification", "--train", str(tmp_path / "empty.csv"),
                                   "--dev", str(train)], capsys)
    assert code == 2 and "empty.csv: line 3 has an empty 'text'" in err  # named by the file and its line

    (tmp_path / "bad.conll").write_text("Paris B-LOC\nis O\n\nRome B-LOC extra\n", encoding="utf-8")
    code, _, err = run_cli(base + ["--task", "token-classification", "--train", str(tmp_path / "bad.conll"),
                                   "--dev", str(tmp_path / "bad.conll")], capsys)
    assert code == 2 and "line 4" in err

    code, _, err = run_cli(base + ["--task", "qa", "--train", "bbc"], capsys)
    assert code == 2 and "classification" in err

    code, _, err = run_cli(base + ["--task", "classification", "--train", "bbc", "--set", "train.epoch=1"], capsys)
    assert code == 2 and "train.epochs" in err
    code, _, err = run_cli(base[:-1] + ["data.max_length=128", "--task", "classification", "--train", str(train),
                                        "--dev", str(train)], capsys)
    assert code == 2 and "max_length=128 exceeds the model's 64 positions" in err  # named: refused, not cut
    assert not os.path.exists(tmp_path / "o" / "model.safetensors")


def test_a_model_with_fewer_positions_than_the_default_length_is_read_at_its_own(tiny, capsys, tmp_path):
    """Walk X: a model pre-trained by a tiny recipe (64 positions) and fine-tuned as the docs say,
    without data.max_length, was refused by the default 128 ("use data.max_length=64 or less")
    after the data had been read; the default now follows the model, and says so."""
    train = tmp_path / "train.csv"
    train.write_text("text,label\ngood film,pos\nbad film,neg\nfine film,pos\nodd film,neg\n", encoding="utf-8")
    out = tmp_path / "o"
    code, stdout, err = run_cli(["finetune", "--task", "classification", "--model", tiny, "--train", str(train),
                                 "--dev", str(train), "--out", str(out), "--no-progress", "--no-baseline",
                                 "--set", "train.max_steps=2"], capsys)
    assert code == 0, err
    assert "data.max_length: 64, the model's positions (the default, 128," in stdout
    assert json.loads((out / "finetune_config.json").read_text())["data"]["max_length"] == 64


def test_qa_on_a_model_with_fewer_positions_fits_the_default_stride_too(tiny, capsys, tmp_path):
    """The default doc_stride (32) must be below half of the length: once data.max_length followed a
    64-position model, QA was refused ("data.doc_stride=32 must be below half of data.max_length=64")
    though the user had named neither; the stride follows as well (a quarter of the length)."""
    context = "the film was good and the plot was fine " * 6
    qas = [{"id": str(i), "question": "how was the film", "answers": [{"text": "good", "answer_start": 13}]}
           for i in range(4)]
    squad = tmp_path / "train.json"
    squad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}),
                     encoding="utf-8")
    out = tmp_path / "o"
    code, stdout, err = run_cli(["finetune", "--task", "qa", "--model", tiny, "--train", str(squad), "--dev",
                                 str(squad), "--out", str(out), "--no-progress", "--no-baseline",
                                 "--set", "train.max_steps=2"], capsys)
    assert code == 0, err
    assert "data.doc_stride: 16" in stdout
    data = json.loads((out / "finetune_config.json").read_text())["data"]
    assert (data["max_length"], data["doc_stride"]) == (64, 16)


def test_predict_input_dash_says_it_reads_files_not_stdin(tiny, capsys):
    """`--output -` is stdout, so a newcomer serving from a pipe tried `--input -`: it was looked up
    as a file or built-in data name and refused as "-: no such file (or built-in data name: ...)"."""
    code, _, err = run_cli(["predict", "--model", tiny, "--input", "-", "--output", "-"], capsys)
    assert code == 2 and "--input -: predict reads a file, not stdin" in err and "--input new.txt" in err
    assert "no such file" not in err


def test_evaluate_of_a_classifier_saved_from_python_says_why_there_is_no_baseline(tiny, capsys, tmp_path):
    model = BertForSequenceClassification.from_pretrained(tiny, num_labels=2, id2label={0: "business", 1: "sport"})
    model.save_pretrained(tmp_path / "py", tokenizer=Tokenizer.from_pretrained(tiny))
    (tmp_path / "test.csv").write_text("text,label\nthe striker scored,sport\nshares fell,business\n")
    code, out, err = run_cli(["evaluate", "--model", str(tmp_path / "py"), "--data", str(tmp_path / "test.csv")],
                             capsys)
    assert code == 0, err
    assert "has no finetune_summary.json naming its training data (it was not saved by `bertkit finetune`" in out
    model.save_pretrained(tmp_path / "bare")  # no tokenizer: the error says how to give it one
    code, _, err = run_cli(["evaluate", "--model", str(tmp_path / "bare"), "--data", str(tmp_path / "test.csv")],
                           capsys)
    assert code == 2 and "save_pretrained(DIR, tokenizer=tok)" in err
