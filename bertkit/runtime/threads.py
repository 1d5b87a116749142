"""Threads on a shared machine: the OpenMP wait policy and how many threads a command uses.

torch's CPU kernels run on OpenMP threads. By default an idle OpenMP thread spins (busy-waits)
for a while before sleeping, so the next parallel region starts a little sooner. On a machine
whose cores are also busy with other processes that is a bad trade: the spinning threads take
the cores the other threads of the same step need: with other jobs on the cores a mini MLM
step was 2.5-2.8x slower than with `OMP_WAIT_POLICY=PASSIVE` (threads sleep when idle), and
PASSIVE with two threads kept at least the throughput of one thread per job (docs/benchmarks.md).

OpenMP reads `OMP_WAIT_POLICY` once, when torch's OpenMP runtime is loaded (at `import torch`),
so `passive_wait_policy()` runs first thing in `bertkit/__init__.py`, before any module imports
torch. It never overrides a value the user set, and does nothing if torch is already imported
(it could no longer take effect; set the variable yourself before importing torch then).

This module must not import torch.
"""

from __future__ import annotations

import os
import sys

WAIT_POLICY_VARIABLE = "OMP_WAIT_POLICY"


def passive_wait_policy() -> bool:
    """Set OMP_WAIT_POLICY=PASSIVE unless the user set it or torch is loaded; True if set."""
    if WAIT_POLICY_VARIABLE in os.environ or "torch" in sys.modules:
        return False
    os.environ[WAIT_POLICY_VARIABLE] = "PASSIVE"
    return True


def available_cores() -> int:
    """The cores this process may run on: its CPU affinity (taskset, cgroup cpusets), further
    capped by a cgroup v2 CPU quota (`cpu.max`, e.g. a container given 1.5 CPUs gets 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def default_threads() -> int:
    """A command's default intra-op thread count: OMP_NUM_THREADS when the user set it to a
    positive integer, else the cores available to this process."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return available_cores()
