"""Task data in the standard file formats: CSV/TSV/JSONL text sets, CoNLL, SQuAD JSON.

Four example types cover the fine-tuning tasks:

* `TextExample`  -- one text (or a text pair) with a class label, several labels
  (multi-label), a number (regression), or no label (unlabelled prediction input).
* `TokenExample` -- a tokenised sentence with one tag per token (NER, POS, supersenses).
* `QAExample`    -- an extractive question over a context (SQuAD v1.1 / v2.0).
* `ChoiceExample` -- a context with C candidate texts and the index of the right one (JSONL).

Every problem a user can cause in a file raises `DataError` with the file, the line (or
record) at fault and what to do about it.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence, Union

from bertkit.errors import DataError
from bertkit.io import (check_regular_file, is_json_array, iter_csv_rows, iter_text_lines, json_lines_fix, loads_json,
                        read_text, text_file_lines)
from bertkit.tasks.class_folders import is_class_folder, read_class_folder, read_text_files
from bertkit.tasks.tables import is_table, iter_records

Label = Union[str, float, list, None]

__all__ = [
    "TextExample",
    "PairExample",
    "TokenExample",
    "QAExample",
    "ChoiceExample",
    "SquadReadStats",
    "read_text_dataset",
    "same_text",
    "spreadsheet_fix",
    "no_input_error",
    "read_texts",
    "read_numbered_texts",
    "read_text_inputs",
    "read_conll",
    "write_conll",
    "read_squad",
    "write_squad",
    "read_choices",
    "infer_task_kind",
    "build_label_map",
    "check_labels_known",
]


@dataclass
class TextExample:
    """A text (optionally a pair) and its label.

    `label` is a class name (str), several class names (list[str], multi-label), a number
    (float, regression) or None (unlabelled).
    """

    text: str
    text_pair: str | None = None
    label: Label = None
    line: int | None = field(default=None, compare=False)  # where it starts in its file (1-based)
    file: str | None = field(default=None, compare=False)  # its file, in a folder of texts (class_folders.py)


@dataclass
class PairExample:
    """A text, the text it should be near (`positive`) and optionally one it should not (`negative`)."""

    text: str
    positive: str
    negative: str | None = None
    line: int | None = field(default=None, compare=False)  # where it is in its file (1-based)

    @property
    def candidates(self) -> list[str]:
        """Its texts of the corpus: the positive first."""
        return [self.positive] + ([self.negative] if self.negative is not None else [])


@dataclass
class TokenExample:
    """A sentence as tokens with one tag per token (e.g. IOB2 tags `B-PER`, `I-PER`, `O`)."""

    tokens: list[str]
    tags: list[str]
    line: int | None = field(default=None, compare=False)  # where it starts in its file (1-based)
    file: str | None = field(default=None, compare=False)  # its file, in a folder of texts (class_folders.py)

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.tags):
            raise DataError(
                f"TokenExample has {len(self.tokens)} tokens but {len(self.tags)} tags; "
                "give exactly one tag per token"
            )


@dataclass
class QAExample:
    """An extractive QA example in SQuAD form.

    `answers` is a list of {"text": str, "answer_start": int} with
    `context[answer_start : answer_start + len(text)] == text`. For a SQuAD 2.0 question
    without an answer, `is_impossible` is True and `answers` is empty.
    """

    id: str
    question: str
    context: str
    answers: list[dict] = field(default_factory=list)
    is_impossible: bool = False
    line: int | None = field(default=None, compare=False)  # its line in a JSON-lines file (1-based)


# ----------------------------------------------------------------------------------------
# CSV / TSV / JSONL text classification and regression sets
# ----------------------------------------------------------------------------------------


def parse_number(value) -> float | None:
    """The value as a finite float, or None when it is not a number (bools are not numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _finish_labels(raw: list, where: list[str], path: str, label_type: str, form: str = "") -> list:
    """Turn raw label cells into final labels, the same kind for every record.

    raw[i] is None (missing), a str, a number or a list of str; where[i] names its line.
    Rules: label_type "set" -> every label a list (`_label_sets`); any list -> all multi-label
    (missing -> []); otherwise with label_type "auto" all labels become floats when every one
    parses as a number, else str. `form` is how the file writes a label set.
    """
    if all(value is None for value in raw) and label_type != "set":
        return raw
    if label_type == "set":
        return _label_sets(raw, where, path, form)
    if any(isinstance(value, list) for value in raw):
        if label_type == "number":
            raise DataError(f"{path}: {where[0]} has a list of labels; this task's labels are single numbers (a "
                            "regression target, a similarity score)")
        return [value if isinstance(value, list) else ([] if value is None else [str(value)])
                for value in raw]
    for value, loc in zip(raw, where):
        if value is None:
            raise DataError(
                f"{path}: {loc} has no label while other records have one; "
                "fill it in, or remove the row"
            )
    if label_type == "category":
        return _warn_about_classes(path, [_label_to_str(value) for value in raw], form)
    numbers = [parse_number(value) for value in raw]
    if label_type == "number":
        for number, value, loc in zip(numbers, raw, where):
            if number is None:
                # said in the task's terms: label_type is an internal name the user never sees
                raise DataError(f"{path}: {loc} label {value!r} is not a number; this task's labels must be numbers "
                                "(a regression target, a similarity score): correct it or remove the row")
        return numbers
    if all(number is not None for number in numbers):
        return numbers
    return _warn_about_classes(path, [_label_to_str(value) for value in raw], form)


SEPARATORS = ("|", ";", ",")  # what joins several labels in one cell when the documented form is not used


def _label_sets(raw: list, where: list[str], path: str, form: str) -> list:
    """Multi-label labels (an explicit multi-label task) as lists: no label is the empty set, a
    single name a set of one. A name holding a separator is refused: trained as it is, each
    combination of labels would be one class of its own."""
    sets = []
    for value, loc in zip(raw, where):
        if isinstance(value, list) or value is None:
            sets.append(value or [])
            continue
        name = _label_to_str(value).strip()
        joined = next((sep for sep in SEPARATORS if sep in name), None)
        if joined:
            raise DataError(f"{path}: {loc} label {name!r} looks like several labels joined by {joined!r}; "
                            f"write a multi-label set in this file as {form}{_separator_fix(form, joined)}")
        sets.append([name] if name else [])
    return sets


def _separator_fix(form: str, sep: str) -> str:
    """For a CSV or TSV file (`form` names its separator) whose cells join labels with `sep`: the
    setting that reads them as they are, without rewriting the file (walk Y: a "Chem;Geom" column
    was told only to be rewritten with "|")."""
    if not form.startswith("labels joined by") or form.startswith(f"labels joined by {sep!r}"):
        return ""
    return f", or read them as they are with --set 'data.multilabel_sep={sep}'"


def _warn_about_classes(path: str, labels: list[str], form: str) -> list[str]:
    """`labels`, with a warning when its class names look like a mistake: many of them label sets
    written another way ("a;b" in CSV, "a|b" in JSONL: each combination would be a class of its
    own), or two that differ only in case ("German", "german": two classes)."""
    names = set(labels)
    joined = sorted(name for name in names if any(sep in name for sep in SEPARATORS[:2]))
    if len(joined) >= 2 and len(joined) * 4 >= len(names):
        sep = next(sep for sep in SEPARATORS if sep in joined[0])
        warnings.warn(f"{path}: {len(joined)} of the {len(names)} classes look like several labels joined "
                      f"({joined[0]!r}); each is trained as a class of its own. If they are label sets, write "
                      f"them as {form} (multi-label){_separator_fix(form, sep)}", stacklevel=4)
    _warn_about_spellings(path, names)
    return labels


def _warn_about_spellings(path: str, names: set[str]) -> None:
    """Warn about class names that are one label spelled two ways: differing only in case
    ("German", "german"), or only in Unicode form ("Ö" as one character, NFC, or as "O" and a
    combining diaeresis, NFD, as macOS and some web text write it), which look identical on screen.
    Each spelling stays a class of its own: labels are never rewritten."""
    by_form: dict[str, list[str]] = {}
    for name in sorted(names):
        by_form.setdefault(unicodedata.normalize("NFC", name), []).append(name)
    by_case: dict[str, list[str]] = {}
    for form in by_form:
        by_case.setdefault(form.casefold(), []).append(form)
    cased = [[n for form in group for n in by_form[form]] for group in by_case.values() if len(group) > 1]
    if cased:
        shown = ", ".join(" / ".join(repr(n) for n in group) for group in cased[:3])
        warnings.warn(f"{path}: {len(cased)} label(s) differ from another only in case ({shown}); each spelling "
                      "is trained as a class of its own: write each label one way if they are the same",
                      stacklevel=5)
    formed = [group for group in by_form.values() if len(group) > 1]
    if formed:
        shown = ", ".join(" / ".join(ascii(n) for n in group) for group in formed[:3])
        warnings.warn(f"{path}: {len(formed)} label(s) look the same as another but are written with different "
                      f"Unicode characters (composed, NFC, vs decomposed, NFD: {shown}); each spelling is trained "
                      "as a class of its own: save the file with one form (NFC) if they are the same label",
                      stacklevel=5)


def _label_to_str(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_text_dataset(
    path: str | os.PathLike,
    text_column: str = "text",
    pair_column: str | None = None,
    label_column: str | None = "label",
    label_type: str = "auto",
    multilabel_sep: str = "|",
) -> list[TextExample]:
    """Read a text classification / regression set from .csv, .tsv, .jsonl, .parquet, a directory
    saved by `datasets` (the last two as JSONL records: tables.py) or a folder of class folders
    (CLASS/*.txt: class_folders.py; its folder names are class names unless `label_type` says numbers).

    CSV and TSV files need a header row. Labels:
      * multi-label: a JSON list in JSONL, or labels joined by `multilabel_sep` ("a|b") in
        CSV/TSV; once any record has several labels, every label becomes a list.
      * numbers: with `label_type="auto"` labels become floats when EVERY label parses as a
        number (regression). Integer class ids such as 0/1 therefore read as floats: pass
        `label_type="category"` to keep them as class names ("0", "1").
      * `label_type="set"` (the multi-label task named): every label a list, an empty cell the
        empty set; a name holding another separator ("a;b" in CSV, "a|b" in JSONL) is refused.
      * `label_column=None` reads an unlabelled set (label None).
    """
    path = str(path)
    if label_type not in ("auto", "category", "number", "set"):
        raise DataError(f"label_type must be 'auto', 'category', 'number' or 'set', got {label_type!r}")
    table, folder = is_table(path), is_class_folder(path)
    if not (table or folder):  # tables check their own files (a directory, a cached name); a FIFO would hang
        check_regular_file(path)
    suffix = Path(path).suffix.lower()
    columns = (text_column, pair_column, label_column)
    if folder:
        return _folder_examples(path, columns, label_type)
    if suffix in (".csv", ".tsv"):
        records = _csv_records(path, "\t" if suffix == ".tsv" else ",", columns, multilabel_sep)
    elif suffix == ".jsonl" or table:
        records = _jsonl_records(path, columns)
    elif suffix == ".json" and is_json_array(path):
        raise DataError(f"{path} is one JSON array; bertkit reads .csv, .tsv or JSON lines (.jsonl): "
                        f"{json_lines_fix(path)}")
    else:
        raise DataError(f"{path}: unknown extension {suffix!r}; use .csv, .tsv, .jsonl, .parquet, a directory "
                        f"saved by datasets, or a folder of .txt files (one folder per class to train on){spreadsheet_fix(suffix)}")
    read = list(records)  # (line, text, pair, raw label)
    if label_column is not None:  # a labelled set (train, dev, test); predict's blank inputs get blank rows
        _refuse_empty_texts(path, read, columns[:2])
    form = (f"labels joined by {multilabel_sep!r} in one cell (a{multilabel_sep}b)"
            if suffix in (".csv", ".tsv") and multilabel_sep else 'a JSON list (["a", "b"])')
    labels = _finish_labels([r[3] for r in read], [f"line {r[0]}" for r in read], path, label_type, form)
    return [TextExample(text=t, text_pair=p, label=l, line=n) for (n, t, p, _), l in zip(read, labels)]


SPREADSHEETS = (".xlsx", ".xls", ".xlsm", ".ods", ".numbers")


def spreadsheet_fix(suffix: str) -> str:
    """For a spreadsheet workbook, how to save it as what bertkit reads (its cells are not text
    bertkit can read without a spreadsheet library); else ""."""
    if suffix.lower() not in SPREADSHEETS:
        return ""
    return ("; it is a spreadsheet workbook: save the sheet as CSV (Excel: File > Save As > CSV UTF-8; LibreOffice: "
            "Text CSV, UTF-8), with a header row naming the columns (text; label to train on)")


def same_text(text: str) -> str:
    """What two texts that differ only in spacing and line ends (a copy saved on Windows, CRLF;
    a double space) have in common: their words, single-spaced."""
    return " ".join(text.split())


def text_key(example) -> tuple[str, str] | None:
    """What makes two rows the same input: the text and its second text (a pair's, an embedding
    row's positive), up to spacing (`same_text`); None for examples without a text (tags, QA, choices)."""
    text, second = getattr(example, "text", None), getattr(example, "text_pair", getattr(example, "positive", None))
    return (same_text(text), same_text(second or "")) if isinstance(text, str) else None


def input_kind(examples: Sequence) -> str:
    """What a message counts the inputs as: "pairs" when they hold a second text (`text_key`),
    else "texts" (two texts counted as one were a pair task's count, e.g. "2 of 2 texts")."""
    return "pairs" if any((text_key(example) or ("", ""))[1] for example in examples) else "texts"


def count_shared(train: Sequence, examples: Sequence) -> int:
    """How many of `examples` are also inputs of `train` (`text_key`)."""
    seen = {text_key(example) for example in train} - {None}
    return sum(text_key(example) in seen for example in examples)


def _refuse_empty_texts(path: str, read: list, columns: tuple) -> None:
    """An empty text (or second text) in a labelled file, named by its line there: the model would
    learn its label from nothing."""
    for line, text, pair, _ in read:
        for column, value in zip(columns, (text, pair)):
            if column and not (isinstance(value, str) and value.strip()):
                raise DataError(f"{path}: line {line} has an empty {column!r}; fill it in or remove the row")


PAIR_COLUMN = "text_pair"  # a pair's second text, by its usual name (transformers, --task similarity)


def unread_text_column(first: dict, columns: tuple) -> str | None:
    """The column of a record, other than `columns` (text, pair, label), that is perhaps the second
    text of a pair: one named PAIR_COLUMN (its first value may be two words: "honest reporting"), else
    the first holding a sentence (three words or more); None when there is none."""
    if PAIR_COLUMN in first and PAIR_COLUMN not in columns:
        return PAIR_COLUMN
    return next((name for name, value in first.items()
                 if name not in columns and isinstance(value, str) and len(value.split()) >= 3), None)


def names_a_pair_column(path: str) -> bool:
    """Whether the first record of a CSV, TSV, JSONL or table file has a column named PAIR_COLUMN."""
    path = str(path)
    suffix = Path(path).suffix.lower()
    if is_class_folder(path) or not os.path.exists(path) and not is_table(path):
        return False
    if suffix in (".csv", ".tsv"):
        rows = (row for _, row, _ in iter_csv_rows(path, "\t" if suffix == ".tsv" else ","))
    elif suffix == ".jsonl" or is_table(path):
        rows = (record for _, record in iter_records(path))
    else:
        return False
    return PAIR_COLUMN in (next(rows, None) or {})


def _warn_unread_text(path: str, first: dict, columns: tuple) -> None:
    """A labelled set (read without a pair column) with another column of sentences beside its text,
    judged by its first record: perhaps the second text of a pair, which is read only when named
    (else the model learns from the first text alone)."""
    if columns[1] or columns[2] is None:
        return
    unread = unread_text_column(first, columns)
    if unread:
        warnings.warn(f"{path}: column {unread!r} holds text but is not read; if it is the second text of "
                      f"a pair, pass --set data.pair_column={unread}", stacklevel=3)


TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")


def read_texts(path: str, text_column: str = "text") -> list[str]:
    """Texts to embed: a table's text column, one text per row; else every line of `path`, blank
    ones too (`embed` gives each line its row), refused when all are blank. A CSV read as lines
    would give its header and whole rows. (The commands that read these name the column with
    --text-column, not --set.)"""
    return [text for _, text in read_numbered_texts(path, text_column)]


def read_numbered_texts(path: str, text_column: str = "text") -> list[tuple[int | None, str]]:
    """`read_texts` with the line each text starts on (a table's row may span lines; None where
    the format has no lines, Parquet or a folder), for messages that name a text by where it is."""
    return [(example.line, example.text) for example in read_text_inputs(path, text_column)]


def read_text_inputs(path: str, text_column: str = "text") -> list[TextExample]:
    """The texts of `read_texts` as unlabelled examples, each with its `line` (or its `file` in a
    folder of .txt files, class_folders.py)."""
    if Path(path).suffix.lower() in TABLE_SUFFIXES or is_table(path) or is_class_folder(path):
        try:
            examples = read_text_dataset(path, text_column, None, None)
        except MissingColumnError as err:
            raise DataError(f"{err.what}; name the column that holds the texts with --text-column NAME") from None
    else:
        examples = [TextExample(text=text, line=line) for line, text in text_file_lines(path)]
    if not any(example.text.strip() for example in examples):
        raise no_input_error(path, len(examples))
    return examples


def no_input_error(path: str, blank: int) -> DataError:
    """The one refusal, worded once for embed, nearest and predict, of an input with nothing to
    read (empty, a header only, blank lines or cells only): an empty output would pass for a result."""
    header = Path(path).suffix.lower() in (".csv", ".tsv")
    detail = f"{blank} blank" if blank else ("a header only" if header else "empty")
    return DataError(f"{path} holds no non-blank input ({detail}); put one input per line or row")


class MissingColumnError(DataError):
    """A table without a column the reader needs: `what` is missing, `fix` how to name it."""

    def __init__(self, what: str, fix: str):
        super().__init__(f"{what}; {fix}")
        self.what, self.fix = what, fix


def _wanted(columns: tuple) -> list[str]:
    """The columns a record must have: the text, then the pair and the label when named."""
    return [columns[0]] + [c for c in columns[1:] if c]


def _column_fix(missing: str, columns: tuple, present: list[str]) -> str:
    """What to do about a missing column: the option that names it, or a header line when the
    first row of a CSV/TSV file reads like data (a header of sentences)."""
    if any(len(str(name).split()) > 3 for name in present):
        return "the first line looks like a data row: add a header line naming the columns (e.g. text,label)"
    if missing == columns[2] and "positive" in present:  # a search pair file given to a labelled task
        return "a text and its positive (no label) is the embedding format: --task embedding"
    option = ("data.text_column", "data.pair_column", "data.label_column")[columns.index(missing)]
    pair = " (and a pair's second text: data.pair_column=NAME)" if missing == columns[0] and not columns[1] else ""
    return f"name the column that holds it with --set {option}=NAME{pair}"


def _csv_records(path: str, delimiter: str, columns: tuple, multilabel_sep: str):
    """(line, text, pair, raw label) of each CSV/TSV row; "a|b" labels are lists."""
    text_column, pair_column, label_column = columns
    wanted = _wanted(columns)
    # unlabelled (predict, embed): an empty line is an input of its own, an empty text (one row per line)
    for index, (line, row, fieldnames) in enumerate(iter_csv_rows(path, delimiter, blanks=label_column is None)):
        if row is None:
            yield line, "", "" if pair_column else None, None
            continue
        missing = [name for name in wanted if name not in row]
        if missing:
            raise MissingColumnError(f"{path}: header has no column {missing[0]!r} (columns: {', '.join(fieldnames)})",
                                     _column_fix(missing[0], columns, fieldnames))
        if index == 0:
            _warn_unread_text(path, row, columns)
        pair = row[pair_column] if pair_column else None
        cell = row[label_column].strip() if label_column is not None else ""
        if cell == "":
            label = None
        elif multilabel_sep and multilabel_sep in cell:
            label = [part.strip() for part in cell.split(multilabel_sep) if part.strip()]
        else:
            label = cell
        yield line, row[text_column], pair, label


def _folder_examples(path: str, columns: tuple, label_type: str) -> list[TextExample]:
    """The texts of a folder (class_folders.py): labelled by their class folders, or unlabelled."""
    if columns[1]:
        raise DataError(f"{path} is a directory of texts, one per file; a pair of texts needs a .csv, .tsv or .jsonl "
                        f"file with both columns ({columns[0]!r} and {columns[1]!r})")
    if columns[2] is None:
        return [TextExample(text=item.text, file=item.path) for item in read_text_files(path)]
    items = read_class_folder(path)
    label_type = "category" if label_type == "auto" else label_type  # folder names are class names
    labels = _finish_labels([item.label for item in items], [f"file {item.path}" for item in items], path, label_type)
    return [TextExample(text=item.text, label=label, file=item.path) for item, label in zip(items, labels)]


def _jsonl_records(path: str, columns: tuple):
    """(line, text, pair, raw label) of each JSONL record (or table row), its types checked."""
    text_column, pair_column, label_column = columns
    wanted = _wanted(columns)
    # unlabelled (predict, embed): a blank line is an input of its own, an empty text (one row per line)
    for index, (line, record) in enumerate(iter_records(path, blanks=label_column is None)):
        if record is None:
            yield line, "", "" if pair_column else None, None
            continue
        missing = [name for name in wanted if name not in record]
        if missing:
            raise MissingColumnError(f"{path}: line {line} has no key {missing[0]!r} (keys: {', '.join(record)})",
                                     _column_fix(missing[0], columns, list(record)))
        if index == 0:
            _warn_unread_text(path, record, columns)
        for name in wanted[:2] if pair_column else wanted[:1]:
            if not isinstance(record[name], str):
                raise DataError(f"{path}: line {line} field {name!r} must be a string")
        value = record[label_column] if label_column else None
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise DataError(f"{path}: line {line} label list must hold strings, got {value!r}")
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (str, int, float))):
            raise DataError(
                f"{path}: line {line} label {value!r} must be a string, a number or a list of strings"
            )
        yield line, record[text_column], record[pair_column] if pair_column else None, value


