import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bertkit.data import masking as M
from bertkit.data.collate import MLMCollator, pad_examples
from bertkit.errors import ConfigError, DataError
from tests.data.helpers import bbc_documents, minilm_tokenizer

# A toy vocabulary: 0-4 special, 5-29 start a word, 30-49 continue one ("##x" pieces).
PAD, CLS, SEP, MASK, UNK = 0, 1, 2, 3, 4
SPECIALS = (PAD, CLS, SEP, MASK, UNK)
TOY = M.VocabInfo(50, PAD, MASK, SPECIALS, np.arange(50) >= 30, "wordpiece")
STRATEGIES = ["token", "whole_word", "span", "keyword"]
KEYWORDS = [(7,), (8, 31), (9, 30, 30)]

token = st.integers(5, 49)
sequence = st.lists(token, min_size=0, max_size=60).map(lambda t: [CLS, *t, SEP])
pair = st.tuples(st.lists(token, min_size=1, max_size=30), st.lists(token, min_size=1, max_size=30)).map(
    lambda ab: [CLS, *ab[0], SEP, *ab[1], SEP])
batches = st.lists(st.one_of(sequence, pair, st.lists(st.sampled_from([5, 7, 8, 31, 9, 30]), max_size=40)
                             .map(lambda t: [CLS, *t, SEP])), min_size=1, max_size=6)


def collator(strategy, **kw):
    return MLMCollator(TOY, strategy=strategy, keywords=KEYWORDS, **kw)


def as_examples(seqs):
    return [{"input_ids": s, "token_type_ids": [0] * len(s)} for s in seqs]


def words_of(ids_row, cand_row):
    """Word id per position by the rules, written out with a plain loop (a second opinion)."""
    out, w, prev_cand = [], -1, False
    for t, c in zip(ids_row, cand_row):
        if not c:
            out.append(-1)
        else:
            if not (prev_cand and TOY.is_continuation[t]):
                w += 1
            out.append(w)
        prev_cand = c
    return out


@settings(max_examples=60, deadline=None)
@given(batches, st.sampled_from(STRATEGIES), st.integers(0, 2**31))
def test_masking_invariants(seqs, strategy, seed):
    batch = collator(strategy, seed=seed, mlm_probability=0.3)(as_examples(seqs))
    B, L = batch["input_ids"].shape
    assert L % 8 == 0 and B == len(seqs)
    orig = pad_examples(as_examples(seqs), PAD)["input_ids"]
    out, labels = batch["input_ids"], batch["labels"]
    on = labels != -100
    special_or_pad = torch.isin(orig, torch.tensor(SPECIALS))
    assert not on[special_or_pad].any()  # specials and padding are never chosen
    assert torch.equal(out[special_or_pad], orig[special_or_pad])
    assert torch.equal(labels[on], orig[on])  # labels carry the original ids on the mask
    assert torch.equal(out[~on], orig[~on])  # and nothing changes off it
    replaced = out[on & (out != MASK)]
    assert not torch.isin(replaced, torch.tensor(SPECIALS)).any()  # random tokens are never special
    assert batch["attention_mask"].sum().item() == sum(map(len, seqs))
    if strategy in ("whole_word", "span", "keyword"):
        cand = (~special_or_pad).tolist()
        for b in range(B):
            wid = words_of(orig[b].tolist(), cand[b])
            if strategy != "keyword":  # keyword masking tops up with single tokens
                for w in set(wid) - {-1}:
                    flags = {bool(on[b, i]) for i in range(L) if wid[i] == w}
                    assert len(flags) == 1, "a word was split"


@settings(max_examples=40, deadline=None)
@given(batches, st.integers(1, 6), st.floats(0.05, 1.0), st.integers(0, 2**31))
def test_span_lengths_respect_max_span(seqs, max_span, p, seed):
    ids = pad_examples(as_examples(seqs), PAD)["input_ids"]
    cand = ~torch.isin(ids, torch.tensor(SPECIALS))
    g = torch.Generator().manual_seed(seed)
    k = M.masking_budget(cand, 0.5, g)
    wid = M.word_ids(ids, cand, TOY)
    mask, span = M.span_mask(cand, wid, k, g, max_span=max_span, p=p)
    assert torch.equal(mask, span >= 0)
    for b in range(len(seqs)):
        for s in set(span[b].tolist()) - {-1}:
            words = sorted(set(wid[b][span[b] == s].tolist()))
            assert len(words) <= max_span and words == list(range(words[0], words[-1] + 1))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_seeded_and_state_restores_exactly(strategy):
    examples = as_examples([[CLS, *range(5, 45), SEP]] * 8)
    a, b = collator(strategy, seed=11), collator(strategy, seed=11)
    first = a(examples)
    assert torch.equal(first["input_ids"], b(examples)["input_ids"])
    state = a.state_dict()
    nxt = [a(examples)["labels"] for _ in range(3)]
    assert not torch.equal(nxt[0], first["labels"])  # dynamic: fresh masks every call
    c = collator(strategy, seed=99)
    c.load_state_dict(state)
    assert all(torch.equal(c(examples)["labels"], n) for n in nxt)


