"""Heads on top of the encoder: pre-training (MLM, NSP) and task heads.

Each class owns the encoder as `self.bert` and its head under Hugging Face's names
(`cls.predictions`, `cls.seq_relationship`, `classifier`, `qa_outputs`), so checkpoints load in
the matching `transformers` class and back.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.activations import activation
from bertkit.models.checkpoint import PretrainedMixin
from bertkit.models.config import BertConfig
from bertkit.data.masking import IGNORE_INDEX
from bertkit.models.dropout import Dropout
from bertkit.models.encoder import BertModel, ModelOutput, check_tensors


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, H) states and a (B, T) 0/1 mask -> (B, H) mean over the masked-in tokens."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


@dataclass
class MaskedLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    # (B, T, V); or (N, V) for the N labelled positions when computed only there
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    aux_loss: torch.Tensor | None = None  # MoE load balancing, already included in `loss`


@dataclass
class PreTrainingOutput(ModelOutput):
    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    aux_loss: torch.Tensor | None = None  # MoE load balancing, already included in `loss`


@dataclass
class ClassifierOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    aux_loss: torch.Tensor | None = None  # MoE load balancing, already included in `loss`


@dataclass
class QuestionAnsweringOutput(ModelOutput):
    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    aux_loss: torch.Tensor | None = None  # MoE load balancing, already included in `loss`


# ---------------------------------------------------------------------------- MLM / NSP modules
class BertPredictionHeadTransform(nn.Module):
    """LayerNorm(act(W h + b)): one more non-linear layer before the vocabulary projection.

    W maps H to the embedding width E (= H unless factorised, as in ALBERT/ELECTRA), so the tied
    decoder is the V x E word-embedding table.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_dim)
        # RoBERTa's and ELECTRA's LM heads always use exact GELU, whatever the encoder's activation.
        act = "gelu" if config.model_type in ("roberta", "electra") else config.hidden_act
        self.transform_act_fn = activation(act)
        self.LayerNorm = nn.LayerNorm(config.embedding_dim, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.transform_act_fn(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """logits = transform(h) E^T + b, with E the (tied) word-embedding matrix."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        # A plain attribute, not a submodule: the weight belongs to the embeddings, so it is
        # saved once (as transformers does) and every update moves both.
        self.__dict__["word_embeddings"] = word_embeddings

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(self.transform(hidden), self.word_embeddings.weight, self.bias)


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)


class BertOnlyNSPHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.predictions = BertLMPredictionHead(config, word_embeddings)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


def mlm_logits_and_loss(head: BertLMPredictionHead, hidden: torch.Tensor,
                        labels: torch.Tensor | None, full_logits: bool
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Vocabulary logits and the cross-entropy over labelled positions.

    The projection onto a 30k vocabulary dominates a small model's FLOPs, and only the ~15%
    labelled positions carry loss, so by default (labels given, `full_logits=False`) it is
    computed only there: logits then have shape (N, V) for the N labelled positions in
    row-major order. Without labels, or with `full_logits=True`, logits are (B, T, V).
    """
    if labels is None:
        return head(hidden), None
    if full_logits:
        logits = head(hidden)
        return logits, F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
    selected = labels != IGNORE_INDEX
    logits = head(hidden[selected])
    return logits, F.cross_entropy(logits, labels[selected])


def labelled_positions(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(B, T) labels -> (B, M) positions of the labelled tokens, each row in increasing order
    and padded to the row with most (M of them), and the (B, M) mask of real entries; None when
    nothing is labelled. `states[mask]` is then in the row-major order of `labels[labels != -100]`.
    """
    selected = labels != IGNORE_INDEX
    counts = selected.sum(1)
    most = int(counts.max()) if counts.numel() else 0
    if most == 0:
        return None
    # A stable sort of "not selected" (0 before 1) lists each row's selected positions first.
    positions = torch.sort((~selected).to(torch.uint8), dim=1, stable=True).indices[:, :most]
    return positions, torch.arange(most, device=labels.device) < counts.unsqueeze(1)


def with_aux(loss: torch.Tensor | None, out) -> torch.Tensor | None:
    """The task loss plus the encoder's auxiliary loss (MoE load balancing), when both exist."""
    if loss is None or out.aux_loss is None:
        return loss
    return loss + out.aux_loss


class _WithEncoder(PretrainedMixin, nn.Module):
    """Shared constructor: the config, the encoder under `self.bert`, BERT init."""

    add_pooling_layer = True

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=self.add_pooling_layer)

    def encode(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               head_mask=None, output_attentions=False, output_hidden_states=False,
               output_positions=None):
        return self.bert(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                         output_attentions, output_hidden_states, output_positions=output_positions)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.bert.embeddings.word_embeddings

    def set_gradient_checkpointing(self, enabled: bool = True) -> None:
        self.bert.set_gradient_checkpointing(enabled)

    def compile_layers(self, **options) -> None:
        self.bert.compile_layers(**options)


# ---------------------------------------------------------------------------- pre-training models
class BertForMaskedLM(_WithEncoder):
    add_pooling_layer = False  # as in transformers: MLM needs no pooler

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.cls = BertOnlyMLMHead(config, self.bert.embeddings.word_embeddings)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False,
                full_logits: bool = False) -> MaskedLMOutput:
        # With labels, the encoder's last layer too runs only at the labelled positions.
        found = None if labels is None or full_logits else labelled_positions(labels)
        if found is not None:  # read before the encoder is queued: on a GPU a host read after it
            rows = found[1].flatten().nonzero().squeeze(1)  # waits for the whole forward pass
            targets = labels[labels != IGNORE_INDEX]
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                          output_attentions, output_hidden_states,
                          output_positions=None if found is None else found[0])
        if found is None:
            logits, loss = mlm_logits_and_loss(self.cls.predictions, out.last_hidden_state, labels, full_logits)
        else:  # the (B, M) grid's real entries, in the row-major order of the targets
            logits = self.cls.predictions(out.last_hidden_state.flatten(0, 1).index_select(0, rows))
            loss = F.cross_entropy(logits, targets)
        return MaskedLMOutput(with_aux(loss, out), logits, out.hidden_states, out.attentions, out.aux_loss)


