"""Recipes: what a command runs, composed from the components below them.

- `finetune.py`   a pre-trained encoder + a task head, trained and selected on dev
- `distill.py`    a fine-tuned teacher into a smaller student (task distillation)
- `pretrain.py`   pre-training from a TOML recipe: whichever objective the registry gives
                  (bertkit/objectives/), from scratch or, with `continued.py`, from a trained
                  encoder (domain-adaptive pre-training)
- `prepare.py`    a corpus tokenized once into memory-mapped token shards
- `scaling_sweep.py` one small model pre-trained per size within a time budget, then L(N) fitted

Recipes compose components and are what a command runs; components (config, tokenizer, model,
heads, variants, data, train, tasks, objectives, peft, analysis) never import recipes, and
commands only parse arguments and call one recipe or analysis function.
"""
