"""The modern encoder on its own: unpadded vs padded execution, gradient checkpointing, dropout,
config validation, and the BertForMaskedLM-compatible call."""

import pytest
import torch

from bertkit import BertConfig, BertkitError, ConfigError
from bertkit.models.dropout import Dropout
from bertkit.models.modern import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification,
                            ModernBertModel)
from bertkit.models.modern.model import Unpadding

CONFIG = dict(vocab_size=89, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=2,
              local_attention=6, global_attn_every_n_layers=2, pad_token_id=0, cls_token_id=1,
              sep_token_id=2, bos_token_id=1, eos_token_id=2)


def varied_batch(lengths, width, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (len(lengths), width), generator=g)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    return ids.masked_fill(mask == 0, 0), mask


def run_both(model, *args, **kwargs):
    """The model's output unpadded (the default) and padded (the reference path)."""
    type(model).unpad = True
    unpadded = model(*args, **kwargs)
    type(model).unpad = False
    try:
        padded = model(*args, **kwargs)
    finally:
        type(model).unpad = True
    return unpadded, padded


def test_unpadding_gathers_and_scatters_real_tokens():
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 1, 1, 1, 0, 0]])
    u = Unpadding.from_mask(mask, ModernBertConfig(**CONFIG))
    assert u.length == 4 and u.indices.tolist() == [0, 1, 2, 4, 5, 9, 10, 11]
    x = torch.arange(18.0).view(3, 6)
    assert u.unpad(x).tolist() == [0, 1, 2, 6, 7, 13, 14, 15]
    back = u.pad(u.unpad(x)[:, None], 6)[..., 0]
    assert torch.equal(back, x * mask)
    # one attention bucket, rows by length (row 1, then 0 and 2), padded to 3; token rows 0-7
    (bucket,) = u.buckets
    assert bucket.rows.tolist() == [[3, 4, 3], [0, 1, 2], [5, 6, 7]]
    assert bucket.real.tolist() == [[True, True, False], [True] * 3, [True] * 3]
    assert sorted(u.order.tolist()) == list(range(8))


def test_unpadded_matches_padded_outputs_and_gradients():
    config = ModernBertConfig(**CONFIG)
    model = ModernBertModel(config).train()  # no dropout by default: train mode is deterministic
    # 19 rows: three attention buckets; windows (+-3) shorter than most rows; two rows left-padded
    lengths = torch.randint(1, 25, (19,), generator=torch.Generator().manual_seed(2)).tolist()
    ids, mask = varied_batch(lengths, 24, config.vocab_size)
    ids[:2], mask[:2] = ids[:2].flip(1), mask[:2].flip(1)
    assert len(Unpadding.from_mask(mask, config).buckets) == 3
    real = mask.bool()
    grads = []
    for unpad in (True, False):
        ModernBertModel.unpad = unpad
        try:
            model.zero_grad()
            out = model(ids, attention_mask=mask, output_hidden_states=True)
        finally:
            ModernBertModel.unpad = True
        (out.last_hidden_state[real] ** 2).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        states = [out.last_hidden_state[real]] + [h[real] for h in out.hidden_states]
        if unpad:
            first = states
            assert (out.last_hidden_state[~real] == 0).all()  # padding stays zero
    for a, b in zip(first, states, strict=True):
        assert (a - b).abs().max() < 1e-5
    for name in grads[0]:
        # Gradients reach 650 (final_norm) in this sum over ~250 tokens; the embedding table's
        # come out of the embedding norm's backward (x 1/std = 50) with heavy cancellation, so
        # summation order shows there (2.5e-5 measured); a wrong mask or position gives O(1).
        assert (grads[0][name] - grads[1][name]).abs().max() < 1e-4, name


def test_unpadded_heads_match_padded():
    config = ModernBertConfig(**CONFIG, num_labels=3, classifier_pooling="mean")
    ids, mask = varied_batch([12, 5, 9], 12, config.vocab_size, seed=1)
    labels = torch.where(torch.rand(ids.shape) < 0.4, ids, -100).masked_fill(mask == 0, -100)
    with torch.no_grad():
        a, b = run_both(ModernBertForMaskedLM(config).eval(), ids, attention_mask=mask, labels=labels)
        assert abs(a.loss - b.loss) < 1e-5 and (a.logits - b.logits).abs().max() < 1e-5
        a, b = run_both(ModernBertForSequenceClassification(config).eval(), ids, attention_mask=mask)
        assert (a.logits - b.logits).abs().max() < 1e-5


