"""The commands end to end on a few BBC articles: tokenizer train, pretrain (+ resume), fill-mask."""

import hashlib
import json
import os

import pytest

from tests.cli_checks import run_command
from tests.data.test_documents import counting_reads
from bertkit.data.documents import CorpusDocuments
from bertkit.errors import ConfigError
from bertkit.recipes import pretrain
from bertkit.recipes.pretrain import parse_config, train_tokenizer
from bertkit.tokenizer import Tokenizer
from bertkit.train import list_checkpoints

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny.toml")
BERT_CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny-bert.toml")  # segments: NSP
SMALL = ["data.max_documents=40", "tokenizer.vocab_size=1000", "data.max_length=32",
         "model.max_position_embeddings=32", "model.hidden_size=64", "model.intermediate_size=128",
         "train.batch_size=16", "train.lr=1e-3", "train.warmup_steps=2", "train.log_every=2", "train.eval_every=4",
         "train.save_every=4", "data.max_eval_examples=32"]


def sets(items):
    return [x for item in items for x in ("--set", item)]


def test_pretrain_resume_and_fill_mask(tmp_path, capsys):
    out = str(tmp_path / "run")
    args = ["--config", CONFIG, "--out", out, "--no-progress", *sets(SMALL)]
    assert run_command("pretrain", args + sets(["train.max_steps=4"])) == 0
    # Continue the same run to 8 steps: resume picks up checkpoint-4.
    assert run_command("pretrain", args + sets(["train.max_steps=8"]) + ["--resume"]) == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [r["step"] for r in rows if r["split"] == "train"] == [2, 4, 6, 8]
    # the extended run follows the new 8-step schedule (not the finished 4-step one)
    assert [r["lr"] for r in rows if r["step"] == 6 and r["split"] == "train"][0] == pytest.approx(1e-3 * 3 / 6)
    evals = [r for r in rows if r["split"] == "eval"]
    assert {"mlm_loss", "mlm_accuracy", "perplexity"} <= set(evals[-1])
    assert evals[-1]["perplexity"] == pytest.approx(2.718281828 ** evals[-1]["mlm_loss"], rel=1e-6)
    assert [s for s, _ in list_checkpoints(out)] == [4, 8]
    capsys.readouterr()

    model_dir = os.path.join(out, "checkpoint-8")
    assert run_command("fill-mask", ["--model", model_dir, "the [MASK] said on monday", "--top-k", "3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "mask 1:" and len(printed) == 4
    probs = [float(line.split()[-1]) for line in printed[1:]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1
    assert run_command("fill-mask", ["--model", model_dir, "no mask here"]) == 2
    assert "no [MASK]" in capsys.readouterr().err


def test_pretrain_rejects_typos_and_nsp_runs(tmp_path, capsys):
    out = str(tmp_path / "nsp")
    assert run_command("pretrain", ["--config", BERT_CONFIG, "--out", out, "--set", "train.max_step=3"]) == 2
    assert "did you mean train.max_steps?" in capsys.readouterr().err
    # one --set takes many values, and may repeat; --seed N is --set train.seed=N
    args = ["--config", BERT_CONFIG, "--out", out, "--no-progress", "--seed", "5", "--set", *SMALL,
            "data.objective=mlm+sop", "--set", "train.max_steps=2", "train.eval_every=2"]
    assert run_command("pretrain", args) == 0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert "sop_accuracy" in rows[-1]
    saved = json.load(open(os.path.join(out, "pretrain_config.json")))
    assert (saved["train"]["seed"], saved["train"]["max_steps"], saved["data"]["objective"]) == (5, 2, "mlm+sop")
    assert json.load(open(os.path.join(out, "checkpoint-2", "config.json")))["architectures"] == ["BertForPreTraining"]


def test_tokenizer_train_command(tmp_path, bbc_dir, capsys):
    from helpers import bbc_files

    out = str(tmp_path / "tok")
    assert run_command("tokenizer", ["train", "--files", *bbc_files(bbc_dir, 10), "--vocab-size", "300", "--out", out]) == 0
    assert os.path.exists(os.path.join(out, "tokenizer.json"))
    assert "300 tokens" in capsys.readouterr().out
    # a tokenizer in --out is replaced only with --overwrite, and a BPE leaves no stale vocab.txt
    again = ["train", "--files", *bbc_files(bbc_dir, 10), "--vocab-size", "300", "--out", out, "--kind", "bpe"]
    assert run_command("tokenizer", again) == 2
    assert "already holds a tokenizer (tokenizer.json, vocab.txt); choose a new --out" in capsys.readouterr().err
    again[again.index("300")] = "200"  # below the 256 bytes + specials: said so
    assert run_command("tokenizer", again + ["--overwrite"]) == 0
    assert {"vocab.json", "merges.txt"} <= set(os.listdir(out)) and "vocab.txt" not in os.listdir(out)
    assert "above --vocab-size 200" in capsys.readouterr().out
    assert Tokenizer.from_pretrained(out).kind == "bpe"
    assert run_command("tokenizer", again[:-2] + ["--out", str(tmp_path / "c"), "--cased", "--kind", "bpe"]) == 2
    assert "--cased is for --kind wordpiece" in capsys.readouterr().err
    (tmp_path / "model").mkdir()  # a model's weights read its own tokenizer's ids: never replaced under them
    (tmp_path / "model" / "model.safetensors").write_bytes(b"")
    assert run_command("tokenizer", again[:-2] + ["--out", str(tmp_path / "model"), "--overwrite"]) == 2
    assert "holds a model (model.safetensors)" in capsys.readouterr().err
    assert os.listdir(tmp_path / "model") == ["model.safetensors"]



def test_tokenizer_train_refuses_bad_options_and_outs_before_training(tmp_path, bbc_dir, capsys, monkeypatch):
    from helpers import bbc_files

    def no_training(*args, **kwargs):
        raise AssertionError("trained before the bad option was said")

    monkeypatch.setattr(Tokenizer, "train_wordpiece", no_training)
    files = bbc_files(bbc_dir, 10)
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(SystemExit):  # refused while parsing: it was an OverflowError from inside tokenizers
        run_command("tokenizer", ["train", "--files", *files, "--vocab-size", "300", "--min-frequency", "-3",
                                  "--out", str(tmp_path / "o")])
    assert "--min-frequency: must be at least 0, got -3" in capsys.readouterr().err
    cases = [  # (arguments, what the one line says); each had trained first
        (["--files", *files, "--out", str(tmp_path / "a-file")], "it is a file, not a directory"),
        (["--files", *files, "--out", str(tmp_path / "a-file" / "sub")], "Not a directory"),
        (["--files", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")],  # (a folder is read: walk V)
         "missing.txt does not exist (or is not a file); check the path"),
    ]
    for arguments, message in cases:
        assert run_command("tokenizer", ["train", "--vocab-size", "300", *arguments]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    monkeypatch.undo()  # a bad byte past the first bytes probed fails the training: --out, made for it, goes again
    (tmp_path / "late.txt").write_bytes(b"good text here\n" * 2000 + b"caf\xe9\n")
    assert run_command("tokenizer", ["train", "--files", str(tmp_path / "late.txt"), "--vocab-size", "300",
                                     "--out", str(tmp_path / "o")]) == 2
    assert "late.txt is not valid UTF-8" in capsys.readouterr().err and not (tmp_path / "o").exists()
    with pytest.raises(ConfigError, match="min_frequency must be an integer of 0 or more"):
        Tokenizer.train_bpe(files, vocab_size=300, min_frequency=-1, show_progress=False)


def test_tokenizer_train_reads_a_tables_text_column_not_its_header_and_labels(tmp_path, capsys):
    rows = [("The striker scored twice, said the manager.", "sportlabel"), ("Shares fell sharply.", "businesslabel")]
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f'"{t}",{l}\n' for t, l in rows * 20),
                                        encoding="utf-8")
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"body": t, "label": l}) + "\n" for t, l in rows * 20),
                                          encoding="utf-8")
    for name, extra in (("train.csv", []), ("train.jsonl", ["--text-field", "body"])):
        out = str(tmp_path / name.replace(".", "-"))
        assert run_command("tokenizer", ["train", "--files", str(tmp_path / name), "--vocab-size", "500",
                                         "--out", out, *extra]) == 0
        vocabulary = Tokenizer.from_pretrained(out).get_vocab()
        assert "striker" in vocabulary and "shares" in vocabulary
        assert not {"sportlabel", "businesslabel", "label", "text", "body"} & set(vocabulary)


