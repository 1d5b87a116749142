"""`bertkit split`: one labelled file into train/dev/test files that finetune and evaluate take.

Stratified in proportion (small classes trained on first), no group key in two splits, the same
split for a seed, the rows kept exactly (read back with bertkit's own readers), and every bad
input refused before anything is written (tests/cli_checks.py assert_refused)."""

from __future__ import annotations

import csv
import errno
import json
import os
import random
import warnings
from collections import Counter

import pytest

from bertkit.commands.cli import main
from bertkit.data.splits import assign_splits, groups_in_turn, rows_needed, write_tsv_splits
from bertkit.errors import DataError
from bertkit.io import iter_csv_rows, iter_jsonl
from bertkit.tasks.formats import read_choices
from tests.cli_checks import assert_refused, snapshot

SPLITS = ("train", "dev", "test")


def write_csv(path, header, rows, delimiter=",", bom=False):
    with open(path, "w", encoding="utf-8", newline="") as f:
        if bom:
            f.write("\ufeff")
        writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def labelled_rows(n=400, seed=0):
    """(text, label) rows: three classes of unequal size (about 5:3:2), each text distinct."""
    rng = random.Random(seed)
    return [(f"text {i} {rng.random():.6f}", rng.choice("aaaaabbbcc")) for i in range(n)]


def split(argv, capsys=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["split", *map(str, argv)])
    return code, capsys.readouterr() if capsys else None


def read_rows(path):
    return [row for _, row, _ in iter_csv_rows(str(path), "\t" if str(path).endswith(".tsv") else ",")]


# ---------------------------------------------------------------------------- the assignment
def test_stratified_proportions_per_class_and_in_total():
    rows = labelled_rows()
    labels = [label for _, label in rows]
    assigned = assign_splits([text for text, _ in rows], {"dev": 0.1, "test": 0.2}, seed=3, labels=labels)
    totals = Counter(assigned)
    assert totals["dev"] == 40 and totals["test"] == 80 and totals["train"] == 280  # round(n * fraction) of the file
    for label, n in Counter(labels).items():
        got = Counter(split for split, lab in zip(assigned, labels) if lab == label)
        assert abs(got["dev"] - n * 0.1) <= 1 and abs(got["test"] - n * 0.2) <= 1, (label, n, got)


def test_small_classes_get_a_training_row_first_and_together_still_fill_dev():
    labels = ["big"] * 50 + ["two"] * 2 + ["one"]
    assigned = assign_splits(list(range(len(labels))), {"dev": 0.1, "test": 0.1}, seed=0, labels=labels)
    assert assigned[52] == "train" and "train" in assigned[50:52]
    many_small = [c for c in "abcdefghij" for _ in range(4)]  # each class rounds to 0 dev rows alone
    assigned = assign_splits(list(range(40)), {"dev": 0.1, "test": 0.1}, seed=0, labels=many_small)
    assert Counter(assigned) == {"train": 32, "dev": 4, "test": 4}
    for label in "abcdefghij":
        assert "train" in {s for s, lab in zip(assigned, many_small) if lab == label}


def test_rows_with_one_key_share_a_split_even_under_two_labels():
    rng = random.Random(1)
    keys = [f"text {rng.randrange(60)}" for _ in range(300)]
    labels = [rng.choice("ab") for _ in keys]
    for seed in range(5):
        assigned = assign_splits(keys, {"dev": 0.15, "test": 0.15}, seed=seed, labels=labels)
        where = {}
        for key, split in zip(keys, assigned):
            where.setdefault(key, set()).add(split)
        assert all(len(splits) == 1 for splits in where.values())
        assert set(assigned) == set(SPLITS)


def test_the_same_seed_gives_the_same_split_and_another_seed_another():
    rows = labelled_rows(200)
    keys, labels = [t for t, _ in rows], [lab for _, lab in rows]
    fractions = {"dev": 0.1, "test": 0.1}
    assert assign_splits(keys, fractions, 7, labels) == assign_splits(keys, fractions, 7, labels)
    assert assign_splits(keys, fractions, 7, labels) != assign_splits(keys, fractions, 8, labels)
    assert assign_splits(keys, fractions, 7) == assign_splits(keys, fractions, 7)


