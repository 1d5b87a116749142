"""Unpadded execution of the BERT encoder (models/packing.py, BertModel.packed_forward), and the
modern encoder's flash route: the real tokens of a padded batch in one packed tensor with cumulative
sequence lengths give the padded path's outputs and gradients. On the CPU the packed path runs
attention through the padded dense kernel, or (monkeypatched in place of torch's flash kernel) a
per-sequence reference of `varlen_attn`'s contract, which checks the cu_seqlens (and windows) the
models hand the kernel; tests/gpu runs the real kernel."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from bertkit.errors import BertkitError
from bertkit.models import attention
from bertkit.models import encoder as encoder_module
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification
from bertkit.models.packing import Packing


def small_config(**overrides) -> BertConfig:
    fields = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertConfig(**{**fields, **overrides})


def batch(left_padding: bool = False, pad_id: int = 0):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 120, (4, 14), generator=g)
    lengths = [14, 9, 3, 11]
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        if left_padding:
            mask[row, -n:] = 1
        else:
            mask[row, :n] = 1
    ids = ids.masked_fill(mask == 0, pad_id)
    labels = ids.masked_fill((torch.rand(ids.shape, generator=g) < 0.5) | (mask == 0), -100)
    return ids, mask, labels


def reference_varlen(calls):
    """torch's varlen_attn contract, one sequence at a time: q rows cu_q[b]:cu_q[b+1] attend to
    k, v rows cu_k[b]:cu_k[b+1]; window_size (w, w), w >= 0: only to keys at most w positions away."""
    def kernel(q, k, v, cu_q, cu_k, max_q, max_k, *, scale=None, window_size=(-1, -1)):
        calls.append((q.shape[0], k.shape[0], max_q, max_k))
        assert cu_q.dtype == torch.int32 and cu_q[-1] == q.shape[0] and cu_k[-1] == k.shape[0]
        assert window_size[0] == window_size[1] and (window_size[0] == -1 or max_q == max_k)
        pieces = []
        for b in range(len(cu_q) - 1):
            qs, ks, vs = (x[c[b]:c[b + 1]].transpose(0, 1) for x, c in ((q, cu_q), (k, cu_k), (v, cu_k)))
            position = torch.arange(qs.shape[1])
            band = None if window_size[0] < 0 else (position[:, None] - position[None, :]).abs() <= window_size[0]
            pieces.append(F.scaled_dot_product_attention(qs, ks, vs, attn_mask=band, scale=scale).transpose(0, 1))
        return torch.cat(pieces)
    return kernel


@pytest.fixture()
def flash_reference(monkeypatch):
    """The packed attention takes the 'flash' branch on the CPU, with the reference kernel."""
    calls = []
    monkeypatch.setattr(attention, "FLASH_VARLEN", reference_varlen(calls))
    monkeypatch.setattr(attention, "flash_varlen_runs", lambda q, call, window=-1: True)
    return calls


def run_both(model, inputs, output=lambda out: out.last_hidden_state):
    """(padded result, packed result, padded grads, packed grads) of one forward + backward."""
    results = []
    encoder = getattr(model, "bert", getattr(model, "model", model))
    for unpad in (False, True):
        encoder.unpad = unpad
        model.zero_grad()
        value = output(model(**inputs))
        value.float().pow(2).sum().backward() if value.dim() else value.backward()
        results.append((value.detach(), [p.grad.clone() if p.grad is not None else None for p in model.parameters()]))
    return results


def assert_grads_equal(a, b):
    for ga, gb in zip(a, b):
        assert (ga is None) == (gb is None)
        if ga is not None:
            torch.testing.assert_close(ga, gb, atol=1e-5, rtol=1e-4)


def test_packing_round_trip_and_row_boundaries():
    ids, mask, _ = batch(left_padding=True)
    packing = Packing.from_mask(mask)
    assert packing.cu_seqlens.tolist() == [0, 14, 23, 26, 37] and packing.max_len == 14
    x = torch.randn(4, 14, 3)
    packed = packing.unpad(x)
    assert packed.shape == (37, 3) and torch.equal(packed, x[mask.bool()])
    assert torch.equal(packing.pad(packed), x * mask[..., None])
    positions = torch.tensor([[0, 13], [5, 13], [0, 13], [3, 13]])  # (1, 5) and (2, 0) are padding
    rows = packing.rows_at(positions)
    assert rows.tolist() == [0, 13, 14, 22, 23, 25, 26, 36]
    with pytest.raises(BertkitError, match="no token as real"):
        Packing.from_mask(torch.tensor([[1, 1], [0, 0]]))


@pytest.mark.parametrize("left_padding", [False, True])
@pytest.mark.parametrize("overrides", [{}, {"model_type": "roberta", "pad_token_id": 1},
                                        {"position_embedding_type": "sinusoidal"}, {"embedding_size": 16}])
def test_packed_encoder_equals_padded(left_padding, overrides):
    torch.manual_seed(0)
    config = small_config(**overrides)
    model = BertModel(config)
    ids, mask, _ = batch(left_padding, config.pad_token_id)
    types = (torch.arange(14) >= 5).long().expand(4, -1)
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    (padded, grads_padded), (packed, grads_packed) = run_both(
        model, inputs, lambda out: out.last_hidden_state * mask[..., None])
    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-4)
    assert_grads_equal(grads_packed, grads_padded)


def test_packed_mlm_loss_logits_and_gradients_equal_padded(flash_reference):
    torch.manual_seed(0)
    model = BertForMaskedLM(small_config())
    ids, mask, labels = batch()
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    (loss_padded, grads_padded), (loss_packed, grads_packed) = run_both(model, inputs, lambda out: out.loss)
    torch.testing.assert_close(loss_packed, loss_padded, atol=1e-6, rtol=1e-5)
    assert_grads_equal(grads_packed, grads_padded)
    # every key row to every query row in layer 0; the last layer's queries: the labelled (B, M) grid
    most = int((labels != -100).sum(1).max())
    assert calls_shapes(flash_reference) == [(37, 37, 14, 14), (4 * most, 37, most, 14)]


def calls_shapes(calls):
    return list(dict.fromkeys(calls))


def test_packed_classifiers_equal_padded(flash_reference):
    torch.manual_seed(0)
    ids, mask, _ = batch()
    for model, pick in ((BertForSequenceClassification(small_config(num_labels=3)), lambda out: out.logits),
                        (BertForTokenClassification(small_config(num_labels=3)),
                         lambda out: out.logits * mask[..., None])):
        (padded, grads_padded), (packed, grads_packed) = run_both(model, {"input_ids": ids, "attention_mask": mask},
                                                                  pick)
        torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-4)
        assert_grads_equal(grads_packed, grads_padded)
    assert flash_reference  # the packed runs went through the varlen contract


def test_unpadding_is_off_on_the_cpu_by_default_and_where_the_layout_is_needed(monkeypatch):
    ran = []
    monkeypatch.setattr(BertModel, "packed_forward", lambda self, *a: ran.append(a))
    ids, mask, _ = batch()
    model = BertModel(small_config()).eval()
    assert BertModel.unpad is None and not attention.flash_varlen_available(torch.device("cpu"))
    model(ids, mask)  # auto on the CPU: padded, as measured in docs/benchmarks.md
    model.unpad = True
    model(ids, mask, output_attentions=True)  # probabilities need the (B, h, T, T) layout
    model(ids)  # nothing padded
    model(ids, mask * (torch.arange(4) != 2)[:, None])  # a row of padding only: the padded path copes
    BertModel(small_config(position_embedding_type="relative_key"))(ids, mask)
    assert ran == []
    model(ids, mask)
    assert len(ran) == 1


def test_auto_unpadding_leaves_training_with_attention_dropout_padded(monkeypatch):
    """Where the varlen kernel is (CUDA), training with attention dropout runs padded: the kernel has
    no dropout, and packing around a dense kernel measured 0.84x the padded step on an H200."""
    monkeypatch.setattr(encoder_module, "flash_varlen_available", lambda device: True)
    ids, mask, _ = batch()
    model = BertModel(small_config(attention_probs_dropout_prob=0.1))
    assert not model.unpadding_pays()  # training: padded
    assert model.eval().unpadding_pays()  # inference: packed
    assert BertModel(small_config(attention_probs_dropout_prob=0.0)).unpadding_pays()  # nothing to drop
    attention.SETTINGS.jagged_dropout = True  # dropout inside the kernel: packed again
    try:
        assert model.train().unpadding_pays()
    finally:
        attention.SETTINGS.jagged_dropout = False
    ran = []
    monkeypatch.setattr(BertModel, "packed_forward", lambda self, *a: ran.append(a))
    model(ids, mask)
    model.eval()(ids, mask)
    assert len(ran) == 1  # the evaluation call only


def test_the_flash_kernel_is_chosen_only_where_it_can_run():
    call = attention.AttentionCall(0.125)
    q = torch.zeros(3, 2, 8, dtype=torch.bfloat16)
    assert not attention.flash_varlen_runs(q, call)  # CPU
    assert attention.flash_varlen_available(torch.device("cuda")) == (attention.FLASH_VARLEN is not None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="where CUDA is, the kernel's module is imported")
def test_a_machine_without_cuda_starts_without_the_flash_kernel_module():
    """torch.nn.attention.varlen loads torch._dynamo, which doubled every command's start (2.8 -> 5.8 s)
    on machines where the kernel never runs: it is imported only where CUDA is."""
    code = ("import sys, bertkit.commands.cli; "
            "print([m for m in ('torch._dynamo', 'torch.nn.attention.varlen') if m in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_modern_flash_path_equals_padded_with_sliding_windows(flash_reference):
    """The modern encoder's unpadded attention through the varlen contract, global and
    sliding-window layers (window 4 on rows up to 14 long), against its padded path."""
    from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM

    torch.manual_seed(0)
    model = ModernBertForMaskedLM(ModernBertConfig.preset("tiny", vocab_size=120, local_attention=8,
                                                          max_position_embeddings=64))
    ids, mask, labels = batch()
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    (loss_padded, grads_padded), (loss_packed, grads_packed) = run_both(model, inputs, lambda out: out.loss)
    torch.testing.assert_close(loss_packed, loss_padded, atol=1e-6, rtol=1e-5)
    assert_grads_equal(grads_packed, grads_padded)
    assert (37, 37, 14, 14) in flash_reference


def test_the_modern_flash_path_builds_no_length_buckets(flash_reference, monkeypatch):
    """The buckets (rows sorted by length, their masks) serve the bucketed kernels only: building
    them reads every bucket's width on the host, a wait for the GPU each, so the flash path skips it."""
    from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM, model as modern_model

    built = []
    monkeypatch.setattr(modern_model, "_bucket_masks", lambda *args: built.append(1) or {})
    model = ModernBertForMaskedLM(ModernBertConfig.preset("tiny", vocab_size=120, max_position_embeddings=64))
    ids, mask, labels = batch()
    model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    assert flash_reference and not built


