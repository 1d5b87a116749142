"""int8 inference (bertkit/inference/quantize.py): the int8 product is the stated math, close to fp32;
the copy leaves the fp32 model alone; MiniLM sentence vectors keep cosine >= 0.99 to fp32 on
real text; `embed --int8` and `predict --int8` run it."""

import glob
import json
import os
import random
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from bertkit import BertConfig, BertForSequenceClassification, BertModel, Tokenizer
from bertkit.commands.cli import main
from bertkit.inference.encode import SentenceEncoder
from bertkit.errors import ConfigError
from bertkit.inference.int8_kernels import quantize_rows
from bertkit.inference.quantize import Int8Linear, Int8Map, Int8QKV, Int8ResidualLinear, quantize_int8
from bertkit.models.sentence_embedding import SentenceEmbeddingModel


@pytest.mark.slow
def test_int8_linear_is_the_stated_math_and_close_to_fp32():
    linear = nn.Linear(48, 40)
    with torch.no_grad():
        linear.weight[:, 5] *= 40  # an outlier weight column
    x = torch.randn(3, 7, 48)
    x[0, 0] *= 50  # an outlier token
    x[..., 9] *= 30  # an outlier input channel
    layer = Int8Linear(linear, x.reshape(-1, 48).abs().amax(0), outliers=2)
    assert set(layer.outlier_index.tolist()) == {5, 9}
    got = layer(x)
    rows = x.reshape(-1, 48)
    qx, r, kept = quantize_rows(rows, layer.input_scale, layer.outlier_index)  # qx: zero on the fp32 columns
    assert torch.equal(kept, rows[:, layer.outlier_index])
    assert qx.abs().max() <= 127 and layer.weight_int8.abs().max() <= 127
    exact = ((qx.double() @ layer.weight_int8.double().T) * r.double() * layer.weight_scale.double()
             + rows[:, [5, 9]].double() @ linear.weight.detach()[:, [5, 9]].double().T
             + linear.bias.detach().double())
    assert torch.allclose(got.reshape(-1, 40).double(), exact, rtol=1e-5, atol=1e-5)
    reference = linear(x).detach()
    relative = (got - reference).norm(dim=-1) / reference.norm(dim=-1)
    assert relative.max() < 0.02  # every token, the outlier's neighbours included
    plain = Int8Linear(linear, torch.ones(48), alpha=0.0, outliers=0)(x)  # no smoothing, no fp32 columns
    assert ((plain - reference).norm(dim=-1) / reference.norm(dim=-1)).median() > 2 * relative.median()


