import gzip
import json
import warnings

import pytest

from bertkit.data import corpus as corpus_module
from bertkit.data.corpus import open_corpus, split_sentences
from bertkit.errors import DataError


@pytest.mark.parametrize("text, expected", [
    ("Mr. Smith met Dr. Jones. They talked.", ["Mr. Smith met Dr. Jones.", "They talked."]),
    ("The U.S. economy grew. Prices rose!", ["The U.S. economy grew.", "Prices rose!"]),
    ('He said "Stop!" Then he ran. Did he? Yes.', ['He said "Stop!"', "Then he ran.", "Did he?", "Yes."]),
    ("Sales rose 3.5% in 2004. 2005 was worse.", ["Sales rose 3.5% in 2004.", "2005 was worse."]),
    ('It ended. "Never again," she said.', ["It ended.", '"Never again," she said.']),
    ("John F. Kennedy spoke. The crowd cheered.", ["John F. Kennedy spoke.", "The crowd cheered."]),
    ("A title\n\nFirst line. second clause stays.\nNew line", ["A title", "First line. second clause stays.", "New line"]),
    ("   \n \n", []),
])
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_file_mode_reads_directory_recursively_in_sorted_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.txt").write_text("Second doc. Two sentences.")
    (tmp_path / "a.txt").write_text("First doc.")
    (tmp_path / "c.txt").write_text("  \n")  # whitespace only: no document
    corpus = open_corpus(tmp_path)
    assert list(corpus) == [["First doc."], ["Second doc.", "Two sentences."]]
    assert corpus.stats["documents"] == 2 and corpus.stats["sentences"] == 3


def test_blank_line_mode(tmp_path):
    f = tmp_path / "docs.txt"
    f.write_text("Doc one. Still one.\nMore of one.\n\n\n  \nDoc two.\n\nDoc three!")
    assert list(open_corpus(f, mode="blank")) == [
        ["Doc one.", "Still one.", "More of one."], ["Doc two."], ["Doc three!"]]


def test_jsonl_mode(tmp_path):
    f = tmp_path / "docs.jsonl"
    f.write_text("\n".join(json.dumps(o) for o in [{"text": "A b. C d.", "id": 1}, {"text": "E f."}]) + "\n\n")
    assert list(open_corpus(f)) == [["A b.", "C d."], ["E f."]]
    f.write_text('{"text": "ok."}\n{"body": "no text field"}\n')
    with pytest.raises(DataError, match=r"docs.jsonl: line 2 .*'text'"):
        list(open_corpus(f))
    f.write_text('{"text": "ok."}\nnot json\n')
    with pytest.raises(DataError, match=r"docs.jsonl: line 2 is not valid JSON"):
        list(open_corpus(f))


def test_binary_files_are_skipped_with_a_warning(tmp_path):
    # (a .txt name: since a folder reads only its .txt and table files, an image.bin is left out by its name)
    (tmp_path / "good.txt").write_text("Good text here.")
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\x00\x00\x01binary")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (tmp_path / "zipped.txt").write_bytes(gzip.compress(b"Zipped text."))
    with pytest.warns(UserWarning) as record:
        docs = list(open_corpus(tmp_path))
    assert docs == [["Good text here."]]
    messages = " ".join(str(w.message) for w in record)
    assert "image.txt is a binary file" in messages and "latin1.txt" in messages
    assert "zipped.txt is gzip-compressed: gunzip it first" in messages


def test_line_mode_is_one_document_per_non_blank_line_streamed(tmp_path, monkeypatch):
    """A file of one article per line was one document (or refused) in every mode (walk O #3)."""
    f = tmp_path / "lines.txt"
    f.write_text("First article. Two sentences.\n\n  \nSecond article.\r\nThird one!\n", encoding="utf-8")
    monkeypatch.setattr(corpus_module, "read_text", None)  # streamed line by line, never read whole
    corpus = open_corpus(f, mode="line")
    assert list(corpus) == [["First article.", "Two sentences."], ["Second article."], ["Third one!"]]
    assert corpus.stats["documents"] == 3
    assert "line" in corpus_module.MODES


