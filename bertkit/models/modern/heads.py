"""Heads on the modern encoder, under transformers' ModernBert names: the encoder as `model`, the
shared `head` (dense, activation, norm), `decoder` (MLM, tied to the token embeddings),
`classifier` (task heads). Forward arguments and outputs follow bertkit's BERT heads
(bertkit/models/heads.py), so a recipe can swap `BertForMaskedLM` for `ModernBertForMaskedLM`:
`token_type_ids` is accepted and ignored, and with labels the MLM computes the vocabulary
projection only at the labelled positions (logits (N, V)) unless `full_logits=True`.

Pooling for sequence classification and multiple choice is `config.classifier_pooling`: "cls"
reads the first real token of each row, "mean" averages the final states over real tokens. (With
left padding transformers' ModernBertForSequenceClassification reads column 0, a padding state;
its multiple-choice class reads the first real token, as both do here. Without left padding
the two agree.)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.checkpoint import PretrainedMixin
from bertkit.models.activations import activation
from bertkit.models.encoder import check_tensors
from bertkit.data.masking import IGNORE_INDEX
from bertkit.models.dropout import Dropout
from bertkit.models.heads import ClassifierOutput, MaskedLMOutput, QuestionAnsweringOutput, classification_loss, span_loss
from bertkit.models.modern.config import ModernBertConfig
from bertkit.models.modern.model import ModernBertModel, init_modern, layer_norm, refuse_head_mask, truncated_normal_


class ModernBertPredictionHead(nn.Module):
    """norm(act(W h)): one more non-linear layer before the decoder or classifier."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = activation(config.classifier_activation)
        self.norm = layer_norm(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(x)))


class TiedDecoder(nn.Module):
    """logits = x E^T + b with E the token-embedding matrix: saved once, as transformers does."""

    def __init__(self, embeddings: nn.Embedding, bias: bool):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(embeddings.num_embeddings)) if bias else None
        self.__dict__["embeddings"] = embeddings  # not a submodule: the weight belongs to it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.embeddings.weight, self.bias)


def first_real_token(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T) bool, True at each row's first real token ([CLS], also with left padding)."""
    check_tensors(input_ids, attention_mask)  # read here before the encoder checks them
    first = torch.zeros(input_ids.shape, dtype=torch.bool, device=input_ids.device)
    column = torch.zeros(input_ids.shape[0], dtype=torch.long, device=input_ids.device) \
        if attention_mask is None else attention_mask.argmax(-1)
    first[torch.arange(input_ids.shape[0], device=input_ids.device), column] = True
    return first


def pooled(encoder: ModernBertModel, how: str, input_ids, attention_mask, position_ids,
           output_attentions, output_hidden_states):
    """(encoder output, (B, H) pooled states): the first real token's final state ("cls"; the
    last layer then runs only there) or the mean of the final states over real tokens."""
    if how == "cls":
        out = encoder(input_ids, attention_mask, None, position_ids, None, output_attentions,
                      output_hidden_states, first_real_token(input_ids, attention_mask))
        return out, out.last_hidden_state
    out = encoder(input_ids, attention_mask, None, position_ids, None, output_attentions, output_hidden_states)
    hidden = out.last_hidden_state
    if attention_mask is None:
        return out, hidden.mean(1)
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return out, (hidden * weights).sum(1) / weights.sum(1)


class _WithModernEncoder(PretrainedMixin, nn.Module):
    """Shared constructor: the config, the encoder under `self.model`, the `head`; HF's init."""

    config_class = ModernBertConfig
    base_model_prefix = "model"

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)

    def _init_module(self, module: nn.Module) -> None:
        init_modern(self.config, module)
        std_out = self.config.initializer_range / math.sqrt(2.0 * self.config.num_hidden_layers)
        if module is self:
            truncated_normal_(self.head.dense.weight, std_out, self.config)
            if self.head.dense.bias is not None:
                nn.init.zeros_(self.head.dense.bias)
            decoder = getattr(self, "decoder", None)
            if isinstance(decoder, nn.Linear):  # an untied decoder (tie_word_embeddings=False)
                truncated_normal_(decoder.weight, std_out, self.config)
            if decoder is not None and decoder.bias is not None:
                nn.init.zeros_(decoder.bias)
            classifier = getattr(self, "classifier", None)
            if classifier is not None:
                truncated_normal_(classifier.weight, self.config.hidden_size ** -0.5, self.config)
                nn.init.zeros_(classifier.bias)

    def encode(self, input_ids, attention_mask=None, position_ids=None, output_attentions=False,
               output_hidden_states=False, output_mask=None):
        return self.model(input_ids, attention_mask, None, position_ids, None, output_attentions,
                          output_hidden_states, output_mask)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embeddings.tok_embeddings

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        self.model.set_gradient_checkpointing(enabled)

    def compile_layers(self, **options) -> None:
        self.model.compile_layers(**options)


