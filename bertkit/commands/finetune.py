"""`bertkit finetune --task T --model DIR --train DATA --dev DATA --out DIR`: fine-tune an encoder.

DATA is a file (CSV/TSV/JSONL for classification and regression, CoNLL for token
classification, SQuAD JSON for QA, JSONL for multiple choice, CSV/TSV/JSONL with text and
positive columns for embedding) or a built-in real data set (bertkit/tasks/builtin.py: bbc,
wordnet-supersense, ..., bbc-headlines;
optionally NAME:train|dev|test), or a data set in the local Hugging Face datasets cache
(NAME[:SPLIT], NAME:CONFIG:SPLIT; bertkit/tasks/hub_datasets.py). Settings come from `--config FILE.toml` (sections [data],
[train], [model], [peft]) and `--set section.key=value`, e.g.
`--set train.epochs=3 train.lr=5e-5 train.patience=2 data.max_length=256`.
The recipe is bertkit/recipes/finetune.py; the tasks are bertkit/tasks/registry.py.
Classification and regression also report the TF-IDF baseline on the same split
(bertkit/tasks/baseline.py; `--no-baseline` skips it). `--search` chooses lr, dropout and
pooling on the dev split (bertkit/recipes/search.py, the [search] section). docs/finetune.md.
"""

from __future__ import annotations

import json
import os

from bertkit.errors import ConfigError
from bertkit.recipes.blend import BLENDED_TASKS
from bertkit.recipes.finetune import finetune, section_keys
from bertkit.recipes.search import SEARCH_KEYS, search
from bertkit.tasks import BUILTIN_DATA, TASKS
from bertkit.tasks.baseline import describe, describe_reference, recorded_result
from bertkit.settings.config_io import apply_overrides, load_toml

from bertkit.commands.options import (add_device, add_progress, add_seed, add_set, add_task_module,
                                      baseline_label, baseline_text, longer_run, metrics_text, not_ahead,
                                      refuse_disagreeing, resolve_models, rounded, say, standing, stopped_by,
                                      typed_settings)


def add_arguments(parser) -> None:
    parser.add_argument("--task", required=True, choices=TASKS)
    add_task_module(parser)
    parser.add_argument("--model", required=True,
                        help="pre-trained model directory (weights + tokenizer), or ORG/NAME in the local Hugging "
                             "Face cache")
    parser.add_argument("--train", required=True, help="training data file (classification, regression: CSV, TSV or "
                        "JSONL with 'text' and 'label' columns, or a folder of class folders, CLASS/*.txt; "
                        "token-classification: CoNLL; qa: SQuAD JSON; embedding: "
                        "CSV, TSV or JSONL with 'text' and 'positive' columns; similarity: CSV, TSV or JSONL with 'text', "
                        "'text_pair' and a numeric 'label' column; multiple-choice: JSONL with 'context', 'choices' and "
                        "'label'; seq2seq: JSONL with 'source' and 'target'; the README's \"Your own data\" shows each), "
                        "built-in: " + ", ".join(BUILTIN_DATA)
                        + ", or a data set in the local Hugging Face datasets cache (NAME[:SPLIT])")
    parser.add_argument("--dev", help="dev data file (picks the best checkpoint); default with built-in "
                                      "data: its dev split, with a cached data set: its validation split")
    parser.add_argument("--out", required=True, help="output directory: the best model ends here")
    parser.add_argument("--config", help="TOML recipe with [data], [train], [model] sections "
                                         "(e.g. configs/finetune-bbc.toml; default: the built-in settings)")
    add_set(parser, "train.epochs=3 data.max_length=128 train.llrd=0.9")
    add_seed(parser)
    add_device(parser, "train.device, else auto")
    parser.add_argument("--peft", choices=("lora", "adapter", "prefix"),
                        help="train only a LoRA / bottleneck adapter / prefix (and the head) on the frozen "
                             "model; OUT is then a small adapter directory. Settings: --set peft.r=16 "
                             "'peft.target_modules=[\"query\",\"value\"]' peft.kind=pfeiffer "
                             "peft.num_virtual_tokens=20 (see bertkit/peft)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a model already in --out (the old one stays until the new run succeeds)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --out from its newest checkpoint, with the same options")
    parser.add_argument("--search", action="store_true",
                        help="choose lr, dropout and pooling on the dev split: one fine-tune per grid point "
                             "(early stopping picks the epochs), the best kept in --out, the trials in "
                             "OUT/search/trials.csv; settings and budget: --set search.max_trials=6 "
                             "search.max_minutes=30 'search.lr=[1e-4,3e-4]'; --set search.strategy=halving: "
                             "short trials first, the best third trained longer; 'search.class_weights=[none,"
                             "balanced]' tries class weights; with --peft, the method's learning rates "
                             "(bertkit/recipes/search.py)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the TF-IDF + linear model baseline on the same split (same as --set "
                             "train.baseline=false; it is fitted for classification and regression)")
    add_progress(parser)


