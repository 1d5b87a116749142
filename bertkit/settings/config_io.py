"""Recipe configs in TOML: strict section/key checks with suggestions, and `--set` overrides.

A recipe config is a TOML file of sections (`[model]`, `[data]`, `[train]`, ...). A typo must
not silently fall back to a default, so every key is checked against the fields the recipe
knows, and an unknown one is reported with the closest valid spelling
(`train.max_step` -> "did you mean train.max_steps?").

transformers' TrainingArguments names are read as bertkit's keys where they mean the same
(`train.learning_rate` is `train.lr`) and refused with the right name where they do not
(hf_names.py holds the table).

`--set section.key=value` overrides one value; the value is parsed as a TOML literal
(`3e-4`, `true`, `"cosine"`, `[1, 2]`), and a bare word that is not valid TOML is taken as a
string, so `--set data.corpus=bbc` works without shell-quoting the quotes.

Every value is checked against its field's type before the dataclass sees it (`check_types`):
`train.seed=abc` or `train.eval_every=true` is one line naming the key, the value and the type
wanted, never a TypeError from deep inside the run or `true` read as 1. Ranges are each
dataclass's own `__post_init__`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import sys
import tomllib
import types
import typing
from typing import Any, Iterable, Union

from bertkit.errors import ConfigError
from bertkit.settings import hf_names
def suggest(name: str, valid: Iterable[str], prefix: str = "") -> str:
    """"did you mean PREFIX.X?" for the valid name nearest to `name` (difflib's ratio), however far:
    one name to try reads better than the whole list."""
    valid = sorted(valid)
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.0)
    if close:
        return f"did you mean {prefix}{close[0]}?"
    return "this section takes no keys"


def check_keys(values: dict, valid: Iterable[str], section: str) -> None:
    """Raise ConfigError naming the first key of `values` that is not in `valid`."""
    valid = set(valid)
    for key in values:
        if key not in valid:
            raise ConfigError(unknown_key_message(key, valid, section))


# Keys a user tries in any section that are no recipe setting: why, and what sets them instead.
_THREADS = ("threads are the process's; use --threads N on the command line; from Python, "
            "torch.set_num_threads(N) before the call")
NOT_SETTINGS = {"threads": _THREADS, "num_threads": _THREADS}


def unknown_key_message(key: str, valid: set, section: str) -> str:
    """What to say about `section.key`: what sets it when it is no setting at all (NOT_SETTINGS:
    train.threads was "did you mean train.head_lr?", walk AE), transformers' name for a key
    (hf_names.py), else the nearest valid key."""
    if key in NOT_SETTINGS and key not in valid:
        return f"{section}.{key} is not a recipe setting: {NOT_SETTINGS[key]}"
    if section == hf_names.SECTION:
        target, refused = hf_names.alias_of(key), hf_names.refusal(key)
        if refused:
            return refused
        if target:  # an alias of a key this recipe lacks (num_train_epochs when pre-training)
            instead = hf_names.INSTEAD.get(target)
            return (f"train.{key} is transformers' name for train.{target}, which this recipe does not take; "
                    + (f"use {instead}" if instead else suggest(target, valid, section + ".")))
        if key in hf_names.INSTEAD:  # a bertkit key of other recipes (train.epochs when pre-training)
            return f"train.{key} is not a key of this recipe; use {hf_names.INSTEAD[key]}"
        return f"unknown key {section}.{key}; {suggest_train_key(key, valid)}"
    return f"unknown key {section}.{key}; {suggest(key, valid, section + '.')}"


def suggest_train_key(key: str, valid: set) -> str:
    """`suggest` over the [train] keys and transformers' names for them: train.lerning_rate is nearest
    train.learning_rate (train.lr), not train.min_steps."""
    aliases = {alias: target for alias, target in hf_names.ALIASES.items() if target in valid}
    close = difflib.get_close_matches(key, sorted({*valid, *aliases}), n=1, cutoff=0.0)
    if close and close[0] in aliases:
        return f"did you mean train.{close[0]} (transformers' name for train.{aliases[close[0]]})?"
    return suggest(key, valid, "train.")


def bertkit_names(values: dict, valid: Iterable[str], section: str) -> dict:
    """`values` with transformers' TrainingArguments names (hf_names.ALIASES) renamed to bertkit's
    keys where this section takes that key; other keys unchanged (check_keys judges them)."""
    if section != hf_names.SECTION:
        return dict(values)
    valid = set(valid)
    out: dict = {}
    given_as: dict[str, str] = {}
    for key, value in values.items():
        target = hf_names.alias_of(key)
        name = target if key not in valid and target in valid else key
        if name in out:
            raise ConfigError(f"train.{name} is given twice, as train.{given_as[name]} and as train.{key} "
                              "(transformers' name for it); keep one")
        out[name], given_as[name] = value, key
    return out


# What a field's annotation accepts, as a phrase for the error. An int is a float too; a bool is
# neither (`eval_every = true` is a mistake, not 1).
_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
          dict: "a table", type(None): ""}


def _kinds(annotation) -> tuple | None:
    """The plain types an annotation allows (int, str | None, list | str, ...), or None when it
    is anything else (such a field is left to its dataclass)."""
    if annotation in _KINDS:
        return (annotation,)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_kinds(a) for a in typing.get_args(annotation)]
        return None if None in parts else tuple(k for part in parts for k in part)
    return (origin,) if origin in _KINDS else None


def _fits(value, kinds: tuple) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int) and float in kinds:
        return True
    return any(isinstance(value, k) for k in kinds if k is not bool)


def check_types(cls, values: dict, section: str) -> None:
    """Raise ConfigError for the first value whose type its field does not allow."""
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation this module cannot resolve: the dataclass checks
        return
    for key, value in values.items():
        kinds = _kinds(hints.get(key))
        if kinds is None or _fits(value, kinds):
            continue
        wanted = " or ".join(_KINDS[k] for k in kinds if _KINDS[k])
        quoted = kinds == (str,) and not isinstance(value, str)
        hint = f' (quote it: {section}.{key}=\'"{value}"\')' if quoted else ""
        raise ConfigError(f"{section}.{key} must be {wanted}, got {value!r}{hint}")


def dataclass_from_dict(cls, values: dict, section: str):
    """Build dataclass `cls` from a TOML table, rejecting unknown keys with a suggestion and
    values of the wrong type with the type wanted."""
    names = [f.name for f in dataclasses.fields(cls)]
    values = bertkit_names(values, names, section)
    check_keys(values, names, section)
    check_types(cls, values, section)
    try:
        return cls(**values)
    except TypeError as e:  # e.g. a wrong value type the dataclass could not take
        raise ConfigError(f"[{section}] {e}") from None


# bertkit's own recipes (configs/ beside the package in a source checkout, which setup.sh installs)
BUILT_IN_CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "configs")


def find_config(path: str) -> str:
    """`path`, or bertkit's own recipe of that name when the README's `configs/NAME.toml` is given
    from another folder (said on stderr); ConfigError naming both places when neither exists."""
    if os.path.exists(path):
        return path
    built_in = os.path.join(BUILT_IN_CONFIGS, os.path.basename(path))
    if not os.path.isabs(path) and os.path.dirname(os.path.normpath(path)) == "configs" and os.path.isfile(built_in):
        print(f"bertkit: no {path} under {os.getcwd()}; reading bertkit's own {built_in}", file=sys.stderr)
        return built_in
    shipped = sorted(f for f in os.listdir(BUILT_IN_CONFIGS) if f.endswith(".toml")) if os.path.isdir(BUILT_IN_CONFIGS) else []
    where = f"bertkit's own are in {BUILT_IN_CONFIGS} ({', '.join(shipped[:4])}, ...)" if shipped else \
        "e.g. configs/pretrain-tiny.toml of bertkit's source"
    raise ConfigError(f"config file {path} does not exist; pass --config with a TOML file: {where}")


def load_toml(path: str) -> dict:
    path = find_config(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None


def parse_value(text: str) -> Any:
    """A TOML literal (number, bool, string, array, inline table); a bare word is a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


# One override: `--set` text ("train.lr=3e-4", parsed as a TOML literal), or a (section.key, value)
# pair whose value a typed command-line option (--seed, --device, --peft) has already made: taken as is.
Override = Union[str, tuple[str, Any]]


def split_override(item: Override) -> tuple[str, Any]:
    """(section.key, value) of one override; text is checked for its `=` and parsed here, once."""
    if not isinstance(item, str):
        return item
    if "=" not in item or "." not in item.split("=", 1)[0]:
        raise ConfigError(f"--set expects section.key=value (e.g. train.lr=3e-4), got {item!r}")
    dotted, raw = item.split("=", 1)
    return dotted.strip(), parse_value(raw.strip())


def apply_overrides(config: dict, assignments: Iterable[Override], sections: dict[str, Iterable[str]]
                    ) -> dict:
    """Apply overrides (`section.key=value` strings or typed pairs) to a nested config dict
    (returns a new dict).

    `sections` maps each valid section to its valid keys, so a typo in `--set` is caught with
    the same suggestion as a typo in the file.
    """
    out = {k: bertkit_names(v, sections.get(k, ()), k) if isinstance(v, dict) else v for k, v in config.items()}
    for item in assignments:
        dotted, value = split_override(item)
        section, key = dotted.split(".", 1)
        if section not in sections:
            raise ConfigError(f"unknown section [{section}] in --set {dotted}; {suggest(section, sections)}")
        key = next(iter(bertkit_names({key: None}, sections[section], section)))
        check_keys({key: None}, sections[section], section)
        out.setdefault(section, {})[key] = value
    return out
