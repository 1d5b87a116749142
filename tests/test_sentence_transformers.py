"""sentence-transformers' layout, both ways, against the real library.

Small sentence-transformers models are built on disk from a tiny random BERT (MiniLM's
vocabulary) with each pooling mode; bertkit's SentenceEncoder reads them and gives the same
vectors, and the directories SentenceEncoder.save_pretrained writes load in
`SentenceTransformer(dir)` with the same vectors.
"""

import json
import warnings

import numpy as np
import pytest
import torch

import bertkit
from bertkit.commands.cli import main
from bertkit.inference.encode import SentenceEncoder
from bertkit.errors import CheckpointError, DataError
from bertkit.models.sentence_layout import SentenceLayout, read_layout
from bertkit.tasks.inference import read_spec

st = pytest.importorskip("sentence_transformers")

TEXTS = ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
         "A man is riding a horse on a sunny beach while the crowd watches.", "Hi"]
MODES = ["cls", "mean", "max", "weightedmean", "lasttoken", "mean_sqrt_len_tokens", ("cls", "mean")]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, minilm_dir):
    """A tiny random BERT with MiniLM's tokenizer, saved by bertkit (a plain HF directory)."""
    torch.manual_seed(0)
    config = bertkit.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=64, max_position_embeddings=128)
    directory = tmp_path_factory.mktemp("tiny-bert")
    bertkit.BertModel(config).save_pretrained(directory, tokenizer=bertkit.Tokenizer.from_pretrained(minilm_dir))
    return directory


def _sentence_transformer(tiny_dir, out, mode, include_prompt=True, normalize=True):
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.base.modules.transformer import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = [Transformer(str(tiny_dir), max_seq_length=64),
                   Pooling(32, pooling_mode=mode, include_prompt=include_prompt)]
        model = st.SentenceTransformer(modules=modules + ([Normalize()] if normalize else []),
                                       prompts={"query": "query: "}, device="cpu")
    model.save(str(out))
    return model


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m if isinstance(m, str) else "+".join(m))
def test_reads_each_pooling_mode_as_sentence_transformers(tiny_dir, tmp_path, mode):
    normalize = mode != "max"  # one layout without the Normalize module
    reference = _sentence_transformer(tiny_dir, tmp_path / "st", mode, normalize=normalize)
    encoder = SentenceEncoder.from_pretrained(tmp_path / "st")
    modes = (mode,) if isinstance(mode, str) else mode
    assert encoder.layout.pooling == modes and encoder.layout.normalize == normalize
    assert encoder.layout.max_seq_length is None and encoder.tokenizer.model_max_length == 64
    expected = reference.encode(TEXTS, convert_to_numpy=True)
    got = encoder.encode(TEXTS, batch_size=2)
    assert got.shape == expected.shape == (len(TEXTS), 32 * len(modes))
    assert np.abs(got - expected).max() < 1e-5
    # Each mode is a different vector: a test that would pass with mean pooling everywhere fails here.
    # (Unnormalised: after normalisation mean_sqrt_len_tokens is the mean's direction.)
    if mode != "mean":
        mean = SentenceEncoder(encoder.model, encoder.tokenizer, SentenceLayout())
        raw = encoder.encode(TEXTS, normalize=False)
        assert np.abs(mean.encode(TEXTS, normalize=False)[:, :32] - raw[:, :32]).max() > 1e-3


@pytest.mark.parametrize("mode", ["cls", "mean", "weightedmean"])
def test_prompts_left_out_of_the_pooling(tiny_dir, tmp_path, mode):
    reference = _sentence_transformer(tiny_dir, tmp_path / "st", mode, include_prompt=False)
    encoder = SentenceEncoder.from_pretrained(tmp_path / "st")
    assert encoder.layout.include_prompt is False and encoder.layout.prompts["query"] == "query: "
    expected = reference.encode(TEXTS, prompt_name="query", convert_to_numpy=True)
    got = encoder.encode(TEXTS, prompt_name="query")
    assert np.abs(got - expected).max() < 1e-5
    included = SentenceEncoder(encoder.model, encoder.tokenizer, SentenceLayout(pooling=mode, include_prompt=True))
    assert np.abs(included.encode(TEXTS, prompt="query: ") - got).max() > 1e-3
    with pytest.raises(DataError, match="no prompt named 'passage'"):
        encoder.encode(TEXTS, prompt_name="passage")


