"""LoRA on an encoder-decoder (BERT2BERT), against the real `peft` library both ways.

bertkit's adapter of an EncoderDecoderModel (LoRA on query/value of both halves, the warm start's new
cross-attention and LM transform trained in full as modules_to_save) loads with
`peft.PeftModel.from_pretrained(<transformers EncoderDecoderModel>, dir)` and gives bertkit's logits;
PEFT's SEQ_2_SEQ_LM adapter of transformers' EncoderDecoderModel loads in bertkit with PEFT's logits,
onto a BERT base (warm-started) or onto a saved encoder-decoder. Merged, it is a plain encoder-decoder
that transformers loads with the same logits.
"""

import json
import warnings

import pytest
import torch

import bertkit
from bertkit.errors import CheckpointError, ConfigError
from bertkit.peft import AdapterConfig, LoraConfig, PeftModel, PrefixConfig, adapter_task_config, get_peft_model

from .conftest import padded_batch, tiny_config

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

IDS = {"decoder_start_token_id": 2, "pad_token_id": 0, "eos_token_id": 3}
WARM_START_MODULES = ["decoder.bert.encoder.layer.0.crossattention", "decoder.bert.encoder.layer.1.crossattention",
                      "decoder.cls.predictions.transform"]


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Non-zero LoRA B matrices and new cross-attention: a trained-looking adapter, not the identity."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.1)


def _inputs() -> dict:
    """A padded source batch and a padded decoder batch, the same at every call."""
    torch.manual_seed(5)
    ids, mask = padded_batch()
    decoder_ids, decoder_mask = padded_batch(length=7)
    return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": decoder_ids,
            "decoder_attention_mask": decoder_mask}