def infer_task_kind(examples: Sequence[TextExample]) -> str:
    """"classification" (str labels), "multilabel" (list labels) or "regression" (float labels)."""
    labels = [example.label for example in examples]
    if not labels:
        raise DataError("cannot infer the task kind of an empty dataset")
    if all(isinstance(label, list) for label in labels):
        return "multilabel"
    if all(isinstance(label, float) for label in labels):
        return "regression"
    if all(isinstance(label, str) for label in labels):
        return "classification"
    kinds = sorted({type(label).__name__ for label in labels})
    raise DataError(
        f"labels are of mixed kinds ({', '.join(kinds)}); every example needs a class name, a list "
        "of class names, or a number"
    )


def build_label_map(labels: Iterable) -> tuple[dict[str, int], dict[int, str]]:
    """Sorted, deterministic label vocabulary: (label2id, id2label).

    `labels` may hold class names or lists of class names (multi-label); lists are flattened.
    """
    names: set[str] = set()
    for label in labels:
        if isinstance(label, list):
            names.update(label)
        elif label is not None:
            names.add(label)
    ordered = sorted(names)
    label2id = {name: index for index, name in enumerate(ordered)}
    id2label = {index: name for index, name in enumerate(ordered)}
    return label2id, id2label


def check_labels_known(labels: Iterable, label2id: dict, split_name: str, source: str | None = None) -> None:
    """Raise DataError listing labels of split `split_name` (read from `source`) that are not in
    `label2id`, with what to do about them."""
    unseen: set[str] = set()
    seen = 0
    for label in labels:
        for name in label if isinstance(label, list) else [label]:
            if name is not None and name not in label2id:
                unseen.add(name)
            seen += name is not None and name in label2id
    if unseen:
        shown = ", ".join(repr(name) for name in sorted(unseen)[:20])
        more = f" and {len(unseen) - 20} more" if len(unseen) > 20 else ""
        where = f" ({source})" if source else ""
        raise DataError(f"{split_name} split{where} has {len(unseen)} label(s) never seen in training: {shown}{more}; "
                        + _unseen_fix(unseen, label2id, seen))


