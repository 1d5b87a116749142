"""PEFT's adapter format, both ways, against the real `peft` library.

bertkit's LoRA directories load with `peft.PeftModel.from_pretrained(<transformers model>, dir)`
and give bertkit's logits; LoRA directories PEFT saved load in bertkit (and run through
`bertkit evaluate` / `predict`). Bottleneck adapters keep bertkit's own files; directories
written before this format still load.
"""

import json
import os
import warnings

import pytest
import torch

import bertkit
from bertkit.commands.cli import main
from bertkit.errors import CheckpointError
from bertkit.peft import AdapterConfig, LoraConfig, PeftModel, get_peft_model, read_adapter

from .conftest import padded_batch, tiny_config

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Non-zero LoRA B matrices and a new head: a trained-looking adapter, not the identity."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)


def _hf_classifier(directory, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.BertForSequenceClassification.from_pretrained(
            directory, attn_implementation="eager", **kwargs).eval()


def test_bertkit_lora_loads_in_peft_with_the_same_logits(tmp_path):
    torch.manual_seed(0)
    base = bertkit.BertForSequenceClassification(tiny_config())
    base.save_pretrained(tmp_path / "base")
    model = get_peft_model(base, LoraConfig(r=4, alpha=8, target_modules=["query", "value", "dense"]),
                           base_model_path=str(tmp_path / "base"))
    _randomise(model, 1)
    model.eval()
    model.save_pretrained(tmp_path / "lora")

    written = json.loads((tmp_path / "lora" / "adapter_config.json").read_text())
    assert written["peft_type"] == "LORA" and written["task_type"] == "SEQ_CLS"
    assert written["r"] == 4 and written["lora_alpha"] == 8 and written["modules_to_save"] == ["classifier"]
    assert written["base_model_name_or_path"] == os.path.abspath(tmp_path / "base")
    from safetensors import safe_open
    with safe_open(tmp_path / "lora" / "adapter_model.safetensors", "pt") as f:
        keys = set(f.keys())
    assert "base_model.model.bert.encoder.layer.0.attention.self.query.lora_A.weight" in keys
    assert "base_model.model.bert.pooler.dense.lora_B.weight" in keys
    assert "base_model.model.classifier.weight" in keys

    ids, mask = padded_batch()
    theirs = peft.PeftModel.from_pretrained(_hf_classifier(tmp_path / "base"), str(tmp_path / "lora")).eval()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        got = theirs(input_ids=ids, attention_mask=mask).logits
    assert (expected - got).abs().max() < 1e-5
    # Not trivially equal: the adapter and head moved the logits away from the base's.
    with torch.no_grad():
        plain = _hf_classifier(tmp_path / "base")(input_ids=ids, attention_mask=mask).logits
    assert (plain - got).abs().max() > 1e-2


def _peft_saved_lora(tmp_path, base_dir, num_labels, seed=2, **lora):
    """A LoRA adapter trained-looking and saved by PEFT itself onto transformers' model."""
    torch.manual_seed(seed)
    hf = _hf_classifier(base_dir, num_labels=num_labels)
    config = peft.LoraConfig(task_type="SEQ_CLS", **{"r": 4, "lora_alpha": 16,
                                                     "target_modules": ["query", "key", "output.dense"], **lora})
    model = peft.get_peft_model(hf, config)
    _randomise(model, seed)
    model.eval()
    model.save_pretrained(str(tmp_path / "peft-lora"))
    return model, tmp_path / "peft-lora"


def test_peft_saved_lora_loads_in_bertkit_with_the_same_logits(tmp_path):
    torch.manual_seed(0)
    bertkit.BertModel(tiny_config()).save_pretrained(tmp_path / "base")  # an encoder: no head
    theirs, adapter = _peft_saved_lora(tmp_path, tmp_path / "base", num_labels=4)
    assert not (adapter / "config.json").exists()  # PEFT writes none: labels come from the head

    ours = PeftModel.from_pretrained(adapter)  # onto base_model_name_or_path
    assert type(ours.model).__name__ == "BertForSequenceClassification"
    assert ours.config.num_labels == 4
    ids, mask = padded_batch()
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=mask).logits
        got = ours(input_ids=ids, attention_mask=mask).logits
    assert (expected - got).abs().max() < 1e-5
    assert sorted(ours.targets["default"])[0] == "bert.encoder.layer.0.attention.output.dense"

    # ... and back: bertkit writes it again in PEFT's format, which PEFT reads with the same logits.
    ours.save_pretrained(tmp_path / "again")
    again = peft.PeftModel.from_pretrained(_hf_classifier(tmp_path / "base", num_labels=4),
                                           str(tmp_path / "again")).eval()
    with torch.no_grad():
        assert (again(input_ids=ids, attention_mask=mask).logits - expected).abs().max() < 1e-5


