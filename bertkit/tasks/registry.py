"""The fine-tuning tasks bertkit knows: one line per task.

    TASKS["classification"]  -> the Task entry (bertkit/tasks/spec.py) everything reads

A task of your own: build a `Task` and `register_task(task)` before calling the recipes (or
add its module and one line below). Names are looked up here once, where a command or a summary
file gives one; from there the `Task` object travels.
"""

from __future__ import annotations

from bertkit.errors import ConfigError
from bertkit.tasks import embedding, multiple_choice, qa, seq2seq, sequence, similarity, tagging
from bertkit.tasks.spec import Task

TASKS: dict[str, Task] = {task.name: task for task in (
    sequence.CLASSIFICATION,
    sequence.MULTI_LABEL,
    sequence.REGRESSION,
    tagging.TOKEN_CLASSIFICATION,
    qa.QA,
    multiple_choice.MULTIPLE_CHOICE,
    seq2seq.SEQ2SEQ,
    embedding.EMBEDDING,
    similarity.SIMILARITY,
)}


def register_task(task: Task) -> Task:
    """Make `task` available to finetune / evaluate / predict under `task.name`."""
    if task.name in TASKS and TASKS[task.name] is not task:
        raise ConfigError(f"a task named {task.name!r} is registered already; choose another name")
    TASKS[task.name] = task
    return task


def get_task(name: str | Task) -> Task:
    """The registered task `name`, or a ConfigError listing the known ones (a Task is its own entry)."""
    if isinstance(name, Task):
        return name
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; use one of {', '.join(TASKS)} (a task of your own must be "
                          "registered, bertkit.tasks.register_task, in the process first: docs/architecture.md)")
    return TASKS[name]


def task_of_config(config) -> Task | None:
    """The task a model's config.json says it is for (`architectures`, `problem_type`)."""
    for architecture in config.architectures or []:
        for task in TASKS.values():
            if architecture in task.architectures:
                if task is sequence.CLASSIFICATION:
                    return _sequence_task(config)
                return task
    return None


def _sequence_task(config) -> Task:
    if config.problem_type == "multi_label_classification":
        return sequence.MULTI_LABEL
    if config.problem_type == "regression" or (config.problem_type is None and config.num_labels == 1):
        return sequence.REGRESSION
    return sequence.CLASSIFICATION