def test_a_folder_reads_its_txt_and_table_files_and_names_the_rest_once(tmp_path):
    """A README.md and an index.html were read as documents, and the tokenizer learnt "<" and
    "body" (walk O #5); hidden files and folders are skipped without a word, as class_folders.py's."""
    (tmp_path / "a.txt").write_text("Article a.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.TXT").write_text("Article b.")
    (tmp_path / "sub" / "c.jsonl").write_text(json.dumps({"text": "Record c."}) + "\n")
    (tmp_path / "README.md").write_text("# how these files were made")
    (tmp_path / "index.html").write_text("<html><body>page</body></html>")
    (tmp_path / ".notes").write_text("hidden")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]")
    with pytest.warns(UserWarning) as record:
        corpus = open_corpus(tmp_path)
    assert [p.name for p in corpus.paths] == ["a.txt", "b.TXT", "c.jsonl"]
    assert list(corpus) == [["Article a."], ["Article b."], ["Record c."]]
    assert len(record) == 1
    message = str(record[0].message)
    assert "2 file(s) left out" in message and "README.md, index.html" in message and "rename them to .txt" in message
    assert "config" not in message and ".notes" not in message
    for i in range(12):
        (tmp_path / f"page{i:02d}.html").write_text("<p>x</p>")
    with pytest.warns(UserWarning, match=r"14 file\(s\) left out.*page07.html and 4 more"):
        open_corpus(tmp_path)



def test_a_tokenizer_or_model_folder_inside_a_corpus_folder_is_left_out(tmp_path):
    """`tokenizer train --files my_texts/*.txt --out my_texts/tok`, then `prepare --corpus my_texts/`: the
    tokenizer's vocab.txt (8,000 lines) was read as a document, and its JSON files named as text to rename
    (walk U); a checkpoint's folder (config.json, tokenizer_config.json, vocab.txt) alike."""
    from bertkit.tokenizer import Tokenizer

    (tmp_path / "a.txt").write_text("The markets rallied on Monday. Shares rose.\n")
    (tmp_path / "b.txt").write_text("The striker scored twice. The crowd cheered.\n")
    Tokenizer.train_wordpiece([tmp_path / "a.txt", tmp_path / "b.txt"], vocab_size=100,
                              show_progress=False).save_pretrained(tmp_path / "tok")
    (tmp_path / "run" / "checkpoint-4").mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json", "vocab.txt"):
        (tmp_path / "run" / "checkpoint-4" / name).write_text("{}\n")
    (tmp_path / "run" / "notes.txt").write_text("A note of the run, read as text.\n")
    with pytest.warns(UserWarning) as record:
        corpus = open_corpus(tmp_path)
    assert [p.name for p in corpus.paths] == ["a.txt", "b.txt", "notes.txt"]
    messages = [str(w.message) for w in record]
    assert len(messages) == 1 and "left out run/checkpoint-4, tok, a tokenizer's or model's folder" in messages[0]

def test_a_folder_of_no_text_file_is_refused_naming_its_files(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"\x00\x01")
    (tmp_path / "notes.md").write_text("words")
    with pytest.raises(DataError, match=r"holds no \.txt, \.jsonl, \.csv, \.tsv file, only a\.bin, notes\.md"):
        open_corpus(tmp_path)
    assert list(open_corpus(tmp_path / "notes.md")) == [["words"]]  # a file named as the corpus: read as it is


def test_a_gzip_file_named_alone_is_refused_saying_so(tmp_path):
    f = tmp_path / "big.txt.gz"
    f.write_bytes(gzip.compress(b"Some text.\n\nMore text.\n"))
    for mode in ("file", "blank", "line"):
        with pytest.raises(DataError, match=r"big\.txt\.gz is gzip-compressed: gunzip it first"):
            list(open_corpus(f, mode=mode))


def test_one_text_file_of_too_few_documents_is_refused_before_reading(tmp_path):
    """pretrain's and prepare's one check (walk O #4, #6): empty, gzip, or one file read whole."""
    from bertkit.data.documents import check_document_count
    from bertkit.errors import ConfigError

    f = tmp_path / "lines.txt"
    f.write_text("one article.\nanother article.\n")
    with pytest.raises(ConfigError, match=r"the corpus has 1 document\(s\).*one document per line: --set data\.mode=line"):
        check_document_count(str(f), "file")
    check_document_count(str(f), "line")
    check_document_count(str(tmp_path), "file")  # a folder: counted as it is read
    check_document_count("bbc", "file")
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataError, match=r"empty\.txt is empty"):
        check_document_count(str(tmp_path / "empty.txt"), "line")


