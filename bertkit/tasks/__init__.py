"""Fine-tuning tasks: one registry entry per task (`TASKS`), and what the entries share.

- `spec.py`      the `Task` entry: reader, feature builder, head class, decoder, metrics, rows
- `registry.py`  the registered tasks; `register_task` for your own
- `sequence.py`, `tagging.py`, `qa.py`, `multiple_choice.py`: the entries
- `common.py`    input settings (`DataConfig`), the model spec (`TaskSpec`), padding, inference
- `inference.py` evaluate / predict with a fine-tuned model directory, for any task
- `builtin.py`   built-in real data sets by name (bbc, wordnet-*)
- `baseline.py`  the TF-IDF + linear model baseline beside classification and regression scores
- `long_text.py` texts longer than the window: head+tail, or chunks with averaged logits
- `export.py`    ONNX export of a model directory, the graph its task names
- torch-free: `formats.py` (CSV/TSV/JSONL, CoNLL, SQuAD, choices), `metrics.py`,
  `alignment.py`, `qa_spans.py`, `realdata.py`
"""

from bertkit.tasks.builtin import BUILTIN_DATA, builtin_labels, builtin_splits, load_examples, parse_source
from bertkit.tasks.export import export_directory
from bertkit.tasks.common import (SUMMARY_FILE, Collator, DataConfig, PredictionInput, TaskSpec, batching_length,
                                  clean_metrics, eval_order, feature_length, forward_features, json_float, model_labels,
                                  showing_progress, subsample, summing_truncations)
from bertkit.tasks.inference import (baseline_metrics, check_model_labels, evaluate_examples, inference_spec,
                                     load_for_inference, load_inference_model, load_model, predict_examples,
                                     prediction_chunks, prediction_rows, read_prediction_input, read_spec)
from bertkit.tasks.registry import TASKS, get_task, register_task, task_of_config
from bertkit.tasks.spec import Task

__all__ = [
    "TASKS", "Task", "get_task", "register_task", "task_of_config",
    "BUILTIN_DATA", "builtin_labels", "builtin_splits", "load_examples", "parse_source",
    "SUMMARY_FILE", "Collator", "DataConfig", "PredictionInput", "TaskSpec", "batching_length", "clean_metrics",
    "eval_order",
    "feature_length", "forward_features", "json_float", "model_labels", "showing_progress", "subsample",
    "summing_truncations",
    "export_directory", "baseline_metrics", "check_model_labels", "evaluate_examples", "inference_spec",
    "load_for_inference", "load_inference_model", "load_model",
    "predict_examples", "prediction_chunks", "prediction_rows", "read_prediction_input", "read_spec",
]
