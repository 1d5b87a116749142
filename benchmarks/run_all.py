"""Run every benchmark, then write the ratio table into docs/benchmarks.md and a PNG plot.

    python benchmarks/run_all.py [--repeats N] [--only mlm_mini,encode] [--table-only]

Each benchmark runs as its own process (`python benchmarks/bench_*.py ...`) and leaves a JSON
summary in benchmarks/results/; the table and plot are built from those files, so
`--table-only` rebuilds them without re-running anything. Set LD_PRELOAD (see
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
START, END = "<!-- run_all:table:start -->", "<!-- run_all:table:end -->"

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


def run(names: list[str], extra: list[str]) -> None:
    for name in names:
        script, *args = BENCHMARKS[name][0]
        cmd = [sys.executable, os.path.join(HERE, script), *args, *extra]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT)


def load(name: str) -> dict | None:
    path = os.path.join(RESULTS, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def table(names: list[str]) -> str:
    rows = ["| workload | bertkit ÷ transformers (median) | min – max | repeats | goal | "
            "tokens/s bertkit / transformers | MFU bertkit / transformers | "
            "peak RSS MB bertkit / transformers | command |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        r = load(name)
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


def plot(names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [(n, load(n)) for n in names]
    results = [(n, r) for n, r in results if r is not None]
    if not results:
        return
    fig, ax = plt.subplots(figsize=(8, 0.9 + 0.7 * len(results)))
    for i, (name, r) in enumerate(results):
        med = r["ratio_median"]
        ax.barh(i, med, color="tab:blue" if med >= BENCHMARKS[name][1] else "tab:orange")
        ax.errorbar(med, i, xerr=[[med - r["ratio_min"]], [r["ratio_max"] - med]], color="black", capsize=4)
        ax.plot([BENCHMARKS[name][1]] * 2, [i - 0.4, i + 0.4], color="red", linestyle="--")
        ax.text(r["ratio_max"] + 0.05, i, f"{med:.2f}x", va="center")
    ax.axvline(1.0, color="gray", linewidth=0.8)
    ax.set_yticks(range(len(results)), [TITLES[n] for n, _ in results])
    ax.invert_yaxis()
    ax.set_xlabel("speed ratio bertkit ÷ transformers (median, bar = min–max; red dashes = goal)")
    ax.set_title("bertkit vs transformers on this machine, same run")
    fig.tight_layout()
    os.makedirs(os.path.dirname(PLOT), exist_ok=True)
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)


def write_doc(names: list[str]) -> None:
    block = f"{START}\n{table(names)}\n\n![ratios](img/benchmarks.png)\n{END}"
    text = open(DOC).read() if os.path.exists(DOC) else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC, "w") as f:
        f.write(head + block + tail)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset")
    p.add_argument("--table-only", action="store_true", help="rebuild table and plot from results/")
    args = p.parse_args(argv)
    names = args.only.split(",")
    if not args.table_only:
        run(names, ["--repeats", str(args.repeats)])
    all_names = list(BENCHMARKS)
    write_doc(all_names)
    plot(all_names)
    print(table(all_names))


if __name__ == "__main__":
    main(sys.argv[1:])
