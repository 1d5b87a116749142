"""One speed lever on vs off, bertkit against bertkit in the same run (same harness timing).

    python benchmarks/bench_levers.py --lever prune --workload mlm_mini [--repeats N]

Levers (each a switch on the same bertkit model, so nothing else differs):
  head     MLM vocabulary projection only at labelled positions (off: full_logits=True)
  prune    last layer only where the head reads (off: whole last layer, then select)
  compile  each layer under torch.compile (compile_layers; off: eager); compile time is
           reported, not timed
  adamw    fused AdamW (off: the per-parameter loop); applies to any model alike
  sort     SentenceEncoder batches texts by length (off: the given order)
  dropout  bertkit's dropout mask on CPU (bertkit/models/dropout.py; off: nn.Dropout and SDPA's dropout)
Workloads: mlm_mini, mlm_small, finetune, encode (as in the bench_*.py scripts); recipe_update, the
AdamW update alone over the parameters of configs/pretrain-mini.toml's model (adamw only).
Printed: "LEVER <lever> on <workload>: on / off speed = R x (min, max)".
"""

from __future__ import annotations

import statistics
import sys
import time

import harness

import torch

import bertkit
from bertkit.models import attention
from bertkit.models.modern import ModernBertConfig, ModernBertForMaskedLM
from bertkit.data.assets import minilm_dir
from bertkit.train.optim import param_groups

LEVERS = ("head", "prune", "compile", "adamw", "sort", "dropout")
WORKLOADS = ("mlm_mini", "mlm_small", "finetune", "encode", "recipe_update")


def build(workload: str, lever: str, on: bool, smoke: bool):
    """A zero-argument call running one step (or one encode) of bertkit with the lever on/off."""
    torch.manual_seed(0)
    if workload == "recipe_update":
        return update_call(on, smoke)
    if workload == "encode":
        import bench_encode

        from bertkit.inference.encode import SentenceEncoder

        texts = harness.bbc_paragraphs(8 if smoke else 400, seed=0)
        encoder = SentenceEncoder.from_pretrained(minilm_dir())
        if lever == "sort":
            encoder.sort_by_length = on
        elif lever == "compile" and on:
            encoder.model.compile_layers()
        return lambda: encoder.encode(texts, batch_size=bench_encode.BATCH,
                                      max_length=bench_encode.MAX_LEN, show_progress=False)

    if workload.startswith("mlm"):
        import bench_mlm

        layers, hidden, heads, inter, batch_size = bench_mlm.SHAPES["smoke" if smoke else workload[4:]]
        model = bertkit.BertForMaskedLM(bertkit.BertConfig(
            vocab_size=bench_mlm.VOCAB, num_hidden_layers=layers, hidden_size=hidden,
            num_attention_heads=heads, intermediate_size=inter)).train()
        batches = [bench_mlm.make_batch(batch_size, 16 if smoke else bench_mlm.SEQ_LEN)]
        if lever == "head" and not on:
            batches[0]["full_logits"] = True
    else:
        import bench_finetune

        batches = bench_finetune.make_batches(minilm_dir(), *((2, 1, 16) if smoke else (16, 4, 256)))
        model = bertkit.BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=5).train()
    if lever == "prune" and not on:
        model.bert.last_layer_prunable = lambda *args: False
    if lever == "compile" and on:
        model.compile_layers()
    if lever == "dropout" and not on:
        use_torch_dropout(model)
    fused = on if lever == "adamw" else True
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=fused)

    fast_cpu_dropout = not (lever == "dropout" and not on)

    def step(state={"i": 0}):
        attention.SETTINGS.fast_cpu_dropout = fast_cpu_dropout  # a process-wide switch: set per call
        batch = batches[state["i"] % len(batches)]
        state["i"] += 1
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def update_call(fused: bool, smoke: bool):
    """One AdamW update, fused or the per-tensor loop, over the CPU recipe's model (its parameter
    groups as the Trainer builds them; gradients drawn once): the optimizer's share of a step."""
    model = ModernBertForMaskedLM(ModernBertConfig.preset("tiny" if smoke else "mini", vocab_size=8000,
                                                          global_attn_every_n_layers=2, local_attention=64))
    for param in model.parameters():
        param.grad = torch.randn_like(param)
    return torch.optim.AdamW(param_groups(model, 1e-3, 0.01, None), lr=1e-3, fused=fused).step


def use_torch_dropout(model: torch.nn.Module) -> None:
    """Put torch's nn.Dropout modules back (SDPA's dropout inside attention: the step's switch)."""
    from bertkit.models.dropout import Dropout

    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, Dropout):
                setattr(module, name, torch.nn.Dropout(child.p))


def main(argv=None):
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--lever", choices=LEVERS, required=True)
    p.add_argument("--workload", choices=WORKLOADS, required=True)
    args = p.parse_args(argv)
    if args.workload == "recipe_update" and args.lever != "adamw":
        p.error("--workload recipe_update times the optimizer alone: it takes --lever adamw only")
    harness.setup_threads(args.threads)
    calls = {"on": build(args.workload, args.lever, True, args.smoke),
             "off": build(args.workload, args.lever, False, args.smoke)}
    t = time.perf_counter()
    calls["on"]()  # first call: includes compilation for the compile lever
    first = time.perf_counter() - t
    times = harness.alternate(calls, 1 if args.smoke else args.repeats, 0 if args.smoke else args.warmup,
                              args.steps)
    ratios = harness.speedups(times, "off", "on")
    print(f"LEVER {args.lever} on {args.workload}: on / off speed = {harness.ratio_text(ratios)}, "
          f"{args.threads} threads; "
          f"median s/call on {statistics.median(times['on']):.3f}, off {statistics.median(times['off']):.3f}; "
          f"first 'on' call {first:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