def test_empty_or_unusable_corpus_raises(tmp_path):
    (tmp_path / "blank.txt").write_text("\n   \n\t\n")
    with pytest.raises(DataError, match="no usable text"):
        list(open_corpus(tmp_path))
    (tmp_path / "blank.txt").write_bytes(b"\x00\x01\x02")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DataError, match="no usable text"):
            list(open_corpus(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="contains no files"):
        open_corpus(empty)


def test_bad_path_and_mode(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        open_corpus("/no/such/corpus/dir")
    (tmp_path / "my_texts.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(DataError, match=r"my_txts\.jsonl does not exist \(did you mean .*my_texts\.jsonl\?\)"):
        open_corpus(str(tmp_path / "my_txts.jsonl"))
    with pytest.raises(DataError, match="unknown corpus mode"):
        open_corpus("bbc", mode="paragraphs")
    for empty in ("", "  "):  # not the working directory (Path("") is "."): a clear refusal
        with pytest.raises(DataError, match="corpus is empty"):
            open_corpus(empty)


def test_named_bbc_corpus_streams_articles_without_a_warning():
    """Its one Latin-1 article (always skipped) had been warned about on every run."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        docs = list(open_corpus("bbc"))
    assert len(docs) == 2224  # 2,225 articles, the one that is not UTF-8 left out
    assert all(len(d) > 3 for d in docs[:5])
    assert all(isinstance(s, str) and s == s.strip() and s for d in docs[:5] for s in d)


def test_wordnet_glosses_are_documents():
    from bertkit.data.corpus import WORDNET_DIR

    if not (WORDNET_DIR / "data.verb").is_file():
        pytest.skip("wordnet-base is not installed")
    corpus = open_corpus("wordnet")
    for doc in corpus:
        if doc[0].startswith("cause to be alert and energetic"):
            assert doc == ["cause to be alert and energetic", "Coffee and tea stimulate me",
                           "This herbal infusion doesn't stimulate"]
            break
    else:
        pytest.fail("the gloss of 'stimulate' was not found")


def test_bbc_train_corpus_holds_the_training_split_only():
    """Pre-training on `bbc:train` never reads an article the bbc task scores on."""
    from bertkit.tasks.realdata import bbc_topics

    splits = bbc_topics()
    documents = {tuple(doc) for doc in open_corpus("bbc:train")}
    assert documents == {tuple(split_sentences(e.text)) for e in splits["train"]}
    held_out = {tuple(split_sentences(e.text)) for e in splits["dev"] + splits["test"]}
    assert len(held_out) > 600 and not documents & held_out


def test_a_fine_tuning_table_is_a_corpus_of_its_text_column(tmp_path):
    """train.csv / train.tsv (text and label columns): one document per row, the labels unread,
    so a task's own training file feeds continued pre-training as it is (configs/tapt-mini.toml)."""
    (tmp_path / "train.csv").write_text('text,label\n"Shares fell. The bank, a lender, lost money.",business\n'
                                        '"The striker scored.",sport\n', encoding="utf-8")
    assert list(open_corpus(tmp_path / "train.csv")) == [["Shares fell.", "The bank, a lender, lost money."],
                                                         ["The striker scored."]]
    (tmp_path / "train.tsv").write_text("label\ttext\nsport\tA goal. Then another.\n", encoding="utf-8")
    assert list(open_corpus(tmp_path / "train.tsv")) == [["A goal.", "Then another."]]
    (tmp_path / "bad.csv").write_text("sentence,label\nA goal.,sport\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no 'text' column \(the header has sentence, label\)"):
        list(open_corpus(tmp_path / "bad.csv"))


@pytest.mark.parametrize("text, sentences", [
    ("Das ist gut. Über den Fluss fährt ein Zug.", ["Das ist gut.", "Über den Fluss fährt ein Zug."]),
    ("Это хорошо. Мы идём домой.", ["Это хорошо.", "Мы идём домой."]),
    ("İyi günler. İstanbul güzel.", ["İyi günler.", "İstanbul güzel."]),
    ("我今天很忙。明天见！你好吗？", ["我今天很忙。", "明天见！", "你好吗？"]),
    ("שלום עולם. מה שלומך? הכל טוב.", ["שלום עולם.", "מה שלומך?", "הכל טוב."]),
    ("यह अच्छा है। मैं घर जा रहा हूँ।", ["यह अच्छा है।", "मैं घर जा रहा हूँ।"]),
    ("Wait… Then go. He said e.g. this.", ["Wait…", "Then go.", "He said e.g. this."]),
])
def test_sentences_end_in_any_script(text, sentences):
    """Only ".!?" before an ASCII capital ended a sentence: Russian, Chinese or Hebrew documents
    were one sentence each, and a sentence-pair objective (SOP, NSP) found no training example."""
    assert split_sentences(text) == sentences
