"""sentence-transformers' directory layout: which pooling, whether to normalise, prompts, length.

A sentence-transformers model directory lists its modules in order in `modules.json`:

    [{"idx": 0, "name": "0", "path": "",           "type": "sentence_transformers.models.Transformer"},
     {"idx": 1, "name": "1", "path": "1_Pooling",   "type": "sentence_transformers.models.Pooling"},
     {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]

The Transformer module's directory holds an ordinary Hugging Face checkpoint and tokenizer
(plus `sentence_bert_config.json` with `max_seq_length` and `do_lower_case`); the Pooling module's
`config.json` names the pooling, either as `"pooling_mode": "cls"` (a list for several,
concatenated) or, as sentence-transformers before 6 wrote it, as booleans
`pooling_mode_cls_token`, `pooling_mode_mean_tokens`, ...; `include_prompt: false` leaves the
prompt's tokens out of the pooling. `config_sentence_transformers.json` holds named prompts.
Both type spellings (`sentence_transformers.models.Pooling` and 6.x's
`sentence_transformers.sentence_transformer.modules.pooling.Pooling`) are read; bertkit writes the
old spelling, which every sentence-transformers version since 2 reads.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from bertkit.errors import CheckpointError
from bertkit.io import atomic_write_json

# Pooling modes, in the order sentence-transformers concatenates its legacy boolean flags.
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
LEGACY_FLAGS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
MODULES = "modules.json"
DEFAULT_MAX_LENGTH = 256  # without a layout: all-MiniLM-L6-v2's max_seq_length


@dataclass
class SentenceLayout:
    """How token states become one vector (what a sentence-transformers directory says).

    pooling         modes from POOLING_MODES; several are concatenated in this order
    include_prompt  False: a prompt's tokens (all but the prompt's trailing [SEP]) are left out
    normalize       L2-normalise the pooled vector (a Normalize module)
    max_seq_length  truncation length in tokens; None: the tokenizer's model_max_length
    do_lower_case   lowercase the text first (old sentence-transformers models)
    prompts         named prompts put in front of the text (encode(prompt_name=...))
    """

    pooling: tuple[str, ...] = ("mean",)
    include_prompt: bool = True
    normalize: bool = True
    max_seq_length: int | None = DEFAULT_MAX_LENGTH
    do_lower_case: bool = False
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    transformer_path: str = ""  # the Transformer module's folder, relative to the directory

    def __post_init__(self) -> None:
        self.pooling = (self.pooling,) if isinstance(self.pooling, str) else tuple(self.pooling)
        unknown = [m for m in self.pooling if m not in POOLING_MODES]
        if unknown or not self.pooling:
            raise CheckpointError(f"pooling {list(self.pooling)} is not known; use one or more of {POOLING_MODES}")
        if self.default_prompt_name is not None and self.default_prompt_name not in self.prompts:
            raise CheckpointError(f"default_prompt_name {self.default_prompt_name!r} is not one of the "
                                  f"prompts {sorted(self.prompts)}")


def _read_json(path: str) -> dict | list:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"cannot read {path} ({e}); restore it from the original model") from None


def has_layout(directory) -> bool:
    return os.path.isfile(os.path.join(os.fspath(directory), MODULES))


def read_layout(directory) -> SentenceLayout:
    """The layout of a model directory: sentence-transformers' files when it has modules.json,
    else mean pooling + L2 normalisation over a plain Hugging Face checkpoint."""
    directory = os.fspath(directory)
    if not has_layout(directory):
        return SentenceLayout()
    modules = _read_json(os.path.join(directory, MODULES))
    if not isinstance(modules, list):
        raise CheckpointError(f"{directory}/{MODULES} must be a JSON list of modules")
    kinds = [(str(m.get("type", "")).rsplit(".", 1)[-1], m.get("path", "")) for m in modules]
    unsupported = [name for name, _ in kinds if name not in ("Transformer", "Pooling", "Normalize")]
    if unsupported or not kinds or kinds[0][0] != "Transformer" or "Pooling" not in [k for k, _ in kinds]:
        raise CheckpointError(
            f"{directory}/{MODULES} lists modules {[k for k, _ in kinds]}; bertkit's SentenceEncoder runs "
            "Transformer, Pooling and an optional Normalize (no Dense or other modules): load this "
            "model with sentence-transformers")
    values: dict = {"transformer_path": kinds[0][1], "normalize": "Normalize" in [k for k, _ in kinds]}
    pooling_path = os.path.join(directory, dict((k, p) for k, p in kinds)["Pooling"], "config.json")
    values.update(_read_pooling(pooling_path))
    bert_config = os.path.join(directory, kinds[0][1], "sentence_bert_config.json")
    if os.path.isfile(bert_config):
        config = _read_json(bert_config)
        values["max_seq_length"] = config.get("max_seq_length")
        values["do_lower_case"] = bool(config.get("do_lower_case", False))
    else:
        values["max_seq_length"] = None
    st_config = os.path.join(directory, "config_sentence_transformers.json")
    if os.path.isfile(st_config):
        config = _read_json(st_config)
        values["prompts"] = {str(k): str(v) for k, v in (config.get("prompts") or {}).items()}
        values["default_prompt_name"] = config.get("default_prompt_name")
    return SentenceLayout(**values)


def _read_pooling(path: str) -> dict:
    if not os.path.isfile(path):
        return {}  # sentence-transformers' default: mean pooling
    config = _read_json(path)
    if "pooling_mode" in config:
        modes = config["pooling_mode"]
    else:
        modes = tuple(mode for key, mode in LEGACY_FLAGS.items() if config.get(key)) or ("mean",)
    return {"pooling": modes, "include_prompt": bool(config.get("include_prompt", True))}


def write_layout(directory, layout: SentenceLayout, hidden_size: int) -> None:
    """modules.json, 1_Pooling/config.json, sentence_bert_config.json and
    config_sentence_transformers.json next to a saved checkpoint (the Transformer module at "")."""
    directory = os.fspath(directory)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if layout.normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(directory, "2_Normalize"), exist_ok=True)  # Normalize has no settings
    atomic_write_json(os.path.join(directory, MODULES), modules)
    in_legacy_order = list(layout.pooling) == [m for m in POOLING_MODES if m in layout.pooling]
    if in_legacy_order:  # the boolean flags every sentence-transformers version reads
        pooling = {"word_embedding_dimension": hidden_size,
                   **{key: mode in layout.pooling for key, mode in LEGACY_FLAGS.items()}}
    else:  # an order the flags cannot say: sentence-transformers >= 6's key
        pooling = {"embedding_dimension": hidden_size, "pooling_mode": list(layout.pooling)}
    pooling["include_prompt"] = layout.include_prompt
    atomic_write_json(os.path.join(directory, "1_Pooling", "config.json"), pooling)
    bert_config = {"do_lower_case": layout.do_lower_case}
    if layout.max_seq_length is not None:
        bert_config["max_seq_length"] = layout.max_seq_length
    atomic_write_json(os.path.join(directory, "sentence_bert_config.json"), bert_config)
    atomic_write_json(os.path.join(directory, "config_sentence_transformers.json"), {
        "prompts": layout.prompts, "default_prompt_name": layout.default_prompt_name,
        "similarity_fn_name": "cosine"})