def test_rows_needed_is_the_fewest_that_fill_every_split():
    assert rows_needed({"dev": 0.1, "test": 0.1}) == 5  # round(0.5) = 1
    assert rows_needed({"dev": 0.1, "test": 0.0}) == 5
    assert rows_needed({"dev": 0.4, "test": 0.4}) == 3  # one each and one to train
    for fractions in ({"dev": 0.1, "test": 0.1}, {"dev": 0.3, "test": 0.05}, {"dev": 0.45, "test": 0.45}):
        n = rows_needed(fractions)
        assert set(assign_splits(list(range(n)), fractions)) == set(SPLITS)
        assert set(assign_splits(list(range(n - 1)), fractions)) != set(SPLITS)


# ---------------------------------------------------------------------------- the command
def test_split_writes_stratified_files_and_says_what_to_run_next(tmp_path, capsys):
    rows = labelled_rows()
    source = write_csv(tmp_path / "all.csv", ["text", "label"], rows)
    out = tmp_path / "data"
    code, said = split(["--input", source, "--out", out, "--dev", "0.1", "--test", "0.2"], capsys)
    assert code == 0, said.err
    parts = {name: read_rows(out / f"{name}.csv") for name in SPLITS}
    assert {name: len(part) for name, part in parts.items()} == {"train": 280, "dev": 40, "test": 80}
    lines = said.out.splitlines()
    assert "stratified by 'label' (3 classes)" in lines[0]
    dev_counts = Counter(row["label"] for row in parts["dev"])
    assert lines[2] == f"dev: 40 rows (a: {dev_counts['a']}, b: {dev_counts['b']}, c: {dev_counts['c']}) -> {out}/dev.csv"
    assert f"bertkit finetune --task classification --model MODEL --train {out}/train.csv --dev {out}/dev.csv" \
        in said.out
    assert f"bertkit evaluate --model runs/mine --data {out}/test.csv" in said.out
    code, again = split(["--input", source, "--out", tmp_path / "again", "--dev", "0.1", "--test", "0.2"], capsys)
    assert code == 0 and snapshot(tmp_path / "again") == snapshot(out)  # deterministic, byte for byte


def test_a_pair_files_next_finetune_line_reads_its_second_text(tmp_path, capsys):
    """Walk AA: the printed finetune line, copied as it was, trained a cross-encoder on the first texts alone."""
    rows = [(f"he sat on bank {i}", f"bank {i}", "same" if i % 2 else "different") for i in range(100)]
    source = write_csv(tmp_path / "pairs.csv", ["text", "text_pair", "label"], rows)
    code, said = split(["--input", source, "--out", tmp_path / "data"], capsys)
    assert code == 0, said.err
    line = next(line for line in said.out.splitlines() if "bertkit finetune" in line)
    assert line.endswith("--out runs/mine")  # finetune reads a column named text_pair unasked
    assert "(finetune reads the column 'text_pair' as each row's second text: the model reads pairs)" in said.out
    other = write_csv(tmp_path / "other.csv", ["text", "example", "label"], [(a, f"he sat on the {b}", c)
                                                                             for a, b, c in rows])
    code, said = split(["--input", other, "--out", tmp_path / "other"], capsys)
    line = next(line for line in said.out.splitlines() if "bertkit finetune" in line)
    assert code == 0 and line.endswith("--out runs/mine --set data.pair_column=example")
    assert "the column 'example' holds text: the --set reads it as each row's second text" in said.out
    single = [(text, str(i), label) for i, (text, _, label) in enumerate(rows)]
    source = write_csv(tmp_path / "single.csv", ["text", "id", "label"], single)
    code, said = split(["--input", source, "--out", tmp_path / "single"], capsys)
    assert code == 0 and "pair_column" not in said.out  # an id column is not a second text


