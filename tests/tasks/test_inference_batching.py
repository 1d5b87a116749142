"""predict and evaluate batch by padding cost (`data.batches.length_batches`, through
`tasks.common.eval_order`) and give the same outputs, in input order, as the fixed batches of
sorted features they replace (`data.eval_batching = "fixed"`) and as each input run alone (no
padding, no batching at all): tiny random models, inputs of very different lengths."""

from __future__ import annotations

import json
import os
import random
import warnings

import numpy as np
import pytest
import torch

from bertkit.commands.cli import main
from bertkit.errors import DataError
from bertkit.models.config import BertConfig
from bertkit.inference.fastpath import pack_for_cpu
from bertkit.models.heads import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from bertkit.tasks import (common, evaluate_examples, get_task, inference, prediction_chunks, prediction_rows,
                           read_prediction_input)
from bertkit.tasks.common import DataConfig, PredictionInput, TaskSpec, eval_order, forward_features
from bertkit.tasks.formats import TextExample, TokenExample
from bertkit.tasks.sequence import LONG_TEXT_HINT, encode_texts
from bertkit.tasks.tagging import encode_words

from .helpers import train_tokenizer, word_salad

WORDS = ("the match ended shares fell percent goal in last minute profits rose good film bad rain "
         "tomorrow striker scored bank cut rates city won league title board met votes").split()
BATCH = 8  # eval_batch_size: small, so 30 inputs make several batches to cut


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("corpus"), word_salad(WORDS, lines=200, per_line=12), 200)


def sentences(n: int = 30, seed: int = 1) -> list[list[str]]:
    """Word lists of 1 to 90 words (2 to ~92 tokens): lengths far apart, in shuffled order."""
    rng = random.Random(seed)
    lengths = [1, 2, 90, 3, 60] + [rng.randint(1, 90) for _ in range(n - 5)]
    return [[rng.choice(WORDS) for _ in range(k)] for k in lengths]


def tiny_config(tokenizer, **head) -> BertConfig:
    return BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=128, **head)


def alone(model, features) -> list[np.ndarray]:
    """Each feature's logits from a forward of that feature alone: no padding, no batching."""
    out = []
    with torch.no_grad():
        for f in features:
            logits = model(input_ids=torch.from_numpy(f["input_ids"])[None],
                           token_type_ids=torch.from_numpy(f["token_type_ids"])[None]).logits[0]
            out.append(logits.numpy())
    return out


def both_paths(run):
    """run(batching) with batches cut by padding cost, then with fixed batches of sorted features."""
    return run("length"), run("fixed")


def spec_of(task: str, batching: str) -> TaskSpec:
    return TaskSpec(get_task(task), DataConfig(eval_batch_size=BATCH, eval_batching=batching))


def test_the_cut_batches_differ_from_the_fixed_ones(tokenizer):
    # else the comparisons below would compare a path with itself
    features = encode_texts(tokenizer, [TextExample(" ".join(w)) for w in sentences()], 128)
    cut, fixed = eval_order(features, BATCH), eval_order(features, BATCH, cut=False)
    assert len(cut) > len(fixed) == 4
    assert sorted(np.concatenate(cut).tolist()) == list(range(len(features)))  # every input once
    assert max(len(b) for b in cut) <= BATCH
    on_gpu = eval_order(features, BATCH, device="cuda")  # a GPU pays per call, not per padded slot
    assert [b.tolist() for b in on_gpu] == [b.tolist() for b in fixed]


