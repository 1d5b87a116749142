"""Threads on a shared machine: a mini MLM step under three threading policies, quiet and with a
competing CPU-bound process.

Policies (each run is a fresh process: OpenMP reads its settings when torch loads):
  spin     all available cores' threads, OpenMP's default wait policy (idle threads spin a while)
  passive  the same threads with OMP_WAIT_POLICY=PASSIVE (idle threads sleep): bertkit's default
  one      one thread per job (the reference a shared machine is fair to)
Scenarios: "quiet" (nothing started by us; other users' load is reported, not controlled) and
"busy" (one extra `while True: pass` Python process for the whole run).

Order: each repeat runs the policies of a scenario back to back, rotating which goes first, and
the two scenarios alternate, so drifting load from other jobs hits every policy alike. A run
times `--steps` steps (forward, backward, AdamW; vocab 30522, 4 layers, hidden 256, batch 32 x
128 tokens, 15% labelled) after one untimed step; its result is the median step time.

    python benchmarks/bench_threads.py [--repeats 3] [--steps 4] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = os.path.join(HERE, "results", "threads.json")
POLICIES = ("spin", "passive", "one")
SHAPES = {"mini": (4, 256, 4, 1024, 32, 128), "smoke": (1, 32, 2, 64, 2, 16)}  # L, H, heads, I, batch, seq


def child(shape: str, steps: int) -> None:
    """One run in this process: the policy came in through the environment."""
    import torch  # first, before bertkit: bertkit must not choose the wait policy here

    import bertkit

    layers, hidden, heads, inter, batch, seq = SHAPES[shape]
    torch.manual_seed(0)
    model = bertkit.BertForMaskedLM(bertkit.BertConfig(num_hidden_layers=layers, hidden_size=hidden,
                                                       num_attention_heads=heads, intermediate_size=inter)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1000, 30522, (batch, seq))
    selected = torch.rand(batch, seq) < 0.15
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    inputs = ids.masked_fill(selected, 103)
    times = []
    for step in range(steps + 1):
        start = time.perf_counter()
        model(inputs, torch.ones_like(ids), labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step:  # the first step allocates and warms up
            times.append(time.perf_counter() - start)
    print(json.dumps({"step_s": statistics.median(times), "threads": torch.get_num_threads(),
                      "wait_policy": os.environ.get("OMP_WAIT_POLICY", "default")}))


def run_policy(policy: str, shape: str, steps: int, cores: int) -> dict:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    env["OMP_NUM_THREADS"] = "1" if policy == "one" else str(cores)
    if policy == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    out = subprocess.run([sys.executable, __file__, "--child", shape, "--steps", str(steps)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--smoke", action="store_true", help="tiny model, one repeat, one step: checks the script runs")
    p.add_argument("--child", choices=SHAPES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.steps)
    shape, repeats, steps = ("smoke", 1, 1) if args.smoke else ("mini", args.repeats, args.steps)
    cores = len(os.sched_getaffinity(0))
    results = {(s, policy): [] for s in ("quiet", "busy") for policy in POLICIES}
    loads = []
    for repeat in range(repeats):
        for scenario in (("quiet", "busy") if repeat % 2 == 0 else ("busy", "quiet")):
            competitor = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                          if scenario == "busy" else None)
            try:
                order = POLICIES[repeat % 3:] + POLICIES[:repeat % 3]
                for policy in order:
                    loads.append(os.getloadavg()[0])
                    results[scenario, policy].append(run_policy(policy, shape, steps, cores)["step_s"])
            finally:
                if competitor is not None:
                    competitor.kill()
                    competitor.wait()
    summary = {f"{s}/{policy}": {"median_step_s": statistics.median(t), "runs": t}
               for (s, policy), t in results.items()}
    print(f"{cores} cores, {repeats} repeats x {steps} steps, load average during runs "
          f"{min(loads):.1f}-{max(loads):.1f}")
    print("| scenario | spin (default OpenMP) | passive (bertkit) | one thread | passive / one thread |")
    print("|---|---|---|---|---|")
    for s in ("quiet", "busy"):
        spin, passive, one = (summary[f"{s}/{policy}"]["median_step_s"] for policy in POLICIES)
        print(f"| {s} | {spin:.2f} s | {passive:.2f} s | {one:.2f} s | {one / passive:.2f}x throughput |")
    if not args.smoke:
        os.makedirs(os.path.dirname(RESULT), exist_ok=True)
        with open(RESULT, "w", encoding="utf-8") as f:
            json.dump({"cores": cores, "repeats": repeats, "steps": steps, "loadavg": [min(loads), max(loads)],
                       "results": summary}, f, indent=2)


if __name__ == "__main__":
    main()
