"""Records of a Parquet file or of a `datasets` directory, read as the records of a JSONL file.

    data.parquet                 one row per record (pyarrow: `pip install "bertkit[parquet]"`)
    DIR (Dataset.save_to_disk)   DIR/state.json + DIR/*.arrow (`pip install "bertkit[datasets]"`)
    NAME[:CONFIG]:SPLIT          a data set in the local Hugging Face datasets cache (hub_datasets.py)

Each row becomes the dict a JSONL line would hold, numbered from 1 as the lines of that JSONL file
would be, so the readers that take JSONL (text sets, multiple choice) take these too, with the same
column checks and the same errors ("line N" is row N). A `datasets` ClassLabel column gives its
class names, as `Dataset.features[col].int2str` does (a list of ClassLabel: a list of names). A
DatasetDict directory (one folder per split) is refused naming its splits: pass DIR/train.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

from bertkit.errors import DataError
from bertkit.io import check_regular_file, iter_jsonl
from bertkit.tasks.hub_datasets import is_reference, open_split

PARQUET_SUFFIXES = (".parquet", ".pq")
ROWS_PER_BATCH = 4096  # Parquet rows converted to Python at a time


def is_saved_dataset(path: str) -> bool:
    """A directory written by `datasets`' save_to_disk (a Dataset or a DatasetDict)."""
    return os.path.isdir(path) and any(os.path.isfile(os.path.join(path, name))
                                       for name in ("state.json", "dataset_dict.json"))


def is_table(path: str) -> bool:
    return (os.path.splitext(str(path))[1].lower() in PARQUET_SUFFIXES or is_saved_dataset(str(path))
            or is_reference(str(path)))


def iter_records(path: str, blanks: bool = False) -> Iterator[tuple[int, dict | None]]:
    """(1-based record number, record) of a JSONL file, a Parquet file or a saved dataset; with
    `blanks` a blank JSONL line too, as (its number, None)."""
    path = str(path)
    if is_saved_dataset(path):
        return _dataset_records(path)
    if is_reference(path):
        return _rows(open_split(path))
    if os.path.splitext(path)[1].lower() in PARQUET_SUFFIXES:
        return _parquet_records(path)
    return iter_jsonl(path, blanks)


def _parquet_records(path: str) -> Iterator[tuple[int, dict]]:
    check_regular_file(path)  # a FIFO named .parquet would block the reader
    try:
        import pyarrow.parquet as pq  # optional: the parquet extra
    except ImportError:
        raise DataError(f'{path}: reading Parquet needs pyarrow: pip install pyarrow (or "bertkit[parquet]")') from None
    try:
        table = pq.ParquetFile(path)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(f"{path}: not a readable Parquet file ({str(e)[:200]})") from None
    number = 0
    for batch in table.iter_batches(batch_size=ROWS_PER_BATCH):
        for record in batch.to_pylist():
            number += 1
            yield number, record


def _dataset_records(path: str) -> Iterator[tuple[int, dict]]:
    if os.path.isfile(os.path.join(path, "dataset_dict.json")):
        with open(os.path.join(path, "dataset_dict.json"), encoding="utf-8") as f:
            splits = json.load(f).get("splits", [])
        raise DataError(f"{path} is a DatasetDict with the splits {', '.join(splits)}; pass one split's "
                        f"directory, e.g. {os.path.join(path, splits[0] if splits else 'train')}")
    try:
        import datasets  # optional: the datasets extra
    except ImportError:
        raise DataError(f'{path}: reading a saved `datasets` directory needs the datasets package: pip install '
                        'datasets (or "bertkit[datasets]")') from None
    try:
        dataset = datasets.load_from_disk(path)
    except (OSError, ValueError, KeyError) as e:
        raise DataError(f"{path}: not a readable saved dataset ({type(e).__name__}: {str(e)[:200]})") from None
    return _rows(dataset)


def _rows(dataset) -> Iterator[tuple[int, dict]]:
    """(1-based row number, row) of a `datasets.Dataset`, ClassLabel ids as their names."""
    decoders = {name: _names_of(feature) for name, feature in dataset.features.items()}
    decoders = {name: decode for name, decode in decoders.items() if decode is not None}
    for number, row in enumerate(dataset, 1):
        for name, decode in decoders.items():
            row[name] = decode(row[name])
        yield number, row


def _names_of(feature):
    """A function from a ClassLabel column's ids (or a list of them) to class names, else None."""
    if hasattr(feature, "int2str"):
        return lambda value: None if value is None or value < 0 else feature.int2str(value)  # -1: no label
    inner = getattr(feature, "feature", None)
    if inner is not None and hasattr(inner, "int2str"):
        return lambda values: None if values is None else [inner.int2str(v) for v in values]
    return None
