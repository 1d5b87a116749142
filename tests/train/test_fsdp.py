"""train.strategy = "fsdp" (torch's fully_shard) under the real torchrun: two gloo processes end
with the weights, losses and optimizer moments of one process that takes the same global batch
(as accumulated micro-batches), with gradient clipping and layer-wise lr decay on; the checkpoints
are the files one process writes; a resumed sharded run equals an uninterrupted one."""

import json
import os
import textwrap

import pytest
import torch
from helpers import SimpleMasker, tiny_config, torchrun

from bertkit.models.checkpoint import read_state_dict
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.runtime.resume_check import changed_options
from bertkit.train import LengthBucketedBatches, Trainer, TrainConfig
from bertkit.train.fsdp import check_model

STEPS = 4


def run_training(examples, vocab, out, ctx, strategy, grad_accum, resume=False):
    # Each rank starts from its own random weights: FSDP must begin from rank 0's, as DDP does.
    torch.manual_seed(ctx.rank)
    model = BertForMaskedLM(tiny_config(vocab, dropout=0.0))
    masker = SimpleMasker(static=True)  # a batch is masked the same way whichever process collates it
    data = LengthBucketedBatches(examples, 4, masker, seed=0, rank=ctx.rank, world_size=ctx.world_size)
    # grad_clip 0.05 binds (the gradient norm is about 1-5 here); llrd gives each layer its own lr
    cfg = TrainConfig(max_steps=STEPS, lr=1e-3, warmup_steps=1, batch_size=4, grad_accum=grad_accum, log_every=1,
                      seed=0, device="cpu", grad_clip=0.05, llrd=0.8, save_every=2, strategy=strategy)
    Trainer(model, data, cfg, out_dir=out, collator=masker, ctx=ctx, progress=False).train(resume=resume)


SCRIPT = textwrap.dedent("""
    import json, shutil, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    sys.path.insert(0, {tests!r})
    from test_fsdp import run_training
    from bertkit.runtime.process_group import init_distributed, shutdown
    examples = [{{"input_ids": np.array(x)}} for x in json.load(open({data!r}))]
    ctx = init_distributed("cpu")
    assert ctx.world_size == 2
    run_training(examples, {vocab}, {root!r} + "/fsdp", ctx, "fsdp", grad_accum=2)
    if ctx.is_main:  # a run killed after step 2, as --resume finds it
        shutil.copytree({root!r} + "/fsdp/checkpoint-2", {root!r} + "/resumed/checkpoint-2")
        shutil.copy({root!r} + "/fsdp/metrics.jsonl", {root!r} + "/resumed/metrics.jsonl")
    ctx.barrier()
    run_training(examples, {vocab}, {root!r} + "/resumed", ctx, "fsdp", grad_accum=2, resume=True)
    shutdown()
""")


def trainer_state(run_dir):
    return torch.load(os.path.join(run_dir, f"checkpoint-{STEPS}", "trainer_state.pt"), weights_only=True)


