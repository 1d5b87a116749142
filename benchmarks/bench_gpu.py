"""The GPU benchmark: bertkit against transformers (sdpa) and each bertkit lever on vs off, one table.

    python benchmarks/bench_gpu.py                 on a CUDA GPU, the real sizes (about 2-4 minutes)
    python benchmarks/bench_gpu.py --tiny          tiny sizes on any device (seconds; the CPU smoke test)

Rows (each a workload; its variants alternate in the same run, the order flipped every round,
as benchmarks/harness.py does on the CPU; one CUDA synchronize ends every call):

    bert_base_mlm_train     MLM training step, BERT-base, seq 128, batch 128, full rows
                            variants: bertkit, bertkit compiled layers, bertkit without dropout
                            (bertkit_no_dropout: what dropout costs), transformers
    modern_base_mlm_varied  MLM training step, ModernBERT-base, seq 512, batch 32, lengths 32..512
                            variants: bertkit unpadded, bertkit padded, bertkit compiled layers, transformers
    modern_base_mlm_packed  the same, full (packed) rows: bertkit, bertkit compiled layers, transformers
    bert_base_finetune_varied  sequence classification step, BERT-base, batch 32, lengths 16..256:
                            bertkit (its default: padded, as attention dropout keeps it off the
                            flash kernel), bertkit packed, bertkit padded, bertkit packed with attention
                            dropout inside SDPA on jagged tensors (bertkit_jagged_dropout), transformers
    bert_base_encode_varied    inference forward, BERT-base, batch 128, lengths 8..256: the same three
    modern_base_encode_varied  the same for ModernBERT-base
    bert_base_encode_texts  whole calls from 1,024 BBC paragraphs to vectors on the host (BERT-base, batch 128,
                            up to 256 tokens): SentenceEncoder.encode against a transformers loop that
                            batches as sentence-transformers does; the host's share of encoding
    bert_base_predict_varied, modern_base_predict_varied  the same batch through a sequence classifier
                            (what `bertkit predict` runs): unpadded, padded, transformers
    mini_recipe_mlm_train   the one-hour CPU recipe's step (modern mini, batch 16 x 128, full rows):
                            bertkit, transformers; is a small model launch-bound?
    mini_recipe_graphed_mlm_train  the same, and bertkit_cuda_graphs: each layer compiled in
                            "reduce-overhead" mode, replayed as a CUDA graph (GPU only)
    mini_recipe_batch128_mlm_train  the same model at batch 128 x 128: the tokens/s a larger batch buys
    gpu_recipe_mlm_train    the ten-minute GPU recipe's step (modern medium, batch 64 x 512, full rows)
    gpu_recipe_trainer_loop the same model and batch, 10 steps a call: the bare step (bertkit_step,
                            transformers) against bertkit's Trainer (host batch copied in, grad clip,
                            schedule, log row), reading each loss a step late (bertkit_trainer, the
                            default) or at once (bertkit_trainer_read_each_step): what the loop costs;
                            with train.compile too (bertkit_trainer_compiled; not with --tiny)

Everything runs under bertkit's autocast for precision "auto" (runtime/precision.py: bf16 on a
bf16 GPU, fp32 on the CPU), the same context for both libraries; training uses fused AdamW on CUDA.
Speeds count real (non-padding) tokens. `fraction_of_probe` (training rows of BERT-base) is the
model FLOP/s (3 x forward FLOPs of benchmarks/harness.py: encoder on real tokens + MLM head at the
labelled positions) over a bf16 matmul probe timed in the same run (fp32 on the CPU).
Writes OUT/gpu-bench.json and OUT/gpu-bench.md (OUT: --out, default benchmarks/results).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

import harness

import bertkit
from bertkit.data.assets import minilm_dir
from bertkit.inference.encode import SentenceEncoder
from bertkit.models import attention
from bertkit.models.modern import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForSequenceClassification,
                                   ModernBertModel)
from bertkit.runtime.precision import autocast, resolve_precision
from bertkit.tokenizer import Tokenizer
from bertkit.train import Trainer, TrainConfig

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
VOCAB, TINY_VOCAB = 30522, 1000
BERT_BASE = dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072)
BERT_TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128)
# name -> (batch, sequence length, shortest row) at the real and the tiny sizes
SHAPES = {"bert_mlm": ((128, 128, None), (4, 32, None)), "modern_mlm": ((32, 512, 32), (4, 64, 8)),
          "mini_recipe": ((16, 128, None), (4, 32, None)), "gpu_recipe": ((64, 512, None), (4, 64, None)),
          "mini_recipe_batch128": ((128, 128, None), (8, 32, None)),
          "finetune": ((32, 256, 16), (4, 32, 4)), "encode": ((128, 256, 8), (4, 32, 4))}


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def synced(fn):
    def call():
        fn()
        sync()
    return call


# ---------------------------------------------------------------------------- models and batches
def bert_pair(tiny: bool, bk_class, hf_class, **extra):
    """A transformers BERT (sdpa) and bertkit's with the same weights, both on DEVICE."""
    import transformers  # test-only dependency: a speed baseline

    torch.manual_seed(0)
    fields = {"vocab_size": TINY_VOCAB if tiny else VOCAB, **(BERT_TINY if tiny else BERT_BASE), **extra}
    hf = getattr(transformers, hf_class)(transformers.BertConfig(**fields, attn_implementation="sdpa"))
    bk = bk_class(bertkit.BertConfig(**fields))
    missing, _ = bk.load_state_dict(hf.state_dict(), strict=False)
    assert not missing, missing
    return bk.to(DEVICE), hf.to(DEVICE)


