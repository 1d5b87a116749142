"""The decoder side against transformers 5, in both directions: BertLMHeadModel (causal LM, with
and without cross-attention) and EncoderDecoderModel (BERT2BERT), same weights, same outputs,
cached decoding equal to uncached."""

import warnings

import pytest
import torch

from bertkit import BertConfig, BertModel
from bertkit.models.encoder_decoder import EncoderDecoderConfig, EncoderDecoderModel, shift_tokens_right
from bertkit.errors import BertkitError, ConfigError
from bertkit.models.kv_cache import KVCache
from bertkit.models.lm_head import BertLMHeadModel

transformers = pytest.importorskip("transformers")

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
DECODER = dict(TINY, is_decoder=True, add_cross_attention=True)
TOL = 1e-5


def hf_config(**changes):
    return transformers.BertConfig(**{**TINY, **changes})


def hf_load(cls, directory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls.from_pretrained(directory, attn_implementation="eager").eval()


def batch(rows=3, length=9, seed=1, pad_left=False):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, TINY["vocab_size"], (rows, length), generator=g)
    mask = torch.ones(rows, length, dtype=torch.long)
    cut = slice(0, 3) if pad_left else slice(length - 3, length)
    mask[0, cut] = 0
    ids[0, cut] = 0
    return ids, mask


def real(x, mask):
    """Values at real (unpadded) query positions: (B, T, ...) -> (N, ...)."""
    return x[mask.bool()]


def close(a, b, mask=None):
    if mask is not None:
        a, b = real(a, mask), real(b, mask)
    assert a.shape == b.shape
    return (a - b).abs().max().item() < TOL


@pytest.fixture(scope="module")
def lm_dirs(tmp_path_factory):
    """A transformers causal LM with cross-attention, saved; and bertkit's load of it, saved again."""
    torch.manual_seed(0)
    theirs = transformers.BertLMHeadModel(hf_config(is_decoder=True, add_cross_attention=True)).eval()
    hf_dir = tmp_path_factory.mktemp("hf-lm")
    theirs.save_pretrained(hf_dir)
    ours = BertLMHeadModel.from_pretrained(hf_dir)
    ours_dir = tmp_path_factory.mktemp("ours-lm")
    ours.save_pretrained(ours_dir)
    return hf_dir, ours_dir


@pytest.mark.parametrize("direction", ["transformers->bertkit", "bertkit->transformers"])
def test_lm_head_model_matches_transformers(lm_dirs, direction):
    hf_dir, ours_dir = lm_dirs
    source = hf_dir if direction == "transformers->bertkit" else ours_dir
    ours = BertLMHeadModel.from_pretrained(source)
    theirs = hf_load(transformers.BertLMHeadModel, source)
    ids, mask = batch()
    states = torch.randn(3, 7, 32, generator=torch.Generator().manual_seed(2))
    states_mask = torch.ones(3, 7, dtype=torch.long)
    states_mask[1, -2:] = 0
    kwargs = dict(attention_mask=mask, encoder_hidden_states=states, encoder_attention_mask=states_mask,
                  labels=ids.masked_fill(mask == 0, -100), output_attentions=True, output_hidden_states=True)
    with torch.no_grad():
        a, b = ours(ids, **kwargs), theirs(ids, **kwargs)
    assert close(a.logits, b.logits, mask)
    assert abs(a.loss.item() - b.loss.item()) < TOL
    for x, y in zip(a.hidden_states, b.hidden_states, strict=True):
        assert close(x, y, mask)
    for x, y in zip(a.attentions, b.attentions, strict=True):  # causal: zero above the diagonal
        assert close(x.transpose(1, 2), y.transpose(1, 2), mask)
        assert x[2].triu(1).abs().max() == 0
    for x, y in zip(a.cross_attentions, b.cross_attentions, strict=True):
        assert x.shape == (3, 4, 9, 7)
        assert close(x.transpose(1, 2), y.transpose(1, 2), mask)
        assert x[1, :, :, -2:].abs().max() == 0  # the encoder's padding gets no attention


def test_saved_keys_are_transformers_keys(lm_dirs):
    from safetensors.torch import load_file

    hf_dir, ours_dir = lm_dirs
    assert set(load_file(ours_dir / "model.safetensors")) == set(load_file(hf_dir / "model.safetensors"))
    assert "bert.encoder.layer.1.crossattention.self.query.weight" in load_file(ours_dir / "model.safetensors")


