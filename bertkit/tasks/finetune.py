"""Fine-tuning recipe: a pre-trained encoder + a task head, trained by the one `Trainer`.

    finetune("classification", model_dir, "train.csv", "dev.csv", out_dir, sections)

1. read the data (CSV/TSV/JSONL text sets, CoNLL, SQuAD JSON, or a built-in real data set:
   bbc, wordnet-supersense, wordnet-tagging, wordnet-qa), build the label set from the
   training labels and refuse dev labels the training data never shows;
2. put a fresh head on the encoder (`id2label`/`label2id`/`problem_type` in its config, so
   the saved model loads in the matching `transformers` Auto class);
3. train with `bertkit.train.Trainer`: AdamW groups, warmup + linear decay, clipping,
   accumulation, optional layer-wise lr decay (`train.llrd`), length-bucketed batches with
   dynamic padding; optional class weights (`train.class_weights="balanced"`:
   w_c = N / (C * n_c), the loss is the weighted mean of the cross-entropies);
4. evaluate on dev `evals_per_epoch` times per epoch; the best dev score (`select_metric`;
   higher is better, except mse) is saved, and training stops after `patience` evaluations
   without improvement (0 = never);
5. OUT ends with the best model + tokenizer (config with the labels), `finetune_summary.json`
   (written last: its presence marks a finished run), `metrics.jsonl` and `curves.png`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertkit.checkpoint import load_into, read_state_dict
from bertkit.config import BertConfig
from bertkit.errors import BertkitError, ConfigError, DataError
from bertkit.io import atomic_write_json, iter_jsonl, temp_dir
from bertkit.tasks.alignment import IGNORE_INDEX
from bertkit.tasks.features import (Collator, DataConfig, encode_qa, encode_texts, encode_words,
                                    subsample)
from bertkit.tasks.formats import (build_label_map, check_labels_known, infer_task_kind, read_conll,
                                   read_squad, read_text_dataset)
from bertkit.tasks.predict import (DEFAULT_METRIC, LOWER_IS_BETTER, METRIC_NAMES, MODEL_CLASSES, PROBLEM_TYPES,
                                   SUMMARY_FILE, TaskSpec, baseline_metrics, check_task, evaluate_examples,
                                   json_float)
from bertkit.tasks import realdata

# ---------------------------------------------------------------------------- built-in data
BUILTIN_TASKS = {"bbc": "classification", "wordnet-supersense": "classification",
                 "wordnet-tagging": "token-classification", "wordnet-qa": "qa", "wordnet-usage-qa": "qa"}
SPLITS = ("train", "dev", "test")


def parse_source(source: str) -> tuple[str, str | None]:
    """"bbc:test" -> ("bbc", "test"); a file path -> (path, None)."""
    name, _, split = source.partition(":")
    if name in BUILTIN_TASKS:
        if split and split not in SPLITS:
            raise DataError(f"unknown split {split!r} of built-in data {name}; use {name}:train, "
                            f"{name}:dev or {name}:test")
        return name, split or None
    return source, None


def _contiguous_split(items: list, key, dev_fraction: float = 0.1, test_fraction: float = 0.2) -> dict:
    """Cut an already shuffled list into test, dev, train, moving each cut forward to where
    `key` changes, so items sharing a key (a context, a synset) stay in one split."""
    n = len(items)

    def boundary(index: int) -> int:
        while 0 < index < n and key(items[index]) == key(items[index - 1]):
            index += 1
        return index

    test_end = boundary(int(n * test_fraction + 0.5))
    dev_end = boundary(test_end + int(n * dev_fraction + 0.5))
    return {"test": items[:test_end], "dev": items[test_end:dev_end], "train": items[dev_end:]}


@functools.lru_cache(maxsize=4)
def builtin_splits(name: str) -> dict:
    """{"train", "dev", "test"} of a built-in real data set (fixed, seeded splits)."""
    if name == "bbc":
        return realdata.bbc_topics(split_seed=0)
    if name == "wordnet-supersense":
        return realdata.stratified_split(realdata.wordnet_supersense(seed=0), seed=0)
    if name == "wordnet-tagging":
        # sentences of one synset are adjacent (visited in a seeded order): keep them together
        examples = realdata.wordnet_examples_tagged(seed=0)
        return _contiguous_split(examples, key=lambda e: next(t[2:] for t in e.tags if t != "O"))
    if name == "wordnet-qa":
        examples = realdata.wordnet_qa(seed=0, impossible_fraction=0.1)
        return _contiguous_split(examples, key=lambda e: e.context)
    if name == "wordnet-usage-qa":
        return _contiguous_split(realdata.wordnet_usage_qa(seed=0), key=lambda e: e.context)
    raise DataError(f"unknown built-in data {name!r}; use one of {', '.join(BUILTIN_TASKS)}")


def builtin_labels(name: str) -> list[str] | None:
    """The full label inventory of a built-in set (rare labels may be missing from train)."""
    if name == "wordnet-supersense":
        return sorted(set(realdata.LEXNAMES))
    if name == "wordnet-tagging":
        return sorted(["O"] + [f"{p}-{s}" for s in realdata.LEXNAMES for p in ("B", "I")])
    return None


def load_examples(task: str, source: str, split: str, data: DataConfig) -> list:
    """Labelled examples of `task` from a file or a built-in set (`split` is used for a
    built-in name given without ":split")."""
    name, explicit = parse_source(source)
    if name in BUILTIN_TASKS:
        if BUILTIN_TASKS[name] != task:
            raise DataError(f"built-in data {name} is for --task {BUILTIN_TASKS[name]}, not {task}")
        return list(builtin_splits(name)[explicit or split])
    if not os.path.isfile(source):
        raise DataError(f"{source}: no such file (or built-in data name: {', '.join(BUILTIN_TASKS)})")
    if task in ("classification", "regression"):
        return read_text_dataset(source, data.text_column, data.pair_column or None, data.label_column,
                                 "number" if task == "regression" else "category", data.multilabel_sep)
    if task == "token-classification":
        examples = read_conll(source, data.token_col, data.tag_col)
        if not examples:
            raise DataError(f"{source}: no sentences; CoNLL needs one 'word ... tag' line per word and a "
                            "blank line between sentences")
        return examples
    return read_squad(source)


@dataclass
class PredictionInput:
    """Inputs to predict: examples, and for tagging of raw text the text and word spans."""

    examples: list
    texts: list[str] | None = None
    spans: list | None = None


def read_prediction_input(task: str, source: str, data: DataConfig) -> PredictionInput:
    """Unlabelled inputs for `bertkit predict`.

    classification/regression: .txt (one text per line), or .csv/.tsv/.jsonl with the text
    column (and the pair column); token-classification: .txt or .jsonl {"text": ...} (split
    into words, entities get character offsets in the text) or CoNLL (.conll, words in
    data.token_col); QA: SQuAD .json or .jsonl {"id"?, "question", "context"}; any task: a
    built-in name such as bbc:test.
    """
    from bertkit.tasks.formats import QAExample, TextExample, TokenExample
    from bertkit.tasks.predict import words_of_text

    name, explicit = parse_source(source)
    if name in BUILTIN_TASKS:
        return PredictionInput(load_examples(task, source, "test", data))
    if not os.path.isfile(source):
        raise DataError(f"{source}: no such file (or built-in data name: {', '.join(BUILTIN_TASKS)})")
    suffix = os.path.splitext(source)[1].lower()
    if task in ("classification", "regression"):
        if suffix == ".txt":
            return PredictionInput([TextExample(text=line) for line in _read_lines(source)])
        return PredictionInput(read_text_dataset(source, data.text_column, data.pair_column or None, None))
    if task == "token-classification":
        if suffix in (".txt", ".jsonl"):
            texts = _read_lines(source) if suffix == ".txt" else [r["text"] for r in _jsonl_records(source, ("text",))]
            examples, spans = [], []
            for index, text in enumerate(texts):
                words, word_spans = words_of_text(text)
                if not words:
                    raise DataError(f"{source}: input {index + 1} has no words")
                examples.append(TokenExample(words, ["O"] * len(words)))
                spans.append(word_spans)
            return PredictionInput(examples, texts, spans)
        examples = read_conll(source, data.token_col, data.tag_col)
        if not examples:
            raise DataError(f"{source}: no sentences found")
        return PredictionInput(examples)
    if suffix == ".jsonl":
        records = _jsonl_records(source, ("question", "context"))
        return PredictionInput([QAExample(str(r.get("id", i)), r["question"], r["context"])
                                for i, r in enumerate(records)])
    return PredictionInput(read_squad(source))


def _jsonl_records(path: str, keys: tuple[str, ...]) -> list[dict]:
    records = []
    for line_number, record in iter_jsonl(path):
        missing = [k for k in keys if not isinstance(record.get(k), str)]
        if missing:
            raise DataError(f"{path}: line {line_number} needs a string field {missing[0]!r}")
        records.append(record)
    if not records:
        raise DataError(f"{path}: no records")
    return records


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f]
    except UnicodeDecodeError as e:
        raise DataError(f"{path} is not UTF-8 ({e.reason} at byte {e.start}); re-encode it") from None
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise DataError(f"{path} holds no non-empty lines; put one input per line")
    return lines


# ---------------------------------------------------------------------------- options
@dataclass
class FinetuneOptions:
    """Keys of `[train]` beyond TrainConfig's: the length of the run and model selection."""

    epochs: float = 3.0  # sets max_steps unless train.max_steps is given
    patience: int = 0  # evaluations without a better dev score before stopping; 0 = never stop
    select_metric: str = ""  # dev metric of the best checkpoint; "" = the task's default (mse: lowest wins)
    evals_per_epoch: int = 1  # dev evaluations per epoch (unless train.eval_every is given)
    class_weights: str = "none"  # "none" | "balanced" (single-label and token classification)

    def __post_init__(self) -> None:
        if not (isinstance(self.epochs, (int, float)) and self.epochs > 0):
            raise ConfigError(f"train.epochs must be a positive number, got {self.epochs!r}")
        for name in ("patience", "evals_per_epoch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "patience" else 1):
                raise ConfigError(f"train.{name} must be an integer >= {0 if name == 'patience' else 1}, "
                                  f"got {value!r}")
        if self.class_weights not in ("none", "balanced"):
            raise ConfigError(f"train.class_weights must be \"none\" or \"balanced\", got {self.class_weights!r}")


# Fine-tuning defaults that differ from pre-training's TrainConfig defaults (Devlin et al.:
# lr 2e-5..5e-5, batch 16/32, warmup 10%).
TRAIN_DEFAULTS = {"lr": 5e-5, "batch_size": 16, "warmup_ratio": 0.1, "log_every": 10, "keep_last": 1}
MODEL_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")


def section_keys() -> dict[str, list[str]]:
    """Valid `--set section.key` names."""
    from bertkit.train import TrainConfig

    from bertkit.peft import PEFT_KEYS

    train = [f.name for f in dataclasses.fields(TrainConfig)] + [f.name for f in dataclasses.fields(FinetuneOptions)]
    return {"data": [f.name for f in dataclasses.fields(DataConfig)], "train": train, "model": list(MODEL_KEYS),
            "peft": list(PEFT_KEYS)}


@dataclass
class Recipe:
    data: DataConfig
    train: "object"  # TrainConfig
    options: FinetuneOptions
    model: dict
    explicit_max_steps: bool
    explicit_eval_every: bool
    peft: dict = dataclasses.field(default_factory=dict)  # [peft]: method = "lora" | ..., settings


def build_recipe(sections: dict | None) -> Recipe:
    """DataConfig, TrainConfig, FinetuneOptions and model overrides from TOML-like sections."""
    from bertkit.train import TrainConfig
    from bertkit.train.config_io import check_keys, dataclass_from_dict

    sections = dict(sections or {})
    valid = section_keys()
    check_keys(sections, valid, "finetune config")
    for name, values in sections.items():
        if not isinstance(values, dict):
            raise ConfigError(f"[{name}] must be a table of keys, got {values!r}")
        check_keys(values, valid[name], name)
    data = dataclass_from_dict(DataConfig, dict(sections.get("data", {})), "data")
    train_values = dict(TRAIN_DEFAULTS)
    peft = dict(sections.get("peft", {}))
    if peft and peft.get("method") is None:
        raise ConfigError(f"peft settings {sorted(peft)} but no method: pass --peft lora|adapter|prefix "
                          "(or peft.method)")
    if peft:  # PEFT trains few parameters: a larger default lr
        from bertkit.peft import DEFAULT_LR, make_config

        make_config(**peft)  # bad settings fail now, before the data is read
        train_values["lr"] = DEFAULT_LR[peft["method"]]
    train_values.update(sections.get("train", {}))
    option_names = {f.name for f in dataclasses.fields(FinetuneOptions)}
    options = dataclass_from_dict(FinetuneOptions, {k: v for k, v in train_values.items() if k in option_names},
                                  "train")
    train_only = {k: v for k, v in train_values.items() if k not in option_names}
    explicit_max_steps = "max_steps" in train_only
    explicit_eval_every = "eval_every" in train_only
    train_only.setdefault("max_steps", 1)  # replaced by the epoch count once the data is known
    train = dataclass_from_dict(TrainConfig, train_only, "train")
    return Recipe(data, train, options, dict(sections.get("model", {})), explicit_max_steps, explicit_eval_every,
                  peft)


# ---------------------------------------------------------------------------- model
def build_task_model(model_dir: str, task: str, kind: str, labels: list[str] | None,
                     model_overrides: dict | None = None) -> nn.Module:
    """The encoder of `model_dir` with a freshly initialised head for `labels`.

    A head already in the checkpoint is reused only when it has the same labels in the same
    order (continuing a fine-tune); otherwise it is dropped and a new one initialised.
    """
    config = BertConfig.from_pretrained(model_dir)
    changes = dict(model_overrides or {})
    if task == "qa":
        changes.update(num_labels=2, id2label=None, label2id=None, problem_type=None)
    elif kind == "regression":
        changes.update(num_labels=1, id2label=None, label2id=None, problem_type="regression")
    else:
        id2label = dict(enumerate(labels))
        changes.update(num_labels=len(labels), id2label=id2label,
                       label2id={name: i for i, name in id2label.items()},
                       problem_type=PROBLEM_TYPES.get(kind) if task != "token-classification" else None)
    same_labels = (config.id2label or {}) == changes.get("id2label") and task != "qa"
    cls = MODEL_CLASSES[task]
    model = cls(config.replace(**changes))
    state = read_state_dict(model_dir)
    head_prefixes = ("classifier.", "qa_outputs.")
    if not same_labels or cls.__name__ not in (config.architectures or []):
        state = {k: v for k, v in state.items() if not k.startswith(head_prefixes)}
    report = load_into(model, state, cls.base_model_prefix)
    encoder_missing = [k for k in report.missing_keys if k.startswith("bert.") and "pooler" not in k]
    if encoder_missing:
        raise BertkitError(f"{model_dir} lacks {len(encoder_missing)} encoder weights ({encoder_missing[0]}, ...); "
                           "pass a pre-trained BERT model directory")
    if any("pooler" in k for k in report.missing_keys) and task in ("classification", "regression"):
        warnings.warn(f"{model_dir} has no pooler weights: the pooler starts from random values", stacklevel=2)
    return model


class WeightedLoss(nn.Module):
    """A task model whose loss is the class-weighted cross-entropy (what `Trainer` trains).

    loss = sum_i w_{y_i} CE_i / sum_i w_{y_i} over labelled positions. Saving delegates to the
    wrapped model, so checkpoints are plain model directories.
    """

    def __init__(self, model: nn.Module, weights: torch.Tensor):
        super().__init__()
        self.model = model
        self.config = model.config
        self.register_buffer("weights", weights.float())

    def forward(self, labels=None, **batch):
        out = self.model(**batch)
        if labels is not None:
            logits = out.logits.reshape(-1, self.config.num_labels)
            out.loss = F.cross_entropy(logits, labels.reshape(-1), weight=self.weights, ignore_index=IGNORE_INDEX)
        return out

    def save_pretrained(self, directory, tokenizer=None) -> None:
        self.model.save_pretrained(directory, tokenizer=tokenizer)


def balanced_weights(features: Sequence[dict], num_labels: int) -> torch.Tensor:
    """w_c = N / (C * n_c) from the labels of the training features (n_c >= 1)."""
    labels = np.concatenate([np.atleast_1d(np.asarray(f["labels"])) for f in features])
    labels = labels[labels != IGNORE_INDEX]
    counts = np.maximum(np.bincount(labels, minlength=num_labels), 1)
    return torch.tensor(len(labels) / (num_labels * counts), dtype=torch.float32)


# ---------------------------------------------------------------------------- best model keeping
class BestKeeper:
    """Early stopping on a dev metric and the best model kept in OUT/.best (atomic swaps)."""

    def __init__(self, out_dir: str, metric: str, patience: int, tokenizer):
        self.out_dir = out_dir
        self.metric = metric
        self.sign = -1.0 if metric in LOWER_IS_BETTER else 1.0  # compare sign * value, higher wins
        self.patience = patience
        self.tokenizer = tokenizer
        self.best_value = -math.inf
        self.best_step: int | None = None
        self.best_metrics: dict = {}
        self.bad_evals = 0
        self.history: list[dict] = []

    @property
    def best_dir(self) -> str:
        return os.path.join(self.out_dir, ".best")

    def update(self, model: nn.Module, step: int, metrics: dict) -> bool:
        """Record one evaluation; save the model when it is the best so far. True = stop."""
        if self.metric not in metrics:
            raise ConfigError(f"train.select_metric={self.metric!r} is not a dev metric of this task; "
                              f"use one of {', '.join(sorted(metrics))}")
        self.history.append({"step": step, **metrics})
        value = metrics[self.metric]
        value = -math.inf if value is None or math.isnan(value) else self.sign * value
        if self.best_step is None or value > self.best_value:
            self.best_value, self.best_step, self.best_metrics = value, step, dict(metrics)
            self.bad_evals = 0
            self._save(model)
            return False
        self.bad_evals += 1
        return bool(self.patience) and self.bad_evals >= self.patience

    def _save(self, model: nn.Module) -> None:
        tmp = temp_dir(self.out_dir, prefix=".tmp-best-")
        try:
            model.save_pretrained(tmp, tokenizer=self.tokenizer)
            old = None
            if os.path.exists(self.best_dir):
                old = tmp + "-old"
                os.replace(self.best_dir, old)
            os.replace(tmp, self.best_dir)
            if old:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


MODEL_FILES_MARKERS = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", SUMMARY_FILE)


def _taken(out_dir: str) -> list[str]:
    if not os.path.isdir(out_dir):
        return []
    return sorted(n for n in os.listdir(out_dir) if n in MODEL_FILES_MARKERS or n.startswith("checkpoint-"))


def check_out_dir(out_dir: str, overwrite: bool) -> None:
    """Refuse to mix a new run into a directory holding another model, unless overwriting."""
    taken = _taken(out_dir)
    if taken and not overwrite:
        raise BertkitError(f"{out_dir} already holds a model ({', '.join(taken[:3])}); choose a new "
                           "--out directory or pass --overwrite")


def prepare_out_dir(out_dir: str, overwrite: bool) -> None:
    """check_out_dir, then (overwriting) remove the old model, checkpoints and temporaries."""
    check_out_dir(out_dir, overwrite)
    if os.path.isdir(out_dir):
        for name in os.listdir(out_dir):
            path = os.path.join(out_dir, name)
            if name.startswith((".best", ".tmp-best-", "checkpoint-")):  # a killed run's leftovers
                shutil.rmtree(path, ignore_errors=True)
            elif name in MODEL_FILES_MARKERS:
                os.remove(path)
    os.makedirs(out_dir, exist_ok=True)


def _publish_best(out_dir: str, best_dir: str) -> None:
    """Move the best model's files from OUT/.best into OUT (each rename is atomic)."""
    for name in os.listdir(best_dir):
        os.replace(os.path.join(best_dir, name), os.path.join(out_dir, name))
    shutil.rmtree(best_dir, ignore_errors=True)


# ---------------------------------------------------------------------------- the recipe
def labels_of(task: str, examples: Sequence) -> list:
    """The label of each example as check_labels_known takes them (tags flattened per sentence)."""
    if task == "token-classification":
        return [tag for e in examples for tag in e.tags]
    return [e.label for e in examples]


def prepare_labels(task: str, kind: str, train_source: str, train: Sequence, dev: Sequence) -> list[str] | None:
    """Label names in id order (None for regression and QA); dev labels must be known."""
    if kind in ("regression", "qa"):
        return None
    inventory = builtin_labels(parse_source(train_source)[0])
    train_labels = labels_of(task, train)
    if inventory is None:
        label2id, id2label = build_label_map(train_labels)
    else:
        check_labels_known(train_labels, {n: i for i, n in enumerate(inventory)}, "train")
        id2label = dict(enumerate(inventory))
        label2id = {n: i for i, n in id2label.items()}
    check_labels_known(labels_of(task, dev), label2id, "dev")
    return [id2label[i] for i in range(len(id2label))]


def finetune(task: str, model_dir: str, train_source: str, dev_source: str | None, out_dir: str,
             sections: dict | None = None, overwrite: bool = False, progress: bool = True,
             model_fn=None, train_wrapper=None) -> dict:
    """Fine-tune `model_dir` on `train_source` for `task`; returns the summary dict.

    `dev_source` None means the built-in set's dev split (built-in training data only).
    `sections` holds `data`, `train` and `model` tables (see DataConfig, TrainConfig,
    FinetuneOptions; model: dropout overrides).
    Hooks for recipes built on this one (distillation, bertkit/variants/distill.py):
    `model_fn(model_dir, task, kind, labels, model_overrides)` builds the task model instead of
    `build_task_model`; `train_wrapper(model)` wraps it into the module the Trainer optimises
    (its forward gives the loss), while dev evaluation and the saved model stay `model`.
    """
    from bertkit.tokenizer import Tokenizer
    from bertkit.train import LengthBucketedBatches, Trainer

    started = time.time()
    check_task(task)
    recipe = build_recipe(sections)
    check_out_dir(out_dir, overwrite)  # before the slow parts; cleaned once the data is known good
    data, options, train_config = recipe.data, recipe.options, recipe.train
    if dev_source is None:
        if parse_source(train_source)[0] not in BUILTIN_TASKS:
            raise ConfigError("--dev is required with a training file (the dev set picks the best checkpoint)")
        dev_source = parse_source(train_source)[0] + ":dev"

    train = load_examples(task, train_source, "train", data)
    dev = load_examples(task, dev_source, "dev", data)
    if not train:
        raise DataError(f"{train_source}: no training examples")
    if not dev:
        raise DataError(f"{dev_source}: no dev examples")
    train = subsample(train, data.max_train_examples, train_config.seed)
    dev = subsample(dev, data.max_eval_examples, train_config.seed + 1)

    if task == "classification":
        kind = infer_task_kind(train)
        if kind == "regression":  # cannot happen with label_type="category", kept for safety
            raise DataError(f"{train_source}: numeric labels; use --task regression")
    elif task == "regression":
        kind = "regression"
    elif task == "token-classification":
        kind = "tagging"
    else:
        kind = "qa"
    if kind in ("classification", "multilabel", "regression"):
        dev_kind = infer_task_kind(dev) if task == "classification" else "regression"
        if dev_kind != kind and not (kind == "multilabel" and dev_kind == "classification"):
            raise DataError(f"{dev_source}: dev labels are {dev_kind} but training labels are {kind}")
        if kind == "multilabel":
            dev = [dataclasses.replace(e, label=e.label if isinstance(e.label, list) else [e.label]) for e in dev]
    if options.class_weights == "balanced" and kind not in ("classification", "tagging"):
        raise ConfigError(f"train.class_weights=\"balanced\" is for single-label or token classification, "
                          f"not {kind}")
    labels = prepare_labels(task, kind, train_source, train, dev)
    spec = TaskSpec(task, kind, data,
                    allow_no_answer=kind != "qa" or any(e.is_impossible for e in train))
    metric = options.select_metric or DEFAULT_METRIC[kind]
    if metric not in METRIC_NAMES[kind]:
        raise ConfigError(f"train.select_metric={metric!r} is not a dev metric of {kind}; use one of "
                          f"{', '.join(METRIC_NAMES[kind])}")

    tokenizer = Tokenizer.from_pretrained(model_dir)
    config = BertConfig.from_pretrained(model_dir)
    if data.max_length > config.max_sequence_length:
        raise ConfigError(f"data.max_length={data.max_length} exceeds the model's {config.max_sequence_length} "
                          f"positions; use data.max_length={config.max_sequence_length} or less")
    torch.manual_seed(train_config.seed)  # the new head's initialisation
    model = (model_fn or build_task_model)(model_dir, task, kind, labels, recipe.model)
    if recipe.peft:  # frozen base + adapter; OUT then holds the adapter directory (bertkit.peft)
        from bertkit.peft import get_peft_model, make_config

        model = get_peft_model(model, make_config(**recipe.peft), base_model_path=model_dir)
        if progress:
            model.print_trainable_parameters()
    label2id = {n: i for i, n in enumerate(labels or [])}
    if kind == "tagging":
        features = encode_words(tokenizer, train, data.max_length, label2id, data.label_all_subwords, "train")
    elif kind == "qa":
        features = encode_qa(tokenizer, train, data.max_length, data.doc_stride, with_positions=True, name="train")
    else:
        features = encode_texts(tokenizer, train, data.max_length, kind, label2id, "train")
    trained: nn.Module = model
    if options.class_weights == "balanced":
        trained = WeightedLoss(model, balanced_weights(features, model.config.num_labels))
    if train_wrapper is not None:
        trained = train_wrapper(trained)

    prepare_out_dir(out_dir, overwrite)
    batches = LengthBucketedBatches(features, train_config.batch_size, Collator(tokenizer.pad_token_id),
                                    seed=train_config.seed)
    steps_per_epoch = max(1, len(batches) // train_config.grad_accum)
    changes = {}
    if not recipe.explicit_max_steps:
        changes["max_steps"] = max(1, math.ceil(options.epochs * steps_per_epoch))
    if not recipe.explicit_eval_every:
        changes["eval_every"] = max(1, steps_per_epoch // options.evals_per_epoch)
    train_config = dataclasses.replace(train_config, **changes)

    keeper = BestKeeper(out_dir, metric, options.patience, tokenizer)
    baseline = baseline_metrics(spec, train, dev)
    trainer: Trainer | None = None

    def eval_fn(_model) -> dict:
        metrics = evaluate_examples(model, tokenizer, spec, dev, name="dev")
        if keeper.update(model, trainer.step, metrics):
            trainer.stop_requested = True
        return {k: (v if v is not None and not math.isnan(v) else float("nan")) for k, v in metrics.items()}

    trainer = Trainer(trained, batches, train_config, out_dir, eval_fn=eval_fn, tokenizer=tokenizer,
                      progress=progress)
    trainer.train()
    if not trainer.ctx.is_main:
        return {}
    # Only the best model stays: the trainer's end checkpoint (with optimizer state) goes.
    for name in os.listdir(out_dir):
        if name.startswith("checkpoint-"):
            shutil.rmtree(os.path.join(out_dir, name), ignore_errors=True)
    _publish_best(out_dir, keeper.best_dir)

    summary = {
        "spec": spec.to_dict(),
        "labels": labels,
        "model": model_dir,
        "train_data": train_source,
        "dev_data": dev_source,
        "train_examples": len(train),
        "dev_examples": len(dev),
        "train_features": len(features),
        "train_config": dataclasses.asdict(train_config),
        "options": dataclasses.asdict(options),
        "model_overrides": recipe.model,
        "peft": recipe.peft and {**recipe.peft, **_peft_counts(model)},
        "steps": trainer.step,
        "steps_per_epoch": steps_per_epoch,
        "epochs_run": trainer.step / steps_per_epoch,
        "stopped_early": trainer.step < train_config.max_steps,
        "select_metric": metric,
        "best_step": keeper.best_step,
        "best_dev": _clean(keeper.best_metrics),
        "dev_baseline": _clean(baseline),
        "dev_history": [_clean(row) for row in keeper.history],
        "wall_time_s": round(time.time() - started, 1),
    }
    atomic_write_json(os.path.join(out_dir, SUMMARY_FILE), summary)
    return summary


def _peft_counts(model) -> dict:
    count = model.trainable_parameters()
    return {"trainable_parameters": count.trainable, "total_parameters": count.total,
            "trainable_share": count.share}


def _clean(metrics: dict) -> dict:
    return {k: json_float(v) if isinstance(v, float) else v for k, v in metrics.items()}