def modern_pair(tiny: bool, bk_class, hf_class, preset: str = "base", **fields):
    """transformers' ModernBert (sdpa) loaded from bertkit's saved weights (`fields` override the preset's)."""
    import transformers  # test-only dependency: a speed baseline

    torch.manual_seed(0)
    fields = {"vocab_size": VOCAB, **fields}
    if tiny:
        preset, fields = "tiny", {**fields, "vocab_size": TINY_VOCAB}
    bk = bk_class(ModernBertConfig.preset(preset, **fields))
    with tempfile.TemporaryDirectory() as directory:
        bk.save_pretrained(directory)
        hf = getattr(transformers, hf_class).from_pretrained(directory, attn_implementation="sdpa")
    return bk.to(DEVICE), hf.to(DEVICE)


def lengths_for(batch: int, length: int, shortest: int | None, seed: int = 1) -> list[int]:
    if shortest is None:
        return [length] * batch
    g = torch.Generator().manual_seed(seed)
    return torch.randint(shortest, length + 1, (batch,), generator=g).tolist()


def mlm_batch(lengths: list[int], length: int, vocab: int, seed: int = 0) -> dict:
    """Random tokens, right-padded to `length`, 15% of the real ones labelled (and masked)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(200, vocab, (len(lengths), length), generator=g)
    ids[:, 0] = 101
    real = torch.arange(length)[None] < torch.tensor(lengths)[:, None]
    ids = ids.masked_fill(~real, 0)
    chosen = (torch.rand(ids.shape, generator=g) < 0.15) & real
    chosen[:, 1] = True
    labels = ids.masked_fill(~chosen, -100)
    return {k: v.to(DEVICE) for k, v in
            {"input_ids": ids.masked_fill(chosen, 103), "attention_mask": real.long(), "labels": labels}.items()}


# ---------------------------------------------------------------------------- calls
def train_step(model, batch):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=DEVICE.type == "cuda")
    model.train()

    def step():
        with autocast("auto", DEVICE):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return synced(step)


def forward_call(model, inputs):
    model.eval()

    def call():
        with torch.inference_mode(), autocast("auto", DEVICE):
            model(**inputs)
    return synced(call)


def switched(owner, name: str, value, make):
    """The call `make()` builds, run with `owner.<name>` set to `value` (put back after): a lever
    on or off for one variant (an encoder's `unpad`, a kernel setting)."""
    inner = make()

    def call():
        before = getattr(owner, name)
        setattr(owner, name, value)
        try:
            inner()
        finally:
            setattr(owner, name, before)
    return call


def with_unpad(encoder, unpad: bool, make):
    """The call `make()` builds, run with the encoder's unpadding switched to `unpad`."""
    return switched(encoder, "unpad", unpad, make)


def compiled_layers(model, **options) -> None:
    """torch.compile each transformer layer (bertkit's compile_layers; the modern encoder's layers alike)."""
    if hasattr(model, "compile_layers"):
        model.compile_layers(**options)
    else:
        for layer in model.model.layers:
            layer.compile(**options)


def graphed_train_step(model, batch):
    """train_step with each layer compiled in "reduce-overhead" mode, which replays it as a CUDA
    graph (one launch for the layer's kernels); a new step marks where the graphs' outputs may be
    overwritten. An experiment for the launch-bound mini shape, not a bertkit option yet."""
    compiled_layers(model, mode="reduce-overhead")
    step = train_step(model, batch)

    def call():
        torch.compiler.cudagraph_mark_step_begin()
        step()
    return call


# ---------------------------------------------------------------------------- measuring
def measure(name: str, calls: dict, real_tokens: int, args, flops: float = 0.0, probe: float = 0.0,
            steps_per_call: int = 1) -> dict:
    """Alternate the variants; per variant the median ms (per step: a call's time / steps_per_call),
    real tokens/s (`real_tokens` a call), ratio over transformers and (given FLOPs and the probe)
    the fraction of the probe's FLOP/s."""
    started = time.time()
    times = harness.alternate(calls, args.rounds, args.warmup, args.steps)
    row = {"workload": name, "real_tokens": real_tokens, "variants": {}}
    base = statistics.median(times["transformers"])
    for variant, seconds in times.items():
        t = statistics.median(seconds)
        entry = {"ms": round(t * 1e3 / steps_per_call, 3), "tokens_per_s": round(real_tokens / t),
                 "vs_transformers": round(base / t, 3)}
        if flops and probe:
            entry["fraction_of_probe"] = round(flops / t / probe, 4)
        row["variants"][variant] = entry
    row["seconds"] = round(time.time() - started, 1)
    print(json.dumps(row), flush=True)
    return row


def training_flops(config, lengths: list[int], labelled: int) -> float:
    return 3 * (harness.encoder_flops(config, lengths) + harness.mlm_head_flops(config, labelled))


def matmul_probe(tiny: bool) -> float:
    """FLOP/s of a large matmul in the format the models run in (bf16 on a GPU), best of 10."""
    n = 256 if tiny else 8192
    dtype = torch.bfloat16 if resolve_precision("auto", DEVICE) == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=DEVICE, dtype=dtype) for _ in range(2))
    best = float("inf")
    for _ in range(12):
        sync()
        start = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best


