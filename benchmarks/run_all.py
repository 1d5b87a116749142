"""Run every benchmark, then write the ratio table into docs/benchmarks.md and a PNG plot.

    python benchmarks/run_all.py [--repeats N] [--threads N] [--label NAME] [--only mlm_mini,encode]
                                 [--table-only]
    python benchmarks/run_all.py --check [--repeats 3]

`--check` re-runs every headline ratio of docs/benchmarks.md briefly (the four below and the
inference ratios against sentence-transformers and ONNX Runtime), into results labelled "check",
and flags each one whose min-max range no longer overlaps the recorded one: moved beyond the
noise of both runs. It exits 1 when any moved.

Each benchmark runs as its own process (`python benchmarks/bench_*.py ...`) and leaves a JSON
summary in benchmarks/results/; the table and plot are built from those files, so
`--table-only` rebuilds them without re-running anything. `--label` keeps a variant's results
(e.g. `--threads 1 --label threads1`) in files and a table of their own. Set LD_PRELOAD (see
docs/benchmarks.md, "tcmalloc") before calling this to run everything with another allocator.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
PLOT = os.path.join(ROOT, "docs", "img", "benchmarks.png")

# name -> (script arguments, goal ratio)
BENCHMARKS = {
    "mlm_mini": (["bench_mlm.py", "--shape", "mini"], 4.0),
    "mlm_small": (["bench_mlm.py", "--shape", "small"], 3.0),
    "finetune": (["bench_finetune.py"], 1.3),
    "encode": (["bench_encode.py"], 2.0),
}
TITLES = {
    "mlm_mini": "(a) MLM step, mini (4L/256H), batch 32 x 128",
    "mlm_small": "(b) MLM step, small (4L/512H), batch 16 x 128",
    "finetune": "(c) fine-tune step, MiniLM, BBC, batch 16, trunc. 256",
    "encode": "(d) encode 400 BBC texts, MiniLM",
}


# The inference headline: bertkit fp32 `encode` against its anchors, on a user's batch sizes.
INFERENCE = ["bench_inference.py", "--runtimes", "bertkit fp32", "sentence-transformers", "onnxruntime fp32",
             "--no-memory"]
INFERENCE_LABEL = "realistic"  # the label of the recorded results docs/benchmarks.md cites
# headline -> (script arguments, result file, anchor row or None for a bertkit ÷ transformers
# result, label of the recorded result)
HEADLINES = {**{name: (spec[0], name, None, "") for name, spec in BENCHMARKS.items()},
             **{f"encode {set_name} ÷ {anchor}": ([*INFERENCE, "--sets", set_name], f"inference-{set_name}", anchor,
                                                  INFERENCE_LABEL)
                for set_name in ("mixed", "short", "long") for anchor in ("sentence-transformers", "onnxruntime fp32")}}


def run(names: list[str], extra: list[str]) -> None:
    for name in names:
        run_script(BENCHMARKS[name][0], extra)


def run_script(script_args: list[str], extra: list[str]) -> None:
    script, *args = script_args
    cmd = [sys.executable, os.path.join(HERE, script), *args, *extra]
    print("$", " ".join(f"'{a}'" if " " in a else a for a in cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def headline_ratio(result: dict, anchor: str | None) -> tuple[float, float, float]:
    """(median, min, max) of bertkit's speed over the anchor in one result file."""
    if anchor is None:  # a bench_* result: bertkit ÷ transformers per repeat
        return result["ratio_median"], result["ratio_min"], result["ratio_max"]
    row = result["rows"][anchor]  # bench_inference: the anchor's speed vs bertkit fp32, inverted
    return 1 / row["speed_vs_bertkit_fp32"], 1 / row["speed_max"], 1 / row["speed_min"]


def verdict(recorded: tuple[float, float, float], now: tuple[float, float, float]) -> str:
    """"moved up"/"moved down" when the two min-max ranges do not overlap, else "held"."""
    if now[1] > recorded[2]:
        return "moved up"
    if now[2] < recorded[1]:
        return "moved down"
    return "held"


def check(repeats: int, threads: int | None) -> bool:
    """Re-run each headline's script once (labelled "check"), print recorded against now;
    True when every headline held."""
    extra = ["--repeats", str(repeats), "--label", "check"] + (["--threads", str(threads)] if threads else [])
    for script_args in {tuple(spec[0]): None for spec in HEADLINES.values()}:
        run_script(list(script_args), extra)
    return print_check()


def print_check() -> bool:
    rows = ["| headline | recorded (median, min – max) | now | verdict |", "|---|---|---|---|"]
    held = True
    for name, (_, result_name, anchor, label) in HEADLINES.items():
        recorded_file, now_file = load(result_name, label), load(result_name, "check")
        if recorded_file is None or now_file is None:
            rows.append(f"| {name} | {'-' if recorded_file is None else 'recorded'} | "
                        f"{'-' if now_file is None else 'measured'} | not compared |")
            continue
        recorded, now = headline_ratio(recorded_file, anchor), headline_ratio(now_file, anchor)
        result = verdict(recorded, now)
        held &= result == "held"
        rows.append(f"| {name} | {recorded[0]:.2f}x ({recorded[1]:.2f} – {recorded[2]:.2f}) | "
                    f"{now[0]:.2f}x ({now[1]:.2f} – {now[2]:.2f}) | {result} |")
    print("\n".join(rows))
    return held


