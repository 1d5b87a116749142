"""Hugging Face compatible checkpoints: `save_pretrained` / `from_pretrained`.

A model directory holds `config.json` and `model.safetensors` (plus tokenizer files when a
tokenizer is saved with it), exactly as `transformers` writes them. Loading accepts
safetensors (single or sharded) or `pytorch_model.bin` read with `torch.load(weights_only=True)`,
which refuses pickled code. Keys are mapped thinly:

- old TF-era names `LayerNorm.gamma/beta` -> `LayerNorm.weight/bias`;
- the tied MLM decoder weight is dropped (it *is* the word embedding matrix) and a separate
  decoder bias becomes `cls.predictions.bias`;
- a bare encoder checkpoint loads into a model with heads (the `bert.` prefix is added) and a
  checkpoint with heads loads into a bare encoder (the prefix is stripped, heads reported unused).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors.torch import load_file, save
from torch import nn

from bertkit.models.config import BertConfig, check_keywords
from bertkit.errors import CheckpointError, DataError
from bertkit.models.hf_compat import TransformersHabits, check_attn_implementation, resolve_dtype
from bertkit.models.hub_cache import resolve_model_dir
from bertkit.io import atomic_open, check_regular_file, make_output_dir, read_json_object
from bertkit.runtime.run_dir import not_a_model
from bertkit.models.variants.keymaps import from_hf, hf_architecture, to_hf, warn_if_transformers_cannot_run

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
# Prefixes transformers puts before the encoder's keys in models with heads.
BASE_PREFIXES = ("bert", "roberta", "albert", "electra")
# Buffers some transformers versions save that carry no learned state.
IGNORED_KEYS = ("embeddings.position_ids", "embeddings.token_type_ids")


@dataclass
class LoadReport:
    missing_keys: list[str] = field(default_factory=list)
    unexpected_keys: list[str] = field(default_factory=list)
    mismatched_keys: list[str] = field(default_factory=list)  # skipped (ignore_mismatched_sizes): also missing


# ---------------------------------------------------------------------------- reading weights
def read_state_dict(directory: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Read the weights of a model directory without executing any pickled code."""
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise CheckpointError(f"model directory {directory} does not exist; pass a directory "
                              "holding config.json and model.safetensors")
    names = set(os.listdir(directory))
    if "model.safetensors" in names:
        return _read_safetensors(os.path.join(directory, "model.safetensors"))
    if "model.safetensors.index.json" in names:
        index = _read_json(os.path.join(directory, "model.safetensors.index.json"))
        state: dict[str, torch.Tensor] = {}
        for shard in sorted(set(_shard_names(index, directory))):
            state.update(_read_safetensors(_inside(directory, shard)))
        return state
    if "pytorch_model.bin" in names:
        path = os.path.join(directory, "pytorch_model.bin")
        _regular(path)
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # corrupt file, or one that needs unpickling of code
            raise CheckpointError(
                f"cannot read {path} as plain weights ({type(e).__name__}: {str(e)[:200]}); bertkit "
                "never unpickles code: convert it to model.safetensors with a trusted tool") from None
    raise CheckpointError(f"no weights in {directory}: expected one of {', '.join(WEIGHT_FILES)}"
                          f"{not_a_model(directory)}")


def _regular(path: str) -> None:
    """A weights file must be a regular file: a FIFO behind a symlink made loading hang."""
    if os.path.lexists(path) and not os.path.exists(path):
        raise CheckpointError(f"{path} is a broken symlink; restore the weights file")
    if os.path.exists(path):
        try:
            check_regular_file(path)
        except DataError as e:
            raise CheckpointError(str(e)) from None