def test_cached_decoding_equals_uncached_and_transformers_cache(lm_dirs):
    hf_dir, _ = lm_dirs
    ours = BertLMHeadModel.from_pretrained(hf_dir)
    theirs = hf_load(transformers.BertLMHeadModel, hf_dir)
    ids, mask = batch(pad_left=True)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    states = torch.randn(3, 5, 32, generator=torch.Generator().manual_seed(3))
    common = dict(encoder_hidden_states=states)
    with torch.no_grad():
        full = ours(ids, attention_mask=mask, position_ids=positions, **common).logits
        first = ours(ids[:, :5], attention_mask=mask[:, :5], position_ids=positions[:, :5], use_cache=True, **common)
        their_first = theirs(ids[:, :5], attention_mask=mask[:, :5], position_ids=positions[:, :5],
                             use_cache=True, **common)
        cache, their_cache, steps, their_steps = first.past_key_values, their_first.past_key_values, [first.logits], \
            [their_first.logits]
        for t in range(5, 9):
            kw = dict(attention_mask=mask[:, :t + 1], position_ids=positions[:, t:t + 1], **common)
            steps.append(ours(ids[:, t:t + 1], past_key_values=cache, use_cache=True, **kw).logits)
            out = theirs(ids[:, t:t + 1], past_key_values=their_cache, use_cache=True, **kw)
            their_cache = out.past_key_values
            their_steps.append(out.logits)
    assert isinstance(cache, KVCache) and cache.get_seq_length() == 9
    assert close(torch.cat(steps, 1), full, mask)
    assert close(torch.cat(steps, 1), torch.cat(their_steps, 1), mask)


def test_causal_lm_without_cross_attention_both_directions(tmp_path):
    torch.manual_seed(0)
    ours = BertLMHeadModel(BertConfig(**TINY, is_decoder=True)).eval()
    ours.save_pretrained(tmp_path)
    theirs = hf_load(transformers.BertLMHeadModel, tmp_path)
    ids, mask = batch()
    with torch.no_grad():
        assert close(ours(ids, mask).logits, theirs(ids, attention_mask=mask).logits, mask)
    theirs.save_pretrained(tmp_path / "back")
    again = BertLMHeadModel.from_pretrained(tmp_path / "back")
    with torch.no_grad():
        assert close(again(ids, mask).logits, theirs(ids, attention_mask=mask).logits, mask)


