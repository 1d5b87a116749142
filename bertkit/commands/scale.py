"""`bertkit scale formula|fit|sweep`: scaling-law numbers, fits, and a budgeted sweep.

    bertkit scale formula --compute 1e21                  # Chinchilla optimum (+ Kaplan loss there)
    bertkit scale formula --params 1e8 --tokens 2e9       # losses of a given allocation
    bertkit scale fit OUT/sweep.jsonl --plot scaling.png  # L(N) = (N_c/N)^alpha + L_inf with errors
    bertkit scale sweep --sizes 1x64,1x96,2x96,2x128,3x128 --tokens 1000000 --time-budget 900 --out OUT

The sweep pre-trains one small BERT per size with the pre-training recipe (bertkit.recipes.pretrain,
default corpus BBC News, MLM) on the same number of tokens, records each run's held-out MLM
loss and non-embedding parameter count N (the encoder layers: Kaplan et al.'s definition
leaves out the embedding matrices) in OUT/sweep.jsonl, and fits L(N).

Budget: before any data preparation it times 3 optimizer steps of each size (smallest first,
by training FLOPs per token: 3 x forward = 3 x [2 x 12 L H^2 for the layers, 4 L T H for the
attention scores, 2 p (H^2 + V H) for the MLM head at the masked share p]) on random tokens,
and estimates each run as steps x seconds per step. Timing beats a FLOP count here: tiny
models are dominated by per-step overhead (measured 21 ms vs 42 ms per step for 1x8 vs 2x32,
a 19x FLOP ratio). If the four smallest sizes cannot finish inside --time-budget it stops at
once with the estimate; during the sweep, each run's estimate is rescaled by how the previous
run's real time compared with its estimate, and a run that would overrun is skipped.

At a fixed token budget the larger models are further from convergence than the smaller
ones, so the fitted exponent describes this budget, not Kaplan's converged L(N).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import time

from ..errors import ConfigError, DataError

HELP = "scaling laws: published formulas, power-law fits of sweeps, and a budgeted size sweep"
MIN_SIZES = 4  # L(N) = (N_c/N)^alpha + L_inf has 3 parameters; one more size estimates their errors

# The sweep's recipe when no --config is given: the tiny pre-training recipe on BBC News.
SWEEP_DEFAULTS = {
    "model": {"preset": "tiny"},
    "tokenizer": {"vocab_size": 4000, "min_frequency": 2},
    "data": {"corpus": "bbc", "objective": "mlm", "builder": "full_sentences", "max_length": 64,
             "eval_fraction": 0.05, "max_eval_examples": 512},
    "train": {"batch_size": 32, "lr": 1e-3, "warmup_ratio": 0.1, "schedule": "linear",
              "weight_decay": 0.01, "grad_clip": 1.0, "log_every": 10, "seed": 0},
}


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="scale_command", metavar="ACTION", required=True)

    p = sub.add_parser("formula", help="Chinchilla's compute-optimal N and D, and both papers' losses")
    p.add_argument("--compute", type=float, help="training compute C in FLOPs (C = 6 N D)")
    p.add_argument("--params", type=float, help="non-embedding parameters N (with --tokens)")
    p.add_argument("--tokens", type=float, help="training tokens D (with --params)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("fit", help="fit L(N) = (N_c/N)^alpha + L_inf to a sweep's results")
    p.add_argument("sweep", help="sweep results (JSON lines with n_params and loss), e.g. OUT/sweep.jsonl")
    p.add_argument("--plot", metavar="PNG", help="write the points, the fit and its extrapolation")
    p.add_argument("--no-offset", action="store_true", help="fit L(N) = (N_c/N)^alpha (L_inf = 0)")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")

    p = sub.add_parser("sweep", help="pre-train a sweep of small models within a time budget and fit L(N)")
    p.add_argument("--sizes", required=True,
                   help="comma-separated LAYERSxHIDDEN[xHEADS], e.g. 1x64,2x64,2x128,4x128 "
                        "(heads default to hidden/64, at least 1; intermediate = 4 x hidden)")
    p.add_argument("--tokens", required=True, type=float, help="training tokens per size, e.g. 1e6")
    p.add_argument("--time-budget", required=True, type=float, metavar="SECONDS",
                   help="wall-clock budget for all runs; sizes that would overrun it are skipped")
    p.add_argument("--out", required=True, help="directory: sweep.jsonl, fit.json, scaling.png, runs/")
    p.add_argument("--config", help="pre-training recipe TOML (default: the built-in tiny BBC recipe)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a recipe value, e.g. --set train.lr=5e-4 (repeatable)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's choice); 1 is fastest for tiny models "
                        "on a busy machine")
    p.add_argument("--no-fit", action="store_true", help="only train; fit later with `bertkit scale fit`")


def run(args) -> int:
    return {"formula": run_formula, "fit": run_fit, "sweep": run_sweep_command}[args.scale_command](args)


# ----------------------------------------------------------------------------- formula
def _positive(name: str, value) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--{name} must be a positive number, got {value}")


def run_formula(args) -> int:
    from ..analysis.scaling import chinchilla_loss, chinchilla_optimal, kaplan_loss

    for name in ("compute", "params", "tokens"):
        _positive(name, getattr(args, name))
    if (args.params is None) != (args.tokens is None):
        raise ConfigError("give --params and --tokens together (a model size and its training tokens)")
    if args.compute is None and args.params is None:
        raise ConfigError("give --compute FLOPS, or --params N --tokens D (or all three)")
    compute = args.compute if args.compute is not None else 6.0 * args.params * args.tokens
    n_opt, d_opt = (float(v) for v in chinchilla_optimal(compute))
    result = {
        "compute": compute,
        "chinchilla_optimal": {"params": n_opt, "tokens": d_opt, "tokens_per_param": d_opt / n_opt,
                               "chinchilla_loss": float(chinchilla_loss(n_opt, d_opt)),
                               "kaplan_loss": float(kaplan_loss(n_opt, d_opt))},
    }
    if args.params is not None:
        result["given"] = {"params": args.params, "tokens": args.tokens, "compute": 6.0 * args.params * args.tokens,
                           "chinchilla_loss": float(chinchilla_loss(args.params, args.tokens)),
                           "kaplan_loss": float(kaplan_loss(args.params, args.tokens))}
    if args.json:
        print(json.dumps(result))
        return 0
    opt = result["chinchilla_optimal"]
    print(f"compute C = {compute:.3g} FLOPs (C = 6 N D)")
    print(f"Chinchilla optimum (Hoffmann et al. 2022, approach 3): N = {n_opt:.3g} parameters, "
          f"D = {d_opt:.3g} tokens ({opt['tokens_per_param']:.0f} tokens per parameter)")
    print(f"  loss there: Chinchilla L(N, D) = {opt['chinchilla_loss']:.3f}, "
          f"Kaplan L(N, D) = {opt['kaplan_loss']:.3f} nats/token")
    if "given" in result:
        g = result["given"]
        print(f"given N = {g['params']:.3g}, D = {g['tokens']:.3g} ({g['tokens'] / g['params']:.1f} tokens per "
              f"parameter, C = {g['compute']:.3g}): Chinchilla L = {g['chinchilla_loss']:.3f}, "
              f"Kaplan L = {g['kaplan_loss']:.3f} nats/token")
    print("(the two papers' losses are on different data and tokenizers: compare shapes, not values)")
    return 0


# ----------------------------------------------------------------------------- fit
def fit_and_report(records: list[dict], fit_offset: bool, plot: str | None, as_json: bool = False):
    from ..analysis.scaling import fit_sweep, plot_scaling

    ok = [r for r in records if r.get("status", "ok") == "ok"]
    for r in ok:
        r.setdefault("status", "ok")
    fit = fit_sweep(ok, fit_offset=fit_offset)
    if plot:
        plot_scaling(ok, fit, plot)
    if as_json:
        print(json.dumps(fit.to_dict()))
        return fit
    print(f"{'N (non-emb.)':>13}  {'loss':>7}  {'fit':>7}  {'resid.':>7}")
    for r in sorted(ok, key=lambda r: r["n_params"]):
        pred = float(fit.predict(r["n_params"]))
        print(f"{round(r['n_params']):>13,}  {r['loss']:7.4f}  {pred:7.4f}  {r['loss'] - pred:+7.4f}")
    law = "(N_c/N)^alpha + L_inf" if fit_offset else "(N_c/N)^alpha"
    print(f"fit L(N) = {law} on {fit.n_points} sizes: alpha = {fit.alpha:.3f} +/- {fit.alpha_se:.3f}, "
          f"N_c = {fit.n_c:.3g} (ln N_c = {fit.log_n_c:.2f} +/- {fit.log_n_c_se:.2f})"
          + (f", L_inf = {fit.l_inf:.3f} +/- {fit.l_inf_se:.3f}" if fit_offset else ""))
    dof = fit.n_points - (3 if fit_offset else 2)
    print(f"(standard errors from the least-squares covariance with {dof} residual degree(s) of freedom; "
          "few points make them rough)")
    for warning in fit_warnings(fit):
        print(f"warning: {warning}")
    if plot:
        print(f"wrote {plot}")
    return fit


def fit_warnings(fit) -> list[str]:
    """Signs that the sizes do not pin the law down (the numbers are then not worth quoting)."""
    out = []
    if not fit.alpha_se < abs(fit.alpha):
        out.append(f"alpha is not determined: its standard error ({fit.alpha_se:.3g}) is at least its value; "
                   "the losses change too little over these sizes (train longer, or spread the sizes)")
    if fit.fit_offset and fit.l_inf < 0:
        out.append(f"the fitted L_inf = {fit.l_inf:.3g} is negative, which no loss can reach; "
                   "try --no-offset, or more sizes")
    return out


def run_fit(args) -> int:
    from ..analysis.scaling import load_sweep

    if not os.path.isfile(args.sweep):
        raise DataError(f"sweep file {args.sweep} does not exist; pass the sweep.jsonl a sweep wrote")
    records = load_sweep(args.sweep)
    bad = [k + 1 for k, r in enumerate(records) if r.get("status", "ok") == "ok"
           and not ("n_params" in r and "loss" in r)]
    if bad:
        raise DataError(f"{args.sweep}: record {bad[0]} has no n_params/loss; each line needs both")
    fit_and_report(records, not args.no_offset, args.plot, args.json)
    return 0


# ----------------------------------------------------------------------------- sweep
_SIZE = re.compile(r"^(\d+)x(\d+)(?:x(\d+))?$")


def parse_sizes(text: str) -> list[dict]:
    """'1x64,2x128x4' -> [{"layers": 1, "hidden": 64, "heads": 1}, {"layers": 2, "hidden": 128, "heads": 4}]."""
    sizes = []
    for part in (p.strip() for p in text.split(",")):
        m = _SIZE.match(part)
        if not m:
            raise ConfigError(f"--sizes entry {part!r} is not LAYERSxHIDDEN[xHEADS] (e.g. 2x128 or 2x128x4)")
        layers, hidden = int(m[1]), int(m[2])
        heads = int(m[3]) if m[3] else max(1, hidden // 64)
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


def non_embedding_params(layers: int, hidden: int, intermediate: int) -> int:
    """Parameters of the encoder layers (Kaplan's N): Q, K, V, O, two FFN matrices, biases, 2 LayerNorms."""
    attention = 4 * (hidden * hidden + hidden)
    ffn = hidden * intermediate + intermediate + intermediate * hidden + hidden
    return layers * (attention + ffn + 4 * hidden)


def _base_config(args):
    from ..recipes.pretrain import load_config, parse_config

    if args.config:
        return load_config(args.config, args.overrides)
    return parse_config(json.loads(json.dumps(SWEEP_DEFAULTS)), args.overrides)


def _run_config(cfg, spec: dict, steps: int, tokenizer_path: str = "", shards: str = ""):
    model = {**cfg.model, "num_hidden_layers": spec["layers"], "hidden_size": spec["hidden"],
             "num_attention_heads": spec["heads"], "intermediate_size": 4 * spec["hidden"]}
    return dataclasses.replace(
        cfg, model=model,
        tokenizer=dataclasses.replace(cfg.tokenizer, path=tokenizer_path or cfg.tokenizer.path),
        data=dataclasses.replace(cfg.data, corpus=shards or cfg.data.corpus),
        train=dataclasses.replace(cfg.train, max_steps=steps, eval_every=0, save_every=0))


def calibrate(cfg, spec: dict, vocab: int, steps: int = 3) -> float:
    """Seconds per optimizer step of `spec` at the recipe's batch shape, on random tokens."""
    import torch

    from ..recipes.pretrain import build_model

    torch.manual_seed(0)
    model = build_model(_run_config(cfg, spec, 1), vocab)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
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


def run_sweep_command(args) -> int:
    import torch

    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {args.threads}")
    before = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        return _sweep(args)
    finally:
        torch.set_num_threads(before)


def _sweep(args) -> int:
    from ..analysis.scaling import load_sweep, run_sweep

    sizes = parse_sizes(args.sizes)
    if len(sizes) < MIN_SIZES:
        raise ConfigError(f"--sizes gives {len(sizes)} sizes; fitting L(N) = (N_c/N)^alpha + L_inf needs at least "
                          f"{MIN_SIZES} (3 parameters and an error estimate)")
    _positive("tokens", args.tokens)
    _positive("time-budget", args.time_budget)
    cfg = _base_config(args)
    B, T = cfg.train.batch_size, cfg.data.max_length
    steps = max(1, math.ceil(args.tokens / (B * T)))
    tokens = steps * B * T
    vocab = cfg.tokenizer.vocab_size
    if cfg.tokenizer.path:
        from ..tokenizer import Tokenizer

        vocab = Tokenizer.from_pretrained(cfg.tokenizer.path).vocab_size
    # smallest first: the driver assumes later sizes cost more
    sizes.sort(key=lambda s: flops_per_token(s["layers"], s["hidden"], T, vocab, cfg.data.mlm_probability))

    # 1. Can the 4 smallest finish? Time a few steps of each size (a small share of its run).
    overhead = 1.25  # data loading, masking, logging and the final evaluation
    print(f"sweep: {len(sizes)} sizes x {tokens:,} tokens ({steps} steps of {B} x {T}), "
          f"budget {args.time_budget:g} s; timing 3 steps per size:", flush=True)
    per_step: dict[str, float] = {}
    total = 0.0
    for k, spec in enumerate(sizes):
        if total > args.time_budget and k >= MIN_SIZES:
            print(f"  {size_name(spec):>10}  not timed: the sizes before it already fill the budget")
            continue
        per_step[size_name(spec)] = calibrate(cfg, spec, vocab)
        estimate = overhead * steps * per_step[size_name(spec)]
        total += estimate
        n = non_embedding_params(spec["layers"], spec["hidden"], 4 * spec["hidden"])
        print(f"  {size_name(spec):>10}  N = {n:>10,}  {per_step[size_name(spec)]:.3f} s/step, "
              f"estimated {estimate:6.0f} s", flush=True)
        if k < MIN_SIZES and total > args.time_budget:  # the sizes timed so far alone overrun it
            need = total if k == MIN_SIZES - 1 else total * MIN_SIZES / (k + 1)  # larger sizes cost more
            raise ConfigError(
                f"--time-budget {args.time_budget:g}s is too small: the {MIN_SIZES} smallest sizes (the fewest a "
                f"fit needs) are estimated at {'' if k == MIN_SIZES - 1 else 'over '}{total:.0f}s on this "
                f"machine; raise --time-budget to about {math.ceil(need * 1.2)} or lower --tokens")
    if total > args.time_budget:
        print(f"note: the timed sizes are estimated at {total:.0f}s > {args.time_budget:g}s; "
              "the largest will be skipped")

    # 2. Tokenizer and token shards once, shared by every run.
    os.makedirs(args.out, exist_ok=True)
    shared = os.path.join(args.out, "data")
    tokenizer_path, shards = prepare_data(cfg, shared)
    vocab = _vocab_size(tokenizer_path)

    # 3. Train, smallest first, within the budget (results appended to sweep.jsonl as they come).
    from ..recipes.pretrain import build_model, run_pretraining

    def train_fn(spec, max_tokens):
        name = size_name(spec)
        run_dir = os.path.join(args.out, "runs", name)
        shutil.rmtree(run_dir, ignore_errors=True)  # a run interrupted before it was recorded
        run_cfg = _run_config(cfg, spec, steps, tokenizer_path, shards)
        model = build_model(run_cfg, vocab)
        n_params = sum(p.numel() for p in model.bert.encoder.parameters())
        t0 = time.perf_counter()
        metrics = run_pretraining(run_cfg, run_dir, progress=False)
        if "mlm_loss" not in metrics:
            raise DataError("the run produced no held-out MLM loss; the corpus needs enough documents "
                            "for data.eval_fraction to hold some out")
        print(f"  {name:>10}  N = {n_params:>10,}  held-out MLM loss {metrics['mlm_loss']:.4f}  "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        return {"loss": metrics["mlm_loss"], "n_params": n_params,
                "params_total": sum(p.numel() for p in model.parameters()),
                "mlm_accuracy": metrics.get("mlm_accuracy"), "steps": steps, "name": name}

    sweep_path = os.path.join(args.out, "sweep.jsonl")
    start = time.perf_counter()
    timed = [spec for spec in sizes if size_name(spec) in per_step]  # untimed ones cannot fit anyway
    records = run_sweep(train_fn, timed, tokens, args.time_budget, out_path=sweep_path,
                        cost_fn=lambda spec, n: per_step[size_name(spec)] * n)
    print(f"sweep took {time.perf_counter() - start:.0f} s; results in {sweep_path}")
    skipped = [r for r in records if r["status"] == "skipped"]
    if skipped:
        print(f"skipped {size_name(skipped[0]['size'])} and larger: {skipped[0]['reason']}")
    elif len(timed) < len(sizes):
        print(f"left out {', '.join(size_name(s) for s in sizes[len(timed):])}: estimated beyond the budget")
    ok = [r for r in load_sweep(sweep_path) if r.get("status") == "ok"]
    if len(ok) < MIN_SIZES:
        raise ConfigError(
            f"only {len(ok)} size(s) finished inside --time-budget {args.time_budget:g}s; fitting needs "
            f"{MIN_SIZES}: rerun with a larger --time-budget (finished sizes are kept and not retrained)")
    if args.no_fit:
        return 0
    fit = fit_and_report(ok, True, os.path.join(args.out, "scaling.png"))
    from ..io import atomic_write_json

    atomic_write_json(os.path.join(args.out, "fit.json"), fit.to_dict())
    return 0


def prepare_data(cfg, directory: str) -> tuple[str, str]:
    """Train (or load) the tokenizer and write the token shards once: (tokenizer dir, shard dir)."""
    from ..data.corpus import open_corpus
    from ..train.distributed import init_distributed
    from ..recipes.pretrain import get_documents, get_tokenizer

    ctx = init_distributed(cfg.train.device)
    os.makedirs(directory, exist_ok=True)
    corpus = None if cfg.tokenizer.path else open_corpus(cfg.data.corpus, cfg.data.mode)
    tokenizer = get_tokenizer(cfg, corpus, directory, ctx.is_main, ctx)
    get_documents(cfg, tokenizer, directory, ctx.is_main, ctx)
    tokenizer_path = cfg.tokenizer.path or os.path.join(directory, "tokenizer")
    shards = cfg.data.corpus if os.path.isfile(os.path.join(cfg.data.corpus, "meta.json")) \
        else os.path.join(directory, "shards")
    return tokenizer_path, shards


def _vocab_size(tokenizer_path: str) -> int:
    from ..tokenizer import Tokenizer

    return max(Tokenizer.from_pretrained(tokenizer_path).get_vocab().values()) + 1