# ---------------------------------------------------------------------------- workloads
def shape(name: str, tiny: bool) -> tuple[int, int, int | None]:
    return SHAPES[name][1 if tiny else 0]


def bert_mlm_train(args, probe: float) -> dict:
    batch_size, length, shortest = shape("bert_mlm", args.tiny)
    bk, hf = bert_pair(args.tiny, bertkit.BertForMaskedLM, "BertForMaskedLM")
    lengths = lengths_for(batch_size, length, shortest)
    batch = mlm_batch(lengths, length, bk.config.vocab_size)
    flops = training_flops(bk.config, lengths, int((batch["labels"] != -100).sum()))
    # without dropout (Cramming and ModernBERT pre-train so): what BERT's three dropouts a layer cost,
    # a recipe's lever rather than a kernel's, so it stands beside the row's ratio, not in it
    still = bert_pair(args.tiny, bertkit.BertForMaskedLM, "BertForMaskedLM", hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)[0]
    calls = {"bertkit": train_step(bk, batch), "bertkit_no_dropout": train_step(still, batch),
             "transformers": train_step(hf, batch)}
    if args.compile:
        compiled = bert_pair(args.tiny, bertkit.BertForMaskedLM, "BertForMaskedLM")[0]
        compiled_layers(compiled)
        calls["bertkit_compiled"] = train_step(compiled, batch)
    return measure("bert_base_mlm_train", calls, sum(lengths), args, flops, probe)


