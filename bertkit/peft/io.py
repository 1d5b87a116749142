"""Adapter directories: PEFT's files for LoRA, bertkit's own for bottleneck adapters and prefixes.

LoRA is written exactly as the `peft` library writes it, so `peft.PeftModel.from_pretrained(
<transformers model>, dir)` loads it, and a directory PEFT wrote loads here:
    adapter_config.json        PEFT's LoraConfig: peft_type "LORA", task_type, r, lora_alpha,
                               lora_dropout, target_modules, modules_to_save,
                               base_model_name_or_path, ...
    adapter_model.safetensors  PEFT's keys: base_model.model.<layer>.lora_A.weight (r, in),
                               ...lora_B.weight (out, r), base_model.model.classifier.weight (a
                               saved module); its metadata entry "bertkit" holds what PEFT has no
                               field for (task class, base shape and weight fingerprint).
Prefix tuning with PEFT's position convention (`PrefixConfig(shift_positions=True)`) is written
as PEFT's PREFIX_TUNING: prompt_embeddings (P, layers * 2 * hidden) and heads under "base_model.".
Bottleneck adapters (which PEFT does not have) and prefixes with bertkit's default convention
(positions from 0; PEFT's prefixes shift them by P, so the same tensors give other outputs there)
keep bertkit's own files:
    bertkit_adapter_config.json   method and settings, task class, targets, base path, shape, fingerprint
    bertkit_adapter.safetensors   tensors under bertkit's names (`...output.dense.adapter.up.weight`,
                                  `prefix.key_values`, `classifier.weight`).
Both kinds also hold the task's config.json (num_labels, id2label) and tokenizer files when a
tokenizer is passed. Directories written by bertkit before it wrote PEFT's format (an
adapter_config.json with "format": "bertkit-peft") still load.

This module reads and writes files and builds the task model from its base; the PeftModel is
built in model.py, which imports this module (and not the other way round).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save
from torch import nn

from bertkit.models import heads
from bertkit.models.checkpoint import load_into, read_config, read_state_dict
from bertkit.models.config import BertConfig
from bertkit.models.encoder_decoder import EncoderDecoderConfig, EncoderDecoderModel
from bertkit.errors import CheckpointError, ConfigError
from bertkit.io import atomic_open, atomic_write_json, make_output_dir, read_json_object, same_path
from bertkit.models.encoder import BertModel
from bertkit.peft.base import CONFIG_CLASSES, PeftConfig, base_shape, encoder_of
from bertkit.peft.lora import LoraConfig
from bertkit.peft.prefix import PrefixConfig
from bertkit.runtime import run_dir
from bertkit.tokenizer import Tokenizer

# PEFT's names (LoRA), bertkit's own (bottleneck adapters, prefixes): defined with the run folders,
# whose "not a model" hint also names an adapter directory
ADAPTER_CONFIG, OWN_CONFIG = run_dir.ADAPTER_CONFIG, run_dir.OWN_ADAPTER_CONFIG
ADAPTER_WEIGHTS = "adapter_model.safetensors"
OWN_WEIGHTS = "bertkit_adapter.safetensors"
FORMAT = "bertkit-peft"  # "format" of bertkit's own config (and of old adapter_config.json files)
FORMAT_VERSION = 2
PEFT_PREFIX = "base_model.model."  # PEFT's prefix of every saved key
# bertkit task class <-> PEFT task_type (which PeftModelFor... class PEFT builds).
TASK_TYPES = {"BertForSequenceClassification": "SEQ_CLS", "BertForTokenClassification": "TOKEN_CLS",
              "BertForQuestionAnswering": "QUESTION_ANS", "BertModel": "FEATURE_EXTRACTION",
              "EncoderDecoderModel": "SEQ_2_SEQ_LM"}
# PEFT LoraConfig fields whose non-default values change the maths; bertkit refuses them.
UNSUPPORTED_LORA = {"use_dora": False, "use_rslora": False, "bias": "none", "fan_in_fan_out": False,
                    "lora_bias": False, "rank_pattern": {}, "alpha_pattern": {},
                    "layers_to_transform": None, "layer_replication": None, "target_parameters": None,
                    "trainable_token_indices": None, "exclude_modules": None}


@dataclass
class SavedAdapter:
    """One adapter directory, read: the method config, bertkit's description of it and its
    tensors under bertkit's names (`...query.lora.A`, `classifier.weight`)."""

    directory: str
    config: PeftConfig
    meta: dict  # method, adapter_name, task_class, targets, modules_to_save, base_model,
    #             base_fingerprint, base_config (the last two None when not recorded)
    weights: dict[str, torch.Tensor]
    weights_file: str


