"""DeBERTa-v2/v3 disentangled attention (c2p + p2c over bucketed distances) vs transformers."""

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.encoder import BertModel
from bertkit.models.variants.deberta import log_buckets

from .helpers import diff, perturb

transformers = pytest.importorskip("transformers")


def tiny_config(**changes):
    values = dict(model_type="deberta-v2", vocab_size=100, hidden_size=32, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64, position_buckets=8,
                  max_relative_positions=32)
    values.update(changes)
    return BertConfig.preset("tiny", **values)


def batch():
    ids = torch.randint(1, 100, (2, 30))  # longer than the exact-distance buckets
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    return ids, mask


@pytest.mark.parametrize("changes", [dict(), dict(share_att_key=False, norm_rel_ebd="none"),
                                     dict(pos_att_type="c2p", position_buckets=-1)])
def test_masked_lm_both_directions(changes, tmp_path):
    ours = perturb(BertForMaskedLM(tiny_config(**changes)))
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    assert type(theirs).__name__ == "DebertaV2ForMaskedLM"
    ids, mask = batch()
    with torch.no_grad():
        a, b = ours(ids, mask).logits, theirs(input_ids=ids, attention_mask=mask).logits
        explicit = ours(ids, mask, output_attentions=True).logits
    print(f"DebertaV2ForMaskedLM {changes} bertkit -> transformers {diff(a, b, mask):.2e}")
    assert diff(a, b, mask) < 1e-5 and diff(a, explicit, mask) < 1e-5
    theirs.save_pretrained(tmp_path / "theirs")
    back, info = BertForMaskedLM.from_pretrained(tmp_path / "theirs", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        assert diff(back(ids, mask).logits, b, mask) < 1e-5


def test_transformers_deberta_v2_model_loads_here(tmp_path):
    hf_config = transformers.DebertaV2Config(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, relative_attention=True, pos_att_type="p2c|c2p", position_buckets=8,
        max_relative_positions=32, share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
        type_vocab_size=0)
    theirs = perturb(transformers.DebertaV2Model(hf_config))
    theirs.save_pretrained(tmp_path)
    ours, info = BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == [] and ours.pooler is None
    ids, mask = batch()
    with torch.no_grad():
        d = diff(ours(ids, mask).last_hidden_state, theirs(input_ids=ids, attention_mask=mask).last_hidden_state, mask)
    print(f"DebertaV2Model transformers -> bertkit {d:.2e}")
    assert d < 1e-5


def test_buckets_are_exact_near_and_logarithmic_far():
    distance = torch.arange(-40, 41)
    b = log_buckets(distance, 8, 32)
    assert torch.equal(b[36:45], torch.arange(-4, 5))  # |d| <= 4: exact
    assert torch.equal(b, -b.flip(0))  # odd
    assert (b[40:].diff() >= 0).all() and b.abs().max() <= 8


def test_impossible_combinations_are_refused():
    with pytest.raises(ConfigError, match="pos_att_type"):
        tiny_config(pos_att_type=["c2c"])
    with pytest.raises(ConfigError, match="relative_attention"):
        tiny_config(position_embedding_type="relative_key")
    with pytest.raises(ConfigError, match="position_buckets"):
        tiny_config(position_buckets=128, max_relative_positions=-1)
