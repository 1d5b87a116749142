"""bertkit: a compact, fast, readable toolkit for BERT-family encoders."""

from bertkit.runtime.threads import passive_wait_policy

passive_wait_policy()  # first: OpenMP reads OMP_WAIT_POLICY when torch loads (see bertkit/runtime/threads.py)

from bertkit.data import assets
from bertkit.models.config import SIZE_PRESETS, BertConfig
from bertkit.inference.encode import SentenceEncoder
from bertkit.errors import BertkitError, CheckpointError, ConfigError, DataError
from bertkit.models.heads import (BertForMaskedLM, BertForMultipleChoice, BertForNextSentencePrediction,
                    BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                    BertForTokenClassification)
from bertkit.models.encoder import BertModel, EncoderOutput
from bertkit.models.kv_cache import KVCache
from bertkit.models.lm_head import BertLMHeadModel
from bertkit.models.encoder_decoder import EncoderDecoderConfig, EncoderDecoderModel
from bertkit.models.modern import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForMultipleChoice,
                     ModernBertForQuestionAnswering, ModernBertForSequenceClassification,
                     ModernBertForTokenClassification, ModernBertModel)
from bertkit.tokenizer import BatchEncoding, Tokenizer
from bertkit.tasks.predictor import Predictor
from bertkit.distill import Distiller, distillation_loss, student_from_teacher
from bertkit.objectives.electra import ElectraForPreTraining, ElectraPretrainer, generator_config
from bertkit import peft  # bertkit.peft.PeftModel after `import bertkit`, as bertkit.data.assets

__version__ = "0.1.0"