@pytest.mark.parametrize("head", ["mlm", "classifier"])
def test_the_jagged_sdpa_path_equals_padded(monkeypatch, head):
    """Packed attention through SDPA on nested jagged tensors (the GPU's route with attention
    dropout, switched on and forced here at dropout 0 on the CPU): the padded path's loss and
    gradients, the MLM model's last layer with its (B, M) grid of queries too."""
    used = []
    jagged = attention.jagged_attention
    monkeypatch.setattr(attention, "flash_jagged_runs", lambda q, call: True)
    monkeypatch.setattr(attention, "jagged_attention", lambda *args: used.append(args[0].shape[0]) or jagged(*args))
    torch.manual_seed(0)
    ids, mask, labels = batch()
    if head == "mlm":
        model, inputs = BertForMaskedLM(small_config()), {"input_ids": ids, "attention_mask": mask, "labels": labels}
    else:
        model = BertForSequenceClassification(small_config(num_labels=3))
        inputs = {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 2, 1, 2])}
    (loss_padded, grads_padded), (loss_packed, grads_packed) = run_both(model, inputs, lambda out: out.loss)
    torch.testing.assert_close(loss_packed, loss_padded, atol=1e-6, rtol=1e-5)
    assert_grads_equal(grads_packed, grads_padded)
    assert used and used[0] == 37  # every real token, then (MLM) the last layer's query grid
    assert head == "classifier" or used[-1] != 37


