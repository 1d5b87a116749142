"""Sinusoidal positions (`position_embedding_type="sinusoidal"`): the formula, training, saving,
and the warning that transformers cannot run such a checkpoint (nor relative_key ones)."""

import math
import warnings

import pytest
import torch
from safetensors.torch import load_file

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.encoder import BertModel
from bertkit.models.variants.keymaps import TRANSFORMERS_CANNOT_RUN
from bertkit.models.variants.sinusoidal import sinusoidal_table

from .training import fit_one_masked_batch


def config(**overrides):
    values = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=40, position_embedding_type="sinusoidal")
    values.update(overrides)
    return BertConfig(**values)


@pytest.mark.parametrize("positions,width", [(50, 16), (7, 5), (512, 384)])
def test_table_is_the_transformer_formula(positions, width):
    table = sinusoidal_table(positions, width)
    assert table.shape == (positions, width) and table.dtype == torch.float32
    for pos in {0, 1, positions // 2, positions - 1}:
        for j in range(width):
            i = j // 2
            angle = pos / 10000 ** (2 * i / width)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert table[pos, j].item() == pytest.approx(expected, abs=1e-6), (pos, j)
    assert torch.equal(table[0, 0::2], torch.zeros(math.ceil(width / 2)))  # sin 0
    assert torch.equal(table[0, 1::2], torch.ones(width // 2))  # cos 0


def test_embeddings_add_the_fixed_table_where_the_learned_one_was():
    model = BertModel(config(hidden_dropout_prob=0.0)).eval()
    emb = model.embeddings
    assert emb.position_embeddings is None
    assert "embeddings.sinusoidal_positions" not in model.state_dict()  # a buffer, not saved
    assert not any("position" in name for name, _ in model.named_parameters())  # not trained
    ids = torch.randint(5, 60, (2, 9))
    types = torch.randint(0, 2, (2, 9))
    expected = emb.LayerNorm(emb.word_embeddings(ids) + sinusoidal_table(40, 32)[:9]
                             + emb.token_type_embeddings(types))
    assert torch.allclose(emb(ids, types), expected, atol=1e-6)
    # The model sees order: a token moved to another position gets another vector.
    swapped = ids.clone()
    swapped[:, [2, 3]] = ids[:, [3, 2]]
    with torch.no_grad():
        a, b = model(ids).last_hidden_state, model(swapped).last_hidden_state
    assert (a[:, 2] - b[:, 3]).abs().max() > 0.1


def test_pruned_last_layer_equals_the_full_one():
    model = BertModel(config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    ids = torch.randint(5, 60, (2, 12))
    positions = torch.tensor([[0, 3, 7], [1, 2, 11]])
    with torch.no_grad():
        full = model(ids).last_hidden_state
        pruned = model(ids, output_positions=positions).last_hidden_state
    assert torch.allclose(pruned, full.gather(1, positions[..., None].expand(-1, -1, 32)), atol=1e-5)


def test_mlm_model_with_sinusoidal_positions_trains():
    torch.manual_seed(0)
    model = BertForMaskedLM(config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    losses, inputs, _ = fit_one_masked_batch(model, 40)
    assert losses[-1] < 0.5 * losses[0], losses[::8]


def test_saves_warns_and_loads_back(tmp_path):
    torch.manual_seed(0)
    model = BertForMaskedLM(config()).eval()
    with pytest.warns(UserWarning, match="sinusoidal.*transformers 5"):
        model.save_pretrained(tmp_path)
    keys = set(load_file(tmp_path / "model.safetensors"))
    assert not any("position" in key for key in keys)  # the table is rebuilt, not stored
    again = BertForMaskedLM.from_pretrained(tmp_path)  # no missing-weights warning either
    assert again.config.position_embedding_type == "sinusoidal"
    ids = torch.randint(5, 60, (2, 10))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)


def test_transformers_runs_these_checkpoints_wrongly(tmp_path):
    # Why the save warns: transformers 5 loads each such checkpoint and computes something else.
    transformers = pytest.importorskip("transformers")
    ids = torch.randint(5, 60, (2, 10))
    assert set(TRANSFORMERS_CANNOT_RUN) == {"relative_key", "relative_key_query", "sinusoidal", "t5_bias"}
    for kind in TRANSFORMERS_CANNOT_RUN:
        torch.manual_seed(0)
        ours = BertModel(config(position_embedding_type=kind)).eval()
        with pytest.warns(UserWarning, match=f"{kind}'.*transformers 5"):
            ours.save_pretrained(tmp_path / kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = transformers.BertModel.from_pretrained(tmp_path / kind).eval()
        with torch.no_grad():
            diff = (ours(ids).last_hidden_state - theirs(ids).last_hidden_state).abs().max()
        assert diff > 1e-2, kind
    torch.manual_seed(0)
    plain = BertModel(config(position_embedding_type="absolute")).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # absolute positions: no warning
        plain.save_pretrained(tmp_path / "absolute")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.BertModel.from_pretrained(tmp_path / "absolute").eval()
    with torch.no_grad():
        assert (plain(ids).last_hidden_state - theirs(ids).last_hidden_state).abs().max() < 1e-5


def test_ddp_need_not_search_for_unused_parameters():
    from bertkit.train.trainer import may_skip_parameters

    assert not may_skip_parameters(BertModel(config()))  # every parameter gets a gradient
    assert may_skip_parameters(BertModel(config(position_embedding_type="relative_key")))


def test_config_checks():
    with pytest.raises(ConfigError, match="position_biased_input"):
        config(position_biased_input=False)
    with pytest.raises(ConfigError, match="sinusoidal"):
        config(position_embedding_type="sinusiodal")  # the message lists the valid types
    sparse = BertModel(config(attention_block_size=4, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0)).eval()
    with torch.no_grad():  # block-sparse attention is fine with positions added to the input
        assert sparse(torch.randint(5, 60, (1, 12))).last_hidden_state.shape == (1, 12, 32)
    albert = BertModel(config(model_type="albert", embedding_size=16))  # factorised: E-wide table
    assert albert.embeddings.sinusoidal_positions.shape == (40, 16)