def _shard_names(index: Any, directory: str) -> list[str]:
    """The shard file names of a safetensors index, each a string."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        index_path = os.path.join(directory, "model.safetensors.index.json")
        raise CheckpointError(f"{index_path} needs a \"weight_map\" of tensor name -> shard file name")
    return list(weight_map.values())


def _inside(directory: str, name: str) -> str:
    """directory/name, required to stay inside `directory` once symlinks and `..` are resolved:
    an index naming "../x" or "/etc/x" must not load weights from elsewhere."""
    root = os.path.realpath(directory)
    path = os.path.realpath(os.path.join(directory, name))
    if os.path.commonpath([root, path]) != root:
        index = os.path.join(directory, "model.safetensors.index.json")
        raise CheckpointError(f"the shard {name!r} in {index} lies outside "
                              "the model directory; shards must be files inside it")
    return path


def _read_safetensors(path: str) -> dict[str, torch.Tensor]:

    _regular(path)
    try:
        return load_file(path, device="cpu")
    except FileNotFoundError:
        raise CheckpointError(f"weights file {path} is missing") from None
    except Exception as e:
        raise CheckpointError(f"{path} is not a valid safetensors file ({str(e)[:200]}); "
                              "the download or copy may be incomplete: restore it") from None


def _read_json(path: str) -> dict[str, Any]:
    return read_json_object(path, "restore it from the original checkpoint", CheckpointError)


# ---------------------------------------------------------------------------- key mapping
def normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map historical HF key spellings onto the ones bertkit's modules use."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.endswith(IGNORED_KEYS):
            continue
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if key.endswith("predictions.decoder.weight"):
            continue  # tied to the word embeddings, re-tied on load
        if key.endswith("predictions.decoder.bias"):
            key = key.replace("predictions.decoder.bias", "predictions.bias")
            if key in state:
                continue
        out[key] = value
    return out


def match_prefix(state: dict[str, torch.Tensor], model_keys: set[str], prefix: str
                 ) -> dict[str, torch.Tensor]:
    """Add or strip the base-model prefix so a bare encoder and a model with heads interchange."""
    model_has_prefix = any(k.startswith(prefix + ".") for k in model_keys)
    ckpt_prefix = next((p for p in (prefix, *BASE_PREFIXES)  # the model's own prefix first
                        if any(k.startswith(p + ".") for k in state)), None)
    if model_has_prefix and ckpt_prefix is None:
        # bare encoder checkpoint -> model with heads
        return {f"{prefix}.{k}": v for k, v in state.items()}
    if not model_has_prefix and ckpt_prefix is not None:
        # model with heads -> bare encoder: keep the encoder part, the rest is reported unused
        cut = len(ckpt_prefix) + 1
        return {(k[cut:] if k.startswith(ckpt_prefix + ".") else k): v for k, v in state.items()}
    if model_has_prefix and ckpt_prefix != prefix:
        cut = len(ckpt_prefix) + 1
        return {(prefix + "." + k[cut:] if k.startswith(ckpt_prefix + ".") else k): v
                for k, v in state.items()}
    return state


def load_into(model: nn.Module, state: dict[str, torch.Tensor], prefix: str, ignore_mismatched_sizes: bool = False,
              mismatch_hint: str = "the config.json does not describe these weights") -> LoadReport:
    """Copy `state` into `model`; refuse shape mismatches (or, ignoring them, leave those weights
    as initialised and report them); report missing and unused keys."""
    own = model.state_dict()
    config = getattr(model, "config", None)
    if config is not None:  # RoBERTa/ALBERT/ELECTRA names -> ours
        state = from_hf(state, config, type(model).__name__)
    state = match_prefix(normalize_keys(state), set(own), prefix)
    mismatched = {k: f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}"
                  for k, v in state.items() if k in own and v.shape != own[k].shape}
    if mismatched and not ignore_mismatched_sizes:
        shown = "; ".join(list(mismatched.values())[:5]) + (" ..." if len(mismatched) > 5 else "")
        raise CheckpointError(f"{len(mismatched)} weight shapes differ from the model config ({shown}); {mismatch_hint}")
    result = model.load_state_dict({k: v for k, v in state.items() if k not in mismatched}, strict=False)
    return LoadReport(sorted(result.missing_keys), sorted(result.unexpected_keys), sorted(mismatched))


# ---------------------------------------------------------------------------- the mixin
class PretrainedMixin(TransformersHabits):
    """`from_pretrained`, `save_pretrained` and BERT's initialisation for every bertkit model
    (and transformers' method names: hf_compat.py)."""

    config: BertConfig
    config_class = BertConfig  # what reads config.json (each family's own config class)
    base_model_prefix = "bert"  # the attribute holding the encoder in models with heads
    # Class name -> class, per config class: `from_pretrained` on a directory whose model_type
    # belongs to another family builds that family's class of the same role (see family_class).
    _registry: dict[str, type] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        PretrainedMixin._registry[cls.__name__] = cls

    # ----------------------------------------------------------- initialisation
    def init_weights(self) -> None:
        """BERT's init: weights ~ N(0, initializer_range), biases 0, LayerNorm 1/0, pad row 0."""
        self.apply(self._init_module)

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    # ----------------------------------------------------------- saving
    def save_pretrained(self, directory: str | os.PathLike, tokenizer: Any = None) -> None:
        """Write config.json and model.safetensors (and the tokenizer's files) atomically."""

        directory = os.fspath(directory)
        warn_if_transformers_cannot_run(self.config)
        make_output_dir(directory)
        name = type(self).__name__
        config = self.config.replace(architectures=[hf_architecture(name, self.config.model_type)])
        # safetensors refuses shared storage: contiguous copies of every tensor.
        state = {k: v.detach().to("cpu").contiguous().clone() for k, v in self.state_dict().items()}
        state = to_hf(state, self.config, name)  # the family's names, as transformers
        with atomic_open(os.path.join(directory, "model.safetensors"), "wb") as f:
            f.write(save(state, metadata={"format": "pt"}))
        config.save_pretrained(directory)
        if tokenizer is not None:
            warn_if_special_ids_differ(self.config, tokenizer)
            tokenizer.save_pretrained(directory)

    # ----------------------------------------------------------- loading
    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, config: BertConfig | None = None,
                        output_loading_info: bool = False, dtype: Any = None, torch_dtype: Any = None,
                        attn_implementation: str | None = None, ignore_mismatched_sizes: bool = False,
                        **config_overrides: Any):
        """Build the model from `directory/config.json` and load its weights.

        `config_overrides` change config fields before building (e.g. `num_labels=5` to put a new
        classifier on a pre-trained encoder). Missing and unused weights are reported as a warning.
        A checkpoint weight whose shape the overrides changed (a 4-label head asked for 3 labels)
        is refused, or with `ignore_mismatched_sizes=True` initialised anew, as transformers.
        `dtype` (or `torch_dtype`): cast to it after loading ("auto": the dtype config.json
        records); `attn_implementation`: "sdpa" or "eager", as transformers (see hf_compat.py).
        """
        check_attn_implementation(attn_implementation)
        directory = resolve_model_dir(directory)  # a directory, or ORG/NAME in the local HF cache
        if not os.path.isdir(directory):
            raise CheckpointError(f"model directory {directory} does not exist; pass a directory "
                                  "holding config.json and model.safetensors")
        if config is None:
            target = family_class(cls, directory)
            if target is not cls:
                return target.from_pretrained(directory, None, output_loading_info, dtype, torch_dtype,
                                              attn_implementation, ignore_mismatched_sizes, **config_overrides)
            config = cls.config_class.from_pretrained(directory)
        check_keywords(type(config), config_overrides, f"{cls.__name__}.from_pretrained")
        stored = config
        if config_overrides:
            config = config.replace(**config_overrides)
        model = cls(config)
        report = load_into(model, read_state_dict(directory), cls.base_model_prefix, ignore_mismatched_sizes,
                           _mismatch_hint(stored, config, config_overrides))
        _warn_about(report, cls.__name__, directory)
        cast = resolve_dtype(dtype, torch_dtype, config)
        if cast is not None:
            model.to(cast)
        model.eval()  # like transformers: dropout off until the caller trains
        return (model, report) if output_loading_info else model