def is_adapter_dir(directory) -> bool:
    directory = os.fspath(directory)
    return any(os.path.isfile(os.path.join(directory, f)) for f in (ADAPTER_CONFIG, OWN_CONFIG))


def refuse_adapter_dir(directory, action: str) -> None:
    """A command that needs a whole model (`action`: "export", "inspect", ...) given an adapter
    folder: say what the folder is and how to make a model of it, instead of "no weights"."""
    if is_adapter_dir(directory):
        raise CheckpointError(f"{os.fspath(directory)} is a PEFT adapter (`bertkit peft info` describes it), not a "
                              "whole model; fold it into a plain checkpoint first (`bertkit peft merge --model "
                              f"{os.fspath(directory)} --out DIR`) and {action} that")


# ---------------------------------------------------------------------------- saving
def save_adapter(peft, directory, adapter_name: str | None = None, tokenizer: Any = None) -> None:
    """Write one adapter of `peft` (a PeftModel; default: its active adapter) into `directory`:
    LoRA and position-shifted prefixes in PEFT's files, the rest in bertkit's. The adapter config is written last, so a
    directory that has it is complete."""
    name = peft._name(adapter_name)
    config = peft.peft_configs[name]
    directory = os.fspath(directory)
    make_output_dir(directory)
    state = {k: v.detach().to("cpu").contiguous().clone() for k, v in peft.adapter_state(name).items()}
    base = os.path.abspath(peft.base_model_path) if peft.base_model_path else None
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "method": config.method,
            "adapter_name": name, "task_class": type(peft.model).__name__,
            "targets": peft.targets[name], "modules_to_save": peft.saved_modules[name],
            "base_model": base, "base_fingerprint": peft.base_fingerprint,
            "base_config": base_shape(peft.config),
            "parameters": sum(t.numel() for t in state.values())}
    lora = config.method == "lora"
    peft_format = lora or (config.method == "prefix" and config.shift_positions)
    for stale in ((OWN_CONFIG, OWN_WEIGHTS) if peft_format else (ADAPTER_CONFIG, ADAPTER_WEIGHTS)):
        path = os.path.join(directory, stale)
        if os.path.exists(path):  # the other kind's files from an earlier save: one adapter per dir
            os.remove(path)
    if lora:
        tensors = {PEFT_PREFIX + _peft_key(k): v for k, v in state.items()}
        metadata = {"format": "pt", "bertkit": json.dumps(meta)}
        weights_name, config_name = ADAPTER_WEIGHTS, ADAPTER_CONFIG
        config_dict = _peft_lora_config(config, meta, peft.peft_target_modules(name))
    elif peft_format:  # prefix tuning as PEFT's PREFIX_TUNING: heads under "base_model."
        key_values = peft.prefixes.encoders[name].folded().to("cpu")  # (L, 2, P, H), MLP folded
        tensors = {"base_model." + k: v for k, v in state.items() if not k.startswith("prefix.")}
        tensors["prompt_embeddings"] = prompt_embeddings(key_values)
        metadata = {"format": "pt", "bertkit": json.dumps(meta)}
        weights_name, config_name = ADAPTER_WEIGHTS, ADAPTER_CONFIG
        config_dict = _peft_prefix_config(config, meta, peft.config, key_values.shape[0])
    else:
        tensors, metadata = state, {"format": "pt", "method": config.method}
        weights_name, config_name = OWN_WEIGHTS, OWN_CONFIG
        config_dict = {**meta, "peft_config": dataclasses.asdict(config)}
    with atomic_open(os.path.join(directory, weights_name), "wb") as f:
        f.write(save(tensors, metadata=metadata))
    peft.config.replace(architectures=[type(peft.model).__name__]).save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    atomic_write_json(os.path.join(directory, config_name), config_dict)


def _peft_key(key: str) -> str:
    """bertkit's `<layer>.lora.A` / `.lora.B` -> PEFT's `<layer>.lora_A.weight` / `.lora_B.weight`."""
    for ours, theirs in ((".lora.A", ".lora_A.weight"), (".lora.B", ".lora_B.weight")):
        if key.endswith(ours):
            return key[: -len(ours)] + theirs
    return key  # a saved module's own name (classifier.weight)


def _bertkit_key(key: str) -> str:
    for ours, theirs in ((".lora.A", ".lora_A.weight"), (".lora.B", ".lora_B.weight")):
        if key.endswith(theirs):
            return key[: -len(theirs)] + ours
    return key


def _peft_base_fields(peft_type: str, meta: dict) -> dict:
    """The fields every PEFT adapter_config.json starts with (those of PEFT's PeftConfig)."""
    return {
        "peft_type": peft_type,
        "task_type": TASK_TYPES.get(meta["task_class"]),
        "base_model_name_or_path": meta["base_model"],
        "revision": None,
        "inference_mode": True,
    }


