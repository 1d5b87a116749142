"""Recipes: what a command runs, composed from the components below them.

- `finetune.py`   a pre-trained encoder + a task head, trained and selected on dev
- `distill.py`    a fine-tuned teacher into a smaller student (task distillation)
- `pretrain.py`, `continued.py`: pre-training from scratch and continued (domain-adaptive)

Components (config, tokenizer, model, heads, variants, data, train, tasks, objectives, peft,
analysis) never import a recipe; commands only parse arguments and call one recipe or
analysis function.
"""