def test_pairs_sharing_a_sentence_across_splits_are_counted_and_a_group_column_keeps_them_together(tmp_path):
    """Walk AA: a sentence in many pairs (Word-in-Context) lands in train and test when rows are kept
    together by their first text alone; split says how many held-out rows that is."""
    rows = [(f"the {w} sense {i}", f"the {w} sense {(i + 1) % 4}", "same" if i % 2 else "different", f"w{w}")
            for w in range(50) for i in range(4)]
    source = write_csv(tmp_path / "pairs.csv", ["text", "text_pair", "label", "word"], rows)
    with pytest.warns(UserWarning, match=r"of the 20 test rows .* hold a text that training rows hold too "
                                         r"\(as 'text' or 'text_pair'\).*--group-column NAME"):
        assert main(["split", "--input", source, "--out", str(tmp_path / "a")]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one word's pairs in one split: nothing shared, nothing to say
        assert main(["split", "--input", source, "--out", str(tmp_path / "b"), "--group-column", "word"]) == 0


def test_a_csv_with_quoted_lines_blank_lines_and_a_bom_comes_back_row_for_row(tmp_path, capsys):
    rows = [(f'said "hi", then\nleft {i}' if i % 5 == 0 else f"plain {i}", "ab"[i % 2], str(i)) for i in range(60)]
    source = write_csv(tmp_path / "all.csv", ["text", "label", "id"], rows, bom=True)
    with open(source, "a", encoding="utf-8") as f:
        f.write("\n\n")  # blank lines: no rows
    code, said = split(["--input", source, "--out", tmp_path], capsys)  # --out the input's folder
    assert code == 0, said.err
    original = read_rows(source)
    parts = {name: read_rows(tmp_path / f"{name}.csv") for name in SPLITS}
    assert sorted(sum(parts.values(), []), key=lambda row: int(row["id"])) == original
    for part in parts.values():  # the input's order within a split
        assert [int(row["id"]) for row in part] == sorted(int(row["id"]) for row in part)
    for name in SPLITS:
        assert (tmp_path / f"{name}.csv").read_bytes().startswith(b"\xef\xbb\xbftext,label,id\n")


@pytest.mark.parametrize("name,delimiter", [("all.tsv", "\t"), ("semicolon.csv", ";"), ("tabbed.csv", "\t")])
def test_tsv_and_spreadsheet_csvs_are_written_in_the_delimiter_they_were_read_with(tmp_path, capsys, name, delimiter):
    rows = [(f'a "quoted" text {i}' if i % 4 == 0 else f"text {i}", "xy"[i % 2]) for i in range(40)]
    source = tmp_path / name
    source.write_text("text{0}label\n".format(delimiter) + "".join(
        f'{text}{delimiter}{label}\n' for text, label in rows), encoding="utf-8")
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    suffix = os.path.splitext(name)[1]
    parts = [read_rows(tmp_path / "out" / f"{split_}{suffix}") for split_ in SPLITS]
    assert sorted(sum(parts, []), key=lambda row: row["text"]) == sorted(read_rows(source), key=lambda row: row["text"])
    assert (tmp_path / "out" / f"train{suffix}").read_text(encoding="utf-8").startswith(f"text{delimiter}label\n")


def test_jsonl_lines_are_copied_byte_for_byte(tmp_path, capsys):
    lines = [json.dumps({"label": "ab"[i % 2], "text": f"caf\u00e9 {i}", "n": i}, ensure_ascii=i % 3 == 0)
             .replace(", ", ",  " if i % 4 == 0 else ", ") for i in range(50)]
    source = tmp_path / "all.jsonl"
    source.write_bytes(("\n".join(lines[:25]) + "\n\n" + "\r\n".join(lines[25:])).encode("utf-8"))  # no final \n
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    written = b"".join((tmp_path / "out" / f"{name}.jsonl").read_bytes() for name in SPLITS)
    expected = [(line + ("\r\n" if 25 <= i < 49 else "\n")).encode("utf-8") for i, line in enumerate(lines)]
    assert sorted(written.splitlines(keepends=True)) == sorted(expected)
    train = [record["n"] for _, record in iter_jsonl(str(tmp_path / "out" / "train.jsonl"))]
    assert train == sorted(train)


@pytest.mark.parametrize("form", ["parquet", "datasets"])
def test_parquet_and_a_datasets_directory_split_into_jsonl_that_finetune_reads(tmp_path, capsys, form):
    """Records as tables.py reads them (a ClassLabel column as its names) become JSONL lines: every
    record once, stratified by label, read back equal by the readers finetune uses."""
    records = [{"text": text, "label": label, "n": i} for i, (text, label) in enumerate(labelled_rows(200, seed=3))]
    if form == "parquet":
        pyarrow = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq
        source = tmp_path / "all.parquet"
        pq.write_table(pyarrow.Table.from_pylist(records), source)
    else:
        datasets = pytest.importorskip("datasets")
        features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list("abc")),
                                      "n": datasets.Value("int64")})
        source = tmp_path / "saved"
        datasets.Dataset.from_list(records, features=features).save_to_disk(str(source))
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    parts = {name: [record for _, record in iter_jsonl(str(tmp_path / "out" / f"{name}.jsonl"))] for name in SPLITS}
    assert sorted((r for part in parts.values() for r in part), key=lambda r: r["n"]) == records
    assert (len(parts["dev"]), len(parts["test"])) == (20, 20)
    assert all(set(Counter(r["label"] for r in part)) == {"a", "b", "c"} for part in parts.values())
    assert "--train" in said.out and "train.jsonl" in said.out