def _peft_lora_config(config: LoraConfig, meta: dict, target_modules: list[str]) -> dict:
    """adapter_config.json as PEFT's LoraConfig.save_pretrained writes it (its defaults for the
    fields bertkit does not use)."""
    return {
        **_peft_base_fields("LORA", meta),
        "r": config.r,
        "lora_alpha": int(config.alpha) if float(config.alpha).is_integer() else config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": target_modules,
        "modules_to_save": meta["modules_to_save"] or None,
        "init_lora_weights": True if config.init == "kaiming" else "gaussian",
        **UNSUPPORTED_LORA,
        "layers_pattern": None,
    }


def prompt_embeddings(key_values: torch.Tensor) -> torch.Tensor:
    """bertkit's (L, 2, P, H) prefixes -> PEFT's prompt_embeddings (P, L * 2 * H): for each
    virtual token, layer 0's key, layer 0's value, layer 1's key, ... (PEFT views the row as
    (L * 2, heads, head_dim) and gives layer l the pair 2l, 2l + 1)."""
    layers, _, tokens, hidden = key_values.shape
    return key_values.permute(2, 0, 1, 3).reshape(tokens, layers * 2 * hidden).contiguous()


def key_values_of(prompt: torch.Tensor, layers: int) -> torch.Tensor:
    """PEFT's (P, L * 2 * H) prompt_embeddings -> bertkit's (L, 2, P, H)."""
    tokens = prompt.shape[0]
    return prompt.reshape(tokens, layers, 2, -1).permute(1, 2, 0, 3).contiguous()


def _peft_prefix_config(config, meta: dict, model_config: BertConfig, layers: int) -> dict:
    """adapter_config.json as PEFT's PrefixTuningConfig writes it."""
    return {
        **_peft_base_fields("PREFIX_TUNING", meta),
        "num_virtual_tokens": config.num_virtual_tokens,
        "token_dim": model_config.hidden_size,
        "num_transformer_submodules": 1,
        "num_attention_heads": model_config.num_attention_heads,
        "num_layers": layers,
        "encoder_hidden_size": model_config.hidden_size,
        "prefix_projection": False,
        "modules_to_save": meta["modules_to_save"] or None,
    }


