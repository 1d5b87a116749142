"""Held-out metrics for pre-training: MLM loss, accuracy, perplexity; NSP/SOP accuracy.

Over all N labelled positions of the held-out batches (not an average of batch means, so
batches with few masks do not count as much as full ones):

    mlm_loss     = 1/N sum_i -log p(y_i | x)
    mlm_accuracy = 1/N sum_i [argmax_v p(v | x) = y_i]
    perplexity   = exp(mlm_loss)

and, when the batches carry `next_sentence_label`, the share of pairs whose relation (is-next
for NSP, in-order for SOP) is predicted right.
"""

from __future__ import annotations

import math
from typing import Iterable

import torch
import torch.nn.functional as F

from ..heads import IGNORE_INDEX


@torch.no_grad()
def evaluate_pretraining(model, batches: Iterable[dict], sentence_task: str = "nsp") -> dict:
    """Metrics of `model` (BertForMaskedLM or BertForPreTraining) on pre-masked `batches`."""
    device = next(model.parameters()).device
    loss_sum, correct, count = 0.0, 0, 0
    pair_correct, pairs = 0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        labels = batch["labels"]
        out = model(**batch)
        # With labels the model returns logits only at labelled positions, in row-major order.
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        targets = labels[labels != IGNORE_INDEX]
        loss_sum += float(F.cross_entropy(logits.float(), targets, reduction="sum"))
        correct += int((logits.argmax(-1) == targets).sum())
        count += targets.numel()
        if "next_sentence_label" in batch and getattr(out, "seq_relationship_logits", None) is not None:
            predicted = out.seq_relationship_logits.argmax(-1)
            pair_correct += int((predicted == batch["next_sentence_label"].view(-1)).sum())
            pairs += predicted.numel()
    if count == 0:
        return {}
    loss = loss_sum / count
    metrics = {"mlm_loss": loss, "mlm_accuracy": correct / count,
               "perplexity": math.exp(min(loss, 50.0))}  # capped: exp overflows past ~700
    if pairs:
        metrics[f"{sentence_task}_accuracy"] = pair_correct / pairs
    return metrics