class BertForNextSentencePrediction(_WithEncoder):
    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.cls = BertOnlyNSPHead(config)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                          output_attentions, output_hidden_states)
        logits = self.cls.seq_relationship(out.pooler_output)
        loss = None if labels is None else F.cross_entropy(logits, labels.view(-1))
        return ClassifierOutput(with_aux(loss, out), logits, out.hidden_states, out.attentions, out.aux_loss)


class BertForPreTraining(_WithEncoder):
    """MLM + next-sentence (or sentence-order) prediction; loss = MLM loss + NSP loss.

    With model_type="albert" the second head is ALBERT's sentence-order head (`sop_classifier` in
    its checkpoints; label 0 = segments in order, 1 = swapped): pass `sentence_order_label`.
    """

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.cls = BertPreTrainingHeads(config, self.bert.embeddings.word_embeddings)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, next_sentence_label=None, head_mask=None, output_attentions=False,
                output_hidden_states=False, full_logits: bool = False,
                sentence_order_label=None) -> PreTrainingOutput:
        if next_sentence_label is None:
            next_sentence_label = sentence_order_label  # ALBERT's name for the same 2-way label
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                          output_attentions, output_hidden_states)
        logits, mlm_loss = mlm_logits_and_loss(self.cls.predictions, out.last_hidden_state, labels, full_logits)
        nsp_logits = self.cls.seq_relationship(out.pooler_output)
        nsp_loss = None
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.view(-1))
        losses = [x for x in (mlm_loss, nsp_loss) if x is not None]
        loss = sum(losses) if losses else None
        return PreTrainingOutput(with_aux(loss, out), logits, nsp_logits, mlm_loss, nsp_loss,
                                 out.hidden_states, out.attentions, out.aux_loss)


# ---------------------------------------------------------------------------- task models
def classifier_dropout(config: BertConfig) -> Dropout:
    p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
    return Dropout(p)


def classification_loss(logits: torch.Tensor, labels: torch.Tensor, config: BertConfig) -> torch.Tensor:
    """MSE for regression (one output), BCE for multi-label (float multi-hot labels), else CE.

    The problem type is inferred as transformers does when config.problem_type is unset.
    """
    problem = config.problem_type
    if problem is None:
        if config.num_labels == 1:
            problem = "regression"
        elif labels.dtype in (torch.long, torch.int32, torch.int64):
            problem = "single_label_classification"
        else:
            problem = "multi_label_classification"
    if problem == "regression":
        return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).view(-1)) if config.num_labels == 1 \
            else F.mse_loss(logits, labels.to(logits.dtype))
    if problem == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    return F.cross_entropy(logits.view(-1, config.num_labels), labels.view(-1))


