"""SentenceEncoder: the MiniLM reference similarity, parity with transformers, errors."""

import glob
import os
import random
import warnings

import numpy as np
import pytest
import torch

from bertkit import BertConfig, BertModel
from bertkit.inference.encode import SentenceEncoder
from bertkit.models.heads import mean_pool
from bertkit.errors import CheckpointError, DataError
from bertkit.data.batches import fixed_batches, inference_batches, length_batches
from bertkit.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def encoder(minilm_dir):
    return SentenceEncoder.from_pretrained(minilm_dir)


def bbc_sentences(bbc_dir, n=50, seed=0):
    """~50 real sentences of varied length: a fixed sample of BBC paragraphs and titles."""
    paragraphs = []
    for path in sorted(glob.glob(os.path.join(bbc_dir, "*", "*.txt")))[::20]:
        with open(path, encoding="utf-8", errors="replace") as f:
            paragraphs += [p.strip() for p in f.read().split("\n") if p.strip()]
    return random.Random(seed).sample(paragraphs, n)


def test_reference_cosine(encoder):
    a, b = encoder.encode(["A man is eating food.", "A man is eating a piece of bread."])
    assert abs(float(a @ b) - 0.755) <= 0.001
    assert np.allclose(np.linalg.norm([a, b], axis=1), 1.0, atol=1e-6)


def test_equals_transformers_on_bbc(encoder, minilm_dir, bbc_dir):
    transformers = pytest.importorskip("transformers")
    texts = bbc_sentences(bbc_dir)
    tok = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    expected = []
    with torch.no_grad():
        for i in range(0, len(texts), 16):  # the plain way: given order, padded batches
            batch = tok(texts[i:i + 16], padding=True, truncation=True, max_length=256, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            expected.append(torch.nn.functional.normalize(mean_pool(hidden, batch["attention_mask"]), dim=-1))
    expected = torch.cat(expected).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # long paragraphs are truncated at 256 in both
        got = encoder.encode(texts, batch_size=8)
    assert got.shape == (len(texts), 384) and got.dtype == np.float32
    assert np.abs(got - expected).max() < 1e-5


def test_order_batch_size_and_normalize(encoder):
    texts = ["short", "a somewhat longer sentence about the economy", "mid length text", "x " * 40]
    full = encoder.encode(texts, batch_size=32)
    assert np.allclose(encoder.encode(texts, batch_size=1), full, atol=1e-5)
    assert np.allclose(encoder.encode(texts[::-1], batch_size=3)[::-1], full, atol=1e-5)
    raw = encoder.encode(texts, normalize=False)
    assert np.allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), full, atol=1e-5)
    one = encoder.encode("one text")  # a (dim,) vector, as sentence-transformers gives for one string
    assert one.shape == (384,) and np.allclose(one, encoder.encode(["one text"])[0], atol=1e-6)


def test_truncation_warns_once(encoder):
    with pytest.warns(UserWarning, match="truncated") as record:
        out = encoder.encode(["word " * 400, "word " * 300, "short"], max_length=32)
    assert len([w for w in record if "truncated" in str(w.message)]) == 1
    assert out.shape == (3, 384)


def test_empty_input_is_a_data_error(encoder):
    with pytest.raises(DataError, match="no texts"):
        encoder.encode([])


@pytest.mark.parametrize("texts", [None, 123, b"bytes"])
def test_texts_that_are_not_strings_are_a_data_error(encoder, texts):
    """encode(None) was a bare "'NoneType' object is not iterable"."""
    with pytest.raises(DataError, match=f"takes a string or a list of strings, got {type(texts).__name__}"):
        encoder.encode(texts)


def test_tokenizer_larger_than_model_vocabulary(encoder):
    class BigVocab:
        vocab_size = encoder.model.config.vocab_size + 1

    with pytest.raises(CheckpointError, match="vocabulary"):
        SentenceEncoder(encoder.model, BigVocab())


def _cost(lengths, batches, overhead):
    return sum(overhead + len(rows) * max(lengths[i] for i in rows) for rows in batches)


