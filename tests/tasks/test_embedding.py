"""The embedding task: retrieval metrics and BM25 against their references, the in-batch
negatives loss against sentence-transformers' MultipleNegativesRankingLoss, the reader's
errors, the CLI from fine-tune to predict (the saved model loads in sentence-transformers with
the same vectors), the start model kept when fine-tuning does not beat it, a tiny model that
learns, and the modern encoder in the same wrapper."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from bertkit.commands.cli import main
from bertkit.errors import DataError
from bertkit.inference.encode import SentenceEncoder
from bertkit.models.sentence_embedding import SentenceEmbeddingModel
from bertkit.models.sentence_layout import has_layout, read_layout
from bertkit.tasks import Collator, DataConfig, builtin_splits, get_task
from bertkit.tasks.formats import PairExample
from bertkit.tasks.retrieval import bm25_scores, chance_metrics, ranking_metrics, ranks, words
from bertkit.tokenizer import Tokenizer

from .helpers import make_tiny_model

PAIRS = [("shares fell sharply on monday", "the bank's shares dropped after the profit warning"),
         ("the striker scored twice", "a late goal won the cup final for the visitors"),
         ("the film won an award", "the actress took the prize for best drama"),
         ("rain is coming tomorrow", "forecasters expect heavy showers and wind"),
         ("new phone has a faster chip", "the handset's processor runs quicker than before"),
         ("minister resigns over report", "the politician quit after the inquiry was published"),
         ("oil prices rise again", "crude costs climbed for the third week running"),
         ("band announces world tour", "the group will play forty cities next year")]


def write_pairs(path, pairs, negatives=None):
    rows = [{"text": t, "positive": p, **({"negative": negatives[i]} if negatives else {})}
            for i, (t, p) in enumerate(pairs)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny-embedding"), [t for pair in PAIRS for t in pair] * 3)


# ---------------------------------------------------------------------------- metrics and BM25
def test_bm25_equals_bm25s_lucene_scores():
    bm25s = pytest.importorskip("bm25s")
    examples = builtin_splits("bbc-headlines")["dev"][:40]
    queries, documents = [e.text for e in examples], [e.positive for e in examples]
    reference = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    reference.index([words(d) for d in documents], show_progress=False)
    expected = np.stack([reference.get_scores(words(q)) for q in queries])
    np.testing.assert_allclose(bm25_scores(queries, documents), expected, rtol=1e-5, atol=1e-6)


def test_bm25_words_are_cjk_characters_and_casefolded_in_any_locale():
    """Walk M #15: a Chinese clause was one term and 'İstanbul' the terms 'i', 'stanbul'; English
    terms are `\\w+` of the lower-cased text, as before."""
    assert words("股市今天大幅下跌，东京的股价上涨了。")[:4] == ["股", "市", "今", "天"]
    assert words("İstanbul") == words("ISTANBUL") == ["istanbul"]
    assert words("Die STRASSE über Zürich") == words("die Straße ÜBER zürich")
    assert words("The bank's shares fell 5.3% (U.S.)") == ["the", "bank", "s", "shares", "fell", "5", "3", "u", "s"]
    scores = bm25_scores(["东京股价", "İstanbul"], ["东京的股价上涨了", "istanbul güzel", "北京很冷"])
    assert scores[0].argmax() == 0 and scores[1].argmax() == 1 and scores[0, 0] > 0 and scores[1, 1] > 0


def test_ties_are_broken_at_random_and_chance_is_the_mean_over_every_order():
    scores = np.array([[0.5, 0.5, 0.1], [0.0, 0.9, 0.2], [0.0, 0.0, 0.0]])
    best, worst = ranks(scores, np.array([0, 1, 2]))
    assert best.tolist() == [1, 1, 1] and worst.tolist() == [2, 1, 3]
    tied = ranking_metrics(np.array([1]), np.array([2]))  # first or second, alike
    assert tied == pytest.approx({"mrr@10": 0.75, "recall@1": 0.5, "recall@10": 1.0})
    for documents in (3, 12):  # every rank equally likely under a random order
        expected = ranking_metrics(np.arange(1, documents + 1))
        assert chance_metrics(documents) == pytest.approx(expected)
        assert ranking_metrics(*ranks(np.zeros((1, documents)), np.array([0]))) == pytest.approx(expected)


# ---------------------------------------------------------------------------- the loss
@pytest.mark.parametrize("with_negative", [False, True])
def test_loss_equals_sentence_transformers_multiple_negatives_ranking_loss(minilm_dir, with_negative):
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer import losses

    anchors = [t for t, _ in PAIRS[:4]]
    positives = ["a recipe for lemon cake"] + [p for _, p in PAIRS[1:4]]  # one wrong: a real loss
    negatives = [p for _, p in PAIRS[4:8]]
    groups = [anchors, positives] + ([negatives] if with_negative else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference_model = st.SentenceTransformer(minilm_dir, device="cpu").eval()
        with torch.no_grad():
            expected = losses.MultipleNegativesRankingLoss(reference_model)(
                [reference_model.preprocess(g) for g in groups], None).item()
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    examples = [PairExample(a, p, negatives[i] if with_negative else None) for i, (a, p) in
                enumerate(zip(anchors, positives))]
    features = get_task("embedding").encode(tokenizer, examples, DataConfig(max_length=64), None, True, "train")
    batch = Collator(tokenizer.pad_token_id)(features)
    assert batch["input_ids"].shape[:2] == (4, len(groups))
    model = SentenceEmbeddingModel.from_pretrained(minilm_dir).eval()
    with torch.no_grad():
        ours = model(**batch).loss.item()
    assert expected > 0.1 and ours == pytest.approx(expected, rel=1e-4)


def test_runs_of_similar_length_give_the_padded_forwards_loss_and_gradients(tiny, monkeypatch):
    """The CPU path embeds a batch's texts in length-sorted runs; one forward of the whole padded
    batch (the GPU path) must give the same loss and the same gradients."""
    tokenizer = Tokenizer.from_pretrained(tiny)
    examples = [PairExample(t, p + " and more words" * (i % 3)) for i, (t, p) in enumerate(PAIRS)]
    batch = Collator(tokenizer.pad_token_id)(
        get_task("embedding").encode(tokenizer, examples, DataConfig(max_length=48), None, True, "train"))
    model = SentenceEmbeddingModel.from_pretrained(tiny).eval()
    results = []
    for whole in (False, True):
        if whole:  # one call, as on a GPU
            monkeypatch.setattr(model, "embed_by_length", model.embed)
        model.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (runs, run_grads), (padded, padded_grads) = results
    torch.testing.assert_close(runs, padded, rtol=1e-5, atol=1e-6)
    assert run_grads.keys() == padded_grads.keys() and len(run_grads) > 10
    for name in run_grads:
        torch.testing.assert_close(run_grads[name], padded_grads[name], rtol=1e-4, atol=1e-6)


def test_a_shared_positive_is_no_negative_of_the_other_row(tiny):
    """Rows 0 and 1 share a positive: anchor 0's softmax must leave out row 1's copy (the same
    text, so the same vector) and be the plain loss over the other candidates."""
    from bertkit.models.sentence_embedding import SCALE

    tokenizer = Tokenizer.from_pretrained(tiny)
    answer = PAIRS[0][1]
    examples = [PairExample(PAIRS[0][0], answer), PairExample(PAIRS[1][0], answer),
                *[PairExample(t, p) for t, p in PAIRS[2:5]]]
    batch = Collator(tokenizer.pad_token_id)(
        get_task("embedding").encode(tokenizer, examples, DataConfig(max_length=24), None, True, "train"))
    model = SentenceEmbeddingModel.from_pretrained(tiny).eval()
    with torch.no_grad():
        loss = model(**batch).loss
        flat = [batch[k].reshape(-1, batch["input_ids"].shape[-1]) for k in ("input_ids", "attention_mask")]
        vectors = torch.nn.functional.normalize(model.embed(*flat), dim=-1).view(len(examples), 2, -1)
    scores = SCALE * vectors[:, 0] @ vectors[:, 1].T
    keep = ~torch.eye(len(examples), dtype=torch.bool)
    keep[0, 1] = keep[1, 0] = False  # the copies
    expected = torch.stack([torch.logsumexp(scores[i][keep[i] | (torch.arange(len(examples)) == i)], 0) - scores[i, i]
                            for i in range(len(examples))]).mean()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- reading
def test_reader_takes_csv_and_jsonl_and_says_what_to_do_about_bad_rows(tmp_path, tiny):
    task = get_task("embedding")
    csv = tmp_path / "pairs.csv"
    csv.write_text("text,positive,negative\nq1,p1,n1\nq2,p2,n2\n", encoding="utf-8")
    assert task.read(str(csv), DataConfig()) == [PairExample("q1", "p1", "n1"), PairExample("q2", "p2", "n2")]
    jsonl = write_pairs(tmp_path / "pairs.jsonl", PAIRS[:2])
    assert [e.candidates for e in task.read(jsonl, DataConfig())] == [[PAIRS[0][1]], [PAIRS[1][1]]]
    csv.write_text("query,passage\nq1,p1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no 'text' and 'positive' column .*the text and the positive with "
                                        r"--set data.text_column=NAME data.positive_column=NAME"):
        task.read(str(csv), DataConfig())
    with pytest.raises(DataError, match=r"no 'positive' column .*--set data.positive_column=NAME"):
        task.read(str(csv), DataConfig(text_column="query"))
    assert task.read(str(csv), DataConfig(text_column="query", positive_column="passage"))[0].positive == "p1"
    csv.write_text("text,positive,negative\nq1,p1,n1\nq2,p2,\n", encoding="utf-8")
    with pytest.raises(DataError, match="line 3 has no 'negative' while other rows have one"):
        task.read(str(csv), DataConfig())
    with pytest.raises(DataError, match="1 pair; the in-batch negatives loss needs at least 2"):
        task.encode(None, [PairExample("q", "p")], DataConfig(), None, True, "train")
    with pytest.raises(DataError, match="1 distinct positive; ranking needs at least 2"):
        task.encode(None, [PairExample("q", "p"), PairExample("r", "p")], DataConfig(), None, False, "dev")
    csv.write_text("text,positive\nq1,p1\n   ,p2\n", encoding="utf-8")
    with pytest.raises(DataError, match="train: line 3 has an empty text; fill it in"):
        task.encode(None, task.read(str(csv), DataConfig()), DataConfig(), None, True, "train")
    copied = [PairExample("same text", "same text"), PairExample("q", "p")]  # a column named twice, or copied
    with pytest.warns(UserWarning, match="train: 1 of 2 pairs have a positive equal to their text"):
        task.encode(Tokenizer.from_pretrained(tiny), copied, DataConfig(), None, True, "train")
    (tmp_path / "pairs.conll").write_text("a O\n", encoding="utf-8")
    with pytest.raises(DataError, match="unknown extension '.conll'"):
        task.read(str(tmp_path / "pairs.conll"), DataConfig())


def test_bbc_headlines_pairs_each_title_with_its_own_body_in_the_bbc_split():
    headlines, topics = builtin_splits("bbc-headlines"), builtin_splits("bbc")
    for split in ("train", "dev", "test"):
        assert len(headlines[split]) == len(topics[split])
        for pair, article in zip(headlines[split][:50], topics[split][:50]):
            assert article.text.startswith(pair.text) and pair.positive in article.text
            assert pair.text and pair.positive and pair.text not in pair.positive[:len(pair.text)]


def test_wordnet_usage_definitions_keeps_each_definition_in_one_split_and_shares_few_words():
    from bertkit.tasks.realdata import read_wordnet

    splits = builtin_splits("wordnet-usage-definitions")
    definitions = {name: {e.positive for e in pairs} for name, pairs in splits.items()}
    assert sum(len(d) for d in definitions.values()) == sum(len(p) for p in splits.values())  # one pair each
    assert not (definitions["train"] & definitions["test"]) and not (definitions["dev"] & definitions["test"])
    examples = {(s.examples[0], s.definition) for s in read_wordnet() if s.examples}
    assert all((e.text, e.positive) in examples for e in splits["test"][:200])  # real entries, paired right
    shared = np.mean([bool(set(words(e.text)) & set(words(e.positive)) - {"a", "the", "of", "to", "or"})
                      for e in splits["test"][:500]])
    assert shared < 0.5  # mostly no content word in common: a bag of words gets little


# ---------------------------------------------------------------------------- the commands
def run_cli(argv, capsys) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    return capsys.readouterr().out.strip().splitlines()


def test_finetune_evaluate_predict_and_sentence_transformers_reads_the_result(tiny, tmp_path, capsys):
    st = pytest.importorskip("sentence_transformers")
    train = write_pairs(tmp_path / "train.jsonl", PAIRS)
    out = str(tmp_path / "embedder")
    lines = run_cli(["finetune", "--task", "embedding", "--model", tiny, "--train", train, "--dev", train,
                     "--out", out, "--no-progress", "--set", "train.max_steps=4", "train.batch_size=4",
                     "train.eval_every=2", "data.max_length=24"], capsys)
    summary = json.load(open(f"{out}/finetune_summary.json"))
    assert summary["select_metric"] == "mrr@10" and summary["reference_baseline"]["method"] == "BM25"
    assert [row["step"] for row in summary["dev_history"]] == [0, 2, 4]  # the start model is scored first
    assert lines[-1].startswith("{") and "BM25 baseline" in "\n".join(lines)
    baselines = json.loads(lines[-1])["baselines"]
    assert set(baselines) >= {"trivial", "reference"}  # and the start model's, unless it was kept
    if summary["best_step"] != 0:
        assert baselines["before_fine_tuning"]["mrr@10"] == summary["dev_history"][0]["mrr@10"]
        assert any(line.startswith("the model before fine-tuning (step 0): mrr@10=") for line in lines)
    assert has_layout(out)  # sentence-transformers' files beside the checkpoint
    assert read_layout(out).max_seq_length == 24  # embed and sentence-transformers read what it was tuned on
    from bertkit.inference.onnx import GRAPHS
    from bertkit.tasks.export import export_target
    assert export_target(out) is GRAPHS["embedding"]  # `bertkit export` writes the embedding graph

    texts = [t for t, _ in PAIRS[:3]]
    ours = SentenceEncoder.from_pretrained(out).encode(texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = st.SentenceTransformer(out, device="cpu").encode(texts)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)

    report = json.loads(run_cli(["evaluate", "--model", out, "--data", train], capsys)[-1])
    assert set(report["baselines"]) == {"trivial", "reference"} and 0 < report["mrr@10"] <= 1
    inputs = tmp_path / "in.txt"
    inputs.write_text(f"{texts[0]}\n\n{texts[1]}\n{texts[2]}\n", encoding="utf-8")
    run_cli(["predict", "--model", out, "--input", str(inputs), "--output", str(tmp_path / "p.jsonl")], capsys)
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4] and rows[1]["embedding"] is None
    np.testing.assert_allclose([rows[i]["embedding"] for i in (0, 2, 3)], ours, atol=1e-5)

    # search with it: a query that is a corpus text finds itself first (the blank line never)
    lines = run_cli(["nearest", "--model", out, "--corpus", str(inputs), texts[2], "--top", "3",
                     "--output", str(tmp_path / "n.jsonl")], capsys)
    (found,) = [json.loads(line) for line in (tmp_path / "n.jsonl").read_text().splitlines()]
    assert found["matches"][0]["text"] == texts[2] and found["matches"][0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert [m["index"] for m in found["matches"]] != [] and 1 not in [m["index"] for m in found["matches"]]
    assert lines[0] == f"query: {texts[2]}" and lines[1].startswith("  1. 1.000  [line 4] ")
    # a blank query line keeps its row (without matches): row i is query i
    run_cli(["nearest", "--model", out, "--corpus", str(inputs), "--queries", str(inputs), "--top", "2",
             "--output", str(tmp_path / "q.jsonl")], capsys)
    queried = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert [bool(row["matches"]) for row in queried] == [True, False, True, True]
    assert queried[3]["matches"][0]["index"] == 3 and queried[1]["query"] == ""

    # the corpus's vectors written once by embed, read by nearest (it had embedded the corpus at every call)
    run_cli(["embed", "--model", out, "--input", str(inputs), "--output", str(tmp_path / "c.npy")], capsys)
    again = run_cli(["nearest", "--model", out, "--corpus", str(inputs), texts[2], "--top", "3",
                     "--corpus-embeddings", str(tmp_path / "c.npy")], capsys)
    assert again == lines
    other = tmp_path / "other.txt"  # the same number of lines, other texts: not the vectors of this corpus
    other.write_text(f"{PAIRS[5][0]}\n\n{texts[1]}\n{texts[2]}\n", encoding="utf-8")
    code = main(["nearest", "--model", out, "--corpus", str(other), "x",
                 "--corpus-embeddings", str(tmp_path / "c.npy")])
    err = capsys.readouterr().err
    assert code == 2 and "is not this model's vector of that text" in err
    # walk X: the advice wrote other.txt's vectors over c.npy, which may be another corpus's (here: inputs's)
    assert f"--input {other} --output {tmp_path / 'other.npy'}, then --corpus-embeddings {tmp_path / 'other.npy'} " \
           f"({tmp_path / 'c.npy'} may be the vectors of another corpus: kept)" in err
    own = tmp_path / "other.npy"  # the corpus's own file: stale, written over
    own.write_bytes((tmp_path / "c.npy").read_bytes())
    assert main(["nearest", "--model", out, "--corpus", str(other), "x", "--corpus-embeddings", str(own)]) == 2
    assert capsys.readouterr().err.rstrip().endswith(f"--input {other} --output {own}")
    other.write_text(f"{texts[0]}\n\n{texts[2]}\n{texts[1]}\n", encoding="utf-8")  # two later lines swapped
    code = main(["nearest", "--model", out, "--corpus", str(other), "x",
                 "--corpus-embeddings", str(tmp_path / "c.npy")])
    assert code == 2 and f"its row 3, for the text on line 3 of {other}, is not this model's vector" \
        in capsys.readouterr().err
    # a table's text is named by its own line, not its row + 1 (the header is line 1): "line 3" was the wrong text
    table = tmp_path / "other.csv"
    table.write_text("text\n" + "".join(f'"{text}"\n' for text in (texts[0], "", texts[2], texts[1])), encoding="utf-8")
    code = main(["nearest", "--model", out, "--corpus", str(table), "x", "--corpus-embeddings", str(tmp_path / "c.npy")])
    assert code == 2 and f"its row 3, for the text on line 4 of {table}, is not" in capsys.readouterr().err


def test_nearest_writes_non_ascii_text_as_text(tiny, tmp_path, capsys):
    """walk M #12: --output held "\\u05e9\\u05dc\\u05d5\\u05dd" where predict writes the text itself."""
    corpus = tmp_path / "near.txt"
    corpus.write_text("\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\nshares fell\n", encoding="utf-8")
    run_cli(["nearest", "--model", tiny, "--corpus", str(corpus), "\u05e9\u05dc\u05d5\u05dd", "--top", "1",
             "--output", str(tmp_path / "n.jsonl")], capsys)
    written = (tmp_path / "n.jsonl").read_text(encoding="utf-8")
    assert '"query": "\u05e9\u05dc\u05d5\u05dd"' in written and "\\u" not in written
    assert json.loads(written)["query"] == "\u05e9\u05dc\u05d5\u05dd"


