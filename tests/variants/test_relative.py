"""Relative position scores (`relative_key`, `relative_key_query`) against transformers 4.x BERT.

transformers 5 removed these position types, so the reference weights and outputs were written
once by transformers 4.57.1 (fixtures/make_hf4_relative.py, which also checks bertkit ->
transformers 4; both directions measured 4.8e-7).
"""

import os

import pytest
import torch
from safetensors.torch import load_file

from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.models.variants.relative import relative_position_scores

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
KINDS = ["relative_key", "relative_key_query"]


def fixture_dir(kind):
    return os.path.join(FIXTURES, "hf4-bert-" + kind.replace("_", "-"))


@pytest.mark.parametrize("kind", KINDS)
def test_loads_transformers4_weights_and_matches_its_outputs(kind):
    model = BertModel.from_pretrained(fixture_dir(kind))
    assert model.config.position_embedding_type == kind
    ref = load_file(os.path.join(fixture_dir(kind), "expected.safetensors"))
    with torch.no_grad():
        out = model(ref["input_ids"], ref["attention_mask"], ref["token_type_ids"])
    valid = ref["attention_mask"].bool()
    assert (out.last_hidden_state - ref["last_hidden_state"])[valid].abs().max() < 1e-5
    assert (out.pooler_output - ref["pooler_output"]).abs().max() < 1e-5


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_keeps_distance_embeddings(kind, tmp_path):
    model = BertModel.from_pretrained(fixture_dir(kind))
    model.save_pretrained(tmp_path)
    again = BertModel.from_pretrained(tmp_path)
    for (name, a), b in zip(model.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), name
    assert "encoder.layer.0.attention.self.distance_embedding.weight" in again.state_dict()


def naive_scores(q, k, table, kind, max_positions):
    """The definition, written out with the (T, T, d) tensor of D[l - r]."""
    seq_len = q.shape[-2]
    pos = torch.arange(seq_len)
    dist = table[pos[:, None] - pos[None, :] + max_positions - 1]
    scores = torch.einsum("bhld,lrd->bhlr", q, dist)
    if kind == "relative_key_query":
        scores = scores + torch.einsum("bhrd,lrd->bhlr", k, dist)
    return scores / q.shape[-1] ** 0.5


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seq_len", [1, 5, 16])
def test_gathered_scores_equal_the_definition(kind, seq_len):
    q, k = torch.randn(2, 3, seq_len, 8), torch.randn(2, 3, seq_len, 8)
    table = torch.randn(2 * 16 - 1, 8)
    fast = relative_position_scores(q, k, table, kind, 16)
    assert torch.allclose(fast, naive_scores(q, k, table, kind, 16), atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_sdpa_path_equals_explicit_path_with_gradients(kind):
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=20, position_embedding_type=kind,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertModel(config)
    ids = torch.randint(1, 50, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    grads, outs = [], []
    for explicit in (False, True):
        model.zero_grad()
        out = model(ids, mask, output_attentions=explicit).last_hidden_state
        (out * mask[..., None]).pow(2).sum().backward()
        grads.append(model.encoder.layer[0].attention.self.distance_embedding.weight.grad.clone())
        outs.append(out.detach())
    assert (outs[1] - outs[0])[mask.bool()].abs().max() < 1e-5
    assert grads[0].abs().sum() > 0
    assert torch.allclose(grads[0], grads[1], atol=1e-5)