def test_lora_on_a_bare_encoder_loads_in_peft_as_feature_extraction(tmp_path):
    """LoRA on a BertModel (no head, nothing else saved) is written with PEFT's task type for
    AutoModel, FEATURE_EXTRACTION; PEFT loads it onto transformers' BertModel with bertkit's
    hidden states, and bertkit loads it back."""
    torch.manual_seed(0)
    base = bertkit.BertModel(tiny_config())
    base.save_pretrained(tmp_path / "base")
    model = get_peft_model(base, LoraConfig(r=4, alpha=8), base_model_path=str(tmp_path / "base"))
    _randomise(model, 8)
    model.eval()
    model.save_pretrained(tmp_path / "lora")
    written = json.loads((tmp_path / "lora" / "adapter_config.json").read_text())
    assert written["task_type"] == "FEATURE_EXTRACTION" and written["modules_to_save"] is None

    ids, mask = padded_batch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = transformers.BertModel.from_pretrained(tmp_path / "base", attn_implementation="eager").eval()
    theirs = peft.PeftModel.from_pretrained(hf, str(tmp_path / "lora")).eval()
    again = PeftModel.from_pretrained(tmp_path / "lora")
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
        got = theirs(input_ids=ids, attention_mask=mask).last_hidden_state
        assert (expected - got).abs().max() < 1e-5
        assert (again(input_ids=ids, attention_mask=mask).last_hidden_state - expected).abs().max() < 1e-6
        plain = bertkit.BertModel.from_pretrained(tmp_path / "base")(input_ids=ids, attention_mask=mask)
        assert (plain.last_hidden_state - expected).abs().max() > 1e-2  # the adapter changed them


def _assert_peft_loads_it_with_our_logits(model, base_dir, adapter_dir, seed: int) -> None:
    """Random (as if trained) adapter weights, saved by bertkit, loaded by PEFT onto transformers'
    classifier: the same logits."""
    _randomise(model, seed)
    model.eval()
    model.save_pretrained(adapter_dir)
    ids, mask = padded_batch()
    theirs = peft.PeftModel.from_pretrained(_hf_classifier(base_dir), str(adapter_dir)).eval()
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask).logits
        assert (theirs(input_ids=ids, attention_mask=mask).logits - expected).abs().max() < 1e-5


def test_peft_lora_config_is_converted_and_other_peft_configs_are_named(tmp_path):
    """peft.LoraConfig given to bertkit's get_peft_model becomes bertkit's LoraConfig (lora_alpha
    -> alpha, ...), trains the same parameters and saves what PEFT loads with bertkit's logits;
    options bertkit lacks and PEFT's other configs are refused naming the library and the fix."""
    torch.manual_seed(0)
    base = bertkit.BertForSequenceClassification(tiny_config())
    base.save_pretrained(tmp_path / "base")
    theirs_config = peft.LoraConfig(r=4, lora_alpha=16, lora_dropout=0.1, target_modules=["query", "value"],
                                    init_lora_weights="gaussian")
    model = get_peft_model(base, theirs_config, base_model_path=str(tmp_path / "base"))
    assert model.peft_configs["default"] == LoraConfig(r=4, alpha=16, dropout=0.1, init="normal",
                                                       target_modules=["query", "value"])
    assert model.saved_modules["default"] == ["classifier"]
    _assert_peft_loads_it_with_our_logits(model, tmp_path / "base", tmp_path / "lora", seed=9)

    fresh = bertkit.BertForSequenceClassification(tiny_config())
    with pytest.raises(bertkit.ConfigError, match=r"peft.LoraConfig sets options bertkit's LoRA does not implement \(use_dora=True\)"):
        get_peft_model(fresh, peft.LoraConfig(use_dora=True))
    with pytest.raises(bertkit.ConfigError, match=r"got peft.IA3Config .*converts peft.LoraConfig and "
                                                  r"peft.PrefixTuningConfig"):
        get_peft_model(fresh, peft.IA3Config())
    assert all(p.requires_grad for p in fresh.parameters())  # refused before anything changed


