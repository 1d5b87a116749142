"""`bertkit pretrain --config FILE --out DIR [--set section.key=value ...] [--resume]`."""

from __future__ import annotations

import sys

HELP = "pre-train an encoder from a TOML recipe: MLM (+ NSP/SOP) or ELECTRA; BERT, RoBERTa, ALBERT, ... configs"


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True, help="recipe TOML, e.g. configs/pretrain-tiny.toml")
    parser.add_argument("--out", required=True, help="run directory: checkpoints, metrics.jsonl, curves.png")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one config value (a TOML literal), e.g. --set train.lr=5e-4; repeatable")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest complete checkpoint in --out")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from ..train.pretrain import load_config, run_pretraining
    from ..train.distributed import shutdown

    cfg = load_config(args.config, args.overrides)
    try:
        metrics = run_pretraining(cfg, args.out, resume=args.resume, progress=not args.quiet)
    finally:
        shutdown()
    if metrics:
        print("final: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in metrics.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run this command alone (`python -m bertkit.commands.pretrain ...`, or under torchrun)."""
    from ..cli import main as cli_main

    return cli_main(["pretrain", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
