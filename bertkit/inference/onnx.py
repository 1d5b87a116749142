"""ONNX export of every task model and of the sentence encoder, checked against ONNX Runtime.

    from bertkit.inference.onnx import export_onnx
    export_onnx(minilm_dir, "minilm-onnx", task="embedding")
    export_onnx("runs/bbc", "runs/bbc-onnx", task=get_task("classification"))   # a task's own graph
    bertkit.tasks.export_directory("runs/bbc", "runs/bbc-onnx")                 # the task from the directory

The directory written holds `model.onnx`, the tokenizer files and `config.json` (labels).
Inputs are int64 `input_ids`, `attention_mask` and (when the model has segments)
`token_type_ids`, all (batch, sequence) with both axes dynamic. Outputs per task:

    encoder               last_hidden_state (B, T, H) [, pooler_output (B, H)]
    embedding             sentence_embedding (B, H) = normalize(sum_t m_t h_t / sum_t m_t)
    masked-lm             logits (B, T, V)
    a fine-tuning task    its `Task.export_outputs` (bertkit/tasks): classification, regression and
                          multi-label logits (B, C); token-classification logits (B, T, C); qa
                          start_logits (B, T), end_logits (B, T)

This module knows the graphs that are no fine-tuning task (`GRAPHS`); a task's graph is described
by its registry entry, passed in as the `task` (anything with `name`, `head_class(model_dir)` and
`export_outputs`: output attribute -> dynamic axes). `bertkit.tasks.export_directory` picks the
task of a fine-tuned directory and calls `export_onnx`.

The graph is traced by torch's TorchScript-based exporter (`torch.onnx.export(dynamo=False)`):
the torch.export-based one needs onnxscript and cannot trace the encoder's input checks
(`int(input_ids.max())`) or its "no padding, no bias" shortcut (`bool(mask.all())`), which are
data-dependent branches. Tracing records one side of each branch, so the example batch has a
padded row: the traced graph always adds the padding bias, which is exact for unpadded batches
too (a bias of zeros). After export the graph is run by ONNX Runtime on three batches of other
shapes and compared with bertkit (`verify_onnx`): a variant the tracer gets wrong fails there.

ONNX and ONNX Runtime are an optional extra (`pip install bertkit[onnx]`), imported only here.
"""

from __future__ import annotations

import importlib
import os
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from bertkit.models.checkpoint import read_config
from bertkit.models.heads import mean_pool
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models.heads import BertForMaskedLM
from bertkit.models.encoder import BertModel
from bertkit.peft import refuse_adapter_dir
from bertkit.tokenizer import Tokenizer

OPSET = 17  # the first opset with a LayerNormalization op; ONNX Runtime >= 1.14 runs it
@dataclass(frozen=True)
class Graph:
    """A graph that is no fine-tuning task: the model class it loads and its outputs, each with
    its dynamic axes (a task's registry entry has the same three members)."""

    name: str
    model_class: type
    export_outputs: dict

    def head_class(self, model_dir: str) -> type:
        return self.model_class  # from_pretrained builds the directory's family's counterpart


SEQUENCE = ("batch", "sequence")
ENCODER = Graph("encoder", BertModel, {"last_hidden_state": SEQUENCE})  # + pooler_output (B, H) with a pooler
EMBEDDING = Graph("embedding", BertModel, {"sentence_embedding": ("batch",)})
MASKED_LM = Graph("masked-lm", BertForMaskedLM, {"logits": SEQUENCE})
GRAPHS = {graph.name: graph for graph in (ENCODER, EMBEDDING, MASKED_LM)}
# config.json `architectures` suffixes that mean the MLM graph, for a directory exported without a task.
MLM_ARCHITECTURES = ("ForMaskedLM", "ForPreTraining")
TOLERANCE = 1e-4  # verify_onnx: largest |ONNX Runtime - bertkit| accepted after export (fp32)


