"""Reading recipe settings: TOML sections checked key by key, `--set` overrides, and
transformers' TrainingArguments names read as bertkit's."""
