"""bf16 training on the GPU (precision "auto"): the loss falls and tracks fp32's; resume is exact;
the loop reads each loss a step late with the fused AdamW kernel, which keeps a non-finite step
from the weights."""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from bertkit.errors import BertkitError
from bertkit.models.config import BertConfig
from bertkit.models.heads import BertForMaskedLM
from bertkit.train import Trainer, TrainConfig
from bertkit.train.optim import is_fused

from .conftest import mlm_batches


class Crash(Exception):
    pass


class Batches:
    """The same fixed batches every epoch; raises when drawing batch number `crash_at` (an interruption)."""

    def __init__(self, batches, crash_at=None):
        self.batches, self.crash_at, self.drawn = batches, crash_at, 0

    def __iter__(self):
        for batch in self.batches:
            self.drawn += 1
            if self.drawn == self.crash_at:
                raise Crash()
            yield batch


def make_trainer(out, precision="auto", max_steps=40, crash_at=None, model_seed=0, log_every=1, save_every=5,
                 prefetch=None, batch_device="cuda"):
    torch.manual_seed(model_seed)
    config = BertConfig(vocab_size=500, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64)
    cfg = TrainConfig(max_steps=max_steps, lr=2e-3, warmup_steps=4, log_every=log_every, save_every=save_every,
                      precision=precision, device="cuda", seed=0)
    data = Batches(mlm_batches(500, 16, 64, 8, device=batch_device), crash_at)
    return Trainer(BertForMaskedLM(config), data, cfg, out_dir=str(out), progress=False, prefetch=prefetch)


def train(out, precision="auto", max_steps=40, crash_at=None, resume=False, model_seed=0):
    trainer = make_trainer(out, precision, max_steps, crash_at, model_seed)
    trainer.train(resume=resume)
    return trainer


def losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"], r["precision"]) for r in map(json.loads, f) if r["split"] == "train"]


def test_bf16_is_the_default_and_tracks_fp32(tmp_path):
    auto = train(tmp_path / "auto")
    assert auto.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    train(tmp_path / "fp32", precision="fp32")
    low, full = losses(tmp_path / "auto"), losses(tmp_path / "fp32")
    assert {p for _, _, p in low} == {auto.precision} and {p for _, _, p in full} == {"fp32"}
    first, last = sum(x for _, x, _ in low[:5]) / 5, sum(x for _, x, _ in low[-5:]) / 5
    assert last < first - 0.5  # it learns
    full_last = sum(x for _, x, _ in full[-5:]) / 5
    assert abs(last - full_last) < 0.05 * full_last, (last, full_last)


def test_resume_is_exact_on_the_gpu(tmp_path):
    train(tmp_path / "full", max_steps=20)
    with pytest.raises(Crash):  # dies drawing the batch of step 13: checkpoints at 5 and 10
        train(tmp_path / "cut", max_steps=20, crash_at=13)
    train(tmp_path / "cut", max_steps=20, resume=True, model_seed=123)
    expected, got = losses(tmp_path / "full"), losses(tmp_path / "cut")
    assert [s for s, _, _ in got] == list(range(1, 21))
    for (step, a, _), (_, b, _) in zip(expected, got):
        # 1e-5, not the CPU test's 1e-6: CUDA's atomic adds (gradients of gathers) may sum in any order
        assert a == pytest.approx(b, abs=1e-5), step


def test_the_loop_reads_late_and_a_non_finite_step_never_reaches_the_weights(tmp_path):
    trainer = make_trainer(tmp_path, max_steps=12, log_every=100, save_every=6)
    assert trainer.reads_late and is_fused(trainer.optimizer)  # the fused kernel on CUDA: read a step late

    def poison(module, args, output):  # from the 5th forward on, the loss is NaN
        poison.calls += 1
        return output * float("nan") if poison.calls >= 5 else output

    poison.calls = 0
    trainer.model.bert.embeddings.register_forward_hook(poison)
    with pytest.raises(BertkitError, match="loss became nan at step 5"):
        trainer.train()
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())  # steps 5 and 6 skipped on the GPU
    assert not (tmp_path / "checkpoint-6").exists()


class WithoutHostReads(nn.Module):
    """A loss from one of the model's weights and the batch, by operations that never read the
    GPU's results (not the embedding lookup: its backward on CUDA counts unique ids on the host)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask=None, labels=None):
        weight = self.model.bert.encoder.layer[0].attention.output.dense.weight
        return SimpleNamespace(loss=(input_ids.float().mean() * weight).pow(2).mean())


def test_the_trainers_own_step_never_waits_for_the_gpu(tmp_path):
    """Everything the Trainer does around the model in a step (the batch's copy, the numbers it
    all-reduces, clipping, the update that skips a non-finite loss, the schedule) queues work
    without a host sync: CUDA's sync debug mode raises on any."""
    trainer = make_trainer(tmp_path, max_steps=8, log_every=100, save_every=-1)
    trainer.config.grad_clip = 1.0
    batches = trainer._begin(resume=False)
    trainer.ddp_model = WithoutHostReads(trainer.model)
    trainer._train_step(batches)  # the first step creates the optimizer's state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        totals = trainer._train_step(batches)
    finally:
        torch.cuda.set_sync_debug_mode(0)
        trainer._end({}, None, finished=True)
    assert torch.isfinite(totals[0])


def keep_the_gpu_busy(seconds: float) -> None:
    """Queue one kernel that spins about `seconds` on the GPU (its clock measured first, after a spin
    that raises it from idle: calibrated at an idle clock, 1 s of spinning ran 0.36 s on an H200)."""
    cycles = 10**8
    torch.cuda._sleep(2 * cycles)
    torch.cuda.synchronize()
    start = time.perf_counter()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(seconds * cycles / (time.perf_counter() - start)))


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_step_is_queued_while_the_gpu_is_still_busy(tmp_path, prefetch):
    """The host queues a whole step behind a GPU that is still busy: no copy in it waits. Sync
    debug mode (above) does not see a copy from pageable memory that CUDA stages through a pinned
    buffer after waiting for the stream; the clock does. Without prefetching the batches are not
    pinned by the loader, so both routes of the batch's copy are checked (the batches start on the
    host, as a loader gives them; the other tests give them on the GPU, which the loop takes as they are)."""
    trainer = make_trainer(tmp_path, max_steps=8, log_every=100, save_every=-1, prefetch=prefetch, batch_device="cpu")
    batches = trainer._begin(resume=False)
    trainer.ddp_model = WithoutHostReads(trainer.model)
    trainer._train_step(batches)
    keep_the_gpu_busy(1.0)
    start = time.perf_counter()
    try:
        totals = trainer._train_step(batches)
        queued = time.perf_counter() - start
        torch.cuda.synchronize()
        waited = time.perf_counter() - start
    finally:
        trainer._end({}, None, finished=True)
    assert waited > 0.8, "the GPU was not kept busy: the check below would mean nothing"
    assert queued < 0.4, f"queuing the step took {queued:.2f} s of the GPU's {waited:.2f} s: something waited for it"
    assert torch.isfinite(totals[0])
