"""TinyBERT's layer distillation (Jiao et al. 2020): a narrower, shallower student learns the
teacher's hidden states and attention maps layer by layer.

Student layers m = 1..M are matched to teacher layers g(m) (`layer_map`; TinyBERT's uniform
choice is g(m) = m * N / M for an N-layer teacher), and the embeddings to the embeddings
(g(0) = 0). With H^S_m the student's hidden states after layer m (H^S_0: the embedding output),
A_m its attention probabilities (B, h, T, T) and W a learned width projection d_S -> d_T:

    L_hidn = sum_{m=0..M} MSE(H^S_m W + b, H^T_{g(m)})         over real tokens and all d_T dims
    L_attn = sum_{m=1..M} MSE(A^S_m, A^T_{g(m)})                over real query rows, heads, keys
    L_pred = T^2 KL(softmax(z^T / T) || softmax(z^S / T))      optional, on the heads' logits
    loss   = hidden_weight * L_hidn + attention_weight * L_attn + prediction_weight * L_pred

One projection (a Linear with bias) serves every layer, as in TinyBERT's code (`fit_dense`); it
is the identity when the widths agree. The attention term needs the same number of heads.

Difference from TinyBERT: its code compares the attention *scores* before the softmax (masked
entries set to 0); bertkit's attention returns probabilities, so the MSE here is between
probability maps. Both vanish exactly when the student attends as the teacher does.

`LayerDistiller` wraps student + frozen teacher for a training loop; `loss` is the sum above.
Only the student is saved (`save_pretrained`): the projection is scaffolding for training, as
in TinyBERT. Resuming an interrupted Trainer run of a LayerDistiller is not supported (the
checkpoint would lack the projection).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.encoder import ModelOutput
from bertkit.distill.kd import distillation_loss


@dataclass
class LayerDistillationOutput(ModelOutput):
    loss: torch.Tensor
    hidden_loss: torch.Tensor
    attention_loss: torch.Tensor
    prediction_loss: torch.Tensor | None = None


def uniform_layer_map(teacher_layers: int, student_layers: int) -> list[int]:
    """TinyBERT's g(m) = m * N / M for m = 1..M: the teacher layer (1-based) each student layer learns."""
    if not 1 <= student_layers <= teacher_layers:
        raise ConfigError(f"a student of {student_layers} layers cannot be mapped onto a teacher of "
                          f"{teacher_layers}: use 1..{teacher_layers} student layers")
    return [m * teacher_layers // student_layers for m in range(1, student_layers + 1)]


def hidden_mse(student: torch.Tensor, teacher: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """MSE between (B, T, d) states at the real tokens (real: (B, T) bool), over every dimension."""
    return F.mse_loss(student[real].float(), teacher[real].float())


def attention_mse(student: torch.Tensor, teacher: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """MSE between (B, h, T, T) attention maps over the real query rows (padding rows are not
    attention anyone reads; padding keys have probability 0 in both)."""
    rows = real[:, None, :].expand(-1, student.shape[1], -1)  # (B, h, T) query rows
    return F.mse_loss(student[rows].float(), teacher[rows].float())


class LayerDistiller(nn.Module):
    """student + frozen teacher; forward(input_ids, attention_mask, ...) -> LayerDistillationOutput.

    Both are bertkit models whose outputs carry hidden_states and attentions (BertModel or a
    model with a head). `layer_map[m - 1]` is the teacher layer (1-based) for student layer m;
    default uniform. With prediction_weight > 0 both must have the same head, whose logits are
    compared at `temperature`.
    """

    def __init__(self, student: nn.Module, teacher: nn.Module, layer_map: list[int] | None = None,
                 hidden_weight: float = 1.0, attention_weight: float = 1.0, prediction_weight: float = 0.0,
                 temperature: float = 1.0):
        super().__init__()
        s, t = student.config, teacher.config
        self.layer_map = list(layer_map or uniform_layer_map(t.num_hidden_layers, s.num_hidden_layers))
        if len(self.layer_map) != s.num_hidden_layers or any(not 1 <= g <= t.num_hidden_layers for g in self.layer_map):
            raise ConfigError(f"layer_map {self.layer_map} must give one teacher layer in 1..{t.num_hidden_layers} "
                              f"for each of the student's {s.num_hidden_layers} layers")
        if attention_weight and s.num_attention_heads != t.num_attention_heads:
            raise ConfigError(f"the attention-map loss compares head by head: the student has "
                              f"{s.num_attention_heads} heads, the teacher {t.num_attention_heads}; "
                              "give the student as many heads or set attention_weight=0")
        if min(hidden_weight, attention_weight, prediction_weight) < 0 or temperature <= 0:
            raise ConfigError("the loss weights must be >= 0 and the temperature > 0")
        self.student = student
        self.__dict__["teacher"] = teacher.eval().requires_grad_(False)  # not a submodule: not trained
        # W: d_S -> d_T, learned with the student (TinyBERT's fit_dense); the identity at equal widths.
        self.projection = (nn.Linear(s.hidden_size, t.hidden_size) if s.hidden_size != t.hidden_size
                           else nn.Identity())
        self.hidden_weight, self.attention_weight = hidden_weight, attention_weight
        self.prediction_weight, self.temperature = prediction_weight, temperature
        self.config = s

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, **kwargs: Any) -> LayerDistillationOutput:
        teacher = self.teacher
        if next(teacher.parameters()).device != input_ids.device:
            teacher.to(input_ids.device)
        want = dict(output_hidden_states=True, output_attentions=bool(self.attention_weight))
        s = self.student(input_ids, attention_mask, token_type_ids, **want, **kwargs)
        with torch.no_grad():
            t = teacher(input_ids, attention_mask, token_type_ids, **want, **kwargs)
        real = (attention_mask.bool() if attention_mask is not None
                else torch.ones(input_ids.shape, dtype=torch.bool, device=input_ids.device))
        pairs = [(0, 0)] + list(enumerate(self.layer_map, start=1))  # (student m, teacher g(m))
        hidden = sum(hidden_mse(self.projection(s.hidden_states[m]), t.hidden_states[g], real) for m, g in pairs)
        attention = torch.zeros((), device=input_ids.device)
        if self.attention_weight:
            attention = sum(attention_mse(s.attentions[m - 1], t.attentions[g - 1], real) for m, g in pairs[1:])
        loss = self.hidden_weight * hidden + self.attention_weight * attention
        prediction = None
        if self.prediction_weight:
            prediction = distillation_loss(prediction_logits(s), prediction_logits(t), None, alpha=0.0,
                                           temperature=self.temperature).kd_loss
            loss = loss + self.prediction_weight * prediction
        return LayerDistillationOutput(loss, hidden, attention, prediction)

    def save_pretrained(self, directory: str | os.PathLike, tokenizer: Any = None) -> None:
        """The student alone, as a plain model directory."""
        self.student.save_pretrained(directory, tokenizer)


def prediction_logits(output) -> torch.Tensor:
    """The logits of a head's output (classifier, tagger or MLM); QA's start and end side by side."""
    for name in ("logits", "prediction_logits"):
        if getattr(output, name, None) is not None:
            return getattr(output, name)
    if getattr(output, "start_logits", None) is not None:
        return torch.stack([output.start_logits, output.end_logits], dim=1)  # two rows per example
    raise ConfigError("prediction_weight > 0 needs models with a head (logits); a bare encoder has none")
