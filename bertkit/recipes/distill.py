"""Distillation recipes: a teacher into a student cut from it (DistilBERT), at two stages.

Task stage (`distill_finetuned`): the student learns from the labels and the fine-tuned teacher's
softened distribution (the loss and the student's initialisation are `bertkit.distill`), trained
by the fine-tuning recipe, so data, batching, dev evaluation and best-model keeping are
`bertkit finetune`'s. `compare_on_test` then measures teacher and student side by side: task
metrics and inference time.

Pre-training stage (`distill_pretraining`): DistilBERT's triple loss (soft MLM targets at
temperature T, the MLM loss, the hidden-state cosine) on unlabelled text, run by the pre-training
recipe with the "distil" objective (bertkit/objectives/distill.py), so corpus, shards, masking,
checkpoints, resume and held-out evaluation are `bertkit pretrain`'s.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import torch
from torch import nn

from bertkit.models.checkpoint import read_config
from bertkit.models.config import BertConfig
from bertkit.distill import every_other_layer, student_from_teacher
from bertkit.errors import ConfigError
from bertkit.io import atomic_write_json
from bertkit.recipes.finetune import finetune
from bertkit.recipes.pretrain import PretrainConfig, parse_config, run_and_leave
from bertkit.runtime.run_dir import check_apart, latest_checkpoint
from bertkit.settings.config_io import load_toml
from bertkit.tasks import (SUMMARY_FILE, TASKS, Task, evaluate_examples, forward_features, get_task, load_examples,
                           load_model, model_labels, read_spec, subsample)
from bertkit.tokenizer import Tokenizer


# Built-in tasks with a distillation loss (`Task.distiller`: their heads give softmax distributions,
# single-label classes, tags, answer boundaries): what `bertkit distill --task` offers.
DISTILLABLE = tuple(name for name, entry in TASKS.items() if entry.distiller is not None)


def distill_finetuned(task: Task | str, teacher_dir: str, train_source: str, dev_source: str | None, out_dir: str,
                      sections: dict | None = None, num_layers: int | None = None,
                      layer_map: list[int] | None = None, alpha: float = 0.5, temperature: float = 2.0,
                      overwrite: bool = False, progress: bool = True, student_dir: str | None = None,
                      resume: bool = False) -> dict:
    """Task-specific distillation of a fine-tuned teacher into a student cut from it.

    The student is `student_from_teacher(teacher, num_layers, layer_map)` (every other layer by
    default: 3 of a 6-layer teacher), the teacher's head and label set included; it is trained
    by the fine-tuning recipe (`bertkit.recipes.finetune.finetune`: same data reading, batching,
    dev evaluation, best-model keeping and output directory) on the task's distillation loss
    (`task.distiller`: the class, per-token tag or answer start/end distributions). `sections` are finetune's ([data], [train], [model]); data.max_length defaults to the
    teacher's. `student_dir` starts from that model instead (same task and labels, e.g. the
    student of TinyBERT's layer-distillation stage); its layer count must match the map. OUT ends
    as a plain fine-tuned model whose finetune_summary.json also has a "distillation" entry.
    `resume` continues a stopped run from OUT's newest checkpoint, as finetune's does.
    """
    task = get_task(task)
    sections = distillation_sections(task, teacher_dir, sections, alpha, temperature)
    teacher = load_model(teacher_dir, task)
    teacher_labels = model_labels(teacher)
    if getattr(teacher.config, "shares_layers", False):
        raise ConfigError("the teacher shares its layers (ALBERT): there are no separate layers to cut a "
                          "student from")
    chosen = layer_map or every_other_layer(teacher.config.num_hidden_layers, num_layers)
    built: dict[str, nn.Module] = {}

    def build_student(model_dir, task_, labels, model_overrides):
        if labels is not None and labels != teacher_labels:  # QA has no labels
            raise ConfigError(f"the teacher's labels {teacher_labels} differ from the training data's "
                              f"{labels}; distil on the data the teacher was fine-tuned for")
        student = (student_from_teacher(teacher, layer_map=chosen) if student_dir is None
                   else load_student(student_dir, task, len(chosen), teacher_labels))
        if model_overrides:  # dropout settings from [model]
            changed = type(student)(student.config.replace(**model_overrides))
            changed.load_state_dict(student.state_dict())
            student = changed
        built["student"] = student
        return student.train()

    def wrap(student):
        return task.distiller(student, teacher, alpha=alpha, temperature=temperature)

    summary = finetune(task, teacher_dir, train_source, dev_source, out_dir, sections, overwrite=overwrite,
                       progress=progress, model_fn=build_student, train_wrapper=wrap, resume=resume)
    if summary:  # empty on a non-zero rank of a distributed run
        record_distillation(summary, out_dir, teacher_dir, teacher, built["student"], chosen, alpha, temperature,
                            student_dir)
    return summary


def distillation_sections(task: Task, teacher_dir: str, sections: dict | None, alpha: float,
                          temperature: float) -> dict:
    """finetune's sections for a distillation run, checked before any work: a teacher of `task`,
    no class weights or PEFT, alpha and temperature in range; data.max_length the teacher's."""
    if task.distiller is None:
        *others, last = [name for name, entry in TASKS.items() if entry.distiller is not None]
        raise ConfigError(f"distillation needs one softmax per example, token or answer boundary: a "
                          f"{', '.join(others)} or {last} teacher (single-label); {teacher_dir} is a "
                          f"{task.name} model")
    spec = read_spec(teacher_dir, task)
    if spec.task is not task:
        raise ConfigError(f"{teacher_dir} is a {spec.task.name} model; distillation's KL term needs a {task.name} "
                          "teacher (single-label: one softmax over the labels)")
    sections = {name: dict(values) for name, values in (sections or {}).items()}
    train = sections.get("train", {})
    if train.get("class_weights", "none") != "none" or sections.get("peft"):
        raise ConfigError("distillation trains the whole student on its own loss: remove train.class_weights "
                          "and the [peft] settings")
    if not 0.0 <= alpha <= 1.0 or temperature <= 0:
        raise ConfigError(f"--alpha must be in [0, 1] and --temperature > 0, got {alpha} and {temperature}")
    data = sections.setdefault("data", {})
    data.setdefault("max_length", spec.data.max_length)  # the length the teacher was tuned at
    return sections


