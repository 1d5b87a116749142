"""One labelled file into train, dev and test files (`bertkit split`), in the file's own format
(a folder of class folders, CLASS/*.txt, into CSV files of "text" and "label"; a Parquet file or a
`datasets` directory into JSONL files, a record per row as tables.py reads it).

Read with bertkit's readers (`io.iter_csv_rows`, `io.iter_jsonl`: a byte-order mark, a ';' or tab
CSV, quoted fields over several lines, blank lines, bad bytes, all as `finetune` reads them), split
by `data.splits.assign_splits` and written back: a CSV or TSV through the csv module in the
delimiter it was read with (its header and its byte-order mark kept), a JSONL record as the line it
was. Each row goes to one split, in the file's order within it; rows whose group column (the text,
up to spacing and line ends) is the same go to one split, so no dev or test text is a training text.
A multiple-choice JSONL file (a context and a list of choices per row) is grouped by its context.

The label column decides the stratification: one class per row (names, or whole numbers with few
values, such as 0/1 or star ratings) is stratified; other numbers (a regression target), label
sets (`a|b` in a CSV cell, a JSON list) or no label column give a plain seeded random split.

Every refusal comes before the first write, and the files are written together: all of them, or
(a failed write) none.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import json
import os
import shlex
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bertkit.data.splits import HELD_OUT, SPLITS, assign_splits, rows_needed
from bertkit.errors import ConfigError, DataError
from bertkit.io import (atomic_open, check_regular_file, csv_delimiter, is_json_array, iter_csv_rows, iter_jsonl,
                        iter_text_lines, json_lines_fix, loads_json, read_text, same_path)
from bertkit.tasks.class_folders import is_class_folder, one_class_error, read_class_folder
from bertkit.tasks.formats import (PAIR_COLUMN, no_input_error, parse_number, read_conll, read_squad, same_text,
                                   spreadsheet_fix, unread_text_column)
from bertkit.tasks.tables import is_table, iter_records

__all__ = ["Table", "read_table", "split_file", "MAX_NUMBER_CLASSES"]

TEXT_KINDS = ("classes", "sets", "numbers")  # tables of texts, which a second text column can make pairs

SUFFIXES = (".csv", ".tsv", ".jsonl", ".conll", ".json")
CONLL = ".conll"  # a sentence (its token lines) is a row; its words, joined, its text
SQUAD = ".json"  # a question is a row ("text", "context"); questions about one passage stay together
# A multiple-choice row ({"context", "choices": [...], "label"}) has no "text": it is grouped by its context and
# stratified by its answer's position. Walk AD: split refused it for want of 'text', and with --group-column
# context printed `finetune --task classification ... --set data.pair_column=context` as the next step.
CHOICES_KIND = "choices"
# Labels that are all whole numbers with at most this many values are classes (0/1, 1-5 stars) and
# are stratified; more values, or fractions, are a regression target.
MAX_NUMBER_CLASSES = 20
SHOWN_CLASSES = 10  # a split's line names up to 10 classes; more: the 6 largest and the 3 smallest
FEW_ROWS = 5  # fewer dev or test rows of a class than this: its per-class score there is noise
NO_LABEL = "(no label)"  # how a row without a label is counted in a classified file


@dataclass
class Table:
    """A data file's rows as read: `rows[i]` is a record (a CSV row's dict, a JSONL object) that
    starts on line `lines[i]`; `raw[i]` a JSONL record's line as it was."""

    path: str
    suffix: str
    rows: list[dict] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    raw: list = field(default_factory=list)  # JSONL/CoNLL: the row's text; SQuAD: (article, paragraph, question)
    tags: list = field(default_factory=list)  # CoNLL: each sentence's tags
    document: dict = field(default_factory=dict)  # SQuAD: the whole file
    header: list[str] = field(default_factory=list)  # CSV/TSV
    delimiter: str = ","
    bom: bool = False

    def columns(self, index: int = 0) -> list[str]:
        return self.header or list(self.rows[index])


