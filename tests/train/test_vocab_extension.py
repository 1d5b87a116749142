"""tokenizer.extend_vocab: the words of the user's text a checkpoint's WordPiece or byte-level BPE vocabulary
splits, added after its ids, with rows that start as the mean of the old pieces' rows."""

import json
import os
import shutil

import pytest
import torch
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import models, pre_tokenizers, trainers

from bertkit.errors import ConfigError
from bertkit.models.checkpoint import read_state_dict
from bertkit.recipes.continued import grow_vocabulary
from bertkit.recipes.pretrain import TokenizerSection, extend_tokenizer, parse_config
from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.extend import MergeGrowth, extended, old_pieces, words_to_add
from tests.cli_checks import run_command

NEWS = ["the minister said the economy grew in the first quarter of the year",
        "shares in the bank rose after the results were published on monday",
        "the film won an award at the festival and the actor thanked the director"] * 20
KERNEL = ["the driver calls kmalloc before it registers the sysfs attribute",
          "kmalloc returns memory and kfree releases it; the sysfs file shows the counter",
          "a spinlock guards the list while the interrupt handler runs kmalloc with gfp_atomic"] * 10


@pytest.fixture(scope="module")
def news_tokenizer():
    return Tokenizer.train_wordpiece(texts=NEWS, vocab_size=120, min_frequency=1, show_progress=False)


def test_words_saving_the_most_tokens_come_first_and_the_count_is_exact(news_tokenizer):
    tok = news_tokenizer
    extension = words_to_add(tok, KERNEL, 4, min_frequency=2)
    words = [w.word for w in extension.words]
    assert len(words) == 4 and "kmalloc" in words and "sysfs" in words
    saved = [w.count * (len(w.pieces) - 1) for w in extension.words]
    assert saved == sorted(saved, reverse=True)  # ranked by the tokens each saves
    for w in extension.words:
        assert list(w.pieces) == tok.tokenize(w.word) and w.word not in tok.get_vocab()
    grown = extended(tok, extension.words)
    # the reported counts are what the two tokenizers really produce on the text
    assert extension.tokens_before == sum(len(tok.tokenize(line)) for line in KERNEL)
    assert extension.tokens_after == sum(len(grown.tokenize(line)) for line in KERNEL)
    assert extension.tokens_after < extension.tokens_before
    assert words_to_add(tok, KERNEL, 4, min_frequency=2) == extension  # reproducible
    # a word seen once is left out at min_frequency 2
    assert "gfp_atomic" not in [w.word for w in words_to_add(tok, KERNEL[:3], 50, min_frequency=11).words]


def test_the_extended_vocabulary_keeps_every_old_id_and_loads_in_transformers(news_tokenizer, tmp_path):
    from transformers import BertTokenizerFast

    tok = news_tokenizer
    grown = extended(tok, words_to_add(tok, KERNEL, 5).words)
    old_vocab, new_vocab = tok.get_vocab(), grown.get_vocab()
    assert {piece: new_vocab[piece] for piece in old_vocab} == old_vocab
    assert sorted(set(new_vocab.values()) - set(old_vocab.values())) == list(range(len(tok), len(tok) + 5))
    assert grown.tokenize("kmalloc and sysfs")[0] == "kmalloc"
    assert old_pieces(grown, len(tok))[new_vocab["kmalloc"]] == tok.convert_tokens_to_ids(tok.tokenize("kmalloc"))
    grown.save_pretrained(tmp_path / "tok")
    hf = BertTokenizerFast.from_pretrained(str(tmp_path / "tok"))
    for line in KERNEL[:3] + NEWS[:3]:
        assert hf(line)["input_ids"] == grown.encode(line)


@pytest.fixture(scope="module")
def bpe_tokenizer():
    return Tokenizer.train_bpe(texts=NEWS, vocab_size=300, min_frequency=1, show_progress=False)


def test_byte_level_bpe_words_become_whole_by_merges_after_the_old_ones(bpe_tokenizer, tmp_path):
    """RoBERTa's vocabulary has no longest match: each word's pieces are joined by new merges ranked
    after every old one, so a text is split as before and then only those joins apply."""
    from transformers import RobertaTokenizer, RobertaTokenizerFast

    tok = bpe_tokenizer
    extension = words_to_add(tok, KERNEL, 6)
    grown = extended(tok, extension.words)
    words = [w.word for w in extension.words]
    assert "Ġkmalloc" in words and "Ġsysfs" in words  # byte-level words: the space before them is theirs
    model = grown.backend_tokenizer.model
    assert all([t.value for t in model.tokenize(word)] == [word] for word in words)  # each one token now
    old_vocab, new_vocab = tok.get_vocab(), grown.get_vocab()
    assert {piece: new_vocab[piece] for piece in old_vocab} == old_vocab  # every old id keeps its meaning
    assert len(grown) > len(tok) + 6  # a word of k pieces adds up to k - 1 tokens: its left-to-right joins
    assert extension.tokens_before == sum(len(tok.tokenize(line)) for line in KERNEL)
    assert extension.tokens_after == sum(len(grown.tokenize(line)) for line in KERNEL) < extension.tokens_before
    pieces = old_pieces(grown, len(tok))
    assert sorted(pieces) == list(range(len(tok), len(grown)))
    assert pieces[new_vocab["Ġkmalloc"]] == tok.convert_tokens_to_ids(list(extension.words[words.index("Ġkmalloc")]
                                                                          .pieces))
    for line in NEWS[:3] + KERNEL[:3]:  # every new token stands for old pieces in the old order
        ids = grown.encode(line, add_special_tokens=False)
        assert [p for i in ids for p in pieces.get(i, [i])] == tok.encode(line, add_special_tokens=False)
    grown.save_pretrained(tmp_path / "tok")  # vocab.json and merges.txt: both transformers tokenizers agree
    for hf in (RobertaTokenizerFast.from_pretrained(str(tmp_path / "tok")),
               RobertaTokenizer.from_pretrained(str(tmp_path / "tok"))):
        for line in KERNEL[:3] + NEWS[:3]:
            assert hf(line)["input_ids"] == grown.encode(line)
    assert words_to_add(tok, KERNEL, 6) == extension  # reproducible


