"""The "distil" objective: DistilBERT's pre-training distillation as a registry entry.

`bertkit distill --stage pretrain --teacher DIR` (recipes/distill.py) runs the pre-training recipe
with `data.objective = "distil"`, the teacher's tokenizer and a `[distil]` section:

    teacher          the teacher MLM checkpoint (bertkit's or transformers' BertForMaskedLM directory)
    student          "teacher_layers": the teacher with fewer layers, copied from it (DistilBERT's
                     initialisation: every other layer, `student_layers` / `layer_map` to choose);
                     "config": a new model of the [model] section (random weights)
    alpha_ce, alpha_mlm, alpha_cos, temperature   the loss (bertkit/distill/pretrain.py)

The batches are ordinary MLM batches (`MLMCollator`); the module trained is a `PretrainDistiller`
whose checkpoints hold the student alone, a plain BertForMaskedLM. Held-out metrics are the
student's MLM metrics beside the teacher's on the same masks (`teacher_mlm_loss`,
`teacher_mlm_accuracy`, computed once).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

from bertkit.models.config import BertConfig
from bertkit.distill.kd import student_from_teacher
from bertkit.distill.pretrain import PretrainDistiller
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.objectives.metrics import evaluate_pretraining

STUDENT_KINDS = ("teacher_layers", "config")


@dataclass
class DistilSettings:
    """The `[distil]` section (see the module docstring); DistilBERT's weights and temperature."""

    teacher: str = ""
    student: str = "teacher_layers"
    student_layers: int = 0  # 0: half the teacher's (student = "teacher_layers")
    layer_map: list = field(default_factory=list)  # teacher layer (0-based) of each student layer; [] = every other
    alpha_ce: float = 5.0
    alpha_mlm: float = 2.0
    alpha_cos: float = 1.0
    temperature: float = 2.0

    def __post_init__(self):
        if not self.teacher:
            raise ConfigError("distil.teacher is empty: name the teacher MLM checkpoint directory "
                              "(bertkit distill --stage pretrain --teacher DIR sets it)")
        if self.student not in STUDENT_KINDS:
            raise ConfigError(f"distil.student {self.student!r} is not known; use one of {STUDENT_KINDS}")
        if self.student == "config" and (self.student_layers or self.layer_map):
            raise ConfigError("distil.student_layers and distil.layer_map pick teacher layers; with distil.student = "
                              "\"config\" the student comes from [model]: set the layers there")


def load_teacher(directory: str) -> BertForMaskedLM:
    """The teacher with its trained MLM head; a checkpoint without one cannot give soft targets."""
    if not os.path.isdir(directory):
        raise CheckpointError(f"teacher {directory} is not a model directory")
    with warnings.catch_warnings():  # unused NSP/pooler weights are expected; missing ones checked below
        warnings.simplefilter("ignore")
        teacher, report = BertForMaskedLM.from_pretrained(directory, output_loading_info=True)
    if not isinstance(teacher.config, BertConfig):
        raise ConfigError(f"{directory} is a {teacher.config.model_type} model; pre-training distillation takes "
                          "BERT-family teachers (bert, roberta, albert, electra, deberta-v2)")
    if report.missing_keys:
        raise CheckpointError(f"{directory} has no trained MLM head ({report.missing_keys[0]} ...); the teacher "
                              "must be a masked-LM checkpoint such as one from bertkit pretrain")
    return teacher


def build_distiller(config, settings: DistilSettings) -> PretrainDistiller:
    """The objective's model: the student (cut from the teacher, or new from `config`) + the teacher."""
    teacher = load_teacher(settings.teacher)
    if settings.student == "teacher_layers":
        student = student_from_teacher(teacher, settings.student_layers or None, settings.layer_map or None)
    else:
        student = BertForMaskedLM(config)
    return PretrainDistiller(student.train(), teacher, settings.alpha_ce, settings.alpha_mlm, settings.alpha_cos,
                             settings.temperature)


def distil_metrics(model: PretrainDistiller, batches, seed: int = 0) -> dict:
    """The student's MLM metrics and, beside them, the teacher's on the same masks (computed once)."""
    metrics = evaluate_pretraining(model.student, batches)
    if model.teacher_metrics is None:  # the teacher does not change: one pass is enough
        model.teacher_metrics = evaluate_pretraining(model.teacher, batches)
    metrics.update({f"teacher_{k}": v for k, v in model.teacher_metrics.items() if k in ("mlm_loss", "mlm_accuracy")})
    return metrics
