"""LoRA: exact start, merge/unmerge, save/load with the head, named adapters, errors, learning."""

import os
import re

import pytest
import torch

import bertkit
from bertkit.errors import BertkitError, CheckpointError, ConfigError
from bertkit.peft import LoraConfig, PeftLinear, PeftModel, get_peft_model

from .conftest import padded_batch, tiny_config


def perturb_lora(peft, name=None, std=0.05):
    """Give B (zero at init) random values so the update is not zero."""
    name = name or peft.active_adapter
    with torch.no_grad():
        for module in peft.modules():
            if isinstance(module, PeftLinear) and name in module.lora:
                module.lora[name].B.normal_(std=std)


def test_lora_at_init_equals_the_base_exactly(minilm_classifier, minilm_batch):
    with torch.no_grad():
        base = minilm_classifier(**minilm_batch, output_hidden_states=True)
    peft = get_peft_model(minilm_classifier, LoraConfig(r=4, alpha=8, dropout=0.1)).eval()
    with torch.no_grad():
        out = peft(**minilm_batch, output_hidden_states=True)
    assert torch.equal(out.logits, base.logits)
    for a, b in zip(out.hidden_states, base.hidden_states):
        assert torch.equal(a, b)


def test_trainable_parameters_are_lora_plus_head(minilm_classifier):
    peft = get_peft_model(minilm_classifier, LoraConfig(r=8))
    count = peft.print_trainable_parameters()
    layers, hidden, labels = 6, 384, 5
    lora = layers * 2 * 8 * (hidden + hidden)  # query and value: A (r, in) + B (out, r)
    head = hidden * labels + labels
    assert count.parts == {"lora": lora, "head": head}
    assert count.trainable == lora + head
    assert count.total == sum(p.numel() for p in peft.parameters())
    assert count.share < 0.02
    trainable = {n for n, p in peft.named_parameters() if p.requires_grad}
    assert all(re.search(r"\.lora\.default\.[AB]$|classifier\.copies\.default\.", n) for n in trainable)
    assert f"{count.trainable:,}" in str(count)


@pytest.mark.parametrize("method", ["lora", "adapter", "prefix"])
def test_a_bare_encoder_has_no_head_to_save(method):
    """A BertModel has no task head: the default modules_to_save is empty (as PEFT's
    FEATURE_EXTRACTION on AutoModel), so only the method's own parameters train (not a full
    copy of the encoder), and LoRA finds the encoder's linear layers."""
    from bertkit.peft import make_config

    encoder = bertkit.BertModel(tiny_config())
    settings = {"prefix": {"num_virtual_tokens": 4, "init": "normal"}}.get(method, {})
    peft = get_peft_model(encoder, make_config(method, **settings))
    count = peft.trainable_parameters()
    assert peft.saved_modules["default"] == [] and list(count.parts) == [method]
    assert count.trainable == count.parts[method] and count.share < 0.2
    if method == "lora":
        assert peft.targets["default"][0] == "encoder.layer.0.attention.self.query"


def test_targets_by_name_and_regex(tiny_classifier):
    peft = get_peft_model(tiny_classifier, LoraConfig(target_modules=["key", "intermediate.dense"]))
    assert peft.targets["default"] == [
        "bert.encoder.layer.0.attention.self.key", "bert.encoder.layer.0.intermediate.dense",
        "bert.encoder.layer.1.attention.self.key", "bert.encoder.layer.1.intermediate.dense"]
    peft.add_adapter("top", LoraConfig(target_modules=r".*layer\.1\..*(query|value)"))
    assert peft.targets["top"] == ["bert.encoder.layer.1.attention.self.query",
                                   "bert.encoder.layer.1.attention.self.value"]
    # the classifier is the saved head, never a LoRA target
    peft.add_adapter("dense", LoraConfig(target_modules=["dense"]))
    assert not any("classifier" in t for t in peft.targets["dense"])
    assert "bert.pooler.dense" in peft.targets["dense"]


@pytest.mark.parametrize("targets, expected", [
    (["query", "valeu"], "near names: value"),
    (["atention.self.query"], "near names: attention.self.query"),
    (r".*\.qkv", "matches no linear layer"),
])
def test_targets_that_match_nothing_are_reported_with_near_names(tiny_classifier, targets, expected):
    with pytest.raises(ConfigError, match=re.escape(expected)) as info:
        get_peft_model(tiny_classifier, LoraConfig(target_modules=targets))
    assert "query, key, value, dense" in str(info.value)
    assert not any(isinstance(m, PeftLinear) for m in tiny_classifier.modules())  # nothing changed
    assert all(p.requires_grad for p in tiny_classifier.parameters())


