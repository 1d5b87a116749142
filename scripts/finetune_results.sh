#!/bin/bash
# The issue-4 real-data results in docs/results.md: all-MiniLM-L6-v2 fine-tuned on WordNet
# supersense classification (45 classes), supersense tagging of the exemplified lemma (token
# classification, entity F1) and gloss QA (SQuAD 2.0 style, EM/F1), each scored on a fixed
# 2000-example subset of its test split; then the same classification and tagging recipes in
# plain transformers (benchmarks/finetune_reference.py). One thread per run.
# Usage: scripts/finetune_results.sh [OUT_ROOT]
set -eo pipefail
cd "$(dirname "$0")/.." && . .venv/bin/activate
ROOT=${1:-/tmp/finetune_results}
mkdir -p "$ROOT"
export OMP_NUM_THREADS=1
M=$(python -c "import bertkit.assets as a; print(a.minilm_dir())")
LIMIT=2000

run() {  # run NAME TASK DATA CONFIG
  local name=$1 task=$2 data=$3 config=$4
  rm -rf "$ROOT/$name"
  echo "== $name: bertkit finetune --task $task --model MINILM --train $data --config $config"
  /usr/bin/time -f "%e s wall" bertkit finetune --task "$task" --model "$M" --train "$data" \
      --config "$config" --out "$ROOT/$name" --no-progress 2>&1 | grep -v Warning
  echo "== $name: bertkit evaluate --model $ROOT/$name --data $data:test --limit $LIMIT"
  /usr/bin/time -f "%e s wall" bertkit evaluate --model "$ROOT/$name" --data "$data:test" \
      --limit $LIMIT 2>&1 | tail -2 | tee "$ROOT/$name.test.json"
}

run supersense classification wordnet-supersense configs/finetune-wordnet-supersense.toml
run tagging token-classification wordnet-tagging configs/finetune-wordnet-tagging.toml
run qa qa wordnet-qa configs/finetune-wordnet-qa.toml

# transformers reference: same data subsets and recipe (no early stopping, last model scored)
echo "== reference supersense"
python benchmarks/finetune_reference.py --task classification --data wordnet-supersense \
    --max-length 48 --epochs 3 --lr 1e-4 --batch-size 32 --max-train 4000 --max-eval $LIMIT \
    | tee "$ROOT/ref-supersense.json"
echo "== reference tagging"
python benchmarks/finetune_reference.py --task token-classification --data wordnet-tagging \
    --max-length 64 --epochs 3 --lr 1e-4 --batch-size 32 --max-train 4000 --max-eval $LIMIT \
    | tee "$ROOT/ref-tagging.json"
echo DONE
