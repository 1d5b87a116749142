"""`--no-progress` on the serving commands (walk R #3): docs/ecosystem.md ("Progress in a log
file") says `embed` takes it, as training does, and `predict` writes its progress lines into a
log too; both refused the option ("unrecognized arguments"). With it they write no progress line;
without it they still do."""

import warnings

import pytest

import bertkit
from bertkit.commands.cli import main


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, minilm2_dir):
    out = tmp_path_factory.mktemp("clf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "classifier newly initialised"
        model = bertkit.BertForSequenceClassification.from_pretrained(minilm2_dir, id2label={0: "a", 1: "b"})
    model.save_pretrained(out, tokenizer=bertkit.Tokenizer.from_pretrained(minilm2_dir))
    return out


def _stderr(argv, capfd):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([str(a) for a in argv]) == 0
    return capfd.readouterr().err


def test_predict_embed_and_evaluate_take_no_progress(classifier, minilm2_dir, tmp_path, capfd):
    texts = tmp_path / "in.txt"
    texts.write_text("".join(f"text number {i} about markets\n" for i in range(25)))
    data = tmp_path / "dev.csv"
    data.write_text("text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(10)))
    runs = {"predict": ["predict", "--model", classifier, "--input", texts, "--output", tmp_path / "p.jsonl",
                        "--set", "data.eval_batch_size=4"],  # several batches: a bar by default
            "encode": ["embed", "--model", minilm2_dir, "--input", texts, "--output", tmp_path / "v.npy",
                       "--batch-size", "1"],  # 25 batches: a bar by default
            "evaluate": ["evaluate", "--model", classifier, "--data", data]}
    for bar, argv in runs.items():
        quiet = _stderr([*argv, "--no-progress"], capfd)
        assert f"{bar}:" not in quiet, (bar, quiet)
        if bar != "evaluate":  # evaluate's bar shows only over many batches; the option is what is tested
            assert f"{bar}: 25/25" in _stderr(argv, capfd)
    assert len((tmp_path / "p.jsonl").read_text().splitlines()) == 25
