"""Knowledge distillation (Hinton et al. 2015; DistilBERT, Sanh et al. 2019).

The student learns from the labels and from the teacher's softened distribution:

    loss = alpha * CE(s, y) + (1 - alpha) * T^2 * KL(softmax(t / T) || softmax(s / T))
           + cosine_weight * mean_tokens(1 - cos(h_s, h_t))

s, t are the student's and teacher's logits (classification: one row per example; MLM: one row
per masked position), T the temperature (T^2 keeps the soft term's gradients on the scale of the
hard one), h the last hidden states at real tokens (needs equal widths). The KL runs from the
teacher's distribution to the student's, as in Hinton et al. and DistilBERT's
KLDivLoss(log_softmax(s/T), softmax(t/T)): the student must cover everything the teacher finds
likely. Without labels the CE term is left out.

`student_from_teacher` builds DistilBERT's initialisation: the same architecture with fewer
layers, each student layer copied from every other teacher layer (0, 2, 4, ...), embeddings and
heads copied as they are. `Distiller` wraps student + teacher into one model a Trainer can run:
`loss` is the distillation loss, and only the student is trained, saved and restored. The task
recipe that uses them is `bertkit/recipes/distill.py`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import ConfigError
from bertkit.models.encoder import ModelOutput


@dataclass
class DistillationOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # the student's
    ce_loss: torch.Tensor | None = None
    kd_loss: torch.Tensor | None = None  # T^2 * KL, before the (1 - alpha) weight
    cosine_loss: torch.Tensor | None = None


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                      labels: torch.Tensor | None = None, alpha: float = 0.5, temperature: float = 2.0,
                      student_hidden: torch.Tensor | None = None, teacher_hidden: torch.Tensor | None = None,
                      hidden_mask: torch.Tensor | None = None, cosine_weight: float = 0.0
                      ) -> DistillationOutput:
    """The loss above. Logits (rows, classes); labels (rows,) with -100 = no label; hidden (B, T, H)."""
    if student_logits.shape != teacher_logits.shape:
        raise ConfigError(f"student logits {tuple(student_logits.shape)} and teacher logits "
                          f"{tuple(teacher_logits.shape)} differ: both models need the same head and labels")
    if not 0.0 <= alpha <= 1.0 or temperature <= 0:
        raise ConfigError(f"alpha must be in [0, 1] and temperature > 0, got alpha={alpha}, T={temperature}")
    s = student_logits.reshape(-1, student_logits.shape[-1]).float()
    t = teacher_logits.reshape(-1, teacher_logits.shape[-1]).float().detach()
    kd = F.kl_div(F.log_softmax(s / temperature, dim=-1), F.log_softmax(t / temperature, dim=-1),
                  reduction="batchmean", log_target=True) * temperature ** 2
    loss = (1.0 - alpha) * kd
    ce = None
    if labels is not None:
        ce = F.cross_entropy(s, labels.reshape(-1), ignore_index=IGNORE_INDEX)
        loss = loss + alpha * ce
    cosine = None
    if cosine_weight:
        if student_hidden is None or teacher_hidden is None:
            raise ConfigError("cosine_weight > 0 needs the student's and teacher's hidden states")
        if student_hidden.shape[-1] != teacher_hidden.shape[-1]:
            raise ConfigError(f"the hidden-state cosine loss needs equal widths (student "
                              f"{student_hidden.shape[-1]}, teacher {teacher_hidden.shape[-1]}); set cosine_weight=0")
        real = (hidden_mask.bool() if hidden_mask is not None
                else torch.ones(student_hidden.shape[:-1], dtype=torch.bool, device=student_hidden.device))
        cos = F.cosine_similarity(student_hidden[real].float(), teacher_hidden[real].float().detach(), dim=-1)
        cosine = (1.0 - cos).mean()
        loss = loss + cosine_weight * cosine
    return DistillationOutput(loss, student_logits, ce, kd, cosine)


def every_other_layer(teacher_layers: int, student_layers: int | None = None) -> list[int]:
    """DistilBERT's choice: teacher layers 0, 2, 4, ... (half as many unless told)."""
    student_layers = student_layers or max(1, teacher_layers // 2)
    chosen = list(range(0, teacher_layers, 2))[:student_layers]
    if len(chosen) < student_layers:
        # "pass layer_map" named the Python argument, not the command's --layer-map, and no limit
        example = ",".join(str(i) for i in range(min(student_layers, teacher_layers)))
        raise ConfigError(f"cannot take {student_layers} layers from every other of the teacher's "
                          f"{teacher_layers} (at most {len(chosen)}): give a smaller --layers, or name the teacher "
                          f"layers with --layer-map (Python: layer_map=), e.g. {example}")
    return chosen


def student_from_teacher(teacher: nn.Module, num_layers: int | None = None,
                         layer_map: list[int] | None = None) -> nn.Module:
    """A model of the teacher's class with fewer layers; student layer i = teacher layer layer_map[i].
    Any family whose layers sit under `...layer.N` (BERT's encoder.layer) or `...layers.N`."""
    config = teacher.config
    if getattr(config, "shares_layers", False):
        raise ConfigError("the teacher shares its layers (ALBERT): there are no separate layers to pick; "
                          "distil into a student with num_hidden_groups set instead")
    layer_map = layer_map or every_other_layer(config.num_hidden_layers, num_layers)
    if any(not 0 <= i < config.num_hidden_layers for i in layer_map):
        raise ConfigError(f"layer_map {layer_map} names layers the teacher ({config.num_hidden_layers} "
                          "layers) does not have")
    warn_if_attention_kinds_move(config, layer_map)
    student = type(teacher)(config.replace(num_hidden_layers=len(layer_map)))
    source = teacher.state_dict()
    state = {}
    for key in student.state_dict():
        parts = key.split(".")
        at = _layer_index_position(parts)
        if at is not None:
            parts[at] = str(layer_map[int(parts[at])])
        state[key] = source[".".join(parts)].clone()
    student.load_state_dict(state)
    return student


def _layer_index_position(parts: list[str]) -> int | None:
    """Where a state-dict key's layer number is: after the first "layer" / "layers" part
    followed by a number (encoder.layer.3..., model.layers.3...); None outside the layers."""
    for i, part in enumerate(parts[:-1]):
        if part in ("layer", "layers") and parts[i + 1].isdigit():
            return i + 1
    return None


def warn_if_attention_kinds_move(config, layer_map: list[int]) -> None:
    """A model that alternates global and sliding-window attention by layer number (every n-th
    layer global): a student layer whose position gives the other kind than its teacher layer had
    runs the teacher's weights on another attention span."""
    every = getattr(config, "global_attn_every_n_layers", None)
    if not every:
        return
    moved = [(i, t) for i, t in enumerate(layer_map) if (i % every == 0) != (t % every == 0)]
    if moved:
        i, t = moved[0]
        kinds = ("global", "sliding-window")
        warnings.warn(f"student layer {i} runs {kinds[i % every != 0]} attention where teacher layer {t} ran "
                      f"{kinds[t % every != 0]} ({len(moved)} such layers); a layer map of every "
                      f"{every}-th-aligned layers (e.g. every other layer from 0) keeps each layer's kind")


class Distiller(nn.Module):
    """student + frozen teacher; forward(**batch) -> DistillationOutput with the distillation loss.

    Only the student is a submodule: the optimizer sees only its parameters, and `state_dict`,
    `load_state_dict`, `save_pretrained` and `config` are the student's, so checkpoints (and a
    Trainer's resume) hold the plain student model.
    """

    def __init__(self, student: nn.Module, teacher: nn.Module, alpha: float = 0.5,
                 temperature: float = 2.0, cosine_weight: float = 0.0):
        super().__init__()
        self.student = student
        self.__dict__["teacher"] = teacher.eval().requires_grad_(False)  # not a submodule
        self.alpha, self.temperature, self.cosine_weight = alpha, temperature, cosine_weight
        self.config = student.config
        self.base_model_prefix = student.base_model_prefix

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                **kwargs: Any) -> DistillationOutput:
        want_hidden = bool(self.cosine_weight)
        s = self.student(input_ids, attention_mask, token_type_ids, labels=labels,
                         output_hidden_states=want_hidden, **kwargs)
        teacher = self.teacher
        if next(teacher.parameters()).device != input_ids.device:
            teacher.to(input_ids.device)
        with torch.no_grad():
            t = teacher(input_ids, attention_mask, token_type_ids, labels=labels,
                        output_hidden_states=want_hidden, **kwargs)
        s_logits = s.prediction_logits if hasattr(s, "prediction_logits") else s.logits
        t_logits = t.prediction_logits if hasattr(t, "prediction_logits") else t.logits
        rows = labels
        if labels is not None and labels.dim() == 2 and s_logits.dim() == 2:
            rows = labels[labels != IGNORE_INDEX]  # MLM logits exist at labelled positions only
        return distillation_loss(
            s_logits, t_logits, rows, self.alpha, self.temperature,
            s.hidden_states[-1] if want_hidden else None, t.hidden_states[-1] if want_hidden else None,
            attention_mask, self.cosine_weight)

    # the student is the model: checkpoints hold it alone
    def state_dict(self, *args, **kwargs):
        return self.student.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self.student.load_state_dict(state_dict, strict=strict, assign=assign)

    def save_pretrained(self, directory: str | os.PathLike, tokenizer: Any = None) -> None:
        self.student.save_pretrained(directory, tokenizer)

    def num_parameters(self, trainable_only: bool = False) -> int:
        return self.student.num_parameters(trainable_only)