def test_jagged_dropout_is_off_by_default_and_gpu_only():
    call = attention.AttentionCall(0.25, dropout_p=0.1)
    q = torch.zeros(6, 2, 16, dtype=torch.bfloat16)
    assert not attention.SETTINGS.jagged_dropout and not attention.flash_jagged_runs(q, call)
    attention.SETTINGS.jagged_dropout = True
    try:
        assert not attention.flash_jagged_runs(q, call)  # CPU
    finally:
        attention.SETTINGS.jagged_dropout = False


def test_an_older_varlen_attn_without_scale_or_windows_is_called_within_its_keywords(monkeypatch):
    """torch's first varlen_attn releases took neither `scale` nor `window_size`: then only calls
    at the default 1/sqrt(d) without a window take the flash kernel, and they pass neither."""
    seen = []
    monkeypatch.setattr(attention, "flash_varlen_available", lambda device: True)
    monkeypatch.setattr(attention, "VARLEN_KEYWORDS", frozenset())
    monkeypatch.setattr(attention, "FLASH_VARLEN", lambda *args, **options: seen.append(options) or args[0])
    q = torch.zeros(6, 2, 16, dtype=torch.bfloat16)
    assert attention.flash_varlen_runs(q, attention.AttentionCall(0.25))
    assert not attention.flash_varlen_runs(q, attention.AttentionCall(0.25), window=4)
    assert not attention.flash_varlen_runs(q, attention.AttentionCall(0.2))  # DeBERTa-like scale
    packing = Packing.from_mask(torch.ones(2, 3))
    attention.flash_varlen(q, q, q, packing, packing, 0.25)
    monkeypatch.setattr(attention, "VARLEN_KEYWORDS", frozenset({"scale", "window_size"}))
    attention.flash_varlen(q, q, q, packing, packing, 0.25, window=4)
    assert seen == [{}, {"scale": 0.25, "window_size": (4, 4)}]


