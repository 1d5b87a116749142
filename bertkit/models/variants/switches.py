"""The BERT family's switches: each validates its own config fields, and may add an effect.

`BertConfig.validate` checks what every BERT-family config shares, then asks each switch in
`SWITCHES`. A built-in switch's code is its module in this folder (its `validate(config)` is
named here); its effect is wired into the encoder where it acts. A new switch is one module
that calls `register_switch`:

    def validate(config):                   # ConfigError with what to change
        if switch_value(config, "embedding_scale") <= 0: raise ConfigError(...)

    def scale_embeddings(model, config):    # the effect, on each BertModel built
        ...

    register_switch(Switch("embedding_scale", validate, fields={"embedding_scale": 1.0},
                           build=scale_embeddings))

Its fields are keyword arguments of BertConfig (and `[model]` keys of a pre-training recipe); a
dataclass has no room for them, so they live in `config.extra` and round-trip through config.json
as any key transformers does not know. Read them with `switch_value`.

The validators take the config without importing its class: this table is what config.py
imports, so the switch modules must not import config.py back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.variants import albert, deberta, linformer, moe, relative, roberta, sinusoidal, sparse, t5_bias
from bertkit.models.variants.t5_bias import T5_BIAS


def _no(config: Any) -> bool:
    return False


@dataclass(frozen=True)
class Switch:
    """name               what messages call it
    validate           config -> None, raising ConfigError naming the field and what to set
    fields             new config fields this switch adds, name -> default (built-in switches'
                       fields are BertConfig's own and are not listed)
    build              (BertModel, config) -> None: its effect on each encoder built, when it is on
                       (a field away from its default); built-in switches act inside the encoder
    needs_every_query  config -> True when a layer's output at one position depends on the other
                       query positions (the last layer then cannot run on the head's positions only)
    may_skip_parameters config -> True when a training step may leave a parameter without a
                       gradient (DDP must look for unused parameters)"""

    name: str
    validate: Callable[[Any], None]
    fields: dict[str, Any] = field(default_factory=dict)
    build: Callable[[nn.Module, Any], None] | None = None
    needs_every_query: Callable[[Any], bool] = _no
    may_skip_parameters: Callable[[Any], bool] = _no

    def is_on(self, config: Any) -> bool:
        return any(switch_value(config, name) != default for name, default in self.fields.items())


# In the order their errors are reported.
SWITCHES: list[Switch] = [
    # relative scores depend on the query's position among all; the absolute table they leave
    # unused is kept for checkpoint compatibility
    Switch("relative positions", lambda config: None, needs_every_query=relative.is_on,
           may_skip_parameters=relative.is_on),
    Switch("sinusoidal positions", sinusoidal.validate),
    Switch("T5 bias", t5_bias.validate, needs_every_query=lambda config: config.position_embedding_type == T5_BIAS),
    Switch("RoBERTa positions", roberta.validate),
    Switch("factorised embeddings and shared layers (ALBERT)", albert.validate),
    Switch("disentangled attention (DeBERTa)", deberta.validate,
           needs_every_query=lambda config: config.relative_attention),
    Switch("block-sparse attention", sparse.validate,
           needs_every_query=lambda config: config.attention_block_size is not None),
    Switch("low-rank attention (Linformer)", linformer.validate),
    # routing is data-dependent (and capacity counts every token): an expert may get no token
    Switch("mixture of experts", moe.validate, needs_every_query=lambda config: bool(config.num_experts),
           may_skip_parameters=lambda config: bool(config.num_experts)),
]


def register_switch(switch: Switch) -> None:
    """Add a switch (its fields become config keys); a field another switch owns is refused."""
    owned = {name for s in SWITCHES for name in s.fields}
    taken = sorted(set(switch.fields) & owned)
    if taken:
        raise ConfigError(f"switch {switch.name!r}: field {taken[0]!r} already belongs to another switch; "
                          "name the new switch's fields differently")
    if any(s.name == switch.name for s in SWITCHES):
        raise ConfigError(f"a switch named {switch.name!r} is already registered")
    SWITCHES.append(switch)


def switch_fields() -> dict[str, Any]:
    """Every registered switch's own fields, name -> default."""
    return {name: default for s in SWITCHES for name, default in s.fields.items()}


def switch_value(config: Any, name: str) -> Any:
    """A registered switch's field of `config` (kept in config.extra), or its default."""
    defaults = switch_fields()
    if name not in defaults:
        raise ConfigError(f"{name!r} is not a field of any registered switch; register its switch first")
    return config.extra.get(name, defaults[name])


def validate_switches(config: Any) -> None:
    for switch in SWITCHES:
        switch.validate(config)


def needs_every_query(config: Any) -> bool:
    return any(switch.needs_every_query(config) for switch in SWITCHES)


def may_skip_parameters(config: Any) -> bool:
    return any(switch.may_skip_parameters(config) for switch in SWITCHES)


def build_switches(model: nn.Module, config: Any) -> None:
    """Apply the effect of every registered switch that is on to a newly built encoder."""
    for switch in SWITCHES:
        if switch.build is not None and switch.is_on(config):
            switch.build(model, config)
