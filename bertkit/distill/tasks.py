"""Task distillation for token classification and extractive QA.

kd.py distils a classifier (one distribution per example) and an MLM (one
per masked position). The same loss, `distillation_loss`,

    alpha * CE(s, y) + (1 - alpha) * T^2 * KL(softmax(t / T) || softmax(s / T)),

extends to the other heads by saying which rows are distributions:

- token classification: one distribution over the C tags per *real* token (attention_mask = 1).
  The teacher's tags at continuation pieces and [CLS]/[SEP] are soft targets too (they carry its
  knowledge); the CE term sees only the labelled positions (labels != -100).
- extractive QA: two distributions over the T positions of each example, where the answer starts
  and where it ends (the head's own softmax over all T positions, as its cross-entropy uses).
  The loss is the mean of the start and end losses, as the head's loss is. An answer position
  outside the sequence (cut off by truncation) has no CE term, as in the head.

`TaskDistiller` wraps a student and a frozen teacher of any of the three fine-tuning heads for
the Trainer (a sequence classifier goes through `Distiller`'s loss): only the student is
trained, saved and restored.
"""

from __future__ import annotations

from typing import Any

import torch

from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import ConfigError
from bertkit.distill.kd import DistillationOutput, Distiller, distillation_loss


def token_distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                            labels: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                            alpha: float = 0.5, temperature: float = 2.0) -> DistillationOutput:
    """Logits (B, T, C), labels (B, T) with -100 = no label, attention_mask (B, T): the loss above
    over the real tokens (all tokens without a mask)."""
    if student_logits.dim() != 3:
        raise ConfigError(f"token distillation takes logits (batch, tokens, tags), got {tuple(student_logits.shape)}")
    real = (attention_mask.bool() if attention_mask is not None
            else torch.ones(student_logits.shape[:2], dtype=torch.bool, device=student_logits.device))
    rows = None if labels is None else labels[real]
    out = distillation_loss(student_logits[real], teacher_logits[real], rows, alpha, temperature)
    out.logits = student_logits
    return out


def qa_distillation_loss(student_start: torch.Tensor, student_end: torch.Tensor, teacher_start: torch.Tensor,
                         teacher_end: torch.Tensor, start_positions: torch.Tensor | None = None,
                         end_positions: torch.Tensor | None = None, alpha: float = 0.5,
                         temperature: float = 2.0) -> DistillationOutput:
    """Start/end logits (B, T), answer positions (B,): the mean of the start and end losses."""
    if (start_positions is None) != (end_positions is None):
        raise ConfigError("pass both start_positions and end_positions, or neither")
    seq_len = student_start.shape[1]

    def targets(positions):  # outside the sequence (truncated answers): no CE term, as in the head
        if positions is None:
            return None
        positions = positions.view(-1)
        return torch.where((positions >= 0) & (positions < seq_len), positions,
                           torch.full_like(positions, IGNORE_INDEX))

    start = distillation_loss(student_start, teacher_start, targets(start_positions), alpha, temperature)
    end = distillation_loss(student_end, teacher_end, targets(end_positions), alpha, temperature)
    ce = None if start.ce_loss is None else (start.ce_loss + end.ce_loss) / 2
    return DistillationOutput((start.loss + end.loss) / 2, None, ce, (start.kd_loss + end.kd_loss) / 2)


# The heads whose outputs are softmax distributions the loss can compare, by their class names'
# task part (BertForSequenceClassification and every other family's head of that task).
HEADS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")


def _head(model) -> str | None:
    return next((head for head in HEADS if type(model).__name__.endswith(head)), None)


class TaskDistiller(Distiller):
    """student + frozen teacher with the same head (sequence classification, token classification
    or QA); forward(**batch) -> DistillationOutput with the loss above (the Trainer's batches)."""

    def __init__(self, student, teacher, alpha: float = 0.5, temperature: float = 2.0):
        if type(student) is not type(teacher):
            raise ConfigError(f"student ({type(student).__name__}) and teacher ({type(teacher).__name__}) "
                              "need the same head")
        if _head(student) is None:
            raise ConfigError(f"TaskDistiller distils the heads {', '.join('*' + h for h in HEADS)}, not "
                              f"{type(student).__name__}; use Distiller for MLM")
        super().__init__(student, teacher, alpha=alpha, temperature=temperature)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                start_positions=None, end_positions=None, **kwargs: Any) -> DistillationOutput:
        if _head(self.student) == "ForSequenceClassification":
            return super().forward(input_ids, attention_mask, token_type_ids, labels, **kwargs)
        teacher = self.teacher
        if next(teacher.parameters()).device != input_ids.device:
            teacher.to(input_ids.device)
        s = self.student(input_ids, attention_mask, token_type_ids, **kwargs)
        with torch.no_grad():
            t = teacher(input_ids, attention_mask, token_type_ids, **kwargs)
        if hasattr(s, "start_logits"):
            return qa_distillation_loss(s.start_logits, s.end_logits, t.start_logits, t.end_logits,
                                        start_positions, end_positions, self.alpha, self.temperature)
        return token_distillation_loss(s.logits, t.logits, labels, attention_mask, self.alpha, self.temperature)
