"""Held-out metrics for pre-training: MLM loss, accuracy, perplexity; NSP/SOP accuracy.

Over all N labelled positions of the held-out batches (not an average of batch means, so
batches with few masks do not count as much as full ones):

    mlm_loss     = 1/N sum_i -log p(y_i | x)
    mlm_accuracy = 1/N sum_i [argmax_v p(v | x) = y_i]
    perplexity   = exp(mlm_loss)

`mlm_replaced_accuracy` is the accuracy over the labelled positions whose input token was
replaced ([MASK] or a random token: 90% of them under 80/10/10). The other 10% show the
model its answer, and copying it is learnt long before any use of context, so early in
training mlm_accuracy can sit near 10% while mlm_replaced_accuracy is still at the
frequent-token baseline.

and, when the batches carry `next_sentence_label`, the share of pairs whose relation (is-next
for NSP, in-order for SOP) is predicted right.

`unigram_baseline` gives the context-free reference those numbers must beat: always
predicting the training text's most frequent token, and the loss of its unigram distribution.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import torch
import torch.nn.functional as F

from bertkit.data.masking import IGNORE_INDEX


MLM_METRICS = ("mlm_loss", "mlm_accuracy", "perplexity", "mlm_replaced_accuracy")  # evaluate_pretraining's


@torch.no_grad()
def evaluate_pretraining(model, batches: Iterable[dict], sentence_task: str = "nsp") -> dict:
    """Metrics of `model` (BertForMaskedLM or BertForPreTraining) on pre-masked `batches`."""
    device = next(model.parameters()).device
    loss_sum, correct, count = 0.0, 0, 0
    replaced_correct, replaced = 0, 0
    pair_correct, pairs = 0, 0
    for batch in batches:
        batch = {k: v.to(device) for k, v in batch.items()}
        labels = batch["labels"]
        out = model(**batch)
        # With labels the model returns logits only at labelled positions, in row-major order.
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        labelled = labels != IGNORE_INDEX
        targets = labels[labelled]
        loss_sum += float(F.cross_entropy(logits.float(), targets, reduction="sum"))
        hits = logits.argmax(-1) == targets
        correct += int(hits.sum())
        count += targets.numel()
        was_replaced = batch["input_ids"][labelled] != targets
        replaced_correct += int(hits[was_replaced].sum())
        replaced += int(was_replaced.sum())
        if "next_sentence_label" in batch and getattr(out, "seq_relationship_logits", None) is not None:
            predicted = out.seq_relationship_logits.argmax(-1)
            pair_correct += int((predicted == batch["next_sentence_label"].view(-1)).sum())
            pairs += predicted.numel()
    if count == 0:
        return {}
    loss = loss_sum / count
    metrics = {"mlm_loss": loss, "mlm_accuracy": correct / count,
               "perplexity": math.exp(min(loss, 50.0))}  # capped: exp overflows past ~700
    if replaced:
        metrics["mlm_replaced_accuracy"] = replaced_correct / replaced
    if pairs:
        metrics[f"{sentence_task}_accuracy"] = pair_correct / pairs
    return metrics


def unigram_baseline(docs, doc_indices, batches: Iterable[dict], vocab_size: int,
                     special_ids: Iterable[int] = (), max_tokens: int = 20_000_000) -> dict:
    """What a model that ignores context scores on the held-out masks of `batches`.

    Token counts come from the training documents `docs[i] for i in doc_indices` (lists of
    sentence id arrays), at most `max_tokens` of them (a sample for corpora larger than that),
    with special tokens removed: the "most frequent token" is the most frequent *word piece*.
    Returns its accuracy on the held-out labels, and the cross-entropy of the add-one smoothed
    unigram distribution (the loss a model that learnt only token frequencies would reach).
    """
    counts = np.zeros(vocab_size, dtype=np.int64)
    pending: list[np.ndarray] = []  # counted a million tokens at a time: one bincount each
    pending_tokens = seen = 0

    def flush() -> None:
        nonlocal pending_tokens
        if pending:
            counts[:] += np.bincount(np.concatenate(pending).astype(np.int64), minlength=vocab_size)[:vocab_size]
        pending.clear()
        pending_tokens = 0

    for i in doc_indices:
        if seen >= max_tokens:
            break
        for sentence in docs[int(i)]:
            pending.append(np.asarray(sentence))
            pending_tokens += len(sentence)
            seen += len(sentence)
        if pending_tokens >= 1_000_000:
            flush()
    flush()
    counts[list(special_ids)] = 0
    log_probs = np.log(counts + 1.0) - np.log(counts.sum() + vocab_size)
    top = int(counts.argmax())
    targets = np.concatenate([b["labels"][b["labels"] != IGNORE_INDEX].numpy() for b in batches]
                             or [np.zeros(0, dtype=np.int64)])
    if targets.size == 0:
        return {}
    return {"most_frequent_token_id": top, "most_frequent_token_accuracy": float((targets == top).mean()),
            "unigram_loss": float(-log_probs[targets].mean()), "counted_tokens": int(seen)}
