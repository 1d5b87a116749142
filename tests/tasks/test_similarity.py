"""The similarity task: the CoSENT loss against sentence-transformers' CoSENTLoss, the TF-IDF cosine
against scikit-learn's, the reader's errors, the CLI from fine-tune to predict (the saved model
loads in sentence-transformers with the same vectors, and predict's scores are their cosines), and
a tiny model that learns to order pairs."""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
import warnings

import numpy as np
import pytest
import torch

from bertkit.commands.cli import main
from bertkit.errors import DataError
from bertkit.inference.encode import SentenceEncoder
from bertkit.models.sentence_embedding import SentenceEmbeddingModel, cosent_loss
from bertkit.models.sentence_layout import has_layout
from bertkit.tasks import Collator, DataConfig, get_task
from bertkit.tasks.formats import TextExample
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

WORDS = ("cat dog bird fish tree car road river house city rain sun moon star boat train music film book game "
         "bread milk stone glass").split()


def scored_pairs(count: int, seed: int = 0) -> list[TextExample]:
    """Pairs of 6-word texts; the score is how many words the second keeps from the first (0-6)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        first = rng.sample(WORDS, 6)
        kept = rng.randint(0, 6)
        others = [w for w in WORDS if w not in first]
        second = first[:kept] + rng.sample(others, 6 - kept)
        rng.shuffle(second)
        pairs.append(TextExample(" ".join(first), " ".join(second), float(kept)))
    return pairs


# the same thing in two words: a pair that means alike shares no word, so a bag of words (and a
# random encoder's mean of word vectors) cannot see it
SYNONYMS = [("cat", "feline"), ("dog", "hound"), ("car", "automobile"), ("road", "street"), ("house", "home"),
            ("river", "stream"), ("film", "movie"), ("book", "novel"), ("boat", "ship"), ("stone", "rock"),
            ("sun", "daylight"), ("city", "town")]


def synonym_pairs(count: int, seed: int = 0) -> list[TextExample]:
    """A text of 4 first words against a text of 4 second words; the score is how many of the
    first text's things the second names (0-4)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        things = rng.sample(range(len(SYNONYMS)), 4)
        kept = rng.randint(0, 4)
        others = rng.sample([i for i in range(len(SYNONYMS)) if i not in things], 4 - kept)
        second = [SYNONYMS[i][1] for i in things[:kept] + others]
        rng.shuffle(second)
        pairs.append(TextExample(" ".join(SYNONYMS[i][0] for i in things), " ".join(second), float(kept)))
    return pairs


def write_pairs(path, pairs) -> str:
    rows = [{"text": e.text, "text_pair": e.text_pair, "label": e.label} for e in pairs]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny-similarity"),
                           [" ".join(WORDS), " ".join(word for pair in SYNONYMS for word in pair)] * 5)


def run_cli(argv, capsys) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    return capsys.readouterr().out.strip().splitlines()