def markers(label: str) -> tuple[str, str]:
    tag = f"table:{label}" if label else "table"
    return f"<!-- run_all:{tag}:start -->", f"<!-- run_all:{tag}:end -->"


START, END = markers("")


def load(name: str, label: str = "") -> dict | None:
    path = os.path.join(RESULTS, name + (f"-{label}" if label else "") + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def table(names: list[str], label: str = "") -> str:
    rows = ["| workload | bertkit ÷ transformers (median) | min – max | repeats | goal | "
            "tokens/s bertkit / transformers | MFU bertkit / transformers | "
            "peak RSS MB bertkit / transformers | command |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        r = load(name, label)
        if r is None:
            continue
        goal = BENCHMARKS[name][1]
        met = "met" if r["ratio_median"] >= goal else "not met"
        mem = r.get("memory") or {}
        mem_s = (f"{mem['bertkit']['steady_peak_mb']:.0f} / {mem['transformers']['steady_peak_mb']:.0f}"
                 if mem else "-")
        rows.append(
            f"| {TITLES[name]} | **{r['ratio_median']:.2f}x** | {r['ratio_min']:.2f} – {r['ratio_max']:.2f} | "
            f"{len(r['times']['bertkit'])} | ≥ {goal}x ({met}) | "
            f"{r['rate']['bertkit']:,.0f} / {r['rate']['transformers']:,.0f} | "
            f"{100 * r['mfu']['bertkit']:.1f}% / {100 * r['mfu']['transformers']:.1f}% | {mem_s} | "
            f"`{r['command'].replace(ROOT + '/', '')}` |")
    return "\n".join(rows)


def plot(names: list[str], label: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [(n, load(n, label)) for n in names]
    results = [(n, r) for n, r in results if r is not None]
    if not results:
        return
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.7 * len(results)))
    for i, (name, r) in enumerate(results):
        med = r["ratio_median"]
        ax.barh(i, med, color="tab:blue" if med >= BENCHMARKS[name][1] else "tab:orange")
        ax.errorbar(med, i, xerr=[[med - r["ratio_min"]], [r["ratio_max"] - med]], color="black", capsize=4)
        ax.plot([BENCHMARKS[name][1]] * 2, [i - 0.4, i + 0.4], color="red", linestyle="--")
        ax.text(max(r["ratio_max"], BENCHMARKS[name][1]) + 0.08, i, f"{med:.2f}x", va="center")
    ax.axvline(1.0, color="gray", linewidth=0.8)
    ax.set_yticks(range(len(results)), [TITLES[n] for n, _ in results])
    ax.invert_yaxis()
    ax.set_xlabel("speed ratio bertkit ÷ transformers: median, whiskers min–max, red dashes = goal")
    ax.set_xlim(0, max(max(r["ratio_max"], BENCHMARKS[n][1]) for n, r in results) + 0.6)
    threads = results[0][1].get("threads", "?")
    ax.set_title(f"bertkit vs transformers, same run, {threads} thread(s) each (2-core CPU)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(PLOT), exist_ok=True)
    fig.savefig(plot_path(label), dpi=110)
    plt.close(fig)


def plot_path(label: str) -> str:
    return PLOT if not label else PLOT.replace(".png", f"-{label}.png")


def write_doc(names: list[str], label: str = "") -> None:
    start, end = markers(label)
    image = os.path.relpath(plot_path(label), os.path.dirname(DOC))
    block = f"{start}\n{table(names, label)}\n\n![ratios]({image})\n{end}"
    text = open(DOC).read() if os.path.exists(DOC) else f"# Benchmarks\n\n{start}\n{end}\n"
    if start not in text:
        text += f"\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    with open(DOC, "w") as f:
        f.write(head + block + tail)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset")
    p.add_argument("--threads", type=int, default=None, help="passed to every benchmark")
    p.add_argument("--label", default="", help="passed to every benchmark; its own table and plot")
    p.add_argument("--table-only", action="store_true", help="rebuild table and plot from results/")
    p.add_argument("--check", action="store_true",
                   help="re-run the headline ratios briefly and flag any that moved (exit 1)")
    args = p.parse_args(argv)
    if args.check:
        sys.exit(0 if check(args.repeats, args.threads) else 1)
    names = args.only.split(",")
    if not args.table_only:
        extra = ["--repeats", str(args.repeats)]
        extra += ["--threads", str(args.threads)] if args.threads else []
        extra += ["--label", args.label] if args.label else []
        run(names, extra)
    all_names = list(BENCHMARKS)
    write_doc(all_names, args.label)
    plot(all_names, args.label)
    print(table(all_names, args.label))


if __name__ == "__main__":
    main(sys.argv[1:])
