"""Masked language modelling, alone (BERT without NSP, RoBERTa) or with a sentence-pair task
(BERT's next-sentence prediction, ALBERT's sentence-order prediction): the parts the registry's
"mlm", "mlm+nsp" and "mlm+sop" entries are made of.

Batches come from `MLMCollator` (the `[data]` masking settings): `labels` hold the original id
at the masked positions and -100 elsewhere, plus `next_sentence_label` for pair examples. The
losses are the heads' (`bertkit/models/heads.py`):

    mlm        loss = mean_{t in M} -log p(x_t | x_masked)                     (BertForMaskedLM)
    mlm+nsp    loss = mlm_loss + mean_pairs -log p(is_next | pair)             (BertForPreTraining)
    mlm+sop    loss = mlm_loss + mean_pairs -log p(in_order | pair)            (BertForPreTraining;
               with model_type "albert" its second head is ALBERT's sentence-order head)

Held-out metrics are `bertkit.objectives.metrics.evaluate_pretraining`'s.
"""

from __future__ import annotations

from typing import Callable

from bertkit.data.collate import MLMCollator
from bertkit.data.keywords import read_keywords
from bertkit.errors import ConfigError
from bertkit.models.families import family_of
from bertkit.models.heads import BertForMaskedLM, BertForPreTraining
from bertkit.objectives.metrics import evaluate_pretraining

MLM_BUILDERS = ("full_sentences", "doc_sentences", "packed")  # single packed sequences; the first is the default


def masking_options(data) -> dict:
    """Extra `MLMCollator` arguments for the configured masking (keywords and their rate)."""
    if data.masking != "keyword":
        return {}
    return {"keywords": read_keywords(data.keywords), "keyword_probability": data.keyword_probability}


def mlm_collator(tokenizer, data, seed: int) -> MLMCollator:
    """Pad and mask as the `[data]` section says (strategy, rate, static masks, keywords)."""
    return MLMCollator(tokenizer, mlm_probability=data.mlm_probability, strategy=data.masking,
                       static=data.static_masking, seed=seed, **masking_options(data))


def masked_lm(config, settings=None):
    """The "mlm" model: the encoder with its MLM head (no settings), of the config's family."""
    return family_of(config).head_for(BertForMaskedLM)(config)


def pre_training(config, settings=None) -> BertForPreTraining:
    """The "mlm+nsp" / "mlm+sop" model: MLM head plus the two-way sentence-pair head."""
    family = family_of(config)
    if not family.has_segments:
        raise ConfigError(f"the {config.model_type} encoder has no sentence-pair head; use data.objective = \"mlm\"")
    return family.head_for(BertForPreTraining)(config)


def mlm_metrics(model, batches, seed: int = 0) -> dict:
    """mlm_loss, mlm_accuracy, perplexity, mlm_replaced_accuracy on the pre-masked held-out
    batches (the seed is unused: the masks are drawn once, when the batches are made)."""
    return evaluate_pretraining(model, batches)


def pair_metrics(task: str) -> Callable:
    """mlm_metrics plus `{task}_accuracy`, the share of pairs whose relation is predicted right."""
    def metrics(model, batches, seed: int = 0) -> dict:
        return evaluate_pretraining(model, batches, task)

    metrics.__name__ = f"{task}_metrics"
    return metrics
