"""A folder of class folders (CLASS/*.txt, one text per file) as a labelled set: read by finetune
and evaluate, split by `bertkit split` into CSV files."""

from __future__ import annotations

import csv
import json
import warnings
from collections import Counter

import pytest

from bertkit.commands.cli import main
from bertkit.errors import DataError, EncodingError
from bertkit.tasks.class_folders import is_class_folder, read_class_folder
from bertkit.tasks.formats import read_text_dataset, read_text_inputs


def make_folder(top, files: dict[str, str | bytes]):
    """Files under `top` from {relative path: text (or raw bytes)}."""
    for relative, content in files.items():
        path = top / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return top


def test_each_txt_file_is_a_text_labelled_by_its_class_folder_in_sorted_order(tmp_path):
    top = make_folder(tmp_path / "reviews", {"pos/b.txt": "  Loved it.\n", "pos/a.txt": "Great.", "neg/z.txt": "Dull.",
                                             "pos/more/c.TXT": "Deeper.", "pos/.hidden.txt": "skipped",
                                             ".git/x.txt": "skipped"})
    items = read_class_folder(str(top))
    assert [(i.number, i.path, i.text, i.label) for i in items] == [
        (1, "neg/z.txt", "Dull.", "neg"), (2, "pos/a.txt", "Great.", "pos"), (3, "pos/b.txt", "Loved it.", "pos"),
        (4, "pos/more/c.TXT", "Deeper.", "pos")]
    examples = read_text_dataset(str(top))
    assert [(e.text, e.label, e.file, e.line) for e in examples] == [(i.text, i.label, i.path, None) for i in items]


def test_number_named_folders_are_classes_unless_the_task_reads_numbers(tmp_path):
    top = make_folder(tmp_path / "stars", {"1/a.txt": "bad", "5/b.txt": "good", "3/c.txt": "fine"})
    assert [e.label for e in read_text_dataset(str(top))] == ["1", "3", "5"]  # a CSV's 1/3/5 would be numbers
    assert [e.label for e in read_text_dataset(str(top), label_type="number")] == [1.0, 3.0, 5.0]


def test_files_left_out_and_folders_without_texts_are_warned_about(tmp_path):
    top = make_folder(tmp_path / "data", {"pos/a.txt": "yes", "neg/b.txt": "no", "neg/notes.md": "x",
                                          "urls.txt": "http://", "empty/readme.html": "<p>"})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert len(read_class_folder(str(top))) == 2
    messages = " | ".join(str(w.message) for w in seen)
    assert "3 file(s) left out" in messages and "urls.txt" in messages and "neg/notes.md" in messages
    assert "empty" in messages and "no class" in messages


@pytest.mark.parametrize("files, expected", [
    ({"a.txt": "loose"}, "no class folders in it; for a labelled set put each class's .txt files in a folder"),
    ({"pos/a.csv": "x"}, "hold no .txt file; each text is one .txt file in its class's folder"),
    ({"pos/a.txt": "ok", "neg/b.txt": b"caf\xe9", "neg/c.txt": b"\xff"}, "2 file(s) are not UTF-8: neg/b.txt, neg/c.txt"),
    ({"pos/a.txt": "ok", "neg/b.txt": " \n"}, "1 file(s) hold no text: neg/b.txt; remove them or fill them in"),
    ({"pos/a.txt": "ok", "neg/b.txt": "hi".encode("utf-16")},
     "1 file(s) are not UTF-8: neg/b.txt (UTF-16); re-encode each as UTF-8, e.g. iconv -f utf-16 -t utf-8"),
])
def test_bad_folders_are_refused_naming_the_files(tmp_path, files, expected):
    top = make_folder(tmp_path / "data", files)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DataError, match="") as err:
            read_text_dataset(str(top))
    assert expected in str(err.value)


def test_the_refusal_lists_a_few_files_and_counts_the_rest(tmp_path):
    top = make_folder(tmp_path / "data", {f"neg/{i}.txt": b"\xe9" for i in range(5)})
    with pytest.raises(EncodingError, match=r"5 file\(s\) are not UTF-8: neg/0.txt, neg/1.txt, neg/2.txt and 2 more"):
        read_class_folder(str(top))


def test_a_pair_task_refuses_a_folder(tmp_path):
    top = make_folder(tmp_path / "data", {"pos/a.txt": "yes", "neg/b.txt": "no"})
    with pytest.raises(DataError, match="a pair of texts needs a .csv, .tsv or .jsonl file"):
        read_text_dataset(str(top), pair_column="text_b")


def test_unlabelled_every_txt_file_is_a_text_in_path_order_and_an_empty_one_is_blank(tmp_path):
    top = make_folder(tmp_path / "docs", {"b.txt": "second", "a/x.txt": "first", "a/.hidden.txt": "no", "c.txt": "",
                                          "c.md": "left out"})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        examples = read_text_inputs(str(top))
    assert [(e.file, e.text, e.label) for e in examples] == [("a/x.txt", "first", None), ("b.txt", "second", None),
                                                             ("c.txt", "", None)]
    assert any("1 file(s) left out, not .txt: c.md" in str(w.message) for w in seen)
    with pytest.raises(DataError, match="is a directory with no .txt file in it"):
        read_text_inputs(str(make_folder(tmp_path / "none", {"a.md": "x"})))
    with pytest.raises(DataError, match="holds no non-blank input"):
        read_text_inputs(str(make_folder(tmp_path / "blank", {"a.txt": " "})))


