"""`PeftModel`: a frozen bertkit model plus named LoRA / adapter / prefix parameter sets.

    model = BertForSequenceClassification.from_pretrained(base, num_labels=5)
    peft = get_peft_model(model, LoraConfig(r=8), base_model_path=base)   # base frozen
    peft.print_trainable_parameters()       # trainable 75,653 of 22,789,253 (0.33%) ...
    ... train peft like any model: peft(**batch).loss ...
    peft.save_pretrained("out/lora")        # adapter weights + head + adapter_config.json
    plain = peft.merge_and_unload()         # LoRA only: W += (alpha/r) B A; a plain model again

Composition, not subclasses: the PEFT parameters ride on the base model's own modules, so the
encoder code runs unchanged and the base weights keep their Hugging Face names.
  * a targeted nn.Linear is replaced by `PeftLinear`, which holds the *same* weight and bias
    Parameters (same state-dict names) and, per adapter name, a LoRA update and/or a bottleneck
    adapter applied to its output;
  * prefix tuning sets `BertSelfAttention.prefix` of every layer to a hook that prepends the
    active prefix's keys and values;
  * each module in `modules_to_save` (by default the task head) is replaced by `HeadCopies`,
    which keeps the frozen original and one trainable copy per adapter, so every adapter has its
    own head and switching adapters switches heads.
Several adapters can live on one base model; `set_active(name)` picks the one that runs and
trains (`set_active(None)` runs the base model). Only the active adapter's parameters have
requires_grad=True.

The base model is identified by a fingerprint (SHA-256 of the encoder's weights) recorded when
the first adapter is added; an adapter directory refuses to load onto a different base.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import BertkitError, CheckpointError, ConfigError
from bertkit.models.hf_compat import count_parameters
from bertkit.models.encoder import BertSelfAttention
from bertkit.peft import io
from bertkit.peft.adapters import ADAPTER_PLACES, AdapterConfig, Bottleneck
from bertkit.peft.base import (CONFIG_CLASSES, PeftConfig, base_fingerprint, body_paths, encoder_of,
                                is_encoder_decoder, warm_start_modules)
from bertkit.peft.lora import LoraUpdate
from bertkit.peft.prefix import PrefixConfig, PrefixEncoder, PrefixHook, PrefixTuning, vocab_init_ids

# Bottleneck adapters and prefixes place themselves in one encoder's layers; an encoder-decoder has two
# stacks and cross-attention, which only LoRA (any nn.Linear by name) reaches as it is.
ENCODER_DECODER_LORA_ONLY = ("{method} is not available on an encoder-decoder (BERT2BERT): only LoRA is; use "
                             "LoraConfig (--peft lora)")


# ---------------------------------------------------------------------------- modules
class PeftLinear(nn.Module):
    """y = x W^T + b  [+ LoRA(x)]  then  y <- y + adapter(y), for the active adapter name.

    `weight` and `bias` are the wrapped nn.Linear's own Parameters (shared, not copied), so the
    state-dict names and the base checkpoint stay as they were.
    """

    def __init__(self, base: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight = base.weight
        self.bias = base.bias
        self.lora = nn.ModuleDict()  # adapter name -> LoraUpdate
        self.adapter = nn.ModuleDict()  # adapter name -> Bottleneck
        self.active: str | None = None
        self.merged: str | None = None  # the LoRA name whose update is inside `weight` now

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight, self.bias)
        name = self.active
        if name is None:
            return y
        if name in self.lora and self.merged != name:
            y = y + self.lora[name](x)
        if name in self.adapter:
            y = y + self.adapter[name](y)
        return y

    @torch.no_grad()
    def merge(self, name: str) -> None:
        self.weight += self.lora[name].delta_weight().to(self.weight.dtype)
        self.merged = name

    @torch.no_grad()
    def unmerge(self) -> None:
        self.weight -= self.lora[self.merged].delta_weight().to(self.weight.dtype)
        self.merged = None

    def to_linear(self) -> nn.Linear:
        """A plain nn.Linear holding this layer's (possibly merged) weight and bias."""
        linear = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None,
                           device=self.weight.device, dtype=self.weight.dtype)
        linear.weight = self.weight
        linear.bias = self.bias
        return linear

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"active={self.active!r}, merged={self.merged!r}")


