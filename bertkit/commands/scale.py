"""`bertkit scale formula|fit|frontier|sweep`: scaling-law numbers, fits, and a budgeted sweep.

    bertkit scale formula --compute 1e21                  # Chinchilla optimum (+ Kaplan loss there)
    bertkit scale formula --params 1e8 --tokens 2e9       # losses of a given allocation
    bertkit scale fit OUT/sweep.jsonl --plot scaling.png  # L(N) = (N_c/N)^alpha + L_inf with errors
    bertkit scale frontier OUT/sweep.jsonl --plot frontier.png  # L(C) on the compute frontier
    bertkit scale sweep --sizes 1x64,1x96,2x96,2x128,3x128 --tokens 1000000 --time-budget 900 --out OUT

formula and fit are bertkit/analysis/scaling_report.py, frontier frontier_report.py; the
sweep (one small encoder pre-trained per size on the same tokens, within a time budget, then
both fits) is the recipe bertkit/recipes/scaling_sweep.py, whose docstring explains the budget.
"""

from __future__ import annotations

from bertkit.analysis.frontier_report import frontier_file
from bertkit.analysis.scaling_report import fit_sweep_file, report_formula
from bertkit.recipes.scaling_sweep import EVALS_PER_RUN, scaling_sweep
from bertkit.commands.options import add_device, add_seed, add_set, say, typed_settings


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="scale_command", metavar="ACTION", required=True)

    about = "Chinchilla's compute-optimal N and D, and both papers' losses"
    p = sub.add_parser("formula", help=about, description=about)
    p.add_argument("--compute", type=float, help="training compute C in FLOPs (C = 6 N D)")
    p.add_argument("--params", type=float, help="non-embedding parameters N (with --tokens)")
    p.add_argument("--tokens", type=float, help="training tokens D (with --params)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    about = "fit L(N) = (N_c/N)^alpha + L_inf to a sweep's results"
    p = sub.add_parser("fit", help=about, description=about)
    p.add_argument("sweep", help="sweep results (JSON lines with n_params and loss), e.g. OUT/sweep.jsonl")
    p.add_argument("--plot", metavar="PNG", help="write the points, the fit and its extrapolation")
    p.add_argument("--no-offset", action="store_true", help="fit L(N) = (N_c/N)^alpha (L_inf = 0)")
    p.add_argument("--json", action="store_true", help="print the fit as one JSON object")

    about = "Kaplan's L(C): the compute frontier of a sweep's learning curves, fitted"
    p = sub.add_parser("frontier", help=about, description=about)
    p.add_argument("sweep", help="sweep results with learning curves (a sweep's OUT/sweep.jsonl)")
    p.add_argument("--plot", metavar="PNG", help="write each size's L(C) curve, the frontier and the fit")
    p.add_argument("--no-offset", action="store_true", help="fit L(C) = (C_c/C)^alpha_C (L_inf = 0), Kaplan's form")
    p.add_argument("--min-compute", type=float, default=0.0, metavar="FLOPS",
                   help="fit only the frontier points at this compute or more (e.g. past the unigram plateau)")
    p.add_argument("--json", action="store_true", help="print the points, frontier and fit as one JSON object")

    about = "pre-train a sweep of small models within a time budget and fit L(N)"
    p = sub.add_parser("sweep", help=about, description=about)
    p.add_argument("--sizes", required=True,
                   help="comma-separated LAYERSxHIDDEN[xHEADS], e.g. 1x64,2x64,2x128,4x128 "
                        "(heads default to hidden/64, at least 2; feed-forward width the family's)")
    p.add_argument("--tokens", required=True, type=float, help="training tokens per size, e.g. 1e6")
    p.add_argument("--time-budget", required=True, type=float, metavar="SECONDS",
                   help="wall-clock budget for all runs; sizes that would overrun it are skipped")
    p.add_argument("--out", required=True, help="directory: sweep.jsonl, fit.json, scaling.png, runs/")
    p.add_argument("--config", help="pre-training recipe TOML (default: the built-in tiny BBC recipe)")
    add_set(p, "train.lr=5e-4 data.max_length=32")
    add_seed(p)
    add_device(p, "train.device, else auto")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads (default: torch's choice); 1 is fastest for tiny models "
                        "on a busy machine")
    p.add_argument("--eval-every", type=int, metavar="STEPS",
                   help="held-out evaluations every STEPS steps, the points of each size's L(C) curve "
                        f"(default: {EVALS_PER_RUN} per run)")
    p.add_argument("--no-fit", action="store_true", help="only train; fit later with `bertkit scale fit`")


def run(args) -> int:
    if args.scale_command == "formula":
        report_formula(args.compute, args.params, args.tokens, as_json=args.json)
    elif args.scale_command == "frontier":
        frontier_file(args.sweep, fit_offset=not args.no_offset, min_compute=args.min_compute, plot=args.plot,
                      as_json=args.json)
    elif args.scale_command == "fit":
        fit_sweep_file(args.sweep, fit_offset=not args.no_offset, plot=args.plot, as_json=args.json)
    else:
        scaling_sweep(args.sizes, args.tokens, args.time_budget, args.out, config=args.config,
                      overrides=list(args.set) + typed_settings(args), threads=args.threads,
                      fit=not args.no_fit, eval_every=args.eval_every, log=say)
    return 0