def _unseen_fix(unseen: set, label2id: dict, seen: int) -> str:
    """What to do about labels missing from training. The same number written two ways ('0' and
    '0.0', as pandas writes an int column holding a gap) is one class; a split none of whose labels
    is a training label is labelled another way; numbers that rarely repeat between splits are a
    forgotten --task regression. Otherwise training lacks the classes."""
    known = ", ".join(repr(name) for name in sorted(label2id)[:5]) + (", ..." if len(label2id) > 5 else "")
    formed = _other_unicode_form(unseen, label2id)
    if formed:
        shown = ", ".join(f"{ascii(name)} is training label {ascii(known_as)}" for name, known_as in formed[:5])
        note = (f"{len(formed)} of them: a training label on screen, but written with different Unicode characters "
                f"(composed, NFC, vs decomposed, NFD: {shown}): save both files with one form (NFC)")
        rest = unseen - {name for name, _ in formed}
        return note if not rest else f"{note}; for the others: " + _unseen_fix(rest, label2id, seen + len(formed))
    if _tag_forms_differ(unseen, label2id):
        example = sorted(unseen)[0]
        return (f"the files write tags two ways (training has {known}, this split {example!r}): a tag with a B-/I- "
                "prefix in one and without in the other; write both files in IOB2 (B-TYPE, I-TYPE, O) or both plain")
    as_numbers = {parse_number(name) for name in label2id} - {None}
    if all(parse_number(name) in as_numbers for name in unseen):
        return (f"they are training labels written another way (training has {known}): write the labels "
                "alike in both files")
    if not seen:
        return (f"none of its labels is a training label (training has {known}): the two files name the "
                "classes differently; use the same names in both")
    if all(parse_number(name) is not None for name in [*unseen, *label2id]):
        return "the labels are numbers: for a numeric target use --task regression"
    return "add training examples for them or remove them from this split"