def test_a_conll_file_splits_by_sentence_and_reads_back_as_the_same_sentences(tmp_path, capsys):
    """A tagger's one file (CoNLL: a sentence per blank-line block) into train/dev/test, its token
    lines as they were; a repeated sentence stays in one split; -DOCSTART- is left out."""
    from bertkit.tasks.formats import read_conll

    blocks = [f"Anna{i % 7} B-PER\nlives O\nin\tO\nOslo{i % 5} B-LOC\n" for i in range(60)]
    source = tmp_path / "all.conll"
    source.write_text("-DOCSTART- -X- O O\n\n" + "\n".join(blocks), encoding="utf-8")  # no final blank line
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    assert "--task token-classification" in said.out
    assert "60 sentences; CoNLL sentences: a random split, a sentence's repeats kept in one split" in said.out
    assert "train: 48 sentences -> " in said.out  # not "rows", nor a 'text' value the file has none of (walk AC)
    parts = {name: read_conll(tmp_path / "out" / f"{name}.conll") for name in SPLITS}
    assert [len(parts[name]) for name in SPLITS] == [48, 6, 6]
    as_read = lambda examples: sorted((tuple(e.tokens), tuple(e.tags)) for e in examples)
    assert as_read([e for name in SPLITS for e in parts[name]]) == as_read(read_conll(source))
    homes = {}
    for name in SPLITS:
        for e in parts[name]:
            homes.setdefault(tuple(e.tokens), set()).add(name)
    assert all(len(splits) == 1 for splits in homes.values())  # 35 distinct sentences, each in one split
    written = "".join((tmp_path / "out" / f"{name}.conll").read_text(encoding="utf-8") for name in SPLITS)
    assert "in\tO" in written and "-DOCSTART-" not in written


def test_a_conll_sentence_with_a_tag_no_training_sentence_has_goes_to_train(tmp_path, capsys):
    """finetune refuses a dev tag it never trained on, so split puts every sentence holding a rare
    tag (here each tag of its own sentence) in train, and says so."""
    from bertkit.tasks.formats import read_conll

    blocks = [f"w{i} O\nword{i} B-T{i % 15}\n" for i in range(15)] + [f"x{i} O\ny{i} B-COMMON\n" for i in range(45)]
    source = tmp_path / "all.conll"
    source.write_text("\n".join(blocks), encoding="utf-8")
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    parts = {name: read_conll(tmp_path / "out" / f"{name}.conll") for name in SPLITS}
    trained = {tag for e in parts["train"] for tag in e.tags}
    assert all(set(e.tags) <= trained for name in ("dev", "test") for e in parts[name])
    assert sum(len(part) for part in parts.values()) == 60 and parts["dev"] and parts["test"]
    assert "moved to train:" in said.out and "holding a tag no training sentence had" in said.out


def test_qa_like_jsonl_keeps_questions_of_one_context_together(tmp_path, capsys):
    source = tmp_path / "qa.jsonl"
    source.write_text("".join(json.dumps({"question": f"q{i}", "context": f"passage {i // 4}", "answer": "x"}) + "\n"
                              for i in range(200)), encoding="utf-8")
    code, said = split(["--input", source, "--out", tmp_path / "out", "--group-column", "context"], capsys)
    assert code == 0, said.err
    assert "no 'label' column: a random split" in said.out and "--task TASK" in said.out
    where = {}
    for name in SPLITS:
        for _, record in iter_jsonl(str(tmp_path / "out" / f"{name}.jsonl")):
            where.setdefault(record["context"], set()).add(name)
    assert len(where) == 50 and all(len(splits) == 1 for splits in where.values())


