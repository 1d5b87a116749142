"""The foundation's CLI commands, run in-process through bertkit.commands.cli.main."""

import io
import json
import sys
import warnings

import numpy as np
import pytest

from bertkit.commands.cli import main


def test_info_counts_parameters(minilm_dir, capsys):
    assert main(["info", minilm_dir, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["config"]["hidden_size"] == 384
    assert info["total"] == 22_713_728  # all-MiniLM-L6-v2's published size
    assert info["parameters"]["encoder.layer.0"] == 1_774_464


def test_tokenize_pair(minilm_dir, capsys):
    assert main(["tokenize", "--model", minilm_dir, "--json", "Unaffordable homes.", "--pair", "Yes"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["tokens"][:4] == ["[CLS]", "una", "##ff", "##ord"]
    assert row["tokens"][-3:] == ["[SEP]", "yes", "[SEP]"]
    assert row["token_type_ids"][-2:] == [1, 1]
    assert row["word_ids"][1:5] == [0, 0, 0, 0]


def test_tokenize_reads_stdin_without_its_last_line_end(tmp_path, capsys, monkeypatch):
    # walk U: `echo "hello world" | bertkit tokenize` showed echo's newline as a byte-level BPE token, "Ċ"
    from bertkit.tokenizer import Tokenizer
    Tokenizer.train_bpe(texts=["hello world, the markets rallied\n"] * 50, vocab_size=300,
                        show_progress=False).save_pretrained(str(tmp_path / "bpe"))
    rows = []
    for typed in ("hello world\n", "hello world\r\n", "hello world\n\n"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(typed.encode("utf-8"))))
        assert main(["tokenize", "--model", str(tmp_path / "bpe"), "--json"]) == 0
        rows.append(json.loads(capsys.readouterr().out)["tokens"])
    assert rows[0] == rows[1] and "Ċ" not in rows[0]
    assert rows[2] == [*rows[0][:-1], "Ċ", rows[0][-1]]  # a blank last line is text: one line end is kept


def test_tokenize_without_max_length_shows_the_whole_text(minilm_dir, capsys):
    # it had cut at the model's 512 tokens and said "(--max-length None): ... leave it out to see them all"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["tokenize", "--model", minilm_dir, "--json", "the markets rallied " * 200]) == 0
    row = json.loads(capsys.readouterr().out)
    assert len(row["input_ids"]) == 602 and row["tokens"][-1] == "[SEP]"
    notes = [str(w.message) for w in caught]
    assert notes == ["the text has 602 tokens, more than the 512 the model reads at once (model_max_length)"]


def test_embed_gives_reference_cosine(minilm_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("A man is eating food.\n\nA man is eating a piece of bread.\n", encoding="utf-8")
    out = tmp_path / "vectors.npy"
    assert main(["embed", "--model", minilm_dir, "--input", str(src), "--output", str(out)]) == 0
    vectors = np.load(out)
    assert vectors.shape == (3, 384)  # row i is line i + 1: the blank line's row is all zeros
    assert not vectors[1].any()
    assert np.allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert abs(float(vectors[0] @ vectors[2]) - 0.755) < 0.001
    assert capsys.readouterr().out.strip().endswith("vectors.npy")
    assert main(["embed", "--model", minilm_dir, "--input", str(src), "--output", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("vectors.npy (it replaced the file that was there)")


@pytest.mark.parametrize("content,message", [
    (b"", "in.txt holds no non-blank input (empty)"),
    (b"   \n\n", "in.txt holds no non-blank input (2 blank)"),
    (b"caf\xe9 au lait\n", "is not UTF-8"),
])
def test_embed_bad_input_is_one_line(minilm_dir, tmp_path, capsys, content, message):
    src = tmp_path / "in.txt"
    src.write_bytes(content)
    out = tmp_path / "vectors.npy"
    assert main(["embed", "--model", minilm_dir, "--input", str(src), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_missing_model_dir(capsys, tmp_path):
    assert main(["info", str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'} does not exist" in capsys.readouterr().err  # named before config.json is looked for


def test_warnings_from_a_command_are_one_line():
    from bertkit.commands.cli import _one_line_warning

    text = _one_line_warning(UserWarning("train: 3 of 10 texts were cut"), UserWarning, "/x/features.py", 86)
    assert text == "bertkit: UserWarning: train: 3 of 10 texts were cut\n"


@pytest.mark.parametrize("argv,usage,message", [
    (["finetune", "--task", "nope", "--model", "m", "--train", "t", "--out", "o"],
     "usage: bertkit finetune ", "invalid choice: 'nope'"),
    (["finetune", "--task", "classification", "--model", "m", "--train", "t", "--out", "o", "--bogus"],
     "usage: bertkit finetune ", "unrecognized arguments: --bogus"),
    (["scale", "sweep", "--sizes"], "usage: bertkit scale sweep ", "--sizes: expected one argument"),
    (["scale", "formula", "--compute", "1e20", "extra"], "usage: bertkit scale formula ",
     "unrecognized arguments: extra"),
    (["tokenizer", "train"], "usage: bertkit tokenizer train ", "required: --files, --vocab-size, --out"),
    (["tokenizer", "train", "--files", "a", "--vocab-size", "9", "--out", "o", "--nope"],
     "usage: bertkit tokenizer train ", "unrecognized arguments: --nope"),
    (["--bogus", "info", "m"], "usage: bertkit [-h] COMMAND", "unrecognized arguments: --bogus"),
    # checked while parsing, before the model loads (they were checked inside encode, named as Python's)
    (["embed", "--model", "m", "--input", "i", "--output", "o", "--batch-size", "0"], "usage: bertkit embed ",
     "argument --batch-size: must be at least 1, got 0"),
    (["embed", "--model", "m", "--input", "i", "--output", "o", "--max-length", "2"], "usage: bertkit embed ",
     "argument --max-length: must be at least 3, got 2"),
    (["nearest", "--model", "m", "--corpus", "c", "q", "--top", "zero"], "usage: bertkit nearest ",
     "argument --top: must be an integer, got 'zero'"),
])
def test_argument_errors_print_the_subcommands_usage(capsys, argv, usage, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage) and message in err, err


def test_set_takes_several_values_per_flag_and_seed_everywhere():
    # scale sweep and probe share the command-line conventions of commands/options.py
    from bertkit.commands.cli import build_parser

    args = build_parser().parse_args(["scale", "sweep", "--sizes", "1x8", "--tokens", "1", "--time-budget", "1",
                                      "--out", "o", "--set", "a.b=1", "c.d=2", "--set", "e.f=3", "--seed", "4"])
    assert args.set == ["a.b=1", "c.d=2", "e.f=3"] and args.seed == 4
    args = build_parser().parse_args(["probe", "--model", "m", "--task", "t", "--out", "o"])
    assert args.seed == 0


def test_a_closed_pipe_ends_the_command_quietly(minilm_dir):
    """`bertkit info ... | head -1`: the reader closing the pipe is no error (it had printed
    "error: Broken pipe")."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "bertkit", "info", "--model", minilm_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes before the command has written the rest
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 141) and b"error" not in err, err