TAG_PREFIXES = ("B-", "I-", "E-", "S-")  # a CoNLL tag's position in its entity: IOB2, IOB1 and IOBES


def has_tag_prefix(tag) -> bool:
    """'B-PER' and the like (a prefix, then a type); 'O' and plain tags ('PER', 'NN') have none."""
    return isinstance(tag, str) and tag[:2] in TAG_PREFIXES and len(tag) > 2


def _tag_forms_differ(unseen: set, label2id: dict) -> bool:
    """Every unseen label is a training label with a tag prefix added or dropped, and the split writes them
    the other way than training does throughout: IOB2 tags ('B-XREF') beside a training file of plain ones
    ('XREF'), or the reverse. (An unseen 'I-LOC' beside a training 'B-LOC' is a missing class, not this.)"""
    def bare(name):
        return name[2:] if has_tag_prefix(name) else name

    known = {bare(name) for name in label2id} - {"O"}
    ours = {has_tag_prefix(name) for name in unseen}
    theirs = {has_tag_prefix(name) for name in label2id if name != "O"}
    return len(ours) == 1 and len(theirs) == 1 and ours != theirs and all(bare(name) in known for name in unseen)


def _other_unicode_form(unseen: set, label2id: dict) -> list[tuple[str, str]]:
    """(label, training label) for each unseen label equal to a training label after Unicode NFC
    normalisation: the same text on screen, other code points (an NFD 'O' + U+0308 for an NFC 'Ö')."""
    by_form = {unicodedata.normalize("NFC", name): name for name in label2id if isinstance(name, str)}
    return [(name, by_form[unicodedata.normalize("NFC", name)]) for name in sorted(unseen)
            if isinstance(name, str) and unicodedata.normalize("NFC", name) in by_form]


