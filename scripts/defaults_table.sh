#!/usr/bin/env bash
# Issue 31.3: the fine-tuning defaults across real labelled sets, each beside TF-IDF on its split.
# For every set: all-MiniLM-L6-v2 fine-tuned with `bertkit finetune`'s defaults (no config: 3
# epochs, lr 5e-5, batch 16, 128 tokens), then scored on the test split by `bertkit evaluate`,
# which also fits TF-IDF (word 1-2 grams, sublinear tf) + logistic regression on the same
# training split (C chosen on dev) and prints the majority-class baseline. The arm "search" runs
# `finetune --search` in a budget of SEARCH_MINUTES (settings chosen on dev only), scored the same
# way. Each evaluation's JSON line goes to OUT_ROOT/table.jsonl with the set and the arm.
# EXTRA="data.max_train_examples=4000" adds --set values to every fine-tune (a subsample of a large set).
# MODEL (default MiniLM) fine-tunes another encoder, CONFIG adds its --config to every fine-tune:
#   MODEL=runs/mini/checkpoint-9400 CONFIG=configs/finetune-bbc-scratch.toml (the one-hour model).
# TAPT=configs/tapt-mini.toml first continues MODEL's pre-training on each set's training texts
# (scripts/train_texts.py: the training split only, the subset EXTRA's data.max_train_examples
# names), then fine-tunes that model: OUT_ROOT/SET-tapt holds it. TAPT_SET adds --set values to it.
# Usage: [SETS="linux-docs-topics fortunes"] [ARMS="default search"] [SEARCH_MINUTES=20] [SEED=0] \
#        [MODEL=DIR] [CONFIG=FILE] [TAPT=FILE] [TAPT_SET="train.max_steps=500"] scripts/defaults_table.sh [OUT_ROOT]
set -eo pipefail
cd "$(dirname "$0")/.." && . .venv/bin/activate
ROOT=${1:-/tmp/defaults_table}
SETS=${SETS:-bbc linux-docs-topics fortunes}
ARMS=${ARMS:-default}
SEARCH_MINUTES=${SEARCH_MINUTES:-20}
SEED=${SEED:-0}
mkdir -p "$ROOT"
M=${MODEL:-$(python -c "import bertkit.data.assets as a; print(a.minilm_dir())")}
CONFIG_ARGS=(); [ -n "${CONFIG:-}" ] && CONFIG_ARGS=(--config "$CONFIG")

score() {  # score SET ARM: evaluate OUT_ROOT/SET-ARM on SET:test, append its JSON line to the table
  local set=$1 arm=$2 started=$3
  echo "== $set $arm: bertkit evaluate --model $ROOT/$set-$arm --data $set:test"
  bertkit evaluate --model "$ROOT/$set-$arm" --data "$set:test" 2>&1 | grep -v Warning | tail -1 |
      python -c "import json, sys; row = json.loads(sys.stdin.read()); print(json.dumps(
          {'set': '$set', 'arm': '$arm', 'seed': $SEED, 'minutes': round(($(date +%s) - $started) / 60, 1), **row}))" |
      tee -a "$ROOT/table.jsonl"
}

tapt() {  # tapt SET: continue MODEL's pre-training on SET's training texts; sets M to its checkpoint
  local set=$1 subset=0
  [[ "${EXTRA:-}" =~ data\.max_train_examples=([0-9]+) ]] && subset=${BASH_REMATCH[1]}
  python scripts/train_texts.py "$set" "$ROOT/$set-train.jsonl" --max-train-examples "$subset" --seed "$SEED"
  rm -rf "$ROOT/$set-tapt"  # this script's own scratch folder
  echo "== $set tapt: bertkit pretrain --config $TAPT --set model.init=$BASE data.corpus=$ROOT/$set-train.jsonl"
  bertkit pretrain --config "$TAPT" --out "$ROOT/$set-tapt" --no-progress \
      --set "model.init=$BASE" "data.corpus=$ROOT/$set-train.jsonl" "train.seed=$SEED" ${TAPT_SET:-} 2>&1 |
      grep -v Warning | tail -2
  M=$(ls -d "$ROOT/$set-tapt"/checkpoint-* | sort -V | tail -1)
}

BASE=$M
for set in $SETS; do
  [ -n "${TAPT:-}" ] && tapt "$set"
  if [[ " $ARMS " == *" default "* ]]; then
    started=$(date +%s)
    echo "== $set default: bertkit finetune --task classification --model $M --train $set --seed $SEED ${CONFIG_ARGS[*]}"
    bertkit finetune --task classification --model "$M" --train "$set" --out "$ROOT/$set-default" \
        --seed "$SEED" --overwrite --no-progress "${CONFIG_ARGS[@]}" ${EXTRA:+--set $EXTRA} 2>&1 | grep -v Warning
    score "$set" default "$started"
  fi
  if [[ " $ARMS " == *" search "* ]]; then
    started=$(date +%s)
    echo "== $set search: bertkit finetune --search ... --set search.max_minutes=$SEARCH_MINUTES"
    rm -rf "$ROOT/$set-search"  # a search starts in a new --out (this script's own scratch folder)
    bertkit finetune --search --task classification --model "$M" --train "$set" --out "$ROOT/$set-search" \
        --seed "$SEED" --no-progress "${CONFIG_ARGS[@]}" --set "search.max_minutes=$SEARCH_MINUTES" $EXTRA 2>&1 | grep -v Warning
    score "$set" search "$started"
  fi
done