def test_a_multiple_choice_file_splits_by_context_and_says_to_finetune_multiple_choice(tmp_path, capsys):
    # walk AD: refused for want of 'text', then (--group-column context) told to run --task classification
    # with data.pair_column=context; a context asked twice (two questions on one passage) stays in one split
    source = tmp_path / "mc.jsonl"
    source.write_text("".join(json.dumps({"context": f"passage {i // 2}", "choices": [f"a{i}", f"b{i}", f"c{i}"],
                                          "label": i % 3}) + "\n" for i in range(120)), encoding="utf-8")
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    assert ("120 rows; multiple choice, stratified by 'label' (the right choice's position), rows sharing a "
            "'context' value kept in one split") in said.out
    assert "bertkit finetune --task multiple-choice --model MODEL" in said.out and "pair_column" not in said.out
    where = {}
    for name in SPLITS:
        examples = read_choices(str(tmp_path / "out" / f"{name}.jsonl"))  # what finetune reads
        for example in examples:
            where.setdefault(example.context, set()).add(name)
    assert len(where) == 60 and all(len(splits) == 1 for splits in where.values())


def test_a_squad_file_splits_by_passage_and_each_part_reads_back_as_squad(tmp_path, capsys):
    from bertkit.tasks.formats import read_squad

    def passage(a, p):
        context, answer = f"Passage {a}.{p}: the answer is {a * 10 + p}.", str(a * 10 + p)
        qas = [{"id": f"q{a}-{p}-{q}", "question": f"What is the answer {q}?", "is_impossible": q == 2,
                "answers": [] if q == 2 else [{"text": answer, "answer_start": context.rindex(answer)}]}
               for q in range(3)]
        return {"context": context, "note": "kept", "qas": qas}

    document = {"version": "v2.0", "data": [{"title": f"article {a}", "paragraphs": [passage(a, p) for p in range(4)]}
                                            for a in range(5)]}
    source = tmp_path / "all.json"
    source.write_text(json.dumps(document), encoding="utf-8")
    every = {e.id: e for e in read_squad(str(source), keep_all_questions=True)}
    code, out = split(["--input", source, "--out", tmp_path / "out", "--dev", "0.2", "--test", "0.2"], capsys)
    assert code == 0, out.err
    assert "60 rows; SQuAD questions: a random split, rows sharing a 'context' value kept in one split" in out.out
    assert "bertkit finetune --task qa" in out.out
    passages, ids = {}, []
    for name in ("train", "dev", "test"):
        part = json.loads((tmp_path / "out" / f"{name}.json").read_text(encoding="utf-8"))
        assert part["version"] == "v2.0"
        assert all(p["note"] == "kept" for article in part["data"] for p in article["paragraphs"])
        for example in read_squad(str(tmp_path / "out" / f"{name}.json"), keep_all_questions=True):
            assert example == every[example.id]  # question, context, answers, is_impossible as they were
            assert passages.setdefault(example.context, name) == name  # a passage's questions in one split
            ids.append(example.id)
    assert sorted(ids) == sorted(every) and len(set(passages.values())) == 3


def test_texts_that_differ_only_in_surrounding_space_share_a_split(tmp_path, capsys):
    rows = [(" " * (i % 3) + f"text {i % 30}" + " " * (i % 2), "ab"[i % 2]) for i in range(120)]
    source = write_csv(tmp_path / "all.csv", ["text", "label"], rows)
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    texts = {name: {row["text"].strip() for row in read_rows(tmp_path / "out" / f"{name}.csv")} for name in SPLITS}
    assert not texts["train"] & texts["dev"] and not texts["train"] & texts["test"] and not texts["dev"] & texts["test"]