# ----------------------------------------------------------------------------------------
# CoNLL token-tag files
# ----------------------------------------------------------------------------------------


def _odd_space_hint(line: str, whose: str) -> str:
    """' (its 2nd column follows the no-break space U+00A0 inside 'São\\xa0Paulo'; ...)' when a
    whitespace character other than a space or tab split a word into columns, else ''. Such a
    character (a no-break space from a word processor, an ideographic space) is invisible in an
    editor, where the line shows one column fewer than Python's split() finds."""
    at = next((i for i, ch in enumerate(line) if ch.isspace() and ch not in " \t\r\n"), None)
    if at is None:
        return ""
    start = max(line.rfind(" ", 0, at), line.rfind("\t", 0, at)) + 1
    ends = [i for i in (line.find(" ", at), line.find("\t", at)) if i >= 0]
    word = line[start:min(ends, default=len(line))].strip()
    column = len(line[:at].split()) + 1
    char = line[at]
    name = unicodedata.name(char, "whitespace character").lower()
    ordinal = {1: "st", 2: "nd", 3: "rd"}.get(column if column < 20 else column % 10, "th")
    return (f" ({whose} {column}{ordinal} column follows the {name} U+{ord(char):04X} inside {word!r}; CoNLL "
            "columns are separated by spaces or tabs, so write the word without it, or as two token lines)")