def test_a_saved_dataset_directory_is_not_a_class_folder(tmp_path):
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "state.json").write_text("{}")
    assert not is_class_folder(str(tmp_path / "saved"))
    assert is_class_folder(str(tmp_path)) and not is_class_folder(str(tmp_path / "saved" / "state.json"))


def test_split_writes_a_folder_as_csv_files_that_read_back_as_its_texts(tmp_path, capsys):
    files = {f"{label}/{i}.txt": f"{label} text number {i}\nsecond line, with a comma" for label in ("sport", "tech")
             for i in range(20)}
    top = make_folder(tmp_path / "articles", files)
    assert main(["split", "--input", str(top), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "40 rows; stratified by 'label' (2 classes)" in out and "--train " + str(tmp_path / "out" / "train.csv") in out
    back = [(e.text, e.label) for name in ("train", "dev", "test")
            for e in read_text_dataset(str(tmp_path / "out" / f"{name}.csv"))]
    assert sorted(back) == sorted((text, path.split("/")[0]) for path, text in files.items())
    with open(tmp_path / "out" / "dev.csv", encoding="utf-8", newline="") as f:
        dev = list(csv.DictReader(f))
    assert Counter(row["label"] for row in dev) == {"sport": 2, "tech": 2}


def test_finetune_evaluate_and_predict_read_folders(tmp_path, capsys):
    from tests.tasks.helpers import make_tiny_model

    words = {"sport": "the striker scored a goal", "business": "shares fell as the bank raised rates"}
    train = make_folder(tmp_path / "train", {f"{label}/{i}.txt": f"{text} {i}" for label, text in words.items()
                                             for i in range(8)})
    dev = make_folder(tmp_path / "dev", {f"{label}/d{i}.txt": f"{text} again {i}" for label, text in words.items()
                                         for i in range(3)})
    model = make_tiny_model(tmp_path / "tiny", list(words.values()) * 3)
    code = main(["finetune", "--task", "classification", "--model", model, "--train", str(train), "--dev", str(dev),
                 "--out", str(tmp_path / "run"), "--no-progress", "--no-baseline", "--set", "train.max_steps=2",
                 "data.max_length=16"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "run"), "--data", str(dev)]) == 0
    assert '"accuracy"' in capsys.readouterr().out
    new = make_folder(tmp_path / "new", {"x/late.txt": "the striker scored again", "early.txt": "", "b.txt": "rates"})
    assert main(["predict", "--model", str(tmp_path / "run"), "--input", str(new), "--output", str(tmp_path / "p.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [(row["index"], row["line"], row["file"]) for row in rows] == [(0, None, "b.txt"), (1, None, "early.txt"),
                                                                           (2, None, "x/late.txt")]
    assert rows[1]["label"] is None and rows[0]["label"] in words and rows[2]["label"] in words


def test_embed_names_a_folders_rows_and_nearest_names_the_files_it_finds(tmp_path, capsys):
    from tests.tasks.helpers import make_tiny_model

    texts = {"food/a.txt": "a man is eating food", "food/b.txt": "a man eats bread", "money.txt": "shares fell sharply"}
    top = make_folder(tmp_path / "docs", texts)
    model = make_tiny_model(tmp_path / "tiny", list(texts.values()) * 3)
    assert main(["embed", "--model", model, "--input", str(top), "--output", str(tmp_path / "vecs.npy")]) == 0
    assert (tmp_path / "vecs.files.txt").read_text() == "food/a.txt\nfood/b.txt\nmoney.txt\n"
    assert f"row i is the file on line i + 1 of {tmp_path / 'vecs.files.txt'}" in capsys.readouterr().out
    out = tmp_path / "found.jsonl"
    assert main(["nearest", "--model", model, "--corpus", str(top), "--corpus-embeddings", str(tmp_path / "vecs.npy"),
                 "--top", "3", "--output", str(out), "shares fell sharply"]) == 0
    assert "[money.txt] shares fell sharply" in capsys.readouterr().out
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(m["file"], m["text"]) for m in row["matches"]][0] == ("money.txt", "shares fell sharply")
    assert sorted(m["file"] for m in row["matches"]) == sorted(texts)


def test_embed_refuses_to_write_inside_the_folder_and_warns_about_an_earlier_folders_names(tmp_path, capsys):
    from tests.tasks.helpers import make_tiny_model

    top = make_folder(tmp_path / "docs", {"a.txt": "one text", "b.txt": "another text"})
    model = make_tiny_model(tmp_path / "tiny", ["one text", "another text"] * 3)
    assert main(["embed", "--model", model, "--input", str(top), "--output", str(top / "vecs.npy")]) == 2
    assert "is inside --input" in capsys.readouterr().err and not (top / "vecs.npy").exists()
    lines = tmp_path / "lines.txt"
    lines.write_text("one text\n")
    (tmp_path / "vecs.files.txt").write_text("a.txt\nb.txt\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["embed", "--model", model, "--input", str(lines), "--output", str(tmp_path / "vecs.npy")]) == 0
    assert any("names the rows of an earlier folder's vectors" in str(w.message) for w in seen)


@pytest.mark.parametrize("suffix", [".xlsx", ".ods"])
def test_a_spreadsheet_workbook_is_refused_with_how_to_save_it_as_csv(tmp_path, capsys, suffix):
    book = tmp_path / f"data{suffix}"
    book.write_bytes(b"PK\x03\x04 a zip of sheets")
    with pytest.raises(DataError, match="spreadsheet workbook: save the sheet as CSV") as err:
        read_text_dataset(str(book))
    assert "or a folder of .txt files" in str(err.value)
    assert main(["split", "--input", str(book), "--out", str(tmp_path)]) == 2
    assert "spreadsheet workbook: save the sheet as CSV (Excel: File > Save As > CSV UTF-8" in capsys.readouterr().err


def test_a_folder_above_the_class_folders_is_refused_naming_the_one_that_holds_them(tmp_path, capsys):
    # walk N #2: `parent/win/{a,b}/*.txt` given as `parent` read as one class, 'win', and trained to accuracy 1
    top = make_folder(tmp_path / "parent", {"win/a/1.txt": "yes", "win/a/2.txt": "yes again", "win/b/3.txt": "no",
                                            "win/b/4.txt": "no again", "win/b/5.txt": "never"})
    expected = f"holds texts in one class folder only, 'win': a classifier needs at least two classes; {top / 'win'} " \
               f"holds the folders a, b: if those are the classes, give {top / 'win'}"
    assert main(["split", "--input", str(top), "--out", str(tmp_path / "out")]) == 2
    assert expected in capsys.readouterr().err and not (tmp_path / "out").exists()
    (tmp_path / "model").mkdir()  # a --model that does not exist would be refused first
    assert main(["finetune", "--task", "classification", "--model", str(tmp_path / "model"), "--train", str(top),
                 "--dev", str(top), "--out", str(tmp_path / "run")]) == 2
    assert expected in capsys.readouterr().err and not (tmp_path / "run").exists()
    assert len(read_text_dataset(str(top))) == 5  # evaluating on one class is fine: read as it is


def test_a_csv_of_one_label_is_refused_before_training(tmp_path, capsys):
    from tests.tasks.helpers import make_tiny_model

    data = tmp_path / "one.csv"
    data.write_text("text,label\nshares fell,x\nrates rose,x\n", encoding="utf-8")
    model = make_tiny_model(tmp_path / "tiny", ["shares fell", "rates rose"] * 3)
    assert main(["finetune", "--task", "classification", "--model", model, "--train", str(data), "--dev", str(data),
                 "--out", str(tmp_path / "run"), "--no-baseline"]) == 2
    assert "every training example has the label 'x'; a classifier needs examples of at least two labels" \
        in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_windows_copy_of_a_text_is_the_same_text_to_split_and_to_the_overlap_check(tmp_path, capsys):
    # walk N #3: a CRLF copy of an article went to test while its LF copy trained, and no warning said so
    from bertkit.tasks.formats import TextExample, count_shared

    article = "Dollar gains on Greenspan speech\n\nThe dollar has hit its highest level."
    files = {f"business/{i}.txt": f"business story {i}" for i in range(12)}
    files.update({f"tech/{i}.txt": f"tech story {i}" for i in range(12)})
    files.update({"business/lf.txt": article, "business/crlf.txt": article.replace("\n", "\r\n")})
    top = make_folder(tmp_path / "dup", files)
    assert [e.text for e in read_text_dataset(str(top)) if "Dollar" in e.text] == [article, article]
    for seed in range(4):
        assert main(["split", "--input", str(top), "--out", str(tmp_path / f"s{seed}"), "--seed", str(seed)]) == 0
        homes = {name for name in ("train", "dev", "test")
                 if "Dollar" in (tmp_path / f"s{seed}" / f"{name}.csv").read_text(encoding="utf-8")}
        assert len(homes) == 1, (seed, homes)
    crlf_csv = tmp_path / "crlf.csv"
    crlf_csv.write_text('text,label\n"a  text\r\nover lines",x\n', encoding="utf-8", newline="")
    assert count_shared(read_text_dataset(str(crlf_csv)), [TextExample("a text over lines")]) == 1


def test_split_writes_no_file_inside_the_folder_it_splits(tmp_path, capsys):
    # walk N #9: split files inside the folder were read by a pre-training run on it, test texts too
    top = make_folder(tmp_path / "articles", {f"{label}/{i}.txt": f"{label} {i}" for label in "ab" for i in range(10)})
    assert main(["split", "--input", str(top), "--out", str(top / "splits")]) == 2
    err = capsys.readouterr().err
    assert f"--out {top / 'splits'} is inside --input {top}" in err and f"--out {tmp_path / 'data'}" in err
    assert not (top / "splits").exists()