def modern_mlm_train(args, packed: bool) -> dict:
    batch_size, length, shortest = shape("modern_mlm", args.tiny)
    bk, hf = modern_pair(args.tiny, ModernBertForMaskedLM, "ModernBertForMaskedLM")
    lengths = lengths_for(batch_size, length, None if packed else shortest)
    batch = mlm_batch(lengths, length, bk.config.vocab_size)
    calls = {"bertkit": train_step(bk, batch), "transformers": train_step(hf, batch)}
    if args.compile:  # on varied lengths too: the unpadded step is launch-bound as much as the packed one
        compiled = modern_pair(args.tiny, ModernBertForMaskedLM, "ModernBertForMaskedLM")[0]
        compiled_layers(compiled)
        calls["bertkit_compiled"] = train_step(compiled, batch)
    if not packed:  # the lever: the same model run padded
        calls["bertkit_padded"] = with_unpad(bk.model, False, lambda: train_step(bk, batch))
    name = "modern_base_mlm_packed" if packed else "modern_base_mlm_varied"
    return measure(name, calls, sum(lengths), args)


# The two pre-training recipes' shapes (configs/pretrain-mini.toml, configs/pretrain-gpu-10min.toml):
# preset, attention pattern, vocabulary and full (packed) rows of batch x length.
RECIPES = {"mini_recipe": ("mini", dict(global_attn_every_n_layers=2, local_attention=64, vocab_size=8000)),
           "gpu_recipe": ("medium", dict(global_attn_every_n_layers=3, local_attention=128, vocab_size=8000))}


def recipe_mlm_train(args, name: str, batch_shape: str | None = None, graphed: bool = False) -> dict:
    """A recipe's MLM training step on packed rows, bertkit against transformers: steps/s is 1000 / ms.
    `batch_shape`: another SHAPES entry for the batch (the model stays the recipe's); `graphed`:
    also bertkit with its layers replayed as CUDA graphs (a row of its own: an error there keeps
    the others)."""
    batch_size, length, _ = shape(batch_shape or name, args.tiny)
    preset, fields = RECIPES[name]
    bk, hf = modern_pair(args.tiny, ModernBertForMaskedLM, "ModernBertForMaskedLM", preset, **fields)
    lengths = lengths_for(batch_size, length, None)
    batch = mlm_batch(lengths, length, bk.config.vocab_size)
    calls = {"bertkit": train_step(bk, batch), "transformers": train_step(hf, batch)}
    if graphed:
        copy = modern_pair(args.tiny, ModernBertForMaskedLM, "ModernBertForMaskedLM", preset, **fields)[0]
        calls["bertkit_cuda_graphs"] = graphed_train_step(copy, batch)
    return measure(f"{batch_shape or name}_mlm_train" if not graphed else f"{name}_graphed_mlm_train",
                   calls, sum(lengths), args)


class RepeatedBatch:
    """The same host batch forever: the Trainer's data protocol (an iterable of batches)."""

    def __init__(self, batch: dict):
        self.batch = {k: v.cpu() for k, v in batch.items()}

    def __iter__(self):
        while True:
            yield self.batch


def trainer_steps(model, batch: dict, steps: int, out_dir: str, read_late: bool = True, compile: bool = False):
    """`steps` optimizer steps through bertkit's Trainer per call (the recipe's clip and lr; no
    evaluation or checkpoint; one log row a call); `compile`: train.compile (compiled layers)."""
    config = TrainConfig(max_steps=steps, lr=1e-3, warmup_steps=0, schedule="constant", grad_clip=1.0,
                         log_every=steps, eval_every=0, save_every=-1, seed=0, compile=compile)
    trainer = Trainer(model, RepeatedBatch(batch), config, out_dir=out_dir, progress=False)
    trainer.reads_late = read_late and trainer.reads_late

    def call():
        trainer.config.max_steps = trainer.step + steps
        trainer.train()
    return synced(call)