def _comment_hint(path: str, first_number: int, first: str, number: int, line: str) -> str:
    """The hint for a CoNLL-U file's '# sent_id = 1' comment lines, which read as token lines of
    another column count (walk AC); '' for any other line."""
    comment = first_number if first.lstrip().startswith("#") else number if line.lstrip().startswith("#") else None
    if comment is None:
        return ""
    return (f" (line {comment} begins with '#', a CoNLL-U comment line, not a word: remove such lines, e.g. "
            f"grep -v '^#' {path} > words.conll, and name the tag column with --set data.tag_col=N)")


def read_conll(path: str | os.PathLike, token_col: int = 0, tag_col: int = -1,
               labelled: bool = True) -> list[TokenExample]:
    """Read a CoNLL file: one token per line with whitespace-separated columns, a blank line
    between sentences, `-DOCSTART-` lines skipped. Every token line must have the same number
    of columns as the first one. `labelled=False` (words to tag) also takes one column, the words
    alone; their tags read "O"."""
    path = str(path)
    suffix = Path(path).suffix.lower()
    if suffix in (".csv", ".jsonl", ".json", ".parquet"):  # a .tsv may be CoNLL (token TAB tag)
        raise DataError(f"{path} is a {suffix} table, but token classification reads CoNLL: one token per line "
                        "with its tag after it, a blank line between sentences (a table of labelled texts is for "
                        "another task: check --task, or the model)")
    sentences: list[TokenExample] = []
    tokens: list[str] = []
    tags: list[str] = []
    n_columns = None
    first_line = None  # of the sentence being read
    for line_number, line in iter_text_lines(path):
        fields = line.split()
        if not fields:
            if tokens:
                sentences.append(TokenExample(tokens, tags, first_line))
                tokens, tags = [], []
            continue
        if fields[0] == "-DOCSTART-":
            continue
        if n_columns is None:
            n_columns, first_token_line, first_number = len(fields), line, line_number
            needed = max(token_col if token_col >= 0 else -token_col - 1,
                         tag_col if tag_col >= 0 else -tag_col - 1) + 1
            if labelled and (n_columns < needed or n_columns < 2):
                raise DataError(
                    f"{path}: line {line_number} has {n_columns} column(s) but token_col={token_col} "
                    f"and tag_col={tag_col} need at least {max(needed, 2)}"
                )
        elif len(fields) != n_columns:
            raise DataError(
                f"{path}: line {line_number} has {len(fields)} columns, expected {n_columns} "
                "like the first token line; separate columns by whitespace and sentences by a blank line"
                + (_odd_space_hint(line, "its") or _odd_space_hint(first_token_line, "the first token line's")
                   or _comment_hint(path, first_number, first_token_line, line_number, line))
            )
        if not tokens:
            first_line = line_number
        tokens.append(fields[token_col])
        tags.append(fields[tag_col] if n_columns > 1 else "O")
    if tokens:
        sentences.append(TokenExample(tokens, tags, first_line))
    return sentences