class ModernBertForMaskedLM(_WithModernEncoder):
    """logits = decoder(head(h)); loss = CE over labelled positions (label -100 = no loss)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        if config.tie_word_embeddings:
            self.decoder = TiedDecoder(self.model.embeddings.tok_embeddings, config.decoder_bias)
        else:
            self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=config.decoder_bias)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False,
                full_logits: bool = False) -> MaskedLMOutput:
        refuse_head_mask(head_mask)
        # With labels, the last layer's output map and MLP, the head and the vocabulary
        # projection run only at the labelled positions: logits (N, V), row-major.
        selected = None if labels is None or full_logits else labels != IGNORE_INDEX
        # read before the encoder is queued: on a GPU a host read after it waits for the whole forward
        targets = None if selected is None else labels[selected]
        out = self.encode(input_ids, attention_mask, position_ids, output_attentions, output_hidden_states,
                          selected)
        logits = self.decoder(self.head(out.last_hidden_state))
        loss = None
        if selected is not None:
            loss = F.cross_entropy(logits, targets)
        elif labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return MaskedLMOutput(loss, logits, out.hidden_states, out.attentions)


class ModernBertForSequenceClassification(_WithModernEncoder):
    """Pooled final states (cls or mean) -> head -> dropout -> num_labels logits."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.drop = Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        refuse_head_mask(head_mask)
        out, states = pooled(self.model, self.config.classifier_pooling, input_ids, attention_mask,
                             position_ids, output_attentions, output_hidden_states)
        logits = self.classifier(self.drop(self.head(states)))
        loss = None if labels is None else classification_loss(logits, labels, self.config)
        return ClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class ModernBertForTokenClassification(_WithModernEncoder):
    """One label per token; positions labelled -100 carry no loss."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.drop = Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        refuse_head_mask(head_mask)
        out = self.encode(input_ids, attention_mask, position_ids, output_attentions, output_hidden_states)
        logits = self.classifier(self.drop(self.head(out.last_hidden_state)))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, self.config.num_labels), labels.view(-1),
                                   ignore_index=IGNORE_INDEX)
        return ClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class ModernBertForQuestionAnswering(_WithModernEncoder):
    """Extractive QA: a start and an end logit per token; loss = mean of the two CEs.

    transformers' class sizes its classifier by num_labels and splits it into start and end,
    so num_labels is 2 here (set on construction)."""

    def __init__(self, config: ModernBertConfig):
        if config.num_labels != 2:
            config = config.replace(num_labels=2, id2label=None, label2id=None)
        super().__init__(config)
        self.drop = Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                start_positions=None, end_positions=None, head_mask=None, output_attentions=False,
                output_hidden_states=False) -> QuestionAnsweringOutput:
        refuse_head_mask(head_mask)
        out = self.encode(input_ids, attention_mask, position_ids, output_attentions, output_hidden_states)
        logits = self.classifier(self.drop(self.head(out.last_hidden_state)))
        start_logits, end_logits = logits.unbind(dim=-1)
        loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringOutput(loss, start_logits.contiguous(), end_logits.contiguous(),
                                       out.hidden_states, out.attentions)


class ModernBertForMultipleChoice(_WithModernEncoder):
    """Inputs (B, C, T) for C choices -> (B, C) scores; loss = CE over the choices."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.drop = Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        refuse_head_mask(head_mask)
        check_tensors(input_ids, attention_mask)  # reshaped here before the encoder checks them
        num_choices = input_ids.shape[1]

        def flat(x):
            return None if x is None else x.reshape(-1, x.shape[-1])

        out, states = pooled(self.model, self.config.classifier_pooling, flat(input_ids), flat(attention_mask),
                             flat(position_ids), output_attentions, output_hidden_states)
        logits = self.classifier(self.drop(self.head(states))).view(-1, num_choices)
        loss = None if labels is None else F.cross_entropy(logits, labels.view(-1))
        return ClassifierOutput(loss, logits, out.hidden_states, out.attentions)
