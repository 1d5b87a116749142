#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# One worker per core; a test file stays on one worker so its module fixtures load once.
workers=$(.venv/bin/python -c "import os; print(max(1, min(4, os.cpu_count() or 1)))")
# --durations: the slowest tests named at the end of the log, to keep the suite within its 15 minutes
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile --durations=30 "$@"
