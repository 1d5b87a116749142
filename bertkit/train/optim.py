"""AdamW with BERT's parameter groups and layer-wise learning-rate decay (LLRD).

Weight decay: AdamW applies  w <- w - lr * (m_hat / (sqrt(v_hat) + eps) + wd * w).  Decaying
biases and LayerNorm gains toward 0 has no regularising purpose (they do not scale with the
input), so, as in the original BERT code, they get wd = 0; every other weight gets `weight_decay`.

LLRD (Howard & Ruder 2018; Clark et al. 2020): lower layers hold general features, so when
fine-tuning they move less. With L encoder layers (any family's: BERT's `encoder.layer.N`, another
family's `layers.N`), numbered 1..L bottom to top, and the embeddings as layer 0,

    lr(layer i) = lr * decay ** (L - i)

so the top layer trains at the full `lr`, the embeddings at lr * decay**L, and everything above
the encoder (pooler and task heads, including the MLM transform and bias) also at the full `lr`.
The MLM decoder is tied to the word embeddings, so it is one parameter at the embeddings' lr.

A separate head learning rate (`head_lr`) gives every parameter outside the encoder backbone
(the task head: names not under the model's `base_model_prefix`) its own lr: a freshly
initialised head on a small pre-trained encoder often wants a larger step than the encoder. A
model whose head is not one subtree names it itself with `is_head_parameter(name)` (BERT2BERT:
the cross-attention layers and the LM head that the warm start adds to the two BERTs).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.families import families

def _layer_names() -> re.Pattern:
    """Names inside a transformer layer of any family (its `layer_modules`: BERT's `encoder.layer.N`,
    another's `layers.N`), N captured. BERT's alone left every layer of the other family at the full
    lr under train.llrd, only the embeddings decayed (walk V)."""
    return re.compile(r"(?:^|\.)(?:" + "|".join(f"(?:{family.layer_modules})" for family in families()) + r")\.")


def layer_index(name: str, num_layers: int) -> int:
    """Depth of a parameter: 0 for embeddings, i + 1 for layer i, L for heads/pooler.

    Heads sit at depth L so that `decay ** (L - depth)` gives them the full learning rate.
    """
    match = _layer_names().search(name)
    if match:
        return int(re.search(r"(\d+)\.$", match.group(0)).group(1)) + 1
    if name.startswith("embeddings.") or ".embeddings." in name:
        return 0
    return num_layers


def _no_decay_names(model: nn.Module) -> set[str]:
    """Names of biases and of every LayerNorm's parameters (found by module type, not name)."""
    names = set()
    for module_name, module in model.named_modules():
        for param_name, _ in module.named_parameters(recurse=False):
            full = f"{module_name}.{param_name}" if module_name else param_name
            if param_name == "bias" or isinstance(module, nn.LayerNorm):
                names.add(full)
    return names


def head_prefix(model: nn.Module) -> str:
    """The name prefix of the encoder backbone inside a task model ("bert." for BERT heads)."""
    prefix = getattr(model, "base_model_prefix", None)
    if not prefix or not hasattr(model, prefix):
        raise ConfigError(f"{type(model).__name__} has no encoder backbone to tell its head from: a separate "
                          "head learning rate (train.head_lr) needs a task model such as "
                          "BertForSequenceClassification")
    return prefix + "."


def head_test(model: nn.Module):
    """name -> whether the parameter belongs to the task head: the model's own `is_head_parameter`
    when it has one, else every name outside the `base_model_prefix` subtree."""
    own = getattr(model, "is_head_parameter", None)
    if callable(own):
        return own
    backbone = head_prefix(model)
    return lambda name: not name.startswith(backbone)


def param_groups(model: nn.Module, lr: float, weight_decay: float = 0.01,
                 llrd: float | None = None, num_layers: int | None = None,
                 head_lr: float | None = None) -> list[dict]:
    """Parameter groups for `torch.optim.AdamW`: one per (depth, decay/no-decay, head) triple.

    Each group carries `lr`, `weight_decay` and, for inspection, `layer` (its depth) and
    `names` (its parameter names). Frozen parameters (requires_grad=False) are left out.
    """
    if llrd is not None and not 0.0 < llrd <= 1.0:
        raise ConfigError(f"llrd must be in (0, 1] (e.g. 0.8) or unset, got {llrd}")
    in_head_test = head_test(model) if head_lr is not None else None
    if num_layers is None:
        config = getattr(model, "config", None)
        num_layers = getattr(config, "num_hidden_layers", 0)
    no_decay = _no_decay_names(model)
    groups: dict[tuple[int, bool], dict] = {}
    # named_parameters() yields a tied weight once, under its first (embedding) name.
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        depth = layer_index(name, num_layers) if llrd is not None else num_layers
        decays = name not in no_decay
        in_head = in_head_test is not None and bool(in_head_test(name))
        key = (depth, decays, in_head)
        if key not in groups:
            scale = llrd ** (num_layers - depth) if llrd is not None else 1.0
            groups[key] = {"params": [], "names": [], "layer": depth,
                           "lr": head_lr if in_head else lr * scale,
                           "weight_decay": weight_decay if decays else 0.0}
        groups[key]["params"].append(param)
        groups[key]["names"].append(name)
    return [groups[k] for k in sorted(groups)]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float = 0.01,
                    llrd: float | None = None, betas: tuple[float, float] = (0.9, 0.999),
                    eps: float = 1e-6, head_lr: float | None = None) -> torch.optim.AdamW:
    """AdamW over `param_groups`; eps = 1e-6 as in BERT (1e-8 can blow up tiny-v updates)."""
    if lr <= 0:
        raise ConfigError(f"lr must be positive, got {lr}")
    if weight_decay < 0:
        raise ConfigError(f"weight_decay must be >= 0, got {weight_decay}")
    groups = param_groups(model, lr, weight_decay, llrd, head_lr=head_lr)
    if not groups:
        raise ConfigError("the model has no trainable parameters; unfreeze some before training")
    # The extra keys ("names", "layer") are kept by torch.
    settings = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
    try:  # one kernel for every parameter: 1.19x on the mini MLM step (docs/benchmarks.md)
        return torch.optim.AdamW(groups, fused=True, **settings)
    except RuntimeError:  # this torch has no fused kernel for the parameters' device: the per-tensor loop
        return torch.optim.AdamW(groups, **settings)


