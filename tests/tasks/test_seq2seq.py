"""seq2seq: the JSONL reader, target batches, ROUGE-L against rouge-score, the WordNet reverse
dictionary, the task through the CLI (finetune / evaluate / predict), and a tiny BERT2BERT that
learns its training pairs."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.models.encoder_decoder import EncoderDecoderModel
from bertkit.errors import ConfigError, DataError
from bertkit.tasks import Collator, DataConfig, TaskSpec, evaluate_examples, get_task
from bertkit.tasks.builtin import builtin_splits
from bertkit.tasks.metrics import rouge_l, text_exact_match
from bertkit.tasks.realdata import wordnet_reverse_dictionary
from bertkit.tasks.seq2seq import read_pairs
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

COLOURS = ["red", "blue", "green", "black", "white", "yellow"]


def colour_pairs(n: int) -> list[dict]:
    """"the car is red and fast" -> "red car": the target copies a word from the middle."""
    return [{"source": f"the car is {COLOURS[i % 6]} and fast", "target": f"{COLOURS[i % 6]} car"}
            for i in range(n)]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    texts = [row["source"] + " " + row["target"] for row in colour_pairs(6)]
    return make_tiny_model(tmp_path_factory.mktemp("tiny-s2s"), texts * 3)


def test_reader_refuses_bad_lines_with_the_line_number(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"source": "a", "target": "b"}\n{"source": "c"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="line 2 needs a non-empty string field 'target'"):
        read_pairs(str(path), DataConfig())
    assert [e.label for e in read_pairs(str(path), DataConfig(), labelled=False)] == [None, None]
    path.write_text('{"source": "a"}\n\n{"source": "c"}\n', encoding="utf-8")  # predict: a blank line is an input
    assert [(e.line, e.text) for e in get_task("seq2seq").read_inputs(str(path), DataConfig()).examples] == [
        (1, "a"), (2, ""), (3, "c")]
    assert [e.line for e in read_pairs(str(path), DataConfig(target_column="source"))] == [1, 3]  # training: skipped
    with pytest.raises(DataError, match="JSON lines"):
        read_pairs(str(tmp_path / "s.csv"), DataConfig())
    other = write_jsonl(tmp_path / "o.jsonl", [{"definition": "a colour", "word": "red"}])
    assert read_pairs(other, DataConfig(source_column="definition", target_column="word"))[0].label == "red"
    # neither field: both options in one message (walk X: naming the source only led to a second refusal)
    with pytest.raises(DataError, match=r"line 1 has no 'source' and 'target' fields \(the input text and the text to "
                                        r"generate\); the line has definition, word: name yours with --set "
                                        r"data\.source_column=NAME data\.target_column=NAME$"):
        read_pairs(other, DataConfig())
    with pytest.raises(DataError, match=r"line 1 needs a string field 'source' \(the input text\); the line has "
                                        r"definition, word: name yours with --set data\.source_column=NAME$"):
        read_pairs(other, DataConfig(target_column="word"))
    with pytest.raises(DataError, match=r"needs a non-empty string field 'target' .*--set data\.target_column=NAME$"):
        read_pairs(other, DataConfig(source_column="definition"))


def test_targets_are_padded_as_targets_and_the_model_takes_the_batch(tiny, tmp_path):
    tokenizer = Tokenizer.from_pretrained(tiny)
    examples = read_pairs(write_jsonl(tmp_path / "t.jsonl", colour_pairs(3) + [
        {"source": "a", "target": "the car is red and fast"}]), DataConfig())
    features = get_task("seq2seq").encode(tokenizer, examples, DataConfig(max_target_length=4), None, True, "train")
    assert features[0]["labels"].tolist() == tokenizer(["red car"], return_tensors=None)["input_ids"][0][1:]  # after [CLS], with [SEP]
    assert len(features[3]["labels"]) == 4  # cut to max_target_length
    batch = Collator(tokenizer.pad_token_id)(features)
    assert batch["labels"].shape == (4, 4) and batch["labels"][0, -1] == -100
    model = get_task("seq2seq").build_model(tiny, None, None, {})
    out = model(**batch)
    assert out.logits.shape[:2] == (4, 4) and torch.isfinite(out.loss)


def test_rouge_and_exact_match_read_every_script():
    """rouge-score's tokens are ASCII runs: Chinese, Hebrew or Cyrillic targets had no token, so
    ROUGE-L was 0 for a perfect answer and any two answers matched exactly."""
    from bertkit.tasks.metrics import rouge_l, text_exact_match, text_tokens

    assert rouge_l("我爱你", "我爱你") == 1.0 and rouge_l("我爱北京", "我在北京") == pytest.approx(0.75)
    assert text_exact_match(["שלום"], ["ירושלים"]) == 0.0 and text_exact_match(["Мы дома"], ["мы дома"]) == 1.0
    assert text_exact_match(["Größe"], ["Grüße"]) == 0.0  # "gr e" both, before
    assert text_tokens("Well-known, foo_bar £5bn") == ["well", "known", "foo", "bar", "5bn"]  # as rouge-score


def test_rouge_l_matches_rouge_score_on_real_definitions():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    definitions = [e.text for e in wordnet_reverse_dictionary(limit=200, seed=1, pos=("adv",))]
    pairs = list(zip(definitions[::2], definitions[1::2])) + [(d, d[: len(d) // 2]) for d in definitions[:20]]
    pairs += [("Well-known cat!", "well - known  cat"), ("", "a cat"), ("...", "a")]
    for prediction, reference in pairs:
        expected = scorer.score(reference, prediction)["rougeL"].fmeasure
        assert rouge_l(prediction, reference) == pytest.approx(expected, abs=1e-12)


def test_rouge_l_and_exact_match_by_hand():
    # LCS("a b c d", "a c d e") = 3: P = 3/4, R = 3/4
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert rouge_l("the cat", "cat the") == pytest.approx(0.5)  # LCS 1 of 2 and 2
    assert text_exact_match(["Well-known!", "dog"], ["well - known", "cat"]) == 0.5


def test_wordnet_reverse_dictionary_is_real_and_split_once():
    examples = wordnet_reverse_dictionary(limit=500, seed=0)
    assert len(examples) == 500 and all(e.text and e.label for e in examples)
    assert len({e.label for e in examples}) > 400  # many different words
    splits = builtin_splits("wordnet-reverse-dictionary")
    sizes = {name: len(items) for name, items in splits.items()}
    assert sum(sizes.values()) > 100_000 and sizes["train"] > 6 * sizes["dev"]
    assert not {e.text for e in splits["test"]} & {e.text for e in splits["train"]}  # no definition in both


def test_the_baseline_is_the_lead_or_the_most_frequent_target_as_training_says():
    from bertkit.tasks.formats import TextExample
    from bertkit.tasks.seq2seq import baseline

    article = [TextExample(text=f"storm hits coast {i} today and more words follow here", label=f"storm hits coast {i}")
               for i in range(20)]  # unique headlines: the lead
    assert baseline(article, article[:3])["rouge_l"] == pytest.approx(1.0)
    labels = [TextExample(text=f"a b c {i}", label="red colour") for i in range(20)]  # one repeated target
    assert baseline(labels, labels[:3])["exact_match"] == 1.0
    # which predictor it is, said beside its numbers ("trivial baseline: rouge_l=0.1636" left it unsaid)
    assert baseline(article, article[:3])["method"] == "the source's first 4 words"
    assert baseline(labels, labels[:3])["method"] == "the most frequent target"


def test_finetune_evaluate_predict_through_the_cli(tiny, tmp_path, capsys):
    train = write_jsonl(tmp_path / "train.jsonl", colour_pairs(12))
    dev = write_jsonl(tmp_path / "dev.jsonl", colour_pairs(6))
    out = str(tmp_path / "s2s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "seq2seq", "--model", tiny, "--train", train, "--dev", dev, "--out", out,
                     "--no-progress", "--seed", "0", "--set", "train.max_steps=2", "train.batch_size=4",
                     "data.max_length=16", "data.max_target_length=4"]) == 0
        summary = json.load(open(f"{out}/finetune_summary.json"))
        assert summary["spec"]["task"] == "seq2seq" and summary["select_metric"] == "rouge_l"
        assert summary["dev_baseline"]["exact_match"] == pytest.approx(1 / 6)
        assert summary["dev_baseline"]["method"] == "the most frequent target"
        assert "baseline (the most frequent target): rouge_l=" in capsys.readouterr().out
        assert main(["evaluate", "--model", out, "--data", dev]) == 0
        printed = capsys.readouterr().out.strip().splitlines()
        # the most frequent training target, refitted on the recorded training data: on dev, finetune's number
        assert json.loads(printed[-1])["baselines"] == {"trivial": summary["dev_baseline"]}
        assert printed[-3] == f"baseline (the most frequent target): " \
            f"{json.dumps({k: v for k, v in summary['dev_baseline'].items() if k != 'method'})}"
        assert printed[-2].startswith(f"model on {dev}: rouge_l=") and ", exact_match=" in printed[-2]
        assert main(["evaluate", "--model", out, "--data", dev, "--int8"]) == 2  # (was an AttributeError)
        assert "a seq2seq (encoder-decoder) model also generates with its decoder" in capsys.readouterr().err
        assert main(["finetune", "--task", "seq2seq", "--model", tiny, "--train", train, "--dev", dev, "--out",
                     str(tmp_path / "peft"), "--peft", "prefix"]) == 2  # LoRA only (tests/tasks/test_seq2seq_peft.py)
        assert "--peft prefix is not available for --task seq2seq (an encoder-decoder); use --peft lora" in \
            capsys.readouterr().err
        (tmp_path / "train.jsonl").write_text("", encoding="utf-8")  # the training data changed since
        assert main(["evaluate", "--model", out, "--data", dev]) == 0
        printed = capsys.readouterr().out.strip().splitlines()
        assert printed[-3].startswith("baselines: not computed, ") and "baselines" not in json.loads(printed[-1])
        inputs = tmp_path / "in.txt"
        inputs.write_text("the car is red and fast\n\nthe car is blue and fast\n", encoding="utf-8")
        assert main(["predict", "--model", out, "--input", str(inputs), "--output", str(tmp_path / "p.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2] and rows[1]["generated"] is None
    assert isinstance(rows[0]["generated"], str) and rows[2]["source"] == "the car is blue and fast"
    # the analysis commands read its encoder (they had refused model_type 'encoder-decoder')
    stats = tmp_path / "a.jsonl"
    assert main(["attention", "--model", out, "the car is red", "--stats", str(stats)]) == 0
    assert stats.read_text().strip()


def test_a_tiny_bert2bert_learns_its_training_pairs(tiny, tmp_path):
    from bertkit.recipes.finetune import finetune

    train = write_jsonl(tmp_path / "train.jsonl", colour_pairs(12))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("seq2seq", tiny, train, train, str(tmp_path / "m"),
                           {"train": {"max_steps": 120, "batch_size": 12, "lr": 3e-3, "warmup_ratio": 0.0,
                                      "eval_every": 40, "seed": 0},
                            "data": {"max_length": 16, "max_target_length": 4}}, progress=False)
    assert summary["best_dev"]["exact_match"] == 1.0  # the baseline: 1/6
    model = EncoderDecoderModel.from_pretrained(str(tmp_path / "m"))
    spec = TaskSpec(get_task("seq2seq"), DataConfig(max_length=16, max_target_length=4, num_beams=2))
    examples = read_pairs(train, spec.data)
    assert evaluate_examples(model, Tokenizer.from_pretrained(tiny), spec, examples)["exact_match"] == 1.0
    # data.no_repeat_ngram_size reaches generate (its effect: tests/test_generation.py, against transformers)
    calls, generate = [], model.generate
    model.generate = lambda *args, **options: calls.append(options) or generate(*args, **options)
    spec = TaskSpec(get_task("seq2seq"), DataConfig(max_length=16, max_target_length=4, no_repeat_ngram_size=2))
    assert evaluate_examples(model, Tokenizer.from_pretrained(tiny), spec, examples)["exact_match"] == 1.0
    assert calls and all(options["no_repeat_ngram_size"] == 2 for options in calls)
    with pytest.raises(ConfigError, match="data.no_repeat_ngram_size must be an integer >= 0"):
        DataConfig(no_repeat_ngram_size=-1)
