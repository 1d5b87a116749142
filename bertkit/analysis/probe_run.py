"""Linear probes on every layer of a frozen encoder (layer 0 = the embeddings): what `bertkit probe` runs.

1. Read the task's items and hold out a test split (probe_data.py).
2. Collect each layer's features (`collect_features`) and train one `LinearProbe` per layer.
   With `control`, Hewitt & Liang's control task: every word type gets a random label;
   selectivity = accuracy - control accuracy. With `random_init`, everything again on the same
   architecture with random weights, which separates what pre-training learned from what the
   probe finds in any projection.
3. Write OUT/results.jsonl (one row per encoder and layer), OUT/probe.png and OUT/summary.json,
   and log the per-layer table.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from bertkit.analysis.loading import load_encoder, model_name
from bertkit.analysis.probe_data import (ProbeData, features, load_items, resolve_level, split_items, token_inputs,
                                         token_labels)
from bertkit.analysis.probing import control_task_labels, plot_probe, probe_layers
from bertkit.errors import ConfigError, DataError
from bertkit.io import atomic_open, atomic_write_json

POOLINGS = {"sentence": ("mean", "cls"), "token": ("first", "mean")}  # the first is the default


@dataclass
class ProbeSettings:
    level: str | None = None  # sentence / token; None: the task's own
    limit: int | None = None  # at most this many examples, after a seeded shuffle
    control: bool = False  # add the control task and report selectivity
    random_init: bool = False  # also probe the same architecture with random weights
    pooling: str | None = None  # POOLINGS[level]; None: its first
    test_fraction: float = 0.2
    weight_decay: float = 1e-3  # L2 penalty of the probes
    max_length: int = 128  # tokens per input (longer ones are cut)
    batch_size: int = 64
    seed: int = 0  # data shuffle, split, control labels, random init
    device: str = "cpu"  # where the encoders run (bertkit/runtime/devices.py names)
    text_column: str = "text"  # a .csv/.tsv/.jsonl file's columns
    label_column: str = "label"


@dataclass
class ProbeInputs:
    """A task's items ready to probe: data, token inputs (token level), split, labels."""

    data: ProbeData
    prepared: tuple | None
    train: np.ndarray
    test: np.ndarray
    labels: np.ndarray
    control: np.ndarray | None


def check_settings(task: str, s: ProbeSettings) -> str:
    """The task's level, after checking the settings against it."""
    if s.limit is not None and s.limit < 2:
        raise ConfigError(f"--limit must be at least 2, got {s.limit}")
    if not 0.0 < s.test_fraction < 1.0:
        raise ConfigError(f"--test-fraction must be between 0 and 1, got {s.test_fraction}")
    if s.batch_size < 1 or s.max_length < 3:
        raise ConfigError("--batch-size must be >= 1 and --max-length >= 3")
    level = resolve_level(task, s.level)
    if s.pooling is not None and s.pooling not in POOLINGS[level]:
        raise ConfigError(f"--pooling for {level}-level probes must be one of {', '.join(POOLINGS[level])}, "
                          f"got {s.pooling!r}")
    return level


def prepare_inputs(task: str, level: str, tokenizer, s: ProbeSettings, max_length: int) -> ProbeInputs:
    data = load_items(task, level, s.limit, s.seed, (s.text_column, s.label_column))
    prepared = None
    if level == "token":
        prepared = token_inputs(tokenizer, data, max_length)
        token_labels(data, prepared[1])
    if len(data.labels) < 2:
        raise DataError(f"{task} gave {len(data.labels)} items to probe; need more (raise --limit)")
    train, test = split_items(data, s.test_fraction, s.seed)
    labels = np.array(data.labels)
    control = control_task_labels(data.types, labels, seed=s.seed) if s.control else None
    return ProbeInputs(data, prepared, train, test, labels, control)


def probe_encoders(model, tokenizer, inputs: ProbeInputs, s: ProbeSettings, max_length: int,
                   log: Callable[[str], None]) -> dict[str, list[dict]]:
    """Per encoder ("pretrained", and "random-init" if asked for): one result row per layer."""
    encoders = [("pretrained", model)]
    if s.random_init:
        torch.manual_seed(s.seed)
        # the same class: the loaded encoder's own family (whichever it is) with fresh weights
        encoders.append(("random-init", type(model)(model.config).eval().to(s.device)))
    results: dict[str, list[dict]] = {}
    for name, encoder in encoders:
        t0 = time.perf_counter()
        layers = features(encoder, tokenizer, inputs.data, s.batch_size, max_length, s.pooling, inputs.prepared)
        t1 = time.perf_counter()
        results[name] = probe_layers(layers, inputs.labels, inputs.train, inputs.test, inputs.control,
                                     weight_decay=s.weight_decay)
        log(f"{name}: features {t1 - t0:.1f}s, probes {time.perf_counter() - t1:.1f}s")
    return results