# Files the recipe's tokenizer training wrote before it read the corpus once (it wrote the corpus
# to a scratch file, one sentence per line, and trained on that file): bbc, the first 120
# documents, vocabulary 1500 (bertkit at f9fdfe8, tokenizers 0.23.3).
BEFORE = {("wordpiece", "vocab.txt"): "d21944c45c666a066fc66bb63f8e5919a103f78a3f105a9441fc94d723bb2973",
          ("bpe", "vocab.json"): "be9edec486dda61b60d76e40772f5b2d3b28cba2c9cd427307e52b0dd2f3bae6",
          ("bpe", "merges.txt"): "516249aea083b3f06397b11abd3bccd0ddfbab23e8b1a2ebb7b1d36a50c8c947"}


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_the_tokenizer_trained_from_memory_has_the_vocabulary_the_scratch_file_gave(kind, tmp_path):
    cfg = parse_config({"tokenizer": {"kind": kind, "vocab_size": 1500}, "data": {"max_documents": 120}})
    corpus = CorpusDocuments("bbc", max_documents=120)
    train_tokenizer(cfg.tokenizer, corpus).save_pretrained(tmp_path / "memory")
    scratch = tmp_path / "corpus.txt"  # what the recipe trained on before
    scratch.write_text("".join("\n".join(doc) + "\n" for doc in corpus), encoding="utf-8")
    train = Tokenizer.train_bpe if kind == "bpe" else Tokenizer.train_wordpiece
    extra = {"add_prefix_space": True} if kind == "bpe" else {"lowercase": True}
    train([scratch], vocab_size=1500, min_frequency=2, show_progress=False, **extra).save_pretrained(tmp_path / "file")
    for (which, name), digest in BEFORE.items():
        if which == kind:
            text = (tmp_path / "memory" / name).read_bytes()
            assert text == (tmp_path / "file" / name).read_bytes()
            assert hashlib.sha256(text).hexdigest() == digest


