"""T5's scalar relative bias (`position_embedding_type="t5_bias"`): the buckets and the bias
against transformers' T5Attention on the same weights, the attention scores against a direct
implementation, training, saving (with the warning) and the config checks."""

import math
import warnings

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.encoder import BertModel
from bertkit.models.variants.t5_bias import RelativePositionBias, relative_position_bucket

from .training import fit_one_masked_batch


def config(**overrides):
    values = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=300, position_embedding_type="t5_bias",
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return BertConfig(**values)


def t5_attention(buckets, heads, max_distance):
    transformers = pytest.importorskip("transformers")
    from transformers.models.t5.modeling_t5 import T5Attention  # the reference implementation

    t5 = transformers.T5Config(d_model=32, d_kv=8, num_heads=heads, relative_attention_num_buckets=buckets,
                               relative_attention_max_distance=max_distance, is_decoder=False)
    return T5Attention(t5, has_relative_attention_bias=True).eval()


@pytest.mark.parametrize("buckets,max_distance", [(32, 128), (8, 20), (4, 3), (64, 300)])
def test_buckets_equal_t5s(buckets, max_distance):
    attention = t5_attention(buckets, 4, max_distance)
    distance = torch.arange(-700, 701)[None, :]
    theirs = attention._relative_position_bucket(distance, bidirectional=True, num_buckets=buckets,
                                                 max_distance=max_distance)
    ours = relative_position_bucket(distance, buckets, max_distance)
    assert torch.equal(ours, theirs)
    assert int(ours.min()) == 0 and int(ours.max()) == buckets - 1  # every bucket reachable
    # the exact half: distances 0 .. buckets/4 - 1 before the query, 1 .. buckets/4 - 1 after it
    exact = buckets // 4
    assert ours[0, 700 - exact + 1: 701].tolist() == list(range(exact - 1, -1, -1))
    assert ours[0, 701: 700 + exact].tolist() == [buckets // 2 + i for i in range(1, exact)]


def test_bias_equals_t5_compute_bias_on_the_same_weights():
    attention = t5_attention(32, 4, 128)
    ours = RelativePositionBias(32, 4, 128)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(32, 4))
        attention.relative_attention_bias.weight.copy_(ours.weight)
        for m, t in [(1, 1), (17, 17), (260, 260), (5, 40)]:
            theirs = attention.compute_bias(m, t)
            assert theirs.shape == (1, 4, m, t)
            assert (ours(m, t) - theirs).abs().max() <= 1e-6


def test_attention_scores_are_bert_scores_plus_the_bias():
    # A direct implementation: softmax(q k^T / sqrt(d) + b[bucket(r - l), head] + padding) v,
    # written out per layer, against the model's output with attention probabilities.
    model = BertModel(config()).eval()
    with torch.no_grad():
        model.encoder.relative_attention_bias.weight.normal_(0, 1.0)
    ids = torch.randint(5, 60, (2, 11))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    with torch.no_grad():
        out = model(ids, mask, output_attentions=True, output_hidden_states=True)
        fast = model(ids, mask).last_hidden_state  # the SDPA kernel
        table = model.encoder.relative_attention_bias.weight
        pos = torch.arange(11)
        bias = table[relative_position_bucket(pos[None, :] - pos[:, None], 32, 128)].permute(2, 0, 1)
        for i, layer in enumerate(model.encoder.layer):
            a = layer.attention.self
            hidden = out.hidden_states[i]
            q, k = (x(hidden).view(2, 11, 4, 8).transpose(1, 2) for x in (a.query, a.key))
            scores = q @ k.transpose(-1, -2) / math.sqrt(8) + bias
            scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e30)
            assert torch.allclose(out.attentions[i], scores.softmax(-1), atol=1e-6)
    assert torch.allclose(fast, out.last_hidden_state, atol=1e-5)
    assert model.embeddings.position_embeddings is None  # no absolute positions in the input
    # One table for all layers; positions matter: swapping two tokens changes their vectors.
    assert sum("relative_attention_bias" in k for k in model.state_dict()) == 1
    swapped = ids.clone()
    swapped[:, [2, 3]] = ids[:, [3, 2]]
    with torch.no_grad():
        assert (model(ids).last_hidden_state[:, 2] - model(swapped).last_hidden_state[:, 3]).abs().max() > 1e-3


def test_mlm_with_t5_bias_trains_and_prunes_nothing_wrongly():
    model = BertForMaskedLM(config())
    start = model.bert.encoder.relative_attention_bias.weight.detach().clone()
    losses, inputs, labels = fit_one_masked_batch(model, 60)
    masked = labels != -100
    assert losses[-1] < 0.5 * losses[0], losses[::10]
    assert (model.bert.encoder.relative_attention_bias.weight - start).abs().max() > 1e-3  # the bias learns
    model.eval()
    with torch.no_grad():  # labels (pruning requested) and full logits agree at the masked positions
        pruned = model(input_ids=inputs, labels=labels).logits
        full = model(input_ids=inputs).logits[masked]
    assert torch.allclose(pruned, full, atol=1e-5)


def test_saves_warns_and_loads_back(tmp_path):
    model = BertForMaskedLM(config(relative_attention_num_buckets=16, relative_attention_max_distance=40)).eval()
    with pytest.warns(UserWarning, match="t5_bias.*transformers 5"):
        model.save_pretrained(tmp_path)
    again = BertForMaskedLM.from_pretrained(tmp_path)
    assert again.config.relative_attention_num_buckets == 16
    assert again.config.relative_attention_max_distance == 40
    ids = torch.randint(5, 60, (2, 10))
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, again(ids).logits, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # plain configs write neither field
        BertModel(config(position_embedding_type="absolute")).config.save_pretrained(tmp_path / "plain")
    assert "relative_attention_num_buckets" not in (tmp_path / "plain" / "config.json").read_text()


def test_config_checks():
    with pytest.raises(ConfigError, match="even number >= 4"):
        config(relative_attention_num_buckets=6 - 3)
    with pytest.raises(ConfigError, match="must exceed"):
        config(relative_attention_num_buckets=32, relative_attention_max_distance=8)
    with pytest.raises(ConfigError, match="block-sparse"):
        config(attention_block_size=4)
    with pytest.raises(ConfigError, match="relative_attention"):
        config(relative_attention=True)
