"""Fine-tuning recipe: a pre-trained encoder + a task head, trained by the one `Trainer`.

    finetune("classification", model_dir, "train.csv", "dev.csv", out_dir, sections)

1. read the data through the task's entry (`bertkit.tasks.TASKS`: CSV/TSV/JSONL text sets,
   CoNLL, SQuAD JSON, multiple-choice JSONL, or a built-in real data set), build the label set
   from the training labels and refuse dev labels the training data never shows;
2. put a fresh head on the encoder (`id2label`/`label2id`/`problem_type` in its config, so
   the saved model loads in the matching `transformers` Auto class);
3. train with `bertkit.train.Trainer`: AdamW groups, warmup + linear decay, clipping,
   accumulation, optional layer-wise lr decay (`train.llrd`), length-bucketed batches with
   dynamic padding; optional class weights (`train.class_weights="balanced"`:
   w_c = N / (C * n_c), the loss is the weighted mean of the cross-entropies);
4. evaluate on dev `evals_per_epoch` times per epoch; the best dev score (`select_metric`;
   higher is better, except mse and loss) is saved, and training stops after `patience`
   evaluations without improvement (0 = never). When the task reports a dev `loss`
   (classification) and selects on another metric, an evaluation that ties the best score
   exactly and has a lower dev loss is the new best (`tie_metric`): on a small dev set scores tie
   often, and the first of equal scores may be a barely trained model;
5. OUT ends with the best model + tokenizer (config with the labels), `finetune_summary.json`
   (written last: its presence marks a finished run), `metrics.jsonl`, `curves.png` and
   `finetune_config.json` (the options, which a `resume` must repeat).

The run owns OUT (`bertkit.runtime.run_dir`: a second run on it is refused); `--model` and `--out` must
not contain each other; `overwrite` trains into a new sibling directory that replaces OUT only
once the run has succeeded; `resume` continues from OUT's newest checkpoint (one is written at
the end, every `train.save_every` steps, and when SIGINT/SIGTERM stop the run).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import shlex
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.checkpoint import load_into, read_config, read_state_dict
from bertkit.models.families import families, family_of
from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import BertkitError, ConfigError, DataError
from bertkit.models.heads import BertForMultipleChoice, BertForSequenceClassification
from bertkit.models.hub_cache import existing_model_dir
from bertkit.io import atomic_write_json, loads_json, read_text
from bertkit.peft import DEFAULT_LR as PEFT_DEFAULT_LR
from bertkit.peft import PEFT_KEYS, get_peft_model, make_config
from bertkit.recipes.blend import blend_entry, check_blend
from bertkit.recipes.decision import threshold_entry
from bertkit.runtime.run_dir import (check_apart, check_saved_options, list_checkpoints, not_a_model,
                                     publish_best, refuse_nothing_to_resume, remove_leftovers, replacing,
                                     run_lock, warn_resuming_from_scratch)
from bertkit.tasks import (BUILTIN_DATA, SUMMARY_FILE, TASKS, Collator, DataConfig, Task, TaskSpec,
                           baseline_metrics, batching_length, builtin_labels, clean_metrics, evaluate_examples,
                           get_task, load_examples, parse_source, subsample)
from bertkit.tasks.baseline import (examples_hash, has_tfidf_baseline, summary_entry as tfidf_summary,
                                    training_data_record, trivial_entry)
from bertkit.tasks.builtin import default_dev, resolve_source, source_name
from bertkit.tasks.class_folders import is_class_folder, one_class_error
from bertkit.tasks.formats import (PAIR_COLUMN, build_label_map, check_labels_known, count_shared, input_kind,
                                   names_a_pair_column, text_key)
from bertkit.tasks.long_text import check_long_text_task
from bertkit.tasks.tfidf_blend import remove_blend
from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.coverage import UNKNOWN_SHARE, count_unknown
from bertkit.train import LengthBucketedBatches, TrainConfig, Trainer
from bertkit.settings.config_io import bertkit_names, check_keys, dataclass_from_dict
from bertkit.runtime.process_group import DistContext, init_distributed, leave
from bertkit.train.early_stopping import BestKeeper
from bertkit.models.variants import linformer


# ---------------------------------------------------------------------------- options
MIN_STEPS = 300  # train.min_steps: the fewest optimizer steps of a fine-tune set by train.epochs
CLASS_WEIGHTS = ("none", "balanced")  # train.class_weights: "balanced" weighs each class by N / (K * n_class)


@dataclass
class FinetuneOptions:
    """Keys of `[train]` beyond TrainConfig's: the length of the run and model selection."""

    # Up to 6 epochs, stopped after 2 dev evaluations without a better score; the best is kept.
    # Measured against 3 fixed epochs (docs/results.md, issue 31): WordNet supersenses +9.3 points,
    # kernel-doc passages +2.3, fortunes +2.2, BBC level; never below.
    epochs: float = 6.0  # the most epochs: sets max_steps unless train.max_steps is given
    # A small training set gives too few updates in `epochs` passes: 100 BBC articles at batch 16 made
    # 42 steps and a model at 0.40 test accuracy (docs/results.md, "Small training sets"). Such a run
    # is stretched to min_steps, its evaluations still `epochs x evals_per_epoch` (each a round of
    # ceil(min_steps / epochs) steps over the set); not when train.max_steps is given, nor
    # train.epochs without train.min_steps. 0 = never stretch.
    min_steps: int = MIN_STEPS
    patience: int = 2  # evaluations without a better dev score before stopping; 0 = never stop
    # dev metric of the best checkpoint; "" = the task's own (its first, as accuracy; regression: mse);
    # mse, loss: lowest wins
    select_metric: str = ""
    evals_per_epoch: int = 1  # dev evaluations per epoch (unless train.eval_every is given)
    class_weights: str = "none"  # "none" | "balanced" (single-label and token classification)
    baseline: bool = True  # also fit the TF-IDF baseline on the same split (bertkit/tasks/baseline.py)
    blend_tfidf: bool = False  # blend the model with that baseline, weight chosen on dev (recipes/blend.py)

    def __post_init__(self) -> None:
        if not (isinstance(self.epochs, (int, float)) and self.epochs > 0):
            raise ConfigError(f"train.epochs must be a positive number, got {self.epochs!r}")
        for name, least in (("patience", 0), ("evals_per_epoch", 1), ("min_steps", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigError(f"train.{name} must be an integer >= {least}, got {value!r}")
        for name in ("baseline", "blend_tfidf"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"train.{name} must be true or false, got {getattr(self, name)!r}")
        if self.blend_tfidf and not self.baseline:
            raise ConfigError("train.blend_tfidf blends the model with its TF-IDF baseline, which train.baseline=false "
                              "(--no-baseline) switches off: drop one of them")
        if self.class_weights not in CLASS_WEIGHTS:
            raise ConfigError(f"train.class_weights must be \"none\" or \"balanced\", got {self.class_weights!r}")


# Fine-tuning defaults that differ from pre-training's TrainConfig defaults (Devlin et al.:
# lr 2e-5..5e-5, batch 16/32, warmup 10%).
TRAIN_DEFAULTS = {"lr": 5e-5, "batch_size": 16, "warmup_ratio": 0.1, "log_every": 10, "keep_last": 1}
# [model]: dropout overrides of the config, classifier_pooling ("pooler" | "cls" | "mean": what a
# sequence-classification or multiple-choice head reads, bertkit/models/heads.py), and freeze_encoder
# (as in continued pre-training): true trains the head only, the encoder's weights stay as loaded;
# decoder_layers (seq2seq): the decoder warm-starts from the checkpoint's first N layers;
# cross_attention_init (seq2seq): "random" or "self_attention" (each new cross-attention layer a
# copy of its layer's self-attention, bertkit/tasks/seq2seq.py);
# attention_low_rank (+ _sharing) turns a dense encoder into a Linformer one: the new E, F start as
# segment means over data.max_length positions (variants/linformer.py, init_segment_means).
# The config keys are each model family's own (`finetune_keys`, bertkit/models/families.py): BERT's
# dropouts, pooling and attention_low_rank; a key the checkpoint's family does not take is refused
# (check_model_overrides), never ignored.
RECIPE_MODEL_KEYS = ("decoder_layers", "cross_attention_init")  # read by the seq2seq builder, not config fields


def model_keys() -> list[str]:
    """Every [model] key: each family's config overrides, then the recipe's own."""
    family_keys = [key for family in families() for key in family.finetune_keys]
    return list(dict.fromkeys(family_keys)) + ["freeze_encoder", *RECIPE_MODEL_KEYS]


def section_keys() -> dict[str, list[str]]:
    """Valid `--set section.key` names."""
    train = [f.name for f in dataclasses.fields(TrainConfig)] + [f.name for f in dataclasses.fields(FinetuneOptions)]
    return {"data": [f.name for f in dataclasses.fields(DataConfig)], "train": train, "model": model_keys(),
            "peft": list(PEFT_KEYS)}


@dataclass
class Recipe:
    data: DataConfig
    train: TrainConfig
    options: FinetuneOptions
    model: dict
    explicit_max_steps: bool
    explicit_eval_every: bool
    explicit_eval_at_start: bool = False
    # train.min_steps may lengthen the run: not when train.max_steps is given, nor train.epochs
    # without train.min_steps (a user who names the epochs gets them)
    stretch: bool = True
    peft: dict = dataclasses.field(default_factory=dict)  # [peft]: method = "lora" | ..., settings
    freeze_encoder: bool = False
    # data.max_length named by the user: kept (and refused when longer than the model's positions);
    # not named: the default 128, or the model's positions when it has fewer (fit_max_length)
    explicit_max_length: bool = True


def floor_applies(epochs_named: bool, min_steps_named: bool) -> bool:
    """Whether train.min_steps may stretch a run set by its epochs: not when the user named the epochs
    without the floor (a user who names the epochs gets them), for a fine-tune and a search's trials alike."""
    return not epochs_named or min_steps_named


def build_recipe(sections: dict | None) -> Recipe:
    """DataConfig, TrainConfig, FinetuneOptions and model overrides from TOML-like sections."""
    sections = dict(sections or {})
    valid = section_keys()
    for name in sections:
        owners = [section for section, keys in valid.items() if name in keys]
        if name not in valid and owners:  # `epochs = 2` above every [section] header of a recipe file
            raise ConfigError(f"{name} is a key of [{owners[0]}], not a section: put it under [{owners[0]}] "
                              f"({owners[0]}.{name})")
        if name in ("tokenizer", "early_stopping"):  # `finetune --config configs/pretrain-tiny.toml`
            raise ConfigError(f"the recipe has a [{name}] section: it is a pre-training recipe (bertkit pretrain "
                              "--config); finetune reads a fine-tuning recipe such as configs/finetune-bbc.toml")
        if name not in valid:
            close = difflib.get_close_matches(name, list(valid), n=1)
            raise ConfigError(f"unknown section [{name}] in the recipe"
                              + (f"; did you mean [{close[0]}]?" if close else f" (sections: {', '.join(valid)})"))
    for name, values in sections.items():
        if not isinstance(values, dict):
            raise ConfigError(f"[{name}] must be a table of keys, got {values!r}")
        sections[name] = bertkit_names(values, valid[name], name)  # train.learning_rate is train.lr
        check_keys(sections[name], valid[name], name)
    data = dataclass_from_dict(DataConfig, dict(sections.get("data", {})), "data")
    train_values = dict(TRAIN_DEFAULTS)
    peft = dict(sections.get("peft", {}))
    if peft and peft.get("method") is None:
        raise ConfigError(f"peft settings {sorted(peft)} but no method: pass --peft lora|adapter|prefix "
                          "(or peft.method)")
    if peft:  # PEFT trains few parameters: a larger default lr
        make_config(**peft)  # bad settings fail now, before the data is read
        train_values["lr"] = PEFT_DEFAULT_LR[peft["method"]]
    train_values.update(sections.get("train", {}))
    option_names = {f.name for f in dataclasses.fields(FinetuneOptions)}
    options = dataclass_from_dict(FinetuneOptions, {k: v for k, v in train_values.items() if k in option_names},
                                  "train")
    train_only = {k: v for k, v in train_values.items() if k not in option_names}
    explicit_max_steps = "max_steps" in train_only
    explicit_eval_every = "eval_every" in train_only
    train_only.setdefault("max_steps", 1)  # replaced by the epoch count once the data is known
    train = dataclass_from_dict(TrainConfig, train_only, "train")
    model = dict(sections.get("model", {}))
    for key, value in model.items():  # dropout probabilities; the config checks them again later
        probability = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1
        if "dropout" in key and not probability:
            raise ConfigError(f"model.{key} must be a number in [0, 1), got {value!r}")
    layers = model.get("decoder_layers")
    if layers is not None and (not isinstance(layers, int) or isinstance(layers, bool) or layers < 1):
        raise ConfigError(f"model.decoder_layers must be a positive integer, got {layers!r}")
    freeze = model.pop("freeze_encoder", False)
    if not isinstance(freeze, bool):
        raise ConfigError(f"model.freeze_encoder must be true or false, got {freeze!r}")
    if freeze and peft:
        raise ConfigError("model.freeze_encoder and [peft] both choose what trains; use one of them")
    stretch = not explicit_max_steps and floor_applies("epochs" in train_values, "min_steps" in train_values)
    return Recipe(data, train, options, model, explicit_max_steps, explicit_eval_every,
                  "eval_at_start" in train_only, stretch, peft, freeze, "max_length" in sections.get("data", {}))


# ---------------------------------------------------------------------------- model
def build_task_model(model_dir: str, task: Task, labels: list[str] | None,
                     model_overrides: dict | None = None) -> nn.Module:
    """The encoder of `model_dir` with a freshly initialised head for `labels`.

    A head already in the checkpoint is reused only when it has the same labels in the same
    order (continuing a fine-tune); otherwise it is dropped and a new one initialised.
    """
    cls = task.head_class(model_dir)  # the task's head in the checkpoint's family
    config = cls.config_class.from_pretrained(model_dir)
    changes = {**(model_overrides or {}), **task.head_config(labels)}
    same_labels = (config.id2label or {}) == changes.get("id2label") and task.labels_of is not None
    model = cls(config.replace(**changes))
    state = read_state_dict(model_dir)
    if not same_labels or cls.__name__ not in (config.architectures or []):
        state = {k: v for k, v in state.items() if not k.startswith(family_of(config).task_head_prefixes)}
    report = load_into(model, state, cls.base_model_prefix)
    encoder = cls.base_model_prefix + "."
    new_by_design = ("pooler", "low_rank")  # a pooler-less checkpoint; Linformer projections added by the config
    encoder_missing = [k for k in report.missing_keys
                       if k.startswith(encoder) and not any(part in k for part in new_by_design)]
    if encoder_missing:
        raise BertkitError(f"{model_dir} lacks {len(encoder_missing)} encoder weights ({encoder_missing[0]}, ...); "
                           f"pass a pre-trained encoder's model directory{not_a_model(model_dir)}")
    if any("pooler" in k for k in report.missing_keys) and cls in (BertForSequenceClassification,
                                                                   BertForMultipleChoice):
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


ANNOUNCE_BASELINE_FROM = 5_000  # training texts from which the TF-IDF fit takes long enough to be said
BASELINE_SKIPPED = "TF-IDF baseline: skipped (Ctrl-C while it was fitted)"
BASELINE_PENDING = "TF-IDF baseline: not computed, the run ended while it was fitted"  # replaced by the fit
MODEL_FILES_MARKERS = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", SUMMARY_FILE)
RUN_FILE = "finetune_config.json"  # the options of the run, checked when it is resumed


def _taken(out_dir: str) -> list[str]:
    if not os.path.isdir(out_dir):
        return []
    return sorted(n for n in os.listdir(out_dir) if n in MODEL_FILES_MARKERS or n.startswith("checkpoint-"))


def run_record(task: str, model_dir: str, train_source: str, dev_source: str | None, recipe: Recipe) -> dict:
    """What a resumed run must share with the run it continues (OUT/finetune_config.json)."""
    def where(source):  # a file by its absolute path (the same file from another directory)
        return os.path.abspath(source) if source and os.path.exists(source) else source

    train = dataclasses.asdict(recipe.train)
    derived = {"max_steps": recipe.explicit_max_steps, "eval_every": recipe.explicit_eval_every}
    for name, given in derived.items():
        if not given:  # set from train.epochs once the data is known (run_length): no placeholder here
            train[name] = None
    return {"run": {"task": task, "model": os.path.abspath(model_dir), "train_data": where(train_source),
                    "dev_data": where(dev_source)},
            "data": dataclasses.asdict(recipe.data),
            "train": {**train, **dataclasses.asdict(recipe.options)},
            "model": {**recipe.model, "freeze_encoder": recipe.freeze_encoder}, "peft": recipe.peft}


def check_out_dir(out_dir: str, overwrite: bool, resume: bool = False, record: dict | None = None) -> bool:
    """Refuse to mix a new run into a directory holding another model, unless overwriting;
    with `resume`, refuse options that differ from the run's. True: there is a run to resume."""
    taken = _taken(out_dir)
    if resume and overwrite:
        raise ConfigError("--resume continues the run in --out and --overwrite replaces it: pass one of them")
    if resume and list_checkpoints(out_dir):
        check_saved_options(out_dir, RUN_FILE, record or {}, required=True)
        return True
    if resume and taken:
        raise BertkitError(f"{out_dir} holds a finished run ({', '.join(taken[:3])}) and no checkpoint to resume; "
                           "pass --overwrite to train again, or choose a new --out directory")
    if resume:
        warn_resuming_from_scratch(out_dir)
    if taken and not overwrite:
        unfinished = all(n.startswith("checkpoint-") for n in taken)  # stopped before its summary was written
        hint = "pass --resume to continue it, " if any(n.startswith("checkpoint-") for n in taken) else ""
        python = "resume=True or overwrite=True" if hint else "overwrite=True"  # a notebook's rerun (walk AE)
        raise BertkitError(f"{out_dir} already holds {'an unfinished run' if unfinished else 'a model'} "
                           f"({', '.join(taken[:3])}); {hint}choose a new --out directory or pass --overwrite "
                           f"(from Python: finetune(..., {python}))")
    return False


def check_same_data(out_dir: str, record: dict) -> None:
    """Refuse to resume on training or dev examples other than the run's (a file edited after a
    Ctrl-C): the path alone was compared, and the run went on with other data, silently. A run
    recorded before the fingerprints were passes."""
    path = os.path.join(out_dir, RUN_FILE)
    saved = loads_json(read_text(path), path).get("run", {})
    for split, key in (("train", "train_sha256"), ("dev", "dev_sha256")):
        if key in saved and saved[key] != record["run"][key]:
            source = record["run"][f"{split}_data"]
            raise BertkitError(f"--resume: the {split} data {source} is not what the run started with (its examples "
                               "changed since); resume with the data as it was, or start a new run in another --out")


# ---------------------------------------------------------------------------- data
@dataclass
class TaskData:
    """The examples of one run and what they decide: the task (refined), labels, dev spec."""

    task: Task
    train: list
    dev: list
    labels: list[str] | None
    spec: TaskSpec
    dev_source: str
    dev_in_training: int = 0  # dev texts that are also training texts: the dev scores are not held out


def refuse_one_label(train_source: str, train: Sequence, id2label: dict) -> None:
    """A training set of one label (not label sets: "is it X" is a two-way question) gives a model that
    predicts it for every input and scores 1 on a dev set of it."""
    if len(id2label) == 1 and not any(isinstance(getattr(example, "label", None), list) for example in train):
        if is_class_folder(train_source):
            raise one_class_error(train_source, id2label[0])
        raise DataError(f"{train_source}: every training example has the label {id2label[0]!r}; a classifier needs "
                        "examples of at least two labels to tell apart: add examples of the others")


def prepare_labels(task: Task, train_source: str, train: Sequence, dev: Sequence, dev_source: str | None = None
                   ) -> list[str] | None:
    """Label names in id order (None for tasks without a label set); dev labels must be known."""
    if task.labels_of is None:
        return None
    inventory = builtin_labels(parse_source(train_source)[0])
    train_labels = task.labels_of(train)
    if inventory is None:
        label2id, id2label = build_label_map(train_labels)
        refuse_one_label(train_source, train, id2label)
    else:
        check_labels_known(train_labels, {n: i for i, n in enumerate(inventory)}, "train", train_source)
        id2label = dict(enumerate(inventory))
        label2id = {n: i for i, n in id2label.items()}
    check_labels_known(task.labels_of(dev), label2id, "dev", dev_source)
    absent = sorted(set(train_labels) - set(task.labels_of(dev)) - {None})
    if absent and inventory is None:  # a built-in's label inventory may name labels no split holds
        shown = ", ".join(repr(str(name)) for name in absent[:5]) + (", ..." if len(absent) > 5 else "")
        warnings.warn(f"the dev split has no example of {len(absent)} training label(s) ({shown}): the dev score, "
                      "which picks the checkpoint, cannot tell how the model does on them")
    return [id2label[i] for i in range(len(id2label))]


def read_pairs_by_name(task: Task, train_source: str, data: DataConfig) -> None:
    """A training file with a column named "text_pair" (formats.PAIR_COLUMN: transformers' name for a pair's
    second text, which --task similarity reads unasked) is read as pairs when data.pair_column is unset, and
    said: walk AA's first run, from the README's line, trained on each pair's first text alone, with a warning
    only. Set in the run's data settings, so the spec records it and evaluate and predict read pairs too."""
    if data.pair_column or not task.pairs_by_name or parse_source(train_source)[0] in BUILTIN_DATA:
        return
    if names_a_pair_column(resolve_source(task, train_source, "train")):
        data.pair_column = PAIR_COLUMN
        print(f"{train_source}: column {PAIR_COLUMN!r} is read as each row's second text (a pair of texts); "
              f"--set data.pair_column=NAME reads another column, and a file without it trains on single texts",
              flush=True)


def load_task_data(task: Task, train_source: str, dev_source: str | None, recipe: Recipe) -> TaskData:
    """Read train and dev, refine the task from the training labels, build the label set."""
    if dev_source is None:
        dev_source = default_dev(train_source)  # a built-in's dev split, a cached data set's validation split
        if dev_source is None:
            raise ConfigError("--dev is required with your own training data (the dev set picks the best checkpoint); "
                              f"bertkit split --input {shlex.quote(train_source)} --out DIR makes train, dev and test from it")
    read_pairs_by_name(task, train_source, recipe.data)
    train = load_examples(task, train_source, "train", recipe.data)
    dev = load_examples(task, dev_source, "dev", recipe.data)
    if not train:
        raise DataError(f"{train_source}: no training examples")
    if not dev:
        raise DataError(f"{dev_source}: no dev examples")
    train = subsample(train, recipe.data.max_train_examples, recipe.train.seed)
    dev = subsample(dev, recipe.data.max_eval_examples, recipe.train.seed + 1)
    if task.refine is not None:
        refined, dev_refined = task.refine(train), task.refine(dev)
        if refined is task and dev_refined is not task:
            raise DataError(f"{dev_source}: dev labels are {dev_refined.name} but training labels are {task.name}")
        if refined is not task:  # said, not silent: the head, loss and metrics change with it (walk Y)
            print(f"{train_source}: the labels give {refined.description}, so --task {task.name} runs as "
                  f"{refined.name}", flush=True)
        task = refined
    if recipe.options.class_weights == "balanced" and not task.class_weights:
        raise ConfigError(f"train.class_weights=\"balanced\" is for single-label or token classification, "
                          f"not {task.name}")
    check_long_text_task(task.name, recipe.data.long_text)
    shared = 0
    if parse_source(train_source)[0] not in BUILTIN_DATA:  # the user's own data; built-in splits are fixed
        shared = warn_about_shared_texts(train, dev)
    labels = prepare_labels(task, train_source, train, dev, dev_source)
    spec = TaskSpec(task, recipe.data, task.allows_no_answer(train))
    if not spec.allow_no_answer and task.allows_no_answer(dev):
        warnings.warn("the dev split has questions with no answer (SQuAD 2.0 \"is_impossible\") but the training split "
                      "has none, so the model never learns to answer \"no answer\" and scores 0 on them: add "
                      "unanswerable training questions, or remove them from dev")
    return TaskData(task, train, dev, labels, spec, dev_source, shared)


def warn_about_shared_texts(train: Sequence, dev: Sequence) -> int:
    """Texts of the dev split that are also training texts (the dev score, which picks the
    checkpoint, then measures memory), and training texts given two labels; for examples with a
    `text` (classification, regression, pairs, embedding). Returns how many dev texts are shared."""
    shared, kind = count_shared(train, dev), input_kind([*train, *dev])  # pairs are counted as pairs
    if shared:
        warnings.warn(f"{shared} of the dev split's {len(dev)} {kind} are also training {kind}: the dev score, which "
                      f"picks the checkpoint, overstates how the model does on new text; keep each {kind[:-1]} on "
                      "one side")
    labels_of: dict = {}
    for example in train:
        label = getattr(example, "label", None)
        labels_of.setdefault(text_key(example), set()).add(tuple(label) if isinstance(label, list) else label)
    mixed = [key for key, labels in labels_of.items() if key is not None and len(labels) > 1]
    if mixed:
        warnings.warn(f"{len(mixed)} training {kind[:-1]}(s) are given different labels (e.g. {mixed[0][0][:60]!r}); "
                      "the model cannot get both right: correct or drop them")
    return shared


def warn_about_unknown_tokens(features: Sequence[dict], tokenizer, model_dir: str) -> None:
    """A vocabulary that does not cover the training text (another script, emoji): the model reads
    those words as one [UNK] each, and nothing says so otherwise."""
    unk = tokenizer.unk_token_id
    if unk is None or not features or "input_ids" not in features[0]:
        return
    # one sequence per feature, or several (an embedding row's text and positive)
    counts = count_unknown((feature["input_ids"] for feature in features), unk)
    if counts.share > UNKNOWN_SHARE:
        warnings.warn(f"{counts.share:.1%} of the training tokens are [UNK]: {model_dir}'s vocabulary does not "
                      "cover much of this text (another script, emoji); start from a model whose vocabulary does "
                      "(a multilingual one), or pre-train on your text with its own tokenizer (README)")


TIE_METRIC = "loss"  # settles exact ties of the selected dev score (early_stopping.py says why)


def tie_metric(task: Task, metric: str) -> str | None:
    """The dev metric that decides between evaluations with equal `metric`: the task's dev loss
    when it reports one (minimised) and `metric` is another; None otherwise (the first of equal
    scores stays)."""
    reports_loss = TIE_METRIC in task.metric_names and TIE_METRIC in task.lower_is_better
    return TIE_METRIC if reports_loss and metric != TIE_METRIC else None


def select_metric(task: Task, options: FinetuneOptions) -> str:
    metric = options.select_metric or task.default_metric
    if metric not in task.metric_names:
        raise ConfigError(f"train.select_metric={metric!r} is not a dev metric of {task.name}; use one of "
                          f"{', '.join(task.metric_names)}")
    return metric


def check_model_overrides(config, overrides: dict) -> None:
    """Refuse a [model] key the checkpoint's family does not take (BERT's hidden_dropout_prob on
    another family's checkpoint): it would fail deep inside, or be kept and silently ignored. An
    encoder-decoder's keys go to both of its halves, its encoder's family."""
    own = family_of(config).finetune_keys
    foreign = sorted(k for k in overrides if k not in own and k not in ("freeze_encoder", *RECIPE_MODEL_KEYS))
    if foreign:
        raise ConfigError(f"model.{foreign[0]} is not a setting of this {config.model_type} checkpoint; "
                          f"its [model] settings are {', '.join([*own, 'freeze_encoder'])}")


# ---------------------------------------------------------------------------- the recipe
def fit_max_length(recipe: Recipe, model_dir: str) -> None:
    """data.max_length not named and longer than the model's positions: the model's positions, said
    on one line. A model pre-trained by the tiny recipes (configs/pretrain-tiny*.toml: 64 positions)
    was refused by the default 128 until the user found data.max_length (walk X)."""
    if recipe.explicit_max_length or not os.path.isfile(os.path.join(model_dir, "config.json")):
        return  # a model that is not there is refused where it is loaded
    positions = read_config(model_dir).max_sequence_length
    if recipe.data.max_length > positions:
        # the default stride keeps its ratio to the length, a quarter: QA's windows must overlap by less
        # than half, and 32 of 64 was refused (data.doc_stride was named by nobody)
        stride = recipe.data.doc_stride
        if stride == DataConfig.doc_stride and stride >= positions // 2:
            stride = positions // 4
        strided = (f"; data.doc_stride: {stride}, a quarter of it (the default, {recipe.data.doc_stride})"
                   if stride != recipe.data.doc_stride else "")
        print(f"data.max_length: {positions}, the model's positions (the default, {recipe.data.max_length}, is "
              f"longer than it reads){strided}", flush=True)
        recipe.data = dataclasses.replace(recipe.data, max_length=positions, doc_stride=stride)


def refuse_head_only(task: Task, recipe: Recipe) -> None:
    """--peft or model.freeze_encoder on a task whose model trains whole, before any work: frozen, a
    sentence model trained nothing (refused after loading, leaving OUT/finetune_config.json) and an
    encoder-decoder failed with an AttributeError traceback (walk X)."""
    if recipe.peft and not task.peft:
        raise ConfigError(f"--peft is not available for --task {task.name}: its model trains whole; drop --peft")
    method = recipe.peft.get("method") if recipe.peft else None
    if method and isinstance(task.peft, tuple) and method not in task.peft:
        raise ConfigError(f"--peft {method} is not available for --task {task.name} (an encoder-decoder); use "
                          f"--peft {' or --peft '.join(task.peft)}")
    if recipe.freeze_encoder and not task.freeze_encoder:
        raise ConfigError(f"model.freeze_encoder is not available for --task {task.name}: its model trains whole "
                          "(no head apart from the encoder); drop model.freeze_encoder")


def encoder_to_freeze(model: nn.Module) -> nn.Module:
    """What model.freeze_encoder freezes: the encoder under `base_model_prefix`; an encoder-decoder's
    encoder half, so its decoder (cross-attention, LM head) learns to read the frozen states."""
    if getattr(model, "is_encoder_decoder", False):
        return model.encoder
    return getattr(model, model.base_model_prefix)


def build_model(model_dir: str, data: TaskData, recipe: Recipe, model_fn=None, progress: bool = True) -> nn.Module:
    """The task model (or a PEFT wrapper of it), its head initialised from train.seed."""
    config = read_config(model_dir)
    if recipe.data.max_length > config.max_sequence_length:
        raise ConfigError(f"data.max_length={recipe.data.max_length} exceeds the model's "
                          f"{config.max_sequence_length} positions; use data.max_length="
                          f"{config.max_sequence_length} or less")
    for key in RECIPE_MODEL_KEYS:
        if key in recipe.model and key not in data.task.model_keys:
            readers = " or ".join(t.name for t in TASKS.values() if key in t.model_keys)
            raise ConfigError(f"model.{key} is for --task {readers} (an encoder-decoder), not {data.task.name}")
    check_model_overrides(config, recipe.model)
    torch.manual_seed(recipe.train.seed)  # the new head's initialisation
    model = (model_fn or data.task.build_model or build_task_model)(model_dir, data.task, data.labels, recipe.model)
    if data.task.init_head is not None and model_fn is None and data.task.build_model is None:  # a new head
        data.task.init_head(model, data.train)
    if getattr(model, "layout", None) is not None:  # a sentence model (sentence_layout.py): its saved layout reads
        model.layout.max_seq_length = recipe.data.max_length  # texts at the length it is fine-tuned and scored at
    if recipe.model.get("attention_low_rank") is not None and getattr(config, "attention_low_rank", None) is None:
        # new projections on a dense checkpoint: start from its attention, not random token mixtures
        linformer.init_segment_means(model, recipe.data.max_length)
    if recipe.freeze_encoder:
        encoder_to_freeze(model).requires_grad_(False)
    if recipe.peft:  # frozen base + adapter; OUT then holds the adapter directory (bertkit.peft)
        model = get_peft_model(model, make_config(**recipe.peft), base_model_path=model_dir)
        if progress:
            model.print_trainable_parameters()
    return model


def run_length(recipe: Recipe, batches: LengthBucketedBatches, task: Task) -> tuple[TrainConfig, int]:
    """TrainConfig with max_steps from the epoch count and eval_every from evals_per_epoch (and
    eval_at_start for a task whose checkpoint is already a model of it). A set too small for
    train.min_steps in train.epochs passes is trained in rounds of several passes (`steps_per_round`)."""
    steps_per_epoch = max(1, len(batches) // recipe.train.grad_accum)
    round_steps = steps_per_round(steps_per_epoch, recipe.options) if recipe.stretch else steps_per_epoch
    changes = {"eval_at_start": True} if task.starts_trained and not recipe.explicit_eval_at_start else {}
    if not recipe.explicit_max_steps:
        changes["max_steps"] = max(1, math.ceil(recipe.options.epochs * round_steps))
    if not recipe.explicit_eval_every:
        changes["eval_every"] = max(1, round_steps // recipe.options.evals_per_epoch)
    return dataclasses.replace(recipe.train, **changes), steps_per_epoch


def stretched(recipe: Recipe, steps_per_epoch: int) -> bool:
    """Whether train.min_steps lengthened this run (Recipe.stretch says when it may)."""
    return recipe.stretch and steps_per_round(steps_per_epoch, recipe.options) > steps_per_epoch


def steps_per_round(steps_per_epoch: int, options: FinetuneOptions) -> int:
    """The steps that stand for one epoch in the run's length and evaluations: the epoch itself, or
    ceil(min_steps / epochs) when the epochs would give fewer than train.min_steps steps."""
    return max(steps_per_epoch, math.ceil(options.min_steps / options.epochs))


def length_line(recipe: Recipe, rows: int, steps_per_epoch: int, train_config: TrainConfig,
                examples: int | None = None) -> str | None:
    """The run's first line when train.min_steps shaped its length: it stretched a small set's run,
    or would have but for train.epochs named alone, a recipe file's too (walk W: configs/finetune-
    wordnet-tagging.toml on 200 sentences plans 21 steps, patience stopped it at 9, dev f1 0.008;
    with --set train.min_steps=300 as well, 300 steps and dev f1 0.434). `examples`: the training
    examples, said beside the rows when they differ (QA's windows: 200 questions made 204 rows)."""
    options, source = recipe.options, f" (from {examples:,} examples)" if examples not in (None, rows) else ""
    each = f"{source} make {steps_per_epoch} step{'s' * (steps_per_epoch != 1)} an epoch"
    if stretched(recipe, steps_per_epoch):
        return (f"train.min_steps={options.min_steps}: {rows:,} training rows{each}, so "
                f"the run is up to {train_config.max_steps} steps ({train_config.max_steps / steps_per_epoch:.1f} "
                f"epochs), the dev set read every {train_config.eval_every} (--set train.min_steps=0: "
                f"{options.epochs:g} epochs)")
    # under half the floor: where small sets failed (21, 39, 78 steps); configs/finetune-bbc.toml's
    # 3 named epochs of BBC (291 steps) are not worth a line
    short = options.min_steps and train_config.max_steps < options.min_steps / 2
    if recipe.stretch or recipe.explicit_max_steps or not short:
        return None
    return (f"train.epochs={options.epochs:g} is named, so train.min_steps={options.min_steps} does not stretch the "
            f"run: {rows:,} training rows{each}, {train_config.max_steps} steps in all (--set "
            f"train.min_steps={options.min_steps} as well: that many steps in as many evaluations)")


def finetune(task: Task | str, model_dir: str | os.PathLike, train_source: str | os.PathLike,
             dev_source: str | os.PathLike | None, out_dir: str | os.PathLike,
             sections: dict | None = None, overwrite: bool = False, progress: bool = True,
             model_fn=None, train_wrapper=None, resume: bool = False) -> dict:
    """Fine-tune `model_dir` on `train_source` for `task`; returns the summary dict.

    `dev_source` None means the built-in set's dev split (built-in training data only).
    `sections` holds `data`, `train` and `model` tables (see DataConfig, TrainConfig,
    FinetuneOptions; model: dropout overrides). `resume` continues OUT's newest checkpoint with
    the same options (bit-exact), `overwrite` replaces a model in OUT once the new run succeeded.
    Hooks for recipes built on this one (distillation, bertkit/recipes/distill.py):
    `model_fn(model_dir, task, labels, model_overrides)` builds the task model instead of
    `build_task_model`; `train_wrapper(model)` wraps it into the module the Trainer optimises
    (its forward gives the loss), while dev evaluation and the saved model stay `model`.

    Under torchrun each of the W processes trains on its share of the batches (DDP averages the
    gradients), so an epoch takes 1/W of the steps; rank 0 evaluates, keeps the best model and
    returns the summary (the others return {}). A process group joined here is left at the end.
    """
    model_dir, train_source, dev_source, out_dir = as_strings(model_dir, train_source, dev_source, out_dir)
    recipe = build_recipe(sections)
    ctx = init_distributed(recipe.train.device)
    recipe.train.precision_on(ctx.device)  # fp16 without a GPU: refused before the data is read
    try:
        summary = _finetune(task, model_dir, train_source, dev_source, out_dir, recipe, ctx, overwrite, resume,
                            progress and ctx.is_main, model_fn, train_wrapper)
    except BaseException:
        leave(ctx, wait=False)  # a peer may have failed too: do not wait for it
        raise
    leave(ctx)
    return summary


def as_strings(*paths) -> list:
    """Paths as the strings the recipe reads (a built-in name is a string too): a notebook's pathlib.Path
    failed deep inside as "'PosixPath' object has no attribute 'partition'" (walk AE); None stays None."""
    return [os.fspath(path) if isinstance(path, os.PathLike) else path for path in paths]


def _finetune(task_name: Task | str, model_dir: str, train_source: str, dev_source: str | None, out_dir: str,
              recipe: Recipe, ctx: DistContext, overwrite: bool, resume: bool, progress: bool, model_fn,
              train_wrapper) -> dict:
    started = time.time()
    task = get_task(task_name)  # the one look-up: the entry travels from here
    refuse_head_only(task, recipe)
    model_dir = existing_model_dir(model_dir)  # before the data is read (Python callers skip the CLI's check)
    check_apart(model_dir, out_dir)
    fit_max_length(recipe, model_dir)  # before the run's record, which holds the length
    for option, source in (("--train", train_source), ("--dev", dev_source)):
        if source and os.path.exists(source):  # a file in OUT: --overwrite would delete it, a run mix into it
            check_apart(source, out_dir, option)
    record = run_record(task.name, model_dir, train_source, dev_source, recipe)
    refuse_nothing_to_resume(out_dir, resume)  # before the lock makes the folder
    with run_lock(out_dir, f"finetune --task {task.name}"):
        resume = check_out_dir(out_dir, overwrite, resume, record)  # before the slow parts
        data = load_task_data(task, train_source, dev_source, recipe)
        if recipe.options.blend_tfidf:
            check_blend(data.task.name)  # (classification refines to multi-label on the data)
        record["run"].update(train_sha256=examples_hash(data.train), dev_sha256=examples_hash(data.dev))
        if resume:
            check_same_data(out_dir, record)
        metric = select_metric(data.task, recipe.options)
        tokenizer = Tokenizer.from_pretrained(model_dir)
        model = build_model(model_dir, data, recipe, model_fn, progress)
        label2id = {n: i for i, n in enumerate(data.labels or [])}
        # named by its source: a refusal of the training set says which data set it is
        features = data.task.encode(tokenizer, data.train, recipe.data, label2id, True,
                                    source_name(train_source, "train"))
        warn_about_unknown_tokens(features, tokenizer, model_dir)
        trained: nn.Module = model
        if recipe.options.class_weights == "balanced":
            trained = WeightedLoss(model, balanced_weights(features, model.config.num_labels))
        if train_wrapper is not None:
            trained = train_wrapper(trained)
        with replacing(out_dir, replace=overwrite and bool(_taken(out_dir))) as work:
            if ctx.is_main:
                os.makedirs(work, exist_ok=True)
                remove_leftovers(work, keep_run=resume)
                atomic_write_json(os.path.join(work, RUN_FILE), record)
            ctx.barrier()
            trainer, keeper, train_config, steps_per_epoch = train_task_model(
                work, recipe, data, tokenizer, (model, trained), features, metric, resume, progress, ctx)
            if not ctx.is_main:
                return {}
            publish_best(work, keeper.best_dir)
            remove_blend(work)  # one a killed attempt of this run left: chosen for another model, if any
            summary = run_summary(data, recipe, train_config, model, features, trainer, steps_per_epoch,
                                  keeper, metric, model_dir, train_source, started)
            atomic_write_json(os.path.join(work, SUMMARY_FILE), summary)  # a whole model before the baseline
            if data.task.at_threshold is not None:
                record_threshold(work, summary, data, metric, keeper.tie_metric)
            summary = {**summary, "tfidf_baseline": tfidf_baseline(data, recipe, train_source, metric, keeper)}
            if recipe.options.blend_tfidf:
                summary["tfidf_blend"] = blend_entry(work, data.task.name, data.train, data.dev,
                                                     summary["tfidf_baseline"], metric, keeper.tie_metric)
            summary["wall_time_s"] = round(time.time() - started, 1)
            atomic_write_json(os.path.join(work, SUMMARY_FILE), summary)
    return summary


def record_threshold(work: str, summary: dict, data: TaskData, metric: str, tie: str | None) -> None:
    """The decision threshold chosen on dev for the saved model (recipes/decision.py), recorded in
    the summary and in its spec, which predict and evaluate read; `best_dev` becomes the dev scores
    at it, the saved model's (the checkpoint's at 0.5 stay in dev_history and the entry's grid)."""
    entry = summary["decision_threshold"] = threshold_entry(work, data.task, data.dev, metric, tie)
    if "threshold" in entry:
        summary["spec"]["threshold"], summary["best_dev"] = entry["threshold"], entry["dev"]
    atomic_write_json(os.path.join(work, SUMMARY_FILE), summary)


def tfidf_baseline(data: TaskData, recipe: Recipe, train_source: str, metric: str, keeper: BestKeeper) -> dict | None:
    """The summary's `tfidf_baseline` (tasks/baseline.py), fitted after the model is saved: on a
    large training set it is the slowest part after training, so it is announced, and Ctrl-C
    while it runs skips it rather than the run."""
    if fits_tfidf(data, recipe) and len(data.train) >= ANNOUNCE_BASELINE_FROM:
        print(f"TF-IDF baseline: fitting on {len(data.train):,} training texts, one model per value of C "
              f"(Ctrl-C skips it; the model is saved)", flush=True)
    try:
        return tfidf_summary(recipe.options.baseline, data.task.name, train_source, data.train, data.dev,
                             recipe.data, recipe.train.seed, metric, keeper.tie_metric)
    except KeyboardInterrupt:
        return unfitted_baseline(BASELINE_SKIPPED, data, recipe, train_source)


def fit_skipped_baseline(out_dir: str, task: Task | str, train_source: str, dev_source: str | None,
                         sections: dict | None) -> dict:
    """The summary of the finished run in `out_dir`, its TF-IDF baseline fitted now if Ctrl-C
    skipped it then (a resumed `--search` does this for trial 0, whose baseline every trial shares)."""
    path = os.path.join(out_dir, SUMMARY_FILE)
    summary = loads_json(read_text(path), path)
    if (summary.get("tfidf_baseline") or {}).get("note") != BASELINE_SKIPPED:
        return summary
    recipe = build_recipe(sections)
    data = load_task_data(get_task(task), train_source, dev_source, recipe)
    metric = select_metric(data.task, recipe.options)
    summary["tfidf_baseline"] = tfidf_summary(recipe.options.baseline, data.task.name, train_source, data.train,
                                              data.dev, recipe.data, recipe.train.seed, metric,
                                              tie_metric(data.task, metric))
    atomic_write_json(path, summary)
    return summary


def fits_tfidf(data: TaskData, recipe: Recipe) -> bool:
    return recipe.options.baseline and has_tfidf_baseline(data.task.name)


def unfitted_baseline(note: str, data: TaskData, recipe: Recipe, train_source: str) -> dict | None:
    """A `tfidf_baseline` entry without a fit: why (`note`), and the training data evaluate's
    trivial baseline reads again; None for a run that fits no TF-IDF baseline."""
    if not fits_tfidf(data, recipe):
        return None
    return {"note": note, **training_data_record(train_source, data.train, recipe.data, recipe.train.seed)}


def train_task_model(work: str, recipe: Recipe, data: TaskData, tokenizer, models: tuple, features, metric: str,
                     resume: bool, progress: bool, ctx: DistContext):
    """Train `models = (model, trained)` into `work`: the Trainer optimises `trained` (model or a
    wrapper of it), dev metrics are `model`'s and the best one is kept in work/.best.
    Returns (trainer, keeper, train_config, steps_per_epoch)."""
    model, trained = models
    batches = LengthBucketedBatches(features, recipe.train.batch_size, Collator(tokenizer.pad_token_id),
                                    lengths=[batching_length(f) for f in features], seed=recipe.train.seed,
                                    rank=ctx.rank, world_size=ctx.world_size)  # this rank's share
    train_config, steps_per_epoch = run_length(recipe, batches, data.task)
    line = length_line(recipe, len(features), steps_per_epoch, train_config, len(data.train))
    if ctx.is_main and line:
        print(line, flush=True)
    saved = fine_tuned_tokenizer(tokenizer, recipe.data)  # what OUT and each checkpoint hold
    keeper = BestKeeper(work, metric, recipe.options.patience, saved, metric in data.task.lower_is_better,
                        tie_metric=tie_metric(data.task, metric))
    dev_features = data.task.encode(tokenizer, data.dev, recipe.data, None, False, data.dev_source)  # once per run

    def evaluate_dev(_model) -> dict:
        metrics = evaluate_examples(model, tokenizer, data.spec, data.dev, name=data.dev_source, features=dev_features)
        return {k: (v if v is not None and not math.isnan(v) else float("nan")) for k, v in metrics.items()}

    # The Trainer tells the keeper every evaluation (it saves `trained`, whose save_pretrained is
    # the task model's) and replays the logged ones when resuming, so patience and best survive.
    trainer = Trainer(trained, batches, train_config, work, eval_fn=evaluate_dev, tokenizer=saved,
                      progress=progress, keeper=keeper, ctx=ctx)
    trainer.train(resume=resume)
    return trainer, keeper, train_config, steps_per_epoch


def fine_tuned_tokenizer(tokenizer: Tokenizer, data: DataConfig) -> Tokenizer:
    """The checkpoint's tokenizer as a fine-tuned model directory saves it: model_max_length is the
    length the model was fine-tuned and chosen at (data.max_length), not the checkpoint's (512), so
    bertkit.Tokenizer and transformers (AutoTokenizer, pipeline with truncation) cut a text where
    predict and evaluate do; they read 512 tokens of a model fine-tuned at 128 and gave other
    predictions. With data.long_text="head_tail" or "chunks" predict reads a text's head and tail,
    or every window of that length, which a reader that only truncates cannot: it gets the first
    window, a row as long as the model was trained on. Training itself keeps the checkpoint's
    tokenizer (the long-text reader measures whole texts with it)."""
    saved = tokenizer.with_backend(tokenizer.backend_tokenizer)  # a second handle on the same vocabulary
    saved.model_max_length = data.max_length
    return saved


def run_summary(data: TaskData, recipe: Recipe, train_config: TrainConfig, model, features, trainer: Trainer,
                steps_per_epoch: int, keeper: BestKeeper, metric: str, model_dir: str, train_source: str,
                started: float) -> dict:
    """What finetune_summary.json records: the task spec, data, settings, and the dev results."""
    steps = trainer.step
    return {
        "spec": data.spec.to_dict(),
        "labels": data.labels,
        "model": model_dir,
        "train_data": train_source,
        "dev_data": data.dev_source,
        "train_examples": len(data.train),
        "dev_examples": len(data.dev),
        "dev_in_training": data.dev_in_training,  # the end-of-run advice must not tune to a memorised dev split
        "train_features": len(features),
        "train_config": dataclasses.asdict(train_config),
        "options": dataclasses.asdict(recipe.options),
        "model_overrides": recipe.model,
        "peft": recipe.peft and {**recipe.peft, **_peft_counts(model)},
        "steps": steps,
        "steps_per_epoch": steps_per_epoch,
        "epochs_run": steps / steps_per_epoch,
        "stretched_to_min_steps": stretched(recipe, steps_per_epoch),  # a small set's run made longer
        # train.epochs named without train.min_steps (or train.max_steps): the floor did not apply
        "epochs_named_alone": not recipe.stretch and not recipe.explicit_max_steps,
        "stopped_early": steps < train_config.max_steps,
        # what ended it early: patience (no better dev score) or the clock (train.max_minutes); none
        # when it trained every step asked (patience may run out at the last evaluation, the end anyway)
        "stopped_by": (("patience" if keeper.should_stop else "train.max_minutes")
                       if steps < train_config.max_steps else None),
        "select_metric": metric,
        "tie_metric": keeper.tie_metric,
        "best_step": keeper.best_step,
        "best_dev": clean_metrics(keeper.best_metrics),
        "dev_baseline": clean_metrics(baseline_metrics(data.spec, data.train, data.dev, trainer.tokenizer)),
        "reference_baseline": clean_metrics(data.task.reference(data.dev)) if data.task.reference else None,
        "tfidf_baseline": unfitted_baseline(BASELINE_PENDING, data, recipe, train_source),  # fitted once saved
        "trivial_baseline": trivial_entry(recipe.options.baseline, data.task, train_source, data.train, recipe.data,
                                          recipe.train.seed),
        "dev_history": [clean_metrics(row) for row in keeper.history],
        "wall_time_s": round(time.time() - started, 1),  # this attempt's: since resumed_at_step when resumed
        "resumed_at_step": trainer.resumed_at,
        # the checkpoint's clock at the resume: the earlier attempts' training steps (None when not resumed)
        "resumed_train_seconds": None if trainer.resumed_seconds is None else round(trainer.resumed_seconds, 1),
        "train_seconds": round(trainer.train_seconds, 1),  # training steps of every attempt (the checkpoint's clock)
    }


def _peft_counts(model) -> dict:
    count = model.trainable_parameters()
    return {"trainable_parameters": count.trainable, "total_parameters": count.total,
            "trainable_share": count.share}
