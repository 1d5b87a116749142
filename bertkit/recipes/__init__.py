"""Recipes: what a command runs. A recipe composes components (tokenizer, data, model,
objectives, the training loop) into one job, such as `pretrain.run_pretraining`.

Recipes compose components and are what a command runs; components never import recipes.
"""
