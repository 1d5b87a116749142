"""Mixture-of-experts feed-forward: dense equivalence, top-k gates, capacity overflow, aux loss."""

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.encoder import BertModel
from bertkit.models.variants.moe import MoEFeedForward, load_balancing_loss

BASE = dict(vocab_size=50, hidden_size=32, num_attention_heads=4, intermediate_size=64,
            num_hidden_layers=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def test_one_expert_top1_equals_the_dense_feed_forward():
    dense = BertModel(BertConfig(**BASE)).eval()
    sparse = BertModel(BertConfig(**BASE, num_experts=1, moe_top_k=1)).eval()
    result = sparse.load_state_dict(dense.state_dict(), strict=False)
    assert all(".moe." in k for k in result.missing_keys)
    with torch.no_grad():
        for d, s in zip(dense.encoder.layer, sparse.encoder.layer):
            s.moe.w_in[0].copy_(d.intermediate.dense.weight)
            s.moe.b_in[0].copy_(d.intermediate.dense.bias)
            s.moe.w_out[0].copy_(d.output.dense.weight)
            s.moe.b_out[0].copy_(d.output.dense.bias)
            s.moe.LayerNorm.load_state_dict(d.output.LayerNorm.state_dict())
    ids = torch.randint(1, 50, (3, 9))
    mask = torch.ones_like(ids)
    mask[2, 4:] = 0
    with torch.no_grad():
        a, b = dense(ids, mask).last_hidden_state, sparse(ids, mask).last_hidden_state
    assert (a - b)[mask.bool()].abs().max() < 1e-5


def reference(moe, x):
    """Token by token: softmax router, top-k, renormalised gates, weighted expert outputs."""
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        p = moe.router(x[t]).softmax(-1)
        top_p, top_e = p.topk(moe.top_k)
        for g, e in zip(top_p / top_p.sum(), top_e):
            h = moe.act(x[t] @ moe.w_in[e].T + moe.b_in[e]) @ moe.w_out[e].T + moe.b_out[e]
            out[t] += g * h
    return moe.LayerNorm(out + x)


def test_top2_routing_matches_a_token_by_token_reference():
    config = BertConfig(**BASE, num_experts=4, moe_top_k=2)
    moe = MoEFeedForward(config).eval()
    with torch.no_grad():
        moe.router.weight.normal_(0, 1.0)  # decisive routing
        x = torch.randn(1, 7, 32)
        assert torch.allclose(moe(x)[0], reference(moe, x[0]), atol=1e-5)


def all_to_expert_zero(capacity_factor):
    config = BertConfig(**BASE, num_experts=2, moe_top_k=1, moe_capacity_factor=capacity_factor)
    moe = MoEFeedForward(config).eval()
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] = 1.0  # x > 0 everywhere: every token prefers expert 0
    return moe


def test_capacity_overflow_passes_tokens_through_the_residual():
    moe = all_to_expert_zero(1.0)  # C = ceil(1.0 * 6 * 1 / 2) = 3
    x = torch.rand(1, 6, 32) + 0.1
    with torch.no_grad():
        out = moe(x)[0]
        expert0 = moe.act(x[0] @ moe.w_in[0].T + moe.b_in[0]) @ moe.w_out[0].T + moe.b_out[0]
    assert moe.dropped_fraction == 0.5
    assert torch.allclose(out[:3], moe.LayerNorm(expert0[:3] + x[0, :3]), atol=1e-6)  # first come
    assert torch.allclose(out[3:], moe.LayerNorm(x[0, 3:]), atol=1e-6)  # overflow: FFN skipped
    # padding takes no capacity: 4 real tokens -> C = 2, the first two real ones are served
    moe.token_mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        out = moe(x)[0]
    assert torch.allclose(out[2:4], moe.LayerNorm(expert0[2:4] + x[0, 2:4]), atol=1e-6)
    assert torch.allclose(out[4:], moe.LayerNorm(x[0, 4:]), atol=1e-6)
    # without a capacity limit nobody is dropped
    unlimited = all_to_expert_zero(None)
    unlimited(x)
    assert unlimited.dropped_fraction == 0.0


def test_load_balancing_loss_on_hand_values():
    probs = torch.tensor([[0.7, 0.3], [0.6, 0.4], [0.2, 0.8], [0.9, 0.1]])
    choices = torch.nn.functional.one_hot(torch.tensor([0, 0, 1, 0]), 2).float()
    # f = (3/4, 1/4), P = (0.6, 0.4): 2 * (0.75 * 0.6 + 0.25 * 0.4) = 1.1
    assert torch.allclose(load_balancing_loss(probs, choices, 1), torch.tensor(1.1))
    uniform = torch.full((4, 4), 0.25)
    spread = torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 3]), 4).float()
    assert torch.allclose(load_balancing_loss(uniform, spread, 1), torch.tensor(1.0))


def test_aux_loss_reaches_the_model_loss_and_the_router():
    config = BertConfig(**BASE, num_experts=4, moe_top_k=2, moe_capacity_factor=1.25, moe_aux_loss_coef=0.1)
    model = BertForMaskedLM(config)
    ids = torch.randint(1, 50, (2, 8))
    labels = torch.where(torch.rand(ids.shape) < 0.5, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    out = model(ids, labels=labels)
    assert out.aux_loss is not None and 0.1 * 2 * 0.99 < out.aux_loss < 0.1 * 2 * 4  # 2 layers, >= ~1 each
    model.set_gradient_checkpointing(True)
    model.train()
    model(ids, labels=labels).loss.backward()
    assert model.bert.encoder.layer[1].moe.router.weight.grad.abs().sum() > 0


def test_impossible_moe_settings_are_refused():
    with pytest.raises(ConfigError, match="moe_top_k"):
        BertConfig(**BASE, num_experts=2, moe_top_k=3)
    with pytest.raises(ConfigError, match="moe_capacity_factor"):
        BertConfig(**BASE, num_experts=2, moe_capacity_factor=0)
    with pytest.raises(ConfigError, match="same shape"):
        BertConfig(**BASE, num_experts=2, moe_every=2, num_hidden_groups=1)
    every_other = BertModel(BertConfig(**BASE, num_experts=2, moe_every=2))
    assert [layer.moe is not None for layer in every_other.encoder.layer] == [False, True]
