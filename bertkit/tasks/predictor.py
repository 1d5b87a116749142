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
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Sequence

import torch

from bertkit.errors import BertkitError, ConfigError, DataError
from bertkit.inference.quantize import inference_copy
from bertkit.runtime.devices import resolve_device
from bertkit.runtime.precision import autocast, resolve_precision
from bertkit.tasks.common import summing_truncations
from bertkit.tasks.inference import inference_spec, load_inference_model, prediction_rows, read_prediction_input
from bertkit.tasks.spec import TaskSpec
from bertkit.tokenizer import Tokenizer

STRINGS_READ = ("strings are read as a .txt file, one text each; a task whose file holds several fields a line "
                "takes dicts of them: {\"question\": ..., \"context\": ...}, {\"text\": ..., \"text_pair\": ...}")
_LINE_BREAKS = re.compile(r"[\r\n]")  # one character each, so a space in their place keeps the offsets


class Predictor:
    """A fine-tuned model directory loaded once for `predict` (see the module docstring)."""

    def __init__(self, model, tokenizer: Tokenizer, spec: TaskSpec, device: torch.device, precision: str):
        self.model, self.tokenizer, self.spec = model, tokenizer, spec
        self.device, self.precision = device, precision

    @classmethod
    def from_pretrained(cls, model_dir: str, task: str | None = None, device: str = "auto",
                        precision: str = "auto", blend: bool = True, int8: bool = False,
                        settings: Sequence[str] = ()) -> "Predictor":
        """The model in `model_dir` (a `bertkit finetune` output) for its task (or `task`), on `device`
        ("auto": the GPU when CUDA is available), as `bertkit predict --device --precision --int8` run
        it; `settings` are predict's `--set data.key=value` strings; `blend=False` is `--no-blend`."""
        if not os.path.isdir(model_dir):
            raise ConfigError(f"{model_dir} is not a directory; give the folder bertkit finetune wrote (--out)")
        where = resolve_device(device)
        resolve_precision(precision, where)  # an impossible one refused before the model loads
        spec = inference_spec(model_dir, task, settings)
        if not blend:
            spec.blend = None
        model, tokenizer = load_inference_model(model_dir, spec)
        return cls(inference_copy(model, tokenizer, int8, where, precision), tokenizer, spec, where, precision)

    def predict(self, inputs: Sequence[str | dict] | str | dict) -> list[dict]:
        """One row per input, in order (a single input: a list of one row)."""
        inputs = [inputs] if isinstance(inputs, (str, dict)) else list(inputs)
        with tempfile.TemporaryDirectory(prefix="bertkit-predict-") as folder:
            path = _input_file(inputs, folder)
            try:
                examples = read_prediction_input(self.spec.task, path, self.spec.data)
            except BertkitError as error:  # name the inputs, not a temporary file the caller never saw
                said = str(error).replace(f"{path}: line ", "input ").replace(path, "the inputs")
                if path.endswith(".txt"):
                    said += f" ({STRINGS_READ})"
                kind = next(kind for kind in (DataError, ConfigError, BertkitError) if isinstance(error, kind))
                raise kind(said) from None
        with autocast(self.precision, self.device), summing_truncations():
            rows = prediction_rows(self.model, self.tokenizer, self.spec, examples, name="inputs")
        return [{key: value for key, value in row.items() if key != "line"} for row in rows]


def _input_file(inputs: list, folder: str) -> str:
    """The inputs as the file predict would read: strings one a line (.txt), dicts as JSON lines."""
    if not inputs:
        raise ConfigError("predict() was given no inputs; pass a list of texts (or of dicts of the task's fields)")
    kinds = {type(item) for item in inputs}
    if kinds == {str}:
        path = os.path.join(folder, "inputs.txt")
        lines = [_LINE_BREAKS.sub(" ", text) + "\n" for text in inputs]
    elif kinds == {dict}:
        path = os.path.join(folder, "inputs.jsonl")
        lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in inputs]
    else:
        names = ", ".join(sorted(kind.__name__ for kind in kinds))
        raise ConfigError(f"predict() takes a list of strings or a list of dicts (one kind per call), not {names}; "
                          "a text pair is a dict of the columns the model was fine-tuned with")
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
    return path