def test_a_bpe_word_whose_joins_would_rebuild_an_old_token_is_left_out(bpe_tokenizer):
    """A new merge that made an old token would be an old id reached by a new path: old_pieces could not
    tell the old merges from the new, so such a word is skipped and the next one taken."""
    tok = bpe_tokenizer
    vocab = tok.get_vocab()
    word = next(w for w in words_to_add(tok, KERNEL, 50).words if len(w.pieces) > 2)
    first_join = word.pieces[0] + word.pieces[1]
    growth = MergeGrowth({**vocab, first_join: len(vocab)})  # as if the old vocabulary held the first join
    assert not growth.add(word) and growth.ranks == {} and growth.words == []
    assert MergeGrowth(vocab).add(word)


def test_bad_extension_settings_are_refused(news_tokenizer, tmp_path):
    with pytest.raises(ConfigError, match="positive number of words"):
        words_to_add(news_tokenizer, KERNEL, 0)
    bpe = Tokenizer.train_bpe(texts=NEWS, vocab_size=300, min_frequency=1, show_progress=False)
    prefixed = RustTokenizer(models.BPE(continuing_subword_prefix="##"))  # merges that do not join pieces as
    prefixed.pre_tokenizer = pre_tokenizers.Whitespace()                   # they are
    prefixed.train_from_iterator(NEWS, trainers.BpeTrainer(vocab_size=200, continuing_subword_prefix="##",
                                                           special_tokens=["<pad>", "<unk>", "<s>", "</s>",
                                                                           "<mask>"], show_progress=False))
    prefixed = bpe.with_backend(prefixed)
    with pytest.raises(ConfigError, match="grows WordPiece .* and byte-level BPE"):
        words_to_add(prefixed, KERNEL, 5)
    with pytest.raises(ConfigError, match="set model.init"):
        parse_config({"tokenizer": {"extend_vocab": 100}})
    with pytest.raises(ConfigError, match=">= 0"):
        parse_config({"tokenizer": {"extend_vocab": -1}})
    # a checkpoint with more embedding rows than its tokenizer has ids: the new ids would land on old rows
    model = _tiny("bert", len(news_tokenizer) + 8)
    model.save_pretrained(tmp_path / "padded")
    news_tokenizer.save_pretrained(tmp_path / "padded")
    with pytest.raises(ConfigError, match="needs the two equal"):
        extend_tokenizer(str(tmp_path / "padded"), TokenizerSection(extend_vocab=5), corpus=None)


def _tiny(kind: str, vocab_size: int):
    torch.manual_seed(0)
    if kind == "modernbert":
        from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM
        return ModernBertForMaskedLM(ModernBertConfig(
            vocab_size=vocab_size, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
            pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)).eval()
    from bertkit import BertConfig, BertForMaskedLM
    return BertForMaskedLM(BertConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=2, max_position_embeddings=64)).eval()


@pytest.mark.parametrize("kind", ["bert", "modernbert"])
def test_new_rows_are_the_mean_of_the_old_pieces_and_old_logits_stay(kind, news_tokenizer, tmp_path):
    from transformers import AutoModelForMaskedLM

    tok = news_tokenizer
    grown = extended(tok, words_to_add(tok, KERNEL, 5).words)
    model = _tiny(kind, len(tok))
    with torch.no_grad():  # a decoder bias that is not zero, so that its rows are checked too
        decoder_bias = model.cls.predictions.bias if kind == "bert" else model.decoder.bias
        decoder_bias.copy_(torch.randn(len(tok)))
    ids = torch.tensor([tok.encode(NEWS[0])])
    with torch.no_grad():
        before = model(ids, full_logits=True).logits
    assert grow_vocabulary(model, grown, len(tok)) == 5
    assert model.config.vocab_size == len(tok) + 5
    table = model.get_input_embeddings().weight
    decoder_bias = model.cls.predictions.bias if kind == "bert" else model.decoder.bias
    for new_id, parts in old_pieces(grown, len(tok)).items():
        assert torch.allclose(table[new_id], table[parts].mean(0))
        assert torch.allclose(decoder_bias[new_id], decoder_bias[parts].mean())
    with torch.no_grad():
        after = model(ids, full_logits=True).logits
    assert torch.allclose(after[..., :len(tok)], before, atol=1e-6)  # the old vocabulary's logits are unchanged
    model.save_pretrained(tmp_path / "m")
    hf = AutoModelForMaskedLM.from_pretrained(str(tmp_path / "m")).eval()
    with torch.no_grad():
        assert (hf(ids).logits - after).abs().max() < 1e-5


