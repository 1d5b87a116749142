"""`bertkit probe --model DIR --task TASK --out DIR [--level sentence|token] [--limit N] [--control] [--random-init]`.

Linear probes on every layer of a frozen encoder (layer 0 = the embeddings):

1. Read the task's items. Built in (WordNet, Debian `wordnet-base`):
   - `wordnet-supersense` (sentence level): a synset's gloss definition, mean-pooled over its
     tokens -> its supersense (45 lexicographer files, e.g. noun.person).
   - `wordnet-tokens` (token level): the words of WordNet example sentences that spell the
     exemplified lemma (e.g. "drum up" in "drum up support") -> the synset's supersense.
     The same word can have several supersenses ("run" as verb.motion or verb.social), so
     context matters.
   Or a FILE: .csv/.tsv/.jsonl with `text` and `label` columns (sentence level) or a CoNLL file
   (token level: every word -> its tag).
2. Hold out a test split (sentence level: stratified by label; token level: by sentence, so
   one sentence's words never straddle the split).
3. Collect each layer's features (`collect_features`) and train one `LinearProbe` per layer.
   --control adds Hewitt & Liang's control task: every word type gets a random label (token
   level: the lowercased word; sentence level: the gloss's first content word, which for a
   definition is usually its genus, "a PERSON who ..."). Selectivity = accuracy - control
   accuracy. --random-init repeats everything on the same architecture with random weights,
   which separates what pre-training learned from what the probe finds in any projection.

Writes OUT/results.jsonl (one row per encoder and layer), OUT/probe.png and OUT/summary.json,
and prints the per-layer table.
"""

from __future__ import annotations

import json
import os
import random
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, DataError

HELP = "train linear probes on every layer of a frozen encoder (with control task and random baseline)"

BUILTIN_TASKS = {"wordnet-supersense": "sentence", "wordnet-tokens": "token"}
SENTENCE_SUFFIXES = (".csv", ".tsv", ".jsonl")
# Skipped when picking a gloss's first content word (the sentence-level control task's "type").
FUNCTION_WORDS = frozenset(
    "a an the of or and to in on at by for with from as into that which who whom whose is are be "
    "being been having has have it its this these those one any some something someone not no "
    "very more most relating pertaining ( ) , ; :".split()
)


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="model directory (weights + tokenizer)")
    parser.add_argument("--task", required=True,
                        help="wordnet-supersense, wordnet-tokens, or a file (.csv/.tsv/.jsonl: text,label; "
                             "otherwise CoNLL: word ... tag)")
    parser.add_argument("--out", required=True, help="directory for results.jsonl, probe.png, summary.json")
    parser.add_argument("--level", choices=("sentence", "token"),
                        help="probe pooled sentences or single words (default: from the task)")
    parser.add_argument("--limit", type=int, default=None,
                        help="use at most N examples (glosses / sentences), after a seeded shuffle")
    parser.add_argument("--control", action="store_true", help="add the control task and report selectivity")
    parser.add_argument("--random-init", action="store_true",
                        help="also probe the same architecture with random weights (baseline)")
    parser.add_argument("--pooling", help="sentence: mean (default) or cls; token: first (default) or mean sub-word")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="share held out for testing")
    parser.add_argument("--weight-decay", type=float, default=1e-3, help="L2 penalty of the probes")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per input (longer ones are cut)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0, help="data shuffle, split, control labels, random init")


# ----------------------------------------------------------------------------- items
@dataclass
class ProbeData:
    """What a probe task needs: sentence-level texts, or words with the positions to probe."""

    level: str
    labels: list = field(default_factory=list)  # one per item
    types: list = field(default_factory=list)  # one per item: the control task's word type
    groups: list = field(default_factory=list)  # one per item: the example it came from
    texts: list = field(default_factory=list)  # sentence level: one text per example
    sentences: list = field(default_factory=list)  # token level: TokenExample per example
    targets: list = field(default_factory=list)  # token level: per example, the word indexes probed


def gloss_type(text: str) -> str:
    """The first content word of a text, lowercased (the sentence-level control task's type)."""
    from ..tasks.realdata import tokenize_words

    words = [w.lower() for w in tokenize_words(text)]
    return next((w for w in words if w not in FUNCTION_WORDS), words[0] if words else "")


