"""ELECTRA: generator + discriminator with shared embeddings; discriminator exports to transformers."""

import pytest
import torch

from bertkit.models.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.heads import BertForMaskedLM, BertForSequenceClassification
from bertkit.objectives.electra import (ElectraForPreTraining, ElectraPretrainer, generator_config,
                                      gumbel_sample)

from .helpers import perturb

transformers = pytest.importorskip("transformers")


def disc_config(**changes):
    values = dict(model_type="electra", vocab_size=90, hidden_size=64, num_attention_heads=4,
                  intermediate_size=128, embedding_size=32, num_hidden_layers=2, max_position_embeddings=32)
    values.update(changes)
    return BertConfig.preset("tiny", **values)


def mlm_batch():
    torch.manual_seed(3)
    ids = torch.randint(5, 90, (3, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    ids[mask == 0] = 0
    labels = torch.full_like(ids, -100)
    pick = (torch.rand(ids.shape) < 0.3) & mask.bool()
    pick[0, 1] = True
    labels[pick] = ids[pick]
    inputs = ids.clone()
    inputs[pick] = 4  # [MASK]
    return inputs, labels, mask


def test_generator_config_is_a_quarter_wide_with_the_same_embeddings():
    gen = generator_config(disc_config())
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size, gen.embedding_dim) == (16, 1, 32, 32)
    with pytest.raises(ConfigError, match="wider than the discriminator"):
        ElectraPretrainer(disc_config(), disc_config(hidden_size=128, intermediate_size=256))
    with pytest.raises(ConfigError, match="hidden_fraction"):
        generator_config(disc_config(), hidden_fraction=1.5)
    with pytest.raises(ConfigError, match="vocab_size"):
        ElectraPretrainer(disc_config(), generator_config(disc_config()).replace(vocab_size=91))


def test_pretrainer_shares_embeddings_and_computes_the_electra_loss():
    model = ElectraPretrainer(disc_config())
    assert model.generator.bert.embeddings is model.discriminator.bert.embeddings
    assert model.generator.cls.predictions.word_embeddings is model.discriminator.bert.embeddings.word_embeddings
    inputs, labels, mask = mlm_batch()
    out = model(inputs, labels, mask)
    assert torch.allclose(out.loss, out.generator_loss + 50 * out.discriminator_loss)
    masked = labels != -100
    assert out.generator_logits.shape == (int(masked.sum()), 90)
    assert torch.equal(out.corrupted_ids[~masked], inputs[~masked])  # only masked positions change
    assert not out.replaced[~masked].any()
    original = torch.where(masked, labels, inputs)
    assert torch.equal(out.replaced, out.corrupted_ids != original)
    # the discriminator's BCE runs over every real token, as transformers computes it
    logits = out.discriminator_logits[mask.bool()]
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, out.replaced[mask.bool()].float())
    assert torch.allclose(out.discriminator_loss, expected)

    # no gradient from the discriminator's loss reaches the generator's layers (sampling is detached)
    out.discriminator_loss.backward()
    assert all(p.grad is None for p in model.generator.bert.encoder.parameters())
    assert model.discriminator.bert.embeddings.word_embeddings.weight.grad is not None
    model.zero_grad()
    model(inputs, labels, mask).loss.backward()
    assert model.generator.bert.encoder.layer[0].output.dense.weight.grad is not None
    # with nothing masked the loss is still finite
    assert torch.isfinite(model(inputs, torch.full_like(labels, -100), mask).loss)


def test_gumbel_sampling_follows_the_softmax():
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([0.6, 0.3, 0.1])).expand(20000, 3)
    freq = torch.bincount(gumbel_sample(logits), minlength=3).float() / 20000
    assert torch.allclose(freq, torch.tensor([0.6, 0.3, 0.1]), atol=0.02)


def test_discriminator_and_generator_load_in_transformers_and_back(tmp_path):
    model = perturb(ElectraPretrainer(disc_config()))
    model.save_pretrained(tmp_path)
    inputs, labels, mask = mlm_batch()
    disc = transformers.ElectraForPreTraining.from_pretrained(tmp_path / "discriminator").eval()
    gen = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "generator").eval()
    with torch.no_grad():
        a = model.discriminator(inputs, mask).logits
        b = disc(input_ids=inputs, attention_mask=mask).logits
        d_disc = (a - b)[mask.bool()].abs().max().item()
        g = model.generator(inputs, mask).logits
        h = gen(input_ids=inputs, attention_mask=mask).logits
        d_gen = (g - h)[mask.bool()].abs().max().item()
    print(f"ElectraForPreTraining bertkit -> transformers {d_disc:.2e}; ElectraForMaskedLM {d_gen:.2e}")
    assert d_disc < 1e-5 and d_gen < 1e-5

    disc.save_pretrained(tmp_path / "hf-disc")
    back, info = ElectraForPreTraining.from_pretrained(tmp_path / "hf-disc", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []
    with torch.no_grad():
        assert (back(inputs, mask).logits - b)[mask.bool()].abs().max() < 1e-5
    gen.save_pretrained(tmp_path / "hf-gen")
    back_gen, info = BertForMaskedLM.from_pretrained(tmp_path / "hf-gen", output_loading_info=True)
    assert info.missing_keys == [] and info.unexpected_keys == []

    again = ElectraPretrainer.from_pretrained(tmp_path)
    assert again.generator.bert.embeddings is again.discriminator.bert.embeddings
    with torch.no_grad():
        assert torch.equal(again.discriminator(inputs, mask).logits, a)


def test_pair_checkpoint_keeps_generator_settings_and_resumes_like_any_model(tmp_path):
    from bertkit.models.checkpoint import load_into, read_state_dict

    gen = generator_config(disc_config(), hidden_fraction=0.5, num_hidden_layers=1)
    model = ElectraPretrainer(disc_config(), gen, disc_weight=20.0)
    model.save_pretrained(tmp_path)
    again = ElectraPretrainer.from_pretrained(tmp_path)
    assert (again.generator.config.hidden_size, again.generator.config.num_hidden_layers) == (32, 1)
    assert again.disc_weight == 20.0
    assert again.config.replace(architectures=None).to_dict() == model.config.to_dict()
    # what the Trainer does on resume: same config, every key found, nothing left over
    fresh = ElectraPretrainer(again.config)
    report = load_into(fresh, read_state_dict(tmp_path), fresh.base_model_prefix)
    assert report.missing_keys == [] and report.unexpected_keys == []
    for (name, x), y in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(x, y), name
    assert fresh.generator.bert.embeddings is fresh.discriminator.bert.embeddings


@pytest.mark.filterwarnings("ignore:BertForSequenceClassification")
def test_discriminator_fine_tunes_as_transformers_electra_classifier(tmp_path):
    ElectraForPreTraining(disc_config()).save_pretrained(tmp_path / "disc")
    clf = perturb(BertForSequenceClassification.from_pretrained(tmp_path / "disc", num_labels=3))
    clf.save_pretrained(tmp_path / "clf")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "clf").eval()
    assert type(theirs).__name__ == "ElectraForSequenceClassification"
    inputs, _, mask = mlm_batch()
    with torch.no_grad():
        assert (clf(inputs, mask).logits - theirs(input_ids=inputs, attention_mask=mask).logits).abs().max() < 1e-5
