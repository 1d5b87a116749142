"""TinyBERT's task distillation, stage 1: a student cut from a fine-tuned teacher learns the
teacher's hidden states and attention maps layer by layer (`bertkit.distill.LayerDistiller`).

The student starts as `bertkit distill` cuts it (the teacher's layers 0, 2, 4, ..., head
included) and learns, on the teacher's training data through the fine-tuning recipe (same data,
batches; the last student is kept), the MSE to the teacher's hidden states and
attention maps under TinyBERT's uniform layer map (student layer m <- teacher layer m * N / M,
embeddings <- embeddings). The head is not trained in this stage. Stage 2, TinyBERT's
prediction-layer distillation, is `bertkit distill --student OUT`.

Prints the layer losses (hidden, attention) of the cut student and of the stage-1 student on
`--measure` data, and writes them to OUT/layer_losses.json.

    python scripts/tinybert_task.py --task token-classification --teacher runs/tag-teacher \
        --train wordnet-tagging --out runs/tag-tinybert-stage1 --config configs/finetune-wordnet-tagging.toml
    bertkit distill --task token-classification --teacher runs/tag-teacher --student runs/tag-tinybert-stage1 \
        --train wordnet-tagging --out runs/tag-tinybert --config configs/finetune-wordnet-tagging.toml
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from bertkit.distill import LayerDistiller, every_other_layer, student_from_teacher
from bertkit.recipes.finetune import finetune, section_keys
from bertkit.tasks import Collator, eval_order, get_task, load_examples, load_model, read_spec, subsample
from bertkit.tokenizer import Tokenizer
from bertkit.settings.config_io import apply_overrides, load_toml


@torch.no_grad()
def layer_losses(distiller: LayerDistiller, features: list[dict], batch_size: int, pad_token_id: int) -> dict:
    """The hidden-state and attention-map losses averaged over `features` (weighted by batch size)."""
    collate = Collator(pad_token_id)
    was_training = distiller.training
    distiller.eval()
    sums = {"hidden_loss": 0.0, "attention_loss": 0.0}
    for index in eval_order(features, batch_size):
        batch = collate([{k: features[i][k] for k in ("input_ids", "token_type_ids")} for i in index])
        out = distiller(**batch)
        for name in sums:
            sums[name] += getattr(out, name).item() * len(index)
    distiller.train(was_training)
    return {name: total / len(features) for name, total in sums.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True, choices=("classification", "token-classification", "qa"))
    parser.add_argument("--teacher", required=True, help="fine-tuned teacher directory")
    parser.add_argument("--train", required=True, help="the teacher's training data (e.g. wordnet-tagging)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--layers", type=int, help="student layers (default: half the teacher's)")
    parser.add_argument("--config", help="finetune TOML recipe ([data], [train], [model])")
    parser.add_argument("--set", nargs="*", default=[], help="section.key=value overrides")
    parser.add_argument("--measure", help="data for the layer losses (default: TRAIN:dev)")
    parser.add_argument("--measure-limit", type=int, default=500, help="seeded subset of --measure (0 = all)")
    args = parser.parse_args(argv)

    sections = apply_overrides(load_toml(args.config) if args.config else {}, args.set, section_keys())
    spec = read_spec(args.teacher, args.task)
    sections.setdefault("data", {}).setdefault("max_length", spec.data.max_length)
    # TinyBERT's stage 1 keeps its last student: one dev evaluation, at the end, and no early stop
    # (the head is not trained here, so the dev score is no guide to the layers).
    sections.setdefault("train", {}).update(eval_every=0, patience=0)
    teacher = load_model(args.teacher, args.task)
    layer_map = every_other_layer(teacher.config.num_hidden_layers, args.layers)
    cut = student_from_teacher(teacher, layer_map=layer_map)

    tokenizer = Tokenizer.from_pretrained(args.teacher)
    measure = args.measure or f"{args.train}:dev"
    examples = subsample(load_examples(args.task, measure, "dev", spec.data), args.measure_limit, 0)
    features = get_task(args.task).encode(tokenizer, examples, spec.data, None, False, "dev")
    batch_size, pad = spec.data.eval_batch_size, tokenizer.pad_token_id
    before = layer_losses(LayerDistiller(cut, teacher), features, batch_size, pad)
    print(f"cut student (teacher layers {layer_map}) on {measure}: {json.dumps(before)}")

    summary = finetune(args.task, args.teacher, args.train, None, args.out, sections,
                       model_fn=lambda *_: cut.train(), train_wrapper=lambda student: LayerDistiller(student, teacher))
    stage1 = load_model(args.out, args.task)
    after = layer_losses(LayerDistiller(stage1, teacher), features, batch_size, pad)
    print(f"stage-1 student on {measure}: {json.dumps(after)}; best dev {summary['select_metric']} "
          f"{summary['best_dev'].get(summary['select_metric'])} at step {summary['best_step']} ({summary['wall_time_s']} s)")
    result = {"measure": measure, "examples": len(examples), "layer_map": layer_map,
              "uniform_teacher_layers": LayerDistiller(cut, teacher).layer_map, "cut": before, "stage1": after}
    with open(os.path.join(args.out, "layer_losses.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
