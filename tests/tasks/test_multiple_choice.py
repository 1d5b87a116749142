"""Multiple choice: the JSONL reader, (B, C, T) batches, the task entry through the CLI
(finetune / evaluate / predict), and a tiny model that learns its training examples."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from bertkit.commands.cli import main
from bertkit.errors import DataError
from bertkit.models.heads import BertForMultipleChoice
from bertkit.tasks import Collator, DataConfig, TaskSpec, evaluate_examples, get_task, multiple_choice
from bertkit.tasks.formats import ChoiceExample, read_choices
from bertkit.tasks.realdata import wordnet_gloss_choice
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

COLOURS = ["red", "blue", "green", "black"]


def colour_examples(n: int) -> list[ChoiceExample]:
    """The right choice names the context's colour and says so ("yes"), at a random position:
    a tiny model learns it only if the label indexes the right row of the (B, C) scores."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        right = COLOURS[i % 4]
        order = list(rng.permutation(COLOURS))
        choices = [f"{'yes' if c == right else 'no'} a {c} car" for c in order]
        out.append(ChoiceExample(str(i), f"the car is {right}", choices, order.index(right)))
    return out


def write_jsonl(path, examples, labelled=True):
    with open(path, "w", encoding="utf-8") as f:
        for e in examples:
            row = {"id": e.id, "context": e.context, "choices": e.choices}
            if labelled:
                row["label"] = e.label
            f.write(json.dumps(row) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    texts = [f"the car is {c}" for c in COLOURS] + [f"yes a {c} car no" for c in COLOURS]
    return make_tiny_model(tmp_path_factory.mktemp("tiny-mc"), texts * 3)


def test_reader_refuses_bad_lines_with_the_line_number(tmp_path):
    path = tmp_path / "mc.jsonl"
    path.write_text('{"context": "a", "choices": ["x", "y"], "label": 1}\n'
                    '{"context": "b", "choices": ["x", "y", "z"], "label": 0}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2 has 3 choices, line 1 has 2"):
        read_choices(str(path))
    path.write_text('{"context": "a", "choices": ["x", "y"], "label": 2}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1 needs 'label': the integer index \(0..1\)"):
        read_choices(str(path))
    assert read_choices(str(path), labelled=False)[0].label is None
    # a label that is the right choice's text, or its index in quotes: the index to write (walk AD)
    path.write_text('{"context": "a", "choices": ["x", "y"], "label": "y"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"got 'y', the text of choice 1: write the index, 1, instead$"):
        read_choices(str(path))
    path.write_text('{"context": "a", "choices": ["x", "y"], "label": "1"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"got '1': write it as a number, 1, without quotes$"):
        read_choices(str(path))



def test_reader_says_the_format_and_the_fields_it_reads(tmp_path):
    fields = r'"context" \(a string\), "choices" \(a list of strings\)'
    for name in ("mc.csv", "mc.txt"):  # once "line 1 is not valid JSON"
        path = tmp_path / name
        path.write_text("context,choices,label\na,x,0\n", encoding="utf-8")
        with pytest.raises(DataError, match=rf"{name}: multiple choice reads JSON lines \(\.jsonl\), one object per "
                                            rf"line with {fields} and \"label\""):
            read_choices(str(path))
    path = tmp_path / "names.jsonl"
    path.write_text('{"question": "a", "options": ["x", "y"], "answer": 1}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"line 1 has the fields question, options, answer; multiple choice reads "
                                        rf"{fields} and \"label\" .*: rename the fields to these$"):
        read_choices(str(path))
    with pytest.raises(DataError, match=rf"reads {fields}: rename"):  # predict's inputs need no label
        read_choices(str(path), labelled=False)


def test_batches_are_batch_by_choice_by_token_and_the_head_scores_each_choice(tiny):
    tokenizer = Tokenizer.from_pretrained(tiny)
    task = get_task("multiple-choice")
    features = task.encode(tokenizer, colour_examples(3), DataConfig(max_length=16), None, True, "train")
    batch = Collator(tokenizer.pad_token_id)(features)
    assert batch["input_ids"].shape[:2] == (3, 4) and batch["attention_mask"].shape == batch["input_ids"].shape
    assert batch["labels"].tolist() == [e.label for e in colour_examples(3)]
    model = BertForMultipleChoice.from_pretrained(tiny)
    out = model(**batch)
    assert out.logits.shape == (3, 4) and torch.isfinite(out.loss)


def test_cut_contexts_are_counted_and_the_warning_says_what_to_raise(tiny):
    tokenizer = Tokenizer.from_pretrained(tiny)
    long = ChoiceExample("0", " ".join(["the car is red"] * 10), ["yes a red car", "no a blue car"], 0)
    with pytest.warns(UserWarning, match=r"data: 1 of 2 examples \(some choice\) were cut to data.max_length=16 "
                                         r"tokens; each row's longer text loses its end first .*raise data.max_length"):
        features = get_task("multiple-choice").encode(tokenizer, [long, colour_examples(1)[0]],
                                                      DataConfig(max_length=16), None, False, "data")
    assert all(len(row) == 16 for row in features[0]["input_ids"])
    assert features[0]["input_ids"][0][-5:-1].tolist() == tokenizer("yes a red car")["input_ids"][0][1:-1].tolist()


def test_wordnet_gloss_choice_is_real_and_balanced():
    examples = wordnet_gloss_choice(limit=400, seed=0)
    assert len(examples) == 400 and all(len(e.choices) == 4 for e in examples)
    assert all(len(set(e.choices)) == 4 for e in examples)  # no duplicate definitions
    counts = np.bincount([e.label for e in examples], minlength=4)
    assert counts.min() > 60  # the right answer's position is spread: chance is 1/4


def test_finetune_evaluate_predict_through_the_cli(tiny, tmp_path, capsys):
    train = write_jsonl(tmp_path / "train.jsonl", colour_examples(16))
    dev = write_jsonl(tmp_path / "dev.jsonl", colour_examples(8))
    out = str(tmp_path / "mc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "multiple-choice", "--model", tiny, "--train", train, "--dev", dev,
                     "--out", out, "--no-progress", "--seed", "0", "--set", "train.max_steps=3",
                     "train.batch_size=4", "data.max_length=16"]) == 0
        summary = json.load(open(f"{out}/finetune_summary.json"))
        assert summary["spec"]["task"] == "multiple-choice" and summary["select_metric"] == "accuracy"
        assert set(summary["dev_baseline"]) == {"method", "accuracy", "loss", "chance"}
        assert summary["tie_metric"] == "loss"
        capsys.readouterr()
        assert main(["evaluate", "--model", out, "--data", dev]) == 0
        printed = capsys.readouterr().out.strip().splitlines()
        # the simple baseline (TF-IDF cosine or the most frequent training answer position), refitted on the
        # recorded training data: on the dev file, what finetune reported
        assert json.loads(printed[-1])["baselines"] == {"trivial": summary["dev_baseline"]}
        rest = {k: v for k, v in summary["dev_baseline"].items() if k != "method"}  # the method in the label
        assert printed[-3] == f"baseline ({summary['dev_baseline']['method']}): {json.dumps(rest)}"
        assert set(json.loads(printed[-1])) == {"accuracy", "loss", "baselines"}
        accuracy, trivial = json.loads(printed[-1])["accuracy"], summary["dev_baseline"]
        loss = json.loads(printed[-1])["loss"]
        error = (accuracy * (1 - accuracy) / 8) ** 0.5
        assert printed[-2] == (f"model on {dev}: accuracy={accuracy:.4g} (± {error:.2g}, "
                               f"one standard error over 8 examples), loss={loss:.4g}; baselines' accuracy: "
                               f"{trivial['method']} {trivial['accuracy']:.4g}, chance (a random choice of 4) 0.25")
        inputs = write_jsonl(tmp_path / "in.jsonl", colour_examples(5), labelled=False)
        assert main(["predict", "--model", out, "--input", inputs, "--output", str(tmp_path / "p.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [str(i) for i in range(5)]
    for row, example in zip(rows, colour_examples(5)):
        assert row["text"] == example.choices[row["choice"]]
        assert sum(row["probabilities"]) == pytest.approx(1.0, abs=1e-4)


def word_choice(context: str, right: str, position: int) -> ChoiceExample:
    """Three choices sharing no word with the context and the right one, which repeats one, at `position`."""
    choices = ["pale blue sky", "loud brass band", "cold north wind"]
    choices.insert(position, right)
    return ChoiceExample(None, context, choices, position)


WORD_TRAIN = [word_choice("the harbour crane lifted steel", "crane and steel", 0),
              word_choice("farmers planted barley early", "barley planted", 0),
              word_choice("the orchestra tuned violins", "violins tuned", 1),
              word_choice("miners found copper ore", "copper ore", 2)]
WORD_TEST = [word_choice("the crane dropped its steel", "steel crane", 1),
             word_choice("barley farmers sold grain", "barley farmers", 3)]


def test_baseline_takes_the_tfidf_choice_where_it_beats_the_answer_position():
    # the position prior (0, the most frequent in training) is wrong on both test examples; the right
    # choice shares the context's words: TF-IDF cosine is right on all, in training too, so it is chosen
    scores = multiple_choice.baseline(WORD_TRAIN, WORD_TEST)
    assert scores["method"] == multiple_choice.TFIDF and scores["accuracy"] == 1.0
    assert scores["loss"] < np.log(4) and scores["chance"] == {"method": "a random choice of 4", "accuracy": 0.25,
                                                               "loss": pytest.approx(np.log(4))}
    # where no choice shares a word with its context (endings, not summaries), the cosines are all 0 and the
    # position seen most often in training (1) is chosen on the training examples
    unrelated = [ChoiceExample(None, "alpha beta", ["gamma", "delta", "epsilon", "zeta"], label)
                 for label in (1, 1, 1, 0)]
    scores = multiple_choice.baseline(unrelated, unrelated[:2])
    assert scores["method"] == multiple_choice.POSITION and scores["accuracy"] == 1.0


def test_baseline_without_scikit_learn_is_the_answer_position_and_says_so(monkeypatch):
    monkeypatch.setattr(multiple_choice, "sklearn_available", lambda: False)
    scores = multiple_choice.baseline(WORD_TRAIN, WORD_TEST)
    assert scores["method"] == multiple_choice.POSITION  # the note says what was left out, as seq2seq's does
    assert scores["note"] == multiple_choice.TFIDF_HINT and "pip install 'bertkit[baseline]'" in scores["note"]
    assert scores["accuracy"] == 0.0  # the position prior, 0, is wrong on both
    prior = (np.array([2, 1, 1, 0]) + 1) / 8  # add-one smoothed training positions
    assert scores["loss"] == pytest.approx(-np.mean(np.log(prior[[1, 3]])))


def test_a_tiny_model_learns_its_training_examples(tiny, tmp_path):
    from bertkit.recipes.finetune import finetune

    examples = colour_examples(8)
    train = write_jsonl(tmp_path / "train.jsonl", examples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("multiple-choice", tiny, train, train, str(tmp_path / "m"),
                           {"train": {"max_steps": 60, "batch_size": 8, "lr": 3e-3, "warmup_ratio": 0.0,
                                      "eval_every": 20, "seed": 0}, "data": {"max_length": 16}},
                           progress=False)
    assert summary["best_dev"]["accuracy"] == 1.0  # chance: 0.25
    model = BertForMultipleChoice.from_pretrained(str(tmp_path / "m"))
    spec = TaskSpec(get_task("multiple-choice"), DataConfig(max_length=16))
    assert evaluate_examples(model, Tokenizer.from_pretrained(tiny), spec, examples)["accuracy"] == 1.0


def test_a_frozen_encoder_stays_as_loaded_while_the_head_trains(tiny, tmp_path):
    from bertkit.models.encoder import BertModel
    from bertkit.recipes.finetune import finetune

    train = write_jsonl(tmp_path / "train.jsonl", colour_examples(8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune("multiple-choice", tiny, train, train, str(tmp_path / "m"),
                 {"train": {"max_steps": 3, "batch_size": 8, "lr": 1e-2, "head_lr": 1e-1}, "data": {"max_length": 16},
                  "model": {"freeze_encoder": True}}, progress=False)
        base = BertModel.from_pretrained(tiny).state_dict()
        tuned = BertForMultipleChoice.from_pretrained(str(tmp_path / "m"))
    for name, value in tuned.bert.state_dict().items():
        torch.testing.assert_close(value, base[name], rtol=0, atol=0)
    assert tuned.classifier.weight.abs().max() > 0.05  # init std 0.02; lr 0.1 moved it
