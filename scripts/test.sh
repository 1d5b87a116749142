#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# One worker per core; a test file stays on one worker so its module fixtures load once. Files go
# out in collection order, where tests/conftest.py puts those with `slow` tests first
# (--no-loadscope-reorder: xdist would otherwise send the files with the most tests first and the
# one-test files of a minute or two last, leaving one core working alone at the end).
workers=$(.venv/bin/python -c "import os; print(max(1, min(4, os.cpu_count() or 1)))")
# --durations: the slowest tests named at the end of the log, to keep the suite within its 15 minutes
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --no-loadscope-reorder --durations=30 "$@"
