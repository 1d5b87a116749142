"""Block-sparse local attention equals dense attention restricted to the same pattern."""

import pytest
import torch
import torch.nn.functional as F

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.encoder import BertModel
from bertkit.models.variants.sparse import block_sparse_attention, pattern_mask, restrict_bias

NEG = torch.finfo(torch.float32).min
BASE = dict(vocab_size=60, hidden_size=32, num_attention_heads=4, intermediate_size=64,
            num_hidden_layers=2, max_position_embeddings=64)


def padding_bias(mask):
    return torch.zeros(mask.shape[0], 1, 1, mask.shape[1]).masked_fill(mask[:, None, None, :] == 0, NEG)


@pytest.mark.parametrize("seq_len,block,window,global_cls", [
    (13, 4, 1, True), (13, 4, 1, False), (16, 4, 0, True), (5, 8, 1, True), (31, 3, 2, True), (1, 4, 1, True)])
def test_blocked_equals_dense_attention_on_the_pattern(seq_len, block, window, global_cls):
    q, k, v = (torch.randn(2, 3, seq_len, 8) for _ in range(3))
    mask = torch.ones(2, seq_len)
    mask[1, max(1, seq_len - 4):] = 0  # padding in the second sequence
    bias = padding_bias(mask)
    out = block_sparse_attention(q, k, v, bias, block, window, global_cls)
    allowed = pattern_mask(seq_len, block, window, global_cls)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=restrict_bias(bias, allowed, torch.float32))
    real = mask.bool()[:, None, :, None].expand_as(out)
    assert (out - ref)[real].abs().max() < 1e-5


def test_pattern_is_a_band_of_blocks_plus_global_cls():
    allowed = pattern_mask(8, 2, 1, True).int()
    assert allowed.tolist() == [[1, 1, 1, 1, 1, 1, 1, 1],
                                [1, 1, 1, 1, 0, 0, 0, 0],
                                [1, 1, 1, 1, 1, 1, 0, 0],
                                [1, 1, 1, 1, 1, 1, 0, 0],
                                [1, 0, 1, 1, 1, 1, 1, 1],
                                [1, 0, 1, 1, 1, 1, 1, 1],
                                [1, 0, 0, 0, 1, 1, 1, 1],
                                [1, 0, 0, 0, 1, 1, 1, 1]]


def test_model_fast_path_equals_explicit_path_and_probabilities_follow_the_pattern():
    config = BertConfig(**BASE, attention_block_size=4, attention_window_blocks=1)
    model = BertModel(config).eval()
    ids = torch.randint(1, 60, (2, 23))
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    with torch.no_grad():
        fast = model(ids, mask).last_hidden_state
        explicit = model(ids, mask, output_attentions=True)
    assert (fast - explicit.last_hidden_state)[mask.bool()].abs().max() < 1e-5
    outside = ~pattern_mask(23, 4, 1, True)
    assert explicit.attentions[0][:, :, outside].abs().max() == 0


def test_a_window_covering_the_sequence_is_dense_attention():
    dense = BertModel(BertConfig(**BASE)).eval()
    local = BertModel(BertConfig(**BASE, attention_block_size=4, attention_window_blocks=10)).eval()
    local.load_state_dict(dense.state_dict())
    ids = torch.randint(1, 60, (2, 30))
    mask = torch.ones_like(ids)
    mask[0, 20:] = 0
    with torch.no_grad():
        assert (dense(ids, mask).last_hidden_state - local(ids, mask).last_hidden_state)[mask.bool()].abs().max() < 1e-5


def test_trains_with_dropout_and_gradients():
    model = BertModel(BertConfig(**BASE, attention_block_size=4, attention_global_cls=False)).train()
    out = model(torch.randint(1, 60, (2, 10))).last_hidden_state
    out.sum().backward()
    assert model.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0


def test_impossible_combinations_are_refused():
    with pytest.raises(ConfigError, match="relative"):
        BertConfig(**BASE, attention_block_size=4, position_embedding_type="relative_key")
    with pytest.raises(ConfigError, match="attention_block_size"):
        BertConfig(**BASE, attention_block_size=0)