@pytest.mark.parametrize("task, head", [
    ("classification", {"id2label": {0: "sport", 1: "business", 2: "film"}}),
    ("regression", {"num_labels": 1, "problem_type": "regression"}),
    ("multi-label-classification", {"id2label": {0: "a", 1: "b", 2: "c"}, "problem_type": "multi_label_classification"}),
])
@pytest.mark.parametrize("pairs", [False, True])
def test_sequence_outputs_equal_fixed_batches_and_single_inputs(tokenizer, task, head, pairs):
    model = BertForSequenceClassification(tiny_config(tokenizer, **head)).eval()
    words = sentences()
    examples = [TextExample(" ".join(w), " ".join(words[-1 - i][:20]) if pairs else None)
                for i, w in enumerate(words)]
    features = encode_texts(tokenizer, examples, 128)
    cut, fixed = both_paths(lambda b: forward_features(model, features, BATCH, tokenizer.pad_token_id, b))
    reference = alone(model, features)
    assert len(cut) == len(fixed) == len(examples)
    for i in range(len(examples)):  # row i is input i
        np.testing.assert_allclose(cut[i], reference[i], atol=1e-5, rtol=0)
        np.testing.assert_allclose(cut[i], fixed[i], atol=1e-5, rtol=0)
    decoded, decoded_fixed = both_paths(lambda b: get_task(task).decode(model, tokenizer, examples, spec_of(task, b)))
    if task == "regression":
        np.testing.assert_allclose(decoded, [r[0] for r in reference], atol=1e-5, rtol=0)
        np.testing.assert_allclose(decoded, decoded_fixed, atol=1e-5, rtol=0)
    else:
        for (label, probs), (label_fixed, probs_fixed) in zip(decoded, decoded_fixed):
            assert label == label_fixed
            assert list(probs) == list(probs_fixed) == list(head["id2label"].values())  # model label order
            np.testing.assert_allclose(list(probs.values()), list(probs_fixed.values()), atol=1e-5, rtol=0)


def test_predict_rows_keep_input_order_with_blank_and_duplicate_inputs(tokenizer):
    model = BertForSequenceClassification(tiny_config(tokenizer, id2label={0: "x", 1: "y", 2: "z"}))
    model = pack_for_cpu(model.eval())  # what `bertkit predict` runs on the CPU
    texts = [" ".join(w) for w in sentences()]
    texts[4:4] = ["", texts[2], "   ", texts[0]]  # blank inputs, and duplicates of a long and a short one
    inputs = PredictionInput([TextExample(t, line=n + 1) for n, t in enumerate(texts)])
    cut, fixed = both_paths(lambda b: prediction_rows(model, tokenizer, spec_of("classification", b), inputs))
    assert [r["index"] for r in cut] == list(range(len(texts))) == [r["index"] for r in fixed]
    assert [r["line"] for r in cut] == list(range(1, len(texts) + 1))
    assert cut[4]["label"] is None and cut[6]["probabilities"] is None  # blank: a row, no prediction
    for copy, original in ((5, 2), (7, 0)):  # a duplicate gets its own row, with the same prediction
        assert cut[copy]["label"] == cut[original]["label"]
        np.testing.assert_allclose(list(cut[copy]["probabilities"].values()),
                                   list(cut[original]["probabilities"].values()), atol=1e-5, rtol=0)
    reference = alone(model, encode_texts(tokenizer, [TextExample(t) for t in texts if t.strip()], 128))
    kept = [r for r in cut if r["label"] is not None]
    for row, row_fixed, logits in zip(kept, [r for r in fixed if r["label"] is not None], reference):
        probs = np.array(list(row["probabilities"].values()))
        assert row["label"] == row_fixed["label"] == "xyz"[int(np.argmax(logits))]
        np.testing.assert_allclose(probs, common.softmax(logits.astype(np.float64)), atol=1e-5, rtol=0)
        np.testing.assert_allclose(probs, list(row_fixed["probabilities"].values()), atol=1e-5, rtol=0)


def test_token_logits_and_tags_equal_fixed_batches_and_single_inputs(tokenizer):
    tags = ["O", "B-X", "I-X", "B-Y"]
    model = BertForTokenClassification(tiny_config(tokenizer, id2label=dict(enumerate(tags)))).eval()
    examples = [TokenExample(w, [tags[len(x) % 4] for x in w]) for w in sentences(seed=2)]
    features = encode_words(tokenizer, examples, 128)
    cut, fixed = both_paths(lambda b: forward_features(model, features, BATCH, tokenizer.pad_token_id, b))
    for i, reference in enumerate(alone(model, features)):
        assert cut[i].shape == fixed[i].shape == (len(features[i]["input_ids"]), 4)  # cut to its own length
        np.testing.assert_allclose(cut[i], reference, atol=1e-5, rtol=0)
        np.testing.assert_allclose(cut[i], fixed[i], atol=1e-5, rtol=0)
    task = get_task("token-classification")
    predicted, predicted_fixed = both_paths(
        lambda b: task.decode(model, tokenizer, examples, spec_of("token-classification", b)))
    assert [p.tags for p in predicted] == [p.tags for p in predicted_fixed]
    for p, q in zip(predicted, predicted_fixed):
        np.testing.assert_allclose(p.probs, q.probs, atol=1e-5, rtol=0)
    assert [len(p.tags) for p in predicted] == [len(e.tokens) for e in examples]  # one tag per word, in order
    metrics, metrics_fixed = both_paths(
        lambda b: evaluate_examples(model, tokenizer, spec_of("token-classification", b), examples))
    assert metrics == pytest.approx(metrics_fixed, abs=1e-9)
    # predict: a sentence without words keeps its row
    inputs = PredictionInput(examples[:3] + [TokenExample([], [])] + examples[3:6])
    rows = prediction_rows(model, tokenizer, spec_of("token-classification", "length"), inputs)
    assert [r["words"] for r in rows] == [e.tokens for e in inputs.examples]
    assert rows[3]["tags"] == [] and [r["tags"] for r in rows[4:]] == [p.tags for p in predicted[3:6]]