class HeadCopies(nn.Module):
    """A module to save: the frozen original plus one trainable copy per adapter name.

    Calls and attribute reads go to the active adapter's copy (or the original when the active
    adapter has none), so code such as `self.cls.predictions` in the model keeps working.
    """

    def __init__(self, original: nn.Module):
        super().__init__()
        self.original = original
        self.copies = nn.ModuleDict()
        self.active: str | None = None

    def current(self) -> nn.Module:
        return self.copies[self.active] if self.active in self.copies else self.original

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.current()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in ("original", "copies") or name.startswith("__"):  # never delegate protocols
                raise
            return getattr(self.current(), name)


# ---------------------------------------------------------------------------- counting
@dataclass
class ParameterCount:
    """trainable / total parameters; `parts` splits the trainable ones (adapter, head)."""

    trainable: int
    total: int
    parts: dict[str, int]

    @property
    def share(self) -> float:
        return self.trainable / self.total if self.total else 0.0

    def __str__(self) -> str:
        parts = " + ".join(f"{k} {v:,}" for k, v in self.parts.items())
        return (f"trainable parameters: {self.trainable:,} of {self.total:,} "
                f"({100 * self.share:.3f}%){' = ' + parts if parts else ''}")


# ---------------------------------------------------------------------------- the model
class PeftModel(nn.Module):
    """A frozen bertkit model with named PEFT adapters; see the module docstring."""

    def __init__(self, model: nn.Module, config: PeftConfig, adapter_name: str = "default",
                 base_model_path: str | None = None, fingerprint: str | None = None,
                 init_weights: bool = True):
        super().__init__()
        if isinstance(model, PeftModel):
            raise ConfigError("this model already is a PeftModel; add more with add_adapter(name, config)")
        encoder_of(model)  # raises on a model that is not a bertkit model
        self.model = model
        self.config = model.config
        self.base_model_path = base_model_path
        self.base_fingerprint = fingerprint or base_fingerprint(model)
        self.peft_configs: dict[str, PeftConfig] = {}
        self.targets: dict[str, list[str]] = {}  # adapter name -> module paths it changes
        self.saved_modules: dict[str, list[str]] = {}  # adapter name -> modules_to_save paths
        self.active_adapter: str | None = None
        self.merged_adapter: str | None = None
        self.unloaded = False
        self.prefixes: PrefixTuning | None = None
        # add_adapter checks everything before it changes the model, and freezes the base
        self.add_adapter(adapter_name, config, init_weights=init_weights)
        self.set_active(adapter_name)

    # ------------------------------------------------------------------ running
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self._check_usable()
        config = self.peft_configs.get(self.active_adapter) if self.active_adapter else None
        if getattr(config, "shift_positions", False) and len(args) < 4 and kwargs.get("position_ids") is None:
            kwargs["position_ids"] = self._shifted_positions(args[0] if args else kwargs["input_ids"],
                                                             config.num_virtual_tokens)
        return self.model(*args, **kwargs)

    def _shifted_positions(self, input_ids: torch.Tensor, shift: int) -> torch.Tensor:
        """(1, T) positions P .. P + T - 1: PEFT's prefix tuning on transformers' BERT counts the
        prefix as a past key/value cache, so the sequence's positions start after it."""
        length = input_ids.shape[-1]
        if shift + length > self.config.max_position_embeddings:
            raise BertkitError(f"this prefix shifts positions by {shift} (PEFT's convention), so inputs "
                               f"may have at most {self.config.max_position_embeddings - shift} tokens; "
                               f"got {length}: truncate shorter")
        return torch.arange(shift, shift + length, device=input_ids.device).unsqueeze(0)

    def __getattr__(self, name: str) -> Any:
        """Attributes the wrapper lacks come from the wrapped model (get_input_embeddings, ...)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "model" or name.startswith("__"):  # never delegate protocols (copy, pickle)
                raise
            return getattr(self.model, name)

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False, *,
                       trainable_only: bool | None = None) -> int:
        """As transformers' (`trainable_only`: bertkit's earlier name for `only_trainable`)."""
        return count_parameters(self, only_trainable if trainable_only is None else trainable_only,
                                exclude_embeddings)

    def is_head_parameter(self, name: str) -> bool:
        """What `train.head_lr` trains at its rate: the modules to save (the task head; an encoder-decoder's
        cross-attention and LM transform), each adapter's copy under `.copies.<adapter>.`; LoRA, adapters and
        prefixes live in the body and train at train.lr. (The wrapped model's own rule read these names
        wrongly: every name starts with "model.", so a classifier's LoRA counted as head.)"""
        return re.search(r"\.copies\.[A-Za-z0-9_\-]+\.", name) is not None

    # ------------------------------------------------------------------ adapters
    @property
    def adapter_names(self) -> list[str]:
        return list(self.peft_configs)

    def add_adapter(self, name: str, config: PeftConfig, init_weights: bool = True) -> None:
        """Add adapter `name` (inactive until `set_active(name)`); the base stays frozen."""
        self._check_usable()
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", name):
            raise ConfigError(f"adapter name {name!r} must be letters, digits, '_' or '-' (e.g. 'bbc')")
        if name in self.peft_configs:
            raise ConfigError(f"an adapter named {name!r} exists already; pick another name or "
                              "delete_adapter() it first")
        config = _bertkit_config(config)
        if is_encoder_decoder(self.model) and config.method != "lora":
            raise ConfigError(ENCODER_DECODER_LORA_ONLY.format(method=config.method))
        saved = self._resolve_modules_to_save(config.modules_to_save)
        if config.method == "lora":
            targets = self._resolve_lora_targets(config.target_modules, saved)
        elif config.method == "adapter":
            targets = self._adapter_places(config)
        else:
            targets = [f"{p}.prefix" for p in self._attention_paths()]
            if config.shift_positions and self.config.model_type == "roberta":
                raise ConfigError("shift_positions is transformers' BERT convention; RoBERTa numbers "
                                  "positions from the padding, use shift_positions=False")
        # Everything checked: now change the model.
        reference = self.model.get_submodule(targets[0]) if config.method != "prefix" else None
        for path in saved:
            self._save_module(path, name)
        if config.method == "lora":
            for path in targets:
                layer = self._peft_linear(path)
                layer.lora[name] = LoraUpdate(layer.in_features, layer.out_features, config)
        elif config.method == "adapter":
            for path in targets:
                layer = self._peft_linear(path)
                layer.adapter[name] = Bottleneck(layer.out_features, config)
        else:
            self._add_prefix(name, config, init_weights)
        weight = reference.weight if reference is not None else next(self.model.parameters())
        self._adapter_modules(name, move_to=weight)
        self.peft_configs[name] = config
        self.targets[name] = targets
        self.saved_modules[name] = saved
        self._sync()

    def set_active(self, name: str | None) -> None:
        """Run (and train) adapter `name`; None runs the plain base model with its own head."""
        self._check_usable()
        if name is not None and name not in self.peft_configs:
            raise ConfigError(f"no adapter named {name!r}; this model has {self.adapter_names}")
        if self.merged_adapter is not None and name != self.merged_adapter:
            raise BertkitError(f"adapter {self.merged_adapter!r} is merged into the base weights; "
                               "unmerge() before switching adapters")
        self.active_adapter = name
        self._sync()

    def delete_adapter(self, name: str) -> None:
        self._check_usable()
        if name not in self.peft_configs:
            raise ConfigError(f"no adapter named {name!r}; this model has {self.adapter_names}")
        if name == self.merged_adapter:
            raise BertkitError(f"adapter {name!r} is merged; unmerge() before deleting it")
        for module in self.model.modules():
            parts = [module.lora, module.adapter] if isinstance(module, PeftLinear) else \
                [module.copies] if isinstance(module, HeadCopies) else []
            for part in parts:
                if name in part:
                    del part[name]
        if self.prefixes is not None and name in self.prefixes.encoders:
            del self.prefixes.encoders[name]
        for table in (self.peft_configs, self.targets, self.saved_modules):
            table.pop(name)
        if self.active_adapter == name:
            self.active_adapter = None
        self._sync()

    def adapter_state(self, name: str | None = None) -> dict[str, nn.Parameter]:
        """Adapter `name`'s own tensors (PEFT weights and its head copies) under canonical keys:
        `<layer path>.lora.A`, `<layer path>.adapter.down.weight`, `prefix.key_values`, and the
        saved modules under their plain names (`classifier.weight`). These are what is saved."""
        name = self._name(name)
        out: dict[str, torch.Tensor] = {}
        for path, module in self.model.named_modules():
            if isinstance(module, PeftLinear):
                for kind in ("lora", "adapter"):
                    part = getattr(module, kind)
                    if name in part:
                        for key, value in part[name].state_dict(keep_vars=True).items():
                            out[f"{path}.{kind}.{key}"] = value
            elif isinstance(module, HeadCopies) and name in module.copies:
                for key, value in module.copies[name].state_dict(keep_vars=True).items():
                    out[f"{path}.{key}"] = value
        if self.prefixes is not None and name in self.prefixes.encoders:
            for key, value in self.prefixes.encoders[name].state_dict(keep_vars=True).items():
                out[f"prefix.{key}"] = value
        return out

    # ------------------------------------------------------------------ counting
    def trainable_parameters(self) -> ParameterCount:
        """Trainable parameters (the active adapter and its head) against all parameters."""
        trainable = {id(p): p.numel() for p in self.parameters() if p.requires_grad}
        total = sum(p.numel() for p in self.parameters())
        parts: dict[str, int] = {}
        if self.active_adapter is not None:
            method = self.peft_configs[self.active_adapter].method
            for key, p in self.adapter_state(self.active_adapter).items():
                head = not re.search(r"\.(lora|adapter)\.|^prefix\.", key)
                part = "head" if head else method
                if id(p) in trainable:
                    parts[part] = parts.get(part, 0) + p.numel()
        return ParameterCount(sum(trainable.values()), total, parts)

    def print_trainable_parameters(self) -> ParameterCount:
        count = self.trainable_parameters()
        print(f"adapter {self.active_adapter!r}: {count}")
        return count

    # ------------------------------------------------------------------ merging
    def merge(self) -> None:
        """Fold the active LoRA update into the base weights: W <- W + (alpha / r) B A."""
        self._check_usable()
        name = self.active_adapter
        if self.merged_adapter is not None:
            raise BertkitError(f"adapter {self.merged_adapter!r} is already merged; merging twice "
                               "would add its update twice (unmerge() first)")
        self._check_mergeable(name)
        for module in self.model.modules():
            if isinstance(module, PeftLinear) and name in module.lora:
                module.merge(name)
        self.merged_adapter = name

    def unmerge(self) -> None:
        """Subtract the merged LoRA update again: W <- W - (alpha / r) B A."""
        self._check_usable()
        if self.merged_adapter is None:
            raise BertkitError("no adapter is merged; nothing to unmerge")
        for module in self.model.modules():
            if isinstance(module, PeftLinear) and module.merged is not None:
                module.unmerge()
        self.merged_adapter = None

    def merge_and_unload(self) -> nn.Module:
        """The wrapped model as a plain bertkit model with the active LoRA merged in and the
        active adapter's head in place. This PeftModel is unusable afterwards."""
        self._check_usable()
        name = self.active_adapter
        if name is None:  # set_active(None): there is nothing to merge, and the base alone is not what was asked
            raise ConfigError("merge_and_unload: no adapter is active (set_active(None)); set_active(NAME) to merge "
                              "that adapter, or use .model for the plain base")
        if self.merged_adapter is None:
            self.merge()
        for path, module in list(self.model.named_modules()):
            if isinstance(module, PeftLinear):
                self._replace(path, module.to_linear())
            elif isinstance(module, HeadCopies):
                self._replace(path, module.current())
            elif isinstance(module, BertSelfAttention):
                module.prefix = None
        for p in self.model.parameters():
            p.requires_grad_(True)  # a plain model, trainable as any other
        self.unloaded = True
        return self.model

    def fold_prefix(self, name: str | None = None) -> None:
        """Replace a reparameterised prefix's MLP by the plain prefixes it computes."""
        name = self._name(name)
        if self.peft_configs[name].method != "prefix":
            raise ConfigError(f"adapter {name!r} is {self.peft_configs[name].method}, not prefix tuning")
        self.prefixes.encoders[name].fold()
        self.peft_configs[name] = dataclasses.replace(self.peft_configs[name], reparameterize=False)
        self._sync()

    # ------------------------------------------------------------------ saving / loading
    def save_pretrained(self, directory, tokenizer: Any = None, adapter_name: str | None = None) -> None:
        """Write the active (or named) adapter, the task's config.json and the tokenizer's files;
        the base weights are not written. LoRA is written in PEFT's format (adapter_config.json,
        adapter_model.safetensors), other methods in bertkit's (see io.py)."""
        io.save_adapter(self, directory, adapter_name, tokenizer)

    @classmethod
    def from_pretrained(cls, adapter_dir, base=None, adapter_name: str | None = None,
                        check_base: bool = True) -> "PeftModel":
        """Load an adapter directory (bertkit's, or a LoRA adapter PEFT saved) onto its base, in
        eval mode. `base`: a model directory or a bertkit model of the adapter's task class;
        default: the base recorded in the adapter. `adapter_name` defaults to the saved name."""
        adapter_dir = os.fspath(adapter_dir)
        saved = io.read_adapter(adapter_dir)
        cls_name = saved.meta["task_class"]
        if isinstance(base, nn.Module):
            if type(base).__name__ != cls_name:
                raise CheckpointError(f"adapter {adapter_dir} belongs on a {cls_name}, got a "
                                      f"{type(base).__name__}")
            model, base_name, base_path = base, f"the given {cls_name}", None
            io.check_shape(saved.meta, model.config, base_name, adapter_dir)
        else:
            base_path = base_name = os.fspath(base) if base is not None else io.base_directory(saved)
            model = io.build_task_model(saved, base_path)
        fingerprint = base_fingerprint(model)
        if check_base:
            io.check_fingerprint(saved.meta, fingerprint, base_name, adapter_dir)
        name = adapter_name or saved.meta.get("adapter_name") or "default"
        peft = cls(model, saved.config, name, base_model_path=base_path or saved.meta.get("base_model"),
                   fingerprint=fingerprint, init_weights=False)
        io.copy_adapter_weights(peft, saved.weights, name, saved.weights_file)
        peft.eval()
        return peft

    def load_adapter(self, adapter_dir, adapter_name: str, check_base: bool = True) -> None:
        """Add the adapter saved in `adapter_dir` under `adapter_name` (not made active)."""
        adapter_dir = os.fspath(adapter_dir)
        saved = io.read_adapter(adapter_dir)
        if saved.meta.get("task_class") != type(self.model).__name__:
            raise CheckpointError(f"adapter {adapter_dir} belongs on a {saved.meta.get('task_class')}, "
                                  f"this model is a {type(self.model).__name__}")
        io.check_shape(saved.meta, self.config, "this model's base", adapter_dir)
        if check_base:
            io.check_fingerprint(saved.meta, self.base_fingerprint, "this model's base", adapter_dir)
        self.add_adapter(adapter_name, saved.config, init_weights=False)
        try:
            io.copy_adapter_weights(self, saved.weights, adapter_name, saved.weights_file)
        except CheckpointError:
            self.delete_adapter(adapter_name)
            raise

    def load_adapter_weights(self, adapter_dir, adapter_name: str | None = None) -> None:
        """Overwrite an existing adapter's weights from a directory it was saved to (resume)."""
        saved = io.read_adapter(adapter_dir)
        io.copy_adapter_weights(self, saved.weights, self._name(adapter_name), saved.weights_file)

    def peft_target_modules(self, name: str | None = None) -> list[str]:
        """target_modules for PEFT's adapter_config.json: the configured names when PEFT, matching
        them against every module of the model (heads too), finds exactly this adapter's targets;
        otherwise the targets' full paths."""
        name = self._name(name)
        targets = self.targets[name]
        names = self.peft_configs[name].target_modules
        if isinstance(names, list):
            paths = [p for p, _ in self._walk() if p]
            found = {p for p in paths for n in names if p == n or p.endswith("." + n)}
            if found == set(targets):
                return list(names)
        return list(targets)

    # ------------------------------------------------------------------ internals
    def _check_usable(self) -> None:
        if self.unloaded:
            raise BertkitError("this PeftModel was turned into a plain model by merge_and_unload(); "
                               "use the model that call returned")

    def _name(self, name: str | None) -> str:
        name = self.active_adapter if name is None else name
        if name is None:
            raise ConfigError(f"no adapter is active; name one of {self.adapter_names}")
        if name not in self.peft_configs:
            raise ConfigError(f"no adapter named {name!r}; this model has {self.adapter_names}")
        return name

    def _check_mergeable(self, name: str | None) -> None:
        if name is None:
            raise BertkitError("no adapter is active; set_active(name) the LoRA adapter to merge")
        method = self.peft_configs[name].method
        if method == "adapter":
            raise BertkitError(f"adapter {name!r} is a bottleneck adapter: it is non-linear "
                               "(W_up act(W_down h)) and cannot be folded into the base weights; "
                               "load the adapter directory with bertkit instead of merging")
        if method == "prefix":
            raise BertkitError(f"adapter {name!r} is prefix tuning: its extra key/value tokens have "
                               "no place in a plain BERT checkpoint; load the adapter directory "
                               "with bertkit instead of merging")

    def _sync(self) -> None:
        """Point every PEFT module at the active adapter; only its parameters train."""
        name = self.active_adapter
        for p in self.parameters():
            p.requires_grad_(False)
        for module in self.model.modules():
            if isinstance(module, (PeftLinear, HeadCopies)):
                module.active = name
        if self.prefixes is not None:
            self.prefixes.active = name
        if name is not None:
            for p in self.adapter_state(name).values():
                if isinstance(p, nn.Parameter):
                    p.requires_grad_(True)

    def _adapter_modules(self, name: str, move_to: torch.Tensor) -> None:
        """Put adapter `name`'s new modules on the base weights' device and dtype."""
        for module in self.model.modules():
            if isinstance(module, PeftLinear):
                for part in (module.lora, module.adapter):
                    if name in part:
                        part[name].to(device=move_to.device, dtype=move_to.dtype)
            elif isinstance(module, HeadCopies) and name in module.copies:
                module.copies[name].to(device=move_to.device)
        if self.prefixes is not None and name in self.prefixes.encoders:
            self.prefixes.encoders[name].to(device=move_to.device, dtype=move_to.dtype)

    def _replace(self, path: str, module: nn.Module) -> None:
        parent, _, child = path.rpartition(".")
        setattr(self.model.get_submodule(parent) if parent else self.model, child, module)

    def _peft_linear(self, path: str) -> PeftLinear:
        module = self.model.get_submodule(path)
        if isinstance(module, PeftLinear):
            return module
        wrapped = PeftLinear(module)
        self._replace(path, wrapped)
        return wrapped

    def _save_module(self, path: str, name: str) -> None:
        module = self.model.get_submodule(path)
        if not isinstance(module, HeadCopies):
            module = HeadCopies(module)
            self._replace(path, module)
        # Deep-copy the head but keep references to modules outside it (the MLM decoder's tied
        # word embeddings) pointing at the originals.
        inside = {id(m) for m in module.original.modules()}
        memo = {id(m): m for m in self.model.modules() if id(m) not in inside}
        memo.update({id(p): p for m in self.model.modules() if id(m) not in inside
                     for p in m.parameters(recurse=False)})
        module.copies[name] = copy.deepcopy(module.original, memo)

    def _walk(self) -> Iterator[tuple[str, nn.Module]]:
        """(path, module) of the wrapped model, skipping the insides of HeadCopies and PEFT parts."""
        def visit(prefix: str, module: nn.Module):
            yield prefix, module
            if isinstance(module, (HeadCopies, PeftLinear, PrefixHook)):
                return
            for child_name, child in module.named_children():
                yield from visit(f"{prefix}.{child_name}" if prefix else child_name, child)
        yield from visit("", self.model)

    def _resolve_modules_to_save(self, names: list[str] | str | None) -> list[str]:
        _, encoder_path = encoder_of(self.model)
        paths = [p for p, _ in self._walk() if p]
        if names is None and is_encoder_decoder(self.model):  # what the warm start added (base.py says why)
            return warm_start_modules(self.model)
        if names is None:  # the task head: top-level modules with parameters besides the encoder
            if not encoder_path:  # a bare encoder has no head (as PEFT's FEATURE_EXTRACTION on AutoModel)
                return []
            return [n for n, m in self.model.named_children()
                    if n != encoder_path and any(True for _ in m.parameters())]
        chosen = _match(names, paths, "modules_to_save", "module")
        # Keep outermost matches only (saving "cls" already saves "cls.predictions").
        chosen = [p for p in chosen if not any(p.startswith(q + ".") for q in chosen)]
        return [p for p in chosen if any(True for _ in self.model.get_submodule(p).parameters())]

    def _resolve_lora_targets(self, targets: list[str] | str, saved: list[str]) -> list[str]:
        """The linear layers `targets` names inside the pre-trained body (`body_paths`: both halves
        of an encoder-decoder), leaving out those inside modules trained in full."""
        inside = tuple((path + ".") if path else "" for path in body_paths(self.model))
        linears = [p for p, m in self._walk()
                   if isinstance(m, (nn.Linear, PeftLinear)) and p.startswith(inside)
                   and not any(p == s or p.startswith(s + ".") for s in saved)]
        return _match(targets, linears, "LoRA target_modules", "linear layer")

    def _layers(self) -> list[tuple[str, nn.Module]]:
        encoder, encoder_path = encoder_of(self.model)
        base = f"{encoder_path}.encoder.layer" if encoder_path else "encoder.layer"
        return [(f"{base}.{i}", layer) for i, layer in enumerate(encoder.encoder.layer)]

    def _adapter_places(self, config: AdapterConfig) -> list[str]:
        return [f"{path}.{place}" for path, _ in self._layers() for place in ADAPTER_PLACES[config.kind]]

    def _attention_paths(self) -> list[str]:
        return [f"{path}.attention.self" for path, _ in self._layers()]

    def _add_prefix(self, name: str, config: PrefixConfig, init_weights: bool) -> None:
        layers = self._layers()
        if self.prefixes is None:
            self.prefixes = PrefixTuning()
            for i, (_, layer) in enumerate(layers):
                attention = layer.attention.self
                attention.prefix = PrefixHook(self.prefixes, i, attention.num_heads)
        cfg = self.config
        encoder = PrefixEncoder(config, len(layers), cfg.hidden_size, std=cfg.initializer_range)
        if init_weights and config.init == "vocab" and not config.reparameterize:
            with torch.no_grad():
                encoder.key_values.copy_(self._real_token_key_values(config.num_virtual_tokens))
        self.prefixes.encoders[name] = encoder

    @torch.no_grad()
    def _real_token_key_values(self, num_tokens: int) -> torch.Tensor:
        """(L, 2, P, H): every layer's keys and values for P random vocabulary tokens, as the
        frozen base model (no adapter active) computes them."""
        encoder, _ = encoder_of(self.model)
        weight = next(encoder.parameters())
        ids = vocab_init_ids(self.config.vocab_size, num_tokens, self.config.pad_token_id)
        was_training = encoder.training
        peft_modules = [m for m in encoder.modules() if isinstance(m, PeftLinear) and m.merged is None]
        for module in peft_modules:  # the base model's own K/V: no adapter on the way
            module.active = None
        self.prefixes.capture = {}
        try:
            encoder.eval()
            encoder(ids.unsqueeze(0).to(weight.device))
            captured = self.prefixes.capture
        finally:
            self.prefixes.capture = None
            encoder.train(was_training)
            for module in peft_modules:
                module.active = self.active_adapter
        return torch.stack([captured[i] for i in range(len(self._layers()))])


def _bertkit_config(config: Any) -> PeftConfig:
    """A bertkit method config as it is; the `peft` library's LoraConfig and PrefixTuningConfig
    converted (same maths, PEFT's field names: io.from_peft_lora_config, from_peft_prefix_config);
    anything else refused, naming its module."""
    if isinstance(config, tuple(CONFIG_CLASSES.values())):
        return config
    kind = type(config)
    library = kind.__module__.split(".")[0]
    if library == "peft" and kind.__name__ == "LoraConfig":
        return io.from_peft_lora_config(config)
    if library == "peft" and kind.__name__ == "PrefixTuningConfig":
        return io.from_peft_prefix_config(config)
    hint = ("; bertkit converts peft.LoraConfig and peft.PrefixTuningConfig (PEFT has no bottleneck adapters: "
            "bertkit.peft.AdapterConfig)" if library == "peft" else "")
    raise ConfigError(f"expected bertkit.peft.LoraConfig, AdapterConfig or PrefixConfig, got "
                      f"{library}.{kind.__name__} ({kind.__module__}){hint}")


def _match(patterns: list[str] | str, paths: list[str], what: str, kind: str) -> list[str]:
    """Paths matched by a list of names (suffix match on dotted components) or one regex.

    Every name must match something: a name that matches nothing is a typo, reported with the
    nearest names that exist.
    """
    if isinstance(patterns, str):
        try:
            regex = re.compile(patterns)
        except re.error as e:
            raise ConfigError(f"{what} regex {patterns!r} is invalid: {e}") from None
        chosen = [p for p in paths if regex.fullmatch(p)]
        if not chosen:
            raise ConfigError(f"{what} regex {patterns!r} matches no {kind}; it must match a whole "
                              f"path such as {paths[0] if paths else '(none)'!r}; "
                              f"{kind}s: {_short_names(paths)}")
        return chosen
    chosen: list[str] = []
    for name in patterns:
        hits = [p for p in paths if p == name or p.endswith("." + name)]
        if not hits:
            suffixes = {".".join(p.split(".")[i:]) for p in paths for i in range(len(p.split(".")))}
            near = difflib.get_close_matches(name, sorted(suffixes), n=3, cutoff=0.5)
            hint = f"near names: {', '.join(near)}; " if near else ""
            raise ConfigError(f"{what} {name!r} matches no {kind} of this model; {hint}"
                              f"{kind}s: {_short_names(paths)}")
        chosen.extend(h for h in hits if h not in chosen)
    return [p for p in paths if p in chosen]  # model order


def _short_names(paths: list[str]) -> str:
    """Distinct last components (query, key, value, dense, ...), in model order."""
    names = list(dict.fromkeys(p.rsplit(".", 1)[-1] for p in paths))
    return ", ".join(names[:12]) + (", ..." if len(names) > 12 else "") if names else "(none)"


def get_peft_model(model: nn.Module, config: PeftConfig, adapter_name: str = "default",
                   base_model_path: str | None = None) -> PeftModel:
    """Freeze `model` and add one adapter, active and trainable. Record `base_model_path` (the
    directory the base was loaded from) so the adapter can later be loaded and merged without
    naming the base again."""
    return PeftModel(model, config, adapter_name, base_model_path=base_model_path)


def load_peft_model(adapter_dir, base=None, adapter_name: str | None = None, check_base: bool = True
                    ) -> PeftModel:
    """`PeftModel.from_pretrained` as a function (for commands)."""
    return PeftModel.from_pretrained(adapter_dir, base, adapter_name, check_base)


def load_model(directory, model_class: type | None = None, base=None, **config_overrides: Any) -> nn.Module:
    """A model directory or an adapter directory, whichever `directory` is, ready for inference.

    For commands such as evaluate/predict: a plain directory loads with
    `model_class.from_pretrained`; an adapter directory loads onto its (recorded or given) base.
    """
    if io.is_adapter_dir(directory):
        return load_peft_model(directory, base)
    if model_class is None:
        raise ConfigError("pass model_class to load a plain model directory")
    return model_class.from_pretrained(directory, **config_overrides)
