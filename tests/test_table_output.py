"""Rows as a CSV/TSV table where the output is named so (bertkit/commands/table_output.py)."""

from __future__ import annotations

import csv
import io

from bertkit.commands.cli import main
from bertkit.table_output import TableWriter, flat_row, table_delimiter
from bertkit.tasks.formats import read_text_dataset


def test_the_outputs_name_picks_the_table_format():
    assert table_delimiter("p.csv") == "," and table_delimiter("P.TSV") == "\t"
    assert table_delimiter("p.jsonl") is None and table_delimiter("-") is None


def test_a_row_flattens_to_cells_a_dict_of_values_one_column_each():
    row = {"index": 0, "line": None, "label": "sport", "probabilities": {"sport": 0.9, "tech": 0.1},
           "entities": [{"type": "PER", "start": 0}], "no_answer": False}
    assert flat_row(row) == {"index": 0, "label": "sport", "probabilities.sport": 0.9, "probabilities.tech": 0.1,
                             "entities": '[{"type": "PER", "start": 0}]', "no_answer": False}


def test_a_label_set_is_one_cell_in_the_form_a_csv_label_is_read_in(tmp_path):
    """A multi-label row's set was JSON text (["Bot", "Zool"]) in a spreadsheet; joined by "|" it reads back
    as the same set, so a corrected table of predictions trains again."""
    cells = flat_row({"index": 0, "text": "a fern", "labels": ["Bot", "Zool"], "probabilities": {"Bot": 0.9}})
    assert cells["labels"] == "Bot|Zool" and flat_row({"labels": []})["labels"] == ""
    out = tmp_path / "p.csv"
    with open(out, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, ["text", "labels"], extrasaction="ignore")
        writer.writeheader()
        writer.writerow(cells)
    assert read_text_dataset(str(out), label_column="labels", label_type="set")[0].label == ["Bot", "Zool"]


def test_blank_rows_first_wait_for_the_columns_of_the_first_prediction():
    out = io.StringIO()
    table = TableWriter(out, ",")
    table.write([{"index": 0, "line": 2, "label": None, "probabilities": None}])
    assert out.getvalue() == ""  # a blank input's row alone does not know the probability columns
    table.write([{"index": 1, "line": 3, "label": "a", "probabilities": {"a": 0.7, "b": 0.3}}])
    table.write([{"index": 2, "line": 4, "label": "b", "probabilities": {"a": 0.2, "b": 0.8}}])
    table.flush()
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert rows == [["index", "line", "label", "probabilities.a", "probabilities.b"], ["0", "2", "", "", ""], ["1", "3", "a", "0.7", "0.3"], ["2", "4", "b", "0.2", "0.8"]]


def test_nearest_writes_one_row_per_match_to_a_csv(tmp_path, capsys):
    from tests.tasks.helpers import make_tiny_model

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man is eating food\nshares fell sharply\n", encoding="utf-8")
    model = make_tiny_model(tmp_path / "tiny", ["a man is eating food", "shares fell sharply"] * 3)
    out = tmp_path / "found.csv"
    assert main(["nearest", "--model", model, "--corpus", str(corpus), "--top", "2", "--output", str(out),
                 "shares fell sharply", " "]) == 0
    with open(out, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["query_index"], r["rank"], r["text"]) for r in rows][0] == ("0", "1", "shares fell sharply")
    assert [r["query_index"] for r in rows] == ["0", "0", "1"] and rows[2]["rank"] == ""  # the blank query: no match


def test_predict_writes_a_table_to_a_csv_and_the_same_rows_as_json_lines_otherwise(tmp_path, capsys):
    import json

    from tests.tasks.helpers import make_tiny_model

    texts = ["the striker scored a goal", "shares fell sharply"]
    train = tmp_path / "train.csv"
    train.write_text("text,label\n" + "".join(f"{t} {i},{'sport' if 'goal' in t else 'business'}\n"
                                               for i in range(6) for t in texts), encoding="utf-8")
    model = make_tiny_model(tmp_path / "tiny", texts * 3)
    assert main(["finetune", "--task", "classification", "--model", model, "--train", str(train), "--dev", str(train),
                 "--out", str(tmp_path / "run"), "--no-progress", "--no-baseline", "--set", "train.max_steps=1",
                 "data.max_length=16"]) == 0
    new = tmp_path / "new.txt"
    new.write_text("a goal, late\n\nshares\n", encoding="utf-8")
    for name in ("p.csv", "p.jsonl"):
        assert main(["predict", "--model", str(tmp_path / "run"), "--input", str(new), "--output",
                     str(tmp_path / name)]) == 0
    with open(tmp_path / "p.csv", encoding="utf-8", newline="") as f:
        table = list(csv.DictReader(f))
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    assert list(table[0]) == ["index", "line", "label", "probabilities.business", "probabilities.sport"]
    assert [r["label"] for r in table] == [row["label"] or "" for row in rows] and table[1]["label"] == ""
    assert float(table[2]["probabilities.sport"]) == rows[2]["probabilities"]["sport"]


def test_nearest_prints_a_tables_row_and_a_text_files_line_not_a_bare_number():
    """Walk X: `[2640]` read as the table's own id column; the printed place now says what it counts."""
    from bertkit.commands.nearest import where_in

    assert where_in("docs.csv", {"index": 2639}) == "row 2640"
    assert where_in("texts.txt", {"index": 0}) == "line 1"
    assert where_in("folder", {"index": 3, "file": "b/notes.txt"}) == "b/notes.txt"
