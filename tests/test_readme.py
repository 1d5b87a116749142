"""The README's Python example runs as written (on the built-in MiniLM), so it cannot rot."""

import json
import os
import re
import shlex
import warnings
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


FINE_TUNED = '"runs/mine"'  # a block reading the run "Your own data" fine-tunes: run after that section's commands


def test_readme_python_example_runs(minilm_dir, tmp_path, monkeypatch):
    import bertkit

    blocks = [block for block in python_blocks() if FINE_TUNED not in block]
    assert blocks and all('"path/to/model"' in block for block in blocks)
    assert "bertkit.data.assets.minilm_dir()" in blocks[0]  # the example says where the built-in model is
    assert bertkit.data.assets.minilm_dir() == minilm_dir
    monkeypatch.chdir(tmp_path)  # the example writes out/...
    for block in blocks:
        namespace: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "classifier newly initialised"
            exec(compile(block.replace('"path/to/model"', repr(minilm_dir)), str(README), "exec"), namespace)
        if "vectors" in namespace:
            vectors = namespace["vectors"]
            assert vectors.shape == (2, 384)
            assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (tmp_path / "out" / "classifier" / "model.safetensors").is_file()
    assert (tmp_path / "out" / "classifier" / "tokenizer.json").is_file()  # predict and evaluate can read it
    assert (tmp_path / "out" / "embedder" / "modules.json").is_file()


def test_sentence_encoder_is_exported():
    import bertkit
    from bertkit.inference.encode import SentenceEncoder

    assert bertkit.SentenceEncoder is SentenceEncoder


# ---------------------------------------------------------------------------- "Your own data"
def own_data_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text[text.index("## Your own data"):text.index("## Use it from Python")]


def unindented(block: str) -> str:
    """A fenced block's text as its file holds it (the README indents blocks inside a list item)."""
    return "\n".join(line.strip() for line in block.splitlines()) + "\n"


# The section's example files in order: (file name to write, task whose reader must take it,
# [data] settings the text names for it, examples in it).
FORMAT_EXAMPLES = [
    ("train.csv", "classification", {}, 2),
    ("pairs.csv", "classification", {"pair_column": "hypothesis"}, 2),
    ("sts.csv", "similarity", {}, 2),
    ("train.conll", "token-classification", {}, 1),
    ("train.json", "qa", {}, 1),
    ("choices.jsonl", "multiple-choice", {}, 1),
    ("seq2seq.jsonl", "seq2seq", {}, 1),
    ("search.csv", "embedding", {}, 1),
]


def test_readme_file_formats_are_what_the_readers_take(tmp_path):
    from bertkit.tasks import get_task
    from bertkit.tasks.common import DataConfig

    blocks = re.findall(r"```(?:csv|text|json)\n(.*?)\s*```", own_data_section(), flags=re.S)
    assert len(blocks) == len(FORMAT_EXAMPLES)
    for block, (name, task, settings, count) in zip(blocks, FORMAT_EXAMPLES):
        path = tmp_path / name
        path.write_text(unindented(block), encoding="utf-8")
        examples = get_task(task).read(str(path), DataConfig(**settings))
        assert len(examples) == count, (name, examples)
    inline = re.search(r"`train\.jsonl`: one `(\{.*?\})` per line", own_data_section()).group(1)
    (tmp_path / "train.jsonl").write_text(inline + "\n", encoding="utf-8")
    assert get_task("classification").read(str(tmp_path / "train.jsonl"), DataConfig())[0].label == "sport"


# Tiny sizes for the section's commands (the README's sizes take minutes to hours).
TINY = {"finetune": ["--set", "train.max_steps=2", "data.max_length=8", "--no-progress"],  # 8: texts are cut
        "pretrain": ["--set", "train.max_steps=2", "train.batch_size=4", "--no-progress"]}


def readme_commands() -> list[list[str]]:
    """The `bertkit ...` lines of the section's bash blocks, split as the shell would."""
    lines = [line for block in re.findall(r"```bash\n(.*?)```", own_data_section(), flags=re.S)
             for line in block.splitlines() if line.startswith("bertkit ")]
    return [shlex.split(line)[1:] for line in lines]


