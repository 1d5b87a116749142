"""A bertkit LoRA classifier in PEFT's auto class, with its class names (walk R #2).

PEFT builds the base of `AutoPeftModelForSequenceClassification.from_pretrained(DIR)` from
`base_model_name_or_path` alone, with transformers' default 2 labels, so a 3-way head fails to load
there (PEFT's own saves the same); the class names live in the adapter directory's config.json,
which PEFT does not read. docs/ecosystem.md gives the two lines that load it with bertkit's logits
and names; this test runs them against the real library.
"""

import json
import warnings

import pytest
import torch

import bertkit
from bertkit.peft import LoraConfig, get_peft_model

from .conftest import padded_batch, tiny_config

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

NAMES = {0: "business", 1: "sport", 2: "tech"}


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    torch.manual_seed(0)
    bertkit.BertModel(tiny_config()).save_pretrained(root / "base")
    saved = json.loads((root / "base" / "config.json").read_text())
    for key in ("id2label", "label2id", "num_labels"):  # an encoder with no labels at all, as MiniLM's
        saved.pop(key, None)
    (root / "base" / "config.json").write_text(json.dumps(saved))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "classifier newly initialised"
        classifier = bertkit.BertForSequenceClassification.from_pretrained(root / "base", id2label=NAMES)
    model = get_peft_model(classifier, LoraConfig(r=4, alpha=8), base_model_path=str(root / "base"))
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a trained-looking adapter and head
        for p in model.parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
    model.eval().save_pretrained(root / "lora")
    ids, mask = padded_batch()
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    return root, ids, mask, logits


def _quiet(load, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(*args, **kwargs).eval()


def test_auto_peft_needs_the_labels_and_then_gives_bertkits_logits_and_names(adapter):
    root, ids, mask, expected = adapter
    lora = str(root / "lora")
    with pytest.raises(RuntimeError, match="size mismatch"):  # PEFT's default: 2 labels
        _quiet(peft.AutoPeftModelForSequenceClassification.from_pretrained, lora)
    labels = transformers.AutoConfig.from_pretrained(lora).id2label  # the docs' line
    theirs = _quiet(peft.AutoPeftModelForSequenceClassification.from_pretrained, lora, id2label=labels)
    assert theirs.config.id2label == NAMES
    with torch.no_grad():
        assert (theirs(input_ids=ids, attention_mask=mask).logits - expected).abs().max() < 1e-5


def test_peft_model_on_a_base_built_from_the_adapters_config_has_the_names(adapter):
    root, ids, mask, expected = adapter
    lora = str(root / "lora")
    base = _quiet(transformers.AutoModelForSequenceClassification.from_pretrained, str(root / "base"),
                  config=transformers.AutoConfig.from_pretrained(lora))
    theirs = _quiet(peft.PeftModel.from_pretrained, base, lora)
    assert theirs.config.id2label == NAMES
    with torch.no_grad():
        assert (theirs(input_ids=ids, attention_mask=mask).logits - expected).abs().max() < 1e-5


def test_transformers_reads_the_directory_as_a_whole_model_as_the_docs_say(adapter):
    root, _, _, _ = adapter
    with pytest.raises(OSError, match="no file named model.safetensors"):  # config.json beside adapter_config.json
        _quiet(transformers.AutoModelForSequenceClassification.from_pretrained, str(root / "lora"))
