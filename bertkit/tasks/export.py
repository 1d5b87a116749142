"""ONNX export of a model directory for its task: which graph to export, asked of the task's entry.

    export_directory("runs/bbc", "runs/bbc-onnx")                 # the task the directory was saved for
    export_directory(minilm_dir, "minilm-onnx", "embedding")

`bertkit.inference.onnx` traces and verifies a graph; it knows the graphs that are no task
(encoder, embedding, masked-lm: `GRAPHS`) and takes a task's outputs from its `Task`
(`export_outputs`), so a new task with an ONNX graph is exported with no change there.
"""

from __future__ import annotations

import dataclasses
import os

from bertkit.errors import ConfigError
from bertkit.inference.onnx import GRAPHS, ExportResult, export_onnx, graph_of_directory
from bertkit.io import atomic_write_json
from bertkit.models.checkpoint import read_config
from bertkit.tasks.common import SUMMARY_FILE
from bertkit.tasks.inference import read_spec
from bertkit.tasks.registry import TASKS, get_task, task_of_config
from bertkit.tasks.spec import Task


def export_names() -> list[str]:
    """What `bertkit export --task` takes: the graphs that are no task, then every registered task
    with an ONNX graph."""
    return [*GRAPHS, *(name for name, task in TASKS.items() if task.export_outputs)]


def export_target(model_dir: str, name: str | Task | None = None):
    """The graph to export: `name` (a GRAPHS name or a task), else the task the directory was
    fine-tuned for (`task_of_directory`), else `graph_of_directory` (MLM logits or the embedding)."""
    if name is not None:
        target = GRAPHS.get(name) if isinstance(name, str) else None
        if target is None:  # a task's graph: the task of the directory's head, never another one's
            target, found = get_task(name), task_of_directory(model_dir)
            if found is not None and not target.names(found):
                raise ConfigError(f"--task {target.name} but {model_dir} was fine-tuned for {found.name}; drop "
                                  "--task (its own graph), or --task encoder for the encoder alone")
    else:
        target = graph_of_task(task_of_directory(model_dir) or graph_of_directory(model_dir))
    if not target.export_outputs:
        what = f"--task {target.name}" if name is not None else f"{model_dir} is a {target.name} model, which"
        # an encoder-decoder directory has no plain encoder to load: no --task encoder for it
        whole = read_config(model_dir).model_type == "encoder-decoder"
        raise ConfigError(f"{what} has no ONNX graph; export one of {', '.join(export_names())}"
                          + ("" if whole else " (--task encoder: the encoder alone)"))
    return target


def graph_of_task(task):
    """The graph a task's model exports as: a GRAPHS entry of its name (a model fine-tuned for
    embedding), the embedding graph for any other task whose model is the sentence encoder
    (similarity: its output is the vectors the pairs are scored by), else the task itself."""
    if task.name in GRAPHS:
        return GRAPHS[task.name]
    if not task.export_outputs and task.model_class is get_task("embedding").model_class:
        return GRAPHS["embedding"]
    return task


def task_of_directory(model_dir: str) -> Task | None:
    """The task a model directory was fine-tuned for: its finetune_summary.json, else the head its
    config.json names; None for neither (a bare encoder, an MLM checkpoint)."""
    if os.path.isfile(os.path.join(model_dir, SUMMARY_FILE)):
        return read_spec(model_dir).task
    return task_of_config(read_config(model_dir))


def export_directory(model_dir: str, out_dir: str, task: str | Task | None = None,
                     verify: bool = True) -> ExportResult:
    """`export_onnx` of `model_dir` for `export_target(model_dir, task)`, and the decision rule beside it
    (`write_decision`)."""
    target = export_target(model_dir, task)
    result = export_onnx(model_dir, out_dir, target, verify)
    return dataclasses.replace(result, threshold=write_decision(model_dir, out_dir, target))


DECISION_FILE = "decision.json"


def write_decision(model_dir: str, out_dir: str, target) -> float | None:
    """The graph gives logits; a task that decides at a threshold (multi-label: a label is in the set at
    sigmoid(logit) >= t, t chosen on dev: finetune_summary.json's spec.threshold) has it written beside the graph
    as DECISION_FILE, for the runtime to apply as bertkit predict does. Returns t; None for a graph that decides
    without one, whose out_dir keeps no DECISION_FILE from an earlier export."""
    path = os.path.join(out_dir, DECISION_FILE)
    at_threshold = isinstance(target, Task) and target.at_threshold is not None
    if not at_threshold or not os.path.isfile(os.path.join(model_dir, SUMMARY_FILE)):
        if os.path.isfile(path):
            os.remove(path)
        return None
    threshold = read_spec(model_dir).threshold
    atomic_write_json(path, {"task": target.name, "threshold": threshold, "rule": (
        "a label is in the set when sigmoid(logit) >= threshold (bertkit predict's rule; chosen on dev)")})
    return threshold
