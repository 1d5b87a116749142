"""A fine-tuned model in Python: `Predictor.from_pretrained(run).predict(inputs)` returns the rows
`bertkit predict` writes, for any task, without files.

    predictor = bertkit.Predictor.from_pretrained("runs/mine")
    predictor.predict(["Markets rallied on Monday.", "The goalkeeper saved a penalty."])
    # [{"index": 0, "label": "business", "probabilities": {...}}, {"index": 1, "label": "sport", ...}]

An input is what one line of the task's input file holds: a string where the task reads one text
(classification, multi-label, regression, token classification, a seq2seq source), or a dict with
the fields of its JSON lines (a model of text pairs: {"text": ..., "text_pair": ...} under the
column names it was fine-tuned with; QA: {"question", "context"}; multiple choice: {"context",
"choices"}). The inputs go through the reader `predict` uses (written to a temporary file that is
deleted after reading; a newline inside a string becomes a space, which keeps every character
offset), so a bad input gets predict's one-line error, "input N" for its position (1-based), and a
blank input its row of nulls. The rows are predict's without "line": one per input, in order, the
TF-IDF blend saved with the model included unless `blend=False`.

`predictor.evaluate("test.csv")` (or labelled dicts) gives the metrics `bertkit evaluate` prints, with its
baselines.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from typing import Sequence

import torch

from bertkit.errors import BertkitError, ConfigError, DataError
from bertkit.inference.quantize import inference_copy
from bertkit.runtime.devices import resolve_device
from bertkit.runtime.precision import autocast, resolve_precision
from bertkit.tasks.builtin import load_examples
from bertkit.tasks.common import clean_metrics, summing_truncations
from bertkit.tasks.baseline import evaluation_baselines
from bertkit.tasks.inference import (check_model_labels, inference_spec, load_inference_model, predict_examples,
                                    prediction_rows, read_prediction_input)
from bertkit.tasks.spec import TaskSpec
from bertkit.tokenizer import Tokenizer

STRINGS_READ = ("strings are read as a .txt file, one text each; a task whose file holds several fields a line "
                "takes dicts of them: {\"question\": ..., \"context\": ...}, {\"text\": ..., \"text_pair\": ...}")
_SET_OPTION = re.compile(r"--set (\S+=\w+)")
_LINE_BREAKS = re.compile(r"[\r\n]")  # one character each, so a space in their place keeps the offsets


class Predictor:
    """A fine-tuned model directory loaded once for `predict` and `evaluate` (see the module docstring)."""

    def __init__(self, model, tokenizer: Tokenizer, spec: TaskSpec, device: torch.device, precision: str,
                 model_dir: str | None = None):
        self.model, self.tokenizer, self.spec = model, tokenizer, spec
        self.device, self.precision = device, precision
        self.model_dir = model_dir  # the run folder, whose record of its training data the baselines refit on

    @classmethod
    def from_pretrained(cls, model_dir: str, task: str | None = None, device: str = "auto",
                        precision: str = "auto", blend: bool = True, int8: bool = False,
                        settings: Sequence[str] | str = ()) -> "Predictor":
        """The model in `model_dir` (a `bertkit finetune` output) for its task (or `task`), on `device`
        ("auto": the GPU when CUDA is available), as `bertkit predict --device --precision --int8` run
        it; `settings` are predict's `--set data.key=value` strings; `blend=False` is `--no-blend`."""
        if not os.path.isdir(model_dir):
            raise ConfigError(f"{model_dir} is not a directory; give the folder bertkit finetune wrote (--out)")
        where = resolve_device(device)
        resolve_precision(precision, where)  # an impossible one refused before the model loads
        spec = inference_spec(model_dir, task, _setting_list(settings))
        if not blend:
            spec.blend = None
        model, tokenizer = load_inference_model(model_dir, spec)
        return cls(inference_copy(model, tokenizer, int8, where, precision), tokenizer, spec, where, precision,
                   os.fspath(model_dir))

    def predict(self, inputs: Sequence[str | dict] | str | dict) -> list[dict]:
        """One row per input, in order (a single input: a list of one row)."""
        inputs = [inputs] if isinstance(inputs, (str, dict)) else list(inputs)
        examples = self._read(inputs, lambda path: read_prediction_input(self.spec.task, path, self.spec.data))
        with autocast(self.precision, self.device), summing_truncations():
            rows = prediction_rows(self.model, self.tokenizer, self.spec, examples, name="inputs")
        return [{key: value for key, value in row.items() if key != "line"} for row in rows]

    def evaluate(self, data: str | os.PathLike | Sequence[dict], allow_unseen_labels: bool = False,
                 baselines: bool = True) -> dict:
        """The task's metrics on labelled `data`: a file or built-in set as `bertkit evaluate --data` reads it
        ("test.csv", "bbc:test"), or dicts of a line's fields with its label (csv.DictReader's rows): evaluate's
        last JSON line, "baselines" included (TF-IDF and trivial refitted on the fine-tune's recorded training
        data, the paired difference to TF-IDF; a warning says why one is missing; `baselines=False` is
        `--no-baseline`). A label the model never saw is refused, as there, unless `allow_unseen_labels` (then
        counted as errors). Only the command could score a run before (walk AE): a notebook re-implemented
        the metrics, without the baselines a score needs beside it."""
        if isinstance(data, (str, os.PathLike)):
            name = os.fspath(data)
            examples = load_examples(self.spec.task, name, "test", self.spec.data)
        else:
            name, rows = "evaluate()'s data", [data] if isinstance(data, dict) else list(data)
            if not rows or not all(isinstance(row, dict) for row in rows):
                raise ConfigError("evaluate() takes a file (or a built-in set's name) or a non-empty list of dicts "
                                  "holding each input's fields and its label; strings carry no label")
            examples = self._read(rows, lambda path: load_examples(self.spec.task, path, "test", self.spec.data))
        if not examples:
            raise DataError(f"{name}: no examples to evaluate")
        try:
            check_model_labels(self.model, self.spec, examples, name, allow=allow_unseen_labels)
        except DataError as error:
            raise DataError(_python_dialect(str(error))) from None
        with autocast(self.precision, self.device), summing_truncations():
            predictions = predict_examples(self.model, self.tokenizer, self.spec, examples, name=name)
        metrics = self.spec.task.metrics(examples, predictions)
        metrics = clean_metrics({key: float(value) for key, value in metrics.items()})
        if not baselines or self.model_dir is None:
            return metrics
        found = evaluation_baselines(self.model_dir, self.spec, examples, predictions, metrics)
        if found.note:
            warnings.warn(found.note, stacklevel=2)
        return {**metrics, "baselines": found.scores} if found.scores else metrics

    def _read(self, inputs: list, read) -> list:
        """`read(path)` of the inputs written as the file predict would read, in a temporary folder; its
        errors and warnings name the inputs ("input N"), not a temporary file the caller never saw."""
        with tempfile.TemporaryDirectory(prefix="bertkit-predict-") as folder:
            path = _input_file(inputs, folder)
            try:
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    examples = read(path)
            except BertkitError as error:
                text = _python_dialect(str(error).replace(f"{path}: line ", "input ").replace(path, "the inputs"))
                if path.endswith(".txt"):
                    text += f" ({STRINGS_READ})"
                kind = next(kind for kind in (DataError, ConfigError, BertkitError) if isinstance(error, kind))
                raise kind(text) from None
        for warning in said:
            warnings.warn(_python_dialect(str(warning.message).replace(path, "the inputs")), warning.category,
                          stacklevel=3)
        return examples