def _hf_warm_start(base_dir):
    """transformers' BERT2BERT from the same BERT base (its own random cross-attention and LM transform)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.EncoderDecoderModel.from_encoder_decoder_pretrained(
            str(base_dir), str(base_dir), encoder_attn_implementation="eager", decoder_attn_implementation="eager")
    for name, value in IDS.items():
        setattr(model.config, name, value)
    return model.eval()


@pytest.fixture
def bert_base(tmp_path):
    torch.manual_seed(0)
    bertkit.BertModel(tiny_config()).save_pretrained(tmp_path / "base")  # an encoder, as MiniLM: no MLM head
    return tmp_path / "base"


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(**_inputs()).logits


def test_bertkit_seq2seq_lora_loads_in_peft_with_the_same_logits(tmp_path, bert_base):
    model = bertkit.EncoderDecoderModel.from_encoder_decoder_pretrained(str(bert_base), str(bert_base), **IDS)
    peft_model = get_peft_model(model, LoraConfig(r=4, alpha=8), base_model_path=str(bert_base))
    assert peft_model.saved_modules["default"] == WARM_START_MODULES  # the new parts train in full
    assert len(peft_model.targets["default"]) == 8  # query, value of 2 encoder and 2 decoder self-attentions
    _randomise(peft_model, 1)
    peft_model.eval()
    peft_model.save_pretrained(tmp_path / "lora")
    written = json.loads((tmp_path / "lora" / "adapter_config.json").read_text())
    assert written["task_type"] == "SEQ_2_SEQ_LM" and written["modules_to_save"] == WARM_START_MODULES

    theirs = peft.PeftModel.from_pretrained(_hf_warm_start(bert_base), str(tmp_path / "lora")).eval()
    expected, got = _logits(peft_model), _logits(theirs)
    assert (expected - got).abs().max() < 1e-5
    assert (_logits(_hf_warm_start(bert_base)) - got).abs().max() > 1e-2  # the adapter changed them

    # Merged: a plain encoder-decoder checkpoint that transformers loads with the same logits.
    plain = PeftModel.from_pretrained(tmp_path / "lora").merge_and_unload()
    plain.save_pretrained(tmp_path / "merged")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        merged = transformers.EncoderDecoderModel.from_pretrained(
            str(tmp_path / "merged"), attn_implementation="eager")
    assert (_logits(merged.eval()) - expected).abs().max() < 1e-5
    assert (_logits(bertkit.EncoderDecoderModel.from_pretrained(tmp_path / "merged").eval())
            - expected).abs().max() < 1e-5


def _peft_saved(tmp_path, hf):
    """PEFT's own SEQ_2_SEQ_LM LoRA on transformers' encoder-decoder, saved by PEFT."""
    config = peft.LoraConfig(task_type="SEQ_2_SEQ_LM", r=4, lora_alpha=16, target_modules=["query", "value"],
                             modules_to_save=["crossattention", "transform"])
    model = peft.get_peft_model(hf, config)
    _randomise(model, 2)
    model.eval()
    model.save_pretrained(str(tmp_path / "peft-lora"))
    return model, tmp_path / "peft-lora"


def test_peft_saved_seq2seq_lora_loads_in_bertkit_onto_a_bert_base(tmp_path, bert_base):
    theirs, adapter = _peft_saved(tmp_path, _hf_warm_start(bert_base))
    assert not (adapter / "config.json").exists()
    # transformers' warm start records no base: bertkit says how to give it
    with pytest.raises(CheckpointError, match="does not record its base model.*base=DIR"):
        PeftModel.from_pretrained(adapter)
    ours = PeftModel.from_pretrained(adapter, base=bert_base)  # warm-started as finetune --task seq2seq does
    assert type(ours.model).__name__ == "EncoderDecoderModel"
    assert ours.saved_modules["default"] == WARM_START_MODULES
    expected = _logits(theirs)
    assert (_logits(ours) - expected).abs().max() < 1e-5

    # ... and back: bertkit writes it again in PEFT's format, which PEFT reads with the same logits.
    ours.save_pretrained(tmp_path / "again")
    again = peft.PeftModel.from_pretrained(_hf_warm_start(bert_base), str(tmp_path / "again")).eval()
    assert (_logits(again) - expected).abs().max() < 1e-5


def test_peft_saved_seq2seq_lora_finds_a_saved_encoder_decoder_base(tmp_path, bert_base):
    """An encoder-decoder saved by transformers and loaded from its directory: PEFT records that
    directory, and bertkit loads the adapter onto it without being told."""
    _hf_warm_start(bert_base).save_pretrained(tmp_path / "b2b")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = transformers.EncoderDecoderModel.from_pretrained(
            str(tmp_path / "b2b"), attn_implementation="eager")
    theirs, adapter = _peft_saved(tmp_path, hf.eval())
    ours = PeftModel.from_pretrained(adapter)
    assert (_logits(ours) - _logits(theirs)).abs().max() < 1e-5
    config = adapter_task_config(adapter)  # what evaluate / predict read: the base's encoder-decoder config
    assert config.architectures == ["EncoderDecoderModel"] and config.decoder.add_cross_attention
    assert config.decoder_start_token_id == IDS["decoder_start_token_id"]


def test_only_lora_goes_on_an_encoder_decoder(bert_base):
    model = bertkit.EncoderDecoderModel.from_encoder_decoder_pretrained(str(bert_base), str(bert_base), **IDS)
    for config in (AdapterConfig(), PrefixConfig(num_virtual_tokens=4)):
        with pytest.raises(ConfigError, match=f"{config.method} is not available on an encoder-decoder.*use "
                                              r"LoraConfig \(--peft lora\)"):
            get_peft_model(model, config)


def test_head_lr_reaches_the_modules_trained_in_full_not_lora(bert_base):
    """train.head_lr under PEFT: the modules to save (an encoder-decoder's cross-attention and LM transform,
    a classifier's head) at the head's rate, LoRA at train.lr. (LoRA counted as head on a classifier, and
    the LM transform did not on an encoder-decoder: the wrapped names start with "model.".)"""
    from bertkit.train.optim import param_groups

    seq2seq = bertkit.EncoderDecoderModel.from_encoder_decoder_pretrained(str(bert_base), str(bert_base), **IDS)
    classifier = bertkit.BertForSequenceClassification(tiny_config())
    for model, head in ((seq2seq, (".crossattention.", ".transform.")), (classifier, ("classifier.",))):
        wrapped = get_peft_model(model, LoraConfig())
        for group in param_groups(wrapped, 1e-3, head_lr=5e-2):
            for name in group["names"]:
                assert group["lr"] == (5e-2 if any(part in name for part in head) else 1e-3), name
