"""Streamed pre-training (`data.streaming = true`): exact resume, lazy reading, rank shards, mixing."""

import json
import os
import shutil

import numpy as np
import pytest
import torch

from tests.cli_checks import run_command
from bertkit.data.examples import PretrainingDataset, SpecialTokens, make_builder
from bertkit.data.shards import ShardedCorpus, prepare_shards
from bertkit.data.streaming import DocumentSubset, MixedExamples, StreamingBatches, streaming_batches

CONFIG = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "pretrain-tiny.toml")


def sets(items):
    return [x for item in items for x in ("--set", item)]


def small_run(tok_dir):
    return ["data.max_documents=60", f"tokenizer.path={tok_dir}", "data.max_length=32",
            "model.max_position_embeddings=32", "model.hidden_size=64", "model.intermediate_size=128",
            "train.batch_size=8", "train.warmup_steps=2", "train.log_every=1", "train.eval_every=6",
            "data.max_eval_examples=16", "data.streaming=true", "data.block_docs=4",
            "data.general_corpus=wordnet", "data.general_max_documents=200", "data.general_fraction=0.25"]


def train_losses(out):
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return {r["step"]: r["loss"] for r in rows if r["split"] == "train"}


def test_streamed_run_resumes_exactly(tmp_path, bbc_tok_examples, monkeypatch):
    monkeypatch.setattr("bertkit.train.trainer.Trainer.plot", lambda self: None)  # PNGs: not tested here
    _, tok_dir, _ = bbc_tok_examples
    full = str(tmp_path / "full")
    args = ["--config", CONFIG, "--no-progress", *sets(small_run(tok_dir) + ["train.max_steps=6", "train.save_every=3"])]
    assert run_command("pretrain", ["--out", full, *args]) == 0
    expected = train_losses(full)

    # The data position is in the checkpoint: mid-block, past general examples too.
    state = torch.load(os.path.join(full, "checkpoint-3", "trainer_state.pt"), weights_only=True)
    data = state["ranks"][0]["collator"]["data"]
    assert data["count"] == 3 * 8 and data["general"]["offset"] + data["general"]["block"] > 0
    assert (data["domain"]["block"], data["domain"]["offset"]) != (0, 0)

    # Interrupted after step 3: only checkpoint-3 is left; resuming must give the same losses.
    cut = str(tmp_path / "cut")
    shutil.copytree(full, cut)
    shutil.rmtree(os.path.join(cut, "checkpoint-6"))
    assert run_command("pretrain", ["--out", cut, *args, "--resume"]) == 0
    resumed = train_losses(cut)
    assert [resumed[s] for s in (4, 5, 6)] == [expected[s] for s in (4, 5, 6)]

    # Control: the same resume with the data position reset to the start differs, so the
    # equality above is the restored position at work, not a coincidence.
    reset = str(tmp_path / "reset")
    shutil.copytree(full, reset)
    shutil.rmtree(os.path.join(reset, "checkpoint-6"))
    path = os.path.join(reset, "checkpoint-3", "trainer_state.pt")
    state = torch.load(path, weights_only=True)
    for part in ("domain", "general"):
        state["ranks"][0]["collator"]["data"][part].update(epoch=0, block=0, offset=0)
    state["ranks"][0]["collator"]["data"]["count"] = 0
    torch.save(state, path)
    assert run_command("pretrain", ["--out", reset, *args, "--resume"]) == 0
    assert [train_losses(reset)[s] for s in (4, 5, 6)] != [expected[s] for s in (4, 5, 6)]


class CountingDocs:
    """A corpus proxy that records which documents were read."""

    def __init__(self, docs):
        self.docs, self.read = docs, []

    def __len__(self):
        return len(self.docs)

    def __getitem__(self, i):
        self.read.append(int(i))
        return self.docs[i]

    def sentence_counts(self):
        return self.docs.sentence_counts()