def write_conll(path: str | os.PathLike, examples: Iterable[TokenExample]) -> None:
    """Write `token tag` lines with a blank line after each sentence (readable by read_conll)."""
    path = str(path)
    with open(path, "w", encoding="utf-8") as handle:
        for index, example in enumerate(examples):
            for token, tag in zip(example.tokens, example.tags):
                if not token or not tag or any(ch.isspace() for ch in token + tag):
                    raise DataError(
                        f"sentence {index}: token {token!r} / tag {tag!r} is empty or contains "
                        "whitespace, which CoNLL cannot store; split or replace it"
                    )
                handle.write(f"{token} {tag}\n")
            handle.write("\n")


# ----------------------------------------------------------------------------------------
# SQuAD JSON (v1.1 and v2.0)
# ----------------------------------------------------------------------------------------


@dataclass
class SquadReadStats:
    """What read_squad had to repair or drop."""

    questions: int = 0          # questions kept
    answers: int = 0            # answers kept
    fixed_starts: int = 0       # answer_start moved to the nearest occurrence of the text
    dropped_answers: int = 0    # answer text not found in its context
    dropped_questions: int = 0  # answerable questions left with no valid answer


def _locate_answer(context: str, text: str, start: int) -> int | None:
    """The start of `text` in `context`: `start` when it matches there, else the occurrence
    nearest to `start`, else None."""
    if 0 <= start and context[start:start + len(text)] == text:
        return start
    best = None
    position = context.find(text)
    while position != -1:
        if best is None or abs(position - start) < abs(best - start):
            best = position
        position = context.find(text, position + 1)
    return best


