"""Shared pieces for the PEFT tests: a tiny random model, MiniLM with a 5-way head, a batch."""

import warnings

import pytest
import torch

import bertkit
from bertkit import BertConfig


def tiny_config(**overrides) -> BertConfig:
    values = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64, num_labels=3,
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    values.update(overrides)
    return BertConfig(**values)


def padded_batch(vocab_size: int = 120, batch: int = 3, length: int = 11, low: int = 5):
    """Random ids with row 1 padded after 6 tokens and row 2 after 9 (pad id 0)."""
    ids = torch.randint(low, vocab_size, (batch, length))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 9:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    return ids, mask


@pytest.fixture
def tiny_classifier():
    return bertkit.BertForSequenceClassification(tiny_config()).eval()


@pytest.fixture(scope="session")
def minilm_state(minilm_dir):
    """MiniLM's classifier with a 5-way head, built once; tests take fresh copies."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "classifier newly initialised"
        model = bertkit.BertForSequenceClassification.from_pretrained(minilm_dir, num_labels=5)
    return model.config, {k: v.clone() for k, v in model.state_dict().items()}


@pytest.fixture
def minilm_classifier(minilm_state):
    config, state = minilm_state
    model = bertkit.BertForSequenceClassification(config)
    model.load_state_dict(state)
    return model.eval()


@pytest.fixture(scope="session")
def minilm_batch(minilm_dir):
    from bertkit.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(minilm_dir)
    texts = ["Shares in the company fell sharply after the announcement.",
             "The striker scored twice.",
             "The new movie is awesome, said the critic who had seen it twice on Sunday."]
    enc = tokenizer(texts, padding=True, max_length=64)
    assert enc["attention_mask"].min() == 0
    return {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