@pytest.mark.parametrize("mode,include_prompt,normalize", [("cls", False, False), ("max", True, True),
                                                           (("lasttoken", "mean"), True, True)])
def test_saved_layout_loads_in_sentence_transformers(tiny_dir, tmp_path, mode, include_prompt, normalize):
    base = SentenceEncoder.from_pretrained(tiny_dir)  # a plain directory: mean + normalise
    assert base.layout == SentenceLayout()
    layout = SentenceLayout(pooling=mode, include_prompt=include_prompt, normalize=normalize,
                            max_seq_length=48, prompts={"query": "query: "})
    SentenceEncoder(base.model, base.tokenizer, layout).save_pretrained(tmp_path / "out")
    assert read_layout(tmp_path / "out") == layout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = st.SentenceTransformer(str(tmp_path / "out"), device="cpu")
    assert loaded.max_seq_length == 48
    ours = SentenceEncoder.from_pretrained(tmp_path / "out")
    for kwargs in ({}, {"prompt_name": "query"}):
        expected = loaded.encode(TEXTS, convert_to_numpy=True, **kwargs)
        assert np.abs(ours.encode(TEXTS, **kwargs) - expected).max() < 1e-5


def test_minilm_layout_matches_sentence_transformers(minilm_dir):
    encoder = SentenceEncoder.from_pretrained(minilm_dir)
    assert encoder.layout.pooling == ("mean",) and encoder.layout.normalize
    assert encoder.layout.max_seq_length == 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = st.SentenceTransformer(minilm_dir, device="cpu")
    expected = reference.encode(TEXTS, convert_to_numpy=True)
    assert np.abs(encoder.encode(TEXTS) - expected).max() < 1e-5
    one = reference.encode(TEXTS[0], convert_to_numpy=True)  # one string: one (dim,) vector in both
    assert encoder.encode(TEXTS[0]).shape == one.shape == (384,)
    assert np.abs(encoder.encode(TEXTS[0]) - one).max() < 1e-5


def test_modules_bertkit_does_not_run_are_refused(tiny_dir, tmp_path):
    _sentence_transformer(tiny_dir, tmp_path / "st", "mean")
    modules = json.loads((tmp_path / "st" / "modules.json").read_text())
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (tmp_path / "st" / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(CheckpointError, match="Dense"):
        SentenceEncoder.from_pretrained(tmp_path / "st")


def test_evaluate_and_predict_read_a_sentence_transformers_directory_at_its_max_seq_length(minilm_dir, tmp_path):
    """Walk X: `evaluate --task embedding` of the shipped all-MiniLM-L6-v2 read texts at its
    tokenizer's model_max_length (512) while sentence-transformers, `bertkit embed` and `nearest`
    read them at its sentence_bert_config.json's max_seq_length (256): it scored vectors that no
    search would use (BBC titles to articles: mrr@10 0.908, against 0.911 at 256)."""
    model = st.SentenceTransformer(minilm_dir, device="cpu")
    assert read_spec(minilm_dir, "embedding").data.max_length == model.max_seq_length == 256
    text = " ".join(f"shares in company{i} fell sharply" for i in range(60))  # past 256 tokens
    assert len(model.tokenizer(text)["input_ids"]) > 300
    (tmp_path / "in.txt").write_text(text + "\nA man is eating food.\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["predict", "--task", "embedding", "--model", minilm_dir, "--input", str(tmp_path / "in.txt"),
                     "--output", str(tmp_path / "p.jsonl"), "--no-progress"]) == 0
    ours = np.array([json.loads(line)["embedding"] for line in (tmp_path / "p.jsonl").read_text().splitlines()])
    theirs = model.encode([text, "A man is eating food."], normalize_embeddings=True)
    assert np.abs(ours - theirs).max() < 1e-5