def run(args) -> int:
    resolve_models(args)  # ORG/NAME: its snapshot in the local Hugging Face cache
    sections = load_toml(args.config) if args.config else {}
    flags = {**({f"--peft {args.peft}": ("peft.method", args.peft)} if args.peft else {}),
             **({"--no-baseline": ("train.baseline", False)} if args.no_baseline else {})}
    refuse_disagreeing(args.set, flags)
    assignments = list(args.set) + typed_settings(args) + list(flags.values())
    sections = apply_overrides(sections, assignments, {**section_keys(), "search": SEARCH_KEYS})
    summary = train_or_search(args, sections)
    if summary:  # (empty on a non-zero rank of a distributed run)
        report(summary, args.out)
    return 0


def train_or_search(args, sections: dict) -> dict:
    """One fine-tune, or with --search the best of the search's trials."""
    if args.search:
        if args.overwrite:
            raise ConfigError("--search with --overwrite: the search writes into a new --out (or continues one "
                              "with --resume); drop --overwrite")
        return search(args.task, args.model, args.train, args.dev, args.out, sections, resume=args.resume,
                      progress=not args.no_progress, log=say)
    if "search" in sections:
        raise ConfigError("[search] settings are for --search; add --search or drop them")
    return finetune(args.task, args.model, args.train, args.dev, args.out, sections,
                    overwrite=args.overwrite, progress=not args.no_progress, resume=args.resume)


def report(summary: dict, out: str) -> None:
    """The best dev scores beside the baselines; the last line is them as one JSON object."""
    if "search" in summary:
        done = sum(row["status"] == "done" for row in summary["search"]["trials"])
        print(f"search: trial {summary['search']['best_trial']} of the {done} run is the best on dev "
              f"({json.dumps(summary['search']['settings'], ensure_ascii=False)}); "
              f"the table: {os.path.join(out, summary['search']['table'])}")
    best, history = summary["best_dev"], summary.get("dev_history") or []
    # the kept checkpoint's scores as it was evaluated (best_dev may be at a threshold chosen after training)
    kept = next((row for row in history if row["step"] == summary["best_step"]), best)
    ended = ENDINGS.get(stopped_by(summary))
    start = " (the model before fine-tuning: no later evaluation beat it)" if summary["best_step"] == 0 else ""
    steps = f"{summary['steps']} step{'s' * (summary['steps'] != 1)}"
    print(f"best dev {summary['select_metric']} = {rounded(kept.get(summary['select_metric']))} at step "
          f"{summary['best_step']}{start}, kept; the run trained {steps} ({summary['epochs_run']:.2f} "
          f"epochs{stretch_note(summary)}, {ended}; {time_note(summary)}); "
          f"{baseline_text(summary['dev_baseline'])}")
    if summary.get("decision_threshold"):
        print(threshold_line(summary))
    tfidf, reference = summary.get("tfidf_baseline"), summary.get("reference_baseline")
    before = {k: v for k, v in history[0].items() if k != "step"} if history and history[0]["step"] == 0 else None
    if tfidf is not None:
        print(tfidf.get("note") or describe(recorded_result(tfidf)))
    if summary.get("tfidf_blend"):
        print(blend_line(summary))
    if reference:
        print(describe_reference(reference))
    if before and summary["best_step"] != 0:
        print(f"the model before fine-tuning (step 0): {metrics_text(before)}")
    for hint in (baseline_hint(summary), *training_hints(summary)):
        if hint:
            print(hint)
    print(f"model saved in {out}")
    baselines = {"tfidf": recorded_result(tfidf), "reference": reference, "before_fine_tuning": before}
    baselines = {name: value for name, value in baselines.items() if value}
    shown = baselines or (summary.get("dev_baseline") and summary["options"].get("baseline", True))
    if shown:  # beside the model's dev scores, as evaluate's last line has them (none with --no-baseline)
        best = {**best, "baselines": {"trivial": summary.get("dev_baseline"), **baselines}}
    blend = summary.get("tfidf_blend") or {}
    if blend.get("weight"):  # what predict and evaluate now score: the saved blend's dev scores
        best = {**best, "tfidf_blend": {"weight": blend["weight"], **blend["dev"]}}
    print(json.dumps(best, ensure_ascii=False))