def resolve_level(task: str, level: str | None) -> str:
    if task in BUILTIN_TASKS:
        natural = BUILTIN_TASKS[task]
        if level is not None and level != natural:
            raise ConfigError(f"--task {task} is a {natural}-level task; drop --level or use --level {natural}")
        return natural
    if not os.path.isfile(task):
        raise ConfigError(f"--task {task!r} is neither a built-in task ({', '.join(BUILTIN_TASKS)}) "
                          "nor an existing file")
    natural = "sentence" if task.lower().endswith(SENTENCE_SUFFIXES) else "token"
    if level is not None and level != natural:
        kind = ".csv/.tsv/.jsonl" if natural == "sentence" else "CoNLL"
        raise ConfigError(f"{task} reads as a {kind} file, which is {natural}-level; use --level {natural} "
                          "or a file of the other kind")
    return natural


def load_items(task: str, level: str, limit: int | None, seed: int) -> ProbeData:
    from ..tasks.formats import read_conll, read_text_dataset
    from ..tasks.realdata import wordnet_examples_tagged, wordnet_supersense

    data = ProbeData(level)
    if level == "sentence":
        if task == "wordnet-supersense":
            examples = wordnet_supersense(limit=limit, seed=seed)
        else:
            examples = read_text_dataset(task, label_type="category")
            random.Random(f"probe:{seed}").shuffle(examples)
            examples = examples[:limit]
        examples = [e for e in examples if e.label is not None and e.text.strip()]
        if any(isinstance(e.label, list) for e in examples):
            raise DataError(f"{task} has multi-label rows; a probe needs one label per text")
        for k, e in enumerate(examples):
            data.texts.append(e.text)
            data.labels.append(str(e.label))
            data.types.append(gloss_type(e.text))
            data.groups.append(k)
        return data

    if task == "wordnet-tokens":
        sentences = wordnet_examples_tagged(limit=limit, seed=seed)
        # only the words that spell the lemma; their label is the synset's supersense
        pick = [[i for i, tag in enumerate(s.tags) if tag != "O"] for s in sentences]
    else:
        sentences = read_conll(task)
        random.Random(f"probe:{seed}").shuffle(sentences)
        sentences = sentences[:limit]
        pick = [list(range(len(s.tokens))) for s in sentences]
    data.sentences, data.targets = sentences, pick
    return data


def _token_labels(data: ProbeData, kept: list[list[int]]) -> None:
    """Fill labels/types/groups for the probed words that survived truncation (`kept`).

    IOB prefixes are dropped (B-noun.person and I-noun.person are both noun.person): a probe
    sees one word, not the span it starts or continues.
    """
    for k, (sentence, words) in enumerate(zip(data.sentences, kept)):
        for i in words:
            tag = sentence.tags[i]
            data.labels.append(tag[2:] if tag[:2] in ("B-", "I-") else tag)
            data.types.append(sentence.tokens[i].lower())
            data.groups.append(k)