def test_gradient_checkpointing_gives_the_same_gradients():
    config = ModernBertConfig(**CONFIG, mlp_dropout=0.1, embedding_dropout=0.1, attention_dropout=0.1)
    model = ModernBertForMaskedLM(config).train()
    ids, mask = varied_batch([10, 6], 10, config.vocab_size)
    labels = torch.where(mask.bool(), ids, -100)
    grads = []
    for enabled in (False, True):
        model.set_gradient_checkpointing(enabled)
        model.zero_grad()
        torch.manual_seed(5)  # the same dropout masks; recomputation replays the RNG state
        model(ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        assert (a - b).abs().max() < 1e-6


def test_dropout_is_bertkits_and_applies_in_training():
    config = ModernBertConfig(**CONFIG, mlp_dropout=0.2, embedding_dropout=0.2, attention_dropout=0.2,
                              classifier_dropout=0.2)
    model = ModernBertForSequenceClassification(config)
    drops = [m for m in model.modules() if isinstance(m, Dropout)]
    assert len(drops) == 1 + 2 * config.num_hidden_layers + 1  # embeddings, attention out + mlp, classifier
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())
    ids, mask = varied_batch([10, 6], 10, config.vocab_size)
    model.train()
    torch.manual_seed(0)
    first = model(ids, attention_mask=mask).logits
    torch.manual_seed(0)
    assert torch.equal(first, model(ids, attention_mask=mask).logits)  # seeded: repeatable
    assert not torch.allclose(first, model(ids, attention_mask=mask).logits)  # new masks differ
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(ids, attention_mask=mask).logits, model(ids, attention_mask=mask).logits)


def test_masked_lm_takes_bert_masked_lm_arguments():
    config = ModernBertConfig(**CONFIG)
    model = ModernBertForMaskedLM(config).eval()
    ids, mask = varied_batch([8, 5], 8, config.vocab_size)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 1] = ids[0, 3], ids[1, 1]
    with torch.no_grad():
        sparse = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels)
        full = model(ids, mask, None, None, labels, full_logits=True)
        plain = model(ids, attention_mask=mask)
    assert sparse.logits.shape == (2, config.vocab_size) and full.logits.shape == (2, 8, config.vocab_size)
    assert abs(sparse.loss - full.loss) < 1e-5
    assert (sparse.logits - plain.logits[labels != -100]).abs().max() < 1e-5
    with pytest.raises(BertkitError, match="head_mask"):
        model(ids, head_mask=torch.ones(2))
    with pytest.raises(BertkitError, match="outside the model's vocabulary"):
        model(ids + config.vocab_size)


def test_tied_decoder_is_the_token_embedding():
    model = ModernBertForMaskedLM(ModernBertConfig(**CONFIG))
    assert "decoder.weight" not in model.state_dict()
    assert model.decoder.embeddings is model.model.embeddings.tok_embeddings
    untied = ModernBertForMaskedLM(ModernBertConfig(**CONFIG, tie_word_embeddings=False))
    assert untied.state_dict()["decoder.weight"].shape == (CONFIG["vocab_size"], CONFIG["hidden_size"])


@pytest.mark.parametrize("change, message", [
    (dict(hidden_size=33), "divisible by num_attention_heads"),
    (dict(hidden_size=36, num_attention_heads=4), "must be even"),
    (dict(local_attention=5), "local_attention .5. must be even"),
    (dict(layer_types=["full_attention"]), "layer_types must list 4"),
    (dict(classifier_pooling="max"), "classifier_pooling 'max'"),
    (dict(mlp_dropout=1.0), "mlp_dropout must be in"),
    (dict(pad_token_id=500), "pad_token_id .500. must be a valid id"),
    (dict(hidden_activation="gelu2"), "hidden_activation"),
])
def test_bad_config_values_are_refused_with_advice(change, message):
    with pytest.raises(ConfigError, match=message):
        ModernBertConfig(**{**CONFIG, **change})


def test_refuses_rope_scaling_it_does_not_implement():
    with pytest.raises(ConfigError, match="rope_type 'yarn'"):
        ModernBertConfig.from_dict({**CONFIG, "rope_parameters": {"full_attention": {"rope_type": "yarn"}}})


def test_presets_match_bert_shapes():
    for name in ("tiny", "mini"):
        modern, bert = ModernBertConfig.preset(name), BertConfig.preset(name)
        assert (modern.num_hidden_layers, modern.hidden_size, modern.num_attention_heads, modern.vocab_size) == \
            (bert.num_hidden_layers, bert.hidden_size, bert.num_attention_heads, bert.vocab_size)
    mini = ModernBertConfig.preset("mini", num_hidden_layers=6)
    assert mini.layer_types == ["full_attention", "sliding_attention", "sliding_attention"] * 2
    assert mini.replace(num_hidden_layers=2).layer_types == ["full_attention", "sliding_attention"]


def test_input_mistakes_get_clear_errors():
    config = ModernBertConfig(**CONFIG, max_position_embeddings=16)
    model = ModernBertForMaskedLM(config).eval()
    ids, mask = varied_batch([8, 5], 8, config.vocab_size)
    with pytest.raises(BertkitError, match="marks no token as real"):
        model(ids, attention_mask=torch.zeros_like(mask))
    labels = torch.full_like(ids, -100)
    labels[1, 6] = 7  # row 1 has 5 real tokens
    with pytest.raises(BertkitError, match="fall on padding"):
        model(ids, attention_mask=mask, labels=labels)
    with pytest.raises(BertkitError, match="exceeds max_position_embeddings"):
        model(torch.ones(1, 17, dtype=torch.long))
    with pytest.raises(BertkitError, match="attention_mask shape"):
        model(ids, attention_mask=mask[:, :4])