def time_note(summary: dict) -> str:
    """The run's time: a resumed run's wall time is only since the resume, so its training-step time
    over every attempt is said too (walk W: 29.8 s after a resume at step 181 of a 92.5 s run)."""
    if summary.get("resumed_at_step") is None:
        return f"{summary['wall_time_s']} s"
    return (f"{summary['wall_time_s']} s since resuming at step {summary['resumed_at_step']}, "
            f"{summary['train_seconds']} s of training steps in all")


def stretch_note(summary: dict) -> str:
    """Why a run trained more epochs than train.epochs: train.min_steps stretched a small set's run."""
    if not summary.get("stretched_to_min_steps"):
        return ""
    options = summary["options"]
    return (f": train.min_steps={options['min_steps']} stretched {options['epochs']:g} epochs of "
            f"{summary['steps_per_epoch']} steps to {summary['train_config']['max_steps']}")


def threshold_line(summary: dict) -> str:
    """The decision threshold chosen on dev (recipes/decision.py): its score beside the score at 0.5."""
    entry = summary["decision_threshold"]
    if "note" in entry:
        return entry["note"]
    metric, threshold = entry["select_metric"], entry["threshold"]
    at_half = next(row for row in entry["grid"] if row["threshold"] == 0.5)
    if threshold == 0.5:
        return f"decision threshold: 0.5 kept, no lower one scored better on dev {metric}"
    worse = scores_lost(summary, entry["dev"], at_half, metric)  # a lower threshold can cost exact match (walk AB)
    worse = f"; worse than at 0.5 on {worse}" if worse else ""
    return (f"decision threshold {threshold:g}, chosen on dev: {metric} {rounded(entry['dev'][metric])} (at 0.5: "
            f"{rounded(at_half[metric])}{worse}); a class is in a text's set at p >= {threshold:g} in predict and "
            "evaluate")


def blend_line(summary: dict) -> str:
    """train.blend_tfidf's outcome: the blend's dev score beside the encoder's and TF-IDF's, and what was saved."""
    blend = summary["tfidf_blend"]
    if "note" in blend:
        return blend["note"]
    metric = blend["select_metric"]
    own = summary["spec"].get("threshold", 0.5)  # the model alone decides at its own threshold
    alone = next(row for row in blend["grid"] if row["weight"] == 0 and row.get("threshold", 0.5) == own)
    threshold = f", threshold {blend['threshold']:g}" if "threshold" in blend else ""
    tfidf = (recorded_result(summary.get("tfidf_baseline")) or {}).get(metric)
    scores = f"(the model alone {rounded(alone[metric])}, TF-IDF alone {rounded(tfidf)})"
    if blend["weight"] == 0:
        return (f"TF-IDF blend: none kept, the model alone is best on dev {metric} {scores} among the weights "
                f"{', '.join(f'{w:g}' for w in blend['weights'])}")
    return (f"TF-IDF blend (weight {blend['weight']:g}{threshold}, chosen on dev): {metric} "
            f"{rounded(blend['dev'][metric])} {scores}{blend_losses(summary, alone)}; saved beside the model, "
            "predict and evaluate use it (docs/finetune.md, \"Blending with TF-IDF\")")


