"""BERT as a left-to-right language model: transformers' `BertLMHeadModel`.

The encoder with `config.is_decoder=True` (causal self-attention: position t sees positions
<= t) and the MLM head's vocabulary projection at every position, tied to the word embeddings:

    logits_t = transform(h_t) E^T + b        loss = mean_t CE(logits_t, labels_{t+1})

(the labels are the inputs; the shift is inside, as transformers does; -100 marks no target).
With `add_cross_attention=True` every layer also attends to an encoder's states
(`encoder_hidden_states`): the decoder half of `EncoderDecoderModel`. Checkpoint keys are
transformers' (`bert.encoder.layer.0.crossattention.self.query.weight`, `cls.predictions.*`),
so a directory saved here loads in `transformers.BertLMHeadModel` and the other way round.
`generate` (bertkit/models/generation.py) continues a prompt greedily or by beam search.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bertkit.models.config import BertConfig
from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import ConfigError
from bertkit.models.generation import Generates
from bertkit.models.heads import BertOnlyMLMHead, _WithEncoder
from bertkit.models.kv_cache import KVCache
from bertkit.models.encoder import ModelOutput


@dataclass
class CausalLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # (B, T, V); (B, k, V) with logits_to_keep=k
    past_key_values: KVCache | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None  # per layer, (B, h, T, past + T): causal
    cross_attentions: tuple[torch.Tensor, ...] | None = None  # per layer, (B, h, T, S) over the encoder


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy: logits at t against labels at t + 1, the mean over every target
    that is not -100 (in float32, as transformers computes it)."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=IGNORE_INDEX)


class BertLMHeadModel(Generates, _WithEncoder):
    """Causal LM (and the decoder of an encoder-decoder); see the module docstring."""

    add_pooling_layer = False  # as in transformers: the LM reads every position, never [CLS] alone

    def __init__(self, config: BertConfig):
        if not config.is_decoder:
            raise ConfigError("BertLMHeadModel predicts the next token and needs causal self-attention: pass "
                              "is_decoder=True (e.g. BertLMHeadModel.from_pretrained(dir, is_decoder=True))")
        super().__init__(config)
        self.cls = BertOnlyMLMHead(config, self.bert.embeddings.word_embeddings)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, head_mask=None,
                encoder_hidden_states=None, encoder_attention_mask=None, labels=None,
                past_key_values: KVCache | None = None, use_cache: bool = False, output_attentions=False,
                output_hidden_states=False, logits_to_keep: int = 0) -> CausalLMOutput:
        """`logits_to_keep` k > 0: logits of the last k positions only (generation needs 1)."""
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask, output_attentions,
                        output_hidden_states, encoder_hidden_states=encoder_hidden_states,
                        encoder_attention_mask=encoder_attention_mask, past_key_values=past_key_values,
                        use_cache=use_cache and labels is None)
        hidden = out.last_hidden_state if not logits_to_keep else out.last_hidden_state[:, -logits_to_keep:]
        logits = self.cls.predictions(hidden)
        loss = None if labels is None else causal_lm_loss(logits, labels)
        return CausalLMOutput(loss, logits, out.past_key_values, out.hidden_states, out.attentions,
                              out.cross_attentions)