@pytest.mark.parametrize("labels,described,task", [
    ([f"{i * 0.37:.2f}" for i in range(100)], "'label' holds numbers (a regression target): a random split",
     "regression"),
    (["a|b" if i % 3 else "a" for i in range(100)], "'label' holds label sets (multi-label): a random split",
     "classification"),
    (["0", "1"] * 50, "stratified by 'label' (2 classes)", "classification"),  # class ids are classes
])
def test_the_label_column_decides_the_stratification(tmp_path, capsys, labels, described, task):
    source = write_csv(tmp_path / "all.csv", ["text", "label"], [(f"text {i}", lab) for i, lab in enumerate(labels)])
    code, said = split(["--input", source, "--out", tmp_path / "out"], capsys)
    assert code == 0, said.err
    assert described in said.out and f"--task {task} " in said.out


def test_test_zero_writes_no_test_file_and_overwrite_replaces(tmp_path, capsys):
    source = write_csv(tmp_path / "all.csv", ["text", "label"], labelled_rows(50))
    out = tmp_path / "out"
    assert split(["--input", source, "--out", out, "--test", "0"], capsys)[0] == 0
    assert sorted(os.listdir(out)) == ["dev.csv", "train.csv"]
    assert split(["--input", source, "--out", out, "--seed", "1", "--overwrite"], capsys)[0] == 0
    assert sorted(os.listdir(out)) == ["dev.csv", "test.csv", "train.csv"]


def test_a_class_too_small_for_every_split_is_warned_about(tmp_path, capsys):
    source = write_csv(tmp_path / "all.csv", ["text", "label"],
                       [(f"text {i}", "big") for i in range(60)] + [("lonely", "rare")])
    with pytest.warns(UserWarning, match=r"1 class\(es\) have too few rows to appear in every split: 'rare' \(1 row\(s\): "
                                         r"train only\)"):
        assert main(["split", "--input", source, "--out", str(tmp_path / "out")]) == 0


def test_a_failed_write_leaves_no_file(tmp_path, capsys, monkeypatch):
    import bertkit.tasks.split as split_module

    source = write_csv(tmp_path / "all.csv", ["text", "label"], labelled_rows(50))
    real_writer, calls = csv.writer, []

    def failing_writer(*args, **kwargs):
        writer = real_writer(*args, **kwargs)

        class Failing:
            def writerow(self, row):
                calls.append(row)
                if len(calls) == 20:
                    raise OSError(errno.ENOSPC, "No space left on device")
                return writer.writerow(row)
        return Failing()

    monkeypatch.setattr(split_module.csv, "writer", failing_writer)
    code = main(["split", "--input", source, "--out", str(tmp_path / "out")])
    assert code == 2 and "no space left on the device" in capsys.readouterr().err
    assert os.listdir(tmp_path / "out") == []  # no split written, no temporary file left


# ---------------------------------------------------------------------------- refusals
def refusal_cases(tmp_path):
    good = write_csv(tmp_path / "all.csv", ["text", "label"], labelled_rows(50))
    (tmp_path / "notes.txt").write_text("one text\nanother\n", encoding="utf-8")
    (tmp_path / "array.json").write_text('[{"text": "a", "label": "b"}]', encoding="utf-8")
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    (tmp_path / "header.csv").write_text("text,label\n", encoding="utf-8")
    (tmp_path / "blank.jsonl").write_text("\n\n", encoding="utf-8")
    few = write_csv(tmp_path / "few.csv", ["text", "label"], [("a", "x"), ("b", "y"), ("c", "x")])
    same = write_csv(tmp_path / "same.csv", ["text", "label"], [("one text", "ab"[i % 2]) for i in range(3)]
                     + [("two", "a")] * 20)
    body = write_csv(tmp_path / "body.csv", ["body", "topic"], [(f"t {i}", "a") for i in range(20)])
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.csv").write_text("text,label\n", encoding="utf-8")
    (out / "dev.csv").write_text("text,label\n", encoding="utf-8")
    (tmp_path / "afile").write_text("", encoding="utf-8")
    return [
        (["--input", tmp_path / "al.csv"], "al.csv: no such file; did you mean", "all.csv?"),
        (["--input", tmp_path / "notes.txt"], "is a text file: one text per line, with no labels to split by"),
        (["--input", tmp_path / "array.json"], "is one JSON array", "jq -c"),
        (["--input", good, "--dev", "1"], "--dev 1 is a fraction of the rows: give a number from 0 up to"),
        (["--input", good, "--test", "-0.1"], "--test -0.1 is a fraction of the rows"),
        (["--input", good, "--dev", "0.5", "--test", "0.5"], "--dev 0.5 and --test 0.5 leave no rows for training"),
        (["--input", tmp_path / "empty.csv"], "empty.csv: file is empty"),
        (["--input", tmp_path / "header.csv"], "header.csv holds no non-blank input (a header only)"),
        (["--input", tmp_path / "blank.jsonl"], "blank.jsonl holds no non-blank input"),
        (["--input", few], "few.csv has 3 row(s), too few for --dev 0.1 --test 0.1: the dev split would get none; "
                           "it needs at least 5 rows"),
        (["--input", same, "--dev", "0.1", "--test", "0.4"], "has 23 rows but only 2 distinct 'text' values",
         "the dev split would get none; it needs at least 5 distinct values"),
        (["--input", body], "header has no column 'text' (columns: body, topic); name the column with --group-column"),
        (["--input", body, "--group-column", "body", "--label-column", "label"],
         "header has no column 'label' (columns: body, topic); name the column with --label-column NAME"),
        (["--input", good, "--out", out], f"--out {out} already holds {out}/train.csv, {out}/dev.csv; pass "
                                          "--overwrite to replace them"),
        (["--input", good, "--out", tmp_path / "afile"], "is a file; give the folder"),
    ]