def _check_format(path: str) -> str:
    """The file's suffix, when split reads it (".csv" for a folder of class folders: written as
    CSV files); else a one-line refusal saying what to give."""
    if is_class_folder(path):
        return ".csv"
    if is_table(path):  # Parquet, a `datasets` directory: written as JSON lines, which finetune reads
        return ".jsonl"
    check_regular_file(path)  # missing (with the nearest name), a directory, a FIFO
    suffix = Path(path).suffix.lower()
    if suffix == SQUAD and is_json_array(path):
        raise DataError(f"{path} is one JSON array; split reads .csv, .tsv or JSON lines (.jsonl), or a SQuAD .json "
                        f"object: {json_lines_fix(path)}")
    if suffix in SUFFIXES:
        return suffix
    if suffix == ".txt":
        raise DataError(f"{path} is a text file: one text per line, with no labels to split by; split reads a .csv, "
                        ".tsv, .jsonl or .parquet with a text and a label column, a .conll file of tagged sentences (a "
                        "CoNLL file named .txt: rename it .conll), a SQuAD .json or a folder of class folders")
    raise DataError(f"{path}: split reads .csv, .tsv, .jsonl, .parquet, .conll or SQuAD .json files, a folder of class "
                    "folders or a `datasets` directory, not "
                    f"{suffix or 'a file without an extension'}" + (spreadsheet_fix(suffix) or "; save the data as one of these"))