def pooled_output(out, pooling: str, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The (B, H) vector a classifier reads, by `config.classifier_pooling`:

        pooler   tanh(W h_[CLS] + b)             BERT's pooler (transformers' classes)
        cls      h_[CLS]                         the final state of [CLS], no pooler
        mean     sum_t m_t h_t / sum_t m_t       m = attention mask (1 on real tokens)

    For "pooler" and "cls", `out` may hold the final state at [CLS] only (output_positions).
    """
    if pooling == "pooler":
        return out.pooler_output
    hidden = out.last_hidden_state
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask if attention_mask is not None else hidden.new_ones(hidden.shape[:2])
    return mean_pool(hidden, mask)


class _PooledClassifier(_WithEncoder):
    """A head on one pooled vector per sequence (`pooled_output`); the pooler exists only when
    the pooling reads it, so the other poolings carry no unused weights."""

    @property
    def add_pooling_layer(self) -> bool:
        return self.config.classifier_pooling == "pooler"

    def encode_pooled(self, input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                      output_attentions, output_hidden_states):
        """(encoder output, (B, H) pooled vector); "pooler" and "cls" read [CLS] only, so the
        last layer then runs only there."""
        check_tensors(input_ids, attention_mask)  # read here before the encoder checks them
        pooling = self.config.classifier_pooling
        cls_position = None if pooling == "mean" else torch.zeros(
            input_ids.shape[0], 1, dtype=torch.long, device=input_ids.device)
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                          output_attentions, output_hidden_states, output_positions=cls_position)
        return out, pooled_output(out, pooling, attention_mask)

    def save_pretrained(self, directory, tokenizer=None) -> None:
        if self.config.classifier_pooling != "pooler":
            # transformers' BERT-family classifiers always read the pooler (RoBERTa's and
            # ELECTRA's classifier.dense): the file loads there with a random one.
            warnings.warn(f"classifier_pooling={self.config.classifier_pooling!r}: transformers' "
                          f"{type(self).__name__} always reads BERT's pooler, so this checkpoint loads there "
                          "with a newly initialised pooler and different outputs; run it with bertkit, or "
                          "fine-tune with classifier_pooling=\"pooler\" for transformers", UserWarning,
                          stacklevel=2)
        super().save_pretrained(directory, tokenizer)


class BertForSequenceClassification(_PooledClassifier):
    """Single text or text pair -> num_labels logits from the pooled vector (`pooled_output`)."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        out, pooled = self.encode_pooled(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                                         output_attentions, output_hidden_states)
        logits = self.classifier(self.dropout(pooled))
        loss = None if labels is None else classification_loss(logits, labels, self.config)
        return ClassifierOutput(with_aux(loss, out), logits, out.hidden_states, out.attentions, out.aux_loss)


class BertForTokenClassification(_WithEncoder):
    """One label per token (NER tags); positions labelled -100 carry no loss."""

    add_pooling_layer = False

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                          output_attentions, output_hidden_states)
        logits = self.classifier(self.dropout(out.last_hidden_state))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, self.config.num_labels), labels.view(-1),
                                   ignore_index=IGNORE_INDEX)
        return ClassifierOutput(with_aux(loss, out), logits, out.hidden_states, out.attentions, out.aux_loss)


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor | None,
              end_positions: torch.Tensor | None) -> torch.Tensor | None:
    """Mean of the start and end cross-entropies over the positions (None without targets).
    Positions outside the sequence (answers cut off by truncation) are ignored."""
    if start_positions is None or end_positions is None:
        return None
    seq_len = start_logits.shape[1]
    start = start_positions.view(-1).clamp(0, seq_len)
    end = end_positions.view(-1).clamp(0, seq_len)
    return (F.cross_entropy(start_logits, start, ignore_index=seq_len)
            + F.cross_entropy(end_logits, end, ignore_index=seq_len)) / 2


class BertForQuestionAnswering(_WithEncoder):
    """Extractive QA: a start and an end logit per token; loss = mean of the two CEs."""

    add_pooling_layer = False

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                start_positions=None, end_positions=None, head_mask=None, output_attentions=False,
                output_hidden_states=False) -> QuestionAnsweringOutput:
        out = self.encode(input_ids, attention_mask, token_type_ids, position_ids, head_mask,
                          output_attentions, output_hidden_states)
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(dim=-1)
        loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringOutput(with_aux(loss, out), start_logits.contiguous(), end_logits.contiguous(),
                                       out.hidden_states, out.attentions, out.aux_loss)


class BertForMultipleChoice(_PooledClassifier):
    """Inputs (B, C, T) for C choices -> (B, C) scores from each choice's pooled vector;
    loss = CE over the choices."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.dropout = classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                labels=None, head_mask=None, output_attentions=False, output_hidden_states=False
                ) -> ClassifierOutput:
        check_tensors(input_ids, attention_mask)  # reshaped here before the encoder checks them
        num_choices = input_ids.shape[1]

        def flat(x):
            return None if x is None else x.reshape(-1, x.shape[-1])

        out, pooled = self.encode_pooled(flat(input_ids), flat(attention_mask), flat(token_type_ids),
                                         flat(position_ids), head_mask, output_attentions, output_hidden_states)
        logits = self.classifier(self.dropout(pooled)).view(-1, num_choices)
        loss = None if labels is None else F.cross_entropy(logits, labels.view(-1))
        return ClassifierOutput(with_aux(loss, out), logits, out.hidden_states, out.attentions, out.aux_loss)
