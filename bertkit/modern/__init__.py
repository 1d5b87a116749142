"""The modern encoder: ModernBERT's architecture, checkpoints shared with transformers'
ModernBert classes (config.py, model.py, heads.py)."""

from .config import ModernBertConfig
from .heads import (ModernBertForMaskedLM, ModernBertForMultipleChoice, ModernBertForQuestionAnswering,
                    ModernBertForSequenceClassification, ModernBertForTokenClassification)
from .model import ModernBertModel
