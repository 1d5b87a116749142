"""The fp32 inference copy with oneDNN-packed weights (bertkit/inference/fastpath.py): the same outputs as
the model it copies, for every head and both GELU forms; the model itself is unchanged. (The
MiniLM parity with transformers within 1e-5 runs through it: tests/test_encode.py.)"""

import pytest
import torch
from torch import nn

from bertkit import (BertConfig, BertForMaskedLM, BertForQuestionAnswering, BertForSequenceClassification,
                     BertForTokenClassification, BertModel)
from bertkit.inference.fastpath import PackedLinear, PackedQKV, PackedResidualLinear, available, pack_for_cpu, weights_key

pytestmark = pytest.mark.skipif(not available(), reason="torch without oneDNN")


@pytest.mark.parametrize("cls", [BertModel, BertForSequenceClassification, BertForTokenClassification,
                                 BertForQuestionAnswering, BertForMaskedLM])
@pytest.mark.parametrize("act", ["gelu", "gelu_new", "relu"])
def test_packed_copy_gives_the_same_outputs(cls, act):
    config = BertConfig.preset("tiny", vocab_size=500, num_labels=3, hidden_act=act)
    model = cls(config).eval()
    packed = pack_for_cpu(model)
    assert any(isinstance(m, PackedLinear) for m in packed.modules())
    assert not any(isinstance(m, PackedLinear) for m in model.modules())  # the original is untouched
    fused = [m for m in packed.modules() if isinstance(m, PackedLinear) and m.post_op != "none"]
    assert len(fused) == config.num_hidden_layers  # the feed-forward activation rides on the GEMM
    ids = torch.randint(1, 500, (3, 13))
    mask = torch.ones_like(ids)
    mask[2, 7:] = 0
    with torch.no_grad():
        for a, b in zip(model(ids, mask).to_tuple(), packed(ids, mask).to_tuple()):
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def test_packed_linear_keeps_bias_free_maps():
    linear = nn.Linear(16, 8, bias=False)
    x = torch.randn(2, 5, 16)
    assert torch.allclose(PackedLinear(linear)(x), linear(x), atol=1e-5)


def test_only_the_layers_own_maps_are_swapped():
    model = BertModel(BertConfig.preset("tiny", vocab_size=500))
    model.encoder.layer[0].attention.self.extra = nn.Linear(8, 8)  # e.g. a prefix encoder's map
    packed = pack_for_cpu(model)
    assert type(packed.encoder.layer[0].attention.self.extra) is nn.Linear
    assert type(packed.pooler.dense) is nn.Linear
    assert isinstance(packed.encoder.layer[1].output.dense, PackedLinear)


def _outputs(model, ids, mask, **kw):
    with torch.no_grad():
        return model(ids, mask, **kw).to_tuple()