# ---------------------------------------------------------------------------- the loss and TF-IDF
def test_loss_equals_sentence_transformers_cosent_loss(minilm_dir):
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    pairs = [("a man is playing a guitar", "a person plays an instrument", 4.2),
             ("a woman slices an onion", "a man is riding a horse", 0.4),
             ("the cat sits on the mat", "a cat is sitting on a rug", 4.2),  # a tie with the first: no term
             ("stocks fell on monday", "share prices dropped at the start of the week", 3.5),
             ("a dog runs in the park", "the dog is sleeping indoors", 1.6),
             ("two kids play football", "children are playing soccer", 0.0)]  # ranked wrongly by any sane model
    scores = torch.tensor([s for _, _, s in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference_model = st.SentenceTransformer(minilm_dir, device="cpu").eval()
        with torch.no_grad():
            expected = CoSENTLoss(reference_model)([reference_model.preprocess([a for a, _, _ in pairs]),
                                                    reference_model.preprocess([b for _, b, _ in pairs])], scores).item()
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    examples = [TextExample(a, b, s) for a, b, s in pairs]
    batch = Collator(tokenizer.pad_token_id)(
        get_task("similarity").encode(tokenizer, examples, DataConfig(max_length=64), None, True, "train"))
    assert batch["input_ids"].shape[:2] == (6, 2) and batch["labels"].dtype == torch.float32
    model = SentenceEmbeddingModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        ours = model(**batch).loss.item()
    assert expected > 1.0 and ours == pytest.approx(expected, rel=1e-4)


def test_loss_on_embeddings_equals_cosent_loss_with_ties_and_any_scale():
    pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss

    generator = torch.Generator().manual_seed(0)
    first, second = torch.randn(9, 16, generator=generator), torch.randn(9, 16, generator=generator)
    for scores in (torch.tensor([0.0, 5, 5, 2, 1, 1, 1, 3.5, 0]), torch.rand(9, generator=generator)):
        expected = CoSENTLoss(None).compute_loss_from_embeddings([first, second], scores)
        torch.testing.assert_close(cosent_loss(first, second, scores), expected, rtol=1e-5, atol=1e-5)
        # the order alone counts: any increasing map of the scores leaves the loss as it is
        torch.testing.assert_close(cosent_loss(first, second, 10 * scores ** 3 - 7), expected, rtol=1e-5, atol=1e-5)
    assert cosent_loss(first, second, torch.ones(9)).item() == 0.0  # no ordered pair: log(1 + 0)


def test_tfidf_cosine_equals_scikit_learns():
    text = pytest.importorskip("sklearn.feature_extraction.text")
    from bertkit.tasks.similarity import tfidf_cosines

    pairs = scored_pairs(30) + [TextExample("The cat, the CAT and the dog", "a dog; not a cat", 1.0)]
    fitted_on = [e.text for e in scored_pairs(50, seed=1)]
    for corpus in (None, fitted_on):  # the pairs' own texts; other texts (words of the pairs unseen: left out)
        texts = [t for e in pairs for t in (e.text, e.text_pair)]
        vectorizer = text.TfidfVectorizer(token_pattern=r"\w+", sublinear_tf=True).fit(corpus or texts)
        a = vectorizer.transform([e.text for e in pairs])
        b = vectorizer.transform([e.text_pair for e in pairs])
        expected = np.asarray(a.multiply(b).sum(axis=1)).ravel()
        np.testing.assert_allclose(tfidf_cosines(pairs, corpus), expected, rtol=1e-9, atol=1e-12)
    assert tfidf_cosines(pairs)[-1] > 0.1  # lower-cased, punctuation split off: shared words count


def test_tfidf_cosine_of_pairs_sharing_no_word_is_no_order_not_null():
    """The README's sts.csv: no pair shares a word, so every TF-IDF cosine is 0; its spearman and
    pearson were null (JSON's nan) where embedding.md says a constant score has no order: 0."""
    from bertkit.tasks.similarity import reference

    pairs = [TextExample("A man is playing a guitar.", "A person plays an instrument.", 4.2),
             TextExample("A woman slices an onion.", "A man is riding a horse.", 0.4)]
    assert reference(pairs) == {"method": "TF-IDF cosine", "spearman": 0.0, "pearson": 0.0}
    assert get_task("similarity").baseline(pairs, pairs) == {"spearman": 0.0, "pearson": 0.0}


# ---------------------------------------------------------------------------- reading
def test_reader_takes_csv_tsv_and_jsonl_and_says_what_to_do_about_bad_rows(tmp_path):
    task = get_task("similarity")
    (tmp_path / "p.csv").write_text("text,text_pair,label\na b,c d,0.5\ne f,g h,4\n", encoding="utf-8")
    (tmp_path / "p.tsv").write_text("s1\ts2\tscore\na b\tc d\t0.5\ne f\tg h\t4\n", encoding="utf-8")
    expected = [TextExample("a b", "c d", 0.5), TextExample("e f", "g h", 4.0)]
    assert task.read(str(tmp_path / "p.csv"), DataConfig()) == expected
    columns = DataConfig(text_column="s1", pair_column="s2", label_column="score")
    assert task.read(str(tmp_path / "p.tsv"), columns) == expected
    assert task.read(write_pairs(tmp_path / "p.jsonl", expected), DataConfig()) == expected

    def refused(content: str, match: str, data: DataConfig = DataConfig()) -> None:
        (tmp_path / "bad.csv").write_text(content, encoding="utf-8")
        with pytest.raises(DataError, match=match):
            task.read(str(tmp_path / "bad.csv"), data)

    refused("text,pair,label\na,b,1\n", r"bad.csv: header has no column 'text_pair' .*--set data.pair_column=NAME")
    refused("text,text_pair,score\na,b,1\n", r"no column 'label' .*--set data.label_column=NAME")
    refused("text,text_pair,label\na,b,1\nc,d,high\n", r"bad.csv: line 3 label 'high' is not a number")
    refused("text,text_pair,label\na,b,1\nc,  ,2\n", r"bad.csv: line 3 has an empty 'text_pair'")
    refused("text,text_pair,label\n ,b,1\nc,d,2\n", r"bad.csv: line 2 has an empty 'text'")
    refused("text,text_pair,label\na,b,1\nc,d,\n", r"bad.csv: line 3 has no label")
    refused("text,text_pair,label\na,b,3\nc,d,3\n", r"bad.csv: every pair has the score 3; .*at least 2 different")
    with pytest.raises(DataError, match="a .txt file holds one text per line"):
        task.read_inputs(str(tmp_path / "in.txt"), DataConfig())
    # the training examples refused with the same line, named by their source (file, or built-in and split)
    one_score = r"wordnet-gloss-similarity:train: every pair has the score 1; .*at least 2 different scores"
    with pytest.raises(DataError, match=one_score):
        task.encode(None, [TextExample("a", "b", 1.0)] * 2, DataConfig(), None, True, "wordnet-gloss-similarity:train")


def test_training_pairs_cut_to_one_score_are_named_by_their_source_and_the_cut(tiny, tmp_path, capsys):
    """A built-in set cut by data.max_train_examples said "train: every pair has the same score"
    (no source, no score, worded unlike the file's refusal)."""
    from bertkit.tasks.builtin import source_name

    assert source_name("wordnet-gloss-similarity", "train") == "wordnet-gloss-similarity:train"
    assert source_name("wordnet-gloss-similarity:test", "train") == "wordnet-gloss-similarity:test"
    assert source_name("my/train.csv", "train") == "my/train.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["finetune", "--task", "similarity", "--model", tiny, "--train", "wordnet-gloss-similarity",
                     "--out", str(tmp_path / "out"), "--no-progress", "--set", "data.max_train_examples=1",
                     "data.max_length=24"])
    err = capsys.readouterr().err
    assert code == 2 and "wordnet-gloss-similarity:train: every pair of the 1 data.max_train_examples=1 keeps " \
        "has the score " in err and "similarity needs pairs of at least 2 different scores" in err, err