def blend_losses(summary: dict, alone: dict) -> str:
    """The dev scores other than the chosen metric on which the kept blend is worse than the model alone: the blend
    is chosen by one metric, and its lower threshold can cost another (walk AB, WordNet verb frames: micro-F1
    0.599 -> 0.611 and exact match 0.368 -> 0.252, which the line did not show)."""
    blend = summary["tfidf_blend"]
    worse = scores_lost(summary, blend["dev"], alone, blend["select_metric"])
    return f"; worse than the model alone on dev {worse}" if worse else ""


def scores_lost(summary: dict, chosen: dict, other: dict, metric: str) -> str:
    """"name chosen against other, ..." for each dev score but `metric` (the one chosen by) on which `chosen`
    is worse."""
    lower = TASKS[summary["spec"]["task"]].lower_is_better
    worse = [f"{name} {rounded(value)} against {rounded(other[name])}" for name, value in chosen.items()
             if name != metric and isinstance(other.get(name), (int, float)) and value != other[name]
             and (value > other[name]) == (name in lower)]
    return ", ".join(worse)


ENDINGS = {"patience": "stopped early: no better dev score in train.patience evaluations",
           "train.max_minutes": "stopped by the time budget, train.max_minutes", None: "all it planned"}


def training_hints(summary: dict) -> list[str]:
    """What the dev history says to try: more epochs (or minutes) when the best score came at the
    last evaluation of a run that patience did not stop; a look at the data when the model is not
    above the task's baseline; the imbalance settings when small classes are missed; more when the
    task's reference method (BM25) is level or ahead."""
    metric = summary["select_metric"]
    history, hints = summary.get("dev_history") or [], []
    trained = [row for row in history if row["step"] > 0]  # step 0: the model before fine-tuning
    if trained and summary["best_step"] == trained[-1]["step"] and stopped_by(summary) != "patience" \
            and rose_at_the_end(trained, metric, trained[-1]):
        # walk X: "the run's one evaluation" read wrong under the two eval lines of a run that scored step 0
        once = "at its end, the run's one evaluation after step 0" if len(history) > 1 else \
            "at the run's one evaluation, its end"
        when = "at the last evaluation" if len(trained) > 1 else once
        hints.append(f"the best dev {metric} came {when}, so it may still be improving: try {longer_run(summary)}")
    hints.append(loss_still_falling_hint(summary, trained))
    trivial_scores = summary.get("dev_baseline") or {}
    # the trivial baseline's own metric where it lacks the select one (regression's mean: no correlation)
    shared = metric if metric in trivial_scores else next((m for m in trivial_scores if m in summary["best_dev"]),
                                                         metric)
    trivial, named = strongest_trivial(summary, shared)
    off_scale = off_scale_hint(summary, shared, trivial)
    if off_scale:
        hints.append(off_scale)
    elif not_ahead(summary, trivial, shared):
        task = TASKS[summary["spec"]["task"]]
        weighted = task.class_weights and summary["options"].get("class_weights", "none") == "none"
        # macro_f1 only where the task scores it (token classification's entity f1 is its own)
        select = " train.select_metric=macro_f1" if "macro_f1" in task.metric_names else ""
        ours = rounded(summary["best_dev"][shared])
        hints.append(f"the model is not above {named} on dev ({shared} {ours} against {rounded(trivial)}): "
                     f"{task.check_data}, and "
                     f"try {patience_off(summary)}{longer_run(summary)} or a larger lr"
                     + (f"; if one class is most of the data, also --set train.class_weights=balanced{select}"
                        if weighted else ""))
    else:
        hints.append(imbalance_hint(summary))
    reference = summary.get("reference_baseline") or {}
    if not_ahead(summary, reference.get(metric)):
        tries = [] if "search" in summary else ["--search"]
        hints.append(behind(reference["method"], summary, reference[metric], [*tries, "more training data",
                                                                              "a longer run"]))
    return [hint for hint in hints if hint]