def _python_dialect(text: str) -> str:
    """A message of the commands as a Predictor's caller acts on it: `--set data.key=value` is
    from_pretrained's settings=["data.key=value"], `--allow-unseen-labels` evaluate's argument."""
    text = _SET_OPTION.sub(r'settings=["\1"]', text)
    return text.replace("--allow-unseen-labels", "allow_unseen_labels=True")


def _setting_list(settings: Sequence[str] | str) -> list[str]:
    """`settings` as a list of "data.key=value" strings: one string is one setting, not its characters
    (settings="data.max_length=64" was refused as "got 'd'", walk AE); finetune's tables are refused by name."""
    if isinstance(settings, str):
        return [settings]
    if isinstance(settings, dict):
        raise ConfigError("settings are predict's --set strings, e.g. settings=[\"data.max_length=256\"], not a "
                          "dict of sections (finetune's `sections`)")
    return list(settings)


def _input_file(inputs: list, folder: str) -> str:
    """The inputs as the file predict would read: strings one a line (.txt), dicts as JSON lines."""
    if not inputs:
        raise ConfigError("predict() was given no inputs; pass a list of texts (or of dicts of the task's fields)")
    if all(isinstance(item, str) for item in inputs):  # str's subclasses too: numpy's str_ (np.array of texts)
        path = os.path.join(folder, "inputs.txt")
        lines = [_LINE_BREAKS.sub(" ", str(text)) + "\n" for text in inputs]
    elif all(isinstance(item, dict) for item in inputs):
        path = os.path.join(folder, "inputs.jsonl")
        lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in inputs]
    else:
        raise ConfigError(_kinds_refused(inputs))
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
    return path


def _kinds_refused(inputs: list) -> str:
    """Why a list of inputs is refused: the first that is neither a string nor a dict, by position and value
    (a pandas column's missing text is a float nan: "not float, str" said neither), else the mix."""
    odd = next(((i, item) for i, item in enumerate(inputs, 1) if not isinstance(item, (str, dict))), None)
    if odd is not None:
        return (f"input {odd[0]} is {type(odd[1]).__name__} {odd[1]!r:.40}, not a string; predict() takes a list of "
                "strings or a list of dicts; a missing text can be \"\" (its row is nulls)")
    return ("predict() takes a list of strings or a list of dicts (one kind per call), not both; a text pair is a "
            "dict of the columns the model was fine-tuned with")
