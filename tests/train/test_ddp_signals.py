"""A SIGTERM that reaches one rank of a torchrun job stops every rank after the same step,
with one checkpoint of that step; so does the time budget when the ranks' clocks differ (the
ranks agree through the step's all-reduce, read a step late)."""

import json
import os
import textwrap

from helpers import torchrun

from bertkit.train import list_checkpoints

# Both scripts: two gloo ranks on the same examples, then each writes OUT/rank<r>.json.
PREAMBLE = textwrap.dedent("""
    import json, os, signal, sys, time
    import numpy as np, torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests!r})
    from test_ddp import run_training
    from bertkit.errors import RunInterrupted
    from bertkit.train import trainer as trainer_module
    from bertkit.runtime.process_group import init_distributed, shutdown
    examples = [{{"input_ids": np.array(x)}} for x in json.load(open({data!r}))]
    ctx = init_distributed("cpu")
""")

SCRIPT = PREAMBLE + textwrap.dedent("""
    original = trainer_module.Trainer._train_step

    def step(self, batches):  # only rank 1 is signalled, as step 2 begins
        if ctx.rank == 1 and self.step + 1 == 2:
            signal.raise_signal(signal.SIGTERM)
        return original(self, batches)

    trainer_module.Trainer._train_step = step
    try:
        run_training(examples, {vocab}, {out!r}, ctx)
        result = {{"finished": True}}
    except RunInterrupted as e:
        result = {{"exit_code": e.exit_code, "message": str(e)}}
    with open(os.path.join({root!r}, f"rank{{ctx.rank}}.json"), "w") as f:
        json.dump(result, f)
    shutdown()
""")


def run_ranks(template: str, tmp_path, bbc_tok_examples):
    """`template` in two torchrun ranks over 96 BBC examples; their output goes to tmp_path/ddp."""
    tok, _, examples = bbc_tok_examples
    data = tmp_path / "examples.json"
    data.write_text(json.dumps([e["input_ids"].tolist() for e in examples[:96]]))
    out = tmp_path / "ddp"
    script = tmp_path / "ddp_script.py"
    script.write_text(template.format(tests=os.path.dirname(__file__), data=str(data), out=str(out),
                                      vocab=tok.vocab_size, root=str(tmp_path)))
    torchrun(script)
    return out


def test_a_signal_on_one_rank_stops_all_ranks_after_the_same_step(tmp_path, bbc_tok_examples):
    out = run_ranks(SCRIPT, tmp_path, bbc_tok_examples)
    for rank in (0, 1):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert result["exit_code"] == 143, result
        assert f"stopped by SIGTERM after step 2 of 4; saved {out / 'checkpoint-2'}" in result["message"]
    assert [s for s, _ in list_checkpoints(str(out))] == [2]
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [1, 2]


BUDGET_SCRIPT = PREAMBLE + textwrap.dedent("""
    class SteppingClock:  # each perf_counter call moves on `seconds`: a step takes exactly that long
        def __init__(self, seconds):
            self.now, self.seconds = 0.0, seconds
        def perf_counter(self):
            self.now += self.seconds
            return self.now
        def __getattr__(self, name):
            return getattr(time, name)

    # rank 0's steps take 5 s, rank 1's 50 s: on its own clock rank 1 would stop after one step
    trainer_module.time = SteppingClock(5.0 if ctx.rank == 0 else 50.0)
    trainer = run_training(examples, {vocab}, {out!r}, ctx, max_steps=20, max_minutes=0.25, log_every=100)
    with open(os.path.join({root!r}, f"rank{{ctx.rank}}.json"), "w") as f:
        json.dump({{"step": trainer.step}}, f)
    shutdown()
""")


def test_the_budget_stops_all_ranks_after_the_same_step_on_rank_0s_clock(tmp_path, bbc_tok_examples):
    out = run_ranks(BUDGET_SCRIPT, tmp_path, bbc_tok_examples)
    steps = {json.loads((tmp_path / f"rank{rank}.json").read_text())["step"] for rank in (0, 1)}
    # 15 s of rank 0's 5-s steps is 3 steps; the loss (and the clock with it) is read a step late,
    # and step k carries the clock as step k began: 2 steps more
    assert steps == {5}, steps
    assert [s for s, _ in list_checkpoints(str(out))] == [5]