def _best_cost(sorted_lengths, batch_size, overhead):
    """Every way to cut the sorted lengths into runs of at most batch_size (brute force)."""
    if not sorted_lengths:
        return 0
    return min(overhead + k * sorted_lengths[0] + _best_cost(sorted_lengths[k:], batch_size, overhead)
               for k in range(1, min(batch_size, len(sorted_lengths)) + 1))


def test_length_batches_are_the_cheapest_cut():
    rng = random.Random(0)
    for _ in range(30):
        lengths = [rng.randint(3, 60) for _ in range(rng.randint(1, 9))]
        batch_size, overhead = rng.randint(1, 5), rng.choice([0, 4, 16, 100])
        batches = length_batches(lengths, batch_size, overhead)
        assert sorted(i for rows in batches for i in rows) == list(range(len(lengths)))
        assert all(len(rows) <= batch_size for rows in batches)
        flat = [lengths[i] for rows in batches for i in rows]
        assert flat == sorted(lengths, reverse=True)  # longest first, runs of the sorted order
        assert _cost(lengths, batches, overhead) == _best_cost(sorted(lengths, reverse=True), batch_size, overhead)


def test_length_batches_cut_only_where_padding_costs_more_than_a_call():
    assert [len(b) for b in length_batches([10] * 70, 32)] == [32, 32, 6]  # no padding: full batches
    lengths = [200] * 3 + [20] * 29  # one fixed batch would pad 29 rows by 180
    assert sorted(len(b) for b in length_batches(lengths, 32)) == [3, 29]
    assert [len(b) for b in length_batches(lengths, 32, overhead=1e9)] == [32]


def test_inference_batches_are_cut_on_a_cpu_only():
    """A GPU runs the real tokens only and pays per call: fixed batches there, whatever `cut` says
    (72 cut calls where 8 fixed ones do made encoding 0.37x a transformers loop on an H200)."""
    lengths = [200] * 3 + [20] * 29
    assert inference_batches(lengths, 32, "cpu") == length_batches(lengths, 32)
    assert inference_batches(lengths, 32, torch.device("cpu"), cut=False) == fixed_batches(lengths, 32)
    for device in ("cuda", torch.device("cuda", 0), "mps"):
        assert inference_batches(lengths, 32, device) == fixed_batches(lengths, 32) == [list(range(32))]


def test_cut_batches_give_the_same_vectors(encoder, bbc_dir):
    texts = bbc_sentences(bbc_dir, n=24, seed=1)
    fixed = type("FixedBatches", (SentenceEncoder,), {"cut_batches": False})(encoder.model, encoder.tokenizer,
                                                                              encoder.layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # long paragraphs are truncated
        assert np.abs(encoder.encode(texts, max_length=128) - fixed.encode(texts, max_length=128)).max() < 1e-5


def test_the_packed_copy_follows_the_models_weights(minilm_dir):
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    model = BertModel(BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size))
    encoder = SentenceEncoder(model, tokenizer)
    plain = type("Unpacked", (SentenceEncoder,), {"pack_weights": False})(model, tokenizer)
    texts = ["a short one", "a somewhat longer sentence about the economy"]
    assert np.abs(encoder.encode(texts) - plain.encode(texts)).max() < 1e-5
    first = encoder.runner
    with torch.no_grad():  # what a training step on encoder.model does
        for p in model.encoder.layer[0].attention.self.parameters():
            p.mul_(1.5)
    assert np.abs(encoder.encode(texts) - plain.encode(texts)).max() < 1e-5
    assert encoder.runner is not first  # made anew from the changed weights
    again = encoder.runner
    encoder.encode(texts)
    assert encoder.runner is again  # and kept while the weights stay


def test_saving_onto_an_existing_file_names_it(encoder, tmp_path):
    """enc.save_pretrained("train.csv") (an existing file) was a bare FileExistsError."""
    from bertkit.errors import WriteError

    target = tmp_path / "train.csv"
    target.write_text("x")
    for save in (encoder.save_pretrained, encoder.tokenizer.save_pretrained):
        with pytest.raises(WriteError, match="it is a file, not a directory; .*pass a new or existing directory"):
            save(target)
    assert target.read_text() == "x"