def test_quantized_copy_leaves_the_model_alone():
    model = BertForSequenceClassification(BertConfig.preset("tiny", vocab_size=500, num_labels=3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q = quantize_int8(model)
    assert all(type(m) is nn.Linear for m in model.bert.encoder.layer.modules() if isinstance(m, nn.Linear))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    layers = q.bert.encoder.layer
    assert [type(m) for m in layers[0].modules() if isinstance(m, Int8Map)] == \
        [Int8QKV, Int8ResidualLinear, Int8Linear, Int8ResidualLinear]  # Q|K|V, attention out, FF in, FF out
    assert not any(type(m) is nn.Linear for m in layers.modules())
    assert type(q.classifier) is nn.Linear and type(q.bert.pooler.dense) is nn.Linear  # heads stay fp32
    assert not q.training
    ids = torch.randint(1, 500, (2, 12))
    with torch.no_grad():
        assert torch.allclose(q(ids).logits, model.eval()(ids).logits, atol=0.05)


def test_a_sentence_embedding_model_quantizes_and_embeds_close_to_fp32():
    """The embedding and similarity tasks' model belongs to no family: int8 asked for its family's
    head role and failed with an AttributeError."""
    torch.manual_seed(0)
    model = SentenceEmbeddingModel(BertModel(BertConfig.preset("tiny", vocab_size=500))).eval()
    q = quantize_int8(model)
    assert any(isinstance(m, Int8Map) for m in q.modules())
    ids = torch.randint(1, 500, (3, 12))
    with torch.no_grad():
        assert torch.cosine_similarity(q.embed(ids), model.embed(ids)).min() > 0.99


def test_bad_mode_and_non_encoder_are_config_errors(minilm_dir):
    with pytest.raises(ConfigError, match="unknown quantize mode 'int4'"):
        SentenceEncoder.from_pretrained(minilm_dir, quantize="int4")
    with pytest.raises(ConfigError, match="no encoder layers"):
        quantize_int8(nn.Sequential(nn.Linear(4, 4)))


def bbc_texts(bbc_dir, n=12, seed=0):
    """Whole BBC articles (cut at 128 tokens by encode): long inputs."""
    paths = sorted(glob.glob(os.path.join(bbc_dir, "*", "*.txt")))
    texts = []
    for path in random.Random(seed).sample(paths, n):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read().strip())
    return texts


def test_minilm_int8_vectors_keep_cosine_099(minilm_dir, bbc_dir):
    fp32 = SentenceEncoder.from_pretrained(minilm_dir)
    int8 = SentenceEncoder(fp32.model, fp32.tokenizer, quantize="int8")  # .model: the fp32 original
    # short texts are the hard case: the mean over few tokens averages few errors away
    texts = bbc_texts(bbc_dir) + ["Thanks!", "Hi", "ok", "A man is eating food.", "A man is eating a piece of bread."]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation
        a, b = fp32.encode(texts, max_length=128), int8.encode(texts, max_length=128)
    cosine = (a * b).sum(1)
    assert cosine.min() >= 0.99
    assert cosine.min() < 0.99999  # the int8 path really ran
    assert abs(float(b[-2] @ b[-1]) - 0.755) < 0.01  # the reference similarity survives


def test_embed_and_predict_with_int8(minilm_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Shares fell sharply.\nThe striker scored twice.\n", encoding="utf-8")
    assert main(["embed", "--model", minilm_dir, "--input", str(tmp_path / "in.txt"),
                 "--output", str(tmp_path / "e.npy"), "--int8"]) == 0
    reference = SentenceEncoder.from_pretrained(minilm_dir).encode(["Shares fell sharply.", "The striker scored twice."])
    assert (np.load(tmp_path / "e.npy") * reference).sum(1).min() >= 0.99

    # a 2-layer MiniLM with a 3-way head, saved as a sequence classifier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BertForSequenceClassification.from_pretrained(
            minilm_dir, num_hidden_layers=2, num_labels=3, id2label={0: "a", 1: "b", 2: "c"})
    with torch.no_grad():
        model.classifier.weight.mul_(50)  # spread the probabilities so int8 changes show
    model.save_pretrained(tmp_path / "clf", tokenizer=Tokenizer.from_pretrained(minilm_dir))
    assert 0 < largest_int8_change(tmp_path / "clf", tmp_path / "in.txt", tmp_path) < 0.02


def largest_int8_change(model_dir, texts, tmp_path) -> float:
    """The largest change of a class probability from `bertkit predict` to `predict --int8`."""
    rows = {}
    for flag in ([], ["--int8"]):
        out = tmp_path / f"p{len(flag)}.jsonl"
        assert main(["predict", "--model", str(model_dir), "--input", str(texts), "--output", str(out),
                     "--task", "classification"] + flag) == 0
        rows[len(flag)] = [json.loads(line)["probabilities"] for line in out.read_text().splitlines()]
    assert len(rows[0]) == len(rows[1]) == len(texts.read_text().splitlines())
    return max(abs(p[k] - q[k]) for p, q in zip(rows[0], rows[1]) for k in p)


def test_encoder_given_an_int8_copy_runs_it_as_it_is(minilm_dir):
    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    model = BertModel(BertConfig.preset("tiny"))  # MiniLM's vocabulary size: its tokenizer fits
    int8 = quantize_int8(model, tokenizer)
    encoder = SentenceEncoder(int8, tokenizer)
    assert encoder.runner is int8
    with pytest.raises(ConfigError, match="already an inference copy"):
        quantize_int8(int8)
    reference = SentenceEncoder(model, tokenizer).encode(["a short text", "another one, a bit longer"])
    assert (encoder.encode(["a short text", "another one, a bit longer"]) * reference).sum(1).min() > 0.99


@pytest.mark.parametrize("act, fused", [("gelu", "gelu"), ("gelu_new", "gelu_tanh"), ("relu", "relu")])
def test_int8_copy_fuses_each_activation_and_stays_close(act, fused):
    model = BertForSequenceClassification(BertConfig.preset("tiny", vocab_size=500, num_labels=3, hidden_act=act))
    q = quantize_int8(model)
    assert q.bert.encoder.layer[0].intermediate.dense.activation == fused
    ids = torch.randint(1, 500, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # a padded row
    with torch.inference_mode():
        assert torch.allclose(q(ids, mask).logits, model.eval()(ids, mask).logits, atol=0.05)


def test_int8_copy_keeps_attention_that_needs_its_own_projections():
    deberta = BertModel(BertConfig.preset("tiny", vocab_size=500, relative_attention=True,
                                          pos_att_type=["c2p", "p2c"])).eval()
    q = quantize_int8(deberta)  # DeBERTa projects relative positions with the query and key maps
    attention = q.encoder.layer[0].attention.self
    assert attention.qkv is None and all(type(getattr(attention, p)) is Int8Linear for p in ("query", "key", "value"))
    ids = torch.randint(1, 500, (2, 9))
    with torch.no_grad():
        reference = deberta(ids).last_hidden_state
        relative = (q(ids).last_hidden_state - reference).norm(dim=-1) / reference.norm(dim=-1)
    assert relative.max() < 0.05


def test_predict_with_int8_on_a_modern_encoder_checkpoint(minilm_dir, tmp_path):
    from bertkit.models.modern import ModernBertConfig, ModernBertForSequenceClassification

    (tmp_path / "in.txt").write_text("Shares fell sharply.\nThe striker scored twice in the final.\n",
                                     encoding="utf-8")
    torch.manual_seed(0)
    model = ModernBertForSequenceClassification(ModernBertConfig.preset(
        "tiny", num_labels=3, id2label={0: "a", 1: "b", 2: "c"}))
    model.save_pretrained(tmp_path / "clf", tokenizer=Tokenizer.from_pretrained(minilm_dir))
    # > 0: the int8 path ran (it was refused for this family before)
    assert 0 < largest_int8_change(tmp_path / "clf", tmp_path / "in.txt", tmp_path) < 0.02
