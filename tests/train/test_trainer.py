"""The training loop: it learns, resumes exactly (also after SIGKILL), keeps the checkpoints
train.keep_last asks for (0: all), stops on a non-finite loss keeping the last good checkpoint,
refuses a different model on resume, and writes checkpoints that `transformers` loads with the
same logits."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch
from helpers import SimpleMasker, poison_from_forward, tiny_config

from bertkit.errors import BertkitError, CheckpointError, ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.train import LengthBucketedBatches, Trainer, TrainConfig, list_checkpoints
from bertkit.train.trainer import load_trainer_state


class Crash(Exception):
    pass


class CrashingMasker(SimpleMasker):
    """Raises on the n-th batch: an interruption between two steps."""

    def __init__(self, seed, crash_at=None):
        super().__init__(seed)
        self.calls, self.crash_at = 0, crash_at

    def __call__(self, examples):
        self.calls += 1
        if self.crash_at is not None and self.calls == self.crash_at:
            raise Crash()
        return super().__call__(examples)


def make_trainer(out, examples, vocab, crash_at=None, model_seed=0, hidden=64, **overrides):
    settings = dict(max_steps=12, lr=2e-3, warmup_steps=2, batch_size=16, log_every=1,
                    save_every=3, keep_last=2, seed=0)
    settings.update(overrides)
    cfg = TrainConfig(**settings)
    torch.manual_seed(model_seed)
    config = tiny_config(vocab).replace(hidden_size=hidden)
    model = BertForMaskedLM(config)
    masker = CrashingMasker(1, crash_at)
    data = LengthBucketedBatches(examples, cfg.batch_size, masker, seed=0)
    return Trainer(model, data, cfg, out_dir=str(out), collator=masker, progress=False)


def losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f) if r["split"] == "train"]


def test_trainer_learns_and_writes_outputs(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    evals = []

    def eval_fn(model):
        evals.append(model.training)
        return {"probe": 1.0}

    trainer = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=40, log_every=5,
                           save_every=20, eval_every=20)
    trainer.eval_fn = eval_fn
    trainer.train()
    rows = losses(tmp_path)
    assert [s for s, _ in rows] == list(range(5, 41, 5))
    first, last = rows[0][1], (rows[-1][1] + rows[-2][1]) / 2
    assert first > 7.0 and last < first - 0.5, rows  # from ~ln(1500) = 7.3 down clearly
    assert evals == [False, False]  # evaluated twice, in eval mode
    assert [s for s, _ in list_checkpoints(str(tmp_path))] == [20, 40]
    none = make_trainer(tmp_path / "nosave", examples, tok.vocab_size, max_steps=2, save_every=-1)
    none.train()  # save_every=-1: no checkpoints at all (fine-tuning keeps only its best model)
    assert list_checkpoints(str(tmp_path / "nosave")) == []
    assert os.path.getsize(tmp_path / "curves.png") > 1000
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert {"step", "loss", "lr", "tokens_per_s"} <= set(rows[0])
    assert [r["step"] for r in rows if r["split"] == "eval"] == [20, 40]
    state = load_trainer_state(str(tmp_path / "checkpoint-40"))  # weights_only=True load
    assert state["step"] == 40 and "collator" in state["ranks"][0]


def test_exact_resume_after_interruption(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    full, cut = tmp_path / "full", tmp_path / "cut"
    make_trainer(full, examples, tok.vocab_size).train()
    with pytest.raises(Crash):  # dies while fetching the batch of step 7
        make_trainer(cut, examples, tok.vocab_size, crash_at=7).train()
    assert [s for s, _ in list_checkpoints(str(cut))] == [3, 6]
    with pytest.raises(BertkitError, match="--resume"):  # never silently overwrite a run
        make_trainer(cut, examples, tok.vocab_size).train()
    # A different initialisation proves the weights come from the checkpoint.
    make_trainer(cut, examples, tok.vocab_size, model_seed=123).train(resume=True)
    expected, got = losses(full), losses(cut)
    assert [s for s, _ in got] == list(range(1, 13))
    for (s, a), (_, b) in zip(expected, got):
        assert a == pytest.approx(b, abs=1e-6), s


@pytest.mark.filterwarnings("ignore:the lr schedule differs")  # max_steps 6 -> 8 on resume
def test_keep_last_zero_keeps_every_checkpoint_and_a_positive_one_prunes(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    make_trainer(tmp_path, examples, tok.vocab_size, max_steps=6, save_every=2, keep_last=0).train()
    assert [s for s, _ in list_checkpoints(str(tmp_path))] == [2, 4, 6]
    # keep_last may change on --resume: back to a number, the next save prunes to it
    make_trainer(tmp_path, examples, tok.vocab_size, max_steps=8, save_every=2, keep_last=2).train(resume=True)
    assert [s for s, _ in list_checkpoints(str(tmp_path))] == [6, 8]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]
    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match=f"train.keep_last must be an integer >= 0: .* or 0 to keep every "
                                              f"checkpoint; got {bad!r}"):
            TrainConfig(keep_last=bad)


def test_resume_with_other_model_config_is_refused(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    make_trainer(tmp_path, examples, tok.vocab_size, max_steps=3).train()
    before = {p: os.path.getmtime(p) for p in (tmp_path / "checkpoint-3").iterdir()}
    with pytest.raises(CheckpointError, match="hidden_size=64 there, 32 now"):
        make_trainer(tmp_path, examples, tok.vocab_size, max_steps=6, hidden=32).train(resume=True)
    assert before == {p: os.path.getmtime(p) for p in (tmp_path / "checkpoint-3").iterdir()}


def test_non_finite_loss_stops_and_keeps_last_checkpoint(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    trainer = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=10, save_every=2)
    weight = trainer.model.bert.embeddings.LayerNorm.weight
    poison_from_forward(trainer.model, 5)
    with pytest.raises(BertkitError, match="loss became nan at step 5"):
        trainer.train()
    assert [s for s, _ in list_checkpoints(str(tmp_path))] == [2, 4]
    assert torch.isfinite(weight).all()  # the bad gradients were never applied
    from bertkit.models.checkpoint import read_state_dict
    saved = read_state_dict(str(tmp_path / "checkpoint-4"))
    assert torch.isfinite(saved["bert.embeddings.LayerNorm.weight"]).all()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]


def test_checkpoint_loads_in_transformers_with_same_logits(tmp_path, bbc_tok_examples):
    import transformers

    tok, _, examples = bbc_tok_examples
    trainer = make_trainer(tmp_path, examples, tok.vocab_size, max_steps=2, save_every=2)
    trainer.tokenizer = tok
    trainer.train()
    ckpt = tmp_path / "checkpoint-2"
    theirs = transformers.BertForMaskedLM.from_pretrained(ckpt).eval()
    ours = BertForMaskedLM.from_pretrained(ckpt)
    ids = torch.tensor([tok.encode("the bank raised interest rates on monday")])
    with torch.no_grad():
        a = ours(ids).logits
        b = theirs(ids).logits
    assert torch.allclose(a, b, atol=1e-4)
    assert (ckpt / "tokenizer.json").exists()


KILL_SCRIPT = textwrap.dedent("""
    import json, os, signal, sys
    import numpy as np, torch
    sys.path.insert(0, {tests!r})
    torch.set_num_threads(1)
    from test_trainer import make_trainer, CrashingMasker
    import test_trainer
    examples = [{{"input_ids": np.array(x)}} for x in json.load(open({data!r}))]

    class Killer(CrashingMasker):
        def __call__(self, batch):
            if self.calls + 1 == 5:  # checkpoint-4 is on disk: die like a preempted job
                os.kill(os.getpid(), signal.SIGKILL)
            return super().__call__(batch)

    test_trainer.CrashingMasker = Killer
    make_trainer({out!r}, examples, {vocab}, max_steps=8, save_every=2).train()
""")


@pytest.mark.slow
def test_resume_after_sigkill(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    examples = examples[:200]
    data = tmp_path / "examples.json"
    data.write_text(json.dumps([e["input_ids"].tolist() for e in examples]))
    out = tmp_path / "run"
    script = KILL_SCRIPT.format(tests=os.path.dirname(__file__), data=str(data), out=str(out),
                                vocab=tok.vocab_size)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert [s for s, _ in list_checkpoints(str(out))] == [2, 4]
    make_trainer(out, examples, tok.vocab_size, max_steps=8, save_every=2).train(resume=True)
    reference = tmp_path / "reference"
    make_trainer(reference, examples, tok.vocab_size, max_steps=8, save_every=2).train()
    got, expected = losses(out), losses(reference)
    assert [s for s, _ in got] == list(range(1, 9))
    assert [round(v, 5) for _, v in got] == [round(v, 5) for _, v in expected]
