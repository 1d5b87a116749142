"""Bottleneck adapters: placement inside the residual path, near-identity start, save/load."""

import pytest
import torch
import torch.nn.functional as F

from bertkit.errors import BertkitError, ConfigError
from bertkit.peft import AdapterConfig, PeftLinear, PeftModel, get_peft_model

from .conftest import padded_batch


@pytest.mark.parametrize("kind", ["houlsby", "pfeiffer"])
def test_adapters_start_near_the_identity(minilm_classifier, minilm_batch, kind):
    with torch.no_grad():
        base = minilm_classifier(**minilm_batch, output_hidden_states=True)
    peft = get_peft_model(minilm_classifier, AdapterConfig(kind=kind)).eval()
    with torch.no_grad():
        out = peft(**minilm_batch, output_hidden_states=True)
    mask = minilm_batch["attention_mask"].bool()
    diff = (out.hidden_states[-1] - base.hidden_states[-1])[mask].abs().max()
    assert 0 < diff < 1e-3  # near, not exactly, the identity: W_up starts small but not zero
    assert (out.logits - base.logits).abs().max() < 1e-3


def test_placement_and_parameter_count(minilm_classifier):
    peft = get_peft_model(minilm_classifier, AdapterConfig(kind="houlsby", reduction_factor=16),
                          adapter_name="h")
    peft.add_adapter("p", AdapterConfig(kind="pfeiffer", reduction_factor=8))
    layer = "bert.encoder.layer.{}."
    assert peft.targets["h"] == [layer.format(i) + p for i in range(6)
                                 for p in ("attention.output.dense", "output.dense")]
    assert peft.targets["p"] == [layer.format(i) + "output.dense" for i in range(6)]
    hidden, labels = 384, 5
    per_adapter = lambda m: hidden * m + m + m * hidden + hidden  # noqa: E731  down + up
    head = hidden * labels + labels
    assert peft.trainable_parameters().parts == {"adapter": 12 * per_adapter(24), "head": head}
    peft.set_active("p")
    assert peft.trainable_parameters().parts == {"adapter": 6 * per_adapter(48), "head": head}
    assert peft.trainable_parameters().share < 0.02


def test_adapter_sits_before_dropout_residual_and_layernorm(tiny_classifier):
    """BertOutput with an adapter computes LayerNorm(h + up(act(down h)) + x), h = dense(a)."""
    peft = get_peft_model(tiny_classifier, AdapterConfig(kind="pfeiffer", reduction_factor=4,
                                                         activation="gelu"))
    block = peft.model.bert.encoder.layer[1].output
    adapter = block.dense.adapter["default"]
    with torch.no_grad():
        adapter.up.weight.normal_(std=0.5)  # a large adapter, so a wrong placement would show
        adapter.up.bias.normal_(std=0.5)
    a = torch.randn(2, 5, 64)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        h = F.linear(a, block.dense.weight, block.dense.bias)
        manual = block.LayerNorm(h + adapter.up(F.gelu(adapter.down(h))) + x)
        without = block.LayerNorm(h + x)
        got = block(a, x)
    assert torch.allclose(got, manual, atol=1e-6)
    assert (got - without).abs().max() > 0.1


def test_only_adapter_and_head_train(tiny_classifier):
    peft = get_peft_model(tiny_classifier, AdapterConfig(kind="houlsby", reduction_factor=4))
    before = {n: p.clone() for n, p in peft.named_parameters()}
    ids, mask = padded_batch()
    optimizer = torch.optim.SGD([p for p in peft.parameters() if p.requires_grad], lr=0.5)
    peft.train()
    peft(ids, mask, labels=torch.tensor([0, 1, 2])).loss.backward()
    optimizer.step()
    changed = {n for n, p in peft.named_parameters() if not torch.equal(p, before[n])}
    assert any(".adapter.default.down." in n for n in changed)
    assert any(".adapter.default.up." in n for n in changed)
    assert all(".adapter.default." in n or "classifier.copies.default." in n for n in changed), changed


def test_save_load_and_no_merge(minilm_classifier, minilm_batch, minilm_dir, tmp_path):
    peft = get_peft_model(minilm_classifier, AdapterConfig(), base_model_path=minilm_dir).eval()
    with torch.no_grad():
        for module in peft.modules():
            if isinstance(module, PeftLinear) and "default" in module.adapter:
                module.adapter["default"].up.weight.normal_(std=0.05)
        expected = peft(**minilm_batch).logits
    peft.save_pretrained(tmp_path / "ad")
    loaded = PeftModel.from_pretrained(tmp_path / "ad")
    with torch.no_grad():
        assert (loaded(**minilm_batch).logits - expected).abs().max() < 1e-5
    with pytest.raises(BertkitError, match="non-linear .* cannot be folded"):
        loaded.merge()
    with pytest.raises(BertkitError, match="non-linear"):
        loaded.merge_and_unload()
    with torch.no_grad():  # a refused merge leaves the model working
        assert (loaded(**minilm_batch).logits - expected).abs().max() < 1e-5


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="parallel"), "kind 'parallel' is not known"),
    (dict(reduction_factor=0), "reduction_factor must be a positive integer"),
    (dict(activation="sigmoidish"), "activation 'sigmoidish' is not known"),
])
def test_bad_adapter_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        AdapterConfig(**kwargs)
