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
`loss` is the distillation loss, and only the student is trained, saved and restored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..heads import IGNORE_INDEX
from ..model import ModelOutput


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
        raise ConfigError(f"cannot take {student_layers} layers from every other of the teacher's "
                          f"{teacher_layers}; pass layer_map explicitly")
    return chosen


def student_from_teacher(teacher: nn.Module, num_layers: int | None = None,
                         layer_map: list[int] | None = None) -> nn.Module:
    """A model of the teacher's class with fewer layers; student layer i = teacher layer layer_map[i]."""
    config = teacher.config
    if config.shares_layers:
        raise ConfigError("the teacher shares its layers (ALBERT): there are no separate layers to pick; "
                          "distil into a student with num_hidden_groups set instead")
    layer_map = layer_map or every_other_layer(config.num_hidden_layers, num_layers)
    if any(not 0 <= i < config.num_hidden_layers for i in layer_map):
        raise ConfigError(f"layer_map {layer_map} names layers the teacher ({config.num_hidden_layers} "
                          "layers) does not have")
    student = type(teacher)(config.replace(num_hidden_layers=len(layer_map)))
    source = teacher.state_dict()
    state = {}
    for key in student.state_dict():
        parts = key.split(".")
        if "layer" in parts and parts[parts.index("layer") - 1] == "encoder":
            at = parts.index("layer") + 1
            parts[at] = str(layer_map[int(parts[at])])
        state[key] = source[".".join(parts)].clone()
    student.load_state_dict(state)
    return student


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


# ---------------------------------------------------------------------------- the task recipe
def distill_finetuned(task: str, teacher_dir: str, train_source: str, dev_source: str | None, out_dir: str,
                      sections: dict | None = None, num_layers: int | None = None,
                      layer_map: list[int] | None = None, alpha: float = 0.5, temperature: float = 2.0,
                      overwrite: bool = False, progress: bool = True) -> dict:
    """Task-specific distillation of a fine-tuned teacher into a student cut from it.

    The student is `student_from_teacher(teacher, num_layers, layer_map)` (every other layer by
    default: 3 of a 6-layer teacher), the teacher's head and label set included; it is trained
    by the fine-tuning recipe (`bertkit.tasks.finetune.finetune`: same data reading, batching,
    dev evaluation, best-model keeping and output directory) on the distillation loss of a
    `Distiller`. `sections` are finetune's ([data], [train], [model]); data.max_length defaults
    to the teacher's. OUT ends as a plain fine-tuned model whose finetune_summary.json also has
    a "distillation" entry. Single-label classification only, for now.
    """
    import json

    from ..io import atomic_write_json
    from ..tasks.finetune import finetune
    from ..tasks.predict import SUMMARY_FILE, load_model, model_labels, read_spec

    if task != "classification":
        raise ConfigError(f"distillation supports --task classification (single-label), not {task!r}")
    spec = read_spec(teacher_dir, task)
    if spec.kind != "classification":
        raise ConfigError(f"{teacher_dir} is a {spec.kind} model; distillation's KL term needs a single-label "
                          "classifier (one softmax over the labels)")
    sections = {name: dict(values) for name, values in (sections or {}).items()}
    train = sections.get("train", {})
    if train.get("class_weights", "none") != "none" or sections.get("peft"):
        raise ConfigError("distillation trains the whole student on its own loss: remove train.class_weights "
                          "and the [peft] settings")
    if not 0.0 <= alpha <= 1.0 or temperature <= 0:
        raise ConfigError(f"--alpha must be in [0, 1] and --temperature > 0, got {alpha} and {temperature}")
    data = sections.setdefault("data", {})
    data.setdefault("max_length", spec.data.max_length)  # the length the teacher was tuned at

    teacher = load_model(teacher_dir, task)
    teacher_labels = model_labels(teacher)
    if teacher.config.shares_layers:
        raise ConfigError("the teacher shares its layers (ALBERT): there are no separate layers to cut a "
                          "student from")
    chosen = layer_map or every_other_layer(teacher.config.num_hidden_layers, num_layers)
    built: dict[str, nn.Module] = {}

    def build_student(model_dir, task_, kind, labels, model_overrides):
        if labels != teacher_labels:
            raise ConfigError(f"the teacher's labels {teacher_labels} differ from the training data's "
                              f"{labels}; distil on the data the teacher was fine-tuned for")
        student = student_from_teacher(teacher, layer_map=chosen)
        if model_overrides:  # dropout settings from [model]
            changed = type(student)(student.config.replace(**model_overrides))
            changed.load_state_dict(student.state_dict())
            student = changed
        built["student"] = student
        return student.train()

    def wrap(student):
        return Distiller(student, teacher, alpha=alpha, temperature=temperature)

    summary = finetune(task, teacher_dir, train_source, dev_source, out_dir, sections, overwrite=overwrite,
                       progress=progress, model_fn=build_student, train_wrapper=wrap)
    if not summary:  # a non-zero rank of a distributed run
        return summary
    summary["distillation"] = {
        "teacher": teacher_dir, "teacher_layers": teacher.config.num_hidden_layers, "layer_map": chosen,
        "alpha": alpha, "temperature": temperature,
        "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
        "student_parameters": sum(p.numel() for p in built["student"].parameters()),
    }
    atomic_write_json(os.path.join(out_dir, SUMMARY_FILE), json.loads(json.dumps(summary)))
    return summary


