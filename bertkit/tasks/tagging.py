"""Token classification (tagging, e.g. NER in BIO tags): one tag per word.

Word tags move to sub-word tokens with `align_labels_to_tokens` (the first sub-word of each
word, or all of them with `data.label_all_subwords`); a word's prediction is the tag of its
first sub-word. Metrics: entity precision/recall/F1 as conlleval and seqeval compute them, and
word-level tag accuracy. Files: CoNLL (one "word ... tag" line per word, a blank line between
sentences); for `predict` also .txt / .jsonl {"text"} raw text, whose entities get character
offsets into the text.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from bertkit.distill.tasks import TaskDistiller
from bertkit.errors import DataError
from bertkit.models.families import architectures_for
from bertkit.models.heads import BertForTokenClassification
from bertkit.io import iter_jsonl
from bertkit.tasks.alignment import IGNORE_INDEX, align_labels_to_tokens, word_classes, word_logits
from bertkit.tasks.common import (DataConfig, PredictionInput, TaskSpec, forward_features, model_labels, softmax,
                                  truncation_warning)
from bertkit.tasks.formats import TextExample, TokenExample, has_tag_prefix, read_conll, read_text_dataset
from bertkit.tasks.long_text import window_starts
from bertkit.tasks.metrics import entity_prf, entity_spans, mean_nll
from bertkit.tasks.sequence import read_lines
from bertkit.tasks.spec import Task, label_head_config
from bertkit.tasks.tables import is_table
from bertkit.tasks.unicode_text import word_spans


# The prefixes entity_spans accepts under this scheme: its one conlleval rule reads IOB2 (B-, I-), IOB1 and
# IOBES (E-, S-) tags alike, so a file in any of them is scored as written.
TAG_SCHEME = "IOBES"


def plain_tag_reading(tags: Iterable[str]) -> str | None:
    """How tags without a B-/I- prefix are read, from a set of tags: None when some tag has a prefix
    (the file's scheme as written); "io" when O is among them (IO entity tags: a run of words with one
    tag is one entity, as conlleval reads I- tags); "word" without O (per-word labels such as part of
    speech: each word its own unit, so entity F1 is word accuracy)."""
    tags = set(tags)
    if any(has_tag_prefix(tag) for tag in tags):
        return None
    return "io" if "O" in tags else "word"


PLAIN_TAG_NOTES = {
    "io": "tags without a B-/I- prefix and O: read as IO entity tags (a run of words with one tag is one "
          "entity; write B-TYPE on the first word to keep two neighbours apart)",
    "word": "tags without a B-/I- prefix and no O: read as per-word labels (part of speech and the like; "
            "each word is scored on its own, so F1 is word accuracy)",
}


def scored_tags(tags: Sequence[str], reading: str | None) -> list[str]:
    """`tags` as entity_spans reads them: prefixed tags as written, plain ones as I-TYPE ("io") or S-TYPE
    ("word", one-word units)."""
    if reading is None:
        return list(tags)
    prefix = "I-" if reading == "io" else "S-"
    return [tag if tag == "O" else prefix + tag for tag in tags]


# ---------------------------------------------------------------------------- reading
def check_tags(path: str, examples: Sequence[TokenExample]) -> None:
    """Refuse, when the file is read, a tag without a prefix in a file whose other tags have one (a typo,
    or IO tags mixed into IOB2): entity scoring would read it wrongly. A file of plain tags only is read
    as `plain_tag_reading` says (walk AC: IO or POS tags were refused)."""
    prefixed = next(((example, index) for example in examples for index, tag in enumerate(example.tags)
                     if has_tag_prefix(tag)), None)
    if prefixed is None:
        return
    for example in examples:
        for index, tag in enumerate(example.tags):
            if tag != "O" and not has_tag_prefix(tag):
                where = f"line {example.line + index}" if example.line is not None else "a sentence"
                raise DataError(
                    f"{path}: {where} has the tag {tag!r} without a B-/I- prefix, but other tags have one "
                    f"({prefixed[0].tags[prefixed[1]]!r}): token classification reads a file's tags one way, "
                    "IOB2 (B- on an entity's first word, I- on the rest, O outside; IOB1 and BIOES are read too) "
                    f"or plain tags throughout (IO entity tags, or per-word labels such as part of speech); "
                    f"write it B-{tag} or I-{tag}")


def read(path: str, data: DataConfig) -> list[TokenExample]:
    examples = read_conll(path, data.token_col, data.tag_col)
    if not examples:
        raise DataError(f"{path}: no sentences; CoNLL needs one 'word ... tag' line per word and a "
                        "blank line between sentences")
    check_tags(path, examples)
    reading = plain_tag_reading(tag for example in examples for tag in example.tags)
    if reading is not None:
        warnings.warn(f"{path}: {PLAIN_TAG_NOTES[reading]}", stacklevel=2)
    return examples


def words_of_text(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Words of raw text with character spans (`unicode_text.word_spans`, the rule of
    `realdata.tokenize_words`): each CJK character a word, combining marks and emoji sequences
    kept whole, so every span slices the text at a character a reader sees."""
    spans = word_spans(text)
    return [text[start:end] for start, end in spans], spans