def test_every_bad_input_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys):
    for argv, *fragments in refusal_cases(tmp_path):
        if "--out" not in argv:
            argv = [*argv, "--out", tmp_path / "new"]
        assert_refused(["split", *argv], capsys, tmp_path, *fragments)
        assert not (tmp_path / "new").exists()


def test_the_input_itself_is_never_overwritten(tmp_path, capsys):
    source = write_csv(tmp_path / "train.csv", ["text", "label"], labelled_rows(50))
    assert_refused(["split", "--input", source, "--out", tmp_path, "--overwrite"], capsys, tmp_path,
                   f"would write {source}, which is --input", "give another --out, or rename the input (e.g. all.csv)")


# ---------------------------------------------------------------------------- with finetune
def test_finetune_takes_the_split_files_without_the_overlap_warning(tmp_path, capsys):
    from tests.tasks.helpers import make_tiny_model

    rng = random.Random(0)
    texts = ["the striker scored a goal", "shares fell sharply", "the match ended late", "the bank raised rates"]
    rows = [(rng.choice(texts), "sport" if i % 2 else "business") for i in range(60)]  # texts repeat
    rows = [(text, "sport" if text in texts[::2] else "business") for text, _ in rows]
    rows += [(f"{text} again {i}", "sport" if text in texts[::2] else "business") for i, text in enumerate(texts * 5)]
    source = write_csv(tmp_path / "all.csv", ["text", "label"], rows)
    model = make_tiny_model(tmp_path / "tiny", texts * 3)
    assert split(["--input", source, "--out", tmp_path / "data", "--dev", "0.2", "--test", "0.2"], capsys)[0] == 0
    data = tmp_path / "data"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        code = main(["finetune", "--task", "classification", "--model", model, "--train", str(data / "train.csv"),
                     "--dev", str(data / "dev.csv"), "--out", str(tmp_path / "run"), "--no-progress", "--no-baseline",
                     "--set", "train.max_steps=1", "data.max_length=32"])
    assert code == 0, capsys.readouterr().err
    messages = [str(w.message) for w in seen]
    assert not [m for m in messages if "also training" in m], messages
    # the check is live: the same run on an overlapping dev file warns
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        main(["finetune", "--task", "classification", "--model", model, "--train", source, "--dev",
              str(data / "dev.csv"), "--out", str(tmp_path / "run2"), "--no-progress", "--no-baseline",
              "--set", "train.max_steps=1", "data.max_length=32"])
    assert any("also training" in str(w.message) for w in seen)


def test_the_readmes_split_line_makes_the_files_its_finetune_and_evaluate_lines_read(tmp_path, monkeypatch, capsys):
    from tests.test_readme import own_data_section, readme_commands

    (line,) = [argv for argv in readme_commands() if argv[0] == "split"]
    finetune = next(argv for argv in readme_commands() if argv[0] == "finetune")
    evaluate = next(argv for argv in readme_commands() if argv[0] == "evaluate")
    monkeypatch.chdir(tmp_path)
    write_csv(tmp_path / line[line.index("--input") + 1], ["text", "label"], labelled_rows(50))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(line) == 0
    for argv, option in ((finetune, "--train"), (finetune, "--dev"), (evaluate, "--data")):
        assert (tmp_path / argv[argv.index(option) + 1]).is_file(), (option, os.listdir(tmp_path))
    assert "--group-column context" in own_data_section()


