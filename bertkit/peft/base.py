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


def encoder_of(model: nn.Module) -> tuple[BertModel, str]:
    """The bare encoder inside a bertkit model and its path ("bert" or "" for a BertModel)."""
    if isinstance(model, BertModel):
        return model, ""
    prefix = getattr(model, "base_model_prefix", "bert")
    encoder = getattr(model, prefix, None)
    if not isinstance(encoder, BertModel):
        raise ConfigError(f"{type(model).__name__} is not a bertkit model (no BertModel under "
                          f".{prefix}); PEFT wraps bertkit.BertModel or a model with a head")
    return encoder, prefix


def base_fingerprint(model: nn.Module) -> str:
    """SHA-256 over the encoder's weights (names, shapes, float32 values): which base this is.

    Task heads are excluded (a new classifier is random), so every model built on the same
    pre-trained encoder has the same fingerprint.
    """
    encoder, _ = encoder_of(model)
    digest = hashlib.sha256()
    for key, tensor in sorted(encoder.state_dict().items()):
        if not torch.is_floating_point(tensor):
            continue
        array = tensor.detach().to("cpu", torch.float32).contiguous().numpy()
        digest.update(f"{key}|{tuple(array.shape)}\n".encode())
        digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def base_shape(config) -> dict[str, Any]:
    values = config.to_dict()
    return {k: values[k] for k in SHAPE_FIELDS if k in values}
