"""A scaling sweep: pre-train one small encoder per size on the same number of tokens, within a
wall-clock budget, and fit L(N) = (N_c/N)^alpha + L_inf and L(C) on the compute frontier (what
`bertkit scale sweep` runs).

Each size is trained by the pre-training recipe (default: the modern encoder's MLM recipe on
the BBC training articles, SWEEP_DEFAULTS; --config gives another, BERT's included); its
held-out MLM loss, its learning curve (the held-out loss every --eval-every steps with the
compute C = 6 N D spent so far) and its non-embedding parameter count N (the encoder layers,
counted on the model: Kaplan et al.'s definition leaves out the embedding matrices) go to
OUT/sweep.jsonl; then the L(N) fit to OUT/fit.json and OUT/scaling.png, the L(C) frontier and
its fit (analysis/compute_frontier.py) to OUT/frontier.json and OUT/frontier.png.

Budget: before any data preparation it times 3 optimizer steps of each size (smallest first,
by training FLOPs per token: 3 x forward = 3 x [2 x 12 L H^2 for the layers, 4 L T H for the
attention scores, 2 p (H^2 + V H) for the MLM head at the masked share p]) on random tokens,
and estimates each run as steps x seconds per step. Timing beats a FLOP count here: tiny
models are dominated by per-step overhead (measured 21 ms vs 42 ms per step for 1x8 vs 2x32,
a 19x FLOP ratio). If the four smallest sizes cannot finish inside the budget it stops at
once with the estimate; during the sweep, each run's estimate is rescaled by how the previous
run's real time compared with its estimate, and a run that would overrun is skipped.

At a fixed token budget the larger models are further from convergence than the smaller
ones, so the fitted exponent describes this budget, not Kaplan's converged L(N).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import time
from typing import Callable, Sequence

import torch

from bertkit.analysis.frontier_report import frontier_report
from bertkit.analysis.scaling import PowerLawFit, load_sweep, run_sweep
from bertkit.analysis.scaling_report import check_positive, fit_and_report
from bertkit.data.documents import CorpusDocuments, shard_documents
from bertkit.errors import ConfigError, DataError
from bertkit.io import atomic_write_json
from bertkit.runtime.run_dir import run_lock
from bertkit.models.families import family_for
from bertkit.tokenizer import Tokenizer
from bertkit.runtime.process_group import init_distributed
from bertkit.train.optim import build_optimizer
from bertkit.recipes.pretrain import build_model, load_config, parse_config, run_pretraining, tokenizer_and_config

MIN_SIZES = 4  # L(N) = (N_c/N)^alpha + L_inf has 3 parameters; one more size estimates their errors
OVERHEAD = 1.25  # a run's time over steps x timed step: data loading, masking, logging, final evaluation

# The sweep's recipe when no config is given: the fastest-learning pre-training recipe, the
# modern encoder of configs/pretrain-mini.toml (40% masking, peak lr 2e-3, linear decay) on the
# BBC training articles. BERT's old tiny recipe left the sizes near the unigram plateau, where
# the losses barely differ (alpha = 0.017 +- 0.212). Warmup is a ratio, not the config's 200
# steps, because --tokens sets the step count.
SWEEP_DEFAULTS = {
    "model": {"preset": "tiny", "model_type": "modernbert", "global_attn_every_n_layers": 2,
              "local_attention": 64},
    "tokenizer": {"vocab_size": 8000, "min_frequency": 2},
    "data": {"corpus": "bbc:train", "objective": "mlm", "builder": "full_sentences", "max_length": 64,
             "mlm_probability": 0.4, "eval_fraction": 0.05, "max_eval_examples": 512},
    "train": {"batch_size": 32, "lr": 2e-3, "warmup_ratio": 0.05, "schedule": "linear",
              "weight_decay": 0.01, "grad_clip": 1.0, "log_every": 10, "seed": 0},
}
EVALS_PER_RUN = 10  # held-out evaluations per size when --eval-every is not given: its L(C) curve

Log = Callable[[str], None]


# ----------------------------------------------------------------------------- sizes
_SIZE = re.compile(r"^(\d+)x(\d+)(?:x(\d+))?$")


def default_heads(hidden: int) -> int:
    """hidden / 64 heads, but at least 2 when the width splits evenly: one head kept the small
    modern sizes on the unigram plateau (2x96 with one head 6.243, with two 5.735; docs/analysis.md)."""
    heads = max(2, hidden // 64)
    return heads if hidden % heads == 0 else max(1, hidden // 64)


def parse_sizes(text: str) -> list[dict]:
    """'1x64,2x128x4' -> [{"layers": 1, "hidden": 64, "heads": 2}, {"layers": 2, "hidden": 128, "heads": 4}]."""
    sizes = []
    for part in (p.strip() for p in text.split(",")):
        m = _SIZE.match(part)
        if not m:
            raise ConfigError(f"--sizes entry {part!r} is not LAYERSxHIDDEN[xHEADS] (e.g. 2x128 or 2x128x4)")
        layers, hidden = int(m[1]), int(m[2])
        heads = int(m[3]) if m[3] else default_heads(hidden)
        if layers < 1 or hidden < 8 or heads < 1 or hidden % heads:
            raise ConfigError(f"--sizes entry {part!r}: need layers >= 1, hidden >= 8 and heads dividing hidden")
        sizes.append({"layers": layers, "hidden": hidden, "heads": heads})
    if len({(s["layers"], s["hidden"], s["heads"]) for s in sizes}) != len(sizes):
        raise ConfigError("--sizes lists a size twice; give distinct sizes")
    return sizes


def size_name(spec: dict) -> str:
    return f"{spec['layers']}x{spec['hidden']}x{spec['heads']}"


def flops_per_token(layers: int, hidden: int, seq_len: int, vocab: int, mask_share: float) -> float:
    """Training FLOPs per token (3 x forward): layers, attention scores, masked-only MLM head."""
    forward = (2 * 12 * layers * hidden**2 + 4 * layers * seq_len * hidden
               + 2 * mask_share * (hidden**2 + vocab * hidden))
    return 3.0 * forward


def non_embedding_params(layers: int, hidden: int, intermediate: int, model_type: str = "bert") -> int:
    """Parameters of the encoder layers (Kaplan's N: no embeddings, no MLM head), as the model
    type's family counts them (`layer_parameters`, bertkit/models/families.py)."""
    return family_for(model_type).layer_parameters(layers, hidden, intermediate)


def sweep_family(cfg):
    """The family the sweep's recipe trains (model.model_type; BERT's without one)."""
    return family_for(cfg.model.get("model_type", "bert"))


def intermediate_size(cfg, hidden: int) -> int:
    """The feed-forward width of the family's presets (4 H for BERT)."""
    return sweep_family(cfg).ffn_width(hidden)


def spec_params(cfg, spec: dict) -> int:
    """`non_embedding_params` of one size under the sweep's recipe."""
    return sweep_family(cfg).layer_parameters(spec["layers"], spec["hidden"], intermediate_size(cfg, spec["hidden"]))


def layer_stack(model):
    """The module holding the encoder's layers, whose parameters are N: BERT's `bert.encoder`,
    the modern encoder's `model.layers`."""
    for owner, name in (("bert", "encoder"), ("model", "layers")):
        inner = getattr(model, owner, None)
        if inner is not None and hasattr(inner, name):
            return getattr(inner, name)
    raise ConfigError(f"the sweep cannot find the encoder layers of {type(model).__name__}: it counts N for "
                      "BERT-shaped and modern (model_type = \"modernbert\") MLM models")


# ----------------------------------------------------------------------------- configs
def base_config(config: str | None, overrides: Sequence[str] = ()):
    """The pre-training recipe every size shares: a TOML file, or SWEEP_DEFAULTS; plus overrides."""
    if config:
        return load_config(config, list(overrides))
    return parse_config(json.loads(json.dumps(SWEEP_DEFAULTS)), list(overrides))


def run_config(cfg, spec: dict, steps: int, tokenizer_path: str = "", shards: str = "", eval_every: int = 0):
    """`cfg` for one size: its shape (`intermediate_size`; both families name the fields as
    transformers does), `steps` steps, held-out evaluations every `eval_every` steps (0: at the
    end only), shared data."""
    model = {**cfg.model, "num_hidden_layers": spec["layers"], "hidden_size": spec["hidden"],
             "num_attention_heads": spec["heads"], "intermediate_size": intermediate_size(cfg, spec["hidden"])}
    return dataclasses.replace(
        cfg, model=model,
        tokenizer=dataclasses.replace(cfg.tokenizer, path=tokenizer_path or cfg.tokenizer.path),
        data=dataclasses.replace(cfg.data, corpus=shards or cfg.data.corpus),
        train=dataclasses.replace(cfg.train, max_steps=steps, eval_every=eval_every, save_every=0))


@dataclasses.dataclass
class SweepPlan:
    """What every run shares: the recipe, the sizes (cheapest first), steps and tokens per size."""

    cfg: object
    sizes: list[dict]
    steps: int
    tokens: int
    vocab: int
    time_budget: float
    eval_every: int  # steps between held-out evaluations: the points of each size's L(C) curve


def plan_sweep(sizes: str, tokens: float, time_budget: float, config: str | None = None,
               overrides: Sequence[str] = (), eval_every: int | None = None) -> SweepPlan:
    specs = parse_sizes(sizes)
    if len(specs) < MIN_SIZES:
        raise ConfigError(f"--sizes gives {len(specs)} sizes; fitting L(N) = (N_c/N)^alpha + L_inf needs at least "
                          f"{MIN_SIZES} (3 parameters and an error estimate)")
    check_positive("tokens", tokens)
    check_positive("time-budget", time_budget)
    cfg = base_config(config, overrides)
    B, T = cfg.train.batch_size, cfg.data.max_length
    steps = max(1, math.ceil(tokens / (B * T)))
    if eval_every is not None and eval_every < 1:
        raise ConfigError(f"--eval-every must be at least 1 step, got {eval_every}")
    every = eval_every or max(1, steps // EVALS_PER_RUN)
    vocab = Tokenizer.from_pretrained(cfg.tokenizer.path).vocab_size if cfg.tokenizer.path else cfg.tokenizer.vocab_size
    # smallest first: the driver assumes later sizes cost more
    specs.sort(key=lambda s: flops_per_token(s["layers"], s["hidden"], T, vocab, cfg.data.mlm_probability))
    return SweepPlan(cfg, specs, steps, steps * B * T, vocab, time_budget, every)


# ----------------------------------------------------------------------------- timing
def calibrate(cfg, spec: dict, vocab: int, steps: int = 3) -> float:
    """Seconds per optimizer step of `spec` at the recipe's batch shape, on random tokens."""
    torch.manual_seed(0)
    model = build_model(run_config(cfg, spec, 1), vocab)
    model.train()
    opt = build_optimizer(model, lr=1e-4)  # the Trainer's optimizer: the runs' own update cost
    B, T = cfg.train.batch_size, cfg.data.max_length
    ids = torch.randint(5, vocab, (B, T))
    labels = torch.full((B, T), -100)
    masked = torch.rand(B, T) < cfg.data.mlm_probability
    labels[masked] = ids[masked]
    times = []
    for k in range(steps + 1):  # the first step pays one-off allocation costs: not timed
        t0 = time.perf_counter()
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if k:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _too_small(plan: SweepPlan, k: int, total: float) -> ConfigError:
    """The budget cannot hold the MIN_SIZES smallest sizes: the first k + 1 are estimated at `total`."""
    last = k == MIN_SIZES - 1
    need = total if last else total * MIN_SIZES / (k + 1)  # larger sizes cost more
    return ConfigError(
        f"--time-budget {plan.time_budget:g}s is too small: the {MIN_SIZES} smallest sizes (the fewest a "
        f"fit needs) are estimated at {'' if last else 'over '}{total:.0f}s on this "
        f"machine; raise --time-budget to about {math.ceil(need * 1.2)} or lower --tokens")


def finished_sizes(out: str) -> set[str]:
    """Names of the sizes OUT/sweep.jsonl already holds as finished: a rerun does not train them."""
    path = os.path.join(out, "sweep.jsonl")
    if not os.path.isfile(path):
        return set()
    return {size_name(r["size"]) for r in load_sweep(path) if r.get("status") == "ok"}


def time_sizes(plan: SweepPlan, log: Log = print, finished: set[str] = frozenset()) -> dict[str, float]:
    """Seconds per step of each size that may fit the budget (0 for the `finished` ones, which
    cost nothing); raises if the MIN_SIZES smallest cannot."""
    B, T = plan.cfg.train.batch_size, plan.cfg.data.max_length
    log(f"sweep: {len(plan.sizes)} sizes x {plan.tokens:,} tokens ({plan.steps} steps of {B} x {T}), "
        f"budget {plan.time_budget:g} s; timing 3 steps per size:")
    per_step: dict[str, float] = {}
    total = 0.0
    for k, spec in enumerate(plan.sizes):
        name = size_name(spec)
        if name in finished:  # a resumed sweep: its budget is for what is left
            per_step[name] = 0.0
            log(f"  {name:>10}  already in the sweep's results: not trained again")
            continue
        if total > plan.time_budget and k >= MIN_SIZES:
            log(f"  {name:>10}  not timed: the sizes before it already fill the budget")
            continue
        per_step[name] = calibrate(plan.cfg, spec, plan.vocab)
        estimate = OVERHEAD * plan.steps * per_step[name]
        total += estimate
        n = spec_params(plan.cfg, spec)
        log(f"  {name:>10}  N = {n:>10,}  {per_step[name]:.3f} s/step, estimated {estimate:6.0f} s")
        if k < MIN_SIZES and total > plan.time_budget:  # the sizes timed so far alone overrun it
            raise _too_small(plan, k, total)
    if total > plan.time_budget:
        log(f"note: the timed sizes are estimated at {total:.0f}s > {plan.time_budget:g}s; "
            "the largest will be skipped")
    return per_step


# ----------------------------------------------------------------------------- data and runs
def prepare_data(cfg, directory: str) -> tuple[str, str]:
    """Train (or load) the tokenizer and write the token shards once: (tokenizer dir, shard dir)."""
    ctx = init_distributed(cfg.train.device)
    cfg.train.precision_on(ctx.device)  # fp16 without a GPU: refused before the corpus is read
    os.makedirs(directory, exist_ok=True)
    corpus = CorpusDocuments(cfg.data.corpus, cfg.data.mode, cfg.data.max_documents,  # read once for both
                             keep=not (cfg.tokenizer.path or cfg.data.streaming), text_field=cfg.data.text_field)
    tokenizer, _ = tokenizer_and_config(cfg, corpus, directory, ctx)
    shard_documents(corpus, tokenizer, os.path.join(directory, "shards"), is_main=ctx.is_main, barrier=ctx.barrier)
    tokenizer_path = cfg.tokenizer.path or os.path.join(directory, "tokenizer")
    shards = cfg.data.corpus if os.path.isfile(os.path.join(cfg.data.corpus, "meta.json")) \
        else os.path.join(directory, "shards")
    return tokenizer_path, shards


def vocab_size(tokenizer_path: str) -> int:
    return max(Tokenizer.from_pretrained(tokenizer_path).get_vocab().values()) + 1


def learning_curve(run_dir: str, n_params: int, tokens_per_step: int) -> list[dict]:
    """The held-out evaluations of a run (OUT/metrics.jsonl rows with split "eval"), each with the
    tokens seen D = step x batch x length and the training compute C = 6 N D at that point."""
    rows = [r for r in load_sweep(os.path.join(run_dir, "metrics.jsonl")) if r.get("split") == "eval"]
    curve = {}
    for r in rows:  # the last row of a step wins (the final evaluation can repeat the last periodic one)
        d = r["step"] * tokens_per_step
        curve[r["step"]] = {"step": r["step"], "tokens": d, "compute": 6.0 * n_params * d, "loss": r["mlm_loss"],
                            "accuracy": r.get("mlm_accuracy"), "seconds": r.get("train_seconds")}
    return [curve[k] for k in sorted(curve)]


def train_size(cfg, spec: dict, steps: int, vocab: int, run_dir: str, log: Log = print) -> dict:
    """Pre-train one size (`run_config` of it, on the shared tokenizer and shards); its sweep
    record: the final held-out loss, N (counted on the model), its learning curve."""
    shutil.rmtree(run_dir, ignore_errors=True)  # a run interrupted before it was recorded
    model = build_model(cfg, vocab)
    n_params = sum(p.numel() for p in layer_stack(model).parameters())
    t0 = time.perf_counter()
    metrics = run_pretraining(cfg, run_dir, progress=False)
    if "mlm_loss" not in metrics:
        raise DataError("the run produced no held-out MLM loss; the corpus needs enough documents "
                        "for data.eval_fraction to hold some out")
    log(f"  {size_name(spec):>10}  N = {n_params:>10,}  held-out MLM loss {metrics['mlm_loss']:.4f}  "
        f"({time.perf_counter() - t0:.0f} s)")
    tokens_per_step = cfg.train.batch_size * cfg.train.grad_accum * cfg.data.max_length
    return {"loss": metrics["mlm_loss"], "n_params": n_params,
            "params_total": sum(p.numel() for p in model.parameters()),
            "mlm_accuracy": metrics.get("mlm_accuracy"), "steps": steps, "name": size_name(spec),
            "compute": 6.0 * n_params * steps * tokens_per_step,
            "curve": learning_curve(run_dir, n_params, tokens_per_step)}


def train_sizes(plan: SweepPlan, per_step: dict[str, float], out: str, log: Log = print) -> list[dict]:
    """Tokenizer and shards once, then the timed sizes smallest first within the budget; the
    finished records (every record is appended to OUT/sweep.jsonl as it comes)."""
    tokenizer_path, shards = prepare_data(plan.cfg, os.path.join(out, "data"))
    vocab = vocab_size(tokenizer_path)

    def train_fn(spec, max_tokens):
        run_cfg = run_config(plan.cfg, spec, plan.steps, tokenizer_path, shards, plan.eval_every)
        return train_size(run_cfg, spec, plan.steps, vocab, os.path.join(out, "runs", size_name(spec)), log)

    sweep_path = os.path.join(out, "sweep.jsonl")
    start = time.perf_counter()
    timed = [spec for spec in plan.sizes if size_name(spec) in per_step]  # untimed ones cannot fit anyway
    records = run_sweep(train_fn, timed, plan.tokens, plan.time_budget, out_path=sweep_path,
                        cost_fn=lambda spec, n: per_step[size_name(spec)] * n)
    log(f"sweep took {time.perf_counter() - start:.0f} s; results in {sweep_path}")
    skipped = [r for r in records if r["status"] == "skipped"]
    if skipped:
        log(f"skipped {size_name(skipped[0]['size'])} and larger: {skipped[0]['reason']}")
    elif len(timed) < len(plan.sizes):
        log(f"left out {', '.join(size_name(s) for s in plan.sizes[len(timed):])}: estimated beyond the budget")
    ok = [r for r in load_sweep(sweep_path) if r.get("status") == "ok"]
    if len(ok) < MIN_SIZES:
        raise ConfigError(
            f"only {len(ok)} size(s) finished inside --time-budget {plan.time_budget:g}s; fitting needs "
            f"{MIN_SIZES}: rerun with a larger --time-budget (finished sizes are kept and not retrained)")
    return ok


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """torch's intra-op threads set to `threads` (None: unchanged) inside the block, restored after."""
    if threads is not None and threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {threads}")
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def scaling_sweep(sizes: str, tokens: float, time_budget: float, out: str, *, config: str | None = None,
                  overrides: Sequence[str] = (), threads: int | None = None, fit: bool = True,
                  eval_every: int | None = None, log: Log = print) -> PowerLawFit | None:
    """Time, train and fit a sweep of sizes ('1x64,2x64,2x128,4x128'); the fit (None without `fit`).
    The sweep owns `out` while it runs (runtime/run_dir.py: a second sweep on it is refused)."""
    with torch_threads(threads), run_lock(out, f"scale sweep --sizes {sizes}"):
        plan = plan_sweep(sizes, tokens, time_budget, config, overrides, eval_every)
        per_step = time_sizes(plan, log, finished_sizes(out))
        ok = train_sizes(plan, per_step, out, log)
        if fit:
            return fit_sweep(ok, out, log)
    return None


def fit_sweep(ok: list[dict], out: str, log: Log = print) -> PowerLawFit:
    """L(N) of the finished sizes (OUT/fit.json, scaling.png) and, when the frontier is long
    enough, L(C) (OUT/frontier.json, frontier.png); returns the L(N) fit."""
    result = fit_and_report(ok, True, os.path.join(out, "scaling.png"), log=log)
    atomic_write_json(os.path.join(out, "fit.json"), result.to_dict())
    try:
        frontier = frontier_report(ok, True, plot=os.path.join(out, "frontier.png"), log=log)
    except DataError as e:  # the L(N) fit is written; a frontier too short to fit must not hide it
        log(f"note: no L(C) fit: {e}")
        return result
    atomic_write_json(os.path.join(out, "frontier.json"), frontier)
    return result
