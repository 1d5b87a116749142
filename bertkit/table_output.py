"""Output rows as a CSV or TSV table when the output file is named so (`--output predictions.csv`):
a spreadsheet opens it, where JSON lines (the default for any other name) would be one column of
text.

A row becomes one table row: plain values as they are, a dict of plain values one column per key
("probabilities.sport"), a multi-label row's set of labels joined by "|" ("Bot|Zool", the form a CSV
label cell is read in, so a corrected table trains again), other lists and dicts their JSON text (a
tagger's words, entities), and a null an empty cell. The columns are those of the rows up to the first with a prediction in it
(a blank input's row has the task's keys, all null), so a file that starts with blank lines still
gets every column.
"""

from __future__ import annotations

import csv
import json
import os

DELIMITERS = {".csv": ",", ".tsv": "\t"}
POSITION = ("index", "line", "file")  # where a row's input is: not a prediction
LABEL_SET = "labels"  # a multi-label row's classes (no name holds "|": the readers refuse one)


def table_delimiter(path: str) -> str | None:
    """"," or tab for an output named .csv or .tsv, else None (JSON lines)."""
    return DELIMITERS.get(os.path.splitext(str(path))[1].lower())


def _plain(value) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flat_row(row: dict) -> dict:
    """`row` as table cells (module docstring); null values are left out (empty cells)."""
    cells = {}
    for key, value in row.items():
        if isinstance(value, dict) and all(_plain(v) for v in value.values()):
            cells.update({f"{key}.{inner}": v for inner, v in value.items() if v is not None})
        elif key == LABEL_SET and isinstance(value, list) and all(isinstance(v, str) for v in value):
            cells[key] = "|".join(value)
        elif isinstance(value, (list, dict)):
            cells[key] = json.dumps(value, ensure_ascii=False)
        elif value is not None:
            cells[key] = value
    return cells


class TableWriter:
    """Writes rows to an open text file as a table, its header once the columns are known."""

    def __init__(self, handle, delimiter: str):
        self.handle, self.delimiter = handle, delimiter
        self.pending: list[dict] = []
        self.writer: csv.DictWriter | None = None

    def write(self, rows: list[dict]) -> None:
        self.pending += [flat_row(row) for row in rows]
        if self.writer is None and not any(set(cells) - set(POSITION) for cells in self.pending):
            return  # blank inputs only so far: their rows lack the prediction's columns
        self.flush()

    def flush(self) -> None:
        """Write what is pending (at the end: even if every row was blank)."""
        if self.writer is None:
            columns = list(dict.fromkeys(key for cells in self.pending for key in cells))
            self.writer = csv.DictWriter(self.handle, columns, delimiter=self.delimiter, extrasaction="ignore",
                                         lineterminator="\n")
            self.writer.writeheader()
        self.writer.writerows(self.pending)
        self.pending = []


class JsonLinesWriter:
    """Writes rows to an open text file as JSON lines (the default output)."""

    def __init__(self, handle):
        self.handle = handle

    def write(self, rows: list[dict]) -> None:
        self.handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))

    def flush(self) -> None:
        """Nothing is held back: each row was written whole."""


def rows_writer(handle, path: str) -> TableWriter | JsonLinesWriter:
    """The writer for an output named `path`: a table for .csv/.tsv, else JSON lines."""
    delimiter = table_delimiter(path)
    return TableWriter(handle, delimiter) if delimiter else JsonLinesWriter(handle)
