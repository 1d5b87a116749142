"""Greedy and beam search against transformers 5's `generate`, token for token on the same
weights: a causal LM continuing left-padded prompts and a BERT2BERT encoder-decoder, with eos
tokens the models really produce (so rows finish early and are padded), cached and uncached."""

import warnings

import pytest
import torch

from bertkit import BertConfig
from bertkit.models.encoder_decoder import EncoderDecoderModel
from bertkit.errors import ConfigError
from bertkit.models.generation import GenerationOptions, for_sampling
from bertkit.models.lm_head import BertLMHeadModel

transformers = pytest.importorskip("transformers")

# A wide initialisation spreads the logits of a random model, so the argmax and the beam ranking
# do not hang on differences of 1e-7 between two libraries' float sums.
TINY = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            initializer_range=0.3)
BEAMS = [dict(num_beams=3), dict(num_beams=3, length_penalty=0.3, early_stopping=True),
         dict(num_beams=4, length_penalty=2.0, early_stopping="never", num_return_sequences=2),
         dict(num_beams=2, length_penalty=-1.0)]


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def prompts():
    """Three prompts of 6, 4 and 2 tokens, left-padded with [PAD] = 0."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(5, TINY["vocab_size"], (3, 6), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    mask[2, :4] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.fixture(scope="module")
def causal_lm(tmp_path_factory):
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("lm")
    BertLMHeadModel(BertConfig(**TINY, is_decoder=True)).save_pretrained(directory)
    ours = BertLMHeadModel.from_pretrained(directory)
    theirs = quiet(transformers.BertLMHeadModel.from_pretrained, directory).eval()
    return ours, theirs


def generated(model, ids, mask):
    """Greedy's new tokens (after the prompt, or after an encoder-decoder's start token)."""
    out = model.generate(ids, mask, max_new_tokens=6)
    return out[:, 1:] if model.is_encoder_decoder else out[:, ids.shape[1]:]


def frequent_token(model, ids, mask):
    """A token greedy decoding produces early in some row but not in all: a real eos."""
    out = generated(model, ids, mask)
    for token in out[:, 1:4].flatten().tolist():
        if not bool((out == token).any(1).all()):
            return token
    return int(out[0, 2])


def eos_choices(model, ids, mask):
    """Two real eos ids: the token greedy decoding produces most (hypotheses end at many lengths)
    and one some rows produce early."""
    return [int(generated(model, ids, mask).flatten().mode().values), frequent_token(model, ids, mask)]


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_matches_transformers(causal_lm, use_cache):
    ours, theirs = causal_lm
    ids, mask = prompts()
    eos = frequent_token(ours, ids, mask)
    for options in (dict(max_new_tokens=8), dict(max_new_tokens=8, eos_token_id=eos, pad_token_id=0)):
        a = ours.generate(ids, mask, use_cache=use_cache, **options)
        b = quiet(theirs.generate, ids, attention_mask=mask, do_sample=False, use_cache=use_cache, **options)
        assert a.tolist() == b.tolist(), options
    assert (a[:, ids.shape[1]:] == eos).any(), "eos never produced: the test would not see rows finish"
    assert (a[:, -1] == 0).any(), "no row finished early"


@pytest.mark.parametrize("num_beams", [1, 3])
def test_right_padded_prompts_continue_as_their_left_padded_form(causal_lm, num_beams):
    """The tokenizer pads on the right; such a batch had continued its shorter rows after their
    pads (a different continuation, silently)."""
    ours, _ = causal_lm
    ids, mask = prompts()
    right_ids, right_mask = torch.zeros_like(ids), torch.zeros_like(mask)
    for row, n in enumerate(mask.sum(1).tolist()):
        right_ids[row, :n], right_mask[row, :n] = ids[row, -n:], 1
    left = ours.generate(ids, mask, max_new_tokens=6, num_beams=num_beams)
    assert torch.equal(ours.generate(right_ids, right_mask, max_new_tokens=6, num_beams=num_beams), left)


@pytest.mark.parametrize("options", BEAMS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_beam_search_matches_transformers(causal_lm, options):
    ours, theirs = causal_lm
    ids, mask = prompts()
    for eos in eos_choices(ours, ids, mask):
        kwargs = dict(options, max_new_tokens=7, eos_token_id=eos, pad_token_id=0)
        a = ours.generate(ids, mask, **kwargs)
        b = quiet(theirs.generate, ids, attention_mask=mask, do_sample=False, **kwargs)
        assert a.tolist() == b.tolist(), eos
        assert a.shape[0] == 3 * options.get("num_return_sequences", 1)


def test_beam_search_without_cache_gives_the_same_tokens(causal_lm):
    ours, _ = causal_lm
    ids, mask = prompts()
    cached = ours.generate(ids, mask, max_new_tokens=6, num_beams=3)
    assert cached.tolist() == ours.generate(ids, mask, max_new_tokens=6, num_beams=3, use_cache=False).tolist()


@pytest.fixture(scope="module")
def bert2bert(tmp_path_factory):
    torch.manual_seed(1)
    config = transformers.EncoderDecoderConfig.from_encoder_decoder_configs(
        transformers.BertConfig(**TINY), transformers.BertConfig(**TINY, is_decoder=True, add_cross_attention=True),
        decoder_start_token_id=2, pad_token_id=0)
    theirs = transformers.EncoderDecoderModel(config=config).eval()
    directory = tmp_path_factory.mktemp("b2b")
    theirs.save_pretrained(directory)
    return EncoderDecoderModel.from_pretrained(directory), quiet(transformers.EncoderDecoderModel.from_pretrained,
                                                                  directory).eval()


@pytest.mark.parametrize("options", [dict(num_beams=1)] + BEAMS[:3],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_encoder_decoder_generation_matches_transformers(bert2bert, options):
    ours, theirs = bert2bert
    ids, mask = prompts()
    ids, mask = ids.flip(1), mask.flip(1)  # an encoder's input is right-padded
    for eos in eos_choices(ours, ids, mask):
        kwargs = dict(options, max_new_tokens=8, eos_token_id=eos)
        a = ours.generate(ids, mask, **kwargs)
        b = quiet(theirs.generate, ids, attention_mask=mask, do_sample=False, **kwargs)
        assert a.tolist() == b.tolist(), eos
        assert (a[:, 0] == 2).all()  # decoding starts at decoder_start_token_id


NO_REPEAT = [dict(num_beams=1, no_repeat_ngram_size=1), dict(num_beams=1, no_repeat_ngram_size=2),
             dict(num_beams=3, no_repeat_ngram_size=2), dict(num_beams=3, no_repeat_ngram_size=3)]


def repeats(sequences: torch.Tensor, n: int) -> int:
    """How many rows hold some n-gram twice."""
    rows = [[tuple(row[i:i + n]) for i in range(len(row) - n + 1)] for row in sequences.tolist()]
    return sum(len(set(grams)) < len(grams) for grams in rows)


@pytest.mark.parametrize("options", NO_REPEAT, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_no_repeat_ngram_size_matches_transformers(causal_lm, bert2bert, options):
    """The option bans exactly what transformers' NoRepeatNGramLogitsProcessor bans, for greedy and beam
    search, decoder-only (prompt included) and encoder-decoder; without it these models do repeat."""
    ids, mask = prompts()
    n = options["no_repeat_ngram_size"]
    for (ours, theirs), (x, m) in ((causal_lm, (ids, mask)), (bert2bert, (ids.flip(1), mask.flip(1)))):
        kwargs = dict(options, max_new_tokens=12)
        a = ours.generate(x, m, **kwargs)
        b = quiet(theirs.generate, x, attention_mask=m, do_sample=False, **kwargs)
        assert a.tolist() == b.tolist()
        unbanned = ours.generate(x, m, max_new_tokens=12, num_beams=options["num_beams"])
        new = slice(1, None) if ours.is_encoder_decoder else slice(x.shape[1], None)
        assert repeats(unbanned[:, new], n) > 0 and repeats(a[:, new], n) == 0


PENALTIES = [dict(num_beams=1, repetition_penalty=1.5), dict(num_beams=1, repetition_penalty=0.7),
             dict(num_beams=3, repetition_penalty=1.3), dict(num_beams=1, repetition_penalty=1.5, no_repeat_ngram_size=2)]


@pytest.mark.parametrize("options", PENALTIES, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_repetition_penalty_matches_transformers(causal_lm, bert2bert, options):
    """CTRL's penalty on every real token of the row (a left-padded prompt's pads not counted), before
    the n-gram ban, as transformers' RepetitionPenaltyLogitsProcessor: greedy and beam search, decoder-only
    and encoder-decoder; it changes what these models generate."""
    ids, mask = prompts()
    for (ours, theirs), (x, m) in ((causal_lm, (ids, mask)), (bert2bert, (ids.flip(1), mask.flip(1)))):
        kwargs = dict(options, max_new_tokens=10)
        a = ours.generate(x, m, **kwargs)
        assert a.tolist() == quiet(theirs.generate, x, attention_mask=m, do_sample=False, **kwargs).tolist()
        plain = {k: v for k, v in kwargs.items() if k != "repetition_penalty"}
        assert a.tolist() != ours.generate(x, m, **plain).tolist()


SAMPLING = [dict(), dict(temperature=0.7), dict(top_k=5), dict(top_k=0, top_p=0.8),
            dict(temperature=1.3, top_k=10, top_p=0.9, num_return_sequences=3),
            dict(repetition_penalty=1.2, no_repeat_ngram_size=2, top_p=0.95)]


@pytest.mark.parametrize("options", SAMPLING, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_sampling_draws_what_transformers_draws_from_the_same_seed(causal_lm, bert2bert, options):
    """do_sample=True: temperature, top_k (50 unless named), top_p, then one torch.multinomial draw
    per row and step, so a seed gives transformers' ids; another seed gives other ids."""
    ids, mask = prompts()
    for (ours, theirs), (x, m) in ((causal_lm, (ids, mask)), (bert2bert, (ids.flip(1), mask.flip(1)))):
        kwargs = dict(options, max_new_tokens=10, do_sample=True)
        torch.manual_seed(3)
        a = ours.generate(x, m, **kwargs)
        torch.manual_seed(3)
        b = quiet(theirs.generate, x, attention_mask=m, **kwargs)
        assert a.tolist() == b.tolist()
        assert a.shape[0] == x.shape[0] * options.get("num_return_sequences", 1)
        torch.manual_seed(4)
        assert ours.generate(x, m, **kwargs).tolist() != a.tolist()