def random_corpus(n, length, seed=0):
    rng = np.random.default_rng(seed)
    return as_examples([[CLS, *rng.integers(5, 50, length).tolist(), SEP] for _ in range(n)])


@pytest.mark.parametrize("strategy", ["token", "whole_word", "span"])
def test_masked_share_and_80_10_10(strategy):
    examples = random_corpus(1500, 126)
    col = collator(strategy, seed=0)
    orig = pad_examples(examples, PAD)["input_ids"]
    batch = col(examples)
    on = batch["labels"] != -100
    share = on.sum().item() / (1500 * 126)
    assert abs(share - 0.15) < 0.006, share
    out = batch["input_ids"][on]
    n = on.sum().item()
    masked, kept = (out == MASK).sum().item() / n, (out == orig[on]).sum().item() / n
    random_share = 1 - masked - kept
    # A random replacement equals the original with chance 1/45; 45 non-special ids.
    assert abs(masked - 0.8) < 0.025 and abs(kept - 0.1 - 0.1 / 45) < 0.02 and abs(random_share - 0.1) < 0.02
    if strategy == "span":  # one decision per span: all [MASK] or none
        g = torch.Generator().manual_seed(0)
        ids = orig[:200]
        cand = ~torch.isin(ids, torch.tensor(SPECIALS))
        mask, span = M.span_mask(cand, M.word_ids(ids, cand, TOY), M.masking_budget(cand, 0.15, g), g)
        out, _ = M.apply_replacement(ids, mask, TOY, g, groups=span)
        for b in range(200):
            for s in set(span[b].tolist()) - {-1}:
                assert len(set((out[b][span[b] == s] == MASK).tolist())) == 1


def test_budget_is_unbiased_for_short_sequences():
    examples = as_examples([[CLS, 5, 6, 7, 8, 9, SEP]] * 4000)  # 5 tokens: 0.75 expected
    labels = collator("token", seed=1)(examples)["labels"]
    assert abs((labels != -100).sum().item() / 20000 - 0.15) < 0.015


def test_keyword_masking():
    rng = np.random.default_rng(0)
    seqs = [[CLS, *rng.choice([7, 5, 6, 10, 11], 60).tolist(), SEP] for _ in range(500)]
    batch = collator("keyword", seed=0, keyword_probability=0.5, mlm_probability=0.15)(as_examples(seqs))
    orig = pad_examples(as_examples(seqs), PAD)["input_ids"]
    on = batch["labels"] != -100
    kw = orig == 7
    assert abs(on[kw].float().mean().item() - 0.5) < 0.03  # keyword tokens at their own rate
    # keywords are ~1/5 of tokens, half of them masked = 10%: token masking adds ~5% more.
    assert abs(on[~kw & (orig >= 5)].float().mean().item() - 0.05 / 0.8) < 0.015


def test_whole_words_and_keywords_with_the_real_tokenizer():
    tok = minilm_tokenizer()
    col = MLMCollator(tok, strategy="whole_word", seed=0)
    texts = [s for d in bbc_documents(20) for s in d][:200]
    examples = as_examples([[tok.cls_token_id, *ids, tok.sep_token_id] for ids in tok.encode_batch(texts) if ids])
    batch = col(examples)
    for row_ids, row_labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist()):
        orig = [lab if lab != -100 else i for i, lab in zip(row_ids, row_labels)]
        pieces = tok.convert_ids_to_tokens(orig)
        for i in range(1, len(orig)):
            if pieces[i].startswith("##"):  # a continuation piece shares the fate of its word
                assert (row_labels[i] != -100) == (row_labels[i - 1] != -100)
    kw = MLMCollator(tok, strategy="keyword", keywords=["economy", "government"], keyword_probability=1.0, seed=0)
    batch = kw(examples)
    targets = {i for ids in tok.encode_batch(["economy", "government"]) for i in ids}
    orig = torch.where(batch["labels"] != -100, batch["labels"], batch["input_ids"])
    hits = torch.isin(orig, torch.tensor(sorted(targets)))
    assert hits.sum() > 3 and (batch["labels"][hits] != -100).all()


