"""transformers' model habits on every bertkit model: the method names and signatures that code
written for `transformers.PreTrainedModel` calls (its `Trainer` among them).

    model.num_parameters(only_trainable=False, exclude_embeddings=False)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=None) / _disable()
    model.activation_checkpointing_enable(...) / _disable()     (transformers 5's names)
    model.resize_token_embeddings(new_num_tokens, pad_to_multiple_of=None)
    Model.from_pretrained(dir, dtype=... | torch_dtype=..., attn_implementation=...)

These are thin: checkpointing switches bertkit's own per-layer recomputation, resizing grows or
shrinks the one word-embedding table in place (the MLM decoder reads that table, so the tie
holds), dtypes cast after loading.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from bertkit.errors import ConfigError

# bertkit chooses its attention kernel itself (SDPA, or the explicit softmax path when the
# probabilities are asked for); both names transformers uses for those two compute the same.
ATTN_IMPLEMENTATIONS = ("sdpa", "eager")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64}


def tied_decoders(model: nn.Module, embedding: nn.Embedding) -> list[nn.Module]:
    """The modules of `model` that read `embedding`'s matrix without owning it and add a per-token
    bias: BERT's prediction head keeps the table as `word_embeddings`, the other family's
    TiedDecoder as `embeddings` (both outside the submodules, so the weight is saved once)."""
    return [m for m in model.modules()
            if any(m.__dict__.get(name) is embedding for name in ("word_embeddings", "embeddings"))
            and isinstance(getattr(m, "bias", None), nn.Parameter)]


def count_parameters(module: nn.Module, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
    """Parameters of `module` (each shared tensor once); without the nn.Embedding tables when
    `exclude_embeddings` (as transformers counts them)."""
    skip = {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding)} if exclude_embeddings else set()
    return sum(p.numel() for p in module.parameters()
               if id(p) not in skip and (p.requires_grad or not only_trainable))


def resolve_dtype(dtype: Any, torch_dtype: Any, config) -> torch.dtype | None:
    """from_pretrained's `dtype` (transformers 5) or `torch_dtype` (transformers 4): a
    torch.dtype, its name, or "auto" (the dtype recorded in config.json, else float32)."""
    if dtype is not None and torch_dtype is not None:
        raise ConfigError("pass dtype or torch_dtype (its older name), not both")
    value = dtype if dtype is not None else torch_dtype
    if value is None or isinstance(value, torch.dtype):
        return value
    if value == "auto":
        value = config.extra.get("dtype") or config.extra.get("torch_dtype") or "float32"
    name = str(value).removeprefix("torch.")
    if name not in DTYPES:
        raise ConfigError(f"dtype {value!r} is not supported; use one of {', '.join(DTYPES)} or 'auto'")
    return DTYPES[name]


def check_attn_implementation(name: str | None) -> None:
    if name is not None and name not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"attn_implementation={name!r} is not available in bertkit; use 'sdpa' or "
                          "'eager' (bertkit takes SDPA, and the explicit path when attention "
                          "probabilities are requested, either way)")


class TransformersHabits:
    """Mixed into every bertkit model (through PretrainedMixin)."""

    supports_gradient_checkpointing = True
    main_input_name = "input_ids"

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False, *,
                       trainable_only: bool | None = None) -> int:
        """Parameter count, as transformers' `num_parameters` (`trainable_only`: bertkit's
        earlier name for `only_trainable`, still read by its recipes)."""
        if trainable_only is not None:
            only_trainable = trainable_only
        return count_parameters(self, only_trainable, exclude_embeddings)

    # ------------------------------------------------------------------ checkpointing
    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs: dict | None = None,
                                      every_n_layers: int = 1, offload: bool = False) -> None:
        """Recompute each layer's activations in backward (less memory, ~30% more compute)."""
        kwargs = dict(gradient_checkpointing_kwargs or {})
        if kwargs.pop("use_reentrant", False):
            raise ConfigError("bertkit checkpoints with use_reentrant=False (torch's recommended mode); "
                              "drop use_reentrant=True")
        options = sorted(kwargs) + ["every_n_layers"] * (every_n_layers != 1) + ["offload"] * bool(offload)
        if options:
            raise ConfigError(f"bertkit recomputes every layer, in memory; it has no checkpointing "
                              f"options {options}: drop them")
        self._set_checkpointing(True)

    def gradient_checkpointing_disable(self) -> None:
        self._set_checkpointing(False)

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs: dict | None = None,
                                        every_n_layers: int = 1, offload: bool = False) -> None:
        self.gradient_checkpointing_enable(activation_checkpointing_kwargs, every_n_layers, offload)

    def activation_checkpointing_disable(self) -> None:
        self._set_checkpointing(False)

    @property
    def is_gradient_checkpointing(self) -> bool:
        return any(getattr(m, "gradient_checkpointing", False) for m in self.modules())

    is_activation_checkpointing = is_gradient_checkpointing

    def _set_checkpointing(self, enabled: bool) -> None:
        for module in self.modules():
            if hasattr(module, "gradient_checkpointing"):  # the encoder(s): BertEncoder
                module.gradient_checkpointing = enabled

    # ------------------------------------------------------------------ vocabulary size
    def resize_token_embeddings(self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None,
                                mean_resizing: bool = True) -> nn.Embedding:
        """Grow or shrink the word-embedding table to `new_num_tokens` rows (rounded up to a
        multiple of `pad_to_multiple_of`), in place: modules that read the table (the tied MLM
        decoder) keep reading it, and their per-token biases are resized with it.

        New rows start at the mean of the old ones (`mean_resizing`, as transformers: a new
        token's logit then starts near the average one, not at a random extreme), else
        N(0, initializer_range). Returns the embedding module.
        """
        embedding = self.get_input_embeddings()
        old = embedding.num_embeddings
        if new_num_tokens is None:
            new_num_tokens = old
        if pad_to_multiple_of is not None:
            if not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1:
                raise ConfigError(f"pad_to_multiple_of must be a positive integer, got {pad_to_multiple_of!r}")
            new_num_tokens = -(-new_num_tokens // pad_to_multiple_of) * pad_to_multiple_of
        if not isinstance(new_num_tokens, int) or new_num_tokens <= self.config.pad_token_id:
            raise ConfigError(f"new_num_tokens must be an integer above pad_token_id "
                              f"({self.config.pad_token_id}), got {new_num_tokens!r}")
        if new_num_tokens == old:
            return embedding
        weight = embedding.weight
        with torch.no_grad():
            rows = torch.empty(new_num_tokens, weight.shape[1], dtype=weight.dtype, device=weight.device)
            keep = min(old, new_num_tokens)
            rows[:keep] = weight[:keep]
            if new_num_tokens > old:
                if mean_resizing:
                    rows[old:] = weight.mean(0)
                else:
                    rows[old:].normal_(0.0, self.config.initializer_range)
        embedding.weight = nn.Parameter(rows, requires_grad=weight.requires_grad)
        embedding.num_embeddings = new_num_tokens
        for module in tied_decoders(self, embedding):  # their per-token biases grow with the table
            if module.bias.shape[0] == old:
                bias = module.bias
                with torch.no_grad():
                    new_bias = torch.zeros(new_num_tokens, dtype=bias.dtype, device=bias.device)
                    new_bias[:keep] = bias[:keep]
                module.bias = nn.Parameter(new_bias, requires_grad=bias.requires_grad)
        self.config.vocab_size = new_num_tokens
        return embedding
