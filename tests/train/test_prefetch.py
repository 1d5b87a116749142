"""Batches drawn ahead in a background thread (train/prefetch.py, on by default on CUDA): the same
batches, masks and losses as drawing them in the training thread, and a run stopped while the
thread was ahead resumes exactly (the checkpoint holds the position of the batches trained on)."""

import itertools
import shutil
import threading

import pytest
import torch
from test_trainer import Crash, losses, make_trainer

from bertkit.train import list_checkpoints
from bertkit.train.prefetch import Prefetcher, pinned


def prefetching(trainer):
    trainer.prefetch = True
    return trainer


def test_prefetching_trains_on_the_same_batches(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    plain = make_trainer(tmp_path / "plain", examples, tok.vocab_size)
    assert plain.prefetch is False  # off on the CPU by default
    plain.train()
    ahead = prefetching(make_trainer(tmp_path / "ahead", examples, tok.vocab_size))
    ahead.train()
    assert [s for s, _ in losses(tmp_path / "ahead")] == list(range(1, 13))
    assert [b for _, b in losses(tmp_path / "ahead")] == pytest.approx([a for _, a in losses(tmp_path / "plain")],
                                                                         abs=1e-6)
    # after the run, the data position is that of the last batch trained on, not the thread's
    assert (ahead.epoch, ahead.batches_in_epoch) == (plain.epoch, plain.batches_in_epoch)
    assert torch.equal(ahead.collator.gen.get_state(), plain.collator.gen.get_state())
    assert not any(t.name == "bertkit-prefetch" for t in threading.enumerate())


def test_a_prefetching_run_resumes_exactly(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    full, cut = tmp_path / "full", tmp_path / "cut"
    make_trainer(full, examples, tok.vocab_size).train()
    with pytest.raises(Crash):  # the thread dies drawing batch 7 while step 6 runs
        prefetching(make_trainer(cut, examples, tok.vocab_size, crash_at=7)).train()
    assert [s for s, _ in list_checkpoints(str(cut))] == [3, 6]
    # From step 3, saved while the thread had drawn batches 4 and 5 already (at step 6 the
    # thread had just failed, so its state was that of the batches trained on anyway).
    shutil.rmtree(cut / "checkpoint-6")
    prefetching(make_trainer(cut, examples, tok.vocab_size, model_seed=123)).train(resume=True)
    expected, got = losses(full), losses(cut)
    assert [s for s, _ in got] == list(range(1, 13))
    assert [b for _, b in got] == pytest.approx([a for _, a in expected], abs=1e-6)


def test_the_thread_hands_over_errors_and_stops_when_closed():
    def failing():
        yield {"x": torch.zeros(1)}
        raise ValueError("the corpus ran dry")

    batches = Prefetcher(failing(), snapshot=lambda: None)
    assert torch.equal(next(batches)["x"], torch.zeros(1))
    with pytest.raises(ValueError, match="ran dry"):
        next(batches)

    drawn = []
    endless = Prefetcher(({"i": torch.tensor(i)} for i in itertools.count()), snapshot=lambda: len(drawn))
    drawn.append(next(endless))
    assert endless.consumed == 0  # the snapshot taken right after the batch it came with
    endless.close()
    assert not endless._thread.is_alive()
    assert list(Prefetcher(iter([]), snapshot=lambda: None)) == []


def test_tensors_already_on_a_device_are_not_pinned():
    """A data source may yield batches already on the GPU; torch cannot pin those, so they pass as
    they are (meta tensors stand in for them here; a host tensor would be pinned, which needs CUDA)."""
    on_device = torch.empty(2, 3, device="meta")
    batch = pinned({"input_ids": on_device, "note": "kept"})
    assert batch["input_ids"] is on_device and batch["note"] == "kept"
