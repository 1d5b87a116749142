#!/bin/bash
# The issue-4 real-data results in docs/results.md: all-MiniLM-L6-v2 fine-tuned on WordNet
# supersense classification (45 classes), supersense tagging of the exemplified lemma (token
# classification, entity F1), gloss QA (SQuAD 2.0 style, EM/F1) and reverse-dictionary QA over
# example sentences (usage-qa, EM/F1), each scored on a fixed
# 2000-example subset of its test split; classification and tagging also in plain transformers
# with the same data and recipe (benchmarks/finetune_reference.py), over several seeds.
# One thread per run.
# Usage: [SEEDS="0 1"] [TASKS="supersense tagging qa usage-qa"] scripts/finetune_results.sh [OUT_ROOT]
set -eo pipefail
cd "$(dirname "$0")/.." && . .venv/bin/activate
ROOT=${1:-/tmp/finetune_results}
SEEDS=${SEEDS:-0 1}
TASKS=${TASKS:-supersense tagging qa usage-qa}
mkdir -p "$ROOT"
export OMP_NUM_THREADS=1
M=$(python -c "import bertkit.data.assets as a; print(a.minilm_dir())")
LIMIT=2000

bertkit_run() {  # bertkit_run NAME TASK DATA CONFIG SEED
  local name=$1 task=$2 data=$3 config=$4 seed=$5
  rm -rf "$ROOT/$name"
  echo "== $name: bertkit finetune --task $task --model MINILM --train $data --config $config --seed $seed"
  /usr/bin/time -f "%e s wall" bertkit finetune --task "$task" --model "$M" --train "$data" \
      --config "$config" --seed "$seed" --out "$ROOT/$name" --no-progress 2>&1 | grep -v Warning
  echo "== $name: bertkit evaluate --model $ROOT/$name --data $data:test --limit $LIMIT"
  /usr/bin/time -f "%e s wall" bertkit evaluate --model "$ROOT/$name" --data "$data:test" \
      --limit $LIMIT 2>&1 | tail -2 | tee "$ROOT/$name.test.json"
}

reference_run() {  # reference_run NAME TASK DATA MAX_LENGTH SEED  (recipe of the configs above)
  local name=$1 task=$2 data=$3 max_length=$4 seed=$5
  echo "== $name: python benchmarks/finetune_reference.py --task $task --data $data --seed $seed"
  python benchmarks/finetune_reference.py --task "$task" --data "$data" --max-length "$max_length" \
      --epochs 3 --lr 1e-4 --batch-size 32 --max-train 4000 --max-eval $LIMIT --seed "$seed" \
      2>/dev/null | tee "$ROOT/$name.json"
}

for seed in $SEEDS; do
  s=$([ "$seed" = 0 ] && echo "" || echo "-seed$seed")  # seed 0 keeps the plain names
  for task in $TASKS; do
    case $task in
      supersense)
        bertkit_run supersense$s classification wordnet-supersense configs/finetune-wordnet-supersense.toml $seed
        reference_run ref-supersense$s classification wordnet-supersense 48 $seed ;;
      tagging)
        bertkit_run tagging$s token-classification wordnet-tagging configs/finetune-wordnet-tagging.toml $seed
        reference_run ref-tagging$s token-classification wordnet-tagging 64 $seed ;;
      qa)
        bertkit_run qa$s qa wordnet-qa configs/finetune-wordnet-qa.toml $seed ;;
      usage-qa)
        bertkit_run usage-qa$s qa wordnet-usage-qa configs/finetune-wordnet-usage-qa.toml $seed ;;
    esac
  done
done
echo DONE
