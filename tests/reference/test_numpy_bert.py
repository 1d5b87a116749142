"""The plain-NumPy BERT (bertkit/reference/numpy_bert.py) against bertkit's BertModel."""

import json
import math
import shutil

import numpy as np
import pytest
import torch

import bertkit
from bertkit.reference import numpy_bert

SENTENCES = [
    "A man is eating food.",
    "The new movie is awesome, said the critic who had seen it twice on Sunday.",
    "Shares in the company fell sharply after the announcement.",
]
PAIR = ("Who wrote the report?", "The committee wrote it last year.")


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    model = bertkit.BertModel.from_pretrained(minilm_dir)
    tok = bertkit.Tokenizer.from_pretrained(minilm_dir)
    return model, tok, numpy_bert.load(minilm_dir)


def run_both(model, tok, reference, texts, pairs=None):
    batch = tok(texts, pairs, return_tensors="np")
    config, weights = reference
    ours = numpy_bert.forward(batch["input_ids"], weights, config, batch["attention_mask"],
                              batch["token_type_ids"])
    with torch.no_grad():
        theirs = model(**{k: torch.from_numpy(batch[k]).long()
                          for k in ("input_ids", "attention_mask", "token_type_ids")},
                       output_attentions=True, output_hidden_states=True)
    return batch["attention_mask"].astype(bool), ours, theirs


def test_padded_batch_matches_bertmodel(minilm):
    mask, ours, theirs = run_both(*minilm, SENTENCES)
    assert not mask.all(), "the batch must contain padding"
    real = mask[..., None]
    for a, b in zip(ours.hidden_states, theirs.hidden_states, strict=True):
        assert np.abs(np.where(real, a - b.numpy(), 0)).max() < 1e-5
    assert np.abs(np.where(real, ours.last_hidden_state - theirs.last_hidden_state.numpy(), 0)).max() < 1e-5
    assert np.abs(ours.pooler_output - theirs.pooler_output.numpy()).max() < 1e-5
    for a, b in zip(ours.attentions, theirs.attentions, strict=True):
        assert np.abs(a - b.numpy()).max() < 1e-5
    # Padding keys get no attention: the mask is really applied.
    assert np.abs(ours.attentions[-1] * ~mask[:, None, None, :]).max() == 0.0


def test_sentence_pair_segments_match(minilm):
    mask, ours, theirs = run_both(*minilm, [PAIR[0]], [PAIR[1]])
    assert np.abs(ours.last_hidden_state - theirs.last_hidden_state.numpy()).max() < 1e-5
    assert np.abs(ours.pooler_output - theirs.pooler_output.numpy()).max() < 1e-5


def test_float64_reference_is_as_close(minilm, minilm_dir):
    # Computing in float64 gives (nearly) the exact values; float32 torch stays within 1e-5.
    model, tok, _ = minilm
    mask, ours, theirs = run_both(model, tok, numpy_bert.load(minilm_dir, dtype=np.float64), SENTENCES)
    assert ours.last_hidden_state.dtype == np.float64
    diff = np.where(mask[..., None], ours.last_hidden_state - theirs.last_hidden_state.double().numpy(), 0)
    assert np.abs(diff).max() < 1e-5


def test_building_blocks_follow_their_formulas():
    x = np.array([[-3.0, -0.5, 0.0, 0.7, 2.5]])
    expected = np.array([[v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x[0]]])
    assert np.allclose(numpy_bert.gelu(x), expected, atol=1e-12)
    assert np.allclose(numpy_bert.gelu(x), torch.nn.functional.gelu(torch.tensor(x)).numpy(), atol=1e-12)
    p = numpy_bert.softmax(np.array([[1000.0, 1001.0, -np.inf]]))  # no overflow, -inf gets 0
    assert np.allclose(p, [[1 / (1 + math.e), math.e / (1 + math.e), 0.0]])
    w = {"n.weight": np.array([2.0, 1.0, 1.0]), "n.bias": np.array([0.0, 1.0, 0.0])}
    y = numpy_bert.layer_norm(np.array([[1.0, 2.0, 3.0]]), w, "n", eps=0.0)
    assert np.allclose(y, [[-2 * math.sqrt(1.5), 1.0, math.sqrt(1.5)]])


def test_variant_checkpoints_are_refused(minilm_dir, tmp_path):
    for name in ("config.json", "model.safetensors"):
        shutil.copy(f"{minilm_dir}/{name}", tmp_path / name)
    config = json.loads((tmp_path / "config.json").read_text())
    config["position_embedding_type"] = "relative_key"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(bertkit.ConfigError, match="relative_key"):
        numpy_bert.load(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(bertkit.CheckpointError, match="config.json"):
        numpy_bert.load(tmp_path)


def test_checkpoint_with_heads_and_without_pooler(tmp_path):
    # An MLM checkpoint keeps its encoder under "bert." and has no pooler.
    torch.manual_seed(0)
    config = bertkit.BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                                intermediate_size=40, max_position_embeddings=16)
    model = bertkit.BertForMaskedLM(config).eval()
    model.save_pretrained(tmp_path)
    ids = torch.randint(5, 50, (2, 7))
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    ref_config, weights = numpy_bert.load(tmp_path)
    ours = numpy_bert.forward(ids.numpy(), weights, ref_config, mask.numpy())
    with torch.no_grad():
        theirs = model.bert(ids, mask).last_hidden_state
    assert ours.pooler_output is None and model.bert.pooler is None
    real = mask.bool().numpy()[..., None]
    assert np.abs(np.where(real, ours.last_hidden_state - theirs.numpy(), 0)).max() < 1e-5