def repeated(call, steps: int):
    def calls():
        for _ in range(steps):
            call()
    return calls


def recipe_trainer_loop(args, steps: int = 10) -> dict:
    """The GPU recipe's step bare and inside the Trainer, `steps` a call (so ms / step is per call / steps)."""
    batch_size, length, _ = shape("gpu_recipe", args.tiny)
    preset, fields = RECIPES["gpu_recipe"]
    bk, hf = modern_pair(args.tiny, ModernBertForMaskedLM, "ModernBertForMaskedLM", preset, **fields)
    def model():
        return modern_pair(args.tiny, ModernBertForMaskedLM, "ModernBertForMaskedLM", preset, **fields)[0]

    lengths = lengths_for(batch_size, length, None)
    batch = mlm_batch(lengths, length, bk.config.vocab_size)
    runs = tempfile.mkdtemp(prefix="bench-gpu-trainer-")
    calls = {"bertkit_step": repeated(train_step(bk, batch), steps),
             "bertkit_trainer": trainer_steps(model(), batch, steps, os.path.join(runs, "late")),
             "bertkit_trainer_read_each_step": trainer_steps(model(), batch, steps, os.path.join(runs, "each"),
                                                             read_late=False),
             "transformers": repeated(train_step(hf, batch), steps)}
    if args.compile:  # train.compile inside the loop: the candidate default for GPU training
        calls["bertkit_trainer_compiled"] = trainer_steps(model(), batch, steps, os.path.join(runs, "compiled"),
                                                          compile=True)
    # a call is `steps` steps: fewer calls per round keep the row within the script's few minutes
    fewer = argparse.Namespace(**{**vars(args), "steps": max(1, args.steps // 2), "warmup": max(1, args.warmup // 2)})
    return measure("gpu_recipe_trainer_loop", calls, sum(lengths) * steps, fewer, steps_per_call=steps)


def bert_finetune(args) -> dict:
    batch_size, length, shortest = shape("finetune", args.tiny)
    bk, hf = bert_pair(args.tiny, bertkit.BertForSequenceClassification, "BertForSequenceClassification",
                       num_labels=4)
    lengths = lengths_for(batch_size, length, shortest)
    inputs = mlm_batch(lengths, length, bk.config.vocab_size)
    batch = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"],
             "labels": torch.arange(batch_size, device=DEVICE) % 4}
    calls = {"bertkit": with_unpad(bk.bert, None, lambda: train_step(bk, batch)),  # the default: padded here
             "bertkit_packed": with_unpad(bk.bert, True, lambda: train_step(bk, batch)),
             "bertkit_padded": with_unpad(bk.bert, False, lambda: train_step(bk, batch)),
             "bertkit_jagged_dropout": switched(attention.SETTINGS, "jagged_dropout", True,
                                                lambda: with_unpad(bk.bert, True, lambda: train_step(bk, batch))),
             "transformers": train_step(hf, batch)}
    return measure("bert_base_finetune_varied", calls, sum(lengths), args)


def varied_forward(args, name: str, bk, hf, encoder, seed: int) -> dict:
    """A bf16 forward pass on varied lengths (the encode shape): bertkit with `encoder` unpadded
    and padded against transformers."""
    batch_size, length, shortest = shape("encode", args.tiny)
    lengths = lengths_for(batch_size, length, shortest, seed=seed)
    batch = mlm_batch(lengths, length, bk.config.vocab_size)
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    calls = {"bertkit": with_unpad(encoder, True, lambda: forward_call(bk, inputs)),
             "bertkit_padded": with_unpad(encoder, False, lambda: forward_call(bk, inputs)),
             "transformers": forward_call(hf, inputs)}
    return measure(name, calls, sum(lengths), args)


def encode(args, modern: bool) -> dict:
    if modern:
        bk, hf = modern_pair(args.tiny, ModernBertModel, "ModernBertModel")
    else:
        bk, hf = bert_pair(args.tiny, bertkit.BertModel, "BertModel")
    return varied_forward(args, "modern_base_encode_varied" if modern else "bert_base_encode_varied", bk, hf, bk,
                          seed=2)


def predict(args, modern: bool) -> dict:
    """Sequence-classification logits on varied lengths, what `bertkit predict` runs."""
    if modern:
        bk, hf = modern_pair(args.tiny, ModernBertForSequenceClassification, "ModernBertForSequenceClassification",
                             num_labels=4)
    else:
        bk, hf = bert_pair(args.tiny, bertkit.BertForSequenceClassification, "BertForSequenceClassification",
                           num_labels=4)
    return varied_forward(args, "modern_base_predict_varied" if modern else "bert_base_predict_varied", bk, hf,
                          bk.model if modern else bk.bert, seed=3)


def tokenizer_dir() -> str:
    """MiniLM's tokenizer files: the copy benchmarks/gpu/prepare.sh puts in .gpu (a GPU machine
    without the asset package), else the installed asset."""
    carried = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".gpu", "minilm-tokenizer")
    return carried if os.path.isdir(carried) else minilm_dir()


def encode_texts(args) -> dict:
    """Whole calls from texts to vectors on the host, BERT-base on BBC paragraphs: bertkit's
    `SentenceEncoder.encode` (tokenizing, length batches, each batch queued one ahead: inference/
    overlap.py) against the loop a transformers user writes, as sentence-transformers does it
    (sorted batches tokenized with padding, forward, mean pooling, each batch's vectors read back)."""
    import transformers  # test-only dependency: a speed baseline

    batch_size, length, _ = shape("encode", args.tiny)
    texts = harness.bbc_paragraphs(32 if args.tiny else 1024, seed=4)
    bk, hf = bert_pair(args.tiny, bertkit.BertModel, "BertModel", vocab_size=VOCAB)
    encoder = SentenceEncoder(bk, Tokenizer.from_pretrained(tokenizer_dir()), precision="auto")
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir())
    hf.eval()
    lengths = [len(ids) for ids in hf_tokenizer(texts, truncation=True, max_length=length)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])

    def transformers_loop():
        out = np.empty((len(texts), hf.config.hidden_size), dtype=np.float32)
        with torch.inference_mode(), autocast("auto", DEVICE):
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                batch = hf_tokenizer([texts[i] for i in rows], padding=True, truncation=True, max_length=length,
                                     return_tensors="pt").to(DEVICE)
                hidden = hf(**batch).last_hidden_state.float()
                mask = batch["attention_mask"].unsqueeze(-1).float()
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out[rows] = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
        return out

    calls = {"bertkit": lambda: encoder.encode(texts, batch_size=batch_size, max_length=length, show_progress=False),
             "transformers": transformers_loop}
    return measure("bert_base_encode_texts", calls, sum(lengths), args)


