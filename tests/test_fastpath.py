"""The fp32 inference copy with oneDNN-packed weights (bertkit/fastpath.py): the same outputs as
the model it copies, for every head and both GELU forms; the model itself is unchanged. (The
MiniLM parity with transformers within 1e-5 runs through it: tests/test_encode.py.)"""

import pytest
import torch
from torch import nn

from bertkit import (BertConfig, BertForMaskedLM, BertForQuestionAnswering, BertForSequenceClassification,
                     BertForTokenClassification, BertModel)
from bertkit.fastpath import PackedLinear, available, pack_for_cpu

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