# ----------------------------------------------------------------------------- features
def sentence_batches(tokenizer, texts: list[str], batch_size: int, max_length: int, order: np.ndarray):
    """Batches of texts in `order` (shortest first: little padding), as model inputs."""
    for start in range(0, len(order), batch_size):
        chunk = [texts[i] for i in order[start:start + batch_size]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation is counted and reported by the caller
            enc = tokenizer(chunk, truncation=True, max_length=max_length)
        yield {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")}


def token_inputs(tokenizer, data: ProbeData, max_length: int) -> tuple[list[dict], list[list[int]]]:
    """Per sentence: unpadded inputs with word_ids set only on the probed words, and which
    probed words survived truncation (in order; collect_features emits rows in that order)."""
    from ..tasks.tagging import word_char_spans, word_ids_from_offsets

    texts, spans = [], []
    for index, sentence in enumerate(data.sentences):
        if any(not w or any(c.isspace() for c in w) for w in sentence.tokens):
            raise DataError(f"sentence {index + 1} has an empty word or one holding whitespace; "
                            "give one word per line")
        text, word_spans = word_char_spans(sentence.tokens)
        texts.append(text)
        spans.append(word_spans)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = tokenizer(texts, padding=False, truncation=True, max_length=max_length,
                        return_offsets=True, return_special_tokens_mask=True, return_tensors=None)
    inputs, kept = [], []
    for row, targets in enumerate(data.targets):
        ids = word_ids_from_offsets(enc["offsets"][row], enc["special_tokens_mask"][row], spans[row])
        wanted = np.isin(ids, targets)
        ids = np.where(wanted, ids, -1)
        kept.append(sorted(set(ids[ids >= 0].tolist())))
        inputs.append({"input_ids": enc["input_ids"][row], "token_type_ids": enc["token_type_ids"][row],
                       "word_ids": ids.tolist()})
    return inputs, kept


def token_batches(inputs: list[dict], batch_size: int, order: np.ndarray, pad_id: int):
    import torch

    for start in range(0, len(order), batch_size):
        rows = [inputs[i] for i in order[start:start + batch_size]]
        T = max(len(r["input_ids"]) for r in rows)
        batch = {"input_ids": torch.full((len(rows), T), pad_id, dtype=torch.long),
                 "token_type_ids": torch.zeros((len(rows), T), dtype=torch.long),
                 "attention_mask": torch.zeros((len(rows), T), dtype=torch.long),
                 "word_ids": torch.full((len(rows), T), -1, dtype=torch.long)}
        for b, r in enumerate(rows):
            n = len(r["input_ids"])
            batch["input_ids"][b, :n] = torch.tensor(r["input_ids"])
            batch["token_type_ids"][b, :n] = torch.tensor(r["token_type_ids"])
            batch["attention_mask"][b, :n] = 1
            batch["word_ids"][b, :n] = torch.tensor(r["word_ids"])
        yield batch


def features(model, tokenizer, data: ProbeData, args, token_inputs_=None) -> list[np.ndarray]:
    """One (items, hidden) array per layer, rows in item order."""
    from ..analysis.probing import collect_features

    if data.level == "sentence":
        lengths = np.array([len(t) for t in data.texts])
        order = np.argsort(lengths, kind="stable")
        batches = sentence_batches(tokenizer, data.texts, args.batch_size, args.max_length, order)
        layers = collect_features(model, batches, "sentence", args.pooling)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return [layer[inverse] for layer in layers]
    inputs, kept = token_inputs_
    lengths = np.array([len(r["input_ids"]) for r in inputs])
    order = np.argsort(lengths, kind="stable")
    batches = token_batches(inputs, args.batch_size, order, tokenizer.pad_token_id)
    layers = collect_features(model, batches, "token", args.pooling)
    # rows come sentence by sentence in `order`; put them back in item (sentence) order
    counts = np.array([len(k) for k in kept])
    starts = np.concatenate([[0], np.cumsum(counts[order])[:-1]]).astype(np.int64)
    start_of = np.empty_like(starts)
    start_of[order] = starts
    index = np.concatenate([np.arange(s, s + c) for s, c in zip(start_of, counts)] or [np.zeros(0, np.int64)])
    return [layer[index.astype(np.int64)] for layer in layers]


# ----------------------------------------------------------------------------- split
def split_items(data: ProbeData, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sentence level: stratified by label; token level: whole sentences on one side."""
    from ..tasks.formats import TextExample
    from ..tasks.realdata import stratified_split

    n = len(data.labels)
    if data.level == "sentence":
        tagged = [TextExample(text=data.texts[i], text_pair=str(i), label=data.labels[i]) for i in range(n)]
        parts = stratified_split(tagged, seed, dev_fraction=0.0, test_fraction=test_fraction)
        train = np.array(sorted(int(e.text_pair) for e in parts["train"]), dtype=np.int64)
        test = np.array(sorted(int(e.text_pair) for e in parts["test"]), dtype=np.int64)
    else:
        groups = sorted(set(data.groups))
        random.Random(f"probe-split:{seed}").shuffle(groups)
        held = set(groups[:int(len(groups) * test_fraction + 0.5)])
        is_test = np.array([g in held for g in data.groups])
        train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    if train.size == 0 or test.size == 0:
        raise DataError(f"{n} items are too few to hold out a test split with --test-fraction "
                        f"{test_fraction}; raise --limit")
    return train, test


# ----------------------------------------------------------------------------- run
def _table(rows: list[dict], baseline: list[dict] | None) -> list[str]:
    head = f"{'layer':>5}  {'accuracy':>8}  {'train':>6}"
    has_control = "control_accuracy" in rows[0]
    if has_control:
        head += f"  {'control':>7}  {'selectivity':>11}"
    if baseline:
        head += f"  {'random-init':>11}"
        if has_control:
            head += f"  {'rand. sel.':>10}"
    lines = [head]
    for k, r in enumerate(rows):
        line = f"{r['layer']:>5}  {r['accuracy']:8.3f}  {r['train_accuracy']:6.3f}"
        if has_control:
            line += f"  {r['control_accuracy']:7.3f}  {r['selectivity']:11.3f}"
        if baseline:
            line += f"  {baseline[k]['accuracy']:11.3f}"
            if has_control:
                line += f"  {baseline[k]['selectivity']:10.3f}"
        lines.append(line)
    return lines


def run(args) -> int:
    import torch

    from ..analysis.probing import control_task_labels, plot_probe, probe_layers
    from ..io import atomic_open, atomic_write_json
    from ..model import BertModel
    from .attention import load_encoder, model_name

    if args.limit is not None and args.limit < 2:
        raise ConfigError(f"--limit must be at least 2, got {args.limit}")
    if not 0.0 < args.test_fraction < 1.0:
        raise ConfigError(f"--test-fraction must be between 0 and 1, got {args.test_fraction}")
    if args.batch_size < 1 or args.max_length < 3:
        raise ConfigError("--batch-size must be >= 1 and --max-length >= 3")
    level = resolve_level(args.task, args.level)
    allowed = {"sentence": ("mean", "cls"), "token": ("first", "mean")}[level]
    if args.pooling is not None and args.pooling not in allowed:
        raise ConfigError(f"--pooling for {level}-level probes must be one of {', '.join(allowed)}, "
                          f"got {args.pooling!r}")
    start = time.perf_counter()
    model, tokenizer = load_encoder(args.model)
    args.max_length = min(args.max_length, model.config.max_sequence_length)

    data = load_items(args.task, level, args.limit, args.seed)
    prepared = None
    if level == "token":
        prepared = token_inputs(tokenizer, data, args.max_length)
        _token_labels(data, prepared[1])
    if len(data.labels) < 2:
        raise DataError(f"{args.task} gave {len(data.labels)} items to probe; need more (raise --limit)")
    train, test = split_items(data, args.test_fraction, args.seed)
    labels = np.array(data.labels)
    control = control_task_labels(data.types, labels, seed=args.seed) if args.control else None
    classes = len(set(data.labels))
    print(f"probe: {args.task} ({level} level), {len(labels)} items from {len(set(data.groups))} "
          f"examples, {classes} labels; {train.size} train / {test.size} test", flush=True)

    encoders = [("pretrained", model)]
    if args.random_init:
        torch.manual_seed(args.seed)
        encoders.append(("random-init", BertModel(model.config).eval()))
    results: dict[str, list[dict]] = {}
    for name, encoder in encoders:
        t0 = time.perf_counter()
        layers = features(encoder, tokenizer, data, args, prepared)
        t1 = time.perf_counter()
        results[name] = probe_layers(layers, labels, train, test, control, weight_decay=args.weight_decay)
        print(f"{name}: features {t1 - t0:.1f}s, probes {time.perf_counter() - t1:.1f}s", flush=True)

    os.makedirs(args.out, exist_ok=True)
    meta = {"task": args.task, "level": level, "model": os.path.abspath(args.model), "items": int(labels.size),
            "examples": len(set(data.groups)), "classes": classes, "train": int(train.size),
            "test": int(test.size), "pooling": args.pooling or allowed[0], "control": bool(args.control),
            "weight_decay": args.weight_decay, "seed": args.seed, "limit": args.limit}
    with atomic_open(os.path.join(args.out, "results.jsonl"), "w", encoding="utf-8") as f:
        for name, rows in results.items():
            for row in rows:
                f.write(json.dumps({"encoder": name, **row, "task": args.task, "level": level}) + "\n")
    baseline = results.get("random-init")
    title = f"{model_name(args.model)}: {os.path.basename(args.task)} ({level} level)"
    plot_probe(results["pretrained"], os.path.join(args.out, "probe.png"), title=title, baseline=baseline)
    best = max(results["pretrained"], key=lambda r: r["accuracy"])
    meta.update(best_layer=best["layer"], best_accuracy=best["accuracy"], majority=best["majority"],
                seconds=round(time.perf_counter() - start, 1))
    atomic_write_json(os.path.join(args.out, "summary.json"), meta)

    print(f"majority-class accuracy {best['majority']:.3f}; layer 0 = embeddings")
    for line in _table(results["pretrained"], baseline):
        print(line)
    print(f"best layer {best['layer']}: accuracy {best['accuracy']:.3f}; wrote {args.out}/results.jsonl, "
          f"probe.png, summary.json ({meta['seconds']:.0f}s)")
    return 0