def test_many_classes_show_the_smallest_too_and_few_dev_or_test_rows_are_warned_about(tmp_path, capsys):
    """Walk P #6: with 26 classes the dev line named the 10 largest, "+16 more classes" hid two with
    1 dev row each. Now the 6 largest and the 3 smallest, and one warning naming the few-row classes."""
    sizes = {f"c{k:02d}": 100 - 4 * k for k in range(10)} | {"c10": 30, "c11": 20, "tiny": 10}  # largest first
    rows = [(f"{label} text {i}", label) for label, n in sizes.items() for i in range(n)]
    source = write_csv(tmp_path / "all.csv", ["text", "label"], rows)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["split", "--input", source, "--out", str(tmp_path / "out")]) == 0
    dev = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("dev:"))
    counts = Counter(row["label"] for row in read_rows(tmp_path / "out" / "dev.csv"))
    shown = ", ".join(f"{label}: {counts[label]}" for label in ["c00", "c01", "c02", "c03", "c04", "c05"])
    assert dev.startswith(f"dev: {sum(counts.values())} rows ({shown}, ... 4 more ..., "
                          f"c10: {counts['c10']}, c11: {counts['c11']}, tiny: {counts['tiny']}) -> ")
    (few,) = [str(w.message) for w in seen if "rows in dev or test" in str(w.message)]
    small = sorted((label for label in sizes if counts[label] < 5), key=lambda label: (sizes[label], label))
    assert small == ["tiny", "c11", "c10"] and few.startswith(f"{len(small)} class(es) have fewer than 5 rows in dev or test: 'tiny' (dev 1, test ")
    assert all(repr(label) in few for label in small) and "'c00'" not in few
    assert "in macro-F1 each weighs as much as the largest class" in few


def test_classes_with_enough_dev_and_test_rows_get_no_few_rows_warning(tmp_path):
    source = write_csv(tmp_path / "all.csv", ["text", "label"], [(f"text {i}", "ab"[i % 2]) for i in range(100)])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["split", "--input", source, "--out", str(tmp_path / "out")]) == 0
    assert not [w for w in seen if "rows in dev or test" in str(w.message)]


def test_write_tsv_splits_writes_consecutive_slices_read_back_by_bertkit(tmp_path):
    """The data scripts' one writer (scripts/wordnet_sense_frequency.py, wordnet_synset_regression.py):
    the next sizes[name] rows per split, in order, after a header; a field with a tab is refused before
    any file is written."""
    rows = [(f"text {i}: \"quoted\" word", f"{i / 3:.4f}") for i in range(10)]
    write_tsv_splits(rows, {"train": 5, "dev": 2, "test": 2}, str(tmp_path / "out"))
    read = {name: [r for _, r, _ in iter_csv_rows(tmp_path / "out" / f"{name}.tsv", "\t")] for name in SPLITS}
    assert [(r["text"], r["label"]) for name in SPLITS for r in read[name]] == rows[:9]
    assert [len(read[name]) for name in SPLITS] == [5, 2, 2]
    with pytest.raises(DataError, match="holds a tab"):
        write_tsv_splits([("a\tb", "1")], {"train": 1}, str(tmp_path / "tabbed"))
    assert not (tmp_path / "tabbed").exists()


def test_groups_in_turn_fills_each_split_in_order_with_whole_groups():
    """The GCIDE scripts' headword loop: a split takes groups until it holds its size (the last group may
    carry it over), then the next split; the order stops once every split is full."""
    splits = {"train": [], "dev": []}
    taken = []
    for group, name in groups_in_turn(["a", "b", "c", "d", "e"], {"train": 3, "dev": 1}, splits):
        splits[name].extend([group] * 2)  # two rows a group
        taken.append((group, name))
    assert taken == [("a", "train"), ("b", "train"), ("c", "dev")]  # d and e: every split full
    assert splits == {"train": ["a", "a", "b", "b"], "dev": ["c", "c"]}
