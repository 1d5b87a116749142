"""The modern encoder: ModernBERT's architecture, checkpoints shared with transformers'
ModernBert classes (config.py, model.py, heads.py)."""

from bertkit.models.modern.config import ModernBertConfig
from bertkit.models.modern.heads import (ModernBertForMaskedLM, ModernBertForMultipleChoice, ModernBertForQuestionAnswering,
                    ModernBertForSequenceClassification, ModernBertForTokenClassification)
from bertkit.models.modern.model import ModernBertModel