def test_sampling_keeps_only_the_top_k_and_the_nucleus():
    """for_sampling's cuts on known scores: top_k keeps ties with the k-th, top_p the fewest highest
    tokens whose probability reaches p (always the most likely)."""
    scores = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda **o: torch.isfinite(for_sampling(scores, GenerationOptions(do_sample=True, **o)))[0].tolist()
    assert kept(top_k=2) == [True, True, False, False]
    assert kept(top_k=0, top_p=0.79) == [True, True, False, False]  # 0.5 + 0.3 reaches 0.79
    assert kept(top_k=0, top_p=0.81) == [True, True, True, False]
    assert kept(top_k=0, top_p=0.1) == [True, False, False, False]
    halved = for_sampling(scores, GenerationOptions(do_sample=True, temperature=0.5, top_k=0))
    torch.testing.assert_close(halved, scores * 2)


def test_generation_options_are_checked():
    with pytest.raises(ConfigError, match="num_return_sequences"):
        GenerationOptions(num_beams=2, num_return_sequences=3)
    with pytest.raises(ConfigError, match="early_stopping"):
        GenerationOptions(early_stopping="sometimes")
    with pytest.raises(ConfigError, match="no_repeat_ngram_size must be an integer >= 0"):
        GenerationOptions(no_repeat_ngram_size=-1)
    with pytest.raises(ConfigError, match="temperature=0.7 acts only when sampling: pass do_sample=True"):
        GenerationOptions(temperature=0.7)
    with pytest.raises(ConfigError, match="beam sampling is not built"):
        GenerationOptions(do_sample=True, num_beams=2)
    for bad in (dict(temperature=0), dict(top_k=-1), dict(top_p=0), dict(top_p=1.5), dict(repetition_penalty=0)):
        with pytest.raises(ConfigError, match=f"{next(iter(bad))} must be"):
            GenerationOptions(do_sample=True, **bad)
    assert GenerationOptions(do_sample=True, num_return_sequences=4).num_return_sequences == 4
    model = BertLMHeadModel(BertConfig(**TINY, is_decoder=True))
    with pytest.raises(ConfigError, match="positions"):
        model.generate(torch.ones(1, 60, dtype=torch.long), max_new_tokens=10)
