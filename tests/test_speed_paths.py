"""Speed paths give the same numbers as the plain ones.

The last encoder layer runs only where a head reads (MLM: labelled positions; sequence
classification: [CLS]); with it switched off (`last_layer_prunable -> False`) the whole last layer
runs and the positions are selected afterwards. Losses, logits and every gradient must agree.
"""

import pytest
import torch

import bertkit
from bertkit.models.heads import labelled_positions

CFG = dict(vocab_size=300, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
           intermediate_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def batch(seed=0, rate=0.3):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 300, (4, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    mask[3, 4:] = 0
    labels = torch.full_like(ids, -100)
    chosen = (torch.rand(ids.shape, generator=g) < rate) & mask.bool()
    labels[chosen] = ids[chosen]
    return ids, mask, labels


def loss_and_grads(model, **inputs):
    model.zero_grad()
    out = model(**inputs)
    out.loss.backward()
    return out, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def unpruned(model):
    model.bert.last_layer_prunable = lambda *args: False
    return model


def assert_same(a, b, atol=1e-6):
    (out_a, grads_a), (out_b, grads_b) = a, b
    assert torch.allclose(out_a.loss, out_b.loss, atol=atol)
    assert torch.allclose(out_a.logits, out_b.logits, atol=atol)
    assert grads_a.keys() == grads_b.keys()
    for key in grads_a:
        assert torch.allclose(grads_a[key], grads_b[key], atol=atol), key


@pytest.mark.parametrize("overrides", [{}, {"position_embedding_type": "relative_key"}])
def test_mlm_last_layer_at_labelled_positions(overrides):
    model = bertkit.BertForMaskedLM(bertkit.BertConfig(**CFG, **overrides)).train()
    reference = unpruned(bertkit.BertForMaskedLM(model.config))
    reference.load_state_dict(model.state_dict())
    ids, mask, labels = batch()
    inputs = dict(input_ids=ids, attention_mask=mask, labels=labels)
    assert_same(loss_and_grads(model, **inputs), loss_and_grads(reference, **inputs))
    full = model(**inputs, full_logits=True)  # the (B, T, V) path agrees on the loss
    assert torch.allclose(full.loss, model(**inputs).loss, atol=1e-6)


def test_mlm_without_labelled_positions_falls_back():
    model = bertkit.BertForMaskedLM(bertkit.BertConfig(**CFG)).eval()
    ids, mask, _ = batch()
    out = model(input_ids=ids, attention_mask=mask, labels=torch.full_like(ids, -100))
    assert out.logits.shape == (0, 300)


def test_sequence_classification_last_layer_at_cls():
    config = bertkit.BertConfig(**CFG, num_labels=3)
    model = bertkit.BertForSequenceClassification(config).train()
    reference = unpruned(bertkit.BertForSequenceClassification(config))
    reference.load_state_dict(model.state_dict())
    ids, mask, _ = batch()
    inputs = dict(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 2, 1, 2]))
    assert_same(loss_and_grads(model, **inputs), loss_and_grads(reference, **inputs))
    with_states = model(**inputs, output_hidden_states=True)  # every state returned: no pruning
    assert with_states.hidden_states[-1].shape == (4, 12, 32)
    assert torch.allclose(with_states.logits, model(**inputs).logits, atol=1e-6)


def test_labelled_positions_order():
    labels = torch.tensor([[-100, 5, -100, 7], [9, -100, -100, -100], [-100] * 4])
    positions, valid = labelled_positions(labels)
    assert positions.shape == (3, 2)
    assert positions[0].tolist() == [1, 3] and positions[1, 0] == 0
    assert valid.tolist() == [[True, True], [True, False], [False, False]]
    states = torch.arange(12.0).view(3, 4, 1)
    picked = states.gather(1, positions.unsqueeze(-1))[valid]
    assert picked.flatten().tolist() == states[labels != -100].flatten().tolist()
    assert labelled_positions(torch.full((2, 3), -100)) is None


@pytest.mark.slow
def test_compiled_layers_give_the_same_loss_and_gradients():
    model = bertkit.BertForMaskedLM(bertkit.BertConfig(**CFG)).train()
    compiled = bertkit.BertForMaskedLM(model.config).train()
    compiled.load_state_dict(model.state_dict())
    compiled.compile_layers()
    assert all(layer._compiled_call_impl is not None for layer in compiled.bert.encoder.layer)
    ids, mask, labels = batch()
    inputs = dict(input_ids=ids, attention_mask=mask, labels=labels)
    assert_same(loss_and_grads(compiled, **inputs), loss_and_grads(model, **inputs), atol=1e-5)
