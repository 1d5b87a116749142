"""The data side of layer-wise probing: a task's items, their inputs, per-layer features, the split.

1. Items. Built in (WordNet, Debian `wordnet-base`):
   - `wordnet-supersense` (sentence level): a synset's gloss definition, mean-pooled over its
     tokens -> its supersense (45 lexicographer files, e.g. noun.person).
   - `wordnet-tokens` (token level): the words of WordNet example sentences that spell the
     exemplified lemma (e.g. "drum up" in "drum up support") -> the synset's supersense.
     The same word can have several supersenses ("run" as verb.motion or verb.social), so
     context matters.
   Or a FILE: .csv/.tsv/.jsonl with `text` and `label` columns (sentence level) or a CoNLL file
   (token level: every word -> its tag).
2. Each item's control-task type (Hewitt & Liang): token level, the lowercased word; sentence
   level, the text's first content word (for a definition usually its genus, "a PERSON who ...").
3. Features: one (items, hidden) array per layer, computed in length order (little padding)
   and put back in item order.
4. The split: sentence level stratified by label; token level by sentence, so one sentence's
   words never straddle it.
"""

from __future__ import annotations

import os
import random
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from bertkit.analysis.probing import collect_features
from bertkit.errors import ConfigError, DataError
from bertkit.tasks.formats import TextExample, parse_number, read_conll, read_text_dataset
from bertkit.tasks.realdata import stratified_split, tokenize_words, wordnet_examples_tagged, wordnet_supersense
from bertkit.tasks.tagging import tokenize_word_lists, word_ids_from_offsets

BUILTIN_TASKS = {"wordnet-supersense": "sentence", "wordnet-tokens": "token"}
SENTENCE_SUFFIXES = (".csv", ".tsv", ".jsonl")
# Skipped when picking a gloss's first content word (the sentence-level control task's "type").
FUNCTION_WORDS = frozenset(
    "a an the of or and to in on at by for with from as into that which who whom whose is are be "
    "being been having has have it its this these those one any some something someone not no "
    "very more most relating pertaining ( ) , ; :".split()
)


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
    words = [w.lower() for w in tokenize_words(text)]
    return next((w for w in words if w not in FUNCTION_WORDS), words[0] if words else "")


def resolve_level(task: str, level: str | None) -> str:
    if task in BUILTIN_TASKS:
        natural = BUILTIN_TASKS[task]
        if level is not None and level != natural:
            raise ConfigError(f"--data {task} is a {natural}-level task; drop --level or use --level {natural}")
        return natural
    if not os.path.isfile(task):
        raise ConfigError(f"--data {task!r} is neither a built-in task ({', '.join(BUILTIN_TASKS)}) "
                          "nor an existing file")
    natural = "sentence" if task.lower().endswith(SENTENCE_SUFFIXES) else "token"
    if level is not None and level != natural:
        kind = ".csv/.tsv/.jsonl" if natural == "sentence" else "CoNLL"
        raise ConfigError(f"{task} reads as a {kind} file, which is {natural}-level; use --level {natural} "
                          "or a file of the other kind")
    return natural


def _sentence_items(task: str, limit: int | None, seed: int, columns: tuple[str, str]) -> ProbeData:
    if task == "wordnet-supersense":
        examples = wordnet_supersense(limit=limit, seed=seed)
    else:
        examples = read_text_dataset(task, columns[0], None, columns[1], label_type="category")
        refuse_numeric_labels(task, [e.label for e in examples])
        random.Random(f"probe:{seed}").shuffle(examples)
        examples = examples[:limit]
    examples = [e for e in examples if e.label is not None and e.text.strip()]
    if any(isinstance(e.label, list) for e in examples):
        raise DataError(f"{task} has multi-label rows; a probe needs one label per text")
    data = ProbeData("sentence")
    for k, e in enumerate(examples):
        data.texts.append(e.text)
        data.labels.append(str(e.label))
        data.types.append(gloss_type(e.text))
        data.groups.append(k)
    return data


def refuse_numeric_labels(task: str, labels: list) -> None:
    """A probe is a classifier over label names: a numeric target (a regression file) read as
    classes gives hundreds of one-example classes and a meaningless accuracy."""
    names = {str(label) for label in labels if label is not None and not isinstance(label, list)}
    numbers = [name for name in names if parse_number(name) is not None]
    if len(names) > 20 and len(numbers) == len(names):
        raise DataError(f"{task}: the labels are {len(names)} distinct numbers; a probe predicts classes, so put "
                        "the numbers into a few bins (e.g. low / mid / high) in the label column first")


def load_items(task: str, level: str, limit: int | None, seed: int,
               columns: tuple[str, str] = ("text", "label")) -> ProbeData:
    """The task's examples (a seeded shuffle, at most `limit`); token level leaves the labels to
    `token_labels`, which knows which words survive truncation. `columns`: a table's text and
    label columns."""
    if level == "sentence":
        return _sentence_items(task, limit, seed, columns)
    if task == "wordnet-tokens":
        sentences = wordnet_examples_tagged(limit=limit, seed=seed)
        # only the words that spell the lemma; their label is the synset's supersense
        pick = [[i for i, tag in enumerate(s.tags) if tag != "O"] for s in sentences]
    else:
        sentences = read_conll(task)
        random.Random(f"probe:{seed}").shuffle(sentences)
        sentences = sentences[:limit]
        pick = [list(range(len(s.tokens))) for s in sentences]
    data = ProbeData("token")
    data.sentences, data.targets = sentences, pick
    return data


def token_labels(data: ProbeData, kept: list[list[int]]) -> None:
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
    enc, spans = tokenize_word_lists(tokenizer, [sentence.tokens for sentence in data.sentences], max_length,
                                     "probe data")
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


def features(model, tokenizer, data: ProbeData, batch_size: int, max_length: int, pooling: str | None,
             token_inputs_=None) -> list[np.ndarray]:
    """One (items, hidden) array per layer, rows in item order (token level: `token_inputs_` is
    what `token_inputs` returned)."""
    if data.level == "sentence":
        lengths = np.array([len(t) for t in data.texts])
        order = np.argsort(lengths, kind="stable")
        batches = sentence_batches(tokenizer, data.texts, batch_size, max_length, order)
        layers = collect_features(model, batches, "sentence", pooling)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return [layer[inverse] for layer in layers]
    inputs, kept = token_inputs_
    lengths = np.array([len(r["input_ids"]) for r in inputs])
    order = np.argsort(lengths, kind="stable")
    batches = token_batches(inputs, batch_size, order, tokenizer.pad_token_id)
    layers = collect_features(model, batches, "token", pooling)
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