def read_squad(path: str | os.PathLike, return_stats: bool = False, keep_all_questions: bool = False):
    """Read SQuAD v1.1 or v2.0 JSON into QAExamples.

    Each answer is checked: `context[answer_start:answer_start+len(text)] == text`. When it
    does not hold but the text occurs elsewhere in the context, answer_start is moved to the
    nearest occurrence; when the text does not occur at all, the answer is dropped, and an
    answerable question left with no answer is dropped. Nothing crashes on such data: the
    counts are reported with `warnings.warn` and returned as `SquadReadStats` when
    `return_stats=True` (then the result is `(examples, stats)`). With `keep_all_questions`
    (prediction, where gold answers are not used) no question is dropped.
    """
    path = str(path)
    document = loads_json(read_text(path), path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise DataError(f'{path}: expected a SQuAD object {{"version": ..., "data": [...]}}')

    stats = SquadReadStats()
    examples: list[QAExample] = []
    seen: dict[str, str] = {}  # id -> where: the scores and predictions are keyed by it
    for article_index, article in enumerate(document["data"]):
        for paragraph_index, paragraph in enumerate(_field(article, "paragraphs", list, path, f"data[{article_index}]")):
            where = f"data[{article_index}].paragraphs[{paragraph_index}]"
            context = _field(paragraph, "context", str, path, where)
            for qa_index, qa in enumerate(_field(paragraph, "qas", list, path, where)):
                qa_where = f"{where}.qas[{qa_index}]"
                qid = str(_field(qa, "id", (str, int), path, qa_where))
                if qid in seen:  # one of the two would be scored, silently
                    raise DataError(f"{path}: {qa_where} has the id {qid!r} of {seen[qid]}; ids must be unique "
                                    "(answers are scored by id): renumber one")
                seen[qid] = qa_where
                question = _field(qa, "question", str, path, f"{qa_where} (id {qid})")
                impossible = bool(qa.get("is_impossible", False))
                answers = []
                for answer in qa.get("answers", []) if not impossible else []:
                    text = _field(answer, "text", str, path, f"{qa_where} (id {qid})")
                    start = _field(answer, "answer_start", int, path, f"{qa_where} (id {qid})")
                    found = _locate_answer(context, text, start) if text else None
                    if found is None:
                        stats.dropped_answers += 1
                        continue
                    stats.fixed_starts += found != start
                    answers.append({"text": text, "answer_start": found})
                if not impossible and not answers and not keep_all_questions:
                    stats.dropped_questions += 1
                    continue
                stats.questions += 1
                stats.answers += len(answers)
                examples.append(QAExample(qid, question, context, answers, impossible))
    if stats.fixed_starts or stats.dropped_answers or stats.dropped_questions:
        warnings.warn(
            f"{path}: moved {stats.fixed_starts} answer_start(s) to where the answer text occurs, "
            f"dropped {stats.dropped_answers} answer(s) not found in their context and "
            f"{stats.dropped_questions} question(s) left without an answer",
            stacklevel=2,
        )
    return (examples, stats) if return_stats else examples


def _field(record, key: str, kind, path: str, where: str):
    """record[key], checked to be of type `kind`, else a DataError naming the record."""
    if not isinstance(record, dict) or key not in record:
        raise DataError(f"{path}: {where} has no {key!r} field; is this a SQuAD file?")
    value = record[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{path}: {where} field {key!r} has the wrong type ({type(value).__name__})")
    return value


def write_squad(path: str | os.PathLike, examples: Iterable[QAExample], version: str = "v2.0") -> None:
    """Write QAExamples as SQuAD JSON; consecutive examples sharing a context form one paragraph."""
    paragraphs: list[dict] = []
    for example in examples:
        if not paragraphs or paragraphs[-1]["context"] != example.context:
            paragraphs.append({"context": example.context, "qas": []})
        qa = {"id": example.id, "question": example.question, "answers": list(example.answers)}
        if version.startswith("v2") or example.is_impossible:
            qa["is_impossible"] = example.is_impossible
        paragraphs[-1]["qas"].append(qa)
    document = {"version": version, "data": [{"title": "bertkit", "paragraphs": paragraphs}]}
    with open(str(path), "w", encoding="utf-8") as handle:
        json.dump(document, handle, ensure_ascii=False)


# ---------------------------------------------------------------------------- multiple choice
@dataclass
class ChoiceExample:
    """A context, its candidate continuations/answers, and the index of the right one."""

    id: str | None
    context: str
    choices: list[str]
    label: int | None = None
    line: int | None = field(default=None, compare=False)  # its line in a JSON-lines file (1-based)


def _choice_fields(labelled: bool) -> str:
    return '"context" (a string), "choices" (a list of strings)' + (' and "label" (the index of the right '
                                                                     'choice)' if labelled else "")


def _label_as_text(label, choices: list[str]) -> str:
    """Where a multiple-choice label is a choice's own text (or its index as a string), the index to give instead."""
    if isinstance(label, str) and label in choices:
        return f", the text of choice {choices.index(label)}: write the index, {choices.index(label)}, instead"
    if isinstance(label, str) and label.strip().isdigit() and int(label) < len(choices):
        return f": write it as a number, {int(label)}, without quotes"
    return ""


def read_choices(path: str, labelled: bool = True) -> list[ChoiceExample]:
    """ChoiceExamples from a JSON-lines file (or Parquet / a saved dataset with the same fields:
    tables.py); refuses a line with a missing or bad field."""
    if Path(path).suffix.lower() != ".jsonl" and not is_table(path):  # a CSV read as JSON: "not valid JSON"
        raise DataError(f"{path}: multiple choice reads JSON lines (.jsonl), one object per line with "
                        f"{_choice_fields(labelled)}")
    examples: list[ChoiceExample] = []
    first = None  # the first record: the number of choices every line must have
    for line, record in iter_records(path, blanks=not labelled):
        if record is None:  # predict: a blank line gets its (blank) row
            examples.append(ChoiceExample(None, "", [], None, line))
            continue
        context, choices, label = record.get("context"), record.get("choices"), record.get("label")
        if "context" not in record or "choices" not in record:  # other field names: there is no option to map them
            raise DataError(f"{path}: line {line} has the fields {', '.join(record) or 'none'}; multiple choice "
                            f"reads {_choice_fields(labelled)}: rename the fields to these")
        if not isinstance(context, str):
            raise DataError(f"{path}: line {line} needs a string field 'context'")
        if not (isinstance(choices, list) and len(choices) >= 2 and all(isinstance(c, str) for c in choices)):
            raise DataError(f"{path}: line {line} needs 'choices': a list of at least 2 strings")
        first = first or ChoiceExample(None, context, choices, None, line)
        if len(choices) != len(first.choices):
            raise DataError(f"{path}: line {line} has {len(choices)} choices, line {first.line} has "
                            f"{len(first.choices)}; every example needs the same number")
        if labelled and (not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(choices)):
            raise DataError(f"{path}: line {line} needs 'label': the integer index (0..{len(choices) - 1}) of the "
                            f"right choice, got {label!r}{_label_as_text(label, choices)}")
        examples.append(ChoiceExample(str(record.get("id", len(examples))), context, choices,
                                      label if labelled else None, line))
    if first is None:
        raise DataError(f"{path}: no records; put one JSON object per line")
    return examples
