"""On the GPU the packed path of both encoders equals the padded one, forward and gradients; for
BERT in bf16 through torch's variable-length flash kernel (checked that it ran)."""

from __future__ import annotations

import torch

from bertkit.models import attention
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM

from .conftest import mlm_batches


def loss_and_grads(model, batch, precision):
    model.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = model(**batch).loss
    loss.backward()
    return loss.detach().float(), [p.grad.float().clone() for p in model.parameters() if p.grad is not None]


def worst_gap(grads, reference) -> float:
    """The largest gradient difference, each tensor's relative to its own largest entry."""
    return max(float((a - b).abs().max() / (b.abs().max() + 1e-6)) for a, b in zip(grads, reference))


def run_both(model, encoder, batch, precision):
    encoder.unpad = False
    padded = loss_and_grads(model, batch, precision)
    encoder.unpad = True
    return padded, loss_and_grads(model, batch, precision)


def compare_fp32(model, encoder, batch, atol=1e-4):
    """fp32: the packed path equals the padded one within fp32 rounding."""
    (loss_padded, grads_padded), (loss_packed, grads_packed) = run_both(model, encoder, batch, "fp32")
    torch.testing.assert_close(loss_packed, loss_padded, atol=atol, rtol=atol)
    assert worst_gap(grads_packed, grads_padded) < atol


def compare_bf16(model, encoder, batch):
    """bf16: both paths round differently (the flash kernel against the dense one), so each is
    measured against the fp32 gradients; the packed path must be as close to them as the padded
    one is, up to 2x. (On an H100 the two bf16 paths differed from each other by 5.1% of a
    gradient's largest entry: comparing them with each other measured bf16 noise twice.)"""
    encoder.unpad = False
    loss_fp32, grads_fp32 = loss_and_grads(model, batch, "fp32")
    (loss_padded, grads_padded), (loss_packed, grads_packed) = run_both(model, encoder, batch, "bf16")
    torch.testing.assert_close(loss_packed, loss_fp32, atol=3e-2, rtol=3e-2)
    padded_gap, packed_gap = worst_gap(grads_padded, grads_fp32), worst_gap(grads_packed, grads_fp32)
    assert packed_gap <= max(2 * padded_gap, 1e-2), (packed_gap, padded_gap)


def spy_on_flash(monkeypatch) -> list:
    """Record each call of torch's varlen kernel (it still runs)."""
    calls = []
    flash = attention.FLASH_VARLEN
    monkeypatch.setattr(attention, "FLASH_VARLEN", lambda *a, **k: calls.append(k.get("window_size")) or flash(*a, **k))
    return calls


def test_bert_packed_equals_padded_in_fp32_and_bf16(monkeypatch):
    calls = spy_on_flash(monkeypatch)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM(config).cuda()
    batch = mlm_batches(1000, 16, 128, 1)[0]
    compare_fp32(model, model.bert, batch)
    assert not calls  # fp32: flash has no fp32 path, the padded kernel serves the packed tokens
    compare_bf16(model, model.bert, batch)
    assert calls  # bf16: torch's varlen flash kernel ran


def test_bert_unpads_by_default_on_cuda():
    assert attention.flash_varlen_available(torch.device("cuda")) == (attention.FLASH_VARLEN is not None)
    model = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64, attention_probs_dropout_prob=0.1)).cuda()
    assert model.eval().unpadding_pays() == (attention.FLASH_VARLEN is not None)
    assert not model.train().unpadding_pays()  # attention dropout: the padded step, which measured faster


def test_modern_packed_equals_padded(monkeypatch):
    calls = spy_on_flash(monkeypatch)
    torch.manual_seed(0)
    config = ModernBertConfig.preset("mini", vocab_size=1000, local_attention=64)
    model = ModernBertForMaskedLM(config).cuda()
    batch = mlm_batches(1000, 8, 256, 1)[0]
    compare_fp32(model, model.model, batch)
    assert not calls
    compare_bf16(model, model.model, batch)
    assert {None, (32, 32)} <= set(calls)  # global and sliding-window layers through flash


def test_bert_jagged_sdpa_with_attention_dropout(monkeypatch):
    """attention.SETTINGS.jagged_dropout: packed attention through SDPA on jagged tensors. Forced at
    dropout 0 it is measured against the fp32 gradients like the flash path; with BERT's attention
    dropout 0.1 in training it runs (the route it is for) and gives finite gradients."""
    monkeypatch.setattr(attention.SETTINGS, "jagged_dropout", True)
    calls = []
    jagged = attention.jagged_attention
    monkeypatch.setattr(attention, "jagged_attention", lambda *args: calls.append(1) or jagged(*args))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                        intermediate_size=1024, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM(config).cuda()
    batch = mlm_batches(1000, 16, 128, 1)[0]
    monkeypatch.setattr(attention, "flash_varlen_runs", lambda q, call, window=-1: False)
    monkeypatch.setattr(attention, "flash_jagged_runs", lambda q, call: q.dtype == torch.bfloat16)
    compare_bf16(model, model.bert, batch)
    assert calls
    monkeypatch.undo()
    monkeypatch.setattr(attention.SETTINGS, "jagged_dropout", True)
    monkeypatch.setattr(attention, "jagged_attention", lambda *args: calls.append(2) or jagged(*args))
    for layer in model.bert.encoder.layer:  # BERT's default attention dropout
        layer.attention.self.dropout_prob = 0.1
    model.train()
    loss, grads = loss_and_grads(model, batch, "bf16")
    assert 2 in calls and torch.isfinite(loss) and all(torch.isfinite(g).all() for g in grads)
