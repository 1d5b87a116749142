"""ALBERT as switches: factorised embeddings + shared layer groups, transformers' ALBERT key names."""

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForPreTraining, BertForSequenceClassification
from bertkit.models.encoder import BertModel

from .helpers import diff, perturb

transformers = pytest.importorskip("transformers")


def tiny_config(**changes):
    values = dict(model_type="albert", vocab_size=100, hidden_size=48, num_attention_heads=4,
                  intermediate_size=64, embedding_size=16, num_hidden_layers=4)
    values.update(changes)
    return BertConfig.preset("tiny", **values)


def batch():
    torch.manual_seed(1)
    ids = torch.randint(1, 100, (3, 10))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    return ids, mask


SHARING = [dict(num_hidden_groups=1, inner_group_num=1),  # ALBERT's default: one layer, 4 times
           dict(num_hidden_groups=2, inner_group_num=2)]  # 2 groups of 2 distinct layers


@pytest.mark.parametrize("sharing", SHARING)
def test_pretraining_model_both_directions(sharing, tmp_path):
    ours = perturb(BertForPreTraining(tiny_config(**sharing)))
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "ours").eval()
    assert type(theirs).__name__ == "AlbertForPreTraining"
    ids, mask = batch()
    with torch.no_grad():
        a, b = ours(ids, mask), theirs(input_ids=ids, attention_mask=mask)
    d_mlm, d_sop = diff(a.prediction_logits, b.prediction_logits, mask), diff(a.seq_relationship_logits, b.sop_logits)
    print(f"AlbertForPreTraining {sharing} bertkit -> transformers: MLM {d_mlm:.2e}, SOP {d_sop:.2e}")
    assert d_mlm < 1e-5 and d_sop < 1e-5

    theirs.save_pretrained(tmp_path / "theirs")
    back, info = BertForPreTraining.from_pretrained(tmp_path / "theirs", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        c = back(ids, mask, sentence_order_label=torch.tensor([0, 1, 0]))
    assert diff(c.prediction_logits, b.prediction_logits, mask) < 1e-5
    assert diff(c.seq_relationship_logits, b.sop_logits) < 1e-5
    assert c.nsp_loss is not None  # the SOP label feeds the sentence-level loss


def test_transformers_albert_model_and_mlm_load_here(tmp_path):
    hf_config = transformers.AlbertConfig(vocab_size=100, embedding_size=16, hidden_size=48, num_hidden_layers=3,
                                          num_attention_heads=4, intermediate_size=64, num_hidden_groups=1)
    ids, mask = batch()
    bare = perturb(transformers.AlbertModel(hf_config))
    bare.save_pretrained(tmp_path / "bare")
    ours, info = BertModel.from_pretrained(tmp_path / "bare", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        a, b = ours(ids, mask), bare(input_ids=ids, attention_mask=mask)
    print(f"AlbertModel transformers -> bertkit: hidden {diff(a.last_hidden_state, b.last_hidden_state, mask):.2e}")
    assert diff(a.last_hidden_state, b.last_hidden_state, mask) < 1e-5
    assert diff(a.pooler_output, b.pooler_output) < 1e-5
    ours.save_pretrained(tmp_path / "bare-back")
    again = transformers.AlbertModel.from_pretrained(tmp_path / "bare-back").eval()
    with torch.no_grad():
        assert diff(again(input_ids=ids, attention_mask=mask).last_hidden_state, a.last_hidden_state, mask) < 1e-5

    mlm = perturb(transformers.AlbertForMaskedLM(hf_config))
    mlm.save_pretrained(tmp_path / "mlm")
    ours_mlm, info = BertForMaskedLM.from_pretrained(tmp_path / "mlm", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        d = diff(ours_mlm(ids, mask).logits, mlm(input_ids=ids, attention_mask=mask).logits, mask)
    print(f"AlbertForMaskedLM transformers -> bertkit: {d:.2e}")
    assert d < 1e-5


def test_sequence_classification_interchanges(tmp_path):
    ours = perturb(BertForSequenceClassification(tiny_config(num_labels=3)))
    ours.save_pretrained(tmp_path)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    ids, mask = batch()
    with torch.no_grad():
        assert diff(ours(ids, mask).logits, theirs(input_ids=ids, attention_mask=mask).logits) < 1e-5


def test_sharing_reuses_one_layer_and_shrinks_the_model():
    model = BertModel(tiny_config())
    assert len(model.encoder.layer) == 1 and model.encoder.layer_order == [0, 0, 0, 0]
    assert BertModel(tiny_config(num_hidden_groups=2, inner_group_num=2)).encoder.layer_order == [0, 1, 0, 1, 2, 3, 2, 3]
    out = model(torch.randint(1, 100, (2, 6)), output_hidden_states=True)
    assert len(out.hidden_states) == 5

    # albert-base shape: V=30000, E=128, H=768, 12 layers sharing one set of weights
    with torch.device("meta"):
        shared = BertModel(BertConfig.preset("base", model_type="albert"))
        unshared = BertModel(BertConfig.preset("base", model_type="albert", num_hidden_groups=12))
        bert = BertModel(BertConfig.preset("base", vocab_size=30000))
    counts = [m.num_parameters() for m in (shared, unshared, bert)]
    print("parameters: albert-base %d, same without sharing %d, bert-base (30k vocab) %d" % tuple(counts))
    assert 11.5e6 < counts[0] < 12e6 and 87e6 < counts[1] < 90e6 and counts[2] > 108e6


def test_impossible_combinations_are_refused():
    with pytest.raises(ConfigError, match="embedding_size"):
        tiny_config(embedding_size=64)  # E > H
    with pytest.raises(ConfigError, match="num_hidden_groups"):
        tiny_config(num_hidden_groups=5)  # more groups than layers
    with pytest.raises(ConfigError, match="num_hidden_groups"):
        BertConfig(inner_group_num=2)  # groups of layers without sharing
    # the preset narrows ALBERT's 128-wide embeddings to a narrower model
    assert BertConfig.preset("tiny", model_type="albert", hidden_size=64, num_attention_heads=2).embedding_size == 64
