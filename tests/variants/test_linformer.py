"""Linformer's low-rank attention (`attention_low_rank`): the kernel against the formula written
out on the same tensors (with padding, every sharing mode), the model's attention against it,
training, saving and loading, and the config checks."""

import json
import math
import os
import re
import sys
import warnings

import pytest
import torch

from bertkit.models.attention import KERNELS, AttentionCall, choose_kernel
from bertkit.models.config import BertConfig
from bertkit.errors import BertkitError, ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification
from bertkit.models.encoder import BertModel, attention_bias
from bertkit.recipes.finetune import finetune
from bertkit.models.variants.linformer import LowRankProjection, init_segment_means, segment_means
from tests.tasks.helpers import make_tiny_model

from .training import fit_one_masked_batch


BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


def config(**overrides):
    values = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=24, attention_low_rank=6,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return BertConfig(**values)


def reference(q, k, v, e, f, real):
    """The formula per example and head, on the real tokens only: softmax(q (E K)^T / sqrt(d)) (F V)."""
    out = torch.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            keys, values = k[b, h][real[b]], v[b, h][real[b]]
            eh, fh = e[h % e.shape[0]][:, : k.shape[2]][:, real[b]], f[h % f.shape[0]][:, : k.shape[2]][:, real[b]]
            scores = q[b, h] @ (eh @ keys).T / math.sqrt(q.shape[-1])
            out[b, h] = scores.softmax(-1) @ (fh @ values)
    return out


@pytest.mark.parametrize("heads,shared", [(4, False), (1, False), (1, True)])
def test_kernel_equals_the_formula(heads, shared):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 10, 8) for _ in range(3))
    projection = LowRankProjection(16, 5, heads, share_key_value=shared)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    call = AttentionCall(1 / math.sqrt(8), low_rank=projection)
    context, probs = KERNELS["low_rank"](q, k, v, attention_bias(mask, q.dtype), call)
    e = projection.key_projection.detach()
    f = e if shared else projection.value_projection.detach()
    expected = reference(q, k, v, e, f, mask.bool())
    assert torch.allclose(context, expected, atol=1e-5)
    assert probs.shape == (2, 4, 10, 5) and torch.allclose(probs.sum(-1), torch.ones(2, 4, 10))
    # without padding the bias is None and every key counts
    context, _ = KERNELS["low_rank"](q, k, v, None, call)
    assert torch.allclose(context, reference(q, k, v, e, f, torch.ones(2, 10, dtype=torch.bool)), atol=1e-5)
    # padding changes nothing when it is dropped: the real part alone gives the same rows
    short, _ = KERNELS["low_rank"](q[1:, :, :7], k[1:, :, :7], v[1:, :, :7], None, call)
    padded, _ = KERNELS["low_rank"](q[1:], k[1:], v[1:], attention_bias(mask[1:], q.dtype), call)
    assert torch.allclose(short, padded[:, :, :7], atol=1e-5)


def test_kernel_choice_and_bad_inputs():
    assert choose_kernel(False, False, 0, low_rank=True) == "low_rank"
    assert choose_kernel(True, True, 0, low_rank=True) == "low_rank"  # the model's function: always
    assert choose_kernel(False, False, 0) == "sdpa"
    projection = LowRankProjection(8, 3)
    q = torch.randn(1, 2, 9, 4)
    with pytest.raises(BertkitError, match="at most 8 keys"):
        projection(q, q, None)
    with pytest.raises(BertkitError, match="key padding bias"):
        projection(q[:, :, :5], q[:, :, :5], torch.zeros(1, 2, 5, 5))