# ---------------------------------------------------------------------------- the commands
def test_finetune_evaluate_predict_and_sentence_transformers_reads_the_result(tiny, tmp_path, capsys):
    st = pytest.importorskip("sentence_transformers")
    train = write_pairs(tmp_path / "train.jsonl", scored_pairs(32))
    dev = write_pairs(tmp_path / "dev.jsonl", scored_pairs(16, seed=1))
    out = str(tmp_path / "similar")
    lines = run_cli(["finetune", "--task", "similarity", "--model", tiny, "--train", train, "--dev", dev,
                     "--out", out, "--no-progress", "--set", "train.max_steps=4", "train.batch_size=8",
                     "train.eval_every=2", "data.max_length=24"], capsys)
    summary = json.load(open(f"{out}/finetune_summary.json"))
    assert summary["select_metric"] == "spearman" and summary["reference_baseline"]["method"] == "TF-IDF cosine"
    assert [row["step"] for row in summary["dev_history"]] == [0, 2, 4]  # the start model is scored first
    assert json.loads(lines[-1])["baselines"]["trivial"] == {"spearman": 0.0, "pearson": 0.0}
    assert has_layout(out)
    from bertkit.inference.onnx import GRAPHS
    from bertkit.tasks.export import export_target
    assert export_target(out, "embedding") is GRAPHS["embedding"]  # `export --task embedding`: its vectors
    assert export_target(out) is GRAPHS["embedding"]  # and with no --task: a similarity model is its vectors
    if all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime")):  # traced, checked against bertkit
        run_cli(["export", "--model", out, "--out", str(tmp_path / "onnx")], capsys)
        assert (tmp_path / "onnx" / "model.onnx").is_file()

    pairs = scored_pairs(3, seed=2)
    ours = SentenceEncoder.from_pretrained(out).encode([t for e in pairs for t in (e.text, e.text_pair)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = st.SentenceTransformer(out, device="cpu").encode([t for e in pairs for t in (e.text, e.text_pair)])
    np.testing.assert_allclose(ours, theirs, atol=1e-5)

    report = json.loads(run_cli(["evaluate", "--model", out, "--data", dev], capsys)[-1])
    assert set(report["baselines"]) == {"trivial", "reference"} and -1 <= report["spearman"] <= 1
    assert report["spearman"] == pytest.approx(summary["best_dev"]["spearman"])
    int8 = json.loads(run_cli(["evaluate", "--model", out, "--data", dev, "--int8"], capsys)[-1])
    assert abs(int8["spearman"] - report["spearman"]) < 0.1  # (it failed: int8 asked a family of this model)
    inputs = tmp_path / "in.jsonl"
    records = [{"text": e.text, "text_pair": e.text_pair} for e in pairs]
    inputs.write_text(f"{json.dumps(records[0])}\n\n{json.dumps(records[1])}\n"
                      f'{json.dumps({"text": "cat", "text_pair": " "})}\n{json.dumps(records[2])}\n', encoding="utf-8")
    run_cli(["predict", "--model", out, "--input", str(inputs), "--output", str(tmp_path / "p.jsonl")], capsys)
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4, 5]  # one row per input, the blank ones too
    assert rows[1]["score"] is None and rows[3]["score"] is None
    normed = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    cosines = (normed[0::2] * normed[1::2]).sum(1)  # sentence-transformers' vectors, pair by pair
    np.testing.assert_allclose([rows[i]["score"] for i in (0, 2, 4)], cosines, atol=1e-5)


def test_any_encoder_is_scored_before_fine_tuning(tiny, tmp_path, capsys):
    data = write_pairs(tmp_path / "pairs.jsonl", scored_pairs(20))
    report = json.loads(run_cli(["evaluate", "--task", "similarity", "--model", tiny, "--data", data], capsys)[-1])
    assert report["baselines"]["reference"]["spearman"] > 0.5  # shared words are the score: TF-IDF sees them
    assert -1 <= report["spearman"] <= 1


def test_a_tiny_model_learns_to_order_pairs(tiny, tmp_path):
    from bertkit.recipes.finetune import finetune

    train = write_pairs(tmp_path / "train.jsonl", synonym_pairs(64))
    dev = write_pairs(tmp_path / "dev.jsonl", synonym_pairs(32, seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("similarity", tiny, train, dev, str(tmp_path / "m"),
                           {"train": {"max_steps": 40, "batch_size": 16, "lr": 3e-3, "warmup_ratio": 0.0,
                                      "eval_every": 20, "seed": 0}, "data": {"max_length": 16}}, progress=False)
    start, best = summary["dev_history"][0], summary["best_dev"]
    assert summary["reference_baseline"]["spearman"] == 0.0  # no shared words: every TF-IDF cosine 0, no order
    assert start["spearman"] < 0.3 and best["spearman"] > 0.6


# ---------------------------------------------------------------------------- the built-in data set
@pytest.fixture(scope="module")
def nltk_wordnet(tmp_path_factory):
    """NLTK's WordNet reader on the Debian files (NLTK wants a lexnames file beside them, and a
    directory it is told it may read; its mapping to other WordNet versions is not needed)."""
    nltk = pytest.importorskip("nltk")
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    from bertkit.data.assets import wordnet_dir
    from bertkit.tasks.realdata import LEXNAMES

    directory = tmp_path_factory.mktemp("nltk-wordnet")
    for part in ("noun", "verb", "adj", "adv"):  # copies: NLTK refuses links out of its directory
        for name in (f"data.{part}", f"index.{part}", f"{part}.exc"):
            shutil.copyfile(f"{wordnet_dir()}/{name}", directory / name)
    (directory / "lexnames").write_text("".join(f"{i:02d}\t{name}\t1\n" for i, name in enumerate(LEXNAMES)))
    nltk.data.path.append(str(directory))

    class Reader(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Reader(str(directory), None)


def test_wu_palmer_and_synset_names_equal_nltks(nltk_wordnet):
    from bertkit.tasks.realdata import noun_taxonomy, similarity_pairs

    taxonomy = noun_taxonomy()
    assert taxonomy.wu_palmer("02084071", "02121620") == pytest.approx(6 / 7)  # dog, cat: carnivore
    pairs = similarity_pairs(sorted(taxonomy.hypernyms), 600, taxonomy, random.Random(1))
    for first, second in pairs:
        ours, theirs = (nltk_wordnet.synset_from_pos_and_offset("n", int(o)) for o in (first, second))
        assert (taxonomy.names[first], taxonomy.names[second]) == (ours.name(), theirs.name())
        assert taxonomy.wu_palmer(first, second) == pytest.approx(ours.wup_similarity(theirs), abs=1e-12)


def test_wordnet_gloss_similarity_keeps_each_definition_in_one_split():
    from bertkit.tasks import builtin_splits, load_examples

    splits = builtin_splits("wordnet-gloss-similarity")
    assert {k: len(v) for k, v in splits.items()} == {"train": 20_000, "dev": 1_000, "test": 2_000}
    texts = {name: {t for e in pairs for t in (e.text, e.text_pair)} for name, pairs in splits.items()}
    assert not texts["train"] & texts["dev"] and not texts["train"] & texts["test"] and not texts["dev"] & texts["test"]
    for pairs in splits.values():
        scores = np.array([e.label for e in pairs])
        assert 0 < scores.min() and scores.max() < 1 and scores.std() > 0.2  # far and near pairs both
        assert len({(e.text, e.text_pair) for e in pairs}) == len(pairs)
    # embedding.md's quartiles and median, of every split's scores (it had 0.85 for the upper quartile)
    every = [e.label for pairs in splits.values() for e in pairs]
    assert np.round(np.percentile(every, [25, 50, 75]), 2).tolist() == [0.30, 0.73, 0.84]
    assert load_examples("similarity", "wordnet-gloss-similarity:dev", "train", DataConfig()) == splits["dev"]