def _jsonl_texts(path: str) -> list[tuple[int, str]]:
    texts = []
    for line_number, record in iter_jsonl(path, blanks=True):
        if record is None:  # a blank line gets its (blank) row, as in a .txt file
            texts.append((line_number, ""))
            continue
        if not isinstance(record.get("text"), str):
            raise DataError(f"{path}: line {line_number} needs a string field 'text'")
        texts.append((line_number, record["text"]))
    if not any(text.strip() for _, text in texts):
        raise DataError(f"{path}: no records")
    return texts


def read_inputs(path: str, data: DataConfig) -> PredictionInput:
    """Raw text (.txt one per line, .jsonl {"text"}, a .csv's text column, a folder of .txt files
    one text each) split into words (`words_of_text`: at spaces and around punctuation, so "£5m"
    is "£", "5m"), or CoNLL words as given: one per line, a tag column or none, a blank line
    between sentences. A whole file is usually longer than max_length: `data.long_text=chunks`."""
    suffix = os.path.splitext(path)[1].lower()
    table = suffix == ".csv" or is_table(path) or os.path.isdir(path)  # a .tsv is CoNLL's usual name
    if suffix not in (".txt", ".jsonl") and not table:
        examples = read_conll(path, data.token_col, data.tag_col, labelled=False)
        if not examples:
            raise DataError(f"{path}: no sentences; put one word per line and a blank line between sentences")
        return PredictionInput(examples)
    if suffix == ".txt" or suffix == ".jsonl":
        texts = [TextExample(text, line=line) for line, text in (read_lines(path) if suffix == ".txt"
                                                                 else _jsonl_texts(path))]
    else:  # a table's text column, or a folder's .txt files
        texts = read_text_dataset(path, data.text_column, None, None)
    examples, spans = [], []
    for text in texts:
        words, text_spans = words_of_text(text.text)
        # no words (blank, or only invisible characters such as a ZWSP): a blank row
        examples.append(TokenExample(words, ["O"] * len(words), text.line, text.file))
        spans.append(text_spans)
    return PredictionInput(examples, [text.text for text in texts], spans)


# ---------------------------------------------------------------------------- features
def inside_label_map(label2id: dict) -> dict[int, int]:
    """{id of B-X: id of I-X} so continuation sub-words do not start new entities."""
    return {index: label2id["I-" + tag[2:]] for tag, index in label2id.items()
            if tag.startswith("B-") and "I-" + tag[2:] in label2id}