def losses(run_dir):
    return [row["loss"] for row in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl")))]


@pytest.mark.slow
def test_two_process_fsdp_equals_one_process_and_resumes_exactly(tmp_path, bbc_tok_examples):
    tok, _, examples = bbc_tok_examples
    examples = examples[:96]
    data = tmp_path / "examples.json"
    data.write_text(json.dumps([e["input_ids"].tolist() for e in examples]))
    script = tmp_path / "fsdp_script.py"
    script.write_text(SCRIPT.format(tests=os.path.dirname(__file__), data=str(data), root=str(tmp_path),
                                    vocab=tok.vocab_size))
    torchrun(script, timeout=300)

    from bertkit.runtime.process_group import init_distributed

    # one process, the same 4 batches per step as the 2 ranks' 2 micro-batches each, rank 0's init
    run_training(examples, tok.vocab_size, str(tmp_path / "single"), init_distributed("cpu"), "ddp", grad_accum=4)
    fsdp, single, resumed = (str(tmp_path / run) for run in ("fsdp", "single", "resumed"))
    step_dir = f"checkpoint-{STEPS}"
    # the same files as one process writes (a full model.safetensors, not shards)
    assert sorted(os.listdir(os.path.join(fsdp, step_dir))) == sorted(os.listdir(os.path.join(single, step_dir)))

    weights = {run: read_state_dict(os.path.join(run, step_dir)) for run in (fsdp, single, resumed)}
    torch.manual_seed(0)
    initial = BertForMaskedLM(tiny_config(tok.vocab_size, dropout=0.0)).state_dict()
    assert set(weights[fsdp]) == set(weights[single])
    moved = 0.0
    for name, value in weights[single].items():
        torch.testing.assert_close(weights[fsdp][name], value, atol=1e-5, rtol=0, msg=name)
        moved = max(moved, float((value - initial[name]).abs().max()))
    assert moved > 1e-3  # the weights did train
    assert losses(fsdp) == pytest.approx(losses(single), abs=1e-5)

    # the optimizer state is saved full, in one process's layout: same ids, shapes, groups and lrs
    states = {run: trainer_state(run)["optimizer"] for run in (fsdp, single, resumed)}
    assert [(g["names"], g["lr"]) for g in states[fsdp]["param_groups"]] == \
        [(g["names"], pytest.approx(g["lr"])) for g in states[single]["param_groups"]]
    assert len({g["initial_lr"] for g in states[single]["param_groups"]}) > 2  # llrd: a peak lr per layer
    assert states[fsdp]["state"].keys() == states[single]["state"].keys()
    for i, moments in states[single]["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(states[fsdp]["state"][i][key], moments[key], rtol=1e-4, atol=1e-9)

    # resumed from step 2 under FSDP: the uninterrupted run's weights, moments and losses, exactly
    assert losses(resumed) == losses(fsdp)
    for name, value in weights[fsdp].items():
        assert torch.equal(weights[resumed][name], value), name
    for i, moments in states[fsdp]["state"].items():
        for key, value in moments.items():
            assert torch.equal(states[resumed]["state"][i][key], value), (i, key)


def test_fsdp_in_one_process_says_to_use_torchrun(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(ConfigError, match="torchrun --nproc_per_node"):
        TrainConfig(strategy="fsdp")
    with pytest.raises(ConfigError, match="not known; use one of"):
        TrainConfig(strategy="zero3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert TrainConfig(strategy="fsdp").strategy == "fsdp"  # under torchrun
    with pytest.raises(ConfigError, match='does not support train.precision = "fp16"'):
        TrainConfig(strategy="fsdp", precision="fp16")


def test_an_fsdp_run_may_resume_in_one_process_as_ddp():
    """walk T: a run started under torchrun with train.strategy = "fsdp" could not go on in one
    process: FSDP refuses one process ("or leave train.strategy = ddp") and --resume refused the
    change to ddp. Its checkpoints are one process's layout (the test above), so ddp reads them."""
    saved = {"train": {"strategy": "fsdp", "lr": 2e-3}}
    assert changed_options(saved, {"train": {"strategy": "ddp", "lr": 2e-3}}) == []
    assert changed_options(saved, {"train": {"strategy": "ddp", "lr": 1e-3}}) != []  # the rest still counts


def test_models_fsdp_cannot_train_are_named():
    base = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                max_position_embeddings=16)
    check_model(BertForMaskedLM(tiny_config(50)))  # the plain encoder is fine
    from bertkit.models.config import BertConfig

    with pytest.raises(ConfigError, match="model.num_experts"):
        check_model(BertForMaskedLM(BertConfig(**base, num_experts=2)))
    with pytest.raises(ConfigError, match="position_embedding_type = 'relative_key'"):
        check_model(BertForMaskedLM(BertConfig(**base, position_embedding_type="relative_key")))

    class Wrapper(torch.nn.Module):  # as the class-weighted loss wraps a task model
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

    with pytest.raises(ConfigError, match="model.num_experts"):
        check_model(Wrapper(BertForMaskedLM(BertConfig(**base, num_experts=2))))

    from bertkit.models.heads import BertForSequenceClassification
    from bertkit.peft import LoraConfig, get_peft_model

    lora = get_peft_model(BertForSequenceClassification(BertConfig(**base, num_labels=2)), LoraConfig(r=2))
    with pytest.raises(ConfigError, match="does not support PEFT models"):
        check_model(Wrapper(lora))