WORKLOADS = {
    "bert_base_mlm_train": lambda args, probe: bert_mlm_train(args, probe),
    "modern_base_mlm_varied": lambda args, probe: modern_mlm_train(args, packed=False),
    "modern_base_mlm_packed": lambda args, probe: modern_mlm_train(args, packed=True),
    "bert_base_finetune_varied": lambda args, probe: bert_finetune(args),
    "bert_base_encode_varied": lambda args, probe: encode(args, modern=False),
    "modern_base_encode_varied": lambda args, probe: encode(args, modern=True),
    "bert_base_encode_texts": lambda args, probe: encode_texts(args),
    "bert_base_predict_varied": lambda args, probe: predict(args, modern=False),
    "modern_base_predict_varied": lambda args, probe: predict(args, modern=True),
    "mini_recipe_mlm_train": lambda args, probe: recipe_mlm_train(args, "mini_recipe"),
    "gpu_recipe_mlm_train": lambda args, probe: recipe_mlm_train(args, "gpu_recipe"),
    "mini_recipe_batch128_mlm_train": lambda args, probe: recipe_mlm_train(args, "mini_recipe", "mini_recipe_batch128"),
    "mini_recipe_graphed_mlm_train": lambda args, probe: recipe_mlm_train(args, "mini_recipe", graphed=True),
    "gpu_recipe_trainer_loop": lambda args, probe: recipe_trainer_loop(args),
}

