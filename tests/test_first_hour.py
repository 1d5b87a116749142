"""The bugs a new user met in their first hour (issue 30): `info` and `attention` on the modern
encoder the default recipe writes and on a LoRA adapter folder, stale pre-training shards,
fill-mask past the model's length, `predict` on a plain encoder, warm-up as long as the run.
Each test failed before its fix."""

from __future__ import annotations

import json
import os
import re
import warnings

import pytest
import torch

from bertkit.commands.cli import main
from bertkit.data.documents import CorpusDocuments, shard_documents
from bertkit.data.shards import ShardedCorpus, prepare_shards
from bertkit.errors import DataError
from bertkit.inference.fill_mask import check_mask_spelling, mask_window
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.models.heads import BertForSequenceClassification
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM
from bertkit.peft import LoraConfig, get_peft_model, save_adapter
from bertkit.recipes import pretrain as pretrain_recipe
from bertkit.tokenizer import Tokenizer

from tests.cli_checks import assert_refused
from tests.test_run_safety import PRETRAIN_CONFIG, PRETRAIN_SMALL

TEXTS = ["the film won an award for best actress at the festival on monday.",
         "shares in the company fell sharply on monday after the announcement.",
         "the bank said profits rose and shares in the bank fell on tuesday."]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 10), encoding="utf-8")
    return Tokenizer.train_wordpiece([str(corpus)], vocab_size=200, min_frequency=1, show_progress=False)