def test_a_run_reads_the_corpus_once_and_builds_the_model_config_for_its_real_vocabulary(tmp_path, monkeypatch):
    built, real_config = [], pretrain.model_config
    reads = counting_reads(monkeypatch)
    monkeypatch.setattr(pretrain, "model_config", lambda *a: built.append(a[1:]) or real_config(*a))
    cfg = pretrain.load_config(CONFIG, SMALL + ["train.max_steps=1", "train.eval_every=1"])
    pretrain.run_and_leave(cfg, str(tmp_path / "run"), progress=False)
    tokenizer = Tokenizer.from_pretrained(str(tmp_path / "run" / "tokenizer"))
    assert len(reads) == 1  # the tokenizer and the shards read the same documents
    assert built == [(cfg.tokenizer.vocab_size, 0),  # checked before the tokenizer is trained, at the size asked
                     (max(tokenizer.get_vocab().values()) + 1, tokenizer.pad_token_id)]  # then its real vocabulary


def test_a_bad_model_value_stops_the_run_before_anything_is_written(tmp_path):
    cfg = pretrain.load_config(CONFIG, SMALL + ["model.num_attention_heads=5"])  # 64 is not a multiple of 5
    with pytest.raises(ConfigError, match=r"^\[model\] .*num_attention_heads"):
        pretrain.run_and_leave(cfg, str(tmp_path / "run"), progress=False)
    assert not (tmp_path / "run").exists()  # no tokenizer/, no shards/


def test_a_small_corpus_from_scratch_gets_a_note_on_how_often_it_is_read():
    """2,500 steps of 16 rows over 542 examples read each about 74 times; 15 held-out examples
    make a noisy score. Continued pre-training (TAPT reads small sets often on purpose), a run
    bounded by the clock and enough text get no note."""
    from types import SimpleNamespace

    from bertkit.train import TrainConfig

    small = SimpleNamespace(num_train_examples=542, num_eval_examples=15)
    train = TrainConfig(max_steps=2500, batch_size=16)
    note = pretrain.small_corpus_note({"preset": "tiny"}, train, small, world_size=1)
    assert note.startswith("pretrain: note: ") and "542 training examples about 74 times" in note
    assert "--set train.max_steps" in note and "rest on 15 examples" in note
    assert pretrain.small_corpus_note({"init": "runs/mini/checkpoint-9400"}, train, small, 1) is None
    assert pretrain.small_corpus_note({}, TrainConfig(max_steps=2500, max_minutes=5.0), small, 1) is None
    enough = SimpleNamespace(num_train_examples=8800, num_eval_examples=300)
    assert pretrain.small_corpus_note({}, TrainConfig(max_steps=2500, batch_size=32), enough, 1) is None
    many_ranks = pretrain.small_corpus_note({}, TrainConfig(max_steps=400, batch_size=32), enough, world_size=40)
    assert "about 58 times" in many_ranks  # 400 x 32 x 40 rows / 8,800


