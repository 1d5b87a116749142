"""RoBERTa as switches (model_type="roberta"): positions after the pad row, `roberta.` and `lm_head`
names; same logits as transformers' RobertaForMaskedLM / RobertaForSequenceClassification."""

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import BertkitError, ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification
from bertkit.models.encoder import BertModel, roberta_position_ids

from .helpers import diff, perturb

transformers = pytest.importorskip("transformers")

TINY = dict(vocab_size=120, num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=40)


def tiny_config(**changes):
    return BertConfig.preset("tiny", model_type="roberta", **{**TINY, **changes})


def batch():
    torch.manual_seed(1)
    ids = torch.randint(3, 120, (3, 11))
    ids[:, 0], ids[:, -1] = 0, 2
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    mask[2, :4] = 0  # left padding: positions must still start at pad + 1 on the first real token
    ids[mask == 0] = 1
    return ids, mask


def test_preset_applies_roberta_defaults():
    c = BertConfig.preset("base", model_type="roberta")
    assert (c.max_position_embeddings, c.pad_token_id, c.layer_norm_eps, c.type_vocab_size,
            c.vocab_size) == (514, 1, 1e-5, 1, 50265)
    assert c.max_sequence_length == 512
    with pytest.raises(ConfigError, match="max_position_embeddings"):
        BertConfig(model_type="roberta", pad_token_id=1, max_position_embeddings=2)
    with pytest.raises(ConfigError, match="model_type"):
        BertConfig(model_type="gpt2")


def test_position_ids_count_real_tokens_after_the_pad_row():
    ids = torch.tensor([[0, 5, 6, 2, 1, 1], [1, 1, 0, 5, 6, 2]])
    assert roberta_position_ids(ids, 1).tolist() == [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 5]]


def test_too_long_input_is_refused_with_the_real_limit():
    model = BertModel(tiny_config())
    with pytest.raises(BertkitError, match="at most 38 tokens"):
        model(torch.full((1, 39), 5))


def test_mlm_bertkit_to_transformers_and_back(tmp_path):
    ours = perturb(BertForMaskedLM(tiny_config()))
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "ours").eval()
    assert type(theirs).__name__ == "RobertaForMaskedLM"
    ids, mask = batch()
    with torch.no_grad():
        a = ours(ids, mask).logits
        b = theirs(input_ids=ids, attention_mask=mask).logits
    d = diff(a, b, mask)
    print(f"RobertaForMaskedLM bertkit -> transformers max|diff| {d:.2e}")
    assert d < 1e-5

    theirs.save_pretrained(tmp_path / "theirs")
    back, info = BertForMaskedLM.from_pretrained(tmp_path / "theirs", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        c = back(ids, mask).logits
    print(f"RobertaForMaskedLM transformers -> bertkit max|diff| {diff(b, c, mask):.2e}")
    assert diff(b, c, mask) < 1e-5


@pytest.mark.filterwarnings("ignore:BertModel. 2 weights")
def test_mlm_loads_a_transformers_initialised_model(tmp_path):
    hf_config = transformers.RobertaConfig(**TINY, max_length=None)
    theirs = perturb(transformers.RobertaForMaskedLM(hf_config))
    theirs.save_pretrained(tmp_path)
    ours, info = BertForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert ours.config.model_type == "roberta" and info.missing_keys == []
    ids, mask = batch()
    with torch.no_grad():
        assert diff(ours(ids, mask).logits, theirs(input_ids=ids, attention_mask=mask).logits, mask) < 1e-5
        # the bare encoder reads the same directory (prefix stripped, head reported unused)
        with pytest.warns(UserWarning, match="not used"):
            bare = BertModel.from_pretrained(tmp_path)
        ref = theirs.roberta(input_ids=ids, attention_mask=mask).last_hidden_state
        assert diff(bare(ids, mask).last_hidden_state, ref, mask) < 1e-5


def test_sequence_classification_both_directions(tmp_path):
    ours = perturb(BertForSequenceClassification(tiny_config(num_labels=3)))
    ours.save_pretrained(tmp_path / "ours")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "ours").eval()
    assert type(theirs).__name__ == "RobertaForSequenceClassification"
    ids, mask = batch()
    with torch.no_grad():
        a, b = ours(ids, mask).logits, theirs(input_ids=ids, attention_mask=mask).logits
    print(f"RobertaForSequenceClassification bertkit -> transformers max|diff| {(a - b).abs().max():.2e}")
    assert (a - b).abs().max() < 1e-5
    theirs.save_pretrained(tmp_path / "theirs")
    back, info = BertForSequenceClassification.from_pretrained(tmp_path / "theirs", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        assert (back(ids, mask).logits - b).abs().max() < 1e-5


def test_relative_positions_combine_with_roberta(tmp_path):
    model = perturb(BertForMaskedLM(tiny_config(position_embedding_type="relative_key")))
    model.save_pretrained(tmp_path)
    again = BertForMaskedLM.from_pretrained(tmp_path)
    ids, mask = batch()
    with torch.no_grad():
        assert diff(model(ids, mask).logits, again(ids, mask).logits, mask) == 0
