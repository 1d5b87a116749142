"""Held-out pre-training metrics and their context-free baseline."""

import math

import numpy as np
import torch

from bertkit.objectives.metrics import unigram_baseline


def test_unigram_baseline_counts_training_text_without_specials():
    # ids: 0 = [PAD], 2 = [CLS] (special, most frequent in raw counts), 5 most frequent word piece
    docs = [[np.array([2, 5, 5, 6]), np.array([2, 5])], [np.array([2, 2, 7])], [np.array([6, 6, 6, 6])]]
    train_docs = [0, 1]  # document 2 is held out: its 6s must not be counted
    batches = [{"labels": torch.tensor([[5, -100, 6], [-100, 7, 5]])}]
    result = unigram_baseline(docs, train_docs, batches, vocab_size=8, special_ids=[0, 2])
    assert result["most_frequent_token_id"] == 5
    assert result["most_frequent_token_accuracy"] == 0.5  # 2 of the 4 labels are 5
    counts = np.array([0, 0, 0, 0, 0, 3, 1, 1], dtype=float)  # add-one smoothed below
    probs = (counts + 1) / (counts.sum() + 8)
    expected = -np.mean(np.log(probs[[5, 6, 7, 5]]))
    assert math.isclose(result["unigram_loss"], expected, rel_tol=1e-9)
    assert result["counted_tokens"] == 9


def test_unigram_baseline_without_labels_is_empty():
    docs = [[np.array([3, 4])]]
    assert unigram_baseline(docs, [0], [{"labels": torch.full((1, 2), -100)}], vocab_size=5) == {}


def test_replaced_accuracy_leaves_out_positions_that_show_their_answer():
    from bertkit.objectives.metrics import evaluate_pretraining

    class CopyInput(torch.nn.Module):  # predicts the input token: right only where it was kept
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, labels, **_):
            logits = torch.nn.functional.one_hot(input_ids[labels != -100], 10).float() * 5
            return type("Out", (), {"logits": logits})()

    batch = {"input_ids": torch.tensor([[1, 4, 4, 7, 9]]),  # 4 = [MASK]; 7 kept; 9 random
             "labels": torch.tensor([[-100, 3, 5, 7, 2]])}
    metrics = evaluate_pretraining(CopyInput(), [batch])
    assert metrics["mlm_accuracy"] == 0.25
    assert metrics["mlm_replaced_accuracy"] == 0.0
