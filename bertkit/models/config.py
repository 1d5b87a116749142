"""`BertConfig`: the one configuration for every encoder in bertkit.

Field names are Hugging Face's, so a `config.json` written by `transformers` reads here and the
one written here reads there. Fields this class does not know are kept in `extra` and written
back out, so a round trip loses nothing. Variants (RoBERTa, ALBERT, ...) are switches on this
one dataclass rather than separate classes.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.metadata
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.io import atomic_write_text, make_output_dir, read_json_object
from bertkit.runtime.run_dir import not_a_model
from bertkit.models.variants.switches import switch_fields, validate_switches

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh")
POSITION_EMBEDDING_TYPES = ("absolute", "relative_key", "relative_key_query", "sinusoidal", "t5_bias")
# Checkpoint families this one encoder reads and writes; `model_type` picks the switches and the
# Hugging Face key names (see bertkit/models/variants/keymaps.py).
MODEL_TYPES = ("bert", "roberta", "albert", "electra", "deberta-v2")
# What the sequence-classification and multiple-choice heads read (bertkit/models/heads.py).
CLASSIFIER_POOLINGS = ("pooler", "cls", "mean")
# What a family changes from BERT's defaults when a config is built by `preset(model_type=...)`.
VARIANT_DEFAULTS: dict[str, dict[str, Any]] = {
    "bert": {},
    # RoBERTa: byte-level BPE vocabulary with <s>=0 <pad>=1 </s>=2; positions count from pad+1,
    # hence 512 + 2 rows; one segment; LayerNorm eps 1e-5.
    "roberta": dict(vocab_size=50265, max_position_embeddings=514, pad_token_id=1,
                    layer_norm_eps=1e-5, type_vocab_size=1),
    # ALBERT: 128-wide factorised embeddings, one set of layer weights shared by all layers,
    # no dropout (as the ALBERT v2 checkpoints), tanh-approximated GELU, a 30k SentencePiece vocab.
    "albert": dict(vocab_size=30000, embedding_size=128, num_hidden_groups=1, inner_group_num=1,
                   hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
    # ELECTRA: 128-wide embeddings (projected when narrower than the layers), no pooler.
    "electra": dict(embedding_size=128),
    # DeBERTa v3: disentangled attention over 256 log-bucketed distances, no absolute positions
    # in the input, no segments, LayerNorm eps 1e-7.
    "deberta-v2": dict(vocab_size=128100, relative_attention=True, pos_att_type=["p2c", "c2p"],
                       position_buckets=256, share_att_key=True, norm_rel_ebd="layer_norm",
                       position_biased_input=False, type_vocab_size=0, layer_norm_eps=1e-7),
}

# (layers, hidden, heads); intermediate is 4 x hidden, as in BERT and the Turc et al. mini-BERTs.
SIZE_PRESETS = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


@dataclass
class BertConfig:
    # The config.json model types this class reads (checkpoint.config_class_for) and the name prefix
    # of its model classes (BertModel, BertForMaskedLM, ...; checkpoint.family_class).
    MODEL_TYPES: ClassVar[tuple[str, ...]] = MODEL_TYPES
    CLASS_PREFIX: ClassVar[str] = "Bert"
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # exact erf GELU, as the original BERT checkpoints were trained
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12  # BERT's value; RoBERTa checkpoints use 1e-5 and say so
    pad_token_id: int = 0
    initializer_range: float = 0.02  # std of the normal init of every weight matrix
    position_embedding_type: str = "absolute"
    classifier_dropout: float | None = None  # None: fall back to hidden_dropout_prob
    num_labels: int = 2
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None  # "single_label_classification", "multi_label_...", "regression"
    model_type: str = "bert"
    architectures: list[str] | None = None
    # ---- variant switches (bertkit/models/variants/); None keeps plain BERT
    # Factorised embeddings (ALBERT, ELECTRA): tokens are embedded in E < H dimensions and
    # projected up to H by `encoder.embedding_hidden_mapping_in`. None: E = H, no projection.
    embedding_size: int | None = None
    # Cross-layer sharing (ALBERT): the layers are split into num_hidden_groups consecutive groups
    # that share one set of weights each (1 = all layers share); every group holds inner_group_num
    # distinct layers applied in turn. None: every layer has its own weights (BERT).
    num_hidden_groups: int | None = None
    inner_group_num: int = 1
    # Mixture-of-experts feed-forward (variants/moe.py): num_experts FFNs per MoE layer, each
    # token sent to its moe_top_k best (gates renormalised); at most capacity_factor x the fair
    # share of tokens per expert (None: no limit; overflow tokens skip the FFN); the Switch
    # load-balancing loss times moe_aux_loss_coef is added to the loss; MoE in every
    # moe_every-th layer. None: the dense BERT feed-forward.
    num_experts: int | None = None
    moe_top_k: int = 1
    moe_capacity_factor: float | None = None
    moe_aux_loss_coef: float = 0.01
    moe_every: int = 1
    # Block-sparse local attention (variants/sparse.py): blocks of attention_block_size tokens
    # attend to attention_window_blocks neighbouring blocks on each side; with
    # attention_global_cls token 0 attends to and is attended by all. None: dense attention.
    attention_block_size: int | None = None
    attention_window_blocks: int = 1
    attention_global_cls: bool = True
    # Linformer's low-rank attention (variants/linformer.py): keys and values are projected along the
    # sequence from max_position_embeddings rows to attention_low_rank rows by learned E and F;
    # attention_low_rank_sharing: "none" (per head), "headwise" (per layer), "key_value" (E = F per
    # layer) or "layerwise" (one E = F for all layers). None: dense attention over all T keys.
    attention_low_rank: int | None = None
    attention_low_rank_sharing: str = "headwise"
    # DeBERTa's disentangled attention (variants/deberta.py), transformers' DebertaV2Config names:
    # relative_attention adds content-to-position ("c2p") and position-to-content ("p2c") scores
    # from one table of relative-position vectors shared by all layers; position_buckets > 0
    # buckets distances logarithmically; share_att_key projects the table with the layer's own
    # key/query maps; norm_rel_ebd="layer_norm" normalises the table; position_biased_input=False
    # drops the absolute position embedding from the input.
    relative_attention: bool = False
    pos_att_type: list[str] | None = None
    position_buckets: int = -1
    max_relative_positions: int = -1
    share_att_key: bool = False
    norm_rel_ebd: str = "none"
    position_biased_input: bool = True
    # T5's scalar relative bias (position_embedding_type="t5_bias", variants/t5_bias.py), T5Config's
    # names: distances fall into this many buckets (half per direction), log-spaced up to max_distance.
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    # Classification pooling (heads.py): "pooler" is BERT's dense + tanh on [CLS], the only one
    # transformers' classes have (saving another warns); "cls" the [CLS] final state without a
    # pooler; "mean" the mean of the final states over real tokens.
    classifier_pooling: str = "pooler"
    # The decoder side (transformers' names): is_decoder makes self-attention causal (position t
    # sees positions <= t) and lets the model keep a KV cache for generation; add_cross_attention
    # puts a cross-attention sub-layer (`crossattention`) over an encoder's output between the
    # self-attention and the feed-forward of every layer (BertLMHeadModel, EncoderDecoderModel).
    is_decoder: bool = False
    add_cross_attention: bool = False
    # Anything else found in config.json: kept so that saving writes it back unchanged.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.pos_att_type, str):  # transformers also writes "p2c|c2p"
            self.pos_att_type = [x.strip() for x in self.pos_att_type.lower().split("|") if x.strip()]
        if self.model_type == "albert" and self.num_hidden_groups is None:
            self.num_hidden_groups = 1  # transformers' AlbertConfig default: all layers share
        if self.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
        if self.id2label is None and isinstance(self.num_labels, int) and self.num_labels > 0:
            # As transformers: unnamed labels are LABEL_0 .. LABEL_{N-1}.
            self.id2label, self.label2id = default_labels(self.num_labels), None
        if self.id2label is not None:
            self.num_labels = len(self.id2label)
            self.label2id = label2id_for(self.id2label, self.label2id)
        self.validate()

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise `ConfigError` with what to change when the values cannot make a model."""
        _check_model_type(self.model_type)  # first: another architecture's config.json (GPT-2's
        _check_types(self)                  # pad_token_id null) would fail a field check instead
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.type_vocab_size < 0:
            raise ConfigError(f"type_vocab_size must be >= 0, got {self.type_vocab_size}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}); change one of them, e.g. num_attention_heads="
                f"{_nearest_divisor(self.hidden_size, self.num_attention_heads)}")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not known; use one of {ACTIVATIONS}")
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ConfigError(f"position_embedding_type {self.position_embedding_type!r} is not known; "
                              f"use one of {POSITION_EMBEDDING_TYPES}")
        if self.classifier_pooling not in CLASSIFIER_POOLINGS:
            raise ConfigError(f"classifier_pooling {self.classifier_pooling!r} is not known; use one of "
                              f"{CLASSIFIER_POOLINGS}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {p}")
        if self.num_labels <= 0:
            raise ConfigError(f"num_labels must be positive, got {self.num_labels}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id ({self.pad_token_id}) must be a valid id below "
                              f"vocab_size ({self.vocab_size})")
        validate_switches(self)  # each switch's own fields (bertkit/models/variants/switches.py)
        _check_decoder(self)
        _check_size(self)

    def parameter_estimate(self) -> dict[str, int]:
        """Parameters by part, from the config alone (nothing is allocated).

        embeddings (V + P + S) E (+ E H when factorised); per distinct layer 4 H^2 + 4 H
        (attention) + 2 H I + I + H (feed-forward, times num_experts plus the H x experts router
        in MoE layers) + 4 H (two LayerNorms); pooler H^2 + H. Heads and relative-position tables
        are small beside these and left out: the estimate is a floor, good to within a few percent.
        """
        H, I, E = self.hidden_size, self.intermediate_size, self.embedding_dim
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * E + 2 * E
        if E != H:
            embeddings += E * H + H
        distinct = (self.num_hidden_groups * self.inner_group_num if self.num_hidden_groups is not None
                    else self.num_hidden_layers)
        ffn = 2 * H * I + I + H
        moe_layers = 0 if self.num_experts is None else len(range(0, distinct, self.moe_every))
        layers = distinct * (4 * H * H + 8 * H) + (distinct - moe_layers) * ffn
        if moe_layers:
            layers += moe_layers * (self.num_experts * ffn + H * self.num_experts)
        return {"embeddings": embeddings, "layers": layers, "pooler": H * H + H}

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def max_sequence_length(self) -> int:
        """The longest input: RoBERTa spends pad_token_id + 1 position rows before the first token."""
        if self.model_type == "roberta":
            return self.max_position_embeddings - self.pad_token_id - 1
        return self.max_position_embeddings

    @property
    def embedding_dim(self) -> int:
        """E: the width of the token/position/segment embeddings (hidden_size unless factorised)."""
        return self.embedding_size if self.embedding_size is not None else self.hidden_size

    @property
    def shares_layers(self) -> bool:
        return self.num_hidden_groups is not None and (
            self.num_hidden_groups < self.num_hidden_layers or self.inner_group_num > 1)

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A standard size by name (tiny, mini, small, medium, base, large), with overrides.

        `model_type="roberta"` (or another family) also applies that family's defaults
        (`VARIANT_DEFAULTS`), e.g. `BertConfig.preset("base", model_type="roberta", vocab_size=8000)`.
        """
        if name not in SIZE_PRESETS:
            raise ConfigError(f"unknown size preset {name!r}; choose one of {sorted(SIZE_PRESETS)}")
        model_type = overrides.get("model_type", "bert")
        if model_type not in VARIANT_DEFAULTS:
            raise ConfigError(f"model_type {model_type!r} is not supported; use one of {MODEL_TYPES}")
        layers, hidden, heads = SIZE_PRESETS[name]
        values = dict(VARIANT_DEFAULTS[model_type], num_hidden_layers=layers, hidden_size=hidden,
                      num_attention_heads=heads, intermediate_size=4 * hidden)
        values.update(overrides)
        # (a hidden_size of the wrong type is left for __post_init__ to report in one line)
        if ("embedding_size" not in overrides and isinstance(values["hidden_size"], int)
                and (values.get("embedding_size") or 0) > values["hidden_size"]):
            values["embedding_size"] = values["hidden_size"]  # ALBERT's 128 on a narrower model
        return cls(**values)

    # ------------------------------------------------------------------ HF config.json
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BertConfig":
        return cls(**known_and_extra(cls, data))

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        if data["id2label"] is not None:  # JSON object keys are strings
            data["id2label"] = {str(k): v for k, v in data["id2label"].items()}
        data = {k: v for k, v in data.items() if v is not None}
        # Variant switches left at their defaults are not written: plain configs stay plain.
        data = {k: v for k, v in data.items() if k not in _SWITCH_DEFAULTS or v != _SWITCH_DEFAULTS[k]}
        merged = dict(self.extra)
        merged.update(data)
        return dict(sorted(merged.items()))

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "BertConfig":
        path = os.fspath(path)
        if not os.path.exists(path):
            raise ConfigError(f"no config file at {path}; a model directory needs config.json"
                              f"{not_a_model(os.path.dirname(path) or '.')}")
        return cls.from_dict(read_json_object(path, "restore it from the original checkpoint", ConfigError))

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike) -> "BertConfig":
        path = os.path.join(directory, "config.json") if os.path.isdir(directory) else directory
        return cls.from_json_file(path)

    def to_json_string(self) -> str:
        """config.json's text: the fields, and bertkit's version as the writer's in place of the source
        model's `_name_or_path` and `transformers_version` (transformers did not write this file)."""
        data = {k: v for k, v in self.to_dict().items() if k not in SOURCE_KEYS}
        return json.dumps(dict(sorted({**data, WRITER_KEY: BERTKIT_VERSION}.items())), indent=2,
                          ensure_ascii=False) + "\n"

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        make_output_dir(directory)
        atomic_write_text(os.path.join(directory, "config.json"), self.to_json_string())

    def replace(self, **changes: Any) -> "BertConfig":
        """A copy with some fields changed (validated again); a name that is no field is refused."""
        check_keywords(type(self), changes, "replace")
        return dataclasses.replace(self, extra=dict(self.extra), **label_changes(self, changes))