def test_any_encoder_is_scored_as_an_embedding_model_before_fine_tuning(tiny, tmp_path, capsys):
    data = write_pairs(tmp_path / "pairs.jsonl", PAIRS)
    report = json.loads(run_cli(["evaluate", "--task", "embedding", "--model", tiny, "--data", data], capsys)[-1])
    assert report["baselines"]["trivial"]["recall@1"] == pytest.approx(1 / len(PAIRS))


@pytest.mark.parametrize("task", ["embedding", "similarity"])
def test_freeze_encoder_is_refused_before_any_work_where_the_model_trains_whole(task, tiny, tmp_path):
    """Walk X: embedding was refused only after loading ("no trainable parameters"), leaving
    OUT/finetune_config.json behind. (seq2seq, which died with an AttributeError traceback, now freezes
    its encoder half: tests/tasks/test_seq2seq_peft.py.)"""
    from bertkit.errors import ConfigError
    from bertkit.recipes.finetune import finetune

    out = tmp_path / "frozen"
    with pytest.raises(ConfigError, match=f"model.freeze_encoder is not available for --task {task}: its model "
                                          "trains whole"):
        finetune(task, tiny, "missing.jsonl", "missing.jsonl", str(out), {"model": {"freeze_encoder": True}})
    assert not out.exists()


