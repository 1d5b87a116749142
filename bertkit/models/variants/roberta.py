"""RoBERTa's positions as a switch (model_type="roberta"): position ids count from
pad_token_id + 1 (`encoder.roberta_position_ids`), so the first pad_token_id + 1 rows of the
position table are never a real token's; its checkpoints hold 512 + 2 rows for 512 tokens."""

from __future__ import annotations

from bertkit.errors import ConfigError


def validate(config) -> None:
    if config.model_type == "roberta" and config.max_position_embeddings <= config.pad_token_id + 1:
        raise ConfigError(
            f"RoBERTa numbers positions from pad_token_id + 1 = {config.pad_token_id + 1}, so "
            f"max_position_embeddings ({config.max_position_embeddings}) must be larger; use "
            f"max_length + {config.pad_token_id + 1} (514 for 512 tokens)")
