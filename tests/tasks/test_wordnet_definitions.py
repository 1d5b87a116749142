"""wordnet-definitions (word -> the definition of its most common sense) on a hand-made WordNet
directory with exact expectations, on the real adverbs, its word-level split, and
`model.decoder_layers` (a BERT2BERT decoder warm-started from the checkpoint's first N layers) and
`model.cross_attention_init` (new cross-attention as a copy of the layer's self-attention)."""

from __future__ import annotations

import warnings

import pytest
import torch

from bertkit.data import assets
from bertkit.commands.cli import main
from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError, DataError
from bertkit.models.encoder import BertModel
from bertkit.tasks import builtin_splits, get_task
from bertkit.tasks.realdata import definition_word, wordnet_definitions

from .test_commands import make_tiny_model

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by Princeton\n"
DATA = {
    "noun": [
        '00000001 06 n 02 bank 0 depository_financial_institution 0 000 | a financial institution that accepts '
        'deposits; "he cashed a check at the bank"',
        '00000002 17 n 01 bank 0 000 | sloping land beside a body of water; "they pulled the canoe up on the bank"',
        "00000003 20 n 01 Acer 0 000 | a genus of trees",
        "00000004 04 n 01 run 0 000 | a score in baseball",
        "00000005 06 n 01 bank 2 000 | a container for coins",  # not bank's first sense: left out
    ],
    "verb": [
        "00000101 38 v 01 run 0 000 | move fast by using one's feet",
        "00000102 40 v 01 bank 0 000 | do business with a bank",
    ],
}
INDEX = {
    "noun": ["acer n 1 0 1 0 00000003", "bank n 3 1 @ 3 1 00000002 00000001 00000005",
             "depository_financial_institution n 1 0 1 0 00000001", "run n 1 0 1 0 00000004"],
    "verb": ["bank v 1 0 1 0 00000102", "run v 1 0 1 0 00000101"],
}
EXPECTED = {
    "bank": [("bank (noun)", "sloping land beside a body of water"), ("bank (verb)", "do business with a bank")],
    "run": [("run (noun)", "a score in baseball"), ("run (verb)", "move fast by using one's feet")],
    "acer": [("Acer (noun)", "a genus of trees")],
    "depository financial institution": [("depository financial institution (noun)",
                                          "a financial institution that accepts deposits")],
}


@pytest.fixture
def wordnet(tmp_path):
    for pos in ("noun", "verb", "adj", "adv"):  # no adjectives or adverbs: the header only
        (tmp_path / f"data.{pos}").write_text(HEADER + "".join(line + "\n" for line in DATA.get(pos, [])),
                                              encoding="utf-8")
        (tmp_path / f"index.{pos}").write_text(HEADER + "".join(line + "\n" for line in INDEX.get(pos, [])),
                                               encoding="utf-8")
    return str(tmp_path)


def test_one_example_per_first_sense_grouped_by_word(wordnet):
    examples = wordnet_definitions(seed=0, wordnet_dir=wordnet)
    pairs = [(e.text, e.label) for e in examples]
    words = list(dict.fromkeys(definition_word(text) for text, _ in pairs))  # in order of first appearance
    assert sorted(words) == sorted(EXPECTED)
    assert pairs == [pair for word in words for pair in EXPECTED[word]]  # a word's examples adjacent, file order
    assert examples == wordnet_definitions(seed=0, wordnet_dir=wordnet)  # seeded
    orders = {tuple(definition_word(e.text) for e in wordnet_definitions(seed=s, wordnet_dir=wordnet)) for s in range(6)}
    assert len(orders) > 1  # the seed orders the words
    assert len(wordnet_definitions(limit=3, seed=0, wordnet_dir=wordnet)) == 3


def test_a_missing_index_file_is_named(wordnet, tmp_path):
    (tmp_path / "index.verb").unlink()
    with pytest.raises(DataError, match=r"index\.verb is missing; install it with: apt-get install wordnet-base"):
        wordnet_definitions(wordnet_dir=wordnet)


def test_the_builtin_split_never_puts_a_word_in_two_splits(wordnet, monkeypatch):
    monkeypatch.setattr(assets, "wordnet_dir", lambda: wordnet)
    builtin_splits.cache_clear()
    try:
        splits = builtin_splits("wordnet-definitions")
    finally:
        builtin_splits.cache_clear()
    words = {name: {definition_word(e.text) for e in items} for name, items in splits.items()}
    assert sum(len(items) for items in splits.values()) == 6
    assert not words["train"] & words["test"] and not words["train"] & words["dev"] and not words["dev"] & words["test"]
    assert words["test"]  # 20% of 6 examples, moved forward to the end of a word