def _assert_close(a, b):
    for x, y in zip(a, b, strict=True):
        assert torch.allclose(x, y, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fuse_qkv", [True, False])
@pytest.mark.parametrize("fuse_residual", [True, False])
def test_each_fusion_alone_gives_the_same_outputs(fuse_qkv, fuse_residual):
    model = BertForSequenceClassification(BertConfig.preset("tiny", vocab_size=500, num_labels=3)).eval()
    packed = pack_for_cpu(model, fuse_qkv=fuse_qkv, fuse_residual=fuse_residual)
    attention = packed.bert.encoder.layer[0].attention
    assert isinstance(attention.self.qkv, PackedQKV) == fuse_qkv
    assert (attention.self.query is None) == fuse_qkv  # the copy holds the weights once
    assert isinstance(attention.output, PackedResidualLinear) == fuse_residual
    assert isinstance(packed.bert.encoder.layer[1].output, PackedResidualLinear) == fuse_residual
    ids = torch.randint(1, 500, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    _assert_close(_outputs(model, ids, mask), _outputs(packed, ids, mask))
    # the last layer pruned to a few query positions (what a [CLS] head runs) goes through the fused map too
    positions = torch.tensor([[0, 3], [0, 5], [2, 10]])
    _assert_close(_outputs(model.bert, ids, mask, output_positions=positions),
                  _outputs(packed.bert, ids, mask, output_positions=positions))


def test_the_original_keeps_its_three_projections_and_trains_them():
    model = BertModel(BertConfig.preset("tiny", vocab_size=500)).train()
    pack_for_cpu(model)
    attention = model.encoder.layer[0].attention.self
    assert attention.qkv is None and type(attention.query) is nn.Linear
    assert not any(isinstance(m, (PackedLinear, PackedQKV, PackedResidualLinear)) for m in model.modules())
    ids = torch.randint(1, 500, (2, 9))
    model(ids).last_hidden_state.square().mean().backward()
    assert attention.query.weight.grad is not None and attention.value.weight.grad.abs().sum() > 0


def test_a_copy_made_after_the_weights_changed_has_the_new_weights():
    model = BertModel(BertConfig.preset("tiny", vocab_size=500)).eval()
    before = pack_for_cpu(model)
    key = weights_key(model)
    assert before.packed_from == key
    with torch.no_grad():
        model.encoder.layer[1].attention.self.key.weight.add_(0.5)  # e.g. an optimizer step
        model.encoder.layer[0].attention.self.value.bias.add_(0.5)
    assert weights_key(model) != key  # what tells a holder of the old copy to make a new one
    ids = torch.randint(1, 500, (2, 9))
    expected = _outputs(model, ids, torch.ones_like(ids))
    assert not torch.allclose(_outputs(before, ids, torch.ones_like(ids))[0], expected[0], atol=1e-3)
    _assert_close(_outputs(pack_for_cpu(model), ids, torch.ones_like(ids)), expected)
    key = weights_key(model)
    model.load_state_dict(BertModel(BertConfig.preset("tiny", vocab_size=500)).state_dict())
    assert weights_key(model) != key  # loading copies in place: the version counters move
    _assert_close(_outputs(pack_for_cpu(model), ids, torch.ones_like(ids)), _outputs(model, ids, torch.ones_like(ids)))


def test_attention_that_needs_its_own_projections_is_not_fused():
    deberta = BertModel(BertConfig.preset("tiny", vocab_size=500, relative_attention=True,
                                          pos_att_type=["c2p", "p2c"])).eval()
    packed = pack_for_cpu(deberta)  # DeBERTa projects relative positions with the query and key maps
    assert packed.encoder.layer[0].attention.self.qkv is None
    ids = torch.randint(1, 500, (2, 9))
    _assert_close(_outputs(deberta, ids, torch.ones_like(ids)), _outputs(packed, ids, torch.ones_like(ids)))

    model = BertModel(BertConfig.preset("tiny", vocab_size=500)).eval()
    wrapped = model.encoder.layer[0].attention.self
    wrapped.query = nn.Sequential(wrapped.query)  # e.g. a LoRA wrapper: it must keep running
    packed = pack_for_cpu(model)
    assert packed.encoder.layer[0].attention.self.qkv is None
    assert isinstance(packed.encoder.layer[1].attention.self.qkv, PackedQKV)
    _assert_close(_outputs(model, ids, torch.ones_like(ids)), _outputs(packed, ids, torch.ones_like(ids)))


@pytest.mark.parametrize("cls_name", ["ModernBertModel", "ModernBertForSequenceClassification",
                                      "ModernBertForTokenClassification", "ModernBertForMaskedLM"])
def test_modern_encoder_maps_are_packed_and_int8_too(cls_name):
    from bertkit.models import modern
    from bertkit.inference.quantize import Int8Linear, quantize_int8

    cls = getattr(modern, cls_name)
    model = cls(modern.ModernBertConfig.preset("tiny", num_labels=3)).eval()
    ids = torch.randint(5, 30000, (3, 40))
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0  # a padded row: the unpadded attention path
    packed, int8 = pack_for_cpu(model), quantize_int8(model)
    maps = 4 * model.config.num_hidden_layers  # Wqkv, attention Wo, mlp Wi and Wo per layer
    assert sum(isinstance(m, PackedLinear) for m in packed.modules()) == maps
    assert sum(isinstance(m, Int8Linear) for m in int8.modules()) == maps
    expected = _outputs(model, ids, mask)
    _assert_close(_outputs(packed, ids, mask), expected)
    for got, want in zip(_outputs(int8, ids, mask), expected, strict=True):
        assert (got - want).norm() / want.norm() < 0.02  # whole tensors: padded rows are zero in both
