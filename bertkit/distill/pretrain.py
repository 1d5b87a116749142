"""Pre-training distillation, DistilBERT's triple loss (Sanh et al. 2019, section 3).

A student learns masked language modelling from a frozen MLM teacher on unlabelled text; with the
student's logits s and the teacher's t at the masked positions, h the last hidden states at the
real tokens:

    loss = alpha_ce  * T^2 * KL(softmax(t / T) || softmax(s / T))      soft targets, mean over masks
         + alpha_mlm * CE(s, masked token)                             the ordinary MLM loss
         + alpha_cos * mean_tokens(1 - cos(h_s, h_t))                  align the hidden states

The training command of DistilBERT's README used alpha_ce = 5, alpha_mlm = 2, alpha_cos = 1 and
T = 2 (the defaults here); it also froze the student's position embeddings, which are trained here. The terms are `kd.distillation_loss`'s; `PretrainDistiller` is `Distiller` (only
the student is trained, saved and restored) with these three weights instead of alpha. The
cosine term needs the student as wide as the teacher (DistilBERT's student is the teacher with
every other layer: `kd.student_from_teacher`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bertkit.errors import ConfigError
from bertkit.models.encoder import ModelOutput
from bertkit.distill.kd import Distiller


@dataclass
class PretrainDistillationOutput(ModelOutput):
    loss: torch.Tensor
    logits: torch.Tensor  # the student's, at the masked positions
    kd_loss: torch.Tensor  # T^2 * KL, before alpha_ce
    mlm_loss: torch.Tensor  # before alpha_mlm
    cosine_loss: torch.Tensor | None = None  # before alpha_cos; None when alpha_cos = 0


def check_pair(student: nn.Module, teacher: nn.Module, alpha_cos: float) -> None:
    """The soft targets need one vocabulary; the cosine term one width."""
    s, t = student.config, teacher.config
    if s.vocab_size != t.vocab_size:
        raise ConfigError(f"the student's vocabulary ({s.vocab_size}) differs from the teacher's ({t.vocab_size}): "
                          "the soft targets are distributions over the teacher's vocabulary; use its tokenizer")
    if alpha_cos and s.hidden_size != t.hidden_size:
        raise ConfigError(f"the hidden-state cosine loss needs equal widths (student {s.hidden_size}, teacher "
                          f"{t.hidden_size}); set alpha_cos = 0 or make the student {t.hidden_size} wide")


class PretrainDistiller(Distiller):
    """student + frozen teacher (both MLM models); forward(**masked batch) -> PretrainDistillationOutput."""

    def __init__(self, student: nn.Module, teacher: nn.Module, alpha_ce: float = 5.0, alpha_mlm: float = 2.0,
                 alpha_cos: float = 1.0, temperature: float = 2.0):
        weights = (alpha_ce, alpha_mlm, alpha_cos)
        if min(weights) < 0 or not any(weights) or temperature <= 0:
            raise ConfigError(f"alpha_ce, alpha_mlm and alpha_cos must be >= 0 and not all 0, and the temperature "
                              f"> 0; got {weights} and T = {temperature}")
        check_pair(student, teacher, alpha_cos)
        super().__init__(student, teacher, alpha=0.0, temperature=temperature, cosine_weight=alpha_cos)
        self.alpha_ce, self.alpha_mlm, self.alpha_cos = alpha_ce, alpha_mlm, alpha_cos
        self.teacher_metrics: dict | None = None  # the teacher's held-out metrics, once measured

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                **kwargs: Any) -> PretrainDistillationOutput:
        if labels is None:
            raise ConfigError("pre-training distillation needs masked batches: labels with the original ids at "
                              "the masked positions and -100 elsewhere (an MLM collator's)")
        parts = super().forward(input_ids, attention_mask, token_type_ids, labels, **kwargs)
        loss = self.alpha_ce * parts.kd_loss + self.alpha_mlm * parts.ce_loss
        if parts.cosine_loss is not None:
            loss = loss + self.alpha_cos * parts.cosine_loss
        return PretrainDistillationOutput(loss, parts.logits, parts.kd_loss, parts.ce_loss, parts.cosine_loss)
