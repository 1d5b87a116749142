#!/bin/bash
# What pre-training bought (issue 3, docs/results.md): fine-tune the pre-trained mini model and
# the same architecture with random weights (same tokenizer) on BBC topics with the same recipe
# and budget (3 epochs, lr 1e-4, batch 16, 128 tokens), three seeds each; test accuracy from
# `bertkit evaluate`.
# Usage: scripts/pretrain_downstream.sh PRETRAIN_RUN_DIR [OUT_ROOT] [ARMS]
# (ARMS: "pretrained random" by default; run one arm per process to use both cores)
set -eo pipefail
cd "$(dirname "$0")/.." && . .venv/bin/activate
RUN=${1:?usage: scripts/pretrain_downstream.sh PRETRAIN_RUN_DIR [OUT_ROOT]}
ROOT=${2:-/tmp/pretrain_downstream}
mkdir -p "$ROOT"
export OMP_NUM_THREADS=1
PRETRAINED=$(python -c "from bertkit.train.trainer import latest_checkpoint; print(latest_checkpoint('$RUN'))")
RANDOM_INIT=$ROOT/random-init
[ -f "$RANDOM_INIT/config.json" ] || python - "$PRETRAINED" "$RANDOM_INIT" <<'PY'
import sys, torch
from bertkit import BertForMaskedLM, Tokenizer
from bertkit.models.checkpoint import family_class, read_config
pretrained, out = sys.argv[1:]
torch.manual_seed(0)
cls = family_class(BertForMaskedLM, pretrained)  # the modern encoder's class for a ModernBERT checkpoint
cls(read_config(pretrained)).save_pretrained(out, tokenizer=Tokenizer.from_pretrained(pretrained))
print(f"random-init copy of {pretrained} in {out}")
PY
for arm in ${3:-pretrained random}; do
  MODEL=$PRETRAINED; [ $arm = random ] && MODEL=$RANDOM_INIT
  for lr in 1e-4; do
    for seed in 0 1 2; do
      OUT=$ROOT/$arm-lr$lr-seed$seed
      echo "== $arm lr=$lr seed=$seed: bertkit finetune --task classification --model $MODEL --train bbc"
      bertkit finetune --task classification --model "$MODEL" --train bbc --out "$OUT" --overwrite \
          --no-progress --seed $seed --set train.epochs=3 train.lr=$lr train.batch_size=16 \
          data.max_length=128 2>&1 | grep -v Warning | grep -v "warnings.warn" | tail -2
      bertkit evaluate --model "$OUT" --data bbc:test 2>/dev/null | tail -1 > "$OUT.test.json"
      cat "$OUT.test.json"
    done
  done
done
echo DONE