def test_peft_prefix_tuning_config_is_converted_and_saves_what_peft_loads(tmp_path):
    """peft.PrefixTuningConfig becomes PrefixConfig with PEFT's position convention; the trained
    (here: random) prefixes save as PEFT's PREFIX_TUNING, which PEFT loads with bertkit's logits.
    Shape fields PEFT fills from the model, other inits and a projection without a width are refused."""
    from bertkit.peft import PrefixConfig

    torch.manual_seed(0)
    base = bertkit.BertForSequenceClassification(tiny_config())
    base.save_pretrained(tmp_path / "base")
    model = get_peft_model(base, peft.PrefixTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=4),
                           base_model_path=str(tmp_path / "base"))
    assert model.peft_configs["default"] == PrefixConfig(num_virtual_tokens=4, shift_positions=True)
    assert model.saved_modules["default"] == ["classifier"]
    _assert_peft_loads_it_with_our_logits(model, tmp_path / "base", tmp_path / "prefix", seed=5)

    projected = peft.PrefixTuningConfig(num_virtual_tokens=3, prefix_projection=True, encoder_hidden_size=16)
    fresh = bertkit.BertForSequenceClassification(tiny_config())
    assert get_peft_model(fresh, projected).peft_configs["default"] == PrefixConfig(
        num_virtual_tokens=3, reparameterize=True, projection_hidden=16, shift_positions=True)
    for bad, match in ((dict(num_virtual_tokens=3, token_dim=64), r"does not take \(token_dim=64\)"),
                       (dict(num_virtual_tokens=3, init_weights="zero"), r"\(init_weights='zero'\)"),
                       (dict(num_virtual_tokens=3, prefix_projection=True), "without encoder_hidden_size"),
                       (dict(), "no num_virtual_tokens")):
        with pytest.raises(bertkit.ConfigError, match=match):
            get_peft_model(bertkit.BertForSequenceClassification(tiny_config()), peft.PrefixTuningConfig(**bad))


