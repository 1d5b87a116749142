"""Training data from Parquet files and from `datasets` directories saved with save_to_disk: the
same examples as the same records in CSV/JSONL, the same column checks and errors, and the
commands take them (finetune on Parquet with a saved dataset as dev, evaluate on either)."""

import json
import os
import sys
import warnings

import pytest

from bertkit.commands.cli import main
from bertkit.errors import DataError
from bertkit.tasks import DataConfig, load_examples
from bertkit.tasks.formats import read_choices, read_text_dataset

from .helpers import make_tiny_model

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")

RECORDS = [{"text": f"the match ended {i} nil", "label": "sport"} for i in range(6)] + \
          [{"text": f"shares fell {i} percent", "label": "business"} for i in range(6)]


def write_all(tmp_path, records, name="data"):
    """The same records as .jsonl, .csv, .parquet and a saved dataset directory."""
    jsonl = tmp_path / f"{name}.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    csv = tmp_path / f"{name}.csv"
    columns = list(records[0])
    csv.write_text(",".join(columns) + "\n" + "".join(",".join(str(r[c]) for c in columns) + "\n" for r in records))
    parquet = tmp_path / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist(records), parquet)
    saved = tmp_path / f"{name}-dataset"
    datasets.Dataset.from_list(records).save_to_disk(str(saved))
    return {"jsonl": str(jsonl), "csv": str(csv), "parquet": str(parquet), "dataset": str(saved)}


def test_text_sets_read_the_same_from_every_format(tmp_path):
    paths = write_all(tmp_path, RECORDS)
    read = {kind: read_text_dataset(path) for kind, path in paths.items()}
    assert read["parquet"] == read["jsonl"] == read["csv"] == read["dataset"]
    assert [e.line for e in read["parquet"]] == list(range(1, 13))  # row n numbered as JSONL's line n
    assert read["parquet"][0].label == "sport"


def test_pairs_multilabel_and_numbers(tmp_path):
    records = [{"a": f"text {i}", "b": f"other {i}", "tags": ["x", "y"][: 1 + i % 2], "score": i / 4}
               for i in range(5)]
    paths = write_all(tmp_path, records)
    for column in ("tags", "score"):
        expected = read_text_dataset(paths["jsonl"], "a", "b", column)
        for kind in ("parquet", "dataset"):
            assert read_text_dataset(paths[kind], "a", "b", column) == expected, (kind, column)
    assert read_text_dataset(paths["parquet"], "a", "b", "score")[2].label == 0.5
    assert read_text_dataset(paths["dataset"], "a", "b", "tags")[1].label == ["x", "y"]


def test_class_label_columns_give_their_names(tmp_path):
    features = datasets.Features({"text": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["business", "sport"])})
    ids = [{"text": r["text"], "label": 1 if r["label"] == "sport" else 0} for r in RECORDS]
    datasets.Dataset.from_list(ids, features=features).save_to_disk(str(tmp_path / "ds"))
    assert read_text_dataset(str(tmp_path / "ds")) == read_text_dataset(write_all(tmp_path, RECORDS)["jsonl"])


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "dataset"])
def test_the_same_errors_as_jsonl(tmp_path, kind):
    paths = write_all(tmp_path, [{"body": "a text", "label": "x"}, {"body": "more", "label": "y"}])
    with pytest.raises(DataError, match=r"line 1 has no key 'text' \(keys: body, label\); name the column"):
        read_text_dataset(paths[kind])
    numbers = write_all(tmp_path, [{"text": 3, "label": "x"}], name="numbers")
    with pytest.raises(DataError, match="line 1 field 'text' must be a string"):
        read_text_dataset(numbers[kind])


def test_multiple_choice_from_parquet(tmp_path):
    records = [{"id": str(i), "context": f"context {i}", "choices": ["a", "b", "c"], "label": i % 3}
               for i in range(4)]
    paths = write_all(tmp_path, records)
    assert read_choices(paths["parquet"]) == read_choices(paths["dataset"]) == read_choices(paths["jsonl"])


def test_a_dataset_dict_names_its_splits(tmp_path):
    splits = datasets.DatasetDict({"train": datasets.Dataset.from_list(RECORDS),
                                   "test": datasets.Dataset.from_list(RECORDS[:2])})
    splits.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(DataError, match=r"is a DatasetDict with the splits train, test; pass one split's directory, "
                                        r"e\.g\. .*dd/train"):
        read_text_dataset(str(tmp_path / "dd"))
    assert read_text_dataset(str(tmp_path / "dd" / "train")) == read_text_dataset(write_all(tmp_path, RECORDS)["jsonl"])


def test_without_pyarrow_the_error_names_the_pip_line(tmp_path, monkeypatch):
    path = write_all(tmp_path, RECORDS)["parquet"]
    for name in [n for n in sys.modules if n == "pyarrow" or n.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(DataError, match=r"reading Parquet needs pyarrow: pip install pyarrow"):
        read_text_dataset(path)


def test_a_corrupt_parquet_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        load_examples("classification", str(bad), "train", DataConfig())


def test_finetune_and_evaluate_take_parquet_and_saved_datasets(tmp_path, capsys):
    model = make_tiny_model(tmp_path / "tiny", [r["text"] for r in RECORDS])
    paths = write_all(tmp_path, RECORDS)
    out = str(tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["finetune", "--task", "classification", "--model", model, "--train", paths["parquet"],
                     "--dev", paths["dataset"], "--out", out, "--no-progress",
                     "--set", "train.max_steps=2", "data.max_length=16"]) == 0
        summary = json.load(open(f"{out}/finetune_summary.json"))
        assert (summary["train_examples"], summary["dev_examples"], summary["labels"]) == (12, 12, ["business", "sport"])
        capsys.readouterr()
        scores = []
        for kind in ("parquet", "dataset", "csv"):
            assert main(["evaluate", "--model", out, "--data", paths[kind]]) == 0
            scores.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    assert scores[0] == scores[1] == scores[2]


def test_a_fifo_named_parquet_is_refused_not_read(tmp_path):
    fifo = tmp_path / "pipe.parquet"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="not a regular file"):
        read_text_dataset(str(fifo))
    with pytest.raises(DataError, match="not a regular file"):
        read_choices(str(fifo))