def is_fused(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `optimizer` updates with torch's fused kernel (which can skip an update on the device)."""
    return bool(optimizer.defaults.get("fused"))


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """`optimizer.load_state_dict(state)`, keeping the kernel this optimizer was built with.

    torch restores the saved groups' `fused` and `foreach` flags with the state, so a checkpoint
    written with the per-tensor loop (or on a device with another kernel) would switch the kernel
    silently. The step counts move to where the kernel keeps them: the parameter's device for the
    fused one, the CPU for the loop."""
    kernel = {key: optimizer.defaults.get(key) for key in ("fused", "foreach")}
    optimizer.load_state_dict(state)
    for group in optimizer.param_groups:
        group.update(kernel)
        for param in group["params"]:
            moments = optimizer.state.get(param, {})
            if torch.is_tensor(moments.get("step")):
                where = param.device if kernel["fused"] else torch.device("cpu")
                moments["step"] = moments["step"].to(device=where, dtype=torch.float32)


def step_unless_non_finite(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """`optimizer.step()`, skipped where `loss` is not finite, decided on the device: the host
    need not read the loss (and wait for the GPU) before the update. The fused kernel takes a
    `found_inf` flag for this (the protocol torch's GradScaler uses): nonzero leaves the weights,
    moments and step counts as they were."""
    optimizer.found_inf = (~torch.isfinite(loss)).float()
    try:
        optimizer.step()
    finally:
        del optimizer.found_inf