def test_predict_command_writes_the_same_rows_with_cut_and_fixed_batches(tokenizer, tmp_path):
    model = BertForSequenceClassification(tiny_config(tokenizer, id2label={0: "sport", 1: "business"}))
    model.save_pretrained(tmp_path / "model", tokenizer=tokenizer)
    texts = [" ".join(w) for w in sentences(24, seed=3)] + ["", "good film"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")

    def predict(batching):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(["predict", "--model", str(tmp_path / "model"), "--input", str(tmp_path / "in.txt"),
                         "--output", str(tmp_path / "out.jsonl"), "--set", "data.eval_batch_size=8", f"data.eval_batching={batching}"]) == 0
        return [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]

    cut, fixed = both_paths(predict)
    assert len(cut) == len(fixed) == len(texts) and [r["index"] for r in cut] == list(range(len(texts)))
    assert cut[-2]["label"] is None
    for row, row_fixed in zip(cut, fixed):
        assert row["label"] == row_fixed["label"]
        if row["probabilities"] is not None:
            np.testing.assert_allclose(list(row["probabilities"].values()),
                                       list(row_fixed["probabilities"].values()), atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------- chunks
# predict computes and writes its rows a chunk of inputs at a time (tasks.inference.PREDICT_CHUNK,
# after a first one of PREDICT_FIRST_CHUNK); the tests set chunks of 2 and then 4 inputs, so a few
# dozen inputs make several chunks.
FIRST, CHUNK = 2, 4


def small_chunks(monkeypatch) -> None:
    monkeypatch.setattr(inference, "PREDICT_FIRST_CHUNK", FIRST)
    monkeypatch.setattr(inference, "PREDICT_CHUNK", CHUNK)


def chunk_sizes(n: int) -> list[int]:
    rest = n - FIRST
    return [FIRST] + [CHUNK] * (rest // CHUNK) + ([rest % CHUNK] if rest % CHUNK else [])


def same_rows(rows, expected) -> None:
    """Equal rows: the same keys, order, labels and words; numbers within 1e-5 (a chunk's batches
    pad differently from one pass's, which moves a logit by ~1e-7)."""
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert list(row) == list(want) and row == _near(want)


def _near(value):
    if isinstance(value, float):
        return pytest.approx(value, abs=1e-5)
    if isinstance(value, dict):
        return {k: _near(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_near(v) for v in value]
    return value


def asked(example) -> str:
    """What an input gives the model to read: blank for a blank input."""
    words = " ".join(getattr(example, "tokens", []))
    return getattr(example, "question", None) or words or getattr(example, "text", "")


def chunk_cases(tokenizer, tmp_path):
    """{task: (model, input file)}: blank inputs among the others; SQuAD JSON with contexts of
    several windows each (at data.max_length=32)."""
    rng = random.Random(4)
    texts = [" ".join(w) for w in sentences(22, seed=5)]
    texts[3:3], texts[9:9] = ["", "   "], [""]  # blank inputs in the first and in a later chunk
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    paragraphs = [{"context": " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))),
                   "qas": [{"id": f"q{p}-{q}", "question": " ".join(rng.choice(WORDS) for _ in range(4)),
                            "answers": []} for q in range(rng.randint(1, 3))]} for p in range(9)]
    paragraphs[4]["qas"][0]["question"] = " "  # a blank question: its row, no answer
    (tmp_path / "squad.json").write_text(json.dumps({"version": "v2.0", "data": [{"paragraphs": paragraphs}]}),
                                         encoding="utf-8")
    tags = {0: "O", 1: "B-X", 2: "I-X"}
    return {
        "classification": (BertForSequenceClassification(tiny_config(tokenizer, id2label={0: "a", 1: "b"})).eval(),
                           tmp_path / "in.txt"),
        "token-classification": (BertForTokenClassification(tiny_config(tokenizer, id2label=tags)).eval(),
                                 tmp_path / "in.txt"),
        "qa": (BertForQuestionAnswering(tiny_config(tokenizer)).eval(), tmp_path / "squad.json"),
    }


@pytest.mark.parametrize("task", ["classification", "token-classification", "qa"])
def test_rows_computed_in_chunks_are_the_rows_of_one_pass(tokenizer, tmp_path, monkeypatch, task):
    model, path = chunk_cases(tokenizer, tmp_path)[task]
    spec = TaskSpec(get_task(task), DataConfig(eval_batch_size=3, max_length=32, doc_stride=8))
    inputs = read_prediction_input(task, str(path), spec.data)
    blanks = [i for i, e in enumerate(inputs.examples) if not asked(e).strip()]
    assert blanks and blanks[-1] >= CHUNK  # a blank input after the first chunk
    if task == "qa":  # several windows per context, kept in the chunk of their question
        questions = [e for e in inputs.examples if e.question.strip()]
        assert len(get_task("qa").encode(tokenizer, questions, spec.data, None, False, "x")) > len(questions) + 10
    monkeypatch.setattr(inference, "PREDICT_FIRST_CHUNK", 10 ** 9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = prediction_rows(model, tokenizer, spec, inputs)  # one pass over every input, as before
        small_chunks(monkeypatch)
        chunks = list(prediction_chunks(model, tokenizer, spec, inputs))
    n = len(inputs.examples)
    assert [len(rows) for rows in chunks] == chunk_sizes(n)
    rows = [row for part in chunks for row in part]
    assert [r["index"] for r in rows] == list(range(n)) and len(chunks) >= 4
    assert [r["line"] for r in rows] == [getattr(e, "line", None) for e in inputs.examples]
    same_rows(rows, whole)
    for i in blanks:  # a blank input keeps its row, with the task's null values
        assert rows[i] == {"index": i, "line": inputs.examples[i].line, **get_task(task).blank_row(inputs.examples[i])}


def classifier_dir(tokenizer, tmp_path) -> str:
    model = BertForSequenceClassification(tiny_config(tokenizer, id2label={0: "sport", 1: "business"}))
    model.save_pretrained(tmp_path / "model", tokenizer=tokenizer)
    return str(tmp_path / "model")


def test_output_dash_writes_each_chunks_rows_before_the_next_chunk_is_computed(tokenizer, tmp_path, monkeypatch,
                                                                               capsys):
    model = classifier_dir(tokenizer, tmp_path)
    texts = [" ".join(w) for w in sentences(18, seed=6)]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    small_chunks(monkeypatch)
    out, rows_before = [], []  # stdout so far; its rows when each chunk's computation starts
    compute = inference._rows_of

    def watched(*args, **kwargs):
        out.append(capsys.readouterr().out)
        rows_before.append("".join(out).count("\n"))
        return compute(*args, **kwargs)

    monkeypatch.setattr(inference, "_rows_of", watched)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", model, "--input", str(tmp_path / "in.txt"), "--output", "-"]) == 0
    out.append(capsys.readouterr().out)
    assert rows_before == [0, 2, 6, 10, 14]  # chunk k is computed after the rows of chunks 0..k-1 went out
    rows = [json.loads(line) for line in "".join(out).splitlines()]  # nothing but rows on stdout
    assert [row["index"] for row in rows] == list(range(18)) and all(row["label"] for row in rows)


# several batches per chunk; one batch per chunk (no call draws a bar: it starts with the second chunk)
@pytest.mark.parametrize("batches", [["data.eval_batch_size=2"],
                                     ["data.eval_batch_size=64", "data.eval_batching=fixed"]])
def test_a_chunked_run_shows_one_bar_and_one_truncation_warning_over_the_whole_input(tokenizer, tmp_path,
                                                                                     monkeypatch, capsys, batches):
    model = classifier_dir(tokenizer, tmp_path)
    texts = [" ".join(w) for w in sentences(18, seed=6)]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    whole = tokenizer(texts, padding=False, truncation=False, return_tensors=None)["input_ids"]
    cut = sum(len(ids) >= 32 for ids in whole)  # the texts a max_length of 32 cuts
    assert 2 < cut < 18
    small_chunks(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["predict", "--model", model, "--input", str(tmp_path / "in.txt"), "--output",
                     str(tmp_path / "out.jsonl"), "--set", "data.max_length=32", *batches]) == 0
    cuts = [str(w.message) for w in caught if issubclass(w.category, common.TruncationWarning)]
    # one warning with the file's count (a chunk's "3 of 4 texts" hid it), its hint as one pass gives it
    assert cuts == [f"{tmp_path / 'in.txt'}: {cut} of 18 texts were cut to data.max_length=32 tokens{LONG_TEXT_HINT}"]
    captured = capsys.readouterr()
    assert captured.out == f"wrote 18 predictions to {tmp_path / 'out.jsonl'}\n"
    bars = [line for line in captured.err.splitlines() if line.startswith("predict:")]
    assert len(bars) == 1 and bars[0].startswith("predict: 18/18 input (100%)")  # one bar, not one per chunk
    # run again on the same --output: replaced, and the last line says so (not silently)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", model, "--input", str(tmp_path / "in.txt"), "--output",
                     str(tmp_path / "out.jsonl"), "--set", "data.max_length=32", *batches]) == 0
    assert capsys.readouterr().out == (f"wrote 18 predictions to {tmp_path / 'out.jsonl'} (it replaced the file "
                                       "that was there)\n")


@pytest.mark.parametrize("failure", ["error", "Ctrl-C"])
def test_a_failure_in_a_later_chunk_leaves_no_file_and_an_earlier_one_as_it_was(tokenizer, tmp_path, monkeypatch,
                                                                                capsys, failure):
    model = classifier_dir(tokenizer, tmp_path)
    pairs = [(" ".join(w), " ".join(w[:3])) for w in sentences(14, seed=7)]
    (tmp_path / "in.csv").write_text("text,text_pair\n" + "".join(f"{a},{b}\n" for a, b in pairs), encoding="utf-8")
    (tmp_path / "out.jsonl").write_text("an earlier run's rows\n", encoding="utf-8")
    small_chunks(monkeypatch)
    chunks, compute = [], inference._rows_of

    def failing(*args, **kwargs):
        chunks.append(len(chunks))
        if len(chunks) == 3:  # chunk 2 (inputs 6-9)
            raise KeyboardInterrupt if failure == "Ctrl-C" else DataError("chunk 2 went wrong")
        return compute(*args, **kwargs)

    monkeypatch.setattr(inference, "_rows_of", failing)
    for name in ("out.jsonl", "new.jsonl"):
        chunks.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = main(["predict", "--model", model, "--input", str(tmp_path / "in.csv"), "--output",
                         str(tmp_path / name), "--set", "data.pair_column=text_pair"])
        assert code == (2 if failure == "error" else 130) and len(chunks) == 3  # chunks 0 and 1 were done
        assert "chunk 2 went wrong" in capsys.readouterr().err or failure == "Ctrl-C"
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == "an earlier run's rows\n"
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "model", "out.jsonl"]  # no new file, no temporary one


def test_a_pair_with_a_blank_text_gets_a_blank_row_as_a_blank_line_does(tokenizer, tmp_path, monkeypatch):
    model = classifier_dir(tokenizer, tmp_path)
    pairs = [(" ".join(w), " ".join(w[:3])) for w in sentences(10, seed=8)]
    pairs[7], pairs[8] = (pairs[7][0], " "), ("", pairs[8][1])  # in the second chunk
    (tmp_path / "in.csv").write_text("text,text_pair\n" + "".join(f"{a},{b}\n" for a, b in pairs), encoding="utf-8")
    small_chunks(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--model", model, "--input", str(tmp_path / "in.csv"), "--output",
                     str(tmp_path / "out.jsonl"), "--set", "data.pair_column=text_pair"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [row["index"] for row in rows] == list(range(10))
    assert [row["label"] is None for row in rows] == [i in (7, 8) for i in range(10)]