def test_a_table_corpus_with_another_text_field_is_named_by_data_text_field(tmp_path, capsys):
    """A .jsonl corpus whose text is under "body": the error names the setting, which exists (it had
    said `pass text_field=`, and --set data.text_field was an unknown key)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"body": f"the match ended {i} nil after a late goal by the striker."})
                              + "\n" for i in range(40)), encoding="utf-8")
    args = ["--config", CONFIG, "--out", str(tmp_path / "run"), "--no-progress",
            *sets(SMALL + ["train.max_steps=2", f"data.corpus={corpus}"])]
    assert run_command("pretrain", args) == 2
    assert "--set data.text_field=NAME" in capsys.readouterr().err
    assert run_command("pretrain", args + sets(["data.text_field=body"])) == 0
    meta = json.load(open(tmp_path / "run" / "shards" / "meta.json"))
    assert meta["built_from"]["text_field"] == "body"


def test_a_vocabulary_size_below_the_alphabet_is_said():
    cfg = parse_config({"tokenizer": {"vocab_size": 20}, "data": {"max_documents": 5}})
    with pytest.warns(UserWarning, match=r"tokenizer.vocab_size=20 is below the text's alphabet .* has \d+ tokens"):
        train_tokenizer(cfg.tokenizer, CorpusDocuments("bbc", max_documents=5))


def test_a_vocabulary_far_under_the_size_asked_is_said(tmp_path, capsys):
    """walk O #8: 3 short documents gave 41 of 4,000 tokens, and two files 60 of 2,000, unsaid."""
    texts = ["the cat sat on the mat", "a dog ran in the park", "the sun is hot today"]
    (tmp_path / "few.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    cfg = parse_config({"tokenizer": {"vocab_size": 4000}})
    with pytest.warns(UserWarning, match=r"data.corpus: the vocabulary has \d+ tokens of the 4,000 asked: the text "
                                         r"has only \d+ distinct pieces .* a larger corpus gives a fuller vocabulary, "
                                         r"as may a lower tokenizer.min_frequency"):
        train_tokenizer(cfg.tokenizer, CorpusDocuments(str(tmp_path / "few.txt")))
    out = str(tmp_path / "tok")
    args = ["train", "--files", str(tmp_path / "few.txt"), "--vocab-size", "2000", "--min-frequency", "1", "--out", out]
    assert run_command("tokenizer", args) == 0
    said = capsys.readouterr().out
    assert "note: the vocabulary has" in said and "of the 2,000 asked: the text has only" in said
    assert said.rstrip().endswith("a larger corpus gives a fuller vocabulary")  # --min-frequency 1: nothing lower


def test_tokenizer_train_reads_a_folder_as_prepare_does(tmp_path, capsys):
    # walk V: docs/training.md trained the tokenizer on `my_texts/*.txt`, which misses the subfolders
    # prepare reads; a folder was refused ("is a directory; give a file")
    (tmp_path / "texts" / "sub").mkdir(parents=True)
    (tmp_path / "texts" / ".hidden").mkdir()
    (tmp_path / "texts" / "a.txt").write_text("The striker scored twice.\n" * 20, encoding="utf-8")
    (tmp_path / "texts" / "sub" / "b.txt").write_text("Shares fell sharply on Monday.\n" * 20, encoding="utf-8")
    (tmp_path / "texts" / ".hidden" / "c.txt").write_text("zebrawords everywhere\n" * 20, encoding="utf-8")
    (tmp_path / "texts" / "notes.html").write_text("<body>markupword</body>\n" * 20, encoding="utf-8")
    out = str(tmp_path / "tok")
    assert run_command("tokenizer", ["train", "--files", str(tmp_path / "texts"), "--vocab-size", "300",
                                     "--out", out]) == 0, capsys.readouterr().err
    vocabulary = Tokenizer.from_pretrained(out).get_vocab()
    assert "striker" in vocabulary and "shares" in vocabulary  # the subfolder's text too
    assert not {"zebrawords", "markupword", "body"} & set(vocabulary)  # hidden and non-text files left out