def test_peft_is_refused_before_any_work(tiny, tmp_path):
    from bertkit.errors import ConfigError
    from bertkit.recipes.finetune import finetune

    out = tmp_path / "lora"
    with pytest.raises(ConfigError, match="--peft is not available for --task embedding"):
        finetune("embedding", tiny, "missing.jsonl", "missing.jsonl", str(out), {"peft": {"method": "lora"}})
    assert not out.exists()


def test_the_start_model_is_kept_when_no_evaluation_beats_it(tiny, tmp_path, capsys):
    from bertkit.models.checkpoint import read_state_dict

    train = write_pairs(tmp_path / "train.jsonl", PAIRS)
    out = str(tmp_path / "kept")
    lines = run_cli(["finetune", "--task", "embedding", "--model", tiny, "--train", train, "--dev", train,
                     "--out", out, "--no-progress", "--set", "train.max_steps=2", "train.batch_size=4",
                     "train.lr=1e-12", "data.max_length=24"], capsys)  # later scores only tie
    assert json.load(open(f"{out}/finetune_summary.json"))["best_step"] == 0
    assert any("at step 0 (the model before fine-tuning" in line for line in lines)
    start, kept = read_state_dict(tiny), read_state_dict(out)
    for name, value in kept.items():
        torch.testing.assert_close(value, start[name], rtol=0, atol=0)


