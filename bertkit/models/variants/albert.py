"""ALBERT (Lan et al. 2020) as two switches on the encoder: factorised embeddings and shared layers.

Factorised embeddings (`embedding_size` E < H): the V x E token table and a single E x H
projection replace a V x H table, V*H -> V*E + E*H parameters (30000 x 768 = 23M -> 3.9M + 0.1M).
The projection is `encoder.embedding_hidden_mapping_in`; the MLM head maps H back to E so the
tied decoder is the same V x E table.

Cross-layer sharing (`num_hidden_groups` G, `inner_group_num` K): the encoder owns G x K distinct
layers; step i of the L steps runs group floor(i / (L / G)), i.e. its K layers in turn (as
transformers' AlbertTransformer). G = 1, K = 1 is ALBERT's default: one layer applied L times,
so the encoder's parameter count no longer grows with depth.
"""

from __future__ import annotations

from bertkit.errors import ConfigError


def validate(config) -> None:
    """embedding_size between 1 and hidden_size (wider only for an ELECTRA generator, which reads
    the discriminator's wider shared embeddings and projects them down); the layer groups."""
    wider_allowed = config.model_type == "electra"
    if config.embedding_size is not None and (
            config.embedding_size <= 0 or (config.embedding_size > config.hidden_size and not wider_allowed)):
        raise ConfigError(
            f"embedding_size ({config.embedding_size}) must be between 1 and hidden_size "
            f"({config.hidden_size}): factorised embeddings save parameters only when E < H; "
            f"set embedding_size <= {config.hidden_size} or leave it unset")
    groups = config.num_hidden_groups
    if groups is not None and not 1 <= groups <= config.num_hidden_layers:
        raise ConfigError(f"num_hidden_groups ({groups}) must be between 1 (all layers share "
                          f"weights) and num_hidden_layers ({config.num_hidden_layers})")
    if not isinstance(config.inner_group_num, int) or config.inner_group_num < 1:
        raise ConfigError(f"inner_group_num must be a positive integer, got {config.inner_group_num!r}")
    if config.inner_group_num > 1 and groups is None:
        raise ConfigError("inner_group_num > 1 describes layers inside shared groups: also set "
                          "num_hidden_groups (1 = one group shared by all layers)")


def num_layer_modules(config) -> int:
    """How many distinct layers the encoder owns: L for BERT, G x K when layers are shared."""
    if config.num_hidden_groups is None:
        return config.num_hidden_layers
    return config.num_hidden_groups * config.inner_group_num


def layer_order(config) -> list[int]:
    """The index of the layer module run at each step: [0, 1, ..., L-1] for BERT."""
    if config.num_hidden_groups is None:
        return list(range(config.num_hidden_layers))
    layers, groups, inner = config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num
    return [int(i / (layers / groups)) * inner + j for i in range(layers) for j in range(inner)]


def has_embedding_projection(config) -> bool:
    """ALBERT always projects E -> H (even when E = H, as its checkpoints hold the matrix);
    other families only when the embeddings are narrower than the layers."""
    return config.model_type == "albert" or config.embedding_dim != config.hidden_size