def write_results(out: str, task: str, level: str, results: dict[str, list[dict]], title: str) -> None:
    """OUT/results.jsonl (one row per encoder and layer) and OUT/probe.png."""
    os.makedirs(out, exist_ok=True)
    with atomic_open(os.path.join(out, "results.jsonl"), "w", encoding="utf-8") as f:
        for name, rows in results.items():
            for row in rows:
                f.write(json.dumps({"encoder": name, **row, "task": task, "level": level}, ensure_ascii=False) + "\n")
    plot_probe(results["pretrained"], os.path.join(out, "probe.png"), title=title,
               baseline=results.get("random-init"))


def probe_table(rows: list[dict], baseline: list[dict] | None) -> list[str]:
    head = f"{'layer':>5}  {'accuracy':>8}  {'train':>6}"
    has_control = "control_accuracy" in rows[0]
    if has_control:
        head += f"  {'control':>7}  {'selectivity':>11}"
    if baseline:
        head += f"  {'random-init':>11}"
        if has_control:
            head += f"  {'rand. sel.':>10}"
    lines = [head]
    for k, r in enumerate(rows):
        line = f"{r['layer']:>5}  {r['accuracy']:8.3f}  {r['train_accuracy']:6.3f}"
        if has_control:
            line += f"  {r['control_accuracy']:7.3f}  {r['selectivity']:11.3f}"
        if baseline:
            line += f"  {baseline[k]['accuracy']:11.3f}"
            if has_control:
                line += f"  {baseline[k]['selectivity']:10.3f}"
        lines.append(line)
    return lines


def run_probe(model_dir: str, task: str, out: str, settings: ProbeSettings | None = None,
              log: Callable[[str], None] = print) -> tuple[dict, dict[str, list[dict]]]:
    """Probe every layer of the encoder in `model_dir` on `task`; write OUT's files and log the
    table. Returns the summary (OUT/summary.json) and the rows per encoder (OUT/results.jsonl)."""
    s = settings or ProbeSettings()
    level = check_settings(task, s)
    start = time.perf_counter()
    model, tokenizer = load_encoder(model_dir)
    model.to(s.device)
    max_length = min(s.max_length, model.config.max_sequence_length)
    inputs = prepare_inputs(task, level, tokenizer, s, max_length)
    data, train, test = inputs.data, inputs.train, inputs.test
    classes, examples = len(set(data.labels)), len(set(data.groups))
    log(f"probe: {task} ({level} level), {inputs.labels.size} items from {examples} "
        f"examples, {classes} labels; {train.size} train / {test.size} test")
    if test.size < 30:  # one item is 3+ points: differences between layers are noise
        log(f"note: the accuracies rest on {test.size} test items; give more data (or a larger --limit) "
            "to compare layers")
    results = probe_encoders(model, tokenizer, inputs, s, max_length, log)
    write_results(out, task, level, results, f"{model_name(model_dir)}: {os.path.basename(task)} ({level} level)")
    best = max(results["pretrained"], key=lambda r: r["accuracy"])
    summary = {"task": task, "level": level, "model": os.path.abspath(model_dir), "items": int(inputs.labels.size),
               "examples": examples, "classes": classes, "train": int(train.size), "test": int(test.size),
               "pooling": s.pooling or POOLINGS[level][0], "control": bool(s.control),
               "weight_decay": s.weight_decay, "seed": s.seed, "limit": s.limit,
               "best_layer": best["layer"], "best_accuracy": best["accuracy"], "majority": best["majority"],
               "seconds": round(time.perf_counter() - start, 1)}
    atomic_write_json(os.path.join(out, "summary.json"), summary)
    log(f"majority-class accuracy {best['majority']:.3f}; layer 0 = embeddings")
    for line in probe_table(results["pretrained"], results.get("random-init")):
        log(line)
    log(f"best layer {best['layer']}: accuracy {best['accuracy']:.3f}; wrote {out}/results.jsonl, "
        f"probe.png, summary.json ({summary['seconds']:.0f}s)")
    return summary, results