# transformers' keys without a BertConfig field that bertkit still reads from `extra` (generation's
# ids): a caller may pass them by keyword.
EXTRA_KEYWORDS = ("bos_token_id", "eos_token_id", "decoder_start_token_id")
# transformers' config keys that are arguments of a bertkit model's call instead.
CALL_ARGUMENTS = ("output_attentions", "output_hidden_states", "use_cache")


def keyword_names(config_class: type) -> set[str]:
    """The names a caller may pass to `from_pretrained` or `replace` for a config of this class:
    its fields, and for BertConfig the registered switches' fields and EXTRA_KEYWORDS."""
    names = {f.name for f in dataclasses.fields(config_class)} - {"extra"}
    if issubclass(config_class, BertConfig):
        names |= set(switch_fields()) | set(EXTRA_KEYWORDS)
    return names


def check_keywords(config_class: type, keywords: Any, where: str) -> None:
    """Refuse a keyword that names no field: it would only land in `extra` and change nothing
    (`hidden_dropout=0.2` for hidden_dropout_prob). A config.json's unknown keys are still kept."""
    valid = keyword_names(config_class)
    for key in keywords:
        if key not in valid:
            if key in CALL_ARGUMENTS:
                raise ConfigError(f"{where}: {key} is not a config field in bertkit; pass it to the model's "
                                  f"call instead (model(input_ids, {key}=True))")
            near = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}?" if near else f"see the fields of {config_class.__name__}"
            raise ConfigError(f"{where}: {key!r} is not a {config_class.__name__} field and would have no "
                              f"effect; {hint} (only a config.json may hold keys bertkit does not know)")


