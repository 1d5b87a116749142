"""train.compile: the encoder's layers compiled in place train the same steps as eager ones (the
GPU is where it pays: docs/benchmarks.md), checkpoints keep their keys, and what cannot compile
is refused before any work."""

import json
import os

import pytest
import torch
from test_trainer import make_trainer
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

from bertkit.errors import ConfigError
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM
from bertkit.models.modern.model import ModernBertEncoderLayer
from bertkit.train import Trainer, TrainConfig


def losses(out):
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [r["loss"] for r in map(json.loads, f) if r["split"] == "train"]


@pytest.mark.slow
def test_compiled_layers_train_the_same_steps(tmp_path, bbc_tok_examples, monkeypatch):
    tok, _, examples = bbc_tok_examples
    # The graphs captured and differentiated ahead of time, run without inductor's code generation:
    # this test checks the Trainer's train.compile (the layers compiled, trained, saved alike);
    # tests/test_speed_paths.py checks inductor's compiled layers give the same loss and gradients.
    # Generating C++ for each layer took most of this test's minute on 2 CPU cores.
    compile_with = torch.nn.Module.compile
    monkeypatch.setattr(torch.nn.Module, "compile",
                        lambda self, *args, **options: compile_with(self, *args, **{"backend": "aot_eager", **options}))
    # Rows of one length, two full batches of 16: both steps have the same sequence length, so only
    # the labelled positions' count differs (one recompile of the last layer); a third step and varied
    # lengths added recompiles of every layer, not checks. Step 2's loss still follows step 1's
    # compiled backward and update.
    examples = [e for e in examples if len(e["input_ids"]) == 32][:32]
    assert len(examples) == 32
    settings = dict(max_steps=2, save_every=0, log_every=1, hidden=32)
    eager = make_trainer(tmp_path / "eager", examples, tok.vocab_size, **settings)
    eager.train()
    compiled = make_trainer(tmp_path / "compiled", examples, tok.vocab_size, compile=True, **settings)
    assert all(layer._compiled_call_impl is not None for layer in compiled.model.bert.encoder.layer)
    compiled.train()
    assert len(losses(tmp_path / "eager")) == 2
    assert losses(tmp_path / "compiled") == pytest.approx(losses(tmp_path / "eager"), rel=1e-4)
    saved = torch.load(tmp_path / "compiled" / "checkpoint-2" / "trainer_state.pt", weights_only=True)
    assert saved["train_config"]["compile"] is True
    eager_keys = set(eager.model.state_dict())
    assert set(compiled.model.state_dict()) == eager_keys  # the same checkpoint files


def test_the_modern_encoder_compiles_its_layers():
    model = ModernBertForMaskedLM(ModernBertConfig.preset("tiny", vocab_size=100))
    keys = set(model.state_dict())
    model.compile_layers()
    assert all(layer._compiled_call_impl is not None for layer in model.model.layers)
    assert set(model.state_dict()) == keys


def test_every_form_a_layer_is_called_in_stays_compiled():
    """Training and evaluation, packed and padded batches, the last layer on the labelled rows only,
    local and global layers: 12 forms of one tiny model's layer forward, past torch's default cache
    of 8, where a ninth form ran eagerly without a word (the compiled Trainer at the eager speed on
    an H200). The eager backend: the cache is dynamo's, whatever compiles the graphs."""
    torch._dynamo.reset()
    config = ModernBertConfig.preset("tiny", vocab_size=100, global_attn_every_n_layers=2, local_attention=8)
    model = ModernBertForMaskedLM(config)
    model.compile_layers(backend="eager")
    ids = torch.randint(5, 100, (3, 20))
    full = torch.ones(3, 20, dtype=torch.long)
    padded = full.clone()
    padded[1, 12:] = 0
    labels = torch.full((3, 20), -100)
    labels[0, 3], labels[2, 5] = 7, 9
    for training in (True, False):
        model.train(training)
        for mask in (full, padded):
            with torch.set_grad_enabled(training):
                model(input_ids=ids, attention_mask=mask, labels=labels)
                model(input_ids=ids, attention_mask=mask)
    forms = len(_debug_get_cache_entry_list(ModernBertEncoderLayer.forward.__code__))
    assert forms > 8  # each compiled: the default limit would have stopped at 8
    torch._dynamo.reset()


def test_what_cannot_compile_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="train.compile"):
        TrainConfig(compile="yes")
    with pytest.raises(ConfigError, match="fsdp"):
        TrainConfig(compile=True, strategy="fsdp")

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)

    with pytest.raises(ConfigError, match="compile_layers"):
        Trainer(Plain(), [], TrainConfig(compile=True, max_steps=1), out_dir=str(tmp_path), progress=False)