@pytest.fixture(scope="module")
def modern_dir(tmp_path_factory, tokenizer):
    """A tiny modern MLM (what `pretrain` with the default recipe writes) of 32 positions."""
    config = ModernBertConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id,
        cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id, local_attention=4,
        max_position_embeddings=32)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("modern")
    ModernBertForMaskedLM(config).save_pretrained(out, tokenizer=tokenizer)
    return str(out)


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory, tokenizer):
    """A tiny BERT encoder without any head."""
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("encoder")
    BertModel(config).save_pretrained(out, tokenizer=tokenizer)
    return str(out)


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, encoder_dir):
    """A LoRA adapter folder (adapter_config.json + adapter weights, no model weights)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the new head's weights are not in the encoder
        model = BertForSequenceClassification.from_pretrained(encoder_dir, num_labels=2)
    peft = get_peft_model(model, LoraConfig(r=2), base_model_path=encoder_dir)
    out = tmp_path_factory.mktemp("adapter")
    save_adapter(peft, out)
    return str(out)


# ---------------------------------------------------------------------------- info, attention
def test_info_describes_the_modern_encoder(modern_dir, capsys):
    assert main(["info", modern_dir, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["config"]["model_type"] == "modernbert"
    assert {"embeddings", "layers.0", "layers.1", "final_norm"} <= set(shown["parameters"])
    state_size = sum(p.numel() for p in ModernBertForMaskedLM.from_pretrained(modern_dir).state_dict().values())
    assert shown["total"] == state_size


def test_attention_runs_on_the_modern_encoder(modern_dir, tmp_path, capsys):
    stats = tmp_path / "stats.jsonl"
    assert main(["attention", "--model", modern_dir, "the film won", "--stats", str(stats)]) == 0
    rows = [json.loads(line) for line in stats.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 * 2  # layers x heads of the tiny preset
    assert "2 layers x 2 heads" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["info", "attention", "export"])
def test_an_adapter_folder_is_explained_alike_by_every_command(command, adapter_dir, tmp_path, capsys):
    argv = {"info": ["info", adapter_dir],
            "attention": ["attention", "--model", adapter_dir, "the film"],
            "export": ["export", "--model", adapter_dir, "--out", tmp_path / "onnx"]}[command]
    assert_refused(argv, capsys, tmp_path, f"{adapter_dir} is a PEFT adapter", "bertkit peft merge --model")


# ---------------------------------------------------------------------------- predict on an encoder
@pytest.mark.parametrize("model", ["encoder", "modern"])
def test_predict_on_an_encoder_names_finetune_and_embed_up_front(model, encoder_dir, modern_dir, tmp_path, capsys):
    """Before: `pass --task classification|...`, and doing so: `no trained head`, a dead end."""
    directory = encoder_dir if model == "encoder" else modern_dir
    (tmp_path / "in.txt").write_text("the film won\n", encoding="utf-8")
    argv = ["predict", "--model", directory, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.jsonl"]
    assert_refused(argv, capsys, tmp_path, "an encoder without a fine-tuned task head",
                   f"bertkit finetune --task classification --model {directory}", "bertkit embed")


# ---------------------------------------------------------------------------- warm-up as long as the run
def _sets(items):
    return [x for item in items for x in ("--set", item)]


@pytest.mark.parametrize("command", ["finetune", "pretrain"])
def test_warmup_at_least_the_run_warns_once_with_both_numbers(command, encoder_dir, tmp_path, capsys):
    """max_steps=3 with warmup_steps=100 ended at the peak learning rate without a word."""
    if command == "finetune":
        data = tmp_path / "train.csv"
        data.write_text("text,label\n" + "".join(f"{t},{i % 2}\n" for i, t in enumerate(TEXTS * 2)), encoding="utf-8")
        argv = ["finetune", "--task", "classification", "--model", encoder_dir, "--train", data, "--dev", data,
                "--out", tmp_path / "run", "--no-progress",
                *_sets(["train.max_steps=3", "train.batch_size=4", "train.warmup_steps=100", "train.warmup_ratio=0",
                        "data.max_length=32"])]
    else:
        argv = ["pretrain", "--config", PRETRAIN_CONFIG, "--out", tmp_path / "run", "--no-progress",
                *_sets([*PRETRAIN_SMALL, "train.max_steps=3", "train.warmup_steps=100"])]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the job's own rule must keep it to one
        assert main([str(a) for a in argv]) == 0
    about_warmup = [str(w.message) for w in caught if "warm-up" in str(w.message)]
    assert len(about_warmup) == 1, about_warmup
    assert "train.warmup_steps=100 is at least the run's train.max_steps=3" in about_warmup[0]


# ---------------------------------------------------------------------------- fill-mask past the model's length
LONG = " ".join(TEXTS)  # 40-odd tokens: more than the tiny model's 32 positions


def test_fill_mask_keeps_a_window_around_a_mask_past_the_models_length(modern_dir, tokenizer, capsys):
    """Truncation cut the [MASK] at the end off, then said `no [MASK] in the text`."""
    text = LONG + " the [MASK] won."
    assert len(tokenizer.encode(text)) > 32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["fill-mask", "--model", modern_dir, text, "--top-k", "3"]) == 0
    assert capsys.readouterr().out.count("mask 1:") == 1
    notes = [str(w.message) for w in caught]
    assert any("more than the model's 32; it read the 30 around the [MASK]" in note for note in notes), notes
    assert not any("return_overflowing_tokens" in note for note in notes), notes


def test_the_window_is_the_models_length_and_holds_every_mask(tokenizer):
    enc = tokenizer("[MASK] " + LONG + " the [MASK] won", truncation=False)
    with pytest.raises(DataError, match=r"\[MASK\]s lie \d+ tokens apart, more than the 32"):
        mask_window(enc, tokenizer.mask_token_id, "[MASK]", 32)
    for text in ("[MASK] " + LONG, LONG + " [MASK]", TEXTS[0] + " [MASK] [MASK] " + LONG):
        enc = tokenizer(text, truncation=False)
        masks = int((enc["input_ids"] == tokenizer.mask_token_id).sum())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            window = mask_window(enc, tokenizer.mask_token_id, "[MASK]", 32)["input_ids"][0]
        assert len(window) == 32 and int((window == tokenizer.mask_token_id).sum()) == masks
        assert window[0] == tokenizer.cls_token_id and window[-1] == tokenizer.sep_token_id


def test_masks_further_apart_than_the_model_are_one_line(modern_dir, tmp_path, capsys):
    assert_refused(["fill-mask", "--model", modern_dir, "[MASK] " + LONG + " the [MASK] won"], capsys, tmp_path,
                   "tokens apart, more than the 32 the model reads at once", "separate calls")


def test_tokenize_tells_a_command_line_user_what_to_do_about_truncation(modern_dir, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["tokenize", "--model", modern_dir, "--max-length", "5", TEXTS[0]]) == 0
    notes = [str(w.message) for w in caught]
    assert len(notes) == 1 and "shown are the first 5 (--max-length 5)" in notes[0], notes
    assert "return_overflowing_tokens" not in notes[0]


# ---------------------------------------------------------------------------- stale shards
def _corpus(directory, words: str, n: int = 12):
    """`n` one-document files of sentences made of `words`."""
    directory.mkdir()
    for i in range(n):
        (directory / f"doc{i:02d}.txt").write_text(f"{words} number {i}.\nthe {words} again.\n", encoding="utf-8")
    return str(directory)


def _first_tokens(docs) -> list[int]:
    return [int(t) for t in docs[0][0]]


def test_shards_are_rebuilt_when_the_corpus_or_settings_change(tokenizer, tmp_path):
    old = _corpus(tmp_path / "old", "the film won an award")
    new = _corpus(tmp_path / "new", "shares in the bank fell")
    shards = str(tmp_path / "shards")
    shard_documents(CorpusDocuments(old), tokenizer, shards)
    with pytest.warns(UserWarning, match=r"holds shards of other data \(data.corpus .*old.* -> .*new.*\); rebuilding"):
        docs = shard_documents(CorpusDocuments(new), tokenizer, shards)
    assert _first_tokens(docs) == tokenizer.encode("shares in the bank fell number 0.", add_special_tokens=False)
    stamp = os.stat(os.path.join(shards, "meta.json")).st_mtime_ns
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same corpus and settings: reused, without a word
        assert len(shard_documents(CorpusDocuments(new), tokenizer, shards)) == 12
    assert os.stat(os.path.join(shards, "meta.json")).st_mtime_ns == stamp
    with pytest.warns(UserWarning, match=r"data.max_documents 0 -> 5"):
        assert len(shard_documents(CorpusDocuments(new, max_documents=5), tokenizer, shards)) == 5
    (tmp_path / "new" / "doc00.txt").write_text("a new first document.\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=r"the corpus files changed since"):
        docs = shard_documents(CorpusDocuments(new, max_documents=5), tokenizer, shards)
    assert _first_tokens(docs) == tokenizer.encode("a new first document.", add_special_tokens=False)


def test_resuming_shards_of_another_corpus_is_refused(tokenizer, tmp_path):
    shards = tmp_path / "shards"
    prepare_shards([["the film won"]], tokenizer, shards, progress=False, built_from={"corpus": "old"})
    with pytest.raises(DataError, match="holds shards built from another corpus or settings"):
        prepare_shards([["the bank fell"]], tokenizer, shards, progress=False, resume=True,
                       built_from={"corpus": "new"})


def test_pretrain_into_an_out_with_a_failed_runs_shards_reads_the_new_corpus(modern_dir, tokenizer, tmp_path):
    """A failed run left OUT/shards; after data.corpus changed the next run read the old shards."""
    old = _corpus(tmp_path / "old", "the film won an award")
    new = _corpus(tmp_path / "new", "shares in the bank fell")
    out = tmp_path / "run"
    shard_documents(CorpusDocuments(old), tokenizer, str(out / "shards"))  # what the failed run left
    argv = ["pretrain", "--config", PRETRAIN_CONFIG, "--out", out, "--no-progress",
            *_sets([*PRETRAIN_SMALL, f'tokenizer.path="{modern_dir}"', f'data.corpus="{new}"'])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([str(a) for a in argv]) == 0
    meta = json.loads((out / "shards" / "meta.json").read_text(encoding="utf-8"))
    assert meta["built_from"]["corpus"] == new
    assert _first_tokens(ShardedCorpus(out / "shards")) == tokenizer.encode("shares in the bank fell number 0.",
                                                                            add_special_tokens=False)


def test_a_failed_runs_tokenizer_is_trained_again_on_the_new_corpus(tmp_path, capsys, monkeypatch):
    """The same leftover one step earlier: OUT/tokenizer trained on the old corpus was reused."""
    old = _corpus(tmp_path / "old", "the film won an award")
    new = _corpus(tmp_path / "new", "shares in the bank fell")
    out = tmp_path / "run"

    def fail(*args, **kwargs):  # the first run dies after training its tokenizer
        raise DataError("stopped here")
    monkeypatch.setattr(pretrain_recipe, "build_data", fail)
    argv = ["pretrain", "--config", PRETRAIN_CONFIG, "--out", out, "--no-progress", *_sets(PRETRAIN_SMALL)]
    assert main([str(a) for a in argv + ["--set", f'data.corpus="{old}"']]) == 2
    assert "award" in Tokenizer.from_pretrained(out / "tokenizer").get_vocab()
    monkeypatch.undo()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([str(a) for a in argv + ["--set", f'data.corpus="{new}"']]) == 0
    notes = [str(w.message) for w in caught if "trained on other data" in str(w.message)]
    assert len(notes) == 1 and f"data.corpus '{old}' -> '{new}'" in notes[0], notes
    vocab = Tokenizer.from_pretrained(out / "tokenizer").get_vocab()
    assert "bank" in vocab and "award" not in vocab


@pytest.mark.parametrize("extra, fragment", [((), "--set tokenizer.path=DIR"),
                                             (("tokenizer.extend_vocab=100",), "--set tokenizer.extend_vocab=0")])
def test_pretraining_prepared_shards_without_their_tokenizer_is_refused_before_any_work(
        extra, fragment, tokenizer, modern_dir, tmp_path, capsys):
    """Without tokenizer.path the run trained a tokenizer on the shard folder's meta.json (its .bin
    files skipped as binary), then found the shards' ids were not its own."""
    shards = tmp_path / "shards"
    prepare_shards([["the film won"], ["the bank fell"]], tokenizer, shards, progress=False)
    sets = [*PRETRAIN_SMALL, f'data.corpus="{shards}"', *extra]
    if extra:
        sets.append(f'model.init="{modern_dir}"')
    argv = ["pretrain", "--config", PRETRAIN_CONFIG, "--out", tmp_path / "run", "--no-progress", *_sets(sets)]
    assert_refused(argv, capsys, tmp_path, "holds", fragment)


def test_a_mask_spelt_another_way_names_the_models_spelling():
    """`[mask]` or RoBERTa's `<mask>` to a BERT model is text to the tokenizer: "no [MASK] in the
    text" alone did not say why."""
    check_mask_spelling("a [MASK] line", "[MASK]")
    for text, found in (("a [mask] line", "[mask]"), ("a <mask> line", "<mask>")):
        with pytest.raises(DataError, match=rf"no \[MASK\] in the text, but {re.escape(found)}: this model's mask token "
                                            r"is \[MASK\], spelt exactly so \(case matters\)"):
            check_mask_spelling(text, "[MASK]")