@pytest.mark.parametrize("kwargs, message", [
    (dict(r=0), "rank r must be a positive integer"),
    (dict(alpha=-1), "alpha must be a positive"),
    (dict(dropout=1.0), "dropout must be in"),
    (dict(init="xavier"), "init 'xavier' is not known"),
    (dict(target_modules=[]), "target_modules is empty"),
    # PEFT's names for bertkit's fields name bertkit's; other unknown names the nearest field
    (dict(lora_alpha=32), r"lora_alpha is PEFT's name; bertkit.peft.LoraConfig calls it alpha \(LoraConfig\(alpha=32\)\)"),
    (dict(lora_dropout=0.1), "calls it dropout"),
    (dict(alfa=4), "no setting 'alfa'; did you mean alpha?"),
])
def test_bad_lora_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        LoraConfig(**kwargs)


def test_merge_unmerge_round_trip(minilm_classifier, minilm_batch):
    original = {k: v.clone() for k, v in minilm_classifier.state_dict().items()}
    with torch.no_grad():
        base = minilm_classifier(**minilm_batch).logits
    peft = get_peft_model(minilm_classifier, LoraConfig(r=8, target_modules=["query", "value", "dense"])).eval()
    perturb_lora(peft)
    with torch.no_grad():
        unmerged = peft(**minilm_batch).logits
        peft.merge()
        merged = peft(**minilm_batch).logits
    assert (unmerged - base).abs().max() > 1e-2  # the update does something
    assert (merged - unmerged).abs().max() < 1e-4
    query = peft.model.bert.encoder.layer[0].attention.self.query
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert (query.weight - original[key]).abs().max() > 1e-3  # really inside the weight
    with pytest.raises(BertkitError, match="already merged"):
        peft.merge()
    with pytest.raises(BertkitError, match="unmerge"):
        peft.set_active(None)
    peft.unmerge()
    with pytest.raises(BertkitError, match="nothing to unmerge"):
        peft.unmerge()
    state = peft.model.state_dict()
    for name, value in original.items():
        if name.startswith("bert."):  # same key names as the base: the weights are back
            assert (state[name] - value).abs().max() < 1e-6, name
    with torch.no_grad():
        assert (peft(**minilm_batch).logits - unmerged).abs().max() < 1e-5


def test_save_load_merge_keeps_the_head(minilm_classifier, minilm_batch, minilm_dir, tmp_path):
    peft = get_peft_model(minilm_classifier, LoraConfig(r=4), base_model_path=minilm_dir)
    perturb_lora(peft)
    with torch.no_grad():
        peft.model.classifier.copies["default"].weight.add_(1.0)  # a head only the adapter has
        head = peft.model.classifier.copies["default"].weight.clone()
    peft.eval()
    with torch.no_grad():
        expected = peft(**minilm_batch).logits
    peft.save_pretrained(tmp_path / "adapter")
    files = sorted(os.listdir(tmp_path / "adapter"))
    assert files == ["adapter_config.json", "adapter_model.safetensors", "config.json"]
    assert os.path.getsize(tmp_path / "adapter" / "adapter_model.safetensors") < 400_000  # vs 90 MB

    loaded = PeftModel.from_pretrained(tmp_path / "adapter")  # base from adapter_config.json
    assert not loaded.training
    with torch.no_grad():
        assert (loaded(**minilm_batch).logits - expected).abs().max() < 1e-5
    plain = loaded.merge_and_unload()
    assert type(plain) is bertkit.BertForSequenceClassification
    assert not any(isinstance(m, PeftLinear) for m in plain.modules())
    assert torch.equal(plain.classifier.weight, head)
    assert set(plain.state_dict()) == set(minilm_classifier.__class__(plain.config).state_dict())
    with torch.no_grad():
        assert (plain(**minilm_batch).logits - expected).abs().max() < 1e-4
    with pytest.raises(BertkitError, match="merge_and_unload"):
        loaded(**minilm_batch)


