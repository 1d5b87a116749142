"""On a GPU every host read of a device value (`.item()`, `bool(t)`, `nonzero`, a boolean-mask
index...) waits for all the work queued before it. The Trainer reads each step's loss a step late
so that the GPU never waits between steps (docs/gpu.md); a read in the middle of a forward pass
would undo that, leaving the GPU idle while the host launches the rest. So the training passes of
both families (MLM, classifier, tagger) read only before their first layer runs: counted here on
the CPU, on the paths a GPU takes (unpadding on, a stand-in for torch's flash kernel)."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

from bertkit.models import attention
from bertkit.models.config import BertConfig
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification

from .test_unpadded import reference_varlen

READS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "nonzero", "argwhere", "masked_select"}


class HostReads(TorchFunctionMode):
    """Records each host read of a tensor, with the phase (`before` or `layers`) it came in."""

    def __init__(self):
        super().__init__()
        self.phase, self.reads, self.paused = "before", [], False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        boolean_index = name == "__getitem__" and any(
            isinstance(a, torch.Tensor) and a.dtype == torch.bool for a in _flat(args[1:]))
        if not self.paused and (name in READS or boolean_index):
            self.reads.append((name, self.phase))
        return func(*args, **(kwargs or {}))


def _flat(items):
    for item in items:
        yield from (_flat(item) if isinstance(item, (tuple, list)) else (item,))


def stand_in_flash(mode: HostReads):
    """test_unpadded's per-sequence reference of torch's varlen flash kernel, for the CPU: its own
    reads (the row boundaries) are not the model's, so the mode pauses while it runs."""
    reference = reference_varlen([])

    def kernel(*args, **kwargs):
        mode.paused = True
        try:
            return reference(*args, **kwargs)
        finally:
            mode.paused = False
    return kernel


def reads_of_a_step(monkeypatch, model, first_layer, batch) -> HostReads:
    """The host reads of one forward and backward pass on the branches a GPU takes (the flash call)."""
    mode = HostReads()
    monkeypatch.setattr(attention, "FLASH_VARLEN", stand_in_flash(mode))
    monkeypatch.setattr(attention, "flash_varlen_runs", lambda q, call, window=-1: True)
    first_layer.register_forward_pre_hook(lambda module, args: setattr(mode, "phase", "layers"))
    with mode:
        model(**batch).loss.backward()
    return mode


def mlm_batch(vocab: int, padded: bool) -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (4, 32), generator=g)
    mask = torch.ones_like(ids)
    if padded:
        mask[1, 20:] = 0
        mask[3, 9:] = 0
    labels = ids.masked_fill((torch.rand(ids.shape, generator=g) > 0.3) | (mask == 0), -100)
    labels[:, 1] = ids[:, 1]
    return {"input_ids": ids.masked_fill(mask == 0, 0), "attention_mask": mask, "labels": labels}


def bert(cls):
    model = cls(BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=40, num_labels=3)).train()
    model.bert.unpad = True  # as on a GPU
    return model, model.bert.encoder.layer[0]


def modern(cls):
    model = cls(ModernBertConfig.preset("tiny", vocab_size=120, local_attention=8, max_position_embeddings=64,
                                        num_labels=3)).train()
    return model, model.model.layers[0]


MODELS = {"bert-mlm": lambda: bert(BertForMaskedLM), "bert-classifier": lambda: bert(BertForSequenceClassification),
          "bert-tagger": lambda: bert(BertForTokenClassification), "modern-mlm": lambda: modern(ModernBertForMaskedLM),
          "modern-classifier": lambda: modern(ModernBertForSequenceClassification)}


@pytest.mark.parametrize("name", list(MODELS))
def test_a_training_step_reads_the_device_only_before_the_first_layer(monkeypatch, name):
    """Pre-training and fine-tuning, full rows and padded ones."""
    torch.manual_seed(0)
    model, first_layer = MODELS[name]()
    for padded in (False, True):
        batch = mlm_batch(120, padded)
        if "classifier" in name:
            batch["labels"] = torch.tensor([0, 1, 2, 1])
        elif "tagger" in name:
            batch["labels"] = (batch["labels"] % 3).masked_fill(batch["attention_mask"] == 0, -100)
        mode = reads_of_a_step(monkeypatch, model, first_layer, batch)
        assert mode.reads and all(phase == "before" for _, phase in mode.reads), (padded, mode.reads)