@pytest.mark.parametrize("sharing", ["none", "headwise", "key_value", "layerwise"])
def test_model_attention_is_the_formula(sharing):
    model = BertModel(config(attention_low_rank_sharing=sharing)).eval()
    ids = torch.randint(5, 60, (2, 12))
    mask = torch.ones_like(ids)
    mask[0, 9:] = 0
    with torch.no_grad():
        out = model(ids, mask, output_attentions=True, output_hidden_states=True)
        for i, layer in enumerate(model.encoder.layer):
            a = layer.attention.self
            hidden = out.hidden_states[i]
            q, k, v = (x(hidden).view(2, 12, 4, 8).transpose(1, 2) for x in (a.query, a.key, a.value))
            e = a.low_rank.key_projection
            f = e if a.low_rank.value_projection is None else a.low_rank.value_projection
            context = reference(q, k, v, e, f, mask.bool()).transpose(1, 2).reshape(2, 12, 32)
            attended = layer.attention.output(context, hidden)
            expected = layer.output(layer.intermediate(attended), attended)
            assert torch.allclose(out.hidden_states[i + 1][mask.bool()], expected[mask.bool()], atol=1e-5)
            assert out.attentions[i].shape == (2, 4, 12, 6)
    positions = torch.tensor([[0, 3, 8], [1, 2, 11]])
    with torch.no_grad():  # the last layer run at a few query positions only: the same vectors there
        pruned = model(ids, mask, output_positions=positions).last_hidden_state
    assert torch.allclose(pruned, out.last_hidden_state.gather(1, positions[..., None].expand(-1, -1, 32)), atol=1e-5)
    names = [n for n, _ in model.named_parameters() if "projection" in n]
    expected_names = {"none": 4, "headwise": 4, "key_value": 2, "layerwise": 1}[sharing]
    assert len(names) == expected_names, names
    if sharing == "layerwise":
        assert model.encoder.layer[0].attention.self.low_rank is model.encoder.layer[1].attention.self.low_rank
        assert names == ["encoder.low_rank.key_projection"]
    width = 4 if sharing == "none" else 1
    assert model.encoder.layer[0].attention.self.low_rank.key_projection.shape == (width, 6, 24)


@pytest.mark.parametrize("sharing", ["headwise", "layerwise"])
def test_mlm_with_low_rank_attention_trains_saves_and_loads(tmp_path, sharing):
    # A tiny task: learn to fill one fixed batch of masked random tokens (context tells them apart).
    torch.manual_seed(0)
    model = BertForMaskedLM(config(attention_low_rank_sharing=sharing, attention_probs_dropout_prob=0.1))
    start = model.bert.encoder.layer[0].attention.self.low_rank.key_projection.detach().clone()
    losses, inputs, _ = fit_one_masked_batch(model, 60)  # training mode: attention dropout too
    assert losses[-1] < 0.5 * losses[0], losses[::10]
    moved = model.bert.encoder.layer[0].attention.self.low_rank.key_projection - start
    assert moved.abs().max() > 1e-3  # the projections learn
    model.eval()
    model.save_pretrained(tmp_path)
    again = BertForMaskedLM.from_pretrained(tmp_path).eval()
    assert again.config.attention_low_rank == 6 and again.config.attention_low_rank_sharing == sharing
    if sharing == "layerwise":
        layers = again.bert.encoder.layer
        assert layers[0].attention.self.low_rank is layers[1].attention.self.low_rank is again.bert.encoder.low_rank
    with torch.no_grad():
        assert torch.allclose(model(inputs).logits, again(inputs).logits, atol=1e-6)


def test_config_checks():
    with pytest.raises(ConfigError, match="attention_low_rank must be a positive"):
        config(attention_low_rank=0)
    for too_many in (24, 30):  # max_position_embeddings is 24: k >= N projects nothing away
        with pytest.raises(ConfigError, match=r"must be below max_position_embeddings \(24\)"):
            config(attention_low_rank=too_many)
    with pytest.raises(ConfigError, match="not known"):
        config(attention_low_rank_sharing="per_head")
    for bad in (dict(position_embedding_type="relative_key"), dict(position_embedding_type="t5_bias"),
                dict(attention_block_size=4)):
        with pytest.raises(ConfigError, match="projects the keys"):
            config(**bad)
    assert config(position_embedding_type="sinusoidal").attention_low_rank == 6
    assert "attention_low_rank" not in BertConfig().to_dict()  # dense configs stay plain