CORRELATIONS = ("pearson", "spearman")


def off_scale_hint(summary: dict, shared: str, trivial: float | None) -> str | None:
    """A regression kept for its correlation, which orders the dev texts (above 2/sqrt(n), about the
    5% level of no correlation), but whose mse is not below the training mean's: its values are off
    in scale, not unlearnt. WordNet glosses -> ln sense count, seed 1: dev Pearson 0.286 at mse 1.339
    against the mean's 1.289; kept on mse instead, test mse 1.113 against 1.294 (docs/results.md,
    "A regression blended with TF-IDF")."""
    metric, best = summary["select_metric"], summary["best_dev"]
    if metric not in CORRELATIONS or shared == metric or not not_ahead(summary, trivial, shared):
        return None
    if (best.get(metric) or 0.0) <= 2 / max(summary.get("dev_examples", 0), 1) ** 0.5:
        return None
    return (f"dev {metric} {rounded(best[metric])} says the model orders the texts, but its dev {shared} "
            f"{rounded(best[shared])} is not below the training mean's {rounded(trivial)}: its values are off in "
            f"scale; to keep the checkpoint with the least error, --set train.select_metric={shared}")


def strongest_trivial(summary: dict, metric: str) -> tuple[float | None, str]:
    """The task baseline's dev `metric` where it is strongest: its row's, or the chance row's it carries
    (QA: the expected score of a random span), then its name: "chance (a random 1-word span)", or the row's
    label (`baseline_label`: "the baseline (TF-IDF cosine of context and choice)" where the task chose a
    method, "the trivial baseline" where it did not). Walk W: wordnet-usage-qa's row, the first sentence,
    scored exact 0, chance 3.4."""
    scores = summary.get("dev_baseline") or {}
    theirs, chance = scores.get(metric), scores.get("chance") or {}
    lower = metric in TASKS[summary["spec"]["task"]].lower_is_better
    level = chance.get(metric)
    if level is not None and (theirs is None or (level < theirs if lower else level > theirs)):
        return level, f"chance ({chance['method']})"
    return theirs, f"the {baseline_label(scores)}"


def patience_off(summary: dict) -> str:
    """The patience setting to turn off before a longer run, when patience ended this one: its dev
    score had not risen in train.patience evaluations, so more steps alone would stop as soon."""
    if stopped_by(summary) != "patience":
        return ""
    return f"--set {'search' if 'search' in summary else 'train'}.patience=0 with "


# A dev loss below this share of the trivial baseline's (the training class frequencies) is a model
# that has learned: 100 BBC articles trained 300 steps stopped by patience with the loss falling
# 0.871 to 0.200 (trivial 1.620) at dev accuracy 0.946; train.patience=0 kept the same model
# (docs/results.md, "Small training sets"). The undertrained run above ended at 1.464.
LEARNED_LOSS_SHARE = 0.5


def rose_at_the_end(trained: list[dict], metric: str, best: dict) -> bool:
    """Whether the last evaluation's score beat every earlier one (not a tie the dev loss settled:
    90 articles scored dev accuracy 1 from step 50 of 300, the last kept for its lower loss)."""
    earlier = [row.get(metric) for row in trained[:-1] if row.get(metric) is not None]
    return not earlier or best.get(metric) not in earlier