def test_named_adapters_switch_outputs_heads_and_training(minilm_classifier, minilm_batch, tmp_path):
    with torch.no_grad():
        base = minilm_classifier(**minilm_batch).logits
    peft = get_peft_model(minilm_classifier, LoraConfig(r=4), adapter_name="a").eval()
    perturb_lora(peft, "a")
    peft.add_adapter("b", LoraConfig(r=2, target_modules=["key"]))
    perturb_lora(peft, "b")
    with torch.no_grad():
        peft.model.classifier.copies["b"].bias.add_(3.0)
        out_a = peft(**minilm_batch).logits
        peft.set_active("b")
        out_b = peft(**minilm_batch).logits
        peft.set_active(None)
        out_base = peft(**minilm_batch).logits
    assert torch.equal(out_base, base)  # no adapter: the base model with its own head
    assert not torch.allclose(out_a, out_b) and not torch.allclose(out_a, out_base)
    assert peft.trainable_parameters().trainable == 0  # base model: nothing trains
    peft.set_active("b")
    names = {n for n, p in peft.named_parameters() if p.requires_grad}
    assert names and all(".lora.b." in n or ".copies.b." in n for n in names)
    with pytest.raises(ConfigError, match=r"no adapter named 'c'; this model has \['a', 'b'\]"):
        peft.set_active("c")
    with pytest.raises(ConfigError, match="exists already"):
        peft.add_adapter("a", LoraConfig())

    # a saved adapter loads as a second, switchable adapter of another PeftModel on the same base
    peft.save_pretrained(tmp_path / "b")
    other = get_peft_model(minilm_classifier.__class__(peft.config), LoraConfig(), adapter_name="x")
    # (fresh random encoder: another base) -> refused
    with pytest.raises(CheckpointError, match="other base weights"):
        other.load_adapter(tmp_path / "b", "b")
    assert other.adapter_names == ["x"]
    peft.delete_adapter("b")
    peft.load_adapter(tmp_path / "b", "b2")
    peft.set_active("b2")
    peft.eval()
    with torch.no_grad():
        assert (peft(**minilm_batch).logits - out_b).abs().max() < 1e-5


def test_wrong_base_is_refused(minilm_classifier, minilm_dir, tmp_path):
    peft = get_peft_model(minilm_classifier, LoraConfig(r=2), base_model_path=minilm_dir)
    peft.save_pretrained(tmp_path / "adapter")

    small = bertkit.BertModel(tiny_config())  # another shape
    small.save_pretrained(tmp_path / "small")
    with pytest.raises(CheckpointError, match=r"another shape: .*hidden_size=384 \(base has 32\)"):
        PeftModel.from_pretrained(tmp_path / "adapter", base=tmp_path / "small")

    tagger = bertkit.BertForTokenClassification.from_pretrained(minilm_dir, num_labels=7)  # a fine-tuned model
    tagger.save_pretrained(tmp_path / "tagger")                                             # of other labels
    with pytest.raises(CheckpointError, match=r"base .*tagger does not fit adapter .*: classifier.bias is \(7,\) "
                                              r"there and \(\d+,\) in the adapter's model; it is not the model"):
        PeftModel.from_pretrained(tmp_path / "adapter", base=tmp_path / "tagger")

    same_shape = bertkit.BertModel.from_pretrained(minilm_dir)  # same shape, other weights
    with torch.no_grad():
        same_shape.encoder.layer[3].output.dense.weight.mul_(1.01)
    same_shape.save_pretrained(tmp_path / "changed")
    with pytest.raises(CheckpointError, match="other base weights") as info:
        PeftModel.from_pretrained(tmp_path / "adapter", base=tmp_path / "changed")
    assert f"it records {minilm_dir} as its base" in str(info.value)
    PeftModel.from_pretrained(tmp_path / "adapter", base=tmp_path / "changed", check_base=False)
    # the recorded base itself changed: not "pass the recorded base", which is the one that failed
    peft = get_peft_model(bertkit.BertForSequenceClassification.from_pretrained(tmp_path / "changed", num_labels=5),
                          LoraConfig(r=2), base_model_path=str(tmp_path / "changed"))
    peft.save_pretrained(tmp_path / "adapter2")
    with torch.no_grad():
        same_shape.encoder.layer[3].output.dense.weight.mul_(1.01)
    same_shape.save_pretrained(tmp_path / "changed")
    with pytest.raises(CheckpointError, match=r"the weights in .*changed changed since it was trained on them; "
                                              r"give it the base .* --no-check-base in `bertkit peft merge`"):
        PeftModel.from_pretrained(tmp_path / "adapter2")

    with pytest.raises(CheckpointError, match="plain model directory"):
        PeftModel.from_pretrained(tmp_path / "changed")
    with pytest.raises(CheckpointError, match="does not exist"):
        PeftModel.from_pretrained(tmp_path / "nowhere")