def default_labels(n: int) -> dict[int, str]:
    return {i: f"LABEL_{i}" for i in range(n)}


def labels_agree(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A config's keyword arguments with num_labels and id2label agreeing: generated names
    (LABEL_i) follow num_labels; real names of another count are refused, since either could be
    the one meant (both config families use this)."""
    names, count = kwargs.get("id2label"), kwargs.get("num_labels")
    if names is None or not isinstance(count, int) or len(names) == count:
        return kwargs
    if {int(k): str(v) for k, v in names.items()} == default_labels(len(names)):
        return {**kwargs, "id2label": None, "label2id": None}
    shown = ", ".join(str(v) for v in list(names.values())[:4]) + (", ..." if len(names) > 4 else "")
    raise ConfigError(f"num_labels={count} but id2label names {len(names)} labels ({shown}); they disagree: "
                      f"pass id2label alone (it sets num_labels) or num_labels alone (LABEL_0..LABEL_{count - 1})")


def label_changes(config: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """replace()'s changes with the labels kept consistent: a new num_labels alone drops the old
    names (as transformers' num_labels setter does), new names alone set num_labels."""
    if "num_labels" in changes and "id2label" not in changes and changes["num_labels"] != config.num_labels:
        return {**changes, "id2label": None, "label2id": None}
    if changes.get("id2label") is not None and "num_labels" not in changes:
        return {**changes, "num_labels": len(changes["id2label"])}
    return changes


def label2id_for(id2label: dict[int, str], label2id: dict[str, int] | None) -> dict[str, int]:
    """`label2id` when it maps id2label's names, else the inverse of id2label: a head given new
    labels keeps no stale map of the checkpoint's (both config families use this)."""
    if label2id is not None and set(label2id) == set(id2label.values()):
        return label2id
    return {v: k for k, v in id2label.items()}


# What a saved config.json says about where it came from: written by bertkit (this version), not
# the source model's name and transformers version, which describe another file.
SOURCE_KEYS = ("_name_or_path", "transformers_version")
WRITER_KEY = "bertkit_version"
try:
    BERTKIT_VERSION = importlib.metadata.version("bertkit")
except importlib.metadata.PackageNotFoundError:  # a checkout on PYTHONPATH that was never installed
    BERTKIT_VERSION = "unknown"


# transformers' config dicts hold keys bertkit has no field for (transformers_version, dtype /
# torch_dtype, use_cache, ...): `BertConfig(**hf_config.to_dict())` keeps them in `extra`, as
# `from_dict` does, instead of failing on the first one.
_dataclass_init = BertConfig.__init__


@functools.wraps(_dataclass_init)  # keeps the dataclass's signature for help() and inspect
def _init_keeping_unknown_keys(self, *args: Any, **kwargs: Any) -> None:
    known = {f.name for f in dataclasses.fields(BertConfig)}
    unknown = {k: kwargs.pop(k) for k in list(kwargs) if k not in known}
    if unknown:
        kwargs["extra"] = {**kwargs.get("extra", {}), **unknown}
    _dataclass_init(self, *args, **labels_agree(kwargs))


BertConfig.__init__ = _init_keeping_unknown_keys  # type: ignore[method-assign]

# The variant switches (fields after `architectures`) and their defaults.
_FIELDS = [f.name for f in dataclasses.fields(BertConfig)]
_SWITCH_DEFAULTS = {f.name: f.default for f in dataclasses.fields(BertConfig)
                    if _FIELDS.index(f.name) > _FIELDS.index("architectures") and f.name != "extra"}


# Field kinds checked before any value is used: config.json is user input, and a string where
# a number belongs failed deep inside torch (or, for layer_norm_eps = -1, gave NaN silently).
# Each field's kind is read from its annotation, so a switch's new field is checked as declared.
_KINDS = {"int": "int", "int | None": "int", "float": "number", "float | None": "number", "str": "str", "bool": "bool"}
_FIELD_KINDS = {f.name: (_KINDS[f.type], f.type.endswith("| None")) for f in dataclasses.fields(BertConfig)
                if f.type in _KINDS}
PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_KIND_CHECKS = {"int": _is_int, "number": _is_number, "str": lambda v: isinstance(v, str),
                "bool": lambda v: isinstance(v, bool)}
_KIND_WORDS = {"int": "an integer", "number": "a finite number", "str": "a string", "bool": "true or false"}


def _check_model_type(model_type: Any) -> None:
    """A config.json of another architecture (GPT-2, T5, ...) is named as such, not by the first of its
    fields that BERT reads differently."""
    if model_type not in MODEL_TYPES:
        raise ConfigError(f"model_type {model_type!r} is not supported; use one of {MODEL_TYPES} "
                          "(it selects the variant switches and the checkpoint key names); bertkit runs "
                          "BERT-family encoders: a checkpoint of another architecture cannot be loaded by "
                          "changing its config.json")


def _check_types(config: BertConfig) -> None:
    """Every field of the kind it must be: one ConfigError naming the field and its value."""
    for kind in ("int", "str", "bool", "number"):  # in this order, as the messages were always reported
        for name, (field_kind, optional) in _FIELD_KINDS.items():
            value = getattr(config, name)
            if field_kind == kind and not (_KIND_CHECKS[kind](value) or (optional and value is None)):
                raise ConfigError(f"{name} must be {_KIND_WORDS[kind]}, got {value!r}; fix it in config.json")
    if not config.layer_norm_eps > 0:
        raise ConfigError(f"layer_norm_eps must be > 0 (it keeps LayerNorm from dividing by zero; BERT "
                          f"uses 1e-12), got {config.layer_norm_eps!r}")
    if config.initializer_range < 0:
        raise ConfigError(f"initializer_range is the std of the initial weights and must be >= 0 "
                          f"(BERT uses 0.02), got {config.initializer_range!r}")
    if config.classifier_dropout is not None and not 0.0 <= config.classifier_dropout < 1.0:
        raise ConfigError(f"classifier_dropout must be in [0, 1) or unset, got {config.classifier_dropout!r}")
    if config.problem_type is not None and config.problem_type not in PROBLEM_TYPES:
        raise ConfigError(f"problem_type {config.problem_type!r} is not known; use one of {PROBLEM_TYPES}")
    if config.architectures is not None and not (
            isinstance(config.architectures, list) and all(isinstance(a, str) for a in config.architectures)):
        raise ConfigError(f"architectures must be a list of class names, got {config.architectures!r}")
    if config.pos_att_type is not None and not (
            isinstance(config.pos_att_type, list) and all(isinstance(a, str) for a in config.pos_att_type)):
        raise ConfigError(f"pos_att_type must be a list such as ['p2c', 'c2p'], got {config.pos_att_type!r}")






def _check_decoder(config: BertConfig) -> None:
    """A decoder is plain BERT with absolute (or sinusoidal) positions: the switches that need every
    query position at once, or positions counted from the pad row, have no cached, causal form here."""
    if config.add_cross_attention and not config.is_decoder:
        raise ConfigError("add_cross_attention=True needs is_decoder=True: cross-attention layers belong to a "
                          "decoder (as in transformers); set is_decoder=True or drop add_cross_attention")
    if not config.is_decoder:
        return
    blocked = [name for name, on in (
        (f"model_type={config.model_type!r}", config.model_type != "bert"),
        (f"position_embedding_type={config.position_embedding_type!r}",
         config.position_embedding_type not in ("absolute", "sinusoidal")),
        ("relative_attention", config.relative_attention), ("attention_block_size", config.attention_block_size),
        ("attention_low_rank", config.attention_low_rank), ("num_experts", config.num_experts),
        ("num_hidden_groups", config.num_hidden_groups)) if on]
    if blocked:
        raise ConfigError(f"is_decoder=True runs BERT layers with absolute or sinusoidal positions; drop "
                          f"{', '.join(blocked)} for a decoder (or set is_decoder=False for an encoder)")


def memory_limit_bytes() -> int:
    """The memory this process can use: physical RAM, or the cgroup (container) limit if lower."""
    limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                value = f.read().strip()
        except OSError:
            continue
        if value.isdigit():
            limit = min(limit, int(value))
    return limit


def _check_size(config: BertConfig) -> None:
    """Refuse a config whose float32 weights alone exceed this machine's memory, before any
    allocation tries (vocab_size 1e12 asked for 256 TB; a million layers grew to bad_alloc)."""
    parts = config.parameter_estimate()
    total = sum(parts.values())
    need, have = 4 * total, memory_limit_bytes()
    if need > have:
        largest = max(parts, key=parts.get)
        raise ConfigError(
            f"this config describes about {total:,} parameters ({need / 2**30:,.1f} GiB of float32 weights, "
            f"mostly {largest}), more than this machine's {have / 2**30:,.1f} GiB of memory; check vocab_size "
            f"({config.vocab_size:,}), hidden_size ({config.hidden_size:,}), num_hidden_layers "
            f"({config.num_hidden_layers:,}) and intermediate_size ({config.intermediate_size:,})")


def _nearest_divisor(n: int, target: int) -> int:
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return min(divisors, key=lambda d: abs(d - target))


def known_and_extra(cls, data: dict[str, Any]) -> dict[str, Any]:
    """A config dataclass's keyword arguments from a config.json dict: its own fields, and every
    other key (transformers_version, architectures of other tools, ...) kept in `extra`, except
    bertkit's version (WRITER_KEY), which says who wrote the file and is written anew on save."""
    known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    names = data.get("id2label")
    if isinstance(names, dict) and data.get("num_labels") not in (None, len(names)):
        # A file's names win over its count, as transformers derives num_labels from id2label.
        data = {k: v for k, v in data.items() if k != "num_labels"}
    return {**{k: v for k, v in data.items() if k in known},
            "extra": {k: v for k, v in data.items() if k not in known and k != WRITER_KEY}}