def load_student(student_dir: str, task: Task, num_layers: int, teacher_labels: list[str]) -> nn.Module:
    """A fine-tuned `task` model to continue distilling: the layer map's depth, the teacher's labels."""
    student = load_model(student_dir, task)
    if model_labels(student) != teacher_labels:
        raise ConfigError(f"{student_dir} predicts other labels than the teacher; start from a student of this "
                          "teacher (or leave out --student)")
    if student.config.num_hidden_layers != num_layers:
        raise ConfigError(f"{student_dir} has {student.config.num_hidden_layers} layers, the layer map "
                          f"{num_layers}: give --layers {student.config.num_hidden_layers}")
    return student


def record_distillation(summary: dict, out_dir: str, teacher_dir: str, teacher: nn.Module, student: nn.Module,
                        layer_map: list[int], alpha: float, temperature: float,
                        student_dir: str | None = None) -> None:
    """Add the "distillation" entry to the fine-tuning summary, in `summary` and on disk."""
    summary["distillation"] = {
        "teacher": teacher_dir, "teacher_layers": teacher.config.num_hidden_layers, "layer_map": layer_map,
        "initial_student": student_dir,
        "alpha": alpha, "temperature": temperature,
        "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
        "student_parameters": sum(p.numel() for p in student.parameters()),
    }
    atomic_write_json(os.path.join(out_dir, SUMMARY_FILE), json.loads(json.dumps(summary)))


def compare_speed(models: dict[str, nn.Module], features: list[dict], pad_token_id: int,
                  batch_size: int = 32, repeats: int = 3) -> dict[str, list[float]]:
    """Seconds per full inference pass over `features` for each model, runs alternating
    (A, B, A, B, ...) so a machine's slow phases hit every model alike; one untimed warm-up
    pass each. The pass is the prediction path: length-sorted batches, no_grad, eval mode."""
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


def speed_ratios(times: dict[str, list[float]]) -> dict:
    """`compare_speed`'s seconds with their medians, the teacher/student ratio of the medians, and
    that ratio per alternating pair (each teacher run against the student run right after it:
    robust to slow drifts in load)."""
    median = {name: statistics.median(t) for name, t in times.items()}
    pairs = sorted(t / s for t, s in zip(times["teacher"], times["student"]))
    return {"seconds": times, "median_seconds": median, "speedup": median["teacher"] / median["student"],
            "speedup_per_pair": {"median": statistics.median(pairs), "min": pairs[0], "max": pairs[-1]}}


