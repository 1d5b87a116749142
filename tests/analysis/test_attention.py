import itertools
import math

import numpy as np
import pytest
import torch

from bertkit.analysis.attention import (
    attention_flow,
    attention_rollout,
    head_statistics,
    max_flow,
    plot_grid,
    plot_head,
    stack_attentions,
    statistics_records,
)
from bertkit.errors import ConfigError, DataError

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]
T = len(TOKENS)


def _random_attention(L, H, T, seed=0, temperature=2.0):
    rng = np.random.default_rng(seed)
    a = np.exp(temperature * rng.normal(size=(L, H, T, T)))
    return a / a.sum(-1, keepdims=True)


def _patterned_heads():
    """One layer, four heads with known patterns."""
    eye = np.eye(T)
    to_cls = np.zeros((T, T))
    to_cls[:, 0] = 1.0
    prev = np.zeros((T, T))
    prev[0, 0] = 1.0  # the first token has no previous token: it attends to itself
    for i in range(1, T):
        prev[i, i - 1] = 1.0
    uniform = np.full((T, T), 1.0 / T)
    return np.stack([to_cls, prev, eye, uniform])[None]  # (1, 4, T, T)


def test_head_statistics_on_known_patterns():
    s = head_statistics(_patterned_heads(), TOKENS)
    assert s["entropy"].shape == (1, 4)
    np.testing.assert_allclose(s["entropy"][0], [0, 0, 0, math.log(T)], atol=1e-12)
    np.testing.assert_allclose(s["cls"][0], [1, 2 / T, 1 / T, 1 / T])  # prev: rows 0 and 1 hit [CLS]
    np.testing.assert_allclose(s["sep"][0], [0, 0, 1 / T, 1 / T])
    np.testing.assert_allclose(s["self"][0], [1 / T, 1 / T, 1, 1 / T])
    np.testing.assert_allclose(s["prev"][0], [1 / (T - 1), 1, 0, 1 / T])
    np.testing.assert_allclose(s["next"][0], [0, 0, 0, 1 / T])
    # to-[CLS] head: row i attends to 0 at distance i, mean over rows = (0+1+2+3+4)/5
    mean_dist_uniform = np.mean([np.mean(np.abs(i - np.arange(T))) for i in range(T)])
    np.testing.assert_allclose(s["distance"][0], [2.0, 0.8, 0.0, mean_dist_uniform])
    recs = statistics_records(s)
    assert len(recs) == 4 and recs[1]["head"] == 1 and recs[1]["prev"] == 1.0


def test_head_statistics_ignore_padding():
    real = _random_attention(2, 3, T, seed=1)
    padded = _random_attention(2, 3, T + 3, seed=2)  # garbage everywhere...
    padded[:, :, :T, :T] = real  # ...except the real block
    padded[:, :, :T, T:] = 0.0  # a masked model gives padded keys zero weight
    tokens = TOKENS + ["[PAD]"] * 3
    ref = head_statistics(real, TOKENS)
    for kwargs in ({"length": T}, {"mask": [1] * T + [0] * 3}):
        got = head_statistics(padded, tokens, **kwargs)
        for k in ref:
            np.testing.assert_allclose(got[k], ref[k], err_msg=k)
    assert not np.allclose(head_statistics(padded, tokens)["entropy"], ref["entropy"])
    with pytest.raises(DataError, match="right padding"):
        head_statistics(padded, tokens, mask=[0] + [1] * (T + 2))
    with pytest.raises(ConfigError, match="length"):
        head_statistics(padded, tokens, length=0)


def test_shape_and_token_errors():
    with pytest.raises(DataError, match="shape"):
        head_statistics(np.ones((3, T, T)), TOKENS)
    with pytest.raises(DataError, match="tokens"):
        head_statistics(_random_attention(1, 1, T), TOKENS[:-1])


def test_stack_attentions_from_model_output_with_mask():
    a = torch.tensor(_random_attention(3, 2, 4, seed=3), dtype=torch.float32)  # (L, H, T, T)
    batch = tuple(torch.stack([a[l] * 0 + 0.25, a[l]]) for l in range(3))  # example 1 is `a`
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    got, n = stack_attentions(batch, index=1, attention_mask=mask)
    assert n == 3 and got.shape == (3, 2, 3, 3)
    np.testing.assert_allclose(got, a.numpy()[:, :, :3, :3], rtol=1e-6)
    with pytest.raises(ConfigError, match="2 examples"):
        stack_attentions(batch, index=2)
    with pytest.raises(DataError, match="output_attentions"):
        stack_attentions(None)


def test_rollout_rows_sum_to_one_and_match_the_product():
    a = _random_attention(3, 4, T, seed=4)
    r = attention_rollout(a)
    np.testing.assert_allclose(r.sum(-1), 1.0)
    A = [0.5 * a[l].mean(0) + 0.5 * np.eye(T) for l in range(3)]
    np.testing.assert_allclose(r[0], A[0])
    np.testing.assert_allclose(r[2], A[2] @ A[1] @ A[0])
    np.testing.assert_allclose(attention_rollout(a, add_residual=False)[1], a[1].mean(0) @ a[0].mean(0))


