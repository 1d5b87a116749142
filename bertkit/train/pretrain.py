"""Moved to bertkit/recipes/pretrain.py; this re-export keeps commands/scale.py working until its
imports are updated (then remove this file)."""

from ..recipes.pretrain import (  # noqa: F401
    PretrainConfig, build_model, get_documents, get_tokenizer, load_config, parse_config, run_pretraining)
