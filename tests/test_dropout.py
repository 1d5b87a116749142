"""bertkit's CPU dropout (bertkit/models/dropout.py) is dropout: rate p, unbiased, repeatable by seed,
and the attention path drops the probabilities themselves."""

import math

import pytest
import torch
import torch.nn.functional as F

import bertkit
from bertkit.models.dropout import Dropout, drop_mask, dropout
from bertkit.models.encoder import BertSelfAttention


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drop_rate_and_expectation(p):
    torch.manual_seed(0)
    x = torch.ones(1_000_003)  # not a multiple of 4: the last 64-bit draw is only partly used
    out = dropout(x, p)
    dropped = out == 0
    # binomial standard deviation of the rate is sqrt(p (1-p) / n) < 5e-4; allow 5 of them
    assert abs(dropped.float().mean().item() - p) < 2.5e-3
    kept = out[~dropped]
    # the scale is 1 / (1 - p') for the 16-bit rate p' = round(p 2^16) / 2^16: within 1e-4 relative
    assert torch.all(kept == kept[0]) and kept[0].item() == pytest.approx(1 / (1 - p), rel=1e-4)
    assert abs(out.mean().item() - 1.0) < 0.01


def test_every_bit_pattern_is_used():
    """All four 16-bit lanes of a draw are uniform: a lane stuck in half its range would
    show as a drop rate of 0 or 2p in that lane."""
    torch.manual_seed(1)
    dropped, _ = drop_mask((250_000, 4), 0.25)
    lane_rates = dropped.float().mean(0)
    assert torch.allclose(lane_rates, torch.full((4,), 0.25), atol=0.005), lane_rates


def test_gradient_is_mask_times_scale():
    torch.manual_seed(2)
    x = torch.randn(3, 5, 7, requires_grad=True)
    out = dropout(x, 0.3)
    out.sum().backward()
    kept = out != 0
    assert torch.equal(x.grad == 0, ~kept)
    assert torch.allclose(x.grad[kept], torch.full_like(x.grad[kept], 1 / (1 - round(0.3 * 65536) / 65536)))
    assert torch.allclose(out[kept], x[kept] * x.grad[kept])


def test_seeded_repeatable_and_fresh_each_call():
    torch.manual_seed(3)
    a, b = dropout(torch.ones(1000), 0.5), dropout(torch.ones(1000), 0.5)
    torch.manual_seed(3)
    assert torch.equal(dropout(torch.ones(1000), 0.5), a)
    assert not torch.equal(a, b)


def test_module_modes_and_edges():
    x = torch.randn(4, 6)
    layer = Dropout(0.4)
    assert torch.equal(layer.eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
    assert "p=0.4" in repr(layer)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dropout(1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        drop_mask((2,), 1.0)


def test_attention_drops_the_probabilities():
    """Training-mode attention equals softmax(QK^T/sqrt d) with the same mask zeroed, times V,
    times 1/(1-p): the mask is redrawn from the same seed."""
    cfg = bertkit.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32, attention_probs_dropout_prob=0.3)
    attention = BertSelfAttention(cfg).train()
    hidden = torch.randn(2, 5, 16)
    torch.manual_seed(4)
    context, _ = attention(hidden)
    q, k, v = (attention.split_heads(layer(hidden)) for layer in (attention.query, attention.key, attention.value))
    probs = (q @ k.transpose(-1, -2) / math.sqrt(8)).softmax(-1)
    torch.manual_seed(4)
    dropped, scale = drop_mask(probs.shape, 0.3)
    expected = (probs.masked_fill(dropped, 0) @ v * scale).transpose(1, 2).reshape(2, 5, 16)
    assert dropped.any()
    assert torch.allclose(context, expected, atol=1e-6)
    # with dropout off, the explicit path and SDPA agree
    attention.eval()
    assert torch.allclose(attention(hidden)[0], F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 5, 16),
                          atol=1e-6)