@pytest.fixture(scope="module")
def shards(bbc_tok_examples, tmp_path_factory):
    from bertkit.data.corpus import open_corpus
    from bertkit.data.documents import first

    tok, _, _ = bbc_tok_examples
    directory = tmp_path_factory.mktemp("shards")
    prepare_shards(first(open_corpus("bbc"), 300), tok, directory, progress=False)
    return tok, ShardedCorpus(directory, expected_vocab=tok)


def test_streaming_reads_documents_lazily(shards, monkeypatch):
    tok, corpus = shards
    docs = CountingDocs(corpus)
    builder = make_builder("full_sentences", 64, SpecialTokens.from_tokenizer(tok))
    collated = []
    stream = streaming_batches(builder, docs, np.arange(1, len(corpus)), 8, lambda b: collated.append(b) or b,
                               seed=0, block_docs=16)
    batches = iter(stream)
    assert docs.read == []  # nothing is read before the first batch is asked for
    for _ in range(3):
        next(batches)
    # Three batches of 8 come from the first block: 16 documents of 299 were read, once each.
    assert len(set(docs.read)) == 16 and len(docs.read) == 16
    assert sum(len(b) for b in collated) == 24

    # The recipe streams too: no call builds examples from more than one block of documents.
    import bertkit.data.examples as examples

    sizes = []
    real = examples.build_examples
    monkeypatch.setattr(examples, "build_examples",
                        lambda b, d, idx, rng: sizes.append(len(idx)) or real(b, d, idx, rng))
    stream = streaming_batches(builder, corpus, np.arange(len(corpus)), 8, lambda b: b, seed=0, block_docs=16)
    it = iter(stream)
    for _ in range(40):  # 320 examples: a few blocks' worth
        next(it)
    assert sizes and max(sizes) <= 16 and sum(sizes) < len(corpus) // 2


def test_rank_shards_are_disjoint_and_cover_the_training_documents(shards):
    tok, corpus = shards
    builder = make_builder("full_sentences", 64, SpecialTokens.from_tokenizer(tok))
    train_docs = np.arange(0, len(corpus), 2)  # a subset: indices are mapped back to the corpus
    read = []
    for rank in range(2):
        docs = CountingDocs(corpus)
        sub = DocumentSubset(docs, train_docs)
        ds = PretrainingDataset(sub, builder, seed=3, rank=rank, world_size=2, block_docs=8)
        n = sum(1 for _ in ds)  # one epoch of this rank
        assert n > 0 and ds.state_dict()["epoch"] == 1
        read.append(set(docs.read))
    assert not read[0] & read[1]
    assert read[0] | read[1] == set(train_docs.tolist())


def test_mixed_stream_is_exact_and_resumable(shards):
    tok, corpus = shards
    builder = make_builder("full_sentences", 32, SpecialTokens.from_tokenizer(tok))
    half = len(corpus) // 2

    def make():
        domain = PretrainingDataset(DocumentSubset(corpus, np.arange(half)), builder, seed=0, block_docs=8)
        general = PretrainingDataset(DocumentSubset(corpus, np.arange(half, len(corpus))), builder,
                                     seed=1, block_docs=8)
        return MixedExamples(domain, general, 0.3)

    mixed = make()
    flags = [mixed.is_general(i) for i in range(1000)]
    for start in range(0, 1000, 100):
        for n in (10, 37, 100):
            window = sum(flags[start:start + n])
            assert abs(window - 0.3 * n) <= 1
    assert sum(flags) == 300

    # Batches straddle epochs and resume exactly from a saved state.
    collate = lambda b: [ex["input_ids"].tolist() for ex in b]  # noqa: E731
    stream = StreamingBatches(mixed, 16, collate)
    it = iter(stream)
    for _ in range(7):
        next(it)
    state = stream.state_dict()
    ahead = [next(it) for _ in range(5)]
    again = StreamingBatches(make(), 16, collate)
    again.skip(999)  # a pending skip is replaced by the exact state
    again.load_state_dict(state)
    assert [b for b, _ in zip(again, range(5))] == ahead
    # skip(n) alone (no saved state) lands at the same place as drawing n batches
    fresh = StreamingBatches(make(), 16, collate)
    fresh.skip(7)
    assert next(iter(fresh)) == ahead[0]