def read_table(path: str) -> Table:
    """Every record of a .csv, .tsv, .jsonl, .conll or SQuAD .json file, a folder of class folders, a
    Parquet file or a `datasets` directory, through bertkit's readers; an empty file or one with a
    header only is refused."""
    path = os.fspath(path)
    table = Table(path, _check_format(path))
    if is_class_folder(path):  # each file a row of a CSV: its text and its folder's name
        items = read_class_folder(path)
        table.header = ["text", "label"]
        table.rows = [{"text": item.text, "label": item.label} for item in items]
        table.lines = [item.number for item in items]
        if len({item.label for item in items}) == 1:
            raise one_class_error(path, items[0].label)
    elif table.suffix == CONLL:
        read_conll_sentences(table)
    elif table.suffix == SQUAD:
        read_squad_questions(table)
    elif is_table(path):
        for number, record in iter_records(path):
            table.rows.append(record)
            table.lines.append(number)
            table.raw.append(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    elif table.suffix == ".jsonl":
        lines = dict(iter_text_lines(path, keepends=True))
        for line, record in iter_jsonl(path):
            table.rows.append(record)
            table.lines.append(line)
            table.raw.append(lines[line] if lines[line].endswith("\n") else lines[line] + "\n")
    else:
        first = next(iter(iter_text_lines(path, keepends=True)), (1, ""))[1]
        table.delimiter = csv_delimiter(first, "\t" if table.suffix == ".tsv" else ",")
        with open(path, "rb") as f:
            table.bom = f.read(3) == codecs.BOM_UTF8  # kept: a spreadsheet reads UTF-8 by it
        for line, row, fieldnames in iter_csv_rows(path, "\t" if table.suffix == ".tsv" else ","):
            table.rows.append(row)
            table.lines.append(line)
            table.header = fieldnames
    if not table.rows:
        raise no_input_error(path, 0)
    return table


def read_conll_sentences(table: Table) -> None:
    """A CoNLL file's sentences as rows: each its token lines as they were (`raw`) and its words
    as its "text". read_conll checks the file first (columns, encoding: its refusals); -DOCSTART-
    lines are left out, since sentences of one document go to different splits."""
    sentences = read_conll(table.path)
    count = len(sentences)
    table.tags = [sentence.tags for sentence in sentences]
    block: list[str] = []
    for line, text in [*iter_text_lines(table.path, keepends=True), (0, "")]:
        fields = text.split()
        if fields and fields[0] != "-DOCSTART-":
            if not block:
                table.lines.append(line)
            block.append(text if text.endswith("\n") else text + "\n")
        elif not fields and block:
            table.raw.append("".join(block))
            table.rows.append({"text": " ".join(token.split()[0] for token in block)})
            block = []
    assert len(table.rows) == count, (len(table.rows), count)  # the sentences finetune reads


def read_squad_questions(table: Table) -> None:
    """A SQuAD file's questions as rows: each its question as "text" and its passage as "context",
    and where it is (`raw`). read_squad checks the file first (fields, ids: its refusals)."""
    read_squad(table.path, keep_all_questions=True)
    table.document = loads_json(read_text(table.path), table.path)
    for a, article in enumerate(table.document["data"]):
        for p, paragraph in enumerate(article["paragraphs"]):
            for q, qa in enumerate(paragraph["qas"]):
                table.rows.append({"text": qa["question"], "context": paragraph["context"]})
                table.lines.append(None)
                table.raw.append((a, p, q))


def _squad_part(document: dict, kept: set[tuple]) -> dict:
    """`document` with only the questions at `kept` (article, paragraph, question); a passage or
    article left without a question is left out, every other field kept as it was."""
    data = []
    for a, article in enumerate(document["data"]):
        paragraphs = []
        for p, paragraph in enumerate(article["paragraphs"]):
            qas = [qa for q, qa in enumerate(paragraph["qas"]) if (a, p, q) in kept]
            if qas:
                paragraphs.append({**paragraph, "qas": qas})
        if paragraphs:
            data.append({**article, "paragraphs": paragraphs})
    return {**document, "data": data}


def is_choice_table(table: Table) -> bool:
    """Whether the rows are multiple-choice examples: a context and a list of choices (bertkit/tasks/formats.py
    `read_choices`)."""
    return table.suffix == ".jsonl" and all("context" in row and isinstance(row.get("choices"), list)
                                            for row in table.rows)


def _cells(table: Table, column: str, option: str, required: bool) -> list | None:
    """Each row's value in `column`; a column the file lacks is refused when `required` (the
    option named it, or nothing can stand in for it), else None."""
    for index, row in enumerate(table.rows):
        if column not in row:
            if not required:
                return None
            where = "header has no column" if table.header else f"line {table.lines[index]} has no key"
            raise DataError(f"{table.path}: {where} {column!r} (columns: {', '.join(table.columns(index))}); "
                            f"name the column with {option} NAME")
    return [row[column] for row in table.rows]


def group_keys(table: Table, column: str, named: bool) -> list:
    """What keeps rows together: their `column` value up to spacing and line ends (`same_text`; a JSON
    value that is not a string: its JSON text)."""
    option = "--group-column" if named else "--group-column (rows sharing its value stay in one split)"
    return [same_text(value) if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
            for value in _cells(table, column, option, required=True)]


def _class_name(value) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 1.0 in JSON is the class "1", as finetune names it
    return json.dumps(value)


def label_kind(table: Table, column: str, named: bool) -> tuple[str, list | None]:
    """("classes", one class name per row), or ("numbers" | "sets" | "none", None): what the label
    column holds, and so whether the split is stratified."""
    cells = _cells(table, column, "--label-column", required=named)
    if cells is None:
        return "none", None
    if any(isinstance(value, list) for value in cells) or (
            table.suffix != ".jsonl" and any("|" in value for value in cells if isinstance(value, str))):
        return "sets", None
    names = [_class_name(value) for value in cells]
    given = [name for name in names if name is not None]
    if not given:
        return "none", None
    numbers = [parse_number(name) for name in given]
    if all(number is not None for number in numbers) and not (
            all(number.is_integer() for number in numbers) and len(set(numbers)) <= MAX_NUMBER_CLASSES):
        return "numbers", None
    return "classes", [NO_LABEL if name is None else name for name in names]


def output_paths(out: str, suffix: str, fractions: dict[str, float]) -> dict[str, str]:
    """The file of each split that gets rows: OUT/train.csv, OUT/dev.csv, OUT/test.csv (a fraction of 0:
    none)."""
    return {name: os.path.join(out, name + suffix) for name in SPLITS
            if name == "train" or fractions[name] > 0}


def check_outputs(paths: dict[str, str], out: str, source: str, overwrite: bool) -> None:
    """Refuse an --out that is a file or inside a folder given as --input, an output that is the input
    (even with --overwrite), and outputs already there without --overwrite (all of them named)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"--out {out} is a file; give the folder to write train, dev and test files into")
    inside = os.path.realpath(out) + os.sep
    if os.path.isdir(source) and inside.startswith(os.path.realpath(source) + os.sep):
        raise ConfigError(f"--out {out} is inside --input {source}: the split files would lie among the texts (a "
                          "pre-training run on the folder would read them, test texts too); write them beside it, "
                          f"e.g. --out {os.path.join(os.path.dirname(os.path.normpath(source)) or '.', 'data')}")
    for path in paths.values():
        if os.path.exists(path) and same_path(path, source):
            raise ConfigError(f"--out {out} would write {path}, which is --input: splitting would replace the file it "
                              "reads; give another --out, or rename the input (e.g. all"
                              f"{Path(path).suffix})")
    there = [path for path in paths.values() if os.path.lexists(path)]
    if there and not overwrite:
        raise ConfigError(f"--out {out} already holds {', '.join(there)}; pass --overwrite to replace "
                          f"{'them' if len(there) > 1 else 'it'}, or give another --out")


def check_no_split_empty(table: Table, keys: list, assigned: list[str], fractions: dict[str, float],
                         group_column: str) -> None:
    """Every split with a fraction gets a row, else a refusal naming how many rows it needs."""
    empty = [name for name in HELD_OUT[::-1] if fractions[name] > 0 and name not in assigned]
    if not empty:
        return
    name, n, groups, need = empty[0], len(keys), len(set(keys)), rows_needed(fractions)
    given = " ".join(f"--{split} {fractions[split]:g}" for split in HELD_OUT[::-1])
    fix = f"add rows, or raise --{name} (--{name} 0 writes no {name} file)"
    if n < need:
        raise DataError(f"{table.path} has {n} row(s), too few for {given}: the {name} split would get none; it needs "
                        f"at least {need} rows; {fix}")
    if groups < need:
        raise DataError(f"{table.path} has {n} rows but only {groups} distinct {group_column!r} values (rows sharing "
                        f"one stay in one split), too few for {given}: the {name} split would get none; it needs at "
                        f"least {need} distinct values; {fix}")
    raise DataError(f"{table.path}: the {name} split would get no row: each class has too few rows to spare one after "
                    f"its training row ({n} rows); {fix}")


def tags_into_train(table: Table, keys: list, assigned: list[str]) -> str | None:
    """Move each held-out sentence (with the rows sharing its key) holding a tag no training
    sentence has into train, and say how many: finetune refuses a dev tag it never trained on, and
    a test tag the model cannot predict only lowers its score. One pass suffices: a move only adds
    tags to train."""
    trained = {tag for tags, split in zip(table.tags, assigned) if split == "train" for tag in tags}
    members: dict = {}
    for index, key in enumerate(keys):
        members.setdefault(key, []).append(index)
    moved: Counter = Counter()
    for index, tags in enumerate(table.tags):
        if assigned[index] != "train" and not trained.issuperset(tags):
            for other in members[keys[index]]:
                moved[assigned[other]] += 1
                assigned[other] = "train"
                trained.update(table.tags[other])
    if not moved:
        return None
    return (f"moved to train: {', '.join(f'{n} {name} sentence(s)' for name, n in sorted(moved.items()))} holding a "
            "tag no training sentence had (a model cannot learn a tag it never sees)")


def warn_small_classes(labels: list[str], assigned: list[str], fractions: dict[str, float]) -> None:
    """One warning naming the classes some split lacks (a class of one row is in train only): dev
    cannot pick a checkpoint on them, nor test score them. Another naming those with a few dev or
    test rows."""
    wanted = [name for name in SPLITS if name == "train" or fractions[name] > 0]
    where: dict[str, set[str]] = {}
    for label, split in zip(labels, assigned):
        where.setdefault(label, set()).add(split)
    sizes = Counter(labels)
    short = sorted((label for label in where if len(where[label]) < len(wanted)), key=lambda label: (sizes[label], label))
    if short:
        shown = ", ".join(f"{label!r} ({sizes[label]} row(s): {' + '.join(s for s in wanted if s in where[label])} only)"
                          for label in short[:5])
        more = f" and {len(short) - 5} more" if len(short) > 5 else ""
        warnings.warn(f"{len(short)} class(es) have too few rows to appear in every split: {shown}{more}; the splits "
                      "that lack a class cannot measure it: add rows for it if it matters", stacklevel=2)
    warn_few_held_out(labels, assigned, [name for name in wanted if name != "train"], sizes)


def warn_few_held_out(labels: list[str], assigned: list[str], held_out: list[str], sizes: Counter) -> None:
    """One warning naming the classes with 1 to FEW_ROWS - 1 rows in dev or test (none at all is the
    warning above): a per-class score on so few rows is noise, yet macro-F1 weighs every class alike."""
    counts = Counter(zip(labels, assigned))
    few = sorted((label for label in sizes if any(0 < counts[label, name] < FEW_ROWS for name in held_out)),
                 key=lambda label: (sizes[label], label))
    if not few:
        return
    shown = ", ".join(f"{label!r} ({', '.join(f'{name} {counts[label, name]}' for name in held_out)})"
                      for label in few[:10])
    more = f" and {len(few) - 10} more" if len(few) > 10 else ""
    warnings.warn(f"{len(few)} class(es) have fewer than {FEW_ROWS} rows in {' or '.join(held_out)}: {shown}{more}; "
                  "their per-class scores there are noise, yet in macro-F1 each weighs as much as the largest class "
                  "(1/K each, K classes): read those scores as rough, or give the split more rows (a larger "
                  "--dev/--test, more data)", stacklevel=3)


def warn_pair_texts_in_train(table: Table, assigned: list[str], label_column: str) -> None:
    """A file of text pairs (a second text column: `unread_text_column`) split by its first text alone: the
    dev and test rows holding a text that a training row holds too (as either text) are counted and warned
    about. Walk AA's Word-in-Context pairs, one sentence in many rows: 69% of the test rows."""
    pair = unread_text_column(table.rows[0], ("text", None, label_column))
    if pair is None:
        return

    def texts(row: dict) -> set[str]:
        return {same_text(row[name]) for name in ("text", pair) if isinstance(row.get(name), str)}

    train = set().union(*(texts(row) for row, name in zip(table.rows, assigned) if name == "train"))
    shared = Counter(name for row, name in zip(table.rows, assigned) if name != "train" and texts(row) & train)
    if shared:
        sizes = Counter(assigned)
        counts = " and ".join(f"{shared[name]} of the {sizes[name]} {name} rows" for name in HELD_OUT if shared[name])
        warnings.warn(f"{counts} hold a text that training rows hold too (as 'text' or {pair!r}): rows are kept "
                      "together by 'text' alone, and a score there reads high when a pair is judged by a sentence "
                      "seen in training; to keep related pairs in one split, name a column they share with "
                      "--group-column NAME (e.g. the word or topic a pair is about)", stacklevel=3)


def write_splits(table: Table, assigned: list[str], paths: dict[str, str]) -> None:
    """Each split's rows, in the file's order, to its file; the files are renamed into place only
    once all are written (atomic_open each: a failed write leaves every target as it was)."""
    with contextlib.ExitStack() as stack:
        files = {name: stack.enter_context(atomic_open(path, "w", encoding="utf-8", newline=""))
                 for name, path in paths.items()}
        if table.suffix == SQUAD:
            for name, f in files.items():
                kept = {where for where, split in zip(table.raw, assigned) if split == name}
                json.dump(_squad_part(table.document, kept), f, ensure_ascii=False)
            return
        if table.suffix in (".jsonl", CONLL):  # records as they were; a blank line after each sentence
            for split, text in zip(assigned, table.raw):
                files[split].write(text + ("\n" if table.suffix == CONLL else ""))
            return
        writers = {}
        for name, f in files.items():
            if table.bom:
                f.write("\ufeff")
            writers[name] = csv.writer(f, delimiter=table.delimiter, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
            writers[name].writerow(table.header)
        for split, row in zip(assigned, table.rows):
            writers[split].writerow([row[name] for name in table.header])


def _counts_text(labels: list[str] | None, assigned: list[str], split: str, order: list[str]) -> str:
    """The split's count per class, largest classes first; past SHOWN_CLASSES the first 6 and the
    last 3: the smallest classes, where a dev or test row or two is all there is, stay in sight."""
    if labels is None:
        return ""
    counts = Counter(label for label, name in zip(labels, assigned) if name == split)
    kept = order if len(order) <= SHOWN_CLASSES else order[:6] + [None] + order[-3:]
    # "1: 4", not "1 4", for numbered classes
    shown = ", ".join(f"{label}: {counts[label]}" if label is not None else f"... {len(order) - 9} more ..."
                      for label in kept)
    return f" ({shown})"


def _described(kind: str, label_column: str, labels: list | None) -> str:
    count = len(set(labels or ()))
    return {"classes": f"stratified by {label_column!r} ({count} class{'es' * (count != 1)})",
            "numbers": f"{label_column!r} holds numbers (a regression target): a random split",
            "sets": f"{label_column!r} holds label sets (multi-label): a random split",
            "none": f"no {label_column!r} column: a random split (--label-column NAME stratifies by one)",
            "sentences": "CoNLL sentences: a random split",
            "questions": "SQuAD questions: a random split",
            CHOICES_KIND: f"multiple choice, stratified by {label_column!r} (the right choice's position)"}[kind]


def _pair_note(table: Table, kind: str, label_column: str) -> tuple[str, str]:
    """For a table with a second text column (`unread_text_column`: `text_pair`, or another column of
    sentences), the --set that reads it as each row's second text and a line saying so; else ("", "").
    finetune reads a column named `text_pair` unasked, another only when told (walk AA: the next line
    trained on half of each pair)."""
    pair = unread_text_column(table.rows[0], ("text", None, label_column)) if kind in TEXT_KINDS else None
    if pair is None:
        return "", ""
    if pair == PAIR_COLUMN:
        return "", f"  (finetune reads the column {pair!r} as each row's second text: the model reads pairs)"
    return (f" --set data.pair_column={shlex.quote(pair)}",
            f"  (the column {pair!r} holds text: the --set reads it as each row's second text, a pair; "
            "without it the model reads 'text' alone)")


def _next_commands(kind: str, paths: dict[str, str], pair: tuple[str, str] = ("", "")) -> list[str]:
    task = {"classes": "classification", "sets": "classification", "numbers": "regression",
            "sentences": "token-classification", "questions": "qa", CHOICES_KIND: "multiple-choice"}.get(kind, "TASK")
    lines = ["next: fine-tune on train (dev picks the checkpoint), then score the test split once:"]
    if "dev" in paths:
        lines.append(f"  bertkit finetune --task {task} --model MODEL --train {shlex.quote(paths['train'])} "
                     f"--dev {shlex.quote(paths['dev'])} --out runs/mine{pair[0]}")
        lines += [pair[1]] if pair[1] else []
    else:
        lines.append("  (finetune needs --dev: split again with --dev above 0)")
    if "test" in paths:
        lines.append(f"  bertkit evaluate --model runs/mine --data {shlex.quote(paths['test'])}")
    return lines


def report(table: Table, kind: str, labels: list | None, assigned: list[str], paths: dict[str, str],
           columns: tuple[str, str], seed: int) -> list[str]:
    """What `bertkit split` prints: the file and how it was split, one line per split, the next commands."""
    unit = "sentences" if kind == "sentences" else "rows"  # a CoNLL row is a sentence, keyed by its words (walk AC)
    keys_note = ("a sentence's repeats kept in one split" if kind == "sentences" else
                 f"rows sharing a {columns[1]!r} value kept in one split")
    lines = [f"{table.path}: {len(table.rows)} {unit}; {_described(kind, columns[0], labels)}, {keys_note}, "
             f"seed {seed}"]
    sizes = Counter(labels or ())
    order = sorted(sizes, key=lambda label: (-sizes[label], label))
    for name, path in paths.items():
        lines.append(f"{name}: {assigned.count(name)} {unit}{_counts_text(labels, assigned, name, order)} -> {path}")
    return lines + _next_commands(kind, paths, _pair_note(table, kind, columns[0]))


def split_file(source: str, out: str, dev: float = 0.1, test: float = 0.1, seed: int = 0,
               label_column: str | None = None, group_column: str | None = None, overwrite: bool = False,
               log: Callable[[str], None] = print) -> dict[str, int]:
    """Split `source` into OUT/train, OUT/dev and OUT/test files (`--test 0`: no test file), report
    through `log`, and return each split's row count. A column named (label_column, group_column)
    must exist; the default label column "label" may be absent (a random split)."""
    for name, value in (("dev", dev), ("test", test)):
        if not 0 <= value < 1:
            raise ConfigError(f"--{name} {value:g} is a fraction of the rows: give a number from 0 up to (not "
                              "including) 1, e.g. 0.1")
    if dev + test >= 1:
        raise ConfigError(f"--dev {dev:g} and --test {test:g} leave no rows for training (they sum to {dev + test:g}); "
                          "keep their sum below 1, e.g. --dev 0.1 --test 0.1")
    fractions = {"dev": dev, "test": test}
    suffix = _check_format(source)
    paths = output_paths(out, suffix, fractions)
    check_outputs(paths, out, source, overwrite)
    table = read_table(source)
    choices = is_choice_table(table)
    columns = (label_column or "label", group_column or ("context" if suffix == SQUAD or choices else "text"))
    keys = group_keys(table, columns[1], group_column is not None)
    kind, labels = (("sentences", None) if suffix == CONLL else ("questions", None) if suffix == SQUAD else
                    label_kind(table, columns[0], label_column is not None))
    kind = CHOICES_KIND if choices and kind == "classes" else kind
    assigned = assign_splits(keys, fractions, seed, labels)
    check_no_split_empty(table, keys, assigned, fractions, columns[1])
    moved = tags_into_train(table, keys, assigned) if suffix == CONLL else None
    if labels is not None:
        warn_small_classes(labels, assigned, fractions)
    if kind in TEXT_KINDS and group_column is None:
        warn_pair_texts_in_train(table, assigned, columns[0])
    for name in HELD_OUT:
        stale = os.path.join(out, name + suffix)
        if name not in paths and os.path.exists(stale):
            warnings.warn(f"{stale} from an earlier split is left as it was (--{name} 0 writes none); it may hold rows "
                          "of the new train: remove it", stacklevel=2)
    write_splits(table, assigned, paths)
    lines = report(table, kind, labels, assigned, paths, columns, seed)
    for line in lines[:1] + ([moved] if moved else []) + lines[1:]:
        log(line)
    return {name: assigned.count(name) for name in paths}
