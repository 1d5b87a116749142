import json

import pytest

from bertkit.errors import DataError
from bertkit.tasks.formats import (
    QAExample,
    TextExample,
    TokenExample,
    build_label_map,
    check_labels_known,
    infer_task_kind,
    read_conll,
    read_squad,
    read_text_dataset,
    write_conll,
    write_squad,
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- text datasets


def test_csv_classification_with_quoted_comma(tmp_path):
    path = write(tmp_path, "train.csv", 'text,label\n"good, very good",pos\nbad,neg\n')
    examples = read_text_dataset(path)
    assert examples == [TextExample("good, very good", None, "pos"), TextExample("bad", None, "neg")]
    assert infer_task_kind(examples) == "classification"


def test_tsv_pair_regression_and_unbalanced_quotes(tmp_path):
    path = write(tmp_path, "sts.tsv", 's1\ts2\tscore\nA "man eats\tA man eats food\t4.2\nx\ty\t0\n')
    examples = read_text_dataset(path, text_column="s1", pair_column="s2", label_column="score")
    assert examples[0] == TextExample('A "man eats', "A man eats food", 4.2)
    assert examples[1].label == 0.0 and isinstance(examples[1].label, float)
    assert infer_task_kind(examples) == "regression"


def test_integer_class_ids_stay_names_with_category(tmp_path):
    path = write(tmp_path, "sst.csv", "text,label\na,0\nb,1\n")
    assert [e.label for e in read_text_dataset(path)] == [0.0, 1.0]
    assert [e.label for e in read_text_dataset(path, label_type="category")] == ["0", "1"]


def test_mixed_numbers_and_names_are_names(tmp_path):
    path = write(tmp_path, "mix.csv", "text,label\na,1\nb,two\n")
    assert [e.label for e in read_text_dataset(path)] == ["1", "two"]


def test_csv_multilabel_pipe(tmp_path):
    path = write(tmp_path, "ml.csv", "text,label\na,x|y\nb,z\nc,\n")
    examples = read_text_dataset(path)
    assert [e.label for e in examples] == [["x", "y"], ["z"], []]
    assert infer_task_kind(examples) == "multilabel"
    label2id, id2label = build_label_map(e.label for e in examples)
    assert label2id == {"x": 0, "y": 1, "z": 2} and id2label == {0: "x", 1: "y", 2: "z"}


def test_jsonl_multilabel_and_numbers(tmp_path):
    path = write(tmp_path, "ml.jsonl", json.dumps({"text": "a", "label": ["p", "q"]}) + "\n\n"
                 + json.dumps({"text": "b", "label": "p"}) + "\n")
    assert [e.label for e in read_text_dataset(path)] == [["p", "q"], ["p"]]
    path = write(tmp_path, "reg.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": "2.5"}\n')
    assert [e.label for e in read_text_dataset(path)] == [1.0, 2.5]


def test_named_multi_label_task_reads_label_sets_in_the_documented_form_only(tmp_path):
    from bertkit.tasks import DataConfig, get_task

    read = get_task("multi-label-classification").read
    path = write(tmp_path, "ml.csv", "text,label\na,x|y\nb,z\nc,\n")  # no cell of "|" needed, none empty
    assert [e.label for e in read(str(path), DataConfig())] == [["x", "y"], ["z"], []]
    path = write(tmp_path, "single.csv", "text,label\na,x\nb,\n")  # once "line 3 has no label"
    assert [e.label for e in read(str(path), DataConfig())] == [["x"], []]
    path = write(tmp_path, "ml.jsonl", '{"text": "a", "label": ["x"]}\n{"text": "b", "label": ""}\n'
                                       '{"text": "c", "label": "z"}\n')
    assert [e.label for e in read(str(path), DataConfig())] == [["x"], [], ["z"]]  # "" is no class
    for name, content, config, form in (
            ("semi.csv", "text,label\na,x;y\nb,z\n", DataConfig(), r"labels joined by '\|' in one cell \(a\|b\), "
             r"or read them as they are with --set 'data\.multilabel_sep=;'"),
            ("pipe.jsonl", '{"text": "a", "label": "x|y"}\n', DataConfig(), r'a JSON list \(\["a", "b"\]\)'),
            ("pipe.csv", "text,label\na,x|y\n", DataConfig(multilabel_sep=";"), r"labels joined by ';' in one cell \(a;b\), "
             r"or read them as they are with --set 'data\.multilabel_sep=\|'")):
        path = write(tmp_path, name, content)
        with pytest.raises(DataError, match=rf"{name}: line \d label 'x.y' looks like several labels joined by "
                                            rf"'.'; write a multi-label set in this file as {form}$"):
            read(str(path), config)


def test_inferred_classes_that_look_like_joined_label_sets_are_warned_about(tmp_path, recwarn):
    path = write(tmp_path, "semi.csv", "text,label\na,x;y\nb,x;z\nc,x\nd,y\n")
    with pytest.warns(UserWarning, match=r"semi\.csv: 2 of the 4 classes look like several labels joined \('x;y'\); "
                                         r"each is trained as a class of its own.*labels joined by '\|' in one cell "
                                         r"\(a\|b\) \(multi-label\), or read them as they are with "
                                         r"--set 'data\.multilabel_sep=;'$"):
        assert [e.label for e in read_text_dataset(path, label_type="category")] == ["x;y", "x;z", "x", "y"]
    assert [e.label for e in read_text_dataset(path, multilabel_sep=";")] == [["x", "y"], ["x", "z"], ["x"], ["y"]]
    path = write(tmp_path, "pipe.jsonl", "".join(json.dumps({"text": t, "label": l}) + "\n"
                                                 for t, l in (("a", "x|y"), ("b", "y|z"), ("c", "x"))))
    with pytest.warns(UserWarning, match=r"write them as a JSON list"):
        read_text_dataset(path)
    path = write(tmp_path, "one.csv", "text,label\na,rock;pop\nb,x\nc,y\nd,z\ne,w\n")  # one such class: quiet
    read_text_dataset(path)
    assert not recwarn.list


def test_labels_that_differ_only_in_case_are_warned_about(tmp_path, recwarn):
    path = write(tmp_path, "case.csv", "text,label\na,German\nb,german\nc,GERMAN\nd,French\ne,french\nf,Spanish\n")
    with pytest.warns(UserWarning, match=r"case\.csv: 2 label\(s\) differ from another only in case \('French' / "
                                         r"'french', 'GERMAN' / 'German' / 'german'\)"):
        assert len({e.label for e in read_text_dataset(path)}) == 6  # still read as written
    read_text_dataset(write(tmp_path, "ok.csv", "text,label\na,German\nb,French\n"))
    assert not [w for w in recwarn.list if "only in case" in str(w.message)]


def test_labels_that_differ_only_in_unicode_form_are_warned_about(tmp_path, recwarn):
    # walk M #7: a third of the rows carry the NFD spelling (O + U+0308) of 'Wirtschaft/Ökonomie'
    nfc, nfd = "Wirtschaft/\u00d6konomie", "Wirtschaft/O\u0308konomie"
    rows = [f"t{k},{(nfc, nfd, 'Sport')[k % 3]}" for k in range(9)]
    path = write(tmp_path, "mixed.csv", "text,label\n" + "\n".join(rows) + "\n")
    with pytest.warns(UserWarning, match=r"mixed\.csv: 1 label\(s\) look the same as another but are written with "
                                         r"different Unicode characters \(composed, NFC, vs decomposed, NFD: "
                                         r"'Wirtschaft/O\\u0308konomie' / 'Wirtschaft/\\xd6konomie'\)"):
        assert len({e.label for e in read_text_dataset(path)}) == 3  # still read as written
    assert not [w for w in recwarn.list if "only in case" in str(w.message)]
    # a case variant written in NFD is still a case variant
    path = write(tmp_path, "both.csv", f"text,label\na,{nfc}\nb,{nfd.upper()}\nc,Sport\n")
    with pytest.warns(UserWarning, match=r"1 label\(s\) differ from another only in case"):
        read_text_dataset(path)


def test_unseen_labels_in_another_unicode_form_are_named():
    label2id, _ = build_label_map(["Sport", "Wirtschaft/\u00d6konomie"])
    with pytest.raises(DataError, match=r"1 of them: a training label on screen, but written with .*"
                                        r"'Wirtschaft/O\\u0308konomie' is training label 'Wirtschaft/\\xd6konomie'"
                                        r"\): save both files with one form \(NFC\)$"):
        check_labels_known(["Wirtschaft/O\u0308konomie", "Sport"], label2id, "dev", "dev.csv")
    with pytest.raises(DataError, match=r"save both files with one form \(NFC\); for the others: add training"):
        check_labels_known(["Wirtschaft/O\u0308konomie", "Politik", "Sport"], label2id, "dev")


def test_unlabelled_set(tmp_path):
    path = write(tmp_path, "test.csv", "text\nhello\n")
    assert read_text_dataset(path, label_column=None) == [TextExample("hello")]


@pytest.mark.parametrize(
    "name, content, kwargs, message",
    [
        ("a.csv", "text,label\na,x\nb,y,extra\n", {}, r"a\.csv: line 3 has 3 fields"),
        ("a.csv", "text,label\na,x\nb\n", {}, r"a\.csv: line 3 has fewer fields"),
        ("a.csv", "txt,label\na,x\n", {}, r"no column 'text' \(columns: txt, label\)"),
        ("a.csv", "text,label\na,x\nb,\n", {}, r"a\.csv: line 3 has no label"),
        ("a.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": \n', {}, r"a\.jsonl: line 2 is not valid JSON"),
        ("a.jsonl", '{"text": "a", "label": {"k": 1}}\n', {}, r"line 1 label .* must be a string"),
        ("a.jsonl", '{"text": "a"}\n', {}, r"line 1 has no key 'label'"),
        # in the task's terms, not the internal label_type='number'
        ("a.csv", "text,label\na,x\n", {"label_type": "number"},
         r"a\.csv: line 2 label 'x' is not a number; this task's labels must be numbers \(a regression target, a "
         r"similarity score\): correct it or remove the row$"),
        ("a.jsonl", '{"text": "a", "label": ["x"]}\n', {"label_type": "number"},
         r"a\.jsonl: line 1 has a list of labels; this task's labels are single numbers \(a regression target"),
        ("a.txt", "hello\n", {}, r"unknown extension '\.txt'"),
    ],
)
def test_text_dataset_errors_name_file_and_line(tmp_path, name, content, kwargs, message):
    path = write(tmp_path, name, content)
    with pytest.raises(DataError, match=message):
        read_text_dataset(path, **kwargs)


def test_a_spreadsheets_semicolon_csv_and_quoted_tsv_fields_are_read_as_written(tmp_path):
    # European Excel: ';' between fields (and ',' inside them); pandas/Excel TSV: a field holding a
    # quote is wrapped in quotes with the quote doubled. Both had been read wrongly (one column
    # "text;label"; the quotes kept in the text).
    path = write(tmp_path, "eu.csv", 'text;label\r\n"Zut, alors; dit-il";fr\r\nJa, genau;de\r\n')
    assert read_text_dataset(path) == [TextExample("Zut, alors; dit-il", None, "fr"), TextExample("Ja, genau", None, "de")]
    path = write(tmp_path, "q.tsv", 'text\tlabel\n"He said ""yes"" twice"\tpos\n"quoted" word\tneg\nA "lone quote\tneg\n')
    assert [e.text for e in read_text_dataset(path)] == ['He said "yes" twice', '"quoted" word', 'A "lone quote']


def test_csv_quote_never_closed_is_named_by_the_line_it_opened(tmp_path):
    # csv reads to the end of the file for the closing quote: the rows after it became one text
    path = write(tmp_path, "a.csv", 'text,label\nhello,a\n"broken quote,b\nthird row,a\nfourth,b\n')
    with pytest.raises(DataError, match=r"a\.csv: the quote opened on line 3 is never closed, so the 2 rows "
                                         r"after it \(e\.g\. 'third row,a'\)"):
        read_text_dataset(path)


def test_csv_quote_closed_later_warns_once_and_keeps_rows(tmp_path):
    # a stray quote closed by a later one silently merged rows 3-5 into one text
    text = 'text,label\nhello,a\n"stray,b\nthird,a\nfourth "x",b\n"a, b\nc, d",a\nlast,b\n'
    path = write(tmp_path, "a.csv", text)
    with pytest.warns(UserWarning, match=r"starts on line 3 .* holds a line that looks like a row \(e\.g\. 'third,a'\)") as seen:
        examples = read_text_dataset(path)
    assert len([w for w in seen if "looks like" in str(w.message)]) == 1  # once per file, not per record
    assert [e.label for e in examples] == ["a", "b", "a", "b"]


def test_csv_multi_line_text_without_row_lookalikes_is_quiet(tmp_path, recwarn):
    path = write(tmp_path, "a.csv", 'text,label\n"first line\nsecond line, no label",pos\nbad,neg\n')
    assert read_text_dataset(path)[0].text == "first line\nsecond line, no label"
    assert not [w for w in recwarn if "looks like" in str(w.message)]


def test_an_article_whose_headline_and_a_paragraph_hold_one_comma_is_quiet(tmp_path, recwarn):
    # walk N #1: bertkit's own split of BBC articles warned on every read: the headline and a later
    # paragraph each parse as two fields, but " with more." is no label of the file
    article = "Argentina, Venezuela in oil deal\n\nArgentina and Venezuela have extended a deal, with more."
    path = write(tmp_path, "a.csv", f'text,label\n"{article}",business\nshort text,sport\n')
    assert read_text_dataset(path)[0].text == article
    assert not [w for w in recwarn if "looks like" in str(w.message)]


def test_mixed_label_kinds_rejected():
    with pytest.raises(DataError, match="mixed kinds"):
        infer_task_kind([TextExample("a", label="x"), TextExample("b", label=1.0)])


def test_label_map_sorted_and_unknown_labels_listed():
    label2id, id2label = build_label_map(["b", "a", "c", "a"])
    assert label2id == {"a": 0, "b": 1, "c": 2}
    assert id2label[2] == "c"
    check_labels_known(["a", "c"], label2id, "dev")
    with pytest.raises(DataError, match=r"dev split has 2 label\(s\) never seen in training: 'd', 'e'"):
        check_labels_known(["a", "e", "d", "e"], label2id, "dev")
    with pytest.raises(DataError, match="'z'"):
        check_labels_known([["a", "z"]], label2id, "test")
    with pytest.raises(DataError, match="'z'") as refused:
        check_labels_known(["z"], {"1": 0}, "test")
    assert "regression" not in str(refused.value)  # said only when every label is a number


def test_unseen_labels_written_another_way_or_named_otherwise_say_so():
    label2id, _ = build_label_map(["0", "1", "2"])
    with pytest.raises(DataError, match=r"dev split \(dev.csv\) has 2 .*'0.0', '1.0'; they are training labels written "
                                        r"another way \(training has '0', '1', '2'\)"):
        check_labels_known(["0.0", "1.0"], label2id, "dev", "dev.csv")
    with pytest.raises(DataError, match=r"none of its labels is a training label .* name the classes differently"):
        check_labels_known(["sport", "business"], label2id, "dev")


def test_unseen_numeric_labels_name_the_regression_task():
    label2id, _ = build_label_map(["1.1461", "0.903", "2"])
    with pytest.raises(DataError, match=r"never seen in training: '1.2788'.*the labels are numbers: for a "
                                        r"numeric target use --task regression$"):
        check_labels_known(["1.2788", "2"], label2id, "dev")


# ---------------------------------------------------------------- CoNLL


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


"""


def test_read_conll_columns_docstart_and_blank_lines(tmp_path):
    path = write(tmp_path, "train.conll", CONLL)
    sentences = read_conll(path)
    assert sentences == [
        TokenExample(["EU", "rejects", "German"], ["B-ORG", "O", "B-MISC"]),
        TokenExample(["Peter", "Blackburn"], ["B-PER", "I-PER"]),
    ]
    pos = read_conll(path, token_col=0, tag_col=1)
    assert pos[0].tags == ["NNP", "VBZ", "JJ"]


def test_conll_round_trip(tmp_path):
    examples = [TokenExample(["a", "b"], ["B-X", "I-X"]), TokenExample(["c"], ["O"])]
    path = tmp_path / "out.conll"
    write_conll(path, examples)
    assert read_conll(path) == examples


def test_conll_wrong_column_count_names_line(tmp_path):
    path = write(tmp_path, "bad.conll", "EU NNP B-ORG\nrejects VBZ O\n\nPeter B-PER\n")
    with pytest.raises(DataError, match=r"bad\.conll: line 4 has 2 columns, expected 3"):
        read_conll(path)


def test_conll_column_count_names_an_invisible_space_that_split_a_word(tmp_path):
    """Walk M #14: 'São\u00a0Paulo B-LOC' is 3 columns to split(), 2 in an editor; the error names
    the no-break space (or an ideographic space), on the line or on the first token line."""
    path = write(tmp_path, "nbsp.conll", "Müller B-PER\nwohnt O\nin O\nSão\u00a0Paulo B-LOC\n")
    with pytest.raises(DataError, match=r"line 4 has 3 columns, expected 2 .*\(its 2nd column follows the "
                                        r"no-break space U\+00A0 inside 'São\\xa0Paulo'; CoNLL columns are "
                                        r"separated by spaces or tabs"):
        read_conll(path)
    path = write(tmp_path, "first.conll", "東京\u3000都 B-LOC\nist O\n")
    with pytest.raises(DataError, match=r"line 2 has 2 columns, expected 3 .*the first token line's 2nd column "
                                        r"follows the ideographic space U\+3000"):
        read_conll(path)
    path = write(tmp_path, "plain.conll", "a B-X\nb c O\n")
    with pytest.raises(DataError, match=r"blank line$"):
        read_conll(path)


def test_conll_u_comment_lines_are_named_in_the_column_count_error(tmp_path):
    """Walk AC: a CoNLL-U file's '# sent_id = 1' is read as a 4-column token line, so the error blamed
    line 2 ('# text = ...', 6 columns) and said nothing of comments."""
    conllu = "# sent_id = 1\n# text = Alice lives here.\n1\tAlice\tAlice\tPROPN\n2\tlives\tlive\tVERB\n"
    path = write(tmp_path, "ud.conllu", conllu)
    with pytest.raises(DataError, match=r"line 2 has 6 columns, expected 4 .*\(line 1 begins with '#', a CoNLL-U "
                                        r"comment line, not a word: remove such lines, e\.g\. grep -v '\^#' "):
        read_conll(path)
    path = write(tmp_path, "late.conll", "Alice B-PER\n# a comment here\n")
    with pytest.raises(DataError, match=r"\(line 2 begins with '#'"):
        read_conll(path)


def test_conll_too_few_columns_for_request(tmp_path):
    path = write(tmp_path, "one.conll", "EU\nrejects\n")
    with pytest.raises(DataError, match="line 1 has 1 column"):
        read_conll(path)


def test_write_conll_rejects_whitespace_token(tmp_path):
    with pytest.raises(DataError, match="whitespace"):
        write_conll(tmp_path / "x.conll", [TokenExample(["New York"], ["B-LOC"])])


def test_token_example_length_mismatch():
    with pytest.raises(DataError, match="2 tokens but 1 tags"):
        TokenExample(["a", "b"], ["O"])


# ---------------------------------------------------------------- SQuAD


def squad_doc(qas, context="The cat sat on the mat.", version="v2.0"):
    return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_read_squad_v11_and_v2(tmp_path):
    qas = [
        {"id": "q1", "question": "Who sat?", "answers": [{"text": "The cat", "answer_start": 0},
                                                          {"text": "cat", "answer_start": 4}]},
        {"id": "q2", "question": "Where is the dog?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "mat", "answer_start": 19}]},
    ]
    path = write(tmp_path, "dev.json", json.dumps(squad_doc(qas)))
    examples = read_squad(path)
    assert examples[0] == QAExample("q1", "Who sat?", "The cat sat on the mat.",
                                    [{"text": "The cat", "answer_start": 0}, {"text": "cat", "answer_start": 4}], False)
    assert examples[1].is_impossible and examples[1].answers == []
    path = write(tmp_path, "v1.json", json.dumps(squad_doc(qas[:1], version="1.1")))
    assert read_squad(path)[0].answers[1]["answer_start"] == 4


def test_read_squad_repairs_and_counts_bad_answers(tmp_path):
    qas = [
        {"id": "shifted", "question": "?", "answers": [{"text": "mat", "answer_start": 3}]},
        {"id": "partly", "question": "?", "answers": [{"text": "dog", "answer_start": 0},
                                                      {"text": "cat", "answer_start": 4}]},
        {"id": "gone", "question": "?", "answers": [{"text": "bird", "answer_start": 2}]},
    ]
    path = write(tmp_path, "dev.json", json.dumps(squad_doc(qas)))
    with pytest.warns(UserWarning, match=r"moved 1 answer_start.*dropped 2 answer\(s\).*1 question"):
        examples, stats = read_squad(path, return_stats=True)
    assert [e.id for e in examples] == ["shifted", "partly"]
    assert examples[0].answers == [{"text": "mat", "answer_start": 19}]
    assert examples[1].answers == [{"text": "cat", "answer_start": 4}]
    assert (stats.fixed_starts, stats.dropped_answers, stats.dropped_questions, stats.questions) == (1, 2, 1, 2)


def test_read_squad_structure_errors_name_record(tmp_path):
    path = write(tmp_path, "bad.json", json.dumps(squad_doc([{"id": "q9", "answers": []}])))
    with pytest.raises(DataError, match=r"bad\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\] \(id q9\) has no 'question'"):
        read_squad(path)
    path = write(tmp_path, "broken.json", '{"data": [\n  {"paragraphs": ]}')
    with pytest.raises(DataError, match=r"broken\.json: not valid JSON \(line 2"):
        read_squad(path)


def test_squad_round_trip(tmp_path):
    examples = [
        QAExample("a", "Who?", "Ann met Bo.", [{"text": "Ann", "answer_start": 0}], False),
        QAExample("b", "Whom?", "Ann met Bo.", [{"text": "Bo", "answer_start": 8}], False),
        QAExample("c", "Why?", "Rain fell.", [], True),
    ]
    path = tmp_path / "out.json"
    write_squad(path, examples)
    document = json.loads(path.read_text())
    assert len(document["data"][0]["paragraphs"]) == 2
    assert read_squad(path) == examples


def test_a_missing_column_says_which_option_names_it(tmp_path):
    """A wrong column name gets the --set option that names the column; a CSV without a header
    line (its first row read as one) gets told to add one."""
    renamed = tmp_path / "renamed.csv"
    renamed.write_text("sentence,category\nShares fell.,business\n")
    with pytest.raises(DataError, match=r"no column 'text' \(columns: sentence, category\); name the column "
                                        r"that holds it with --set data.text_column=NAME"):
        read_text_dataset(renamed)
    with pytest.raises(DataError, match=r"--set data.label_column=NAME"):
        read_text_dataset(renamed, text_column="sentence")
    jsonl = tmp_path / "renamed.jsonl"
    jsonl.write_text(json.dumps({"text": "Shares fell.", "topic": "business"}) + "\n")
    with pytest.raises(DataError, match=r"no key 'label' \(keys: text, topic\); .*data.label_column=NAME"):
        read_text_dataset(jsonl)
    headless = tmp_path / "headless.csv"
    headless.write_text("The striker scored twice in the final.,sport\nShares in the bank fell.,business\n")
    with pytest.raises(DataError, match="the first line looks like a data row: add a header line"):
        read_text_dataset(headless)