# ---------------------------------------------------------------------------- encoder-decoder
@pytest.fixture(scope="module")
def seq2seq_dir(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(
        hf_config(), hf_config(hidden_size=48, num_attention_heads=4, is_decoder=True, add_cross_attention=True),
        decoder_start_token_id=2, pad_token_id=0, eos_token_id=3)
    theirs = transformers.EncoderDecoderModel(config=config).eval()
    directory = tmp_path_factory.mktemp("hf-s2s")
    theirs.save_pretrained(directory)
    return directory


@pytest.mark.parametrize("direction", ["transformers->bertkit", "bertkit->transformers"])
def test_encoder_decoder_matches_transformers(seq2seq_dir, tmp_path, direction):
    source = seq2seq_dir
    if direction == "bertkit->transformers":
        EncoderDecoderModel.from_pretrained(seq2seq_dir).save_pretrained(tmp_path)
        source = tmp_path
    ours = EncoderDecoderModel.from_pretrained(source)
    assert ours.enc_to_dec_proj is not None  # encoder width 32, decoder width 48
    theirs = hf_load(transformers.EncoderDecoderModel, source)
    ids, mask = batch()
    labels, label_mask = batch(rows=3, length=6, seed=4)
    labels = labels.masked_fill(label_mask == 0, -100)
    kwargs = dict(attention_mask=mask, labels=labels, output_attentions=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' note on where the loss is computed
        a, b = ours(ids, **kwargs), theirs(ids, **kwargs)
    assert close(a.logits, b.logits)
    assert abs(a.loss.item() - b.loss.item()) < TOL
    assert close(a.encoder_last_hidden_state, b.encoder_last_hidden_state, mask)
    assert len(a.cross_attentions) == len(b.cross_attentions) == 2
    for x, y in zip(a.cross_attentions, b.cross_attentions, strict=True):
        assert x.shape == y.shape == (3, 4, 6, 9)
        assert close(x, y)
    for x, y in zip(a.decoder_attentions, b.decoder_attentions, strict=True):
        assert close(x, y)


def test_encoder_decoder_cached_steps_equal_one_pass(seq2seq_dir):
    ours = EncoderDecoderModel.from_pretrained(seq2seq_dir)
    ids, mask = batch()
    target, _ = batch(rows=3, length=6, seed=5)
    with torch.no_grad():
        encoded = ours.encoder(ids, mask)
        full = ours(attention_mask=mask, decoder_input_ids=target, encoder_outputs=encoded).logits
        cache, steps = None, []
        for t in range(6):
            out = ours(attention_mask=mask, decoder_input_ids=target[:, t:t + 1], encoder_outputs=encoded,
                       past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            steps.append(out.logits)
    assert close(torch.cat(steps, 1), full)


def test_bert2bert_warm_start_from_two_checkpoints(tmp_path):
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(**TINY))
    encoder.save_pretrained(tmp_path / "enc")
    transformers.BertForMaskedLM(hf_config()).save_pretrained(tmp_path / "dec")  # a transformers MLM
    with pytest.warns(UserWarning, match="newly initialised"):  # the cross-attention layers
        model = EncoderDecoderModel.from_encoder_decoder_pretrained(
            str(tmp_path / "enc"), str(tmp_path / "dec"), decoder_start_token_id=2, pad_token_id=0, eos_token_id=3)
    assert torch.equal(model.encoder.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    mlm = transformers.BertForMaskedLM.from_pretrained(tmp_path / "dec")
    assert torch.equal(model.decoder.cls.predictions.transform.dense.weight, mlm.cls.predictions.transform.dense.weight)
    model.save_pretrained(tmp_path / "b2b")
    theirs = hf_load(transformers.EncoderDecoderModel, tmp_path / "b2b")
    assert theirs.config.decoder_start_token_id == 2 and theirs.config.decoder.add_cross_attention
    ids, mask = batch()
    target, _ = batch(rows=3, length=5, seed=6)
    with torch.no_grad():
        a = model.eval()(ids, mask, decoder_input_ids=target).logits
        b = theirs(ids, attention_mask=mask, decoder_input_ids=target).logits
    assert close(a, b)


def test_shift_tokens_right_reads_ignored_labels_as_pad():
    labels = torch.tensor([[7, 8, -100, -100]])
    assert shift_tokens_right(labels, 0, 2).tolist() == [[2, 7, 8, 0]]


def test_decoder_mistakes_are_clear_errors():
    with pytest.raises(ConfigError, match="is_decoder=True"):
        BertLMHeadModel(BertConfig(**TINY))
    with pytest.raises(ConfigError, match="needs is_decoder=True"):
        BertConfig(**TINY, add_cross_attention=True)
    with pytest.raises(ConfigError, match="relative_key"):
        BertConfig(**TINY, is_decoder=True, position_embedding_type="relative_key")
    encoder = BertModel(BertConfig(**TINY))
    with pytest.raises(BertkitError, match="no cross-attention"):
        encoder(torch.ones(1, 3, dtype=torch.long), encoder_hidden_states=torch.zeros(1, 2, 32))
    with pytest.raises(BertkitError, match="for decoders"):
        encoder(torch.ones(1, 3, dtype=torch.long), use_cache=True)
    with pytest.raises(ConfigError, match="add_cross_attention"):
        EncoderDecoderConfig(BertConfig(**TINY), BertConfig(**TINY, is_decoder=True))



def test_warm_start_keywords_it_does_not_take_are_refused_by_name(tmp_path):
    """tie_encoder_decoder=True had been a bare TypeError from the config's constructor."""
    BertModel(BertConfig(**TINY)).save_pretrained(tmp_path / "enc")
    enc = str(tmp_path / "enc")
    with pytest.raises(ConfigError, match="tie_encoder_decoder=True .* is not supported"):
        EncoderDecoderModel.from_encoder_decoder_pretrained(enc, enc, tie_encoder_decoder=True)
    with pytest.raises(ConfigError, match="got eos_id=, which it does not take; its special ids are"):
        EncoderDecoderModel.from_encoder_decoder_pretrained(enc, enc, eos_id=3)


@pytest.mark.parametrize("queries,keys,padded", [(7, 7, False), (7, 7, True), (3, 7, True), (1, 7, False)])
def test_causal_kernels_agree_with_the_definition(queries, keys, padded):
    from bertkit.models.attention import KERNELS, AttentionCall

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 8, generator=g) for n in (queries, keys, keys))
    bias = None
    if padded:
        bias = torch.zeros(2, 1, 1, keys)
        bias[0, ..., :2] = torch.finfo(torch.float32).min  # left padding of the first row
    # the definition: query i is position keys - queries + i and sees keys j <= that position
    allowed = torch.arange(keys)[None, :] <= torch.arange(keys - queries, keys)[:, None]
    if padded:
        allowed = allowed & (bias == 0)
    scores = (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(~allowed, float("-inf"))
    expected = scores.softmax(-1).nan_to_num() @ v
    call = AttentionCall(scale=8 ** -0.5, causal=True)
    real = allowed.expand(2, 3, queries, keys).any(-1)  # rows with a key left (not fully padded)
    for name in ("sdpa", "explicit"):
        context, _ = KERNELS[name](q, k, v, bias, call)
        assert (context - expected)[real].abs().max() < 1e-5, name