@pytest.mark.filterwarnings("ignore:.*were cut to data.max_length")
def test_peft_saved_lora_runs_through_predict_and_evaluate(minilm_dir, tmp_path, capsys):
    theirs, adapter = _peft_saved_lora(tmp_path, minilm_dir, num_labels=3, seed=3)
    texts = ["Shares fell as the bank warned on profits.", "The striker scored twice in the final.",
             "The film won three awards."]
    tok = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = theirs(**enc).logits.argmax(-1).tolist()

    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "p.jsonl"
    assert main(["predict", "--model", str(adapter), "--input", str(tmp_path / "texts.txt"),
                 "--output", str(out)]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["label"] for r in rows] == [f"LABEL_{i}" for i in expected]

    data = tmp_path / "dev.csv"
    data.write_text("text,label\n" + "".join(f"{t.replace(',', '')},LABEL_{i}\n"
                                             for t, i in zip(texts, expected)))
    capsys.readouterr()
    assert main(["evaluate", "--model", str(adapter), "--data", str(data)]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["accuracy"] == 1.0


def test_peft_adapter_without_a_reachable_base_names_what_is_missing(tmp_path, capsys):
    torch.manual_seed(0)
    bertkit.BertModel(tiny_config()).save_pretrained(tmp_path / "base")
    _, adapter = _peft_saved_lora(tmp_path, tmp_path / "base", num_labels=2)
    config = json.loads((adapter / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "someone/bert-tiny"  # a hub name: not a directory here
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"needs its base model 'someone/bert-tiny' "
                                              r"\(base_model_name_or_path in adapter_config.json\)"):
        PeftModel.from_pretrained(adapter)
    (tmp_path / "t.txt").write_text("a text\n")
    assert main(["predict", "--model", str(adapter), "--input", str(tmp_path / "t.txt"),
                 "--output", str(tmp_path / "p.jsonl")]) == 2
    assert "someone/bert-tiny" in capsys.readouterr().err
    assert PeftModel.from_pretrained(adapter, base=str(tmp_path / "base")).config.num_labels == 2


def test_peft_options_bertkit_lacks_are_refused_by_name(tmp_path):
    torch.manual_seed(0)
    bertkit.BertModel(tiny_config()).save_pretrained(tmp_path / "base")
    _, adapter = _peft_saved_lora(tmp_path, tmp_path / "base", num_labels=2, use_rslora=True)
    with pytest.raises(CheckpointError, match="use_rslora=True"):
        PeftModel.from_pretrained(adapter)


def _copy_of(model):
    fresh = bertkit.BertForSequenceClassification(model.config)
    fresh.load_state_dict(model.state_dict())
    return fresh.eval()


def test_bottleneck_adapters_keep_their_own_files(tmp_path, tiny_classifier):
    base = _copy_of(tiny_classifier)
    model = get_peft_model(tiny_classifier, AdapterConfig(kind="pfeiffer"))
    _randomise(model, 4)
    model.eval()
    model.save_pretrained(tmp_path / "ad")
    assert sorted(p for p in os.listdir(tmp_path / "ad") if "adapter" in p) == [
        "bertkit_adapter.safetensors", "bertkit_adapter_config.json"]
    ids, mask = padded_batch()
    loaded = PeftModel.from_pretrained(tmp_path / "ad", base=base)
    with torch.no_grad():
        assert torch.allclose(loaded(ids, mask).logits, model(ids, mask).logits, atol=1e-6)


def test_adapter_directories_of_the_earlier_format_still_load(tmp_path, tiny_classifier):
    """Before PEFT's format, bertkit wrote its own config and names into adapter_config.json."""
    from safetensors.torch import save_file

    base = _copy_of(tiny_classifier)
    model = get_peft_model(tiny_classifier, LoraConfig(r=2))
    _randomise(model, 5)
    model.eval()
    old = tmp_path / "old"
    old.mkdir()
    save_file({k: v.detach().contiguous() for k, v in model.adapter_state().items()},
              old / "adapter_model.safetensors")
    (old / "adapter_config.json").write_text(json.dumps({
        "format": "bertkit-peft", "format_version": 1, "method": "lora", "adapter_name": "default",
        "peft_config": {"r": 2, "alpha": 16.0, "dropout": 0.0, "target_modules": ["query", "value"],
                        "init": "kaiming", "modules_to_save": None},
        "task_class": "BertForSequenceClassification", "targets": model.targets["default"],
        "modules_to_save": ["classifier"], "base_model": None,
        "base_fingerprint": model.base_fingerprint, "base_config": {}}))
    assert read_adapter(old).meta["format"] == "bertkit-peft"
    loaded = PeftModel.from_pretrained(old, base=base)
    ids, mask = padded_batch()
    with torch.no_grad():
        assert torch.allclose(loaded(ids, mask).logits, model(ids, mask).logits, atol=1e-6)


def test_prefix_tuning_in_peft_format_both_ways(tmp_path):
    """Prefixes with PEFT's position convention (shift_positions=True) are saved as PEFT's
    PREFIX_TUNING and give PEFT's logits; PEFT's prefixes load in bertkit with its logits."""
    from bertkit.peft import PrefixConfig

    torch.manual_seed(0)
    base = bertkit.BertForSequenceClassification(tiny_config())
    base.save_pretrained(tmp_path / "base")
    ours = get_peft_model(base, PrefixConfig(num_virtual_tokens=5, init="normal", shift_positions=True),
                          base_model_path=str(tmp_path / "base"))
    _randomise(ours, 6)
    ours.eval()
    ours.save_pretrained(tmp_path / "prefix")
    written = json.loads((tmp_path / "prefix" / "adapter_config.json").read_text())
    assert written["peft_type"] == "PREFIX_TUNING" and written["num_virtual_tokens"] == 5
    assert written["num_layers"] == 2 and written["token_dim"] == 32

    ids, mask = padded_batch()
    theirs = peft.PeftModel.from_pretrained(_hf_classifier(tmp_path / "base"), str(tmp_path / "prefix")).eval()
    with torch.no_grad():
        expected = ours(input_ids=ids, attention_mask=mask).logits
        assert (theirs(input_ids=ids, attention_mask=mask).logits - expected).abs().max() < 1e-5
        plain = _hf_classifier(tmp_path / "base")(input_ids=ids, attention_mask=mask).logits
        assert (plain - expected).abs().max() > 1e-2

    # PEFT's own prefixes (random, as if trained) load in bertkit with PEFT's logits.
    model = peft.get_peft_model(_hf_classifier(tmp_path / "base"),
                                peft.PrefixTuningConfig(task_type="SEQ_CLS", num_virtual_tokens=4))
    _randomise(model, 7)
    model.eval()
    model.save_pretrained(str(tmp_path / "peft-prefix"))
    loaded = PeftModel.from_pretrained(tmp_path / "peft-prefix", base=str(tmp_path / "base"))
    assert loaded.peft_configs["default"].shift_positions
    with torch.no_grad():
        got = loaded(input_ids=ids, attention_mask=mask).logits
        assert (got - model(input_ids=ids, attention_mask=mask).logits).abs().max() < 1e-5