def test_static_masks_are_fixed_per_example():
    examples = random_corpus(6, 40)
    col = collator("whole_word", seed=5, static=True)
    one, two = col(examples), col(list(reversed(examples)))
    assert torch.equal(one["labels"], two["labels"].flip(0))  # same example, same mask
    assert not torch.equal(one["labels"][0], one["labels"][1])
    with_ids = [dict(ex, example_id=i) for i, ex in enumerate(examples)]
    assert torch.equal(col(with_ids)["labels"], col(with_ids)["labels"])
    assert not torch.equal(collator("whole_word", seed=6, static=True)(examples)["labels"], one["labels"])


def test_padding_and_labels_for_nsp_examples():
    ex = [{"input_ids": [CLS, 5, SEP, 6, SEP], "token_type_ids": [0, 0, 0, 1, 1], "next_sentence_label": 1},
          {"input_ids": [CLS, 5, 6, 7, 8, 9, 10, 11, 12, SEP], "token_type_ids": [0] * 10, "next_sentence_label": 0}]
    batch = collator("token", seed=0)(ex)
    assert batch["input_ids"].shape == (2, 16)
    assert batch["token_type_ids"][0].tolist() == [0, 0, 0, 1, 1] + [0] * 11
    assert batch["attention_mask"].sum(1).tolist() == [5, 10]
    assert batch["next_sentence_label"].tolist() == [1, 0]
    with pytest.raises(DataError, match="some examples have next_sentence_label"):
        collator("token")([ex[0], {"input_ids": [CLS, 5, SEP]}])
    with pytest.raises(DataError, match="outside the vocabulary"):
        collator("token")([{"input_ids": [CLS, 500, SEP]}])


def test_bad_options():
    with pytest.raises(ConfigError, match="unknown masking strategy"):
        MLMCollator(TOY, strategy="random")
    with pytest.raises(ConfigError, match="must not exceed 1"):
        MLMCollator(TOY, mask_replace_prob=0.9, random_replace_prob=0.2)
    with pytest.raises(ConfigError, match="keywords"):
        MLMCollator(TOY, strategy="keyword")
    with pytest.raises(ConfigError, match="need a tokenizer"):
        MLMCollator(TOY, strategy="keyword", keywords=["word"])


def test_word_starts_for_wordpiece_and_byte_level_bpe():
    wp = M.continuation_table(["[CLS]", "un", "##believ", "##able", "cat", "[SEP]"], "wordpiece", {0, 5})
    assert wp.tolist() == [False, False, True, True, False, False]
    bpe = M.continuation_table(["<s>", "\u0120the", "re", "\u0120cat", ",", "</s>", "<mask>"], "bpe", {0, 5, 6})
    assert bpe.tolist() == [False, False, True, False, True, False, False]
    vocab = M.VocabInfo(7, 5, 6, (0, 5, 6), bpe, "bpe")
    ids = torch.tensor([[0, 2, 1, 2, 3, 4, 5, 2, 5]])  # <s> re Ġthe re Ġcat , </s> re </s>
    cand = ~vocab.is_special[ids]
    # "re" right after <s> or </s> starts a word (document start); later "re" continues "Ġthe".
    assert M.word_ids(ids, cand, vocab).tolist() == [[-1, 0, 1, 1, 2, 2, -1, 3, -1]]


def test_token_mask_picks_the_k_lowest_scores_of_each_row():
    """token_mask (a partial sort and a scatter) chooses what the rank definition does: the
    positions whose score ranks below k in their row (ranks = a double argsort), draw for draw."""
    g = torch.Generator().manual_seed(3)
    candidates = torch.rand(16, 200, generator=g) < 0.9
    candidates[3] = False  # a row without candidates
    k = M.masking_budget(candidates, 0.3, g)
    for seed in range(5):
        scores = torch.rand(candidates.shape, generator=torch.Generator().manual_seed(seed))
        scores.masked_fill_(~candidates, 2.0)
        by_rank = (scores.argsort(dim=1).argsort(dim=1) < k[:, None]) & candidates
        chosen = M.token_mask(candidates, k, torch.Generator().manual_seed(seed))
        assert torch.equal(chosen, by_rank) and torch.equal(chosen.sum(1), k)