# ---------------------------------------------------------------------------- reading
def read_adapter(directory) -> SavedAdapter:
    """Read an adapter directory of any of the three kinds (PEFT LoRA, bertkit's own, old bertkit)."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise CheckpointError(f"adapter directory {directory} does not exist")
    if os.path.isfile(os.path.join(directory, OWN_CONFIG)):
        meta = _read_json(os.path.join(directory, OWN_CONFIG))
        return _read_own(directory, meta, os.path.join(directory, OWN_WEIGHTS))
    path = os.path.join(directory, ADAPTER_CONFIG)
    if not os.path.isfile(path):
        plain = any(os.path.exists(os.path.join(directory, f))
                    for f in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"))
        what = ("a plain model directory: load it with from_pretrained, not as an adapter" if plain
                else "not an adapter directory (written by PeftModel.save_pretrained)")
        raise CheckpointError(f"{directory} has no {ADAPTER_CONFIG} or {OWN_CONFIG}: it is {what}")
    meta = _read_json(path)
    if meta.get("format") == FORMAT:  # written by bertkit before PEFT's format (format_version 1)
        return _read_own(directory, meta, os.path.join(directory, ADAPTER_WEIGHTS))
    return _read_peft(directory, meta)


def read_adapter_config(directory) -> tuple[dict, PeftConfig]:
    """(bertkit's description of the adapter, the method config) without keeping the weights."""
    saved = read_adapter(directory)
    return {**saved.meta, "peft_config": dataclasses.asdict(saved.config),
            "weights_file": saved.weights_file}, saved.config


def _read_json(path: str) -> dict:
    return read_json_object(path, "restore the adapter directory, or save the adapter again", CheckpointError)


def _read_weights(path: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    if not os.path.isfile(path):
        raise CheckpointError(f"{path} is missing: the adapter directory is incomplete")
    try:
        with safe_open(path, framework="pt", device="cpu") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, (f.metadata() or {})
    except Exception as e:
        raise CheckpointError(f"{path} is not a valid safetensors file ({str(e)[:200]}); "
                              "the copy may be incomplete: save the adapter again") from None


def _read_own(directory: str, meta: dict, path: str) -> SavedAdapter:
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{directory}: the adapter config is not bertkit's (no \"format\": "
                              f"\"{FORMAT}\")")
    if meta.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(f"{directory} has adapter format version {meta['format_version']}, newer "
                              f"than this bertkit reads ({FORMAT_VERSION}); upgrade bertkit")
    method = meta.get("method")
    if method not in CONFIG_CLASSES:
        raise CheckpointError(f"{directory}: unknown method {method!r}; expected one of {sorted(CONFIG_CLASSES)}")
    cls = CONFIG_CLASSES[method]
    fields = {f.name for f in dataclasses.fields(cls)}
    values = meta.get("peft_config", {})
    unknown = sorted(set(values) - fields)
    if unknown:
        raise CheckpointError(f"{directory}: unknown {method} settings {unknown}; written by a newer bertkit?")
    try:
        config = cls(**values)
    except ConfigError as e:
        raise CheckpointError(f"{directory}: {e}") from None
    weights, _ = _read_weights(path)
    meta = {k: v for k, v in meta.items() if k != "peft_config"}
    return SavedAdapter(directory, config, meta, weights, path)


def _read_peft(directory: str, peft_config: dict) -> SavedAdapter:
    """A directory in PEFT's format (written by PEFT or by bertkit): LoRA only."""
    path = os.path.join(directory, ADAPTER_CONFIG)
    kind = peft_config.get("peft_type")
    if kind == "PREFIX_TUNING":
        return _read_peft_prefix(directory, peft_config)
    if kind != "LORA":
        raise CheckpointError(f"{path}: peft_type {kind!r} is not read by bertkit; it reads PEFT's LoRA "
                              "(\"LORA\") and prefix tuning (\"PREFIX_TUNING\") adapters and its own "
                              "bottleneck adapters")
    changed = [f"{k}={peft_config[k]!r}" for k, default in UNSUPPORTED_LORA.items()
               if peft_config.get(k, default) not in (default, None, {}, False)]
    init = peft_config.get("init_lora_weights", True)
    if init not in (True, False, "gaussian"):
        changed.append(f"init_lora_weights={init!r}")  # PiSSA / OLoRA / LoftQ change the base too
    if changed:
        raise CheckpointError(f"{path} uses LoRA options bertkit does not implement ({', '.join(changed)}); "
                              "load it with peft, or merge it there (merge_and_unload) into a plain "
                              "checkpoint that bertkit reads")
    weights_path = os.path.join(directory, ADAPTER_WEIGHTS)
    if not os.path.isfile(weights_path) and os.path.isfile(os.path.join(directory, "adapter_model.bin")):
        raise CheckpointError(f"{directory} holds adapter_model.bin (a pickle); bertkit never unpickles: "
                              "save the adapter again with peft's safe_serialization=True")
    raw, metadata = _read_weights(weights_path)
    outside = [k for k in raw if not k.startswith(PEFT_PREFIX)]
    if outside:
        raise CheckpointError(f"{weights_path} has keys outside {PEFT_PREFIX!r} ({', '.join(outside[:3])}); "
                              "it is not a LoRA adapter of a transformers model")
    weights = {_bertkit_key(k[len(PEFT_PREFIX):]): v for k, v in raw.items()}
    ours = json.loads(metadata["bertkit"]) if "bertkit" in metadata else {}
    targets = sorted({k[: -len(".lora.A")] for k in weights if k.endswith(".lora.A")})
    if not targets:
        raise CheckpointError(f"{weights_path} holds no lora_A weights: the adapter is empty or not LoRA")
    heads = [k for k in weights if not k.endswith((".lora.A", ".lora.B"))]
    names = peft_config.get("modules_to_save") or []
    saved = ours.get("modules_to_save") or [n for n in names if any(
        _has_module(key, n) for key in heads)]
    try:
        config = LoraConfig(r=int(peft_config["r"]), alpha=float(peft_config["lora_alpha"]),
                            dropout=float(peft_config.get("lora_dropout") or 0.0),
                            target_modules=targets, modules_to_save=saved,
                            init="normal" if init == "gaussian" else "kaiming")
    except (KeyError, TypeError, ValueError, ConfigError) as e:
        raise CheckpointError(f"{path}: not a readable LoRA config ({e})") from None
    task = ours.get("task_class") or _task_class_name(directory, peft_config)
    meta = {"format": "peft", "method": "lora", "adapter_name": ours.get("adapter_name", "default"),
            "task_class": task, "targets": targets, "modules_to_save": saved,
            "base_model": peft_config.get("base_model_name_or_path"),
            "base_fingerprint": ours.get("base_fingerprint"), "base_config": ours.get("base_config"),
            "parameters": sum(t.numel() for t in weights.values())}
    return SavedAdapter(directory, config, meta, weights, weights_path)


# Fields every PEFT config has that describe the adapter's files, not its maths; then those of each
# config that bertkit's counterpart has (below).
PEFT_FILE_FIELDS = ("task_type", "peft_type", "auto_mapping", "peft_version", "base_model_name_or_path", "revision",
                    "inference_mode", "modules_to_save")
PEFT_LORA_KNOWN = PEFT_FILE_FIELDS + ("r", "lora_alpha", "lora_dropout", "target_modules", "init_lora_weights")
PEFT_PREFIX_KNOWN = PEFT_FILE_FIELDS + ("num_virtual_tokens", "encoder_hidden_size", "prefix_projection")


def _peft_fields(config: Any, known: tuple[str, ...], accepted: tuple = ()) -> tuple[dict, list[str]]:
    """A peft config's fields, and `name=value` for each field bertkit does not read (not in
    `known`) that is away from PEFT's default: options whose maths bertkit's method would not do.
    `accepted`: (name, value) pairs that are such a field at a value bertkit's method matches."""
    values, defaults = config.to_dict(), type(config)().to_dict()
    return values, [f"{k}={v!r}" for k, v in values.items()
                    if k not in known and v != defaults.get(k) and (k, v) not in accepted]


def from_peft_lora_config(config: Any) -> LoraConfig:
    """The `peft` library's LoraConfig as bertkit's: r, lora_alpha -> alpha, lora_dropout ->
    dropout, target_modules (None: bertkit's default, also PEFT's for BERT), modules_to_save
    (None: the task head, what PEFT saves for a task_type), init_lora_weights True / "gaussian" ->
    init "kaiming" / "normal". Any other field away from PEFT's default is refused by name: the
    maths would differ (DoRA, rsLoRA, bias, rank patterns, other inits, ...)."""
    values, changed = _peft_fields(config, PEFT_LORA_KNOWN)
    init = values.get("init_lora_weights", True)
    if init not in (True, "gaussian"):
        changed.append(f"init_lora_weights={init!r}")
    if changed:
        raise ConfigError(f"this peft.LoraConfig sets options bertkit's LoRA does not implement ({', '.join(changed)}); "
                          "drop them, or train with peft")
    targets, saved = values.get("target_modules"), values.get("modules_to_save")
    return LoraConfig(r=values["r"], alpha=values["lora_alpha"], dropout=values.get("lora_dropout") or 0.0,
                      target_modules=(sorted(targets) if isinstance(targets, (set, list, tuple)) else targets)
                      or LoraConfig().target_modules,
                      init="normal" if init == "gaussian" else "kaiming",
                      modules_to_save=list(saved) if saved is not None else None)


def from_peft_prefix_config(config: Any) -> PrefixConfig:
    """The `peft` library's PrefixTuningConfig as bertkit's PrefixConfig with PEFT's position
    convention (shift_positions=True, saved in PEFT's format): num_virtual_tokens, prefix_projection
    -> reparameterize, encoder_hidden_size -> projection_hidden, modules_to_save. The shape fields
    PEFT fills from the model (token_dim, num_layers, ...) must be left unset; any other field away
    from PEFT's default (init_weights="zero", ...) is refused by name. The prefixes start from
    bertkit's "vocab" init (PEFT draws N(0, 1)): another starting point, the same model."""
    values, changed = _peft_fields(config, PEFT_PREFIX_KNOWN,
                                   accepted=(("num_transformer_submodules", 1),))  # an encoder's: PEFT fills it in
    if changed:
        raise ConfigError(f"this peft.PrefixTuningConfig sets options bertkit's prefix tuning does not take "
                          f"({', '.join(changed)}); drop them (the shapes come from the model), or train with peft")
    if values.get("num_virtual_tokens") is None:
        raise ConfigError("this peft.PrefixTuningConfig has no num_virtual_tokens: set it (e.g. 20)")
    projection = bool(values.get("prefix_projection"))
    if projection and values.get("encoder_hidden_size") is None:
        raise ConfigError("this peft.PrefixTuningConfig has prefix_projection=True without encoder_hidden_size "
                          "(PEFT then uses the model's hidden size): set encoder_hidden_size, the MLP's width")
    saved = values.get("modules_to_save")
    return PrefixConfig(num_virtual_tokens=values["num_virtual_tokens"], reparameterize=projection,
                        projection_hidden=values.get("encoder_hidden_size") or PrefixConfig().projection_hidden,
                        modules_to_save=list(saved) if saved is not None else None, shift_positions=True)


def _read_peft_prefix(directory: str, peft_config: dict) -> SavedAdapter:
    """PEFT's PREFIX_TUNING directory: prompt_embeddings (P, L * 2 * H), heads under "base_model."."""
    path = os.path.join(directory, ADAPTER_CONFIG)
    if peft_config.get("prefix_projection"):
        raise CheckpointError(f"{path} has prefix_projection=true: its file holds the MLP's input, not the "
                              "prefixes; save it from peft with prefix_projection=false, or load it with peft")
    if peft_config.get("num_transformer_submodules", 1) != 1:
        raise CheckpointError(f"{path}: num_transformer_submodules={peft_config['num_transformer_submodules']}"
                              " is an encoder-decoder's prefix; bertkit's encoders take 1")
    weights_path = os.path.join(directory, ADAPTER_WEIGHTS)
    raw, metadata = _read_weights(weights_path)
    if "prompt_embeddings" not in raw:
        raise CheckpointError(f"{weights_path} has no prompt_embeddings: not a prefix-tuning adapter")
    try:
        layers, tokens = int(peft_config["num_layers"]), int(peft_config["num_virtual_tokens"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable prefix-tuning config ({e})") from None
    prompt = raw.pop("prompt_embeddings")
    if prompt.dim() != 2 or prompt.shape[0] != tokens or prompt.shape[1] % (2 * layers):
        raise CheckpointError(f"{weights_path}: prompt_embeddings of shape {tuple(prompt.shape)} does not fit "
                              f"{tokens} virtual tokens over {layers} layers")
    weights = {k.removeprefix("base_model."): v for k, v in raw.items()}
    weights["prefix.key_values"] = key_values_of(prompt, layers)
    ours = json.loads(metadata["bertkit"]) if "bertkit" in metadata else {}
    names = peft_config.get("modules_to_save") or []
    heads = [k for k in weights if not k.startswith("prefix.")]
    saved = ours.get("modules_to_save") or list(dict.fromkeys(
        n for n in names if any(_has_module(key, n) for key in heads)))
    config = PrefixConfig(num_virtual_tokens=tokens, init="normal", modules_to_save=saved,
                          shift_positions=True)
    task = ours.get("task_class") or _task_class_name(directory, peft_config)
    meta = {"format": "peft", "method": "prefix", "adapter_name": ours.get("adapter_name", "default"),
            "task_class": task, "targets": ours.get("targets", []), "modules_to_save": saved,
            "base_model": peft_config.get("base_model_name_or_path"),
            "base_fingerprint": ours.get("base_fingerprint"),
            "base_config": ours.get("base_config") or {"num_hidden_layers": layers, **(
                {"hidden_size": peft_config["token_dim"]} if peft_config.get("token_dim") else {})},
            "parameters": sum(t.numel() for t in weights.values())}
    return SavedAdapter(directory, config, meta, weights, weights_path)


def _has_module(key: str, name: str) -> bool:
    """Is `key` a tensor inside a module PEFT's name `name` matches (suffix match on paths)?"""
    parts = key.split(".")[:-1]
    paths = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return any(p == name or p.endswith("." + name) for p in paths)


def _task_class_name(directory: str, peft_config: dict) -> str:
    """The bertkit class for PEFT's task_type; without one, the adapter's or base's config names it."""
    by_type = {v: k for k, v in TASK_TYPES.items()}
    task_type = peft_config.get("task_type")
    if task_type in by_type:
        return by_type[task_type]
    for candidate in (directory, peft_config.get("base_model_name_or_path")):
        if candidate and os.path.isfile(os.path.join(candidate, "config.json")):
            architectures = BertConfig.from_pretrained(candidate).architectures or []
            if architectures:
                return architectures[0]
    return "BertModel"


# ---------------------------------------------------------------------------- checks
def check_shape(meta: dict, config: BertConfig, base: str, adapter_dir: str) -> None:
    recorded = meta.get("base_config") or {}
    actual = base_shape(config)
    differ = [f"{k}={recorded[k]!r} (base has {actual.get(k)!r})" for k in recorded if recorded[k] != actual.get(k)]
    if differ:
        raise CheckpointError(f"adapter {adapter_dir} was trained on a base model of another shape: "
                              f"{', '.join(differ)}; pass the base it was trained on ({base} is not)")


def check_fingerprint(meta: dict, fingerprint: str, base: str, adapter_dir: str) -> None:
    """Refuse other base weights than the adapter was trained on (when it records them: PEFT's
    own adapters do not)."""
    if meta.get("base_fingerprint") is not None and meta["base_fingerprint"] != fingerprint:
        recorded = meta.get("base_model")
        same = recorded and same_path(recorded, base)
        which = (f"the weights in {base} changed since it was trained on them" if same else
                 f"it records {recorded} as its base" if recorded else "it does not record which base that was")
        raise CheckpointError(
            f"adapter {adapter_dir} was trained on other base weights than {base} (fingerprint "
            f"{str(meta.get('base_fingerprint'))[:12]} vs {fingerprint[:12]}); {which}; give it the base it was "
            f"trained on ({_GIVE_BASE}), or load anyway with check_base=False in Python, --no-check-base in "
            "`bertkit peft merge`")


def copy_adapter_weights(peft, weights: dict[str, torch.Tensor], name: str, source: str) -> None:
    """Copy `weights` (bertkit's names) into adapter `name` of `peft`; every tensor must fit."""
    own = peft.adapter_state(name)
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    if missing or unexpected:
        raise CheckpointError(
            f"{source} does not hold the weights of adapter {name!r} as configured "
            f"(missing {missing[:3]}{' ...' if len(missing) > 3 else ''}, unexpected "
            f"{unexpected[:3]}{' ...' if len(unexpected) > 3 else ''}); it was saved from another "
            "model class or adapter config")
    wrong = [f"{k}: file {tuple(weights[k].shape)} vs model {tuple(own[k].shape)}"
             for k in own if weights[k].shape != own[k].shape]
    if wrong:
        raise CheckpointError(f"{len(wrong)} adapter tensors in {source} have other shapes than "
                              f"this model ({'; '.join(wrong[:3])}); the base model differs from "
                              "the one it was trained on")
    with torch.no_grad():
        for key, tensor in own.items():
            tensor.copy_(weights[key])


# ---------------------------------------------------------------------------- the base model
def task_class(name: str) -> type:
    cls = {"BertModel": BertModel, "EncoderDecoderModel": EncoderDecoderModel}.get(name) or getattr(heads, name, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise CheckpointError(f"adapter was saved from model class {name!r}, which bertkit does not have")
    return cls


# Where a base model directory can be given, in every context the errors below reach.
_GIVE_BASE = "pass base=DIR in Python or --base DIR to `bertkit peft merge`"


def base_directory(saved: SavedAdapter) -> str:
    """The recorded base model directory, or an error that names what is missing."""
    base = saved.meta.get("base_model")
    where = ("base_model_name_or_path in adapter_config.json" if saved.meta.get("format") == "peft"
             else "base_model in the adapter config")
    if not base:
        raise CheckpointError(f"adapter {saved.directory} does not record its base model ({where} is empty); "
                              f"set it to the base model directory, or {_GIVE_BASE}")
    if not os.path.isdir(base):
        raise CheckpointError(f"adapter {saved.directory} needs its base model {base!r} ({where}), which "
                              "is not a directory here (bertkit reads local directories only); set it to the "
                              f"base model directory here, or {_GIVE_BASE}")
    return base


def build_task_model(saved: SavedAdapter, base_path: str) -> nn.Module:
    """The adapter's task model with the base's weights (the head from the adapter comes later)."""
    cls = task_class(saved.meta["task_class"])
    if cls is EncoderDecoderModel:
        return _encoder_decoder(saved, base_path)
    base_config = BertConfig.from_pretrained(base_path)
    check_shape(saved.meta, base_config, base_path, saved.directory)
    model = cls(_task_config(saved, base_config))
    state = read_state_dict(base_path)
    own = model.state_dict()
    differ = [k for k, v in state.items() if k in own and tuple(v.shape) != tuple(own[k].shape)]
    if differ:  # another fine-tuned model (its head of other labels): the wrong base, not a bad config.json
        raise CheckpointError(f"base {base_path} does not fit adapter {saved.directory}: {differ[0]} is "
                              f"{tuple(state[differ[0]].shape)} there and {tuple(own[differ[0]].shape)} in the "
                              f"adapter's model; it is not the model the adapter was trained on (recorded: "
                              f"{saved.meta.get('base_model') or 'none'}): {_GIVE_BASE}")
    report = load_into(model, state, getattr(cls, "base_model_prefix", "bert"))
    _, encoder_path = encoder_of(model)
    inside = encoder_path + "." if encoder_path else ""
    kept = saved.meta.get("modules_to_save") or []
    missing = [k for k in report.missing_keys if k.startswith(inside)
               and not any(k.startswith(s + ".") for s in kept)]
    if missing:
        raise CheckpointError(f"base {base_path} lacks {len(missing)} encoder weights "
                              f"({', '.join(missing[:3])}); it is not the model this adapter was "
                              "trained on")
    unsaved = [k for k in report.missing_keys if not k.startswith(inside)
               and not any(k.startswith(s + ".") for s in kept)]
    if unsaved:
        warnings.warn(f"{len(unsaved)} head weights are neither in {base_path} nor in the "
                      f"adapter ({', '.join(unsaved[:3])}) and stay randomly initialised", stacklevel=3)
    return model


def _encoder_decoder(saved: SavedAdapter, base_path: str) -> EncoderDecoderModel:
    """An encoder-decoder adapter's model from its base: a saved encoder-decoder as it is, or a BERT
    checkpoint warm-started as `finetune --task seq2seq` does (both halves from it, new cross-attention
    and LM head, which the adapter holds in full). The adapter's config.json (bertkit writes it) says
    the decoder's depth (model.decoder_layers), dropout and special ids; PEFT's directories have none:
    a full-depth warm start with the ids of the base's tokenizer."""
    base_config = read_config(base_path)
    own = os.path.isfile(os.path.join(saved.directory, "config.json"))
    config = read_config(saved.directory) if own else None
    if config is not None and not isinstance(config, EncoderDecoderConfig):
        raise CheckpointError(f"{saved.directory}/config.json is not an encoder-decoder's, but the adapter is an "
                              "EncoderDecoderModel's; restore the config.json it was saved with")
    if isinstance(base_config, EncoderDecoderConfig):
        model = EncoderDecoderModel.from_pretrained(base_path, config=config or base_config)
    else:
        model = EncoderDecoderModel(config or _warm_start_config(base_config, base_path))
        state = read_state_dict(base_path)
        hint = f"{base_path} is not the base adapter {saved.directory} was trained on: {_GIVE_BASE}"
        reports = {"encoder.": load_into(model.encoder, state, "bert", mismatch_hint=hint),
                   "decoder.": load_into(model.decoder, state, "bert", mismatch_hint=hint)}
        missing = [part + k for part, report in reports.items() for k in report.missing_keys
                   if not model.is_head_parameter(part + k) and k not in ("pooler.dense.weight", "pooler.dense.bias")]
        if missing:
            raise CheckpointError(f"base {base_path} lacks {len(missing)} weights of the encoder-decoder "
                                  f"({', '.join(missing[:3])}); it is not the model this adapter was trained on")
    check_shape(saved.meta, model.config, base_path, saved.directory)
    return model


def _base_encoder_decoder_config(base_path: str) -> EncoderDecoderConfig:
    """The encoder-decoder config of an adapter's base: a saved encoder-decoder's own, or a BERT's warm start."""
    config = read_config(base_path)
    return config if isinstance(config, EncoderDecoderConfig) else _warm_start_config(config, base_path)


def _warm_start_config(base: BertConfig, base_path: str) -> EncoderDecoderConfig:
    """BERT2BERT's config from one BERT (seq2seq's warm start): [CLS] starts the decoder, [SEP] ends
    it, [PAD] pads, read off the base's tokenizer when it has one."""
    ids: dict[str, int | None] = {}
    if any(os.path.isfile(os.path.join(base_path, f)) for f in TOKENIZER_FILES):
        tokenizer = Tokenizer.from_pretrained(base_path)
        ids = {"decoder_start_token_id": tokenizer.cls_token_id, "pad_token_id": tokenizer.pad_token_id,
               "eos_token_id": tokenizer.sep_token_id}
    return EncoderDecoderConfig(base.replace(is_decoder=False, add_cross_attention=False),
                                base.replace(is_decoder=True, add_cross_attention=True), **ids)


def _task_config(saved: SavedAdapter, base_config: BertConfig) -> BertConfig:
    """The task config (labels, problem type): the adapter's config.json when it has one (bertkit
    writes it), else the base's with num_labels read off the saved classifier (PEFT's dirs)."""
    if os.path.isfile(os.path.join(saved.directory, "config.json")):
        return BertConfig.from_pretrained(saved.directory)
    classifier = saved.weights.get("classifier.weight")
    if classifier is None or saved.meta["task_class"] not in ("BertForSequenceClassification",
                                                              "BertForTokenClassification"):
        return base_config
    labels = classifier.shape[0]
    if labels == base_config.num_labels:
        return base_config
    return base_config.replace(num_labels=labels, id2label=None, label2id=None)


# ---------------------------------------------------------------------------- for commands
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")


def adapter_task_config(directory) -> BertConfig:
    """The task config of an adapter directory, `architectures` naming its task class: what
    `evaluate`/`predict` read from config.json (which PEFT's own directories lack)."""
    saved = read_adapter(directory)
    if os.path.isfile(os.path.join(saved.directory, "config.json")):
        config = read_config(saved.directory)  # (an encoder-decoder's has a class of its own)
    elif saved.meta["task_class"] == "EncoderDecoderModel":  # PEFT's directory: its base's
        config = _base_encoder_decoder_config(base_directory(saved))
    else:
        config = _task_config(saved, BertConfig.from_pretrained(base_directory(saved)))
    return config.replace(architectures=[saved.meta["task_class"]])


def tokenizer_dir(directory) -> str:
    """Where the tokenizer of a model or adapter directory is: the directory itself when it has
    tokenizer files (bertkit saves them with an adapter), else an adapter's base directory."""
    directory = os.fspath(directory)
    if any(os.path.isfile(os.path.join(directory, f)) for f in TOKENIZER_FILES) or not is_adapter_dir(directory):
        return directory
    return base_directory(read_adapter(directory))
