"""Attention viewer on long text: page size and headless-Chromium load time, per checkout.

Each checkout (a bertkit source tree) writes the viewer page for the same MiniLM-shaped input
(6 layers x 12 heads x 512 tokens of random, peaked attention) in its own process; then one
`chromium --headless --dump-dom` per page is timed (start-up included, the page's own script run
to completion), alternating the checkouts for `--repeats` rounds.

    python benchmarks/bench_viewer.py --checkout /path/to/old/bertkit --checkout . [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MAKE_PAGE = """
import sys, numpy as np
from bertkit.analysis.viewer import render_attention_html
rng = np.random.default_rng(0)
a = np.exp(3.0 * rng.normal(size=(6, 12, 512, 512)).astype(np.float32))
a /= a.sum(-1, keepdims=True)
open(sys.argv[1], "w", encoding="utf-8").write(render_attention_html(a, [f"w{i}" for i in range(512)]))
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", action="append", required=True, help="a bertkit source tree (repeatable)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench-viewer-")
    pages = []
    for n, checkout in enumerate(args.checkout):
        page = os.path.join(work, f"page{n}.html")
        env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
        # cwd too: `python -c` puts the current directory before PYTHONPATH on sys.path
        subprocess.run([sys.executable, "-c", MAKE_PAGE, page], env=env, cwd=os.path.abspath(checkout), check=True)
        pages.append(page)
        print(f"{checkout}: {os.path.getsize(page) / 1e6:.1f} MB")
    for repeat in range(args.repeats):
        for n, page in enumerate(pages):
            profile = tempfile.mkdtemp(dir=work)
            start = time.perf_counter()
            dom = subprocess.run([args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                  f"--user-data-dir={profile}", "--virtual-time-budget=1000", "--dump-dom",
                                  "file://" + page], capture_output=True, text=True, timeout=600).stdout
            seconds = time.perf_counter() - start
            drawn = re.search(r'"lines_drawn":(\d+)', dom)
            print(f"round {repeat + 1} {args.checkout[n]}: {seconds:.1f} s, "
                  f"{drawn.group(1) if drawn else '?'} lines drawn, load average {os.getloadavg()[0]:.1f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