def test_real_adverbs():
    examples = {e.text: e.label for e in wordnet_definitions(pos=("adv",))}
    assert len(examples) == 3088
    assert examples["quickly (adverb)"] == "with rapid movements"
    assert examples["in (adverb)"] == "to or toward the inside of"


@pytest.fixture(scope="module")
def two_layers(tmp_path_factory):
    directory = make_tiny_model(tmp_path_factory.mktemp("tiny2"), ["a red car", "a blue car", "the car is fast"] * 3)
    config = BertConfig.from_pretrained(directory).replace(num_hidden_layers=2)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    return directory


def test_decoder_layers_keeps_the_first_layers(two_layers):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = BertModel.from_pretrained(two_layers)
    model = get_task("seq2seq").build_model(two_layers, None, None, {"decoder_layers": 1, "hidden_dropout_prob": 0.0})
    assert model.config.encoder.num_hidden_layers == 2 and model.config.decoder.num_hidden_layers == 1
    assert model.config.decoder.hidden_dropout_prob == 0.0 and model.config.encoder.hidden_dropout_prob == 0.0
    query = model.decoder.bert.encoder.layer[0].attention.self.query.weight
    assert torch.allclose(query, full.encoder.layer[0].attention.self.query.weight)
    with pytest.raises(ConfigError, match="has 2 layers to warm-start from; use 2 or fewer"):
        get_task("seq2seq").build_model(two_layers, None, None, {"decoder_layers": 3})


def test_decoder_layers_is_refused_outside_seq2seq_and_when_not_positive(two_layers, tmp_path, capsys):
    train = tmp_path / "t.csv"
    train.write_text("text,label\na red car,red\na blue car,blue\n", encoding="utf-8")
    base = ["finetune", "--model", two_layers, "--train", str(train), "--dev", str(train), "--out",
            str(tmp_path / "out"), "--no-progress", "--set", "train.max_steps=1", "data.max_length=32"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(base[:1] + ["--task", "classification"] + base[1:] + ["model.decoder_layers=1"]) == 2
        assert "model.decoder_layers is for --task seq2seq" in capsys.readouterr().err
        assert main(base[:1] + ["--task", "seq2seq"] + base[1:] + ["model.decoder_layers=0"]) == 2
        assert "model.decoder_layers must be a positive integer, got 0" in capsys.readouterr().err
        assert main(base[:1] + ["--task", "classification"] + base[1:] + ["model.cross_attention_init=random"]) == 2
        assert "model.cross_attention_init is for --task seq2seq" in capsys.readouterr().err


def test_cross_attention_starts_as_a_copy_of_self_attention(two_layers, tmp_path):
    seq2seq = get_task("seq2seq")
    torch.manual_seed(0)
    random = seq2seq.build_model(two_layers, None, None, {})
    copied = seq2seq.build_model(two_layers, None, None, {"cross_attention_init": "self_attention"})
    for layer, other in zip(copied.decoder.bert.encoder.layer, random.decoder.bert.encoder.layer):
        own = layer.attention.state_dict()
        assert set(own) == set(layer.crossattention.state_dict())
        assert all(torch.equal(own[k], v) for k, v in layer.crossattention.state_dict().items())
        # the default leaves the new layers random (query weights of std initializer_range, not the copy)
        assert not torch.equal(other.crossattention.self.query.weight, other.attention.self.query.weight)
    # the copy is a separate parameter that trains on its own
    layer = copied.decoder.bert.encoder.layer[0]
    assert layer.crossattention.self.query.weight.data_ptr() != layer.attention.self.query.weight.data_ptr()
    with pytest.raises(ConfigError, match="must be one of random, self_attention, got 'copy'"):
        seq2seq.build_model(two_layers, None, None, {"cross_attention_init": "copy"})
    copied.save_pretrained(tmp_path / "b2b")
    with pytest.raises(ConfigError, match="has trained its own; drop the option"):
        seq2seq.build_model(str(tmp_path / "b2b"), None, None, {"cross_attention_init": "self_attention"})
