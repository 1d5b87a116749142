"""transformers' `TrainingArguments` names in a `[train]` section: one table, read in one place.

Someone who lives in the Hugging Face ecosystem types `--set train.learning_rate=3e-5`. Where a
TrainingArguments field means exactly what a bertkit key means (same units, same default
behaviour), it is accepted as an alias and read as bertkit's key (ALIASES). Where the meaning or
the values differ, the name is refused with a message that names the bertkit setting to use
(REFUSED), rather than being read slightly wrong. Names bertkit shares with transformers
(`max_steps`, `warmup_steps`, `warmup_ratio`, `weight_decay`, `seed`, `adam_beta2`) need no entry.
`config_io.bertkit_names` applies the table; docs/ecosystem.md lists it.
"""

from __future__ import annotations

SECTION = "train"  # TrainingArguments' fields all belong to bertkit's [train] section

# TrainingArguments field -> bertkit [train] key with the same meaning.
ALIASES = {
    "learning_rate": "lr",
    "num_train_epochs": "epochs",  # fine-tuning; pre-training counts train.max_steps
    "per_device_train_batch_size": "batch_size",  # per process, as bertkit's batch_size
    "gradient_accumulation_steps": "grad_accum",
    "max_grad_norm": "grad_clip",  # 0 turns clipping off in both
    "adam_epsilon": "adam_eps",
    "logging_steps": "log_every",
    "eval_steps": "eval_every",
    "save_steps": "save_every",
    "save_total_limit": "keep_last",
    "metric_for_best_model": "select_metric",
    "early_stopping_patience": "patience",  # EarlyStoppingCallback's argument
}

# TrainingArguments field -> what to write in bertkit instead (the meaning or values differ).
REFUSED = {
    "per_device_eval_batch_size": "data.eval_batch_size",
    "bf16": 'train.precision = "bf16"',
    "fp16": 'train.precision = "fp16"',
    "lr_scheduler_type": 'train.schedule (one of "linear", "cosine", "polynomial", "constant" = transformers\' '
                         '"constant_with_warmup", "noam" = "inverse_sqrt", "wsd" = '
                         '"warmup_stable_decay" with 1-sqrt decay)',
    "adam_beta1": "nothing: bertkit's AdamW keeps beta1 = 0.9 (train.adam_beta2 and train.adam_eps are settable)",
    "use_cpu": 'train.device = "cpu" (or --device cpu)',
    "output_dir": "the command's --out",
    "load_best_model_at_end": "nothing: bertkit finetune always ends with the best dev model in --out",
    "eval_strategy": "train.eval_every (steps between evaluations; 0 = at the end only)",
    "save_strategy": "train.save_every (steps between checkpoints; 0 = at the end only; -1 = never)",
    "fsdp": 'train.strategy = "fsdp" (under torchrun; each transformer layer is sharded, no option strings)',
}

# A bertkit key some recipes lack -> what those recipes take instead.
INSTEAD = {"epochs": "train.max_steps (this recipe counts optimizer steps, not epochs)",
           "select_metric": "early_stopping.metric",
           "patience": "early_stopping.patience"}


def alias_of(key: str) -> str | None:
    """bertkit's [train] key for transformers' name `key` (None if `key` is no alias)."""
    return ALIASES.get(key)


def refusal(key: str) -> str | None:
    """The message for a transformers name bertkit does not read as an alias (None otherwise)."""
    if key not in REFUSED:
        return None
    return f"train.{key} is transformers' TrainingArguments name; in bertkit use {REFUSED[key]}"