def compare_on_test(teacher_dir: str, student_dir: str, test_source: str, repeats: int = 3,
                    batch_size: int | None = None, limit: int = 0, seed: int = 0) -> dict:
    """Teacher vs student on labelled `test_source` (or a seeded subset of `limit` examples, the
    one `bertkit evaluate --limit` scores): the task metrics of each, and the seconds of a full
    inference pass over its encoded inputs (`compare_speed`: same features, batch size and
    max_length for both; median of `repeats` alternating runs). Any task (classification, tags,
    QA's windows). Recorded in the student's finetune_summary.json under distillation.test."""
    spec = read_spec(student_dir)
    tokenizer = Tokenizer.from_pretrained(student_dir)
    examples = subsample(load_examples(spec.task, test_source, "test", spec.data), limit, seed)
    models = {"teacher": load_model(teacher_dir, spec.task), "student": load_model(student_dir, spec.task)}
    metrics = {name: evaluate_examples(m, tokenizer, spec, examples, name="test") for name, m in models.items()}
    features = spec.task.encode(tokenizer, examples, spec.data, None, False, "test")
    batch_size = batch_size or spec.data.eval_batch_size
    times = compare_speed(models, features, tokenizer.pad_token_id, batch_size, repeats)
    result = {"test_data": test_source, "examples": len(examples), "features": len(features), "batch_size": batch_size,
              "max_length": spec.data.max_length, "threads": torch.get_num_threads(),
              "teacher": metrics["teacher"], "student": metrics["student"], **speed_ratios(times)}
    # the share of each score the student keeps; a ratio of losses (lower wins) is no share
    lower = spec.task.lower_is_better
    result["retained"] = {k: metrics["student"][k] / v for k, v in metrics["teacher"].items() if v and k not in lower}
    path = os.path.join(student_dir, SUMMARY_FILE)
    with open(path, encoding="utf-8") as f:
        summary = json.load(f)
    summary.setdefault("distillation", {})["test"] = result
    atomic_write_json(path, summary)
    return result


# ---------------------------------------------------------------------------- pre-training stage
def pretrain_distillation_config(teacher_dir: str, config_path: str | None = None,
                                 overrides: list[str] = ()) -> PretrainConfig:
    """The pre-training recipe's config for distilling `teacher_dir`: the TOML file (optional) and
    `--set` overrides, with data.objective = "distil", the teacher's tokenizer and distil.teacher
    = teacher_dir (the student must read the teacher's vocabulary and positions)."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in (load_toml(config_path) if config_path else {}).items()}
    raw.setdefault("data", {})["objective"] = "distil"
    raw.setdefault("tokenizer", {})["path"] = teacher_dir
    raw.setdefault("distil", {})["teacher"] = teacher_dir
    cfg = parse_config(raw, overrides)
    if cfg.data.objective != "distil":
        raise ConfigError(f"pre-training distillation trains the \"distil\" objective; remove data.objective = "
                          f"{cfg.data.objective!r} (or run bertkit pretrain)")
    teacher = cfg.objective_settings.teacher
    if cfg.tokenizer.path != teacher:
        raise ConfigError(f"tokenizer.path {cfg.tokenizer.path!r} is not the teacher's ({teacher!r}): the soft "
                          "targets are distributions over the teacher's vocabulary; remove tokenizer.path")
    config = read_config(teacher)
    if not isinstance(config, BertConfig):  # the "distil" objective cuts a BertForMaskedLM student
        raise ConfigError(f"{teacher} is a {config.model_type} model; pre-training distillation takes BERT-family "
                          "teachers (bert, roberta, albert, electra, deberta-v2); distil a fine-tuned model of it "
                          "at the task stage instead (bertkit distill --teacher FINE_TUNED_DIR --train ...)")
    longest = config.max_sequence_length
    if cfg.data.max_length > longest:
        raise ConfigError(f"data.max_length={cfg.data.max_length} exceeds the teacher's {longest} positions; "
                          f"set data.max_length <= {longest}")
    return cfg


def distill_pretraining(teacher_dir: str, out_dir: str, config_path: str | None = None, overrides: list[str] = (),
                        resume: bool = False, progress: bool = True) -> dict:
    """DistilBERT's pre-training distillation of the MLM checkpoint `teacher_dir` into `out_dir`.

    Returns {"metrics": the last held-out metrics (the student's, and teacher_mlm_loss /
    teacher_mlm_accuracy on the same masks), "student": the student's model directory (OUT/best
    with early stopping, else the last checkpoint: a plain BertForMaskedLM that bertkit and
    transformers load)}.
    """
    cfg = pretrain_distillation_config(teacher_dir, config_path, overrides)
    check_apart(teacher_dir, out_dir, "--teacher")
    metrics = run_and_leave(cfg, out_dir, resume=resume, progress=progress, what="distill --stage pretrain")
    best = os.path.join(out_dir, "best")
    student = best if cfg.early_stopping.patience and os.path.isdir(best) else latest_checkpoint(out_dir)
    return {"metrics": metrics, "student": student}