def test_segment_means_tile_the_first_length_positions():
    weights = segment_means(5, 12, 16)  # 12 positions in 5 segments of 2 or 3
    assert weights.shape == (5, 16) and torch.allclose(weights.sum(1), torch.ones(5))
    assert (weights[:, 12:] == 0).all()  # past the length: nothing
    assert ((weights[:, :12] > 0).sum(0) == 1).all()  # every position in exactly one segment
    assert sorted((weights > 0).sum(1).tolist()) == [2, 2, 2, 3, 3]
    with pytest.raises(BertkitError, match="length of at least the rank"):
        segment_means(8, 6, 16)


def test_segment_means_give_dense_attention_when_each_segment_repeats_one_key():
    # Keys and values constant over each segment of 3 tokens: dense attention weighs every segment
    # by 3 exp(score), the same factor for all, so it equals attention over the segment means.
    torch.manual_seed(0)
    q = torch.randn(2, 4, 12, 8)
    k, v = (torch.randn(2, 4, 4, 8).repeat_interleave(3, dim=2) for _ in range(2))
    call = AttentionCall(1 / math.sqrt(8))
    dense, _ = KERNELS["sdpa"](q, k, v, None, call)
    projection = LowRankProjection(16, 4)
    random_init, _ = KERNELS["low_rank"](q, k, v, None, AttentionCall(1 / math.sqrt(8), low_rank=projection))
    assert not torch.allclose(random_init, dense, atol=1e-3)  # Xavier's random mixtures: another function
    assert init_segment_means(projection, 12) == 1
    means, _ = KERNELS["low_rank"](q, k, v, None, AttentionCall(1 / math.sqrt(8), low_rank=projection))
    assert torch.allclose(means, dense, atol=1e-5)


def test_finetune_adds_low_rank_attention_to_a_dense_checkpoint(tmp_path):
    # model.attention_low_rank on a dense checkpoint: the projections are new (not an error) and
    # start as segment means over data.max_length; the fine-tuned model saves and loads with them.
    words = "market film vote match chip bank actor party goal phone".split()
    rows = [{"text": " ".join(words[(i + j) % 10] for j in range(12)), "label": "ab"[i % 2]} for i in range(16)]
    with open(tmp_path / "train.jsonl", "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(row) + "\n" for row in rows))
    dense = make_tiny_model(tmp_path / "tiny", [r["text"] for r in rows])
    sections = {"data": {"max_length": 16}, "train": {"max_steps": 1, "batch_size": 8, "lr": 1e-9},
                "model": {"attention_low_rank": 4}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finetune("classification", dense, str(tmp_path / "train.jsonl"), str(tmp_path / "train.jsonl"),
                 str(tmp_path / "out"), sections, progress=False)
    model = BertForSequenceClassification.from_pretrained(tmp_path / "out")
    assert model.config.attention_low_rank == 4
    projection = model.bert.encoder.layer[0].attention.self.low_rank
    expected = segment_means(4, 16, 64).expand(1, 4, 64)
    assert torch.allclose(projection.key_projection, expected, atol=1e-6)  # lr 1e-9: still the start
    assert torch.allclose(projection.value_projection, expected, atol=1e-6)


def test_benchmark_script_smoke(capsys):
    # benchmarks/bench_linformer.py at its smoke size (the real sizes are for a quiet machine)
    sys.path.insert(0, BENCHMARKS)
    try:
        import bench_linformer  # a script folder, not a package: importable through sys.path only
    finally:
        sys.path.remove(BENCHMARKS)
    bench_linformer.main(["--smoke", "--threads", "1"])  # the count it sets: conftest's _one_thread restores it
    assert re.search(r"^LINFORMER T=64 k=16 .*: low_rank / sdpa speed = [0-9.]+x", capsys.readouterr().out, re.M)