def word_char_spans(words: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """The words joined by single spaces, and each word's (start, end) in that text."""
    spans, cursor = [], 0
    for word in words:
        spans.append((cursor, cursor + len(word)))
        cursor += len(word) + 1
    return " ".join(words), spans


def word_ids_from_offsets(offsets: Sequence, special: Sequence[int], spans: Sequence[tuple[int, int]]
                          ) -> np.ndarray:
    """Word index of each token (-1 for special tokens): the word whose span holds its start.

    Words are given, not re-split by the tokenizer's own pre-tokenizer, so "U.S." stays one
    word even though the tokenizer splits it at the dots.
    """
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    token_starts = np.array([o[0] for o in offsets], dtype=np.int64).reshape(-1)
    ids = np.searchsorted(starts, token_starts, side="right") - 1
    ids[np.asarray(special, dtype=bool)] = -1
    return ids


def tokenize_word_lists(tokenizer, word_lists: Sequence[Sequence[str]], max_length: int | None, name: str = "data"):
    """Tokenize sentences given as words: (the encoding, with offsets and special-token masks, and
    each sentence's word spans in the text it joined), cut to `max_length` tokens (None: whole).
    Refuses an empty sentence and a word that is empty or holds whitespace (it would not stay one
    word)."""
    texts, all_spans = [], []
    for index, words in enumerate(word_lists):
        if not words:
            raise DataError(f"{name}: sentence {index + 1} has no words; remove it")
        for word in words:
            if not word or any(ch.isspace() for ch in word):
                raise DataError(f"{name}: sentence {index + 1} has the word {word!r}, which is empty or "
                                "holds whitespace; split it into words")
        text, spans = word_char_spans(words)
        texts.append(text)
        all_spans.append(spans)
    with warnings.catch_warnings():  # truncation is counted and reported by the callers
        warnings.simplefilter("ignore")
        enc = tokenizer(texts, padding=False, truncation=max_length is not None, max_length=max_length,
                        return_offsets=True, return_special_tokens_mask=True, return_tensors=None)
    return enc, all_spans


def encode_words(tokenizer, examples: Sequence[TokenExample], max_length: int,
                 label2id: dict | None = None, label_all_subwords: bool = False,
                 name: str = "data", long_text: str = "truncate", stride: int = 32) -> list[dict]:
    """Token-classification features; `labels` when `label2id` is given, `word_ids` always. With
    `long_text="chunks"` a sentence longer than `max_length` is read whole, as overlapping windows
    (`_windows`), each feature naming its sentence ("example"); else it is cut (its last words
    get no tag: "O")."""
    chunks = long_text == "chunks"
    enc, all_spans = tokenize_word_lists(tokenizer, [e.tokens for e in examples], None if chunks else max_length,
                                         name)
    inside = inside_label_map(label2id) if label2id and label_all_subwords else None
    features, cut = [], 0
    for row, example in enumerate(examples):
        word_ids = word_ids_from_offsets(enc["offsets"][row], enc["special_tokens_mask"][row], all_spans[row])
        whole = {"input_ids": np.asarray(enc["input_ids"][row], dtype=np.int64),
                 "token_type_ids": np.asarray(enc["token_type_ids"][row], dtype=np.int64),
                 "word_ids": word_ids}
        cut += int(word_ids.max(initial=-1)) + 1 < len(example.tokens)
        word_labels = [label2id[tag] for tag in example.tags] if label2id is not None else None
        for feature in (_windows(whole, row, max_length, stride) if chunks else [whole]):
            if word_labels is not None:
                aligned = align_labels_to_tokens([None if w < 0 else int(w) for w in feature["word_ids"]],
                                                 word_labels, label_all_subwords, inside)
                feature["labels"] = np.asarray(aligned, dtype=np.int64)
            features.append(feature)
    truncation_warning(cut, len(examples), max_length, name, "sentences (their last words are tagged O)",
                       TAGGING_CUT_HINT)
    return features


TAGGING_CUT_HINT = "; --set data.long_text=chunks tags every word (overlapping windows)"


def _windows(whole: dict, owner: int, max_length: int, stride: int) -> list[dict]:
    """A sentence's features as windows of at most `max_length` tokens, each its first and last
    (special) token around a stretch of the body, neighbours sharing `stride` tokens
    (`long_text.window_starts`). A word begun before a window's stretch has no word id in it (-1,
    as a special token): its tag comes from a window holding its first sub-word."""
    ids, types, words = whole["input_ids"], whole["token_type_ids"], whole["word_ids"]
    body = len(ids) - 2
    windows = []
    for start in window_starts(body, max_length, stride):
        keep = np.r_[0, np.arange(1 + start, 1 + min(start + max_length - 2, body)), len(ids) - 1]
        piece = words[keep].copy()
        piece[(piece >= 0) & np.isin(piece, words[1:1 + start])] = -1
        windows.append({"input_ids": ids[keep], "token_type_ids": types[keep], "word_ids": piece, "example": owner})
    return windows


def encode(tokenizer, examples, data: DataConfig, label2id: dict | None, training: bool, name: str):
    return encode_words(tokenizer, examples, data.max_length, label2id if training else None,
                        data.label_all_subwords, name, data.long_text, data.doc_stride)


# ---------------------------------------------------------------------------- decoding
class TagPrediction(NamedTuple):
    """One sentence's predicted tags and, from a model, each word's tag probabilities: `probs[i, j]`
    is p(labels[j]) for word i, a NaN row for a word cut off by truncation (tagged "O" unread);
    None from a method that gives tags only (the word-lookup baseline without counts)."""
    tags: list[str]
    probs: np.ndarray | None = None
    labels: Sequence[str] = ()


def decode(model, tokenizer, examples: Sequence[TokenExample], spec: TaskSpec, name: str = "data",
           features: list | None = None) -> list[TagPrediction]:
    """Per sentence, one predicted tag per word: the tag of the word's first sub-word (`alignment.word_logits`;
    words cut off by truncation get "O"), with the softmax there."""
    data = spec.data
    if features is None:
        features = encode_words(tokenizer, examples, data.max_length, name=name, long_text=data.long_text,
                                stride=data.doc_stride)
    outputs = forward_features(model, features, data.eval_batch_size, tokenizer.pad_token_id, data.eval_batching)
    labels = model_labels(model)
    predictions = []
    for logits in word_logits([len(e.tokens) for e in examples], features, outputs):
        tags = ["O" if p == IGNORE_INDEX else labels[p] for p in word_classes(logits)]
        # float64: a float32 holds no p below ~1e-45, so a gold tag 104 logits down made the dev loss inf
        predictions.append(TagPrediction(tags, softmax(logits), labels))
    return predictions


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """`entity_prf` of the tag sequences, plain tags read as the gold tags' `plain_tag_reading` says."""
    reading = plain_tag_reading(tag for tags in gold for tag in tags)
    return entity_prf([scored_tags(tags, reading) for tags in gold],
                      [scored_tags(tags, reading) for tags in predicted], TAG_SCHEME)


def tag_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """Entity P/R/F1 (conlleval / seqeval default) and word-level tag accuracy."""
    scores = entity_scores(gold, predicted)
    total = sum(len(g) for g in gold)
    same = sum(a == b for g, p in zip(gold, predicted) for a, b in zip(g, p))
    return {"f1": scores["f1"], "precision": scores["precision"], "recall": scores["recall"],
            "tag_accuracy": same / max(1, total)}


def word_loss(examples: Sequence[TokenExample], predictions: Sequence[TagPrediction]) -> float:
    """Mean cross-entropy of the gold tag over the words read, -1/N sum ln p(gold) (natural log, as
    classification's `loss`); a word cut off by truncation is left out (the same words at every
    evaluation), a gold tag the model does not know has p = 0 (inf). Empty: nan."""
    gold = []
    for example, prediction in zip(examples, predictions):
        column = {label: j for j, label in enumerate(prediction.labels)}
        probs = np.asarray(prediction.probs, dtype=np.float64).reshape(len(example.tags), len(column))
        read = ~np.isnan(probs).any(axis=-1)
        gold += [row[column[tag]] if tag in column else 0.0
                 for tag, row in zip(np.asarray(example.tags)[read], probs[read])]
    return mean_nll(gold)


def metrics(examples: Sequence[TokenExample], predictions: Sequence[TagPrediction]) -> dict:
    """`tag_metrics`, and the dev `loss` (`word_loss`) when every prediction carries probabilities:
    F1 on a small dev set often ties between checkpoints (0 for the first evaluations of a short
    run), the loss still tells them apart, and the report reads it for its advice."""
    scores = tag_metrics([e.tags for e in examples], [p.tags for p in predictions])
    if all(p.probs is not None for p in predictions):
        scores["loss"] = word_loss(examples, predictions)
    return scores


def per_type_scores(examples: Sequence[TokenExample], predictions: Sequence[TagPrediction]) -> dict:
    """Each entity type's precision, recall, F1 and support (gold entities), as seqeval's
    classification_report counts them (`evaluate --per-class`)."""
    return entity_scores([e.tags for e in examples], [p.tags for p in predictions])["per_type"]


def words_read(tokenizer, examples: Sequence[TokenExample], data: DataConfig) -> dict:
    """`baseline_reads`: {"read": per sentence, a mask of the words the model reads}, those with a sub-word in
    the encoding `decode` makes (cut to data.max_length unless data.long_text is "chunks")."""
    chunks = data.long_text == "chunks"
    enc, all_spans = tokenize_word_lists(tokenizer, [e.tokens for e in examples], None if chunks else data.max_length)
    read = []
    for row, example in enumerate(examples):
        word_ids = word_ids_from_offsets(enc["offsets"][row], enc["special_tokens_mask"][row], all_spans[row])
        mask = np.zeros(len(example.tokens), dtype=bool)
        mask[word_ids[word_ids >= 0]] = True
        read.append(mask)
    return {"read": read}


def lookup_predictions(train: Sequence[TokenExample], examples: Sequence[TokenExample],
                       read: Sequence[np.ndarray] | None = None) -> list[TagPrediction]:
    """The word lookup's predictions (`baseline` scores them): each word gets its most frequent training tag
    (lowercased match; a tie goes to O, then to the first tag in sorted order, not to whichever the file showed
    first), else O (per-word labels without O, such as part of speech: the most frequent training tag, NN say,
    as the usual POS baseline). Its probabilities read the same counts, p(tag | word) = (n(word, tag) + prior(tag)) /
    (n(word) + 1), a word never seen getting the prior, the training tag frequencies add-one smoothed:
    prior(tag) = (n(tag) + 1) / (N + K) over the K tags of training and of `examples` (a model's inventory may
    name tags a small training set lacks). So a pairing training never showed is unlikely rather than
    impossible. `read` (`words_read`): the words the model reads; the others get a NaN row, left out of the
    loss as the model's are (None: every word counts)."""
    counts: dict[str, Counter] = {}
    for example in train:
        for word, tag in zip(example.tokens, example.tags):
            counts.setdefault(word.lower(), Counter())[tag] += 1
    lookup = {word: min(c, key=lambda tag: (-c[tag], tag != "O", tag)) for word, c in counts.items()}
    overall = Counter(tag for example in train for tag in example.tags)
    unseen = "O" if "O" in overall or not overall else min(overall, key=lambda tag: (-overall[tag], tag))
    labels = sorted({tag for example in [*train, *examples] for tag in example.tags})
    prior = np.array([sum(c[tag] for c in counts.values()) for tag in labels], dtype=np.float64) + 1
    prior /= prior.sum()
    table = {word: (np.array([c[tag] for tag in labels]) + prior) / (sum(c.values()) + 1) for word, c in counts.items()}
    predicted = [TagPrediction([lookup.get(w.lower(), unseen) for w in e.tokens],
                               np.array([table.get(w.lower(), prior) for w in e.tokens]).reshape(-1, len(labels)),
                               labels) for e in examples]
    # Scored as the model is. Its F1 and tag accuracy count every word, one cut off by data.max_length
    # tagged "O" unread (a cost of truncation the score should show), so the lookup tags every word too, as
    # the TF-IDF baseline reads whole texts. Its loss (word_loss) leaves a cut word out: it has no probability
    # there; a NaN row leaves the same words out of the lookup's loss, else the two means were over different words.
    for prediction, mask in zip(predicted, read if read is not None else []):
        prediction.probs[~np.asarray(mask, dtype=bool)] = np.nan
    return predicted


def baseline(train: Sequence[TokenExample], examples: Sequence[TokenExample],
             read: Sequence[np.ndarray] | None = None) -> dict:
    """Word lookup (`lookup_predictions`): its tags and probabilities scored as the model's are."""
    # A looked-up I- tag after O still opens an entity under conlleval; that is fine for a baseline.
    return {"method": "each word's most frequent training tag",
            **metrics(examples, lookup_predictions(train, examples, read))}


# ---------------------------------------------------------------------------- rows
def entities_with_spans(tags: Sequence[str], spans: Sequence[tuple[int, int]], text: str,
                        reading: str | None = None) -> list[dict]:
    """The entities of one sentence's tags (`reading`: the model's plain_tag_reading) as character spans."""
    out = []
    for kind, first, last in entity_spans(scored_tags(tags, reading), TAG_SCHEME):
        start, end = spans[first][0], spans[last][1]
        out.append({"type": kind, "start": start, "end": end, "text": text[start:end]})
    return out


def rows(model, predictions: Sequence[TagPrediction], inputs: PredictionInput) -> list[dict]:
    """{"words", "tags", "entities": [{"type", "start", "end", "text"}]}, character offsets into
    the input text (by default the words joined by spaces)."""
    out, reading = [], plain_tag_reading(model_labels(model))
    for i, (example, prediction) in enumerate(zip(inputs.examples, predictions)):
        tags = prediction.tags
        text, spans = word_char_spans(example.tokens)
        if inputs.texts is not None:
            text, spans = inputs.texts[i], inputs.spans[i]
        out.append({"words": list(example.tokens), "tags": tags,
                    "entities": entities_with_spans(tags, spans, text, reading)})
    return out


TOKEN_CLASSIFICATION = Task(
    name="token-classification",
    description="one tag per word (BIO entity tags or any word labels)",
    model_class=BertForTokenClassification,
    read=read, read_inputs=read_inputs, encode=encode, decode=decode, metrics=metrics, baseline=baseline,
    rows=rows, metric_names=("f1", "precision", "recall", "tag_accuracy", "loss"), per_class=per_type_scores,
    baseline_reads=words_read, baseline_predict=lookup_predictions,
    lower_is_better=frozenset({"loss"}),
    labels_of=lambda examples: [tag for e in examples for tag in e.tags],
    head_config=label_head_config(None),
    architectures=architectures_for(BertForTokenClassification),
    class_weights=True, blank_row=lambda example: {"words": [], "tags": [], "entities": []}, file_only=True,
    distiller=TaskDistiller, export_outputs={"logits": ("batch", "sequence")},
)
