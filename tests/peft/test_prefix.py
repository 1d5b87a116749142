"""Prefix tuning: one layer against a hand computation, fast == explicit path, padding, folding."""

import math

import pytest
import torch

import bertkit
from bertkit.errors import BertkitError, ConfigError
from bertkit.models.encoder import BertSelfAttention, attention_bias
from bertkit.peft import PeftModel, PrefixConfig, get_peft_model
from bertkit.peft.prefix import PrefixEncoder, PrefixHook, PrefixTuning

from .conftest import padded_batch, tiny_config


def test_one_layer_against_a_manual_computation():
    config = tiny_config()
    attention = BertSelfAttention(config).eval()
    P, H, h = 3, config.hidden_size, config.num_attention_heads
    d = H // h
    prefixes = PrefixTuning()
    prefixes.encoders["x"] = PrefixEncoder(PrefixConfig(num_virtual_tokens=P, init="normal"), 1, H, std=1.0)
    prefixes.active = "x"
    attention.prefix = PrefixHook(prefixes, 0, h)

    x = torch.randn(2, 5, H)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    bias = attention_bias(mask, x.dtype)
    pk, pv = prefixes.encoders["x"].key_values[0]  # (P, H) each

    def heads(t):  # (B, T, H) -> (B, h, T, d)
        return t.view(t.shape[0], t.shape[1], h, d).transpose(1, 2)

    with torch.no_grad():
        q = heads(attention.query(x))
        k = heads(torch.cat([pk.expand(2, P, H), attention.key(x)], dim=1))
        v = heads(torch.cat([pv.expand(2, P, H), attention.value(x)], dim=1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        scores = scores.masked_fill(torch.cat([torch.ones(2, P), mask], 1)[:, None, None, :] == 0, -1e30)
        probs = scores.softmax(-1)
        manual = (probs @ v).transpose(1, 2).reshape(2, 5, H)
        fast, none = attention(x, bias)
        explicit, got_probs = attention(x, bias, output_attentions=True)
    assert none is None
    assert torch.allclose(fast, manual, atol=1e-5)
    assert torch.allclose(explicit, manual, atol=1e-5)
    assert got_probs.shape == (2, h, 5, P + 5)
    assert torch.allclose(got_probs, probs, atol=1e-6)
    assert got_probs[1, :, :, P + 3:].abs().max() == 0  # padded keys stay masked
    assert got_probs[1, :, :, :P].min() > 0  # the prefix is always attended
    without_bias, _ = attention(x[:1])  # no padding: bias None, SDPA without a mask
    assert torch.allclose(without_bias, manual[:1], atol=1e-5)


def test_fast_path_equals_explicit_path_on_minilm(minilm_classifier, minilm_batch):
    peft = get_peft_model(minilm_classifier, PrefixConfig(num_virtual_tokens=8)).eval()
    with torch.no_grad():
        fast = peft(**minilm_batch, output_hidden_states=True)
        explicit = peft(**minilm_batch, output_hidden_states=True, output_attentions=True)
    mask = minilm_batch["attention_mask"].bool()
    for a, b in zip(fast.hidden_states, explicit.hidden_states):
        assert (a - b)[mask].abs().max() < 1e-5
    assert explicit.attentions[0].shape[-1] == 8 + mask.shape[1]
    head_mask = torch.ones(6, 12)
    with torch.no_grad():  # the head-mask path (explicit) takes the prefix too
        masked = peft(**minilm_batch, head_mask=head_mask).logits
    assert (masked - fast.logits).abs().max() < 1e-5


def test_padding_does_not_change_real_tokens(minilm_classifier, minilm_batch):
    peft = get_peft_model(minilm_classifier, PrefixConfig(num_virtual_tokens=8)).eval()
    with torch.no_grad():
        batched = peft(**minilm_batch, output_hidden_states=True).hidden_states[-1]
        for row in range(batched.shape[0]):
            n = int(minilm_batch["attention_mask"][row].sum())
            alone = {k: v[row:row + 1, :n] for k, v in minilm_batch.items()}
            single = peft(**alone, output_hidden_states=True).hidden_states[-1]
            assert (single[0] - batched[row, :n]).abs().max() < 1e-5


def test_prefix_changes_the_model_and_only_it_trains(tiny_classifier):
    ids, mask = padded_batch()
    with torch.no_grad():
        base = tiny_classifier(ids, mask, output_hidden_states=True)
    peft = get_peft_model(tiny_classifier, PrefixConfig(num_virtual_tokens=4))
    assert peft.trainable_parameters().parts == {"prefix": 2 * 2 * 4 * 32, "head": 32 * 3 + 3}
    with torch.no_grad():
        changed = peft(ids, mask, output_hidden_states=True).hidden_states[-1] - base.hidden_states[-1]
    assert changed[mask.bool()].abs().max() > 1e-3  # (a random tiny model: small values)
    peft.train()
    peft(ids, mask, labels=torch.tensor([0, 1, 2])).loss.backward()
    grads = {n for n, p in peft.named_parameters() if p.grad is not None}
    assert grads == {"prefixes.encoders.default.key_values", "model.classifier.copies.default.weight",
                     "model.classifier.copies.default.bias"}
    peft.set_active(None)
    peft.eval()
    with torch.no_grad():
        # base came from a forward with hidden states (the last layer runs in full), this one
        # from the pruned last layer: the same math, not the same float operations
        torch.testing.assert_close(peft(ids, mask).logits, base.logits, rtol=0, atol=1e-6)


def test_vocab_init_uses_the_base_models_own_keys_and_values(tiny_classifier):
    peft = get_peft_model(tiny_classifier, PrefixConfig(num_virtual_tokens=3))
    key_values = peft.prefixes.encoders["default"].key_values  # (L, 2, P, H)
    attention = tiny_classifier.bert.encoder.layer[0].attention.self
    with torch.no_grad():
        for j in range(3):
            # layer 0's input for every vocabulary token at position j
            ids = torch.arange(120).unsqueeze(1)
            position = torch.full_like(ids, j)
            x = tiny_classifier.bert.embeddings(ids, position_ids=position)[:, 0]
            keys, values = attention.key(x), attention.value(x)
            k_err = (keys - key_values[0, 0, j]).abs().max(-1).values
            token = int(k_err.argmin())
            assert k_err[token] < 1e-5
            assert (values[token] - key_values[0, 1, j]).abs().max() < 1e-5


def test_reparameterized_prefix_folds_to_the_same_outputs(tiny_classifier, tmp_path):
    ids, mask = padded_batch()
    peft = get_peft_model(tiny_classifier, PrefixConfig(num_virtual_tokens=4, reparameterize=True,
                                                        projection_hidden=16)).eval()
    L, H = 2, 32
    mlp = H * 16 + 16 + 16 * (L * 2 * H) + L * 2 * H
    assert peft.trainable_parameters().parts["prefix"] == 4 * H + mlp
    with torch.no_grad():
        before = peft(ids, mask).logits
    peft.save_pretrained(tmp_path / "mlp")
    peft.fold_prefix()
    assert peft.trainable_parameters().parts["prefix"] == L * 2 * 4 * H
    assert not peft.peft_configs["default"].reparameterize
    with torch.no_grad():
        assert (peft(ids, mask).logits - before).abs().max() < 1e-6
    peft.save_pretrained(tmp_path / "folded")
    for directory in ("mlp", "folded"):  # both forms load (onto the same in-memory base)
        base = bertkit.BertForSequenceClassification(tiny_classifier.config)
        base.load_state_dict({k.replace("classifier.original.", "classifier."): v
                              for k, v in peft.model.state_dict().items()
                              if not (".copies." in k)}, strict=True)
        loaded = PeftModel.from_pretrained(tmp_path / directory, base=base)
        with torch.no_grad():
            assert (loaded(ids, mask).logits - before).abs().max() < 1e-5


def test_prefix_with_relative_positions_fast_equals_explicit():
    model = bertkit.BertModel(tiny_config(position_embedding_type="relative_key_query")).eval()
    peft = get_peft_model(model, PrefixConfig(num_virtual_tokens=5))
    ids, mask = padded_batch()
    with torch.no_grad():
        fast = peft(ids, mask).last_hidden_state
        explicit = peft(ids, mask, output_attentions=True).last_hidden_state
    assert (fast - explicit)[mask.bool()].abs().max() < 1e-5


def test_prefix_cannot_be_merged_and_bad_settings(tiny_classifier):
    peft = get_peft_model(tiny_classifier, PrefixConfig(num_virtual_tokens=2))
    with pytest.raises(BertkitError, match="prefix tuning: its extra key/value tokens"):
        peft.merge()
    with pytest.raises(ConfigError, match="num_virtual_tokens must be a positive integer"):
        PrefixConfig(num_virtual_tokens=0)
    with pytest.raises(ConfigError, match="init 'zeros' is not known"):
        PrefixConfig(init="zeros")
