"""Parameter-efficient fine-tuning: LoRA, bottleneck adapters (Houlsby, Pfeiffer), prefix tuning.

    from bertkit.peft import LoraConfig, get_peft_model, PeftModel
    peft = get_peft_model(model, LoraConfig(r=8, alpha=16), base_model_path=base_dir)
    peft.print_trainable_parameters()
    peft.save_pretrained(out)                      # adapter + head + adapter_config.json
    peft = PeftModel.from_pretrained(out)          # onto the recorded base (or base=DIR)
    plain = peft.merge_and_unload()                # LoRA: a plain checkpoint again

See model.py for the wrapper, lora.py / adapters.py / prefix.py for the maths, io.py for the
adapter directory format (PEFT's for LoRA), and `bertkit peft merge` for the command line.
"""

import dataclasses

from bertkit.errors import ConfigError
from bertkit.peft.adapters import AdapterConfig, Bottleneck
from bertkit.peft.base import CONFIG_CLASSES, base_fingerprint
from bertkit.peft.io import (adapter_task_config, is_adapter_dir, read_adapter, read_adapter_config,
                            refuse_adapter_dir, save_adapter, tokenizer_dir)
from bertkit.peft.lora import LoraConfig, LoraUpdate
from bertkit.peft.model import (HeadCopies, ParameterCount, PeftLinear, PeftModel, get_peft_model, load_model,
                    load_peft_model)
from bertkit.peft.prefix import PrefixConfig, PrefixEncoder

METHODS = tuple(CONFIG_CLASSES)  # ("lora", "adapter", "prefix"): the values of --peft
# Keys of a recipe's [peft] section: the method and every method's settings.
PEFT_KEYS = ("method",) + tuple(dict.fromkeys(
    f.name for cls in CONFIG_CLASSES.values() for f in dataclasses.fields(cls)))
# Default learning rates when fine-tuning with a method (full fine-tuning uses 2e-5..5e-5). A
# new head and a few parameters need a larger step: on BBC with MiniLM (40 steps of 16, length
# 64, dev accuracy) LoRA reached 0.49 at 5e-4 and 0.93 at 2e-3 (full fine-tuning at 5e-5: 0.93),
# adapters 0.88 at 2e-3, prefixes 0.94 at 1e-2 (Li & Liang and P-tuning v2 also use ~1e-2).
DEFAULT_LR = {"lora": 2e-3, "adapter": 2e-3, "prefix": 1e-2}


def make_config(method: str, **settings) -> LoraConfig | AdapterConfig | PrefixConfig:
    """The config of a method by name (`--peft lora`), with settings; None values are dropped so
    a command can pass its unset options through."""
    if method not in CONFIG_CLASSES:
        raise ConfigError(f"unknown PEFT method {method!r}; use one of {', '.join(METHODS)}")
    cls = CONFIG_CLASSES[method]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(k for k, v in settings.items() if v is not None and k not in names)
    if unknown:
        raise ConfigError(f"{method} has no setting(s) {unknown}; it takes {sorted(names)}")
    return cls(**{k: v for k, v in settings.items() if v is not None})


__all__ = [
    "AdapterConfig", "Bottleneck", "LoraConfig", "LoraUpdate", "PrefixConfig", "PrefixEncoder",
    "PeftModel", "PeftLinear", "HeadCopies", "ParameterCount", "get_peft_model", "base_fingerprint",
    "save_adapter", "load_peft_model", "load_model", "read_adapter", "read_adapter_config",
    "is_adapter_dir", "refuse_adapter_dir", "adapter_task_config", "tokenizer_dir",
    "METHODS", "PEFT_KEYS", "DEFAULT_LR", "make_config",
]
