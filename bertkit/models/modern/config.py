"""`ModernBertConfig`: the configuration of the modern encoder (bertkit/models/modern/).

Field names and defaults are those of transformers' `ModernBertConfig` (5.x), so a config.json
written by transformers reads here and the one written here reads there (`AutoConfig`).
transformers 5 stores the attention pattern as `layer_types` ("full_attention" /
"sliding_attention" per layer) and the rotary bases as `rope_parameters`; older files carry
`global_attn_every_n_layers`, `global_rope_theta` and `local_rope_theta`. Both forms are read;
the 5.x form is written (with `global_attn_every_n_layers`, which transformers keeps too).
Fields this class does not know are kept in `extra` and written back out unchanged.

Two fields are bertkit's own, ablation switches that transformers' ModernBert does not have:
`position_embedding_type` and `norm_placement` (see ABLATION_SWITCHES). At their defaults they
are not written, so such a config.json is byte for byte transformers'; any other value makes a
checkpoint transformers loads with wrong outputs, and saving one warns (variants/keymaps.py).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bertkit.models.config import (BertConfig, check_keywords, known_and_extra, label2id_for, label_changes,
                                   labels_agree)
from bertkit.errors import ConfigError

FULL, SLIDING = "full_attention", "sliding_attention"
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")
POOLINGS = ("cls", "mean")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
# The ablation switches: field -> {value: what transformers' ModernBert does with such a checkpoint}.
# The first value of each is the default, ModernBERT's own architecture.
ABLATION_SWITCHES = {
    "position_embedding_type": {
        "rope": "",
        "absolute": "it ignores embeddings.position_embeddings and rotates q and k (RoPE) instead",
        "sinusoidal": "it has no sinusoidal table (bertkit rebuilds it from the config; it is not in "
                      "the file) and rotates q and k (RoPE) instead",
        "none": "it rotates q and k (RoPE), positions the model never saw",
    },
    "norm_placement": {
        "pre": "",
        "post": "it runs every layer pre-LN with a final norm: layer 0's attn_norm is left unused "
                "and final_norm newly initialised",
    },
}

# (layers, hidden, heads): the depth and width of bertkit's BertConfig presets, so a recipe can
# swap one encoder for the other at the same shape. intermediate = 1.5 x hidden as ModernBERT-base
# (768 -> 1152): the GeGLU input map Wi is H -> 2 x intermediate.
SIZE_PRESETS = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (22, 768, 12),  # ModernBERT-base
}
# bertkit's WordPiece tokenizers number [PAD] [UNK] [CLS] [SEP] [MASK] from 0; the presets use
# them (transformers' defaults are ModernBERT's own 50k BPE vocabulary ids).
BERTKIT_TOKEN_IDS = dict(vocab_size=30522, pad_token_id=0, cls_token_id=2, sep_token_id=3,
                         bos_token_id=2, eos_token_id=3)


@dataclass
class ModernBertConfig:
    MODEL_TYPES: ClassVar[tuple[str, ...]] = ("modernbert",)  # what checkpoint.config_class_for reads with it
    CLASS_PREFIX: ClassVar[str] = "ModernBert"  # ModernBertModel, ModernBertForMaskedLM, ... (family_class)
    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152  # GeGLU width: Wi maps H -> 2 x this, Wo maps this -> H
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"  # of the GeGLU gate
    max_position_embeddings: int = 8192  # RoPE has no table: this only bounds the input length
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0  # init is a normal truncated at +-factor x std
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int | None = 50283
    eos_token_id: int | None = 50282
    bos_token_id: int | None = 50281
    cls_token_id: int | None = 50281
    sep_token_id: int | None = 50282
    attention_bias: bool = False
    attention_dropout: float = 0.0
    # Which layers attend globally: layer i is global when i % global_attn_every_n_layers == 0,
    # unless layer_types lists "full_attention"/"sliding_attention" per layer explicitly.
    global_attn_every_n_layers: int = 3
    layer_types: list[str] | None = None
    global_rope_theta: float = 160_000.0  # RoPE base of the global layers
    local_rope_theta: float = 10_000.0  # RoPE base of the sliding-window layers
    local_attention: int = 128  # window width: a token sees +-local_attention // 2 neighbours
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_pooling: str = "cls"  # "cls": the first token's state; "mean": over real tokens
    classifier_dropout: float = 0.0
    classifier_bias: bool = False  # of the head's dense layer (the classifier always has one)
    classifier_activation: str = "gelu"
    # transformers' switch for MLM logits at labelled positions only; bertkit's MLM always does
    # that when labels are given (full_logits=True for all), so these are kept for the file only.
    sparse_prediction: bool = False
    sparse_pred_ignore_index: int = -100
    tie_word_embeddings: bool = True
    num_labels: int = 2
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None
    # Ablation switches, bertkit only (transformers' ModernBert runs the defaults whatever the file
    # says). Positions: "rope" rotates q and k; "absolute" (a learned table) and "sinusoidal"
    # (variants/sinusoidal.py's fixed table) are added to the token embeddings before their norm,
    # as in BERT; "none" gives attention no position signal (only the sliding window's reach).
    position_embedding_type: str = "rope"
    # "pre": x + f(norm(x)) and a final norm; "post": norm(x + f(x)) per sublayer, as BERT.
    norm_placement: str = "pre"
    model_type: str = "modernbert"
    architectures: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.layer_types is None and isinstance(self.global_attn_every_n_layers, int) \
                and self.global_attn_every_n_layers > 0 and isinstance(self.num_hidden_layers, int):
            self.layer_types = self.default_layer_types()
        if self.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
            self.num_labels = len(self.id2label)
            self.label2id = label2id_for(self.id2label, self.label2id)
        self.validate()

    def default_layer_types(self) -> list[str]:
        every = self.global_attn_every_n_layers
        return [FULL if i % every == 0 else SLIDING for i in range(self.num_hidden_layers)]

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise `ConfigError` with what to change when the values cannot make a model."""
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "local_attention",
                     "global_attn_every_n_layers", "num_labels"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.model_type != "modernbert":
            raise ConfigError(f"ModernBertConfig is for model_type 'modernbert', got {self.model_type!r}; "
                              "load BERT-family checkpoints with BertConfig")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                              f"({self.num_attention_heads})")
        for name, values in ABLATION_SWITCHES.items():
            if getattr(self, name) not in values:
                raise ConfigError(f"{name} {getattr(self, name)!r} is not known; use one of {tuple(values)} "
                                  f"(default {next(iter(values))!r}, the only one transformers' ModernBert runs)")
        if self.head_dim % 2 and self.position_embedding_type == "rope":
            raise ConfigError(f"the head size hidden_size / num_attention_heads = {self.head_dim} must be "
                              "even: rotary positions rotate pairs of dimensions")
        if self.local_attention % 2:
            raise ConfigError(f"local_attention ({self.local_attention}) must be even: the window is "
                              f"+-local_attention // 2 tokens; use {self.local_attention + 1}")
        if len(self.layer_types) != self.num_hidden_layers or set(self.layer_types) - {FULL, SLIDING}:
            raise ConfigError(f"layer_types must list {self.num_hidden_layers} entries (num_hidden_layers), "
                              f"each {FULL!r} or {SLIDING!r}; got {self.layer_types!r}")
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in ACTIVATIONS:
                raise ConfigError(f"{name} {getattr(self, name)!r} is not known; use one of {ACTIVATIONS}")
        if self.classifier_pooling not in POOLINGS:
            raise ConfigError(f"classifier_pooling {self.classifier_pooling!r} is not known; use one of {POOLINGS} "
                              "(\"pooler\", BERT's dense + tanh on [CLS], exists only in BERT-family models)")
        for name in ("attention_dropout", "embedding_dropout", "mlp_dropout", "classifier_dropout"):
            p = getattr(self, name)
            if not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {p!r}")
        for name in ("global_rope_theta", "local_rope_theta", "norm_eps", "initializer_range"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("pad_token_id", "cls_token_id", "sep_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.vocab_size:
                raise ConfigError(f"{name} ({value}) must be a valid id below vocab_size ({self.vocab_size}); "
                                  "take the ids from the tokenizer the model is trained with")
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise ConfigError(f"problem_type {self.problem_type!r} is not known; use one of {PROBLEM_TYPES}")

    def transformers_cannot_run(self) -> dict[str, str]:
        """The non-default ablation switches, "field='value'" -> what transformers does instead."""
        return {f"{name}={getattr(self, name)!r}": values[getattr(self, name)]
                for name, values in ABLATION_SWITCHES.items() if getattr(self, name) != next(iter(values))}

    def transformers_warning(self) -> str | None:
        """What saving warns of (variants/keymaps.py): the switches transformers would ignore."""
        reasons = self.transformers_cannot_run()
        if not reasons:
            return None
        return (f"modern encoder checkpoints with {', '.join(reasons)} load in transformers 5's "
                f"ModernBert with wrong outputs: {'; '.join(reasons.values())}. Run them with "
                "bertkit, or train with the default switches (position_embedding_type='rope', "
                "norm_placement='pre') to use transformers")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def sliding_window(self) -> int:
        """How far a sliding-window layer looks each way: |i - j| <= local_attention // 2."""
        return self.local_attention // 2

    @property
    def max_sequence_length(self) -> int:
        return self.max_position_embeddings

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "ModernBertConfig":
        """A size by name (tiny, mini, small, medium, base) at the depth/width of
        `BertConfig.preset(name)`, with bertkit's WordPiece token ids; overrides change any field."""
        if name not in SIZE_PRESETS:
            raise ConfigError(f"unknown size preset {name!r}; choose one of {sorted(SIZE_PRESETS)}")
        layers, hidden, heads = SIZE_PRESETS[name]
        values = dict(BERTKIT_TOKEN_IDS, num_hidden_layers=layers, hidden_size=hidden,
                      num_attention_heads=heads, intermediate_size=hidden * 3 // 2)
        values.update(overrides)
        return cls(**values)

    # ------------------------------------------------------------------ HF config.json
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModernBertConfig":
        data = dict(data)
        rope = data.pop("rope_parameters", None) or {}
        for layer_type, theta_field in ((FULL, "global_rope_theta"), (SLIDING, "local_rope_theta")):
            params = rope.get(layer_type) or {}
            if params.get("rope_type", "default") != "default":
                raise ConfigError(f"rope_parameters[{layer_type!r}] uses rope_type {params['rope_type']!r}; "
                                  "bertkit implements the default rotary positions only")
            if "rope_theta" in params:
                data[theta_field] = params["rope_theta"]
        return cls(**known_and_extra(cls, data))

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        if data["id2label"] is not None:  # JSON object keys are strings
            data["id2label"] = {str(k): v for k, v in data["id2label"].items()}
        data["rope_parameters"] = {
            FULL: {"rope_theta": data.pop("global_rope_theta"), "rope_type": "default"},
            SLIDING: {"rope_theta": data.pop("local_rope_theta"), "rope_type": "default"},
        }
        data = {k: v for k, v in data.items() if v is not None}
        for name, values in ABLATION_SWITCHES.items():  # defaults unwritten: transformers' own file
            if data[name] == next(iter(values)):
                del data[name]
        merged = dict(self.extra)
        merged.update(data)
        return dict(sorted(merged.items()))

    # The file I/O is BertConfig's (it only calls from_dict / to_dict).
    from_json_file = BertConfig.__dict__["from_json_file"]
    from_pretrained = BertConfig.__dict__["from_pretrained"]
    to_json_string = BertConfig.to_json_string
    save_pretrained = BertConfig.save_pretrained

    def replace(self, **changes: Any) -> "ModernBertConfig":
        """A copy with some fields changed (validated again). A layer pattern that was derived
        from global_attn_every_n_layers is derived again, so e.g. num_hidden_layers may change."""
        check_keywords(type(self), changes, "replace")
        if "layer_types" not in changes and self.layer_types == self.default_layer_types():
            changes["layer_types"] = None
        return dataclasses.replace(self, extra=dict(self.extra), **label_changes(self, changes))


_dataclass_init = ModernBertConfig.__init__


@functools.wraps(_dataclass_init)  # keeps the dataclass's signature for help() and inspect
def _init_with_agreeing_labels(self, *args: Any, **kwargs: Any) -> None:
    _dataclass_init(self, *args, **labels_agree(kwargs))  # num_labels and id2label: as BertConfig


ModernBertConfig.__init__ = _init_with_agreeing_labels  # type: ignore[method-assign]
