"""Evaluation and prediction with a fine-tuned model, for any registered task.

One path serves dev evaluation during fine-tuning, `bertkit evaluate` and `bertkit predict`:

    examples --task.decode--> predictions --task.metrics--> metrics
                                          --task.rows-->    JSON rows

A fine-tuned model directory says what it is: `finetune_summary.json` (written by
`bertkit finetune`) holds the task and the data settings it was trained with; without it the
task is read from config.json (`architectures`, `problem_type`), with default data settings read
at the tokenizer's `model_max_length` (as transformers' pipeline reads such a directory).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Iterator, Sequence

import torch

from bertkit.models.checkpoint import read_config
from bertkit.models.sentence_layout import has_layout, read_layout
from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.peft import adapter_task_config, is_adapter_dir, load_peft_model, tokenizer_dir
from bertkit.tasks.builtin import (BUILTIN_DATA, load_examples, naming_the_task_of_the_format, parse_source,
                                   resolve_source)
from bertkit.tasks.common import (SUMMARY_FILE, DataConfig, PredictionInput, TaskSpec, model_labels, progress_part,
                                  summing_truncations)
from bertkit.tasks.formats import ChoiceExample, QAExample, TextExample, TokenExample, no_input_error
from bertkit.tasks.long_text import check_long_text_task
from bertkit.tasks.registry import get_task, task_of_config
from bertkit.tasks.spec import Task
from bertkit.tasks.tfidf_blend import load_blend
from bertkit.tokenizer import Tokenizer
from bertkit.settings.config_io import apply_overrides, dataclass_from_dict


# ---------------------------------------------------------------------------- loading
def read_spec(model_dir: str, task: Task | str | None = None) -> TaskSpec:
    """The task of a model directory: its finetune_summary.json, else its config.json (for an
    adapter directory PEFT wrote, which has none: its base's, with the adapter's task head).
    `task` (`--task`) must name the recorded task or one it refines to (its `variants`)."""
    config = adapter_task_config(model_dir) if is_adapter_dir(model_dir) else read_config(model_dir)
    asked = None if task is None else get_task(task)
    path = os.path.join(model_dir, SUMMARY_FILE)
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)["spec"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{path} is unreadable ({e}); pass --task, or delete the file") from None
        spec = TaskSpec.from_dict(values, get_task)
        if not 0 < spec.threshold < 1:  # a class is in the set at p >= threshold: 0 or 1 would decide nothing
            raise CheckpointError(f"{path}: spec.threshold {spec.threshold:g} is not between 0 and 1; set it to "
                                  "0.5 (the default), or fine-tune again to choose it on dev")
        if asked is not None and not asked.names(spec.task):
            raise ConfigError(f"--task {asked.name} but {model_dir} was fine-tuned for {spec.task.name}; drop "
                              "--task or use a model fine-tuned for this task")
        spec.blend = load_blend(model_dir, spec.task.name)  # (finetune --set train.blend_tfidf=true saved one)
        return spec
    found = task_of_config(config)
    if asked is None:
        if found is None:
            raise ConfigError(_no_task_head(model_dir, config.architectures))
        return TaskSpec(found, _data_of_a_saved_model(model_dir, config))
    if found is not None and found in asked.variants:
        asked = found  # a multi-label head asked for as "classification"
    return TaskSpec(asked, _data_of_a_saved_model(model_dir, config))


def _data_of_a_saved_model(model_dir: str, config) -> DataConfig:
    """Default data settings for a directory `bertkit finetune` did not write (transformers' or
    sentence-transformers' `save_pretrained`, bertkit's from Python), read at the length its tokenizer
    says (`model_max_length`, within the model's positions), as `pipeline(..., truncation=True)`
    and `AutoTokenizer` read it; DataConfig's 128 cut such a model's 512-token texts short (walk R).
    A sentence-transformers directory says its own length (sentence_bert_config.json's max_seq_length),
    which `SentenceTransformer`, `bertkit embed` and `nearest` read at: `evaluate --task embedding` of
    all-MiniLM-L6-v2 read 512 tokens (its tokenizer's) where they read 256, and scored vectors no
    other command gives (walk X: BBC titles to articles, mrr@10 0.908 against 0.911 at 256)."""
    layout_length = read_layout(model_dir).max_seq_length if has_layout(model_dir) else None
    length = layout_length or Tokenizer.from_pretrained(tokenizer_dir(model_dir)).model_max_length
    positions = getattr(config, "max_sequence_length", None)
    if length is None:
        return DataConfig()
    return DataConfig(max_length=min(length, positions) if positions else length)


def _no_task_head(model_dir: str, architectures) -> str:
    """What to do with an encoder that was never fine-tuned: `--task` would only reach a head
    with no trained weights, so name the commands that help instead."""
    return (f"{model_dir} is an encoder without a fine-tuned task head (architectures={architectures}, no "
            f"{SUMMARY_FILE}); fine-tune it first (`bertkit finetune --task classification --model {model_dir} "
            "--train FILE --dev FILE --out DIR`), or get its vectors with `bertkit embed`")


def load_model(model_dir: str, task: Task | str) -> torch.nn.Module:
    """The task model of a fine-tuned directory, refusing one whose head was never trained."""
    task = get_task(task)
    if is_adapter_dir(model_dir):  # a PEFT adapter (`finetune --peft`): onto its recorded base
        model = load_peft_model(model_dir)
        if type(model.model) is not task.model_class:
            raise ConfigError(f"{model_dir} is a {type(model.model).__name__} adapter, not a {task.name} model")
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, report = task.head_class(model_dir).from_pretrained(model_dir, output_loading_info=True)
    head = [k for k in report.missing_keys if not k.startswith(model.base_model_prefix + ".")]
    if head:
        raise CheckpointError(f"{model_dir} has no trained {task.name} head (missing {', '.join(head[:3])}); "
                              "fine-tune it first with `bertkit finetune`")
    return model


TRAINING_ONLY_DATA_KEYS = frozenset({"max_train_examples", "max_eval_examples"})


def load_for_inference(model_dir: str, task: str | None = None, assignments: Sequence[str] = ()):
    """(model, tokenizer, spec) of a fine-tuned directory, with `data.key=value` assignments
    (`--set`) applied to its input settings; only [data] applies to a trained model."""
    spec = inference_spec(model_dir, task, assignments)
    return (*load_inference_model(model_dir, spec), spec)


# What `--set` takes where a trained model runs (evaluate, predict, Predictor): its [data] settings only
INFERENCE_KEYS = {"data": tuple(f.name for f in dataclasses.fields(DataConfig))}


def inference_spec(model_dir: str, task: str | None = None, assignments: Sequence[str] = ()) -> TaskSpec:
    """The spec of a fine-tuned directory with `--set data.key=value` applied, checked against the
    model's config without loading its weights: a command reads its input with it first."""
    spec = read_spec(model_dir, task)
    overrides = apply_overrides({}, assignments, INFERENCE_KEYS).get("data", {})
    for key in TRAINING_ONLY_DATA_KEYS.intersection(overrides):  # read by finetune only: would pass unread
        raise ConfigError(f"data.{key} limits a fine-tune's own data; here it would change nothing: "
                          "to score or predict on fewer rows, give a smaller file (evaluate: --limit N)")
    if overrides:
        spec.data = dataclass_from_dict(DataConfig, {**spec.data.to_dict(), **overrides}, "data")
        check_long_text_task(spec.task.name, spec.data.long_text)  # as finetune checks it
    has_config = os.path.isfile(os.path.join(model_dir, "config.json"))  # (a PEFT adapter has none)
    positions = getattr(read_config(model_dir), "max_sequence_length", None) if has_config else None
    if "max_length" in overrides and positions and spec.data.max_length > positions:  # as finetune refuses it
        raise ConfigError(f"data.max_length={spec.data.max_length} exceeds the model's {positions} positions; use "
                          f"data.max_length={positions} or less")
    return spec


def load_inference_model(model_dir: str, spec: TaskSpec) -> tuple:
    """(model, tokenizer) of a fine-tuned directory for `spec`'s task. An adapter PEFT saved has
    no tokenizer files: its base's."""
    return load_model(model_dir, spec.task), Tokenizer.from_pretrained(tokenizer_dir(model_dir))


# ---------------------------------------------------------------------------- evaluate
def evaluate_examples(model, tokenizer, spec: TaskSpec, examples: Sequence, name: str = "data", ctx=None,
                      features: list | None = None) -> dict:
    """The task's metrics of `model` on labelled `examples` (flat {name: float}): of the
    predictions `predict_examples` gives (its `ctx` and `features` too)."""
    return spec.task.metrics(examples, predict_examples(model, tokenizer, spec, examples, name, ctx, features))


def predict_examples(model, tokenizer, spec: TaskSpec, examples: Sequence, name: str = "data", ctx=None,
                     features: list | None = None) -> list:
    """The task's prediction of `model` for each of `examples`, in order.

    `features`: the examples' inference features (`spec.task.encode(..., training=False)`), for a
    caller that evaluates the same examples again and again (fine-tuning's dev set): encoded once.
    With `ctx` (a train.distributed.DistContext) of W > 1 processes, rank r decodes examples
    r, r + W, r + 2W, ...; the predictions are gathered back into order, so every rank returns
    all of them for 1/W of the model's work (each rank encodes its share: `features` are not used)."""
    task = spec.task
    if ctx is None or not ctx.enabled:
        return task.decode(model, tokenizer, examples, spec, name, features)
    share = list(examples[ctx.rank::ctx.world_size])
    predictions: list = [None] * len(examples)
    for rank, part in enumerate(ctx.gather(task.decode(model, tokenizer, share, spec, name) if share else [])):
        predictions[rank::ctx.world_size] = part
    return predictions


def baseline_metrics(spec: TaskSpec, train: Sequence, examples: Sequence, tokenizer=None) -> dict:
    """The trivial baseline's metrics on `examples` (each task's `baseline`), held to what the model
    reads of them through `tokenizer` where the task says how (`baseline_reads`)."""
    task = spec.task
    scope = task.baseline_reads(tokenizer, examples, spec.data) if task.baseline_reads and tokenizer else {}
    return task.baseline(train, examples, **scope)


def check_model_labels(model, spec: TaskSpec, examples: Sequence, source: str, allow: bool = False) -> list[str]:
    """The labels in the data that the model cannot predict, sorted. Any -> DataError listing
    them, unless `allow`: then they are returned, and the examples holding them count as errors
    (the model never predicts them; a classification loss becomes inf). Warns when the data has
    unanswerable questions a model trained without them cannot give."""
    task = spec.task
    if not spec.allow_no_answer and task.allows_no_answer(examples):
        warnings.warn(f"{source} has questions with no answer (SQuAD 2.0), but the model was trained without any "
                      "and never answers \"no answer\": they all score 0 (NoAns_* in the metrics)")
    if task.labels_of is None:
        return []
    known = set(model_labels(model))
    unknown = sorted(str(x) for x in set(task.labels_of(examples)) - known)
    if unknown and not allow:
        shown = ", ".join(repr(x) for x in unknown[:20]) + (f" and {len(unknown) - 20} more" if len(unknown) > 20 else "")
        raise DataError(f"{source} has {len(unknown)} label(s) the model never saw: {shown}; the model knows "
                        f"{len(known)} labels ({', '.join(sorted(known)[:10])}{', ...' if len(known) > 10 else ''}); "
                        "evaluate on data with the model's label set, fine-tune on these labels, or pass "
                        "--allow-unseen-labels to score them as errors")
    return unknown


# ---------------------------------------------------------------------------- predict
def read_prediction_input(task: Task | str, source: str, data: DataConfig) -> PredictionInput:
    """Unlabelled inputs for `bertkit predict`: the task's `read_inputs`, or a built-in name
    such as bbc:test (its labels are ignored), or a cached hub data set (its test split by default)."""
    task = get_task(task)
    if parse_source(source)[0] in BUILTIN_DATA:
        return PredictionInput(load_examples(task, source, "test", data))
    path = resolve_source(task, source, "test")
    with naming_the_task_of_the_format(task, path):
        inputs = task.read_inputs(path, data)
    if all(_is_blank(example) for example in inputs.examples):  # a header only, blank lines only
        raise no_input_error(path, len(inputs.examples))
    return inputs


# Inputs per chunk, whose rows are computed and handed on together: a small first chunk, so the
# first rows come out soon (`predict --output - | head`), then large ones, as length-sorted
# batches over fewer inputs are cut into more, smaller ones. Measured on 6,675 BBC texts (MiniLM,
# 1 thread; docs/inference.md): chunks of 4,096 took 0.8% more CPU time than one pass, of 1,024 4.3%.
PREDICT_FIRST_CHUNK = 256
PREDICT_CHUNK = 4096


def prediction_chunks(model, tokenizer, spec: TaskSpec, inputs: PredictionInput, name: str = "input"
                      ) -> Iterator[list[dict]]:
    """`prediction_rows` chunk by chunk, in input order (`_chunks`), each chunk's rows as soon as
    they are computed. A chunk holds whole inputs (a question with all the windows over its
    context), and every task's prediction of an input depends on that input alone, so the rows
    are those of one pass over all inputs. Within `showing_progress(desc, inputs)` each chunk
    moves the bar on (`progress_part`)."""
    for indices in _chunks(len(inputs.examples)):
        with progress_part(len(indices)):
            rows = _rows_of(model, tokenizer, spec, inputs, indices, name)
        yield rows


def _chunks(count: int) -> Iterator[range]:
    """The positions of `count` inputs, PREDICT_FIRST_CHUNK first, then PREDICT_CHUNK at a time
    (read at the call: a test sets small ones)."""
    start, size = 0, PREDICT_FIRST_CHUNK
    while start < count:
        yield range(start, min(start + size, count))
        start, size = start + size, PREDICT_CHUNK


def prediction_rows(model, tokenizer, spec: TaskSpec, inputs: PredictionInput, name: str = "input") -> list[dict]:
    """One JSON-ready dict per input example (see each task's `rows`), in input order, never
    fewer: row i is example i.

    Every row starts with "index" (0-based position among the inputs) and "line" (1-based line
    where the input starts in its file; None for SQuAD JSON and built-in data), then "file" for
    an input that is a file of a folder (its path in the folder). A blank input
    (empty or whitespace-only text, either text of a pair, question or context; a sentence without
    words) is not sent
    to the model: its row has the task's keys with null values (the task's `blank_row`).
    Computed in chunks (`prediction_chunks`), with one truncation warning over all of them.
    """
    with summing_truncations():
        return [row for rows in prediction_chunks(model, tokenizer, spec, inputs, name) for row in rows]


def _rows_of(model, tokenizer, spec: TaskSpec, inputs: PredictionInput, indices: range, name: str) -> list[dict]:
    """The rows of inputs[indices] (a chunk): its blank inputs get the task's blank row, the others
    one batched decode."""
    task = spec.task
    examples = inputs.examples
    kept = [i for i in indices if not _is_blank(examples[i])]
    pick = (lambda values: None if values is None else [values[i] for i in kept])
    subset = PredictionInput([examples[i] for i in kept], pick(inputs.texts), pick(inputs.spans))
    predicted = task.rows(model, task.decode(model, tokenizer, subset.examples, spec, name), subset) if kept else []
    by_index = dict(zip(kept, predicted))
    return [{"index": i, "line": getattr(examples[i], "line", None), **_file_of(examples[i]),
             **(by_index[i] if i in by_index else task.blank_row(examples[i]))}
            for i in indices]


def _file_of(example) -> dict:
    """{"file": path} for an input read from a folder of .txt files (class_folders.py), else nothing."""
    file = getattr(example, "file", None)
    return {"file": file} if file else {}


def _is_blank(example) -> bool:
    if isinstance(example, TokenExample):
        return not example.tokens
    if isinstance(example, QAExample):
        return not example.question.strip() or not example.context.strip()
    if isinstance(example, TextExample):  # a pair with either text blank, as QA's question or context
        return not example.text.strip() or (example.text_pair is not None and not example.text_pair.strip())
    if isinstance(example, ChoiceExample):
        return not example.context.strip()
    return False
