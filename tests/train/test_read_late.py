"""The host reads each step's loss one step late (the GPU never waits for it between steps), at
once where a log row, evaluation or checkpoint needs it, and before every update where the
optimizer has no fused kernel. Training is the same either way; a non-finite loss still never
reaches the weights, nor a checkpoint; an optimizer state saved with one AdamW kernel resumes
with the other."""

import pytest
import torch
from helpers import poison_from_forward
from test_trainer import losses, make_trainer

import bertkit.train.trainer as trainer_module
from bertkit.errors import BertkitError
from bertkit.train import list_checkpoints
from bertkit.train.optim import (build_optimizer, is_fused, load_optimizer_state, param_groups,
                                 step_unless_non_finite)


def record_reads(monkeypatch) -> list[tuple[int, int]]:
    """(the trainer's step when the host read, the step whose numbers it read), in order."""
    reads = []
    settle = trainer_module.Trainer._settle

    def recorded(self, launched, bar):
        reads.append((self.step, launched.step))
        return settle(self, launched, bar)

    monkeypatch.setattr(trainer_module.Trainer, "_settle", recorded)
    return reads


def test_each_step_is_read_once_a_step_late_except_where_a_row_needs_it(tmp_path, bbc_tok_examples, monkeypatch):
    tok, _, examples = bbc_tok_examples
    reads = record_reads(monkeypatch)
    trainer = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=12, log_every=5, save_every=0, hidden=32)
    assert trainer.reads_late and is_fused(trainer.optimizer)
    trainer.train()
    assert [read for _, read in reads] == list(range(1, 13))  # every step once, in order
    at_once = [step for step, read in reads if read == step]
    assert at_once == [5, 10, 12]  # the log rows and the last step (its checkpoint)
    assert all(read == step - 1 for step, read in reads if step not in at_once)


def test_reading_late_trains_the_same_as_reading_at_once(tmp_path, bbc_tok_examples, monkeypatch):
    tok, _, examples = bbc_tok_examples
    runs = {}
    for late in (True, False):
        trainer = make_trainer(tmp_path / str(late), examples, tok.vocab_size, max_steps=8, log_every=4,
                               save_every=0, hidden=32)
        trainer.reads_late = late
        trainer.train()
        runs[late] = (losses(tmp_path / str(late)), trainer.model.state_dict())
    assert runs[True][0] == runs[False][0] and len(runs[True][0]) == 2
    assert all(torch.equal(runs[True][1][k], runs[False][1][k]) for k in runs[True][1])


@pytest.mark.parametrize("fused", [True, False])
def test_a_non_finite_loss_never_reaches_the_weights_or_a_checkpoint(tmp_path, bbc_tok_examples, monkeypatch,
                                                                     fused):
    tok, _, examples = bbc_tok_examples
    if not fused:  # a torch without the fused kernel: the per-tensor loop, read before each update
        monkeypatch.setattr(trainer_module, "build_optimizer",
                            lambda model, lr, *args, **kw: torch.optim.AdamW(model.parameters(), lr=lr))
    reads = record_reads(monkeypatch)
    trainer = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=12, log_every=100, save_every=6, hidden=32)
    assert trainer.reads_late == fused
    poison_from_forward(trainer.model, 5)
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(BertkitError, match="loss became nan at step 5"):
        trainer.train()
    # read late, step 6 was already queued when step 5's loss was read: both were skipped on the device.
    # The per-tensor loop read step 5's loss inside the step, before its update.
    assert reads[-1] == ((6, 5) if fused else (4, 4))
    assert list_checkpoints(str(tmp_path)) == []  # checkpoint-6 is never written
    assert all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())
    steps = {float(state["step"]) for state in trainer.optimizer.state.values()}
    assert steps == {4.0}, steps  # four updates counted: the skipped ones left no trace
    assert any(not torch.equal(weights[k], v) for k, v in trainer.model.state_dict().items())


def test_the_fused_kernel_skips_an_update_whose_loss_is_not_finite():
    layer = torch.nn.Linear(4, 3)
    optimizer = build_optimizer(layer, lr=0.1)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    layer(torch.randn(2, 4)).sum().backward()
    step_unless_non_finite(optimizer, torch.tensor(float("inf"), dtype=torch.float64))
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())
    assert all(float(s["step"]) == 0 and not s["exp_avg"].any() for s in optimizer.state.values())
    assert not hasattr(optimizer, "found_inf")  # GradScaler's flag does not outlive the step
    step_unless_non_finite(optimizer, torch.tensor(2.5, dtype=torch.float64))
    assert not torch.equal(before["weight"], layer.weight)
    assert all(float(s["step"]) == 1 for s in optimizer.state.values())


@pytest.mark.parametrize("saved_fused", [False, True])
def test_an_optimizer_state_resumes_with_the_kernel_of_this_run(saved_fused):
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 3)
    saved = torch.optim.AdamW(param_groups(layer, 0.1, 0.01, None), lr=0.1, fused=saved_fused)
    for _ in range(2):
        layer(torch.randn(2, 4)).sum().backward()
        saved.step()
    state = saved.state_dict()
    resumed = (build_optimizer(layer, lr=0.1) if not saved_fused
               else torch.optim.AdamW(param_groups(layer, 0.1, 0.01, None), lr=0.1))
    load_optimizer_state(resumed, state)
    assert all(group["fused"] == resumed.defaults["fused"] for group in resumed.param_groups)
    for moments in resumed.state.values():
        assert float(moments["step"]) == 2 and moments["step"].dtype == torch.float32
    layer(torch.randn(2, 4)).sum().backward()
    resumed.step()  # the kernel runs with the moved step counts
    assert {float(m["step"]) for m in resumed.state.values()} == {3.0}
