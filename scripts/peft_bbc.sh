#!/bin/bash
# Full fine-tuning vs LoRA vs adapters vs prefix tuning on BBC topics (5 classes) with
# all-MiniLM-L6-v2: max_length 128, 2 epochs, batch 16, seed 0, one thread; test accuracy from
# `bertkit evaluate`. Usage: scripts/peft_bbc.sh [OUT_ROOT]  (results in docs/peft.md)
set -o pipefail
cd "$(dirname "$0")/.." && . .venv/bin/activate
ROOT=${1:-/tmp/peft_bbc}
mkdir -p "$ROOT"
export OMP_NUM_THREADS=1
M=$(python -c "import bertkit.data.assets as a; print(a.minilm_dir())")
COMMON="--task classification --model $M --train bbc --no-progress --seed 0 --set train.epochs=2 data.max_length=128 train.batch_size=16"
for method in lora adapter prefix full; do
  OUT=$ROOT/$method
  rm -rf $OUT
  if [ $method = full ]; then PEFT=""; else PEFT="--peft $method"; fi
  echo "== $method: bertkit finetune $COMMON --out $OUT $PEFT" 
  /usr/bin/time -f "%e s wall" bertkit finetune $COMMON --out $OUT $PEFT 2>&1 | grep -v Warning | grep -v "features = "
  bertkit evaluate --model $OUT --data bbc:test --set data.max_length=128 2>&1 | tail -1 > $ROOT/$method.test.json
  cat $ROOT/$method.test.json
done
echo DONE