def compare_speed(models: dict[str, nn.Module], features: list[dict], pad_token_id: int,
                  batch_size: int = 32, repeats: int = 3) -> dict[str, list[float]]:
    """Seconds per full inference pass over `features` for each model, runs alternating
    (A, B, A, B, ...) so a machine's slow phases hit every model alike; one untimed warm-up
    pass each. The pass is the prediction path: length-sorted batches, no_grad, eval mode."""
    import time

    from ..tasks.predict import forward_features

    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {repeats}")
    times: dict[str, list[float]] = {name: [] for name in models}
    for name, model in models.items():  # warm-up: allocator, thread pools
        forward_features(model, features[:batch_size], batch_size, pad_token_id)
    for _ in range(repeats):
        for name, model in models.items():
            start = time.perf_counter()
            forward_features(model, features, batch_size, pad_token_id)
            times[name].append(time.perf_counter() - start)
    return times


def compare_on_test(teacher_dir: str, student_dir: str, test_source: str, repeats: int = 3,
                    batch_size: int | None = None) -> dict:
    """Teacher vs student on labelled `test_source`: the task metrics of each, and the seconds
    of a full inference pass over its texts (`compare_speed`: same features, batch size and
    max_length for both; median of `repeats` alternating runs). Recorded in the student's
    finetune_summary.json under distillation.test."""
    import json
    import statistics

    from ..io import atomic_write_json
    from ..tasks.features import encode_texts
    from ..tasks.finetune import load_examples
    from ..tasks.predict import SUMMARY_FILE, evaluate_examples, load_model, read_spec
    from ..tokenizer import Tokenizer

    spec = read_spec(student_dir)
    tokenizer = Tokenizer.from_pretrained(student_dir)
    examples = load_examples(spec.task, test_source, "test", spec.data)
    models = {"teacher": load_model(teacher_dir, spec.task), "student": load_model(student_dir, spec.task)}
    metrics = {name: evaluate_examples(m, tokenizer, spec, examples, name="test") for name, m in models.items()}
    features = encode_texts(tokenizer, examples, spec.data.max_length, name="test")
    batch_size = batch_size or spec.data.eval_batch_size
    times = compare_speed(models, features, tokenizer.pad_token_id, batch_size, repeats)
    median = {name: statistics.median(t) for name, t in times.items()}
    # each teacher run against the student run right after it: robust to slow drifts in load
    pairs = sorted(t / s for t, s in zip(times["teacher"], times["student"]))
    result = {"test_data": test_source, "examples": len(examples), "batch_size": batch_size,
              "max_length": spec.data.max_length, "threads": torch.get_num_threads(),
              "teacher": metrics["teacher"], "student": metrics["student"],
              "seconds": times, "median_seconds": median,
              "speedup": median["teacher"] / median["student"],
              "speedup_per_pair": {"median": statistics.median(pairs), "min": pairs[0], "max": pairs[-1]}}
    result["retained"] = {k: metrics["student"][k] / v for k, v in metrics["teacher"].items() if v}
    path = os.path.join(student_dir, SUMMARY_FILE)
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    summary.setdefault("distillation", {})["test"] = result
    atomic_write_json(path, summary)
    return result