def loss_still_falling_hint(summary: dict, trained: list[dict]) -> str | None:
    """When patience stopped a run whose dev loss was lowest at its last evaluation: the selected
    score wobbled while the model was still learning. 100 BBC articles (7 steps an epoch): accuracy
    0.39, 0.30, 0.39 stopped it at step 21 as the loss fell 1.586, 1.540, 1.464; with train.patience=0
    it reached 0.86 at its last step (42), and with train.epochs=20 as well 0.95 (docs/results.md,
    "The fine-tuned model blended with TF-IDF")."""
    metric, option = summary["select_metric"], "search.patience" if "search" in summary else "train.patience"
    losses = [row.get("loss") for row in trained]
    if stopped_by(summary) != "patience" or metric == "loss" or len(losses) < 2 or None in losses:
        return None
    if losses[-1] >= min(losses[:-1]):
        return None
    trivial_loss = (summary.get("dev_baseline") or {}).get("loss")
    if trivial_loss is not None and losses[-1] < LEARNED_LOSS_SHARE * trivial_loss:
        return None  # far below the class prior's loss: learned, the wobble is not undertraining
    return (f"{option} stopped the run while the dev loss was still falling ({rounded(losses[0])} to "
            f"{rounded(losses[-1])} over {len(losses)} evaluations, lowest at the last) and dev {metric} wobbled: the "
            f"model may be undertrained; try --set {option}=0 (the best dev score is still kept) and "
            f"{longer_run(summary)}")


# macro-F1 this far below accuracy: the large classes are right and small ones missed (walk P: dev
# accuracy 0.786, macro-F1 0.519 on 26 WordNet supersenses; balanced weights + macro-F1 selection
# gave 0.818 / 0.700)
MISSED_CLASSES_GAP = 0.1


def imbalance_hint(summary: dict) -> str | None:
    """The imbalance settings (docs/finetune.md, "Imbalanced classes") when dev macro-F1 is
    MISSED_CLASSES_GAP or more below accuracy in a run without them; None otherwise."""
    best, options = summary["best_dev"], summary["options"]
    if "macro_f1" not in best or "accuracy" not in best or not TASKS[summary["spec"]["task"]].class_weights:
        return None
    if options.get("class_weights", "none") != "none" or best["accuracy"] - best["macro_f1"] < MISSED_CLASSES_GAP:
        return None
    if any("class_weights" in row for row in summary.get("search", {}).get("trials", [])):
        return None  # the search tried both weightings and chose on dev
    weights = "search.class_weights=[none,balanced]" if "search" in summary else "train.class_weights=balanced"
    settings = weights + (" train.select_metric=macro_f1" if summary["select_metric"] != "macro_f1" else "")
    return (f"dev macro_f1 {rounded(best['macro_f1'])} is far below accuracy {rounded(best['accuracy'])}: the "
            f"large classes are right and small ones missed (bertkit evaluate --per-class names them); try --set "
            f"{settings} (docs/finetune.md, \"Imbalanced classes\")")


def behind(method: str, summary: dict, theirs: float, tries: list[str]) -> str:
    """One line: `method` is level with or ahead of the model on dev, and what to try."""
    return f"{standing(method, summary, theirs)}; to beat it, try: {'; '.join(tries)}"


# The scores on which TF-IDF's lead is said when the run selects on another one (a model ahead on
# accuracy may trail on macro-F1: walk P's LoRA run, 0.66 against 0.622 and 0.32 against 0.50).
SHARED_SCORES = ("accuracy", "macro_f1")


