"""What identifies a PEFT setup, shared by the wrapper (model.py) and the files (io.py).

The method configs by name, the encoder inside a task model, and the base model's identity:
its shape fields and a fingerprint of its weights, recorded with every adapter so an adapter
refuses to load onto another base.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.config import BertConfig
from bertkit.models.encoder import BertModel
from bertkit.peft.adapters import AdapterConfig
from bertkit.peft.lora import LoraConfig
from bertkit.peft.prefix import PrefixConfig

PeftConfig = LoraConfig | AdapterConfig | PrefixConfig
CONFIG_CLASSES: dict[str, type] = {"lora": LoraConfig, "adapter": AdapterConfig, "prefix": PrefixConfig}
# Config fields that fix the shapes of the encoder's weights; recorded with every adapter.
SHAPE_FIELDS = ("model_type", "vocab_size", "hidden_size", "embedding_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size", "max_position_embeddings",
                "type_vocab_size", "position_embedding_type", "num_hidden_groups", "inner_group_num")


def is_encoder_decoder(model: nn.Module) -> bool:
    """A BERT2BERT (bertkit.EncoderDecoderModel): two BERTs, and cross-attention in between."""
    return bool(getattr(model, "is_encoder_decoder", False)) and isinstance(getattr(model, "encoder", None), BertModel)


def encoder_of(model: nn.Module) -> tuple[BertModel, str]:
    """The bare encoder inside a bertkit model and its path ("bert" or "" for a BertModel; an
    encoder-decoder's encoder half: "encoder")."""
    if isinstance(model, BertModel):
        return model, ""
    if is_encoder_decoder(model):
        return model.encoder, "encoder"
    prefix = getattr(model, "base_model_prefix", "bert")
    encoder = getattr(model, prefix, None)
    if not isinstance(encoder, BertModel):
        raise ConfigError(f"{type(model).__name__} is not a bertkit model (no BertModel under "
                          f".{prefix}); PEFT wraps bertkit.BertModel or a model with a head")
    return encoder, prefix


def body_paths(model: nn.Module) -> list[str]:
    """Module paths of the pre-trained body, where LoRA goes: the encoder ("bert"; "" for a bare
    BertModel), or an encoder-decoder's two halves ("encoder" and the decoder's "decoder.bert")."""
    if is_encoder_decoder(model):
        return ["encoder", "decoder.bert"]
    return [encoder_of(model)[1]]


def warm_start_modules(model: nn.Module) -> list[str]:
    """What an encoder-decoder's LoRA trains in full (its default modules_to_save): the modules a
    BERT2BERT warm start adds to the two BERTs. Every decoder layer's cross-attention is NEW and
    random (or a copy of self-attention, built for other inputs); frozen, with only a rank-r update
    on top, the decoder could not learn to read the source. The LM head's transform is random too
    when the checkpoint has no MLM head (MiniLM), and `enc_to_dec_proj` (encoder and decoder of
    other widths) is always new. The head's vocabulary-wide output bias stays as loaded (zeros
    without an MLM head): a module to save is a module, and the bias's module also holds the
    output matrix tied to the decoder's word embeddings, which a trained copy would untie (PEFT's
    modules_to_save copies modules the same way)."""
    layers = [f"decoder.bert.encoder.layer.{i}.crossattention" for i in range(len(model.decoder.bert.encoder.layer))]
    projection = ["enc_to_dec_proj"] if model.enc_to_dec_proj is not None else []
    return [*layers, "decoder.cls.predictions.transform", *projection]


def base_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The weights that identify the base: the encoder's; an encoder-decoder's two halves without
    what its warm start adds (`is_head_parameter`: cross-attention, LM head), which start random."""
    if is_encoder_decoder(model):
        return {k: v for k, v in model.state_dict().items() if not model.is_head_parameter(k)}
    return encoder_of(model)[0].state_dict()


def base_fingerprint(model: nn.Module) -> str:
    """SHA-256 over the base's weights (names, shapes, float32 values; `base_state`): which base this is.

    Task heads are excluded (a new classifier is random), so every model built on the same
    pre-trained encoder has the same fingerprint.
    """
    digest = hashlib.sha256()
    for key, tensor in sorted(base_state(model).items()):
        if not torch.is_floating_point(tensor):
            continue
        array = tensor.detach().to("cpu", torch.float32).contiguous().numpy()
        digest.update(f"{key}|{tuple(array.shape)}\n".encode())
        digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def base_shape(config) -> dict[str, Any]:
    """The shape fields of a config; an encoder-decoder's per half ({"encoder": ..., "decoder": ...})."""
    if isinstance(getattr(config, "encoder", None), BertConfig):
        return {"encoder": base_shape(config.encoder), "decoder": base_shape(config.decoder)}
    values = config.to_dict()
    return {k: values[k] for k in SHAPE_FIELDS if k in values}