def test_max_flow_textbook_graph():
    # CLRS figure 26.1: the maximum flow from s=0 to t=5 is 23.
    c = np.zeros((6, 6))
    for u, v, cap in [(0, 1, 16), (0, 2, 13), (1, 3, 12), (2, 1, 4), (2, 4, 14),
                      (3, 2, 9), (3, 5, 20), (4, 3, 7), (4, 5, 4)]:
        c[u, v] = cap
    assert max_flow(c, 0, 5) == pytest.approx(23)
    assert max_flow(c, 5, 0) == 0  # edges are directed


def test_max_flow_equals_min_cut_on_random_graphs():
    rng = np.random.default_rng(5)
    for _ in range(20):
        V = 6
        c = rng.random((V, V)) * (rng.random((V, V)) < 0.5)
        np.fill_diagonal(c, 0)
        best = min(
            c[np.ix_([0, *side], [v for v in range(1, V) if v not in side])].sum()
            for k in range(V - 1)
            for side in itertools.combinations(range(1, V - 1), k)
        )  # all cuts with the source on one side and the sink (V-1) on the other
        assert max_flow(c, 0, V - 1) == pytest.approx(best, abs=1e-9)


def test_attention_flow_hand_checked_two_layer_graph():
    # layer 0 mixes the two tokens evenly; layer 1's output 0 takes 0.9 from token 0, 0.1 from 1
    a = np.array([[[[0.5, 0.5], [0.5, 0.5]]], [[[0.9, 0.1], [0.2, 0.8]]]])  # (L=2, H=1, 2, 2)
    flow = attention_flow(a, targets=[0], add_residual=False)
    # paths from input 0 to output 0: via token 0 min(0.5, 0.9) + via token 1 min(0.5, 0.1)
    np.testing.assert_allclose(flow, [[0.6, 0.6]])
    rollout = attention_rollout(a, add_residual=False)[-1]
    np.testing.assert_allclose(rollout[0], [0.5, 0.5])  # 0.9*0.5 + 0.1*0.5: products, not capacities
    assert rollout[0].sum() == pytest.approx(1.0) and flow[0].sum() > 1.0


def test_attention_flow_one_layer_equals_rollout_and_is_bounded():
    a = _random_attention(1, 3, 4, seed=6)
    np.testing.assert_allclose(attention_flow(a), attention_rollout(a)[0], atol=1e-12)
    deep = _random_attention(3, 2, 4, seed=7)
    flow = attention_flow(deep)
    assert flow.shape == (4, 4)
    assert np.all(flow >= -1e-12) and np.all(flow <= 1 + 1e-9)
    # The rollout, read as flow along every path (weight = product of edge weights), is a
    # feasible flow of value 1 into each target, so each source's max-flow is at least its
    # rollout share: flow >= rollout elementwise, and flow rows sum to >= 1.
    assert np.all(flow >= attention_rollout(deep)[-1] - 1e-9)
    assert np.all(flow.sum(-1) >= 1 - 1e-9)
    assert not np.allclose(flow, attention_rollout(deep)[-1])
    with pytest.raises(ConfigError, match="0..3"):
        attention_flow(deep, targets=[4])


def test_plots_write_pngs_and_check_ranges(tmp_path):
    a = _random_attention(2, 3, T, seed=8)
    plot_head(a, TOKENS, 1, 2, tmp_path / "head.png")
    plot_grid(a, TOKENS, tmp_path / "grid.png")
    for name in ("head.png", "grid.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    with pytest.raises(ConfigError, match=r"valid layers are 0\.\.1"):
        plot_head(a, TOKENS, 2, 0, tmp_path / "bad.png")
    with pytest.raises(ConfigError, match=r"valid heads are 0\.\.2"):
        plot_head(a, TOKENS, 0, -1, tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.png", "head.png"]  # no temp files left


def test_contract_with_the_real_model():
    """The model's out.attentions feeds these functions: padding is cut, rows are distributions."""
    from bertkit.models.config import BertConfig
    from bertkit.models.encoder import BertModel

    torch.manual_seed(0)
    model = BertModel(BertConfig.preset("tiny", vocab_size=50)).eval()
    ids = torch.tensor([[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        out = model(ids, mask, torch.zeros_like(ids), output_attentions=True)
        alone = model(ids[1:, :3], mask[1:, :3], output_attentions=True)
    a, n = stack_attentions(out.attentions, index=1, attention_mask=mask)
    assert n == 3 and a.shape == (model.config.num_hidden_layers, model.config.num_attention_heads, 3, 3)
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)  # padded keys got no weight
    ref, _ = stack_attentions(alone.attentions)
    np.testing.assert_allclose(a, ref, atol=1e-5)  # same as running the sentence unpadded
    stats = head_statistics(a, ["[CLS]", "x", "[SEP]"])
    assert stats["entropy"].shape == a.shape[:2]
