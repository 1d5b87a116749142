#!/usr/bin/env bash
# The GPU check of issue 28, one command, from the project's root on a CUDA machine:
#   bash benchmarks/gpu/run.sh          tests/gpu, then benchmarks/bench_gpu.py (about 5-7 minutes)
#   bash benchmarks/gpu/run.sh bench    the benchmark only (at most about 4 minutes; 3 rounds of 4 steps, as measured on the H100)
#   bash benchmarks/gpu/run.sh tests    tests/gpu only
#   bash benchmarks/gpu/run.sh profile  where the time of a step goes: benchmarks/profile_gpu.py (about a minute)
#   bash benchmarks/gpu/run.sh lease    all three inside one 10-minute call (timeout_s 600 of a 15-minute lease):
#                                       bench (<= 300 s), profile (<= 120 s), then tests/gpu (<= 150 s), each cut
#                                       at its bound; every part writes to $OUT as it goes, so a cut part still reports
# A machine without a package registry needs .gpu/site from benchmarks/gpu/prepare.sh (BBC corpus, pytest).
# Results land in $OUT (default /tmp/gpu-out): gpu-bench.json, gpu-bench.md, tests.log, bench.log, timeline.txt
# (profile: gpu-profile.json, gpu-profile.md, profile.log).
set -u
export PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1
root=$PWD; OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}
[ -d "$root/.gpu/site" ] && export PYTHONPATH=$PYTHONPATH:$root/.gpu/site
PY=${PYTHON:-python3}
part=${1:-all}
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$OUT/timeline.txt"; }
# A machine whose torch sees no GPU (or lacks a package) would pass tests/gpu by skipping them all: stop first.
$PY benchmarks/gpu/check_gpu_python.py || exit 2
stamp begin; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/nvidia.txt"
if [ "$part" = lease ]; then  # the numbers first: a cut-short later part loses less
  stamp bench; timeout 300 $PY benchmarks/bench_gpu.py --out "$OUT" --rounds 3 --steps 4 --warmup 2 > "$OUT/bench.log" 2>&1
  stamp "bench rc $?"; cat "$OUT/gpu-bench.md" 2>/dev/null || tail -20 "$OUT/bench.log"
  stamp profile; timeout 120 $PY benchmarks/profile_gpu.py --out "$OUT" > "$OUT/profile.log" 2>&1
  stamp "profile rc $?"; cat "$OUT/gpu-profile.md" 2>/dev/null || tail -20 "$OUT/profile.log"
  stamp tests; timeout 150 $PY -m pytest -q -p no:cacheprovider --durations=0 tests/gpu > "$OUT/tests.log" 2>&1
  stamp "tests rc $?"; tail -25 "$OUT/tests.log"
  stamp end; exit 0
fi
if [ "$part" = profile ]; then
  stamp profile; timeout 240 $PY benchmarks/profile_gpu.py --out "$OUT" > "$OUT/profile.log" 2>&1
  stamp "profile rc $?"; cat "$OUT/gpu-profile.md" 2>/dev/null || tail -20 "$OUT/profile.log"
  stamp end; exit 0
fi
if [ "$part" != bench ]; then
  stamp tests; timeout 240 $PY -m pytest -q -x -p no:cacheprovider tests/gpu > "$OUT/tests.log" 2>&1
  stamp "tests rc $?"; tail -5 "$OUT/tests.log"
fi
if [ "$part" != tests ]; then
  stamp bench; timeout 280 $PY benchmarks/bench_gpu.py --out "$OUT" --rounds 3 --steps 4 --warmup 2 > "$OUT/bench.log" 2>&1
  stamp "bench rc $?"; cat "$OUT/gpu-bench.md" 2>/dev/null || tail -20 "$OUT/bench.log"
fi
stamp end