def test_continued_pretraining_with_added_words_runs_and_resumes(tmp_path, capsys):
    """pretrain from scratch a few steps, then continue it on kernel text with 6 words added;
    a run cut after step 2 and resumed ends where the straight one does."""
    from tests.train.test_recipe import CONFIG, SMALL, sets

    base = str(tmp_path / "base")
    assert run_command("pretrain", ["--config", CONFIG, "--out", base, "--no-progress",
                                    *sets(SMALL + ["train.max_steps=4"])]) == 0
    corpus = tmp_path / "kernel.txt"
    corpus.write_text("\n\n".join(KERNEL) + "\n")
    args = ["--config", CONFIG, "--no-progress", "--set", f"model.init={base}/checkpoint-4", f"data.corpus={corpus}",
            "data.mode=blank", "tokenizer.extend_vocab=6", "tokenizer.min_frequency=2", "data.max_length=32",
            "train.batch_size=4", "train.warmup_steps=0", "train.log_every=2", "train.eval_every=2",
            "train.save_every=2", "train.keep_last=0", "train.max_steps=4", "data.max_eval_examples=4"]
    capsys.readouterr()
    straight = str(tmp_path / "straight")
    assert run_command("pretrain", args + ["--out", straight]) == 0
    assert "6 words of data.corpus added" in capsys.readouterr().out
    old_size = json.load(open(os.path.join(base, "checkpoint-4", "config.json")))["vocab_size"]
    config = json.load(open(os.path.join(straight, "checkpoint-4", "config.json")))
    assert config["vocab_size"] == old_size + 6
    saved = Tokenizer.from_pretrained(os.path.join(straight, "checkpoint-4"))
    assert len(saved) == old_size + 6 and saved.tokenize("kmalloc")[0] == "kmalloc"

    cut = str(tmp_path / "cut")  # stopped after step 2: resumed, it must end with the same weights
    shutil.copytree(straight, cut)
    shutil.rmtree(os.path.join(cut, "checkpoint-4"))
    assert run_command("pretrain", args + ["--out", cut, "--resume"]) == 0
    a = read_state_dict(os.path.join(straight, "checkpoint-4"))
    b = read_state_dict(os.path.join(cut, "checkpoint-4"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_continued_pretraining_of_a_roberta_grows_its_bpe_vocabulary_and_loads_in_transformers(tmp_path, capsys):
    """A byte-level BPE checkpoint (the RoBERTa recipe, a few steps) continued on kernel text with 4 words
    added: the words are one token each, the model has a row per new token, and transformers reads both."""
    from transformers import RobertaForMaskedLM, RobertaTokenizerFast

    from tests.train.test_recipe import SMALL, sets

    roberta = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-roberta-tiny.toml")
    small = [*SMALL, "model.max_position_embeddings=34", "train.max_steps=2"]
    base = str(tmp_path / "base")
    assert run_command("pretrain", ["--config", roberta, "--out", base, "--no-progress", *sets(small)]) == 0
    corpus = tmp_path / "kernel.txt"
    corpus.write_text("\n\n".join(KERNEL) + "\n")
    capsys.readouterr()
    grown = str(tmp_path / "grown")
    assert run_command("pretrain", ["--config", roberta, "--out", grown, "--no-progress", *sets(
        [*small, f"model.init={base}/checkpoint-2", f"data.corpus={corpus}", "data.mode=blank",
         "tokenizer.extend_vocab=4", "tokenizer.min_frequency=2", "data.max_eval_examples=4"])]) == 0
    printed = capsys.readouterr().out
    assert "4 words of data.corpus added" in printed and "new tokens (the merges that build them)" in printed
    assert "(e.g. kmalloc, " in printed and "Ġ" not in printed  # the words as text, not in the byte alphabet
    tokenizer = Tokenizer.from_pretrained(os.path.join(grown, "checkpoint-2"))
    assert tokenizer.tokenize(" kmalloc") == ["Ġkmalloc"]
    config = json.load(open(os.path.join(grown, "checkpoint-2", "config.json")))
    assert config["vocab_size"] == len(tokenizer) > json.load(open(os.path.join(base, "checkpoint-2",
                                                                                  "config.json")))["vocab_size"]
    hf_tokenizer = RobertaTokenizerFast.from_pretrained(os.path.join(grown, "checkpoint-2"))
    assert hf_tokenizer(KERNEL[0])["input_ids"] == tokenizer.encode(KERNEL[0])
    hf = RobertaForMaskedLM.from_pretrained(os.path.join(grown, "checkpoint-2"))
    assert hf.get_input_embeddings().weight.shape[0] == len(tokenizer)