def baseline_hint(summary: dict) -> str | None:
    """What to try, in one line, when TF-IDF is level with or ahead of the model on dev (the
    levers measured in docs/results.md, "Fine-tuning defaults across real sets"), or ahead on
    another score; None otherwise."""
    tfidf = recorded_result(summary.get("tfidf_baseline")) or {}
    theirs = tfidf.get(summary["select_metric"])
    if not not_ahead(summary, theirs):
        return other_score_lead(summary, tfidf)
    if theirs == summary["best_dev"][summary["select_metric"]] == 1 and summary["select_metric"] in SHARED_SCORES:
        # both perfect (walk of 90 articles in 3 topics: 9 dev texts): no setting can do better on it
        return (f"TF-IDF and the model both score dev {summary['select_metric']} 1 on the {summary['dev_examples']} "
                "dev texts: this dev split cannot tell them apart or choose settings; a larger one would (bertkit "
                "split --dev takes a fraction of the rows), and the test split gives the score to report")
    if summary.get("dev_in_training"):  # TF-IDF memorises the shared texts: tuning would chase memory
        return (f"{standing('TF-IDF', summary, theirs)}, but {summary['dev_in_training']} of the dev split's "
                f"{summary['dev_examples']} texts are training texts, so the dev score (TF-IDF's above all) is not a "
                "held-out score: keep each text on one side (bertkit split) before comparing or tuning")
    tries = [] if "search" in summary else ["--search (lr, dropout and pooling chosen on dev)"]
    if summary["spec"]["task"] in BLENDED_TASKS and not summary.get("options", {}).get("blend_tfidf"):
        tries.insert(0, "--set train.blend_tfidf=true (the model and TF-IDF blended, the weight chosen on dev)")
    data = summary["spec"]["data"]
    if data.get("long_text", "truncate") != "chunks":  # chunks read every token: nothing is cut
        tries.append(f"a longer --set data.max_length (now {data['max_length']}) if texts were cut")
    tries.append("continued pre-training on your training texts first (docs/dapt.md: configs/tapt-mini.toml for "
                 "bertkit's small from-scratch model; a pretrained encoder without an MLM head, such as MiniLM, "
                 "needs one trained first, configs/dapt-minilm-head.toml, and takes longer)")
    return behind("TF-IDF", summary, theirs, tries)


# A multi-label model behind TF-IDF on macro-F1 misses small labels: none of them reaches p >= 0.5. GCIDE
# subject fields (walk Y, MiniLM, 20 labels, 14 never predicted at lr 5e-5): train.lr=1e-4 took dev macro-F1
# from 0.230 to 0.298 (micro 0.654 to 0.674) and was still rising at its last evaluation; class weights
# are single-label only.
MULTI_LABEL_LR = 1e-4


def multi_label_macro(summary: dict) -> str:
    """What lifts a multi-label model's small labels (MULTI_LABEL_LR), with the run's own lr when known."""
    lr = (summary.get("train_config") or {}).get("lr")
    now = f", now {lr:g}" if lr is not None else ""
    if lr is not None and lr >= MULTI_LABEL_LR:  # walk AB: at lr 1e-4 the hint proposed the lr the run had
        return (f"; small labels the model never puts in a set count 0 in macro_f1: a longer run (evaluate "
                f"--per-class names them); train.lr is already {lr:g} ({MULTI_LABEL_LR:g} lifted them from 5e-05 "
                "on GCIDE subject fields, a larger one is unmeasured)")
    return (f"; small labels the model never puts in a set count 0 in macro_f1: a larger lr (--set train.lr{now}; "
            f"{MULTI_LABEL_LR:g} lifted them from 5e-05 on GCIDE subject fields) or a longer run (evaluate "
            "--per-class names them)")


def weighable(summary: dict) -> bool:
    """Whether the run's task takes class weights (imbalance_hint names them); multi-label does not."""
    return TASKS[summary["spec"]["task"]].class_weights


def other_score_lead(summary: dict, tfidf: dict) -> str | None:
    """TF-IDF ahead of the model on a SHARED_SCORES score other than the one the run selects on."""
    for metric in SHARED_SCORES:
        if metric != summary["select_metric"] and not_ahead(summary, tfidf.get(metric), metric) and \
                tfidf[metric] != summary["best_dev"][metric]:
            return (f"TF-IDF is ahead of the model on dev {metric} ({rounded(tfidf[metric])} against "
                    f"{rounded(summary['best_dev'][metric])}), though not on {summary['select_metric']}"
                    + (multi_label_macro(summary) if metric == "macro_f1" and not weighable(summary) else ""))
    return None