def test_a_tiny_model_learns_to_find_its_pairs(tiny, tmp_path):
    from bertkit.recipes.finetune import finetune

    train = write_pairs(tmp_path / "train.jsonl", PAIRS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = finetune("embedding", tiny, train, train, str(tmp_path / "m"),
                           {"train": {"max_steps": 40, "batch_size": 8, "lr": 3e-3, "warmup_ratio": 0.0,
                                      "eval_every": 20, "seed": 0}, "data": {"max_length": 24}}, progress=False)
    start, best = summary["dev_history"][0], summary["best_dev"]
    assert best["recall@1"] == 1.0 and start["recall@1"] < 0.8  # chance: 1/8


def test_the_modern_encoder_serves_in_the_same_wrapper(tmp_path):
    from bertkit.models.modern import ModernBertConfig, ModernBertModel

    config = ModernBertConfig(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                              num_attention_heads=2, pad_token_id=0, cls_token_id=2, sep_token_id=3,
                              bos_token_id=2, eos_token_id=3)
    ModernBertModel(config).save_pretrained(str(tmp_path / "modern"))
    model = SentenceEmbeddingModel.from_pretrained(str(tmp_path / "modern"))
    ids = torch.randint(4, 120, (3, 2, 10))
    out = model.train()(input_ids=ids, attention_mask=torch.ones_like(ids))
    out.loss.backward()
    assert torch.isfinite(out.loss) and model.encoder.embeddings.tok_embeddings.weight.grad is not None
    model.save_pretrained(str(tmp_path / "saved"))
    again = SentenceEmbeddingModel.from_pretrained(str(tmp_path / "saved")).eval()
    flat = ids[:, 0]
    with torch.no_grad():
        torch.testing.assert_close(again(input_ids=flat).embeddings, model.eval()(input_ids=flat).embeddings)
    assert again.layout.pooling == ("mean",) and again.layout.normalize  # a plain checkpoint's layout