def config_class_for(model_type: str | None) -> type:
    """The config class that reads a config.json of this model_type: the one among the model classes'
    config classes whose MODEL_TYPES holds it (each family's config class names its own types);
    BertConfig, which explains an unknown type in one line, otherwise."""
    for model_class in PretrainedMixin._registry.values():
        if model_type in getattr(model_class.config_class, "MODEL_TYPES", ()):
            return model_class.config_class
    return BertConfig


def _directory_model_type(directory: str) -> str | None:
    path = os.path.join(directory, "config.json")
    return _read_json(path).get("model_type") if os.path.isfile(path) else None


def family_class(cls: type, directory: str) -> type:
    """The class of `cls`'s role (MaskedLM, SequenceClassification, ...) in the family the
    directory's config.json names: `BertForMaskedLM.from_pretrained(d)` on another family's
    directory builds that family's masked-LM class, and the other way round. A family's classes share its config class's
    CLASS_PREFIX; BERT-family types all map to the Bert classes (switches of one encoder)."""
    model_type = _directory_model_type(directory) or "bert"
    target_config = config_class_for(model_type)
    own, prefix = getattr(cls.config_class, "CLASS_PREFIX", None), getattr(target_config, "CLASS_PREFIX", None)
    name = cls.__name__
    if cls.config_class is target_config or own is None or prefix is None or not name.startswith(own):
        return cls
    target = PretrainedMixin._registry.get(prefix + name[len(own):])
    if target is None:
        raise CheckpointError(f"{directory} holds a {model_type!r} model, which has no {name} "
                              f"counterpart; load it with one of the {prefix} classes")
    return target


