"""Model-independent parts of fine-tuning tasks: file formats, metrics, label/token
alignment, QA span decoding, and real labelled data built from installable assets.

The modules import only numpy and the standard library, so data preparation and
evaluation work without torch.
"""

from bertkit.tasks.alignment import IGNORE_INDEX, align_labels_to_tokens, word_predictions_from_tokens
from bertkit.tasks.formats import (
    QAExample,
    SquadReadStats,
    TextExample,
    TokenExample,
    build_label_map,
    check_labels_known,
    infer_task_kind,
    read_conll,
    read_squad,
    read_text_dataset,
    write_conll,
    write_squad,
)
from bertkit.tasks.metrics import (
    accuracy,
    entity_prf,
    entity_spans,
    macro_f1,
    micro_f1,
    pearson,
    per_class_prf,
    spearman,
    squad_em_f1,
    squad_evaluate,
)
from bertkit.tasks.qa_spans import QAFeature, SpanPrediction, best_spans, merge_features, null_score

__all__ = [
    "IGNORE_INDEX", "align_labels_to_tokens", "word_predictions_from_tokens",
    "QAExample", "SquadReadStats", "TextExample", "TokenExample", "build_label_map",
    "check_labels_known", "infer_task_kind", "read_conll", "read_squad", "read_text_dataset",
    "write_conll", "write_squad",
    "accuracy", "entity_prf", "entity_spans", "macro_f1", "micro_f1", "pearson",
    "per_class_prf", "spearman", "squad_em_f1", "squad_evaluate",
    "QAFeature", "SpanPrediction", "best_spans", "merge_features", "null_score",
]