@torch.library.custom_op("bertkit_tests::varlen_reference", mutates_args=())
def _varlen_reference_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor,
                         max_q: int, max_k: int, window: int) -> torch.Tensor:
    return reference_varlen([])(q, k, v, cu_q, cu_k, max_q, max_k, window_size=(window, window)).contiguous()


@_varlen_reference_op.register_fake
def _(q, k, v, cu_q, cu_k, max_q, max_k, window):
    return torch.empty_like(q)


def test_compiled_modern_layers_trace_the_flash_path_whole(monkeypatch):
    """On a GPU a varied-length batch runs torch's varlen kernel inside compiled layers: no host read or
    data-dependent branch may split a layer's graph there (an opaque op stands for the kernel, as the
    real one does for the compiler). Three batches of other lengths: one recompile, no graph break."""
    from torch._dynamo.utils import counters

    from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM

    calls = []

    def kernel(q, k, v, cu_q, cu_k, max_q, max_k, window_size=(-1, -1)):
        calls.append(max_q)
        return _varlen_reference_op(q, k, v, cu_q, cu_k, max_q, max_k, window_size[0])

    monkeypatch.setattr(attention, "FLASH_VARLEN", kernel)
    monkeypatch.setattr(attention, "flash_varlen_runs", lambda q, call, window=-1: True)
    torch._dynamo.reset()
    counters.clear()
    model = ModernBertForMaskedLM(ModernBertConfig.preset("tiny", vocab_size=120, local_attention=8,
                                                          max_position_embeddings=64)).eval()
    model.compile_layers(backend="eager")
    with torch.no_grad():
        for longest in (14, 16, 18):
            ids, mask, labels = batch()
            mask[0, longest:] = 0
            model(input_ids=ids, attention_mask=mask, labels=labels)
    assert calls and not counters["graph_break"]
    torch._dynamo.reset()