NEEDS_CUDA_AND_COMPILE = {"mini_recipe_graphed_mlm_train"}  # CUDA graphs exist on a GPU only


# ---------------------------------------------------------------------------- the table
def markdown(result: dict) -> str:
    info = result["info"]
    lines = [f"GPU benchmark on {info['device_name']} ({info['precision']}, torch {info['torch']}, "
             f"transformers {info['transformers']}; matmul probe {info['probe_tflops']} TFLOP/s)", "",
             "| workload | variant | ms / step | real tokens/s | vs transformers | of the probe |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        if "error" in row:
            lines.append(f"| {row['workload']} | error: {row['error'][:80]} | | | | |")
            continue
        for variant, v in row["variants"].items():
            fraction = f"{100 * v['fraction_of_probe']:.1f}%" if "fraction_of_probe" in v else ""
            lines.append(f"| {row['workload']} | {variant} | {v['ms']:.2f} | {v['tokens_per_s']:,} | "
                         f"{v['vs_transformers']:.2f}x | {fraction} |")
    lines.append("")
    lines.append(f"Command: `{result['command']}`")
    return "\n".join(lines) + "\n"


def run_record(rows, **info) -> dict:
    """A results file's frame, here and in profile_gpu.py: the command that made it, its `rows`, and
    what it ran on (the GPU's name, the precision "auto" picked, torch's version) with `info` added."""
    return {"command": " ".join([os.path.basename(sys.executable), *sys.argv]), "rows": rows, "info": {
        "device_name": torch.cuda.get_device_name(0) if DEVICE.type == "cuda" else "cpu",
        "precision": resolve_precision("auto", DEVICE), "torch": torch.__version__, **info}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tiny", action="store_true", help="tiny sizes (any device, seconds): checks the script runs")
    p.add_argument("--out", default=harness.RESULTS_DIR, help="where gpu-bench.json and gpu-bench.md go")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds per variant (default 5; --tiny 2)")
    p.add_argument("--steps", type=int, default=None, help="calls per timed round (default 5; --tiny 1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls per variant (default 3; --tiny 1)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="the compiled-layers variants (default: on, off with --tiny: compiling takes minutes on a CPU)")
    p.add_argument("--only", nargs="+", choices=list(WORKLOADS), help="run these workloads only")
    args = p.parse_args(argv)
    for name, real, tiny in (("rounds", 5, 2), ("steps", 5, 1), ("warmup", 3, 1), ("compile", True, False)):
        if getattr(args, name) is None:
            setattr(args, name, tiny if args.tiny else real)
    import transformers  # test-only dependency: the baseline

    torch.backends.cuda.matmul.allow_tf32 = True  # both libraries alike: fp32 leftovers use TF32
    probe = matmul_probe(args.tiny)
    result = run_record([], transformers=transformers.__version__, probe_tflops=round(probe / 1e12, 3),
                        tiny=args.tiny)
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or WORKLOADS:
        if name in NEEDS_CUDA_AND_COMPILE and not (DEVICE.type == "cuda" and args.compile):
            continue
        try:
            result["rows"].append(WORKLOADS[name](args, probe))
        except Exception as e:  # keep going: the other rows still report (the error is in the table)
            result["rows"].append({"workload": name, "error": repr(e)})
            print(f"{name}: {e!r}", file=sys.stderr, flush=True)
        torch._dynamo.reset()  # a row's compiled layers leave dynamo's cache: the next row's compile starts fresh
        if DEVICE.type == "cuda":
            torch.cuda.empty_cache()
        with open(os.path.join(args.out, "gpu-bench.json"), "w") as f:
            json.dump(result, f, indent=1)
        with open(os.path.join(args.out, "gpu-bench.md"), "w") as f:
            f.write(markdown(result))
    print(markdown(result))
    return 1 if any("error" in row for row in result["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