@pytest.mark.slow
def test_readme_own_data_commands_run(minilm_dir, tmp_path, monkeypatch, capsys):
    from bertkit.commands.cli import main

    monkeypatch.chdir(tmp_path)
    # no configs/ here: the README's --config configs/NAME.toml are bertkit's own, found from any folder
    csv_block = re.search(r"```csv\n(.*?)\s*```", own_data_section(), flags=re.S).group(1)
    for name in ("train.csv", "dev.csv", "test.csv"):
        (tmp_path / name).write_text(unindented(csv_block), encoding="utf-8")
    (tmp_path / "new.txt").write_text("Markets rallied on Monday.\nThe goalkeeper saved a penalty.\n")
    documents = ["Shares fell after the warning. Banks lost most.", "The striker scored twice. Fans sang.",
                 "The phone has a larger screen. Its battery lasts."]
    (tmp_path / "my_texts.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    commands = [c for c in readme_commands() if c[0] != "split"]  # run on a file of its own: tests/test_split.py
    assert [c[0] for c in commands] == ["finetune", "evaluate", "predict", "pretrain", "fill-mask", "pretrain",
                                        "pretrain"]
    saved = None  # the model the last pretrain said it saved
    for argv in commands:
        argv = [minilm_dir if a == "$MODEL" else a for a in argv]
        argv = [a.replace("model.init=$MODEL", f"model.init={minilm_dir}") for a in argv]
        if argv[0] == "fill-mask":  # the README's step count is the recipe's; this run took 2
            argv = [saved if a.startswith("runs/mytext/checkpoint-") else a for a in argv]
        if argv[0] == "pretrain":  # the DAPT stage 2 starts from stage 1's model (also 2 steps here)
            argv = [re.sub(r"runs/my-head/checkpoint-\d+", saved, a) if saved else a for a in argv]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert main(argv + TINY.get(argv[0], [])) == 0, argv
        out = capsys.readouterr().out
        if argv[0] == "evaluate":  # at the length the model was fine-tuned with, a cut text is no news
            assert not [w for w in caught if "were cut" in str(w.message)]
        if argv[0] == "finetune":  # a summary a person reads: 4 significant digits, not a raw dict
            assert "trivial baseline: accuracy=0.5, macro_f1=0.3333, loss=0.6931" in out, out
        if argv[0] == "pretrain":
            saved = re.search(r"model saved in (\S+)", out).group(1)
            assert os.path.isfile(os.path.join(saved, "config.json")) and "/checkpoint-2" in saved
    assert (tmp_path / "runs" / "mine" / "config.json").is_file()
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {row["label"] for row in rows} <= {"business", "sport"}
    # --output - : the same rows on stdout, and nothing else there
    assert main(["predict", "--model", "runs/mine", "--input", "new.txt", "--output", "-"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == rows
    assert not (tmp_path / "-").exists()
    # the Python section's classifier on that run gives predict's labels and probabilities, a text
    # longer than the run's data.max_length included (walk N #6: Python read 512 tokens, predict 8)
    block, predictor_block = [block for block in python_blocks() if FINE_TUNED in block]
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tokenizer's "truncated to max_length=8"
        exec(compile(block, str(README), "exec"), namespace)
    (tmp_path / "snippet.txt").write_text("\n".join(namespace["texts"]) + "\n", encoding="utf-8")
    assert len(namespace["tok"].encode(namespace["texts"][0])) > 8
    assert main(["predict", "--model", "runs/mine", "--input", "snippet.txt", "--output", "-"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert namespace["labels"] == [row["label"] for row in rows]
    names = namespace["clf"].config.id2label
    for probs, row in zip(namespace["probs"].tolist(), rows):
        assert {names[i]: p for i, p in enumerate(probs)} == pytest.approx(row["probabilities"], abs=2e-6)
    # bertkit.Predictor gives predict's rows on new.txt's texts (without the file's line numbers)
    exec(compile(predictor_block, str(README), "exec"), namespace)
    assert main(["predict", "--model", "runs/mine", "--input", "new.txt", "--output", "-"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert namespace["rows"] == [{k: v for k, v in row.items() if k != "line"} for row in rows]
    assert set(namespace["metrics"]) >= {"accuracy", "loss"}  # Predictor.evaluate on test.csv (walk AE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["evaluate", "--model", "runs/mine", "--data", "dev.csv", "--set", "data.max_length=9"]) == 0
        assert main(["embed", "--model", "runs/mine", "--input", "new.txt", "--output", "vectors.npy"]) == 0
    messages = [str(w.message) for w in caught]
    assert any("were cut to data.max_length=9" in m for m in messages), messages  # a new length: news
    assert not [m for m in messages if "not used" in m], messages  # embed reads the encoder of a classifier
    config = json.loads((tmp_path / "runs" / "mine" / "config.json").read_text())
    assert "_name_or_path" not in config and "transformers_version" not in config and config["bertkit_version"]


def test_readme_model_line_names_the_built_in_model(minilm_dir, capsys):
    code = re.search(r'MODEL=\$\(python -c "(.*?)"\)', own_data_section()).group(1)
    exec(code, {})
    assert capsys.readouterr().out.strip() == minilm_dir


def test_readme_keeps_its_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "```bash\nbash scripts/setup.sh && .venv/bin/bertkit quickstart\n```" in text
    assert "```bash\nbash scripts/test.sh\n```" in text
    assert "docs/training.md" in text and (README.parent / "docs" / "training.md").is_file()
