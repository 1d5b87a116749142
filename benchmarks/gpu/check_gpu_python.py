"""Exit 0 only where this python can run bertkit on a CUDA GPU: the packages it needs import and
torch sees a GPU. Otherwise one line and exit 1: a machine whose torch sees no GPU would pass
tests/gpu by skipping every test, and run every `--device cuda` step on nothing.
Used by benchmarks/gpu/run.sh and scripts/gpu_recipe_check.sh before any work."""

import importlib.util
import sys

missing = [m for m in ("torch", "numpy", "tokenizers", "safetensors", "tqdm") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"{sys.executable} lacks {missing}: install them, or carry .gpu from benchmarks/gpu/prepare.sh")
import torch  # noqa: E402  (after the check above names what is missing)

if not torch.cuda.is_available():
    sys.exit(f"{sys.executable}: torch {torch.__version__} sees no CUDA GPU; run this on the GPU machine, with its "
             "CUDA build of torch (PYTHON=... for run.sh, PY=... for gpu_recipe_check.sh, chooses another python)")
