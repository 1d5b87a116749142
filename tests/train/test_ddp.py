"""Two gloo processes under torchrun end with the same weights as one process that takes the
same global batch (as two accumulated micro-batches)."""

import json
import os
import textwrap

import pytest
import torch
from helpers import SimpleMasker, tiny_config, torchrun

from bertkit.models.checkpoint import read_state_dict
from bertkit.models.heads import BertForMaskedLM
from bertkit.train import LengthBucketedBatches, Trainer, TrainConfig

STEPS = 4


def run_training(examples, vocab, out, ctx=None, grad_accum=1, **overrides):
    from bertkit.runtime.process_group import init_distributed

    ctx = ctx or init_distributed("cpu")
    torch.manual_seed(0)
    model = BertForMaskedLM(tiny_config(vocab, dropout=0.0))
    # Static masks: a batch is masked the same way whichever process collates it.
    masker = SimpleMasker(static=True)
    data = LengthBucketedBatches(examples, 8, masker, seed=0, rank=ctx.rank, world_size=ctx.world_size)
    settings = dict(max_steps=STEPS, lr=1e-3, warmup_steps=0, batch_size=8, grad_accum=grad_accum,
                    log_every=1, seed=0, device="cpu")
    cfg = TrainConfig(**{**settings, **overrides})
    trainer = Trainer(model, data, cfg, out_dir=out, collator=masker, ctx=ctx, progress=False)
    trainer.train()
    return trainer


SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests!r})
    from test_ddp import run_training
    from bertkit.runtime.process_group import init_distributed, shutdown
    examples = [{{"input_ids": np.array(x)}} for x in json.load(open({data!r}))]
    ctx = init_distributed("cpu")
    assert ctx.world_size == 2
    run_training(examples, {vocab}, {out!r}, ctx)
    shutdown()
""")


def test_two_process_ddp_equals_one_process(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    examples = examples[:96]
    data = tmp_path / "examples.json"
    data.write_text(json.dumps([e["input_ids"].tolist() for e in examples]))
    script = tmp_path / "ddp_script.py"
    script.write_text(SCRIPT.format(tests=os.path.dirname(__file__), data=str(data),
                                    out=str(tmp_path / "ddp"), vocab=tok.vocab_size))
    torchrun(script)

    run_training(examples, tok.vocab_size, str(tmp_path / "single"), grad_accum=2)
    ddp = read_state_dict(str(tmp_path / "ddp" / f"checkpoint-{STEPS}"))
    single = read_state_dict(str(tmp_path / "single" / f"checkpoint-{STEPS}"))
    torch.manual_seed(0)
    initial = BertForMaskedLM(tiny_config(tok.vocab_size, dropout=0.0)).state_dict()
    assert set(ddp) == set(single)
    moved = 0.0
    for name in single:
        assert torch.allclose(ddp[name], single[name], atol=1e-5), name
        moved = max(moved, float((single[name] - initial[name]).abs().max()))
    assert moved > 1e-3  # the weights did train
    losses = [[r["loss"] for r in map(json.loads, open(tmp_path / run / "metrics.jsonl"))]
              for run in ("ddp", "single")]
    assert losses[0] == pytest.approx(losses[1], abs=1e-5)