def test_damaged_adapter_directory(minilm_classifier, tmp_path):
    peft = get_peft_model(minilm_classifier, LoraConfig(r=2))  # no base path recorded
    peft.save_pretrained(tmp_path / "a")
    with pytest.raises(CheckpointError, match=r"does not record its base model .*is empty\); set it to the base model directory"):
        PeftModel.from_pretrained(tmp_path / "a")
    (tmp_path / "a" / "adapter_model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="not a valid safetensors"):
        peft.load_adapter_weights(tmp_path / "a")
    (tmp_path / "a" / "adapter_config.json").write_text("{\"format\": \"bertkit-peft\", \"method\": \"ia3\"}")
    with pytest.raises(CheckpointError, match="unknown method 'ia3'"):
        peft.load_adapter(tmp_path / "a", "other")


def test_lora_learns_bbc_topics_with_under_two_percent_trainable(minilm_classifier, minilm_dir):
    """A small real task: 5-way BBC topic classification on article openings; the loss falls."""
    from bertkit.tasks.realdata import bbc_topics
    from bertkit.tokenizer import Tokenizer

    train = bbc_topics()["train"]
    labels = sorted({e.label for e in train})
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(0))[:96].tolist()
    texts = [train[i].text for i in order]
    y = torch.tensor([labels.index(train[i].label) for i in order])
    with pytest.warns(UserWarning, match="truncated"):
        enc = Tokenizer.from_pretrained(minilm_dir)(texts, padding=True, max_length=32)

    peft = get_peft_model(minilm_classifier, LoraConfig(r=8, alpha=16, target_modules=["query", "value"]))
    assert peft.trainable_parameters().share < 0.02

    def full_loss():
        peft.eval()
        with torch.no_grad():
            return peft(**enc, labels=y).loss.item()

    before = full_loss()
    optimizer = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=5e-3)
    for epoch in range(2):
        peft.train()
        for i in range(0, len(texts), 16):
            batch = {k: v[i:i + 16] for k, v in enc.items()}
            peft(**batch, labels=y[i:i + 16]).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    after = full_loss()
    assert after < 0.8 * before, (before, after)
    update = peft.model.bert.encoder.layer[0].attention.self.query.lora["default"]
    assert update.B.abs().max() > 1e-4  # the low-rank update itself trained, not only the head
    assert peft.model.bert.encoder.layer[0].attention.self.query.weight.grad is None  # base frozen


def test_modules_to_save_by_name(tiny_classifier, tmp_path):
    with pytest.raises(ConfigError, match="modules_to_save 'clasifier' matches no module .*near names: classifier"):
        get_peft_model(tiny_classifier, LoraConfig(modules_to_save=["clasifier"]))
    peft = get_peft_model(tiny_classifier, LoraConfig(modules_to_save=["classifier", "pooler"]), adapter_name="p")
    assert peft.saved_modules["p"] == ["bert.pooler", "classifier"]
    assert peft.trainable_parameters().parts["head"] == (32 * 32 + 32) + (32 * 3 + 3)
    with torch.no_grad():
        peft.model.bert.pooler.copies["p"].dense.bias.fill_(0.5)
    ids, mask = padded_batch()
    peft.eval()
    with torch.no_grad():
        expected = peft(ids, mask).logits
    peft.save_pretrained(tmp_path / "p")
    base = bertkit.BertForSequenceClassification(tiny_classifier.config)
    base.load_state_dict({k.replace(".original.", "."): v for k, v in peft.model.state_dict().items()
                          if ".copies." not in k and ".lora." not in k})
    loaded = PeftModel.from_pretrained(tmp_path / "p", base=base)
    assert loaded.adapter_names == ["p"]  # the name it was saved under
    with torch.no_grad():
        assert torch.allclose(loaded(ids, mask).logits, expected, atol=1e-6)
    assert torch.equal(loaded.merge_and_unload().bert.pooler.dense.bias, torch.full((32,), 0.5))