def require(module: str):
    """Import onnx / onnxruntime (optional: the [onnx] extra), or say how to install them."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"ONNX export needs the optional packages onnx and onnxruntime ({module} is "
                          "not installed); run: pip install bertkit[onnx]") from None


def export_target(task):
    """`task` as what this module exports: a name in GRAPHS, or an entry with `export_outputs`
    (a `bertkit.tasks.Task`, a `Graph`)."""
    if isinstance(task, str):
        if task not in GRAPHS:
            raise ConfigError(f"unknown export graph {task!r}; use one of {', '.join(GRAPHS)}, or pass a task's "
                              f"entry (bertkit.tasks.get_task({task!r}); `bertkit export --task {task}` does)")
        return GRAPHS[task]
    if not task.export_outputs:
        raise ConfigError(f"task {task.name} has no ONNX graph (its Task names no export_outputs)")
    return task


class ExportGraph(nn.Module):
    """A bertkit model as a function of tensors only: (ids, mask[, types]) -> task outputs."""

    def __init__(self, model: nn.Module, task):
        super().__init__()
        self.model = model
        self.target = export_target(task)
        self.task = self.target.name
        self.with_types = bool(getattr(model.config, "type_vocab_size", 0))  # a family without segments has none
        # Eval as a whole: the exporter puts the wrapper back in the mode it found it in, and
        # a wrapper left in training mode would switch the model's dropout on.
        self.eval()

    @property
    def input_names(self) -> list[str]:
        return ["input_ids", "attention_mask"] + (["token_type_ids"] if self.with_types else [])

    @property
    def output_axes(self) -> dict[str, tuple[str, ...]]:
        """Each output's dynamic axes, in the graph's order."""
        axes = dict(self.target.export_outputs)
        if self.target is ENCODER and getattr(self.model, "pooler", None) is not None:
            axes["pooler_output"] = ("batch",)
        return axes

    @property
    def output_names(self) -> list[str]:
        return list(self.output_axes)

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> tuple[torch.Tensor, ...]:
        out = self.model(input_ids, attention_mask, token_type_ids)
        if self.target is EMBEDDING:
            return (torch.nn.functional.normalize(mean_pool(out.last_hidden_state, attention_mask), dim=-1),)
        return tuple(getattr(out, name) for name in self.output_names)


@dataclass
class ExportResult:
    path: str  # the .onnx file
    task: str
    max_difference: float | None  # verify_onnx's largest |ONNX Runtime - bertkit|; None: not verified
    threshold: float | None = None  # the decision threshold written beside the graph (tasks/export.py)


def graph_of_directory(model_dir: str) -> Graph:
    """The graph of a model directory that holds no fine-tuned task head: MLM logits for an MLM
    checkpoint, else the sentence embedding (`bertkit embed`'s encoder). A task head refers the
    caller to its task (bertkit.tasks.export_directory finds it)."""
    architectures = read_config(model_dir).architectures or []  # either family
    if any(a.endswith(MLM_ARCHITECTURES) for a in architectures):
        return MASKED_LM
    heads = [a for a in architectures if "For" in a]
    if heads:
        raise ConfigError(f"{model_dir} holds a {heads[0]} model: export it with its task (`bertkit export`, "
                          "bertkit.tasks.export_directory, or task=bertkit.tasks.get_task(NAME))")
    return EMBEDDING


def load_for_export(model_dir: str, task) -> nn.Module:
    """The model of `task` (a GRAPHS name or a task entry) from `model_dir`, refusing a head that
    the checkpoint does not hold."""
    target = export_target(task)
    refuse_adapter_dir(model_dir, "export")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unused keys (heads a bare encoder does not need) are fine
        model, report = target.head_class(model_dir).from_pretrained(model_dir, output_loading_info=True)
    encoder_keys = ("bert.", "embeddings.", "encoder.", "pooler.", model.base_model_prefix + ".", "layers.",
                    "final_norm.")  # every family's encoder, under a head or bare
    head = [k for k in report.missing_keys if not k.startswith(encoder_keys)]
    if head:
        raise CheckpointError(f"{model_dir} has no trained {target.name} head (missing {', '.join(head[:3])}); "
                              "export a fine-tuned model, or pass --task embedding / encoder")
    return model


def example_inputs(config, batch: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random ids in a (batch, length) batch whose last row is padded to about half the length
    (row 0 stays full): both the padded and the unpadded case are exercised."""
    generator = torch.Generator().manual_seed(seed)
    low = min(config.pad_token_id + 1, config.vocab_size - 1)  # skip the pad id (and ids below it)
    ids = torch.randint(low, config.vocab_size, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    if batch > 1:
        mask[-1, max(1, length // 2):] = 0
        ids[-1][mask[-1] == 0] = config.pad_token_id
    inputs = {"input_ids": ids, "attention_mask": mask}
    type_vocab_size = getattr(config, "type_vocab_size", 0)
    if type_vocab_size:
        types = torch.zeros(batch, length, dtype=torch.long)
        if type_vocab_size > 1:
            types[:, length // 2:] = 1  # a second segment, as in a text pair
        inputs["token_type_ids"] = types * mask
    return inputs


def export_model(model: nn.Module, path: str, task, verify: bool = True) -> ExportResult:
    """Trace `model` (a bertkit model for `task`: a GRAPHS name or a task entry; run in eval mode)
    into the ONNX file `path`;
    then, unless verify=False, compare ONNX Runtime with bertkit on three other shapes (one
    longer than a local-attention layer's sliding window)."""
    require("onnx")  # torch.onnx.export writes the file with the onnx package
    was_training = model.training
    # the unpadding switch of an encoder that has one, as the caller left it on each instance (None: the class's default)
    unpadding = {m: vars(m).get("unpad") for m in model.modules() if hasattr(type(m), "unpad")}
    try:
        for m in unpadding:
            m.unpad = False  # traced as padded batches: unpadding's buckets depend on the lengths
        return _export(ExportGraph(model, task), path, verify)
    finally:
        model.train(was_training)
        for m, own in unpadding.items():
            if own is None:
                del m.unpad
            else:
                m.unpad = own


def _export(graph: ExportGraph, path: str, verify: bool) -> ExportResult:
    model = graph.model
    config = model.config
    # A padded row in the example: the traced graph keeps the padding bias (module docstring).
    # Longer than a sliding window (local-attention layers), so its band is traced too.
    length = max(16, 2 * getattr(config, "sliding_window", 0) + 3)
    example = example_inputs(config, batch=2, length=min(length, config.max_sequence_length))
    axes = {name: dict(enumerate(SEQUENCE)) for name in graph.input_names}
    axes.update({name: dict(enumerate(names)) for name, names in graph.output_axes.items()})
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        # The exporter's deprecation notice and the tracer's notes on the input checks (which
        # become constants of the trace, by design) say nothing the user can act on.
        warnings.simplefilter("ignore")
        torch.onnx.export(graph, tuple(example[name] for name in graph.input_names), path,
                          input_names=graph.input_names, output_names=graph.output_names,
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False, do_constant_folding=True)
    difference = verify_onnx(path, graph) if verify else None
    return ExportResult(path, graph.task, difference)


def onnx_session(path: str, threads: int | None = None):
    """An ONNX Runtime CPU session of `path` (`threads` intra-op threads; None: ORT's default)."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def run_onnx(session, inputs: dict[str, torch.Tensor | np.ndarray]) -> list[np.ndarray]:
    """Run an exported graph on a batch (tensors or arrays); outputs in the graph's order."""
    wanted = {i.name for i in session.get_inputs()}
    feed = {k: np.asarray(v, dtype=np.int64) for k, v in inputs.items() if k in wanted}
    return session.run(None, feed)


def verify_onnx(path: str, graph: ExportGraph, shapes=((3, 11), (1, 23), (2, 97))) -> float:
    """Largest |ONNX Runtime - bertkit| over every output on batches of `shapes` (none of them the
    traced shape); raises CheckpointError above TOLERANCE."""
    session = onnx_session(path, threads=1)
    config = graph.model.config
    worst = 0.0
    for seed, (batch, length) in enumerate(shapes, start=1):
        inputs = example_inputs(config, batch, min(length, config.max_sequence_length), seed)
        with torch.no_grad():
            expected = graph(*(inputs[name] for name in graph.input_names))
        got = run_onnx(session, inputs)
        for name, e, g in zip(graph.output_names, expected, got):
            if tuple(g.shape) != tuple(e.shape):
                raise CheckpointError(f"the exported {name} has shape {g.shape}, bertkit gives "
                                      f"{tuple(e.shape)}: this model does not trace with dynamic shapes")
            worst = max(worst, float(np.abs(g - e.numpy()).max()))
    if worst > TOLERANCE:
        raise CheckpointError(f"ONNX Runtime differs from bertkit by {worst:.2e} (> {TOLERANCE:g}) on "
                              f"{path}: this model variant does not export faithfully")
    return worst


def export_onnx(model_dir: str, out_dir: str, task=None, verify: bool = True) -> ExportResult:
    """Export the model in `model_dir` for `task` (a GRAPHS name or a task entry; default:
    `graph_of_directory`) to `out_dir/model.onnx`, with the tokenizer files and config.json beside it."""

    require("onnx")  # fail before loading anything
    refuse_adapter_dir(model_dir, "export")  # before the tokenizer: an adapter folder may have none
    task = export_target(task) if task is not None else graph_of_directory(model_dir)
    tokenizer = Tokenizer.from_pretrained(model_dir)
    model = load_for_export(model_dir, task)
    result = export_model(model, os.path.join(out_dir, "model.onnx"), task, verify)
    tokenizer.save_pretrained(out_dir)
    model.config.save_pretrained(out_dir)  # labels (id2label) and sizes for the runtime's user
    return result
