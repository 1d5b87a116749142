"""bertkit: a compact, fast, readable toolkit for BERT-family encoders."""

from .threads import passive_wait_policy

passive_wait_policy()  # first: OpenMP reads OMP_WAIT_POLICY when torch loads (see bertkit/threads.py)

from . import assets
from .config import SIZE_PRESETS, BertConfig
from .encode import SentenceEncoder
from .errors import BertkitError, CheckpointError, ConfigError, DataError
from .heads import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                    BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                    BertForTokenClassification)
from .model import BertModel, EncoderOutput
from .kv_cache import KVCache
from .lm_head import BertLMHeadModel
from .encoder_decoder import EncoderDecoderConfig, EncoderDecoderModel
from .modern import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForMultipleChoice,
                     ModernBertForQuestionAnswering, ModernBertForSequenceClassification,
                     ModernBertForTokenClassification, ModernBertModel)
from .tokenizer import BatchEncoding, Tokenizer
from .distill import Distiller, distillation_loss, student_from_teacher
from .objectives.electra import ElectraForPreTraining, ElectraPretrainer, generator_config

__version__ = "0.1.0"