def read_config(directory: str):
    """The config of a checkpoint directory of any family: the config class its config.json's
    model_type names (`config_class_for`: BertConfig for BERT's types, an encoder-decoder's own
    class for "encoder-decoder", ...)."""
    return config_class_for(_directory_model_type(directory) or "bert").from_pretrained(directory)


def _mismatch_hint(stored: Any, config: Any, overrides: dict[str, Any]) -> str:
    """What to do about weights whose shapes the caller's overrides changed."""
    if not overrides:
        return "the config.json does not describe these weights"
    labels = getattr(stored, "num_labels", None), getattr(config, "num_labels", None)
    head = (f"the checkpoint's head has {labels[0]} labels and you asked for {labels[1]}: "
            if labels[0] != labels[1] else "")
    return (f"{head}pass ignore_mismatched_sizes=True to start these weights anew (as transformers), or leave "
            f"out {', '.join(sorted(overrides))} to keep the checkpoint's")


def _warn_about(report: LoadReport, name: str, directory: str) -> None:
    if report.mismatched_keys:
        warnings.warn(f"{name}: {len(report.mismatched_keys)} weights of {directory} have other shapes than the "
                      f"model's and were newly initialised (ignore_mismatched_sizes=True: "
                      f"{_short(report.mismatched_keys)}); train them before use", stacklevel=3)
    missing = [k for k in report.missing_keys if k not in report.mismatched_keys]
    if missing:
        warnings.warn(f"{name}: {len(missing)} weights not in {directory} were newly "
                      f"initialised ({_short(missing)}); train them before use", stacklevel=3)
    if report.unexpected_keys:
        warnings.warn(f"{name}: {len(report.unexpected_keys)} weights in {directory} are not used by "
                      f"this model ({_short(report.unexpected_keys)})", stacklevel=3)


def _short(keys: list[str], n: int = 4) -> str:
    return ", ".join(keys[:n]) + (", ..." if len(keys) > n else "")


def warn_if_special_ids_differ(config, tokenizer) -> None:
    """Warn when config.json would name other special tokens than the tokenizer saved beside it
    (a size preset's ids kept with another tokenizer): generation, transformers' pipelines and
    fine-tuning read the config's ids."""
    differ = [f"{name}={getattr(config, name)} (the tokenizer's is {getattr(tokenizer, name)})"
              for name in ("pad_token_id", "cls_token_id", "sep_token_id")
              if getattr(config, name, None) is not None and getattr(tokenizer, name, None) is not None
              and getattr(config, name) != getattr(tokenizer, name)]
    if differ:
        warnings.warn(f"config.json's {', '.join(differ)}: the model's config names other tokens than its "
                      "tokenizer; build the config with the tokenizer's ids (pad_token_id=tokenizer.pad_token_id, "
                      "...)", stacklevel=3)
