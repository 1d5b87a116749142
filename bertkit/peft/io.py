"""Adapter directories: only the adapter's weights, its head and how to rebuild it.

An adapter directory holds
    adapter_model.safetensors  the adapter's tensors under canonical names (`...query.lora.A`,
                               `...output.dense.adapter.up.weight`, `prefix.key_values`) and its
                               saved modules under their plain names (`classifier.weight`);
    adapter_config.json        method and settings, the modules it changes, the task class, the
                               base model's path, shape fields and weight fingerprint;
    config.json                the task model's config (num_labels, id2label, ...);
    tokenizer files            when a tokenizer is passed to save_pretrained.
It is small (MiniLM with LoRA r=8 on query/value: ~0.3 MB against 90 MB for the model) and
loads only onto the base it was trained on: a base with other shapes or other weights (another
fingerprint) is refused with a message that names the difference.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any

import torch
from torch import nn

from ..checkpoint import load_into, read_state_dict
from ..config import BertConfig
from ..errors import CheckpointError, ConfigError
from ..io import atomic_open, atomic_write_json
from .model import CONFIG_CLASSES, PeftModel, base_fingerprint, base_shape, encoder_of

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
FORMAT = "bertkit-peft"
FORMAT_VERSION = 1


def is_adapter_dir(directory) -> bool:
    return os.path.isfile(os.path.join(os.fspath(directory), ADAPTER_CONFIG))


# ---------------------------------------------------------------------------- saving
def save_adapter(peft: PeftModel, directory, adapter_name: str | None = None, tokenizer: Any = None) -> None:
    """Write one adapter of `peft` (default: the active one) into `directory`, atomically per file.

    adapter_config.json is written last: a directory that has it is complete.
    """
    from safetensors.torch import save

    name = peft._name(adapter_name)
    config = peft.peft_configs[name]
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous().clone() for k, v in peft.adapter_state(name).items()}
    with atomic_open(os.path.join(directory, ADAPTER_WEIGHTS), "wb") as f:
        f.write(save(state, metadata={"format": "pt", "method": config.method}))
    peft.config.replace(architectures=[type(peft.model).__name__]).save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    atomic_write_json(os.path.join(directory, ADAPTER_CONFIG), {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "method": config.method,
        "adapter_name": name,
        "peft_config": dataclasses.asdict(config),
        "task_class": type(peft.model).__name__,
        "targets": peft.targets[name],
        "modules_to_save": peft.saved_modules[name],
        "base_model": os.path.abspath(peft.base_model_path) if peft.base_model_path else None,
        "base_fingerprint": peft.base_fingerprint,
        "base_config": base_shape(peft.config),
        "parameters": sum(t.numel() for t in state.values()),
    })


# ---------------------------------------------------------------------------- reading
def read_adapter_config(directory) -> tuple[dict, Any]:
    """(the adapter_config.json dict, the PEFT config object it describes)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise CheckpointError(f"adapter directory {directory} does not exist")
    path = os.path.join(directory, ADAPTER_CONFIG)
    if not os.path.isfile(path):
        plain = any(os.path.exists(os.path.join(directory, f))
                    for f in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"))
        what = ("a plain model directory: load it with from_pretrained, not as an adapter" if plain
                else "not an adapter directory (written by PeftModel.save_pretrained)")
        raise CheckpointError(f"{directory} has no {ADAPTER_CONFIG}: it is {what}")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read {path}: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a bertkit adapter config (no \"format\": \"{FORMAT}\"); "
                              "adapters from other libraries are not read")
    if meta.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(f"{path} has format version {meta['format_version']}, newer than this "
                              f"bertkit reads ({FORMAT_VERSION}); upgrade bertkit")
    method = meta.get("method")
    if method not in CONFIG_CLASSES:
        raise CheckpointError(f"{path}: unknown method {method!r}; expected one of {sorted(CONFIG_CLASSES)}")
    cls = CONFIG_CLASSES[method]
    fields = {f.name for f in dataclasses.fields(cls)}
    values = meta.get("peft_config", {})
    unknown = sorted(set(values) - fields)
    if unknown:
        raise CheckpointError(f"{path}: unknown {method} settings {unknown}; written by a newer bertkit?")
    try:
        config = cls(**values)
    except ConfigError as e:
        raise CheckpointError(f"{path}: {e}") from None
    return meta, config


def _read_weights(directory: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    path = os.path.join(directory, ADAPTER_WEIGHTS)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path} is missing: the adapter directory is incomplete")
    try:
        return load_file(path, device="cpu")
    except Exception as e:
        raise CheckpointError(f"{path} is not a valid safetensors file ({str(e)[:200]}); "
                              "the copy may be incomplete: save the adapter again") from None


def _check_shape(meta: dict, config: BertConfig, base: str, adapter_dir: str) -> None:
    recorded = meta.get("base_config", {})
    actual = base_shape(config)
    differ = [f"{k}={recorded[k]!r} (base has {actual.get(k)!r})" for k in recorded if recorded[k] != actual.get(k)]
    if differ:
        raise CheckpointError(f"adapter {adapter_dir} was trained on a base model of another shape: "
                              f"{', '.join(differ)}; pass the base it was trained on ({base} is not)")


def _check_fingerprint(meta: dict, fingerprint: str, base: str, adapter_dir: str) -> None:
    if meta.get("base_fingerprint") != fingerprint:
        recorded = meta.get("base_model") or "(not recorded)"
        raise CheckpointError(
            f"adapter {adapter_dir} was trained on other base weights than {base} (fingerprint "
            f"{str(meta.get('base_fingerprint'))[:12]} vs {fingerprint[:12]}); the recorded base is "
            f"{recorded}: pass that with --base, or check_base=False to load anyway")


def load_adapter_weights(peft: PeftModel, directory, name: str) -> None:
    """Copy the weights in `directory` into adapter `name`; every tensor must fit exactly."""
    directory = os.fspath(directory)
    loaded = _read_weights(directory)
    own = peft.adapter_state(name)
    missing = sorted(set(own) - set(loaded))
    unexpected = sorted(set(loaded) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{directory} does not hold the weights of adapter {name!r} as configured "
            f"(missing {missing[:3]}{' ...' if len(missing) > 3 else ''}, unexpected "
            f"{unexpected[:3]}{' ...' if len(unexpected) > 3 else ''}); it was saved from another "
            "model class or adapter config")
    wrong = [f"{k}: file {tuple(loaded[k].shape)} vs model {tuple(own[k].shape)}"
             for k in own if loaded[k].shape != own[k].shape]
    if wrong:
        raise CheckpointError(f"{len(wrong)} adapter tensors in {directory} have other shapes than "
                              f"this model ({'; '.join(wrong[:3])}); the base model differs from "
                              "the one it was trained on")
    with torch.no_grad():
        for key, tensor in own.items():
            tensor.copy_(loaded[key])


# ---------------------------------------------------------------------------- loading
def task_class(name: str) -> type:
    import bertkit

    cls = getattr(bertkit, name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise CheckpointError(f"adapter was saved from model class {name!r}, which bertkit does not have")
    return cls


def load_peft_model(adapter_dir, base=None, adapter_name: str | None = None, check_base: bool = True
                    ) -> PeftModel:
    """Rebuild the task model on its base weights and load the adapter onto it (eval mode).

    `base`: a model directory, or an already built bertkit model of the adapter's task class;
    None uses the base path recorded in adapter_config.json.
    """
    adapter_dir = os.fspath(adapter_dir)
    meta, config = read_adapter_config(adapter_dir)
    cls = task_class(meta.get("task_class", "BertModel"))
    if base is None:
        base = meta.get("base_model")
        if not base:
            raise CheckpointError(f"adapter {adapter_dir} does not record its base model; pass the "
                                  "base model directory (--base DIR)")
        if not os.path.isdir(base):
            raise CheckpointError(f"the base model recorded in {adapter_dir} ({base}) does not exist "
                                  "here; pass the base model directory (--base DIR)")
    if isinstance(base, nn.Module):
        if type(base) is not cls:
            raise CheckpointError(f"adapter {adapter_dir} belongs on a {cls.__name__}, got a "
                                  f"{type(base).__name__}")
        model, base_name, base_path = base, f"the given {cls.__name__}", None
        _check_shape(meta, model.config, base_name, adapter_dir)
    else:
        base_path = base_name = os.fspath(base)
        _check_shape(meta, BertConfig.from_pretrained(base_path), base_name, adapter_dir)
        # The task config (labels, problem type) comes from the adapter, the weights from the base.
        model = cls(BertConfig.from_pretrained(adapter_dir))
        report = load_into(model, read_state_dict(base_path), getattr(cls, "base_model_prefix", "bert"))
        _, encoder_path = encoder_of(model)
        inside = encoder_path + "." if encoder_path else ""
        saved = meta.get("modules_to_save", [])
        missing = [k for k in report.missing_keys if k.startswith(inside)
                   and not any(k.startswith(s + ".") for s in saved)]
        if missing:
            raise CheckpointError(f"base {base_path} lacks {len(missing)} encoder weights "
                                  f"({', '.join(missing[:3])}); it is not the model this adapter was "
                                  "trained on")
        unsaved_heads = [k for k in report.missing_keys if not k.startswith(inside)
                         and not any(k.startswith(s + ".") for s in saved)]
        if unsaved_heads:
            warnings.warn(f"{len(unsaved_heads)} head weights are neither in {base_path} nor in the "
                          f"adapter ({', '.join(unsaved_heads[:3])}) and stay randomly initialised",
                          stacklevel=2)
    adapter_name = adapter_name or meta.get("adapter_name") or "default"
    fingerprint = base_fingerprint(model)
    if check_base:
        _check_fingerprint(meta, fingerprint, base_name, adapter_dir)
    peft = PeftModel(model, config, adapter_name, base_model_path=base_path or meta.get("base_model"),
                     fingerprint=fingerprint, init_weights=False)
    load_adapter_weights(peft, adapter_dir, adapter_name)
    peft.eval()
    return peft


def load_adapter_into(peft: PeftModel, adapter_dir, adapter_name: str, check_base: bool = True) -> None:
    """Add the adapter saved in `adapter_dir` to `peft` as `adapter_name` (not made active)."""
    adapter_dir = os.fspath(adapter_dir)
    meta, config = read_adapter_config(adapter_dir)
    if meta.get("task_class") != type(peft.model).__name__:
        raise CheckpointError(f"adapter {adapter_dir} belongs on a {meta.get('task_class')}, this "
                              f"model is a {type(peft.model).__name__}")
    _check_shape(meta, peft.config, "this model's base", adapter_dir)
    if check_base:
        _check_fingerprint(meta, peft.base_fingerprint, "this model's base", adapter_dir)
    peft.add_adapter(adapter_name, config, init_weights=False)
    try:
        load_adapter_weights(peft, adapter_dir, adapter_name)
    except CheckpointError:
        peft.delete_adapter(adapter_name)
        raise


def load_model(directory, model_class: type | None = None, base=None, **config_overrides: Any) -> nn.Module:
    """A model directory or an adapter directory, whichever `directory` is, ready for inference.

    For commands such as evaluate/predict: a plain directory loads with
    `model_class.from_pretrained`; an adapter directory loads onto its (recorded or given) base.
    """
    if is_adapter_dir(directory):
        return load_peft_model(directory, base)
    if model_class is None:
        raise ConfigError("pass model_class to load a plain model directory")
    return model_class.from_pretrained(directory, **config_overrides)
