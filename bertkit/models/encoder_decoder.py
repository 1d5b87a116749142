"""An encoder-decoder from two BERTs: transformers' `EncoderDecoderModel` ("BERT2BERT").

    x --encoder (BertModel)--> states S (B, S_len, H_e) --[enc_to_dec_proj if H_e != H_d]-->
    y_<t --decoder (BertLMHeadModel: causal self-attention, cross-attention over S)--> logits_t

Warm start (Rothe et al. 2020): `EncoderDecoderModel.from_encoder_decoder_pretrained(enc_dir,
dec_dir)` loads a pre-trained BERT as the encoder and the same (or another) BERT as the decoder,
whose self-attention turns causal and whose cross-attention layers start from random values. For
training, `labels` (B, T) are the target ids; the decoder reads them shifted right behind
`decoder_start_token_id` ([CLS] for BERT2BERT), and the loss is the mean cross-entropy of
logits_t against labels_t (-100: no target). The checkpoint is transformers': config.json holds
an "encoder" and a "decoder" config plus the special ids, the weights are `encoder.*`,
`decoder.bert.*` and `decoder.cls.*`, so a directory saved here loads in
`transformers.EncoderDecoderModel` and the other way round.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.checkpoint import PretrainedMixin, read_config
from bertkit.models.config import BertConfig
from bertkit.data.masking import IGNORE_INDEX
from bertkit.errors import ConfigError, DataError
from bertkit.models.generation import Generates
from bertkit.io import atomic_write_text, loads_json, make_output_dir, read_text
from bertkit.runtime.run_dir import not_a_model
from bertkit.models.kv_cache import KVCache
from bertkit.models.lm_head import BertLMHeadModel
from bertkit.models.encoder import BertModel, EncoderOutput, ModelOutput

# Keys of transformers' EncoderDecoderConfig that this class reads; the rest is kept in `extra`.
_ID_KEYS = ("decoder_start_token_id", "pad_token_id", "eos_token_id")
_DERIVED_KEYS = ("model_type", "is_encoder_decoder")  # always written, never read
TIED_REFUSAL = ("tie_encoder_decoder=True (one set of weights for encoder and decoder) is not supported; "
                "save the model with tie_encoder_decoder=False")


@dataclass
class EncoderDecoderConfig:
    """The encoder's and the decoder's BertConfig and the special ids training and generation need."""

    encoder: BertConfig
    decoder: BertConfig
    decoder_start_token_id: int | None = None  # the decoder's first input ([CLS] for BERT2BERT)
    pad_token_id: int | None = None
    eos_token_id: int | list[int] | None = None  # ends a generated sequence ([SEP] for BERT2BERT)
    architectures: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    model_type: ClassVar[str] = "encoder-decoder"
    MODEL_TYPES: ClassVar[tuple[str, ...]] = (model_type,)  # what checkpoint.config_class_for reads with it

    def __post_init__(self) -> None:
        if not isinstance(self.encoder, BertConfig) or not isinstance(self.decoder, BertConfig):
            raise ConfigError("an encoder-decoder is built from two BertConfigs (encoder, decoder)")
        if self.encoder.is_decoder:
            raise ConfigError("the encoder config has is_decoder=True; an encoder attends both ways: set it False")
        if not (self.decoder.is_decoder and self.decoder.add_cross_attention):
            raise ConfigError("the decoder config needs is_decoder=True and add_cross_attention=True (causal "
                              "self-attention and cross-attention over the encoder)")
        if "bert" != self.encoder.model_type:
            raise ConfigError(f"the encoder is model_type={self.encoder.model_type!r}; encoder-decoders here are "
                              "BERT2BERT: use a model_type='bert' encoder")
        if self.extra.get("tie_encoder_decoder"):
            raise ConfigError(TIED_REFUSAL)
        for name in _ID_KEYS:
            value = getattr(self, name)
            ids = value if isinstance(value, list) else [value]
            if value is not None and not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
                raise ConfigError(f"{name} must be a token id (an integer >= 0), got {value!r}")

    @property
    def initializer_range(self) -> float:
        return self.decoder.initializer_range

    @property
    def max_sequence_length(self) -> int:
        """The longest input: the encoder's."""
        return self.encoder.max_sequence_length

    def to_dict(self) -> dict[str, Any]:
        data = {**self.extra, "encoder": self.encoder.to_dict(), "decoder": self.decoder.to_dict(),
                "model_type": self.model_type, "is_encoder_decoder": True}
        data.update({k: getattr(self, k) for k in (*_ID_KEYS, "architectures") if getattr(self, k) is not None})
        return dict(sorted(data.items()))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EncoderDecoderConfig":
        if not all(isinstance(data.get(part), dict) for part in ("encoder", "decoder")):
            raise ConfigError("this config.json has no \"encoder\" and \"decoder\" sections: it is not an "
                              "encoder-decoder; build one from two BERT checkpoints with "
                              "EncoderDecoderModel.from_encoder_decoder_pretrained(encoder_dir, decoder_dir)")
        known = {*_ID_KEYS, "architectures", "encoder", "decoder", *_DERIVED_KEYS}
        return cls(BertConfig.from_dict(data["encoder"]), BertConfig.from_dict(data["decoder"]),
                   **{k: data.get(k) for k in (*_ID_KEYS, "architectures")},
                   extra={k: v for k, v in data.items() if k not in known})

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike) -> "EncoderDecoderConfig":
        path = os.path.join(directory, "config.json") if os.path.isdir(directory) else os.fspath(directory)
        if not os.path.exists(path):
            raise ConfigError(f"no config file at {path}; a model directory needs config.json"
                              f"{not_a_model(os.path.dirname(path) or '.')}")
        try:
            data = loads_json(read_text(path), path)
        except DataError as e:
            raise ConfigError(f"{e}; restore it from the original checkpoint") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path} must hold a JSON object of config fields")
        return cls.from_dict(data)

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        make_output_dir(directory)
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        atomic_write_text(os.path.join(directory, "config.json"), text)

    def replace(self, **changes: Any) -> "EncoderDecoderConfig":
        return dataclasses.replace(self, extra=dict(self.extra), **changes)


@dataclass
class Seq2SeqLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None  # (B, T, V) over the decoder positions
    past_key_values: KVCache | None = None
    decoder_hidden_states: tuple[torch.Tensor, ...] | None = None
    decoder_attentions: tuple[torch.Tensor, ...] | None = None
    cross_attentions: tuple[torch.Tensor, ...] | None = None  # per decoder layer, (B, h, T, S)
    encoder_last_hidden_state: torch.Tensor | None = None
    encoder_hidden_states: tuple[torch.Tensor, ...] | None = None
    encoder_attentions: tuple[torch.Tensor, ...] | None = None


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int | None, decoder_start_token_id: int | None
                       ) -> torch.Tensor:
    """Decoder inputs from targets: [start, y_1, ..., y_{T-1}], -100 read as pad (transformers')."""
    if decoder_start_token_id is None or pad_token_id is None:
        raise ConfigError("training an encoder-decoder needs decoder_start_token_id and pad_token_id in its "
                          "config (BERT2BERT: [CLS] and [PAD] of the tokenizer)")
    shifted = labels.new_full(labels.shape, decoder_start_token_id)
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == IGNORE_INDEX, pad_token_id)


class EncoderDecoderModel(Generates, PretrainedMixin, nn.Module):
    """BERT encoder + BERT decoder with cross-attention (see the module docstring)."""

    config_class = EncoderDecoderConfig
    base_model_prefix = "encoder_decoder"  # transformers' (its keys carry no such prefix)
    is_encoder_decoder = True

    def __init__(self, config: EncoderDecoderConfig, encoder: BertModel | None = None,
                 decoder: BertLMHeadModel | None = None):
        super().__init__()
        self.config = config
        # transformers builds the encoder as its bare model (with the pooler) and the decoder as a causal LM.
        self.encoder = encoder if encoder is not None else BertModel(config.encoder)
        self.decoder = decoder if decoder is not None else BertLMHeadModel(config.decoder)
        self.encoder.config, self.decoder.config = config.encoder, config.decoder
        self.enc_to_dec_proj = None
        if config.encoder.hidden_size != config.decoder.hidden_size:  # cross-attention reads decoder-wide states
            self.enc_to_dec_proj = nn.Linear(config.encoder.hidden_size, config.decoder.hidden_size)
            self._init_module(self.enc_to_dec_proj)

    @classmethod
    def from_encoder_decoder_pretrained(cls, encoder_dir: str, decoder_dir: str,
                                        config_overrides: dict | None = None, decoder_overrides: dict | None = None,
                                        **ids: Any) -> "EncoderDecoderModel":
        """BERT2BERT warm start: the encoder from `encoder_dir`, the decoder from `decoder_dir` made
        causal with new cross-attention layers (reported as newly initialised); `config_overrides`
        change both configs (dropout), `decoder_overrides` the decoder's only (num_hidden_layers=N
        keeps the checkpoint's first N layers); `ids`: the special ids of EncoderDecoderConfig
        (decoder_start_token_id, pad_token_id, eos_token_id)."""
        if ids.pop("tie_encoder_decoder", False):  # transformers' option; False is what happens anyway
            raise ConfigError(TIED_REFUSAL)
        unknown = [name for name in ids if name not in _ID_KEYS]
        if unknown:
            raise ConfigError(f"from_encoder_decoder_pretrained got {unknown[0]}=, which it does not take; "
                              f"its special ids are {', '.join(_ID_KEYS)}, and config_overrides / "
                              "decoder_overrides change the two configs")
        for directory in (encoder_dir, decoder_dir):
            if not isinstance(read_config(directory), BertConfig):
                raise ConfigError(f"{directory} is not a BERT-family checkpoint; an encoder-decoder is built "
                                  "from BERT checkpoints")
        overrides = dict(config_overrides or {})
        encoder = BertModel.from_pretrained(encoder_dir, is_decoder=False, add_cross_attention=False, **overrides)
        decoder = BertLMHeadModel.from_pretrained(decoder_dir, is_decoder=True, add_cross_attention=True,
                                                  **{**overrides, **(decoder_overrides or {})})
        return cls(EncoderDecoderConfig(encoder.config, decoder.config, **ids), encoder, decoder)

    def is_head_parameter(self, name: str) -> bool:
        """What a BERT2BERT warm start adds to the two BERTs, the head that `train.head_lr` trains:
        the cross-attention layers, the decoder's LM head (transform and bias; its output matrix is
        tied to the decoder's word embeddings and stays with them) and `enc_to_dec_proj`."""
        return (".crossattention." in name or name.startswith("decoder.cls.")
                or name.startswith("enc_to_dec_proj."))

    @torch.no_grad()
    def init_cross_attention_from_self_attention(self) -> None:
        """Start each decoder layer's cross-attention as a copy of that layer's self-attention
        (query, key, value, output projection and LayerNorm). Random cross-attention (Rothe et al.
        2020) first has to learn where to look; a copy starts with pre-trained query/key geometry
        over states of the same model family, so the decoder reads the source from the first step."""
        if self.enc_to_dec_proj is not None:
            raise ConfigError("cross-attention starts from self-attention only when the encoder and the decoder "
                              f"have the same width (here {self.config.encoder.hidden_size} and "
                              f"{self.config.decoder.hidden_size})")
        for layer in self.decoder.bert.encoder.layer:
            layer.crossattention.load_state_dict(layer.attention.state_dict())

    @property
    def decoder_config(self) -> BertConfig:
        return self.config.decoder

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.get_input_embeddings()

    def resize_token_embeddings(self, *args, **kwargs):
        raise ConfigError("resize the encoder's and the decoder's vocabularies one at a time: "
                          "model.encoder.resize_token_embeddings(n) and model.decoder.resize_token_embeddings(n)")

    def encoder_states(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        """The encoder's last states, projected to the decoder's width: what cross-attention reads."""
        return self.project(self.encoder(input_ids, attention_mask, token_type_ids).last_hidden_state)

    def project(self, states: torch.Tensor) -> torch.Tensor:
        return states if self.enc_to_dec_proj is None else self.enc_to_dec_proj(states)

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                encoder_outputs: EncoderOutput | None = None, past_key_values: KVCache | None = None, labels=None,
                use_cache: bool = False, output_attentions=False, output_hidden_states=False, token_type_ids=None,
                logits_to_keep: int = 0) -> Seq2SeqLMOutput:
        """`labels` without `decoder_input_ids`: the decoder reads the labels shifted right, its mask
        is 0 where that input is pad (as transformers). `encoder_outputs`: a precomputed encoding."""
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids, attention_mask, token_type_ids, output_attentions=output_attentions,
                                           output_hidden_states=output_hidden_states)
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)
            if decoder_attention_mask is None:
                decoder_attention_mask = (decoder_input_ids != self.config.pad_token_id).long()
        out = self.decoder(decoder_input_ids, decoder_attention_mask,
                           encoder_hidden_states=self.project(encoder_outputs.last_hidden_state),
                           encoder_attention_mask=attention_mask, past_key_values=past_key_values,
                           use_cache=use_cache, output_attentions=output_attentions,
                           output_hidden_states=output_hidden_states, logits_to_keep=logits_to_keep)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(out.logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return Seq2SeqLMOutput(loss, out.logits, out.past_key_values, out.hidden_states, out.attentions,
                               out.cross_attentions, encoder_outputs.last_hidden_state, encoder_outputs.hidden_states,
                               encoder_outputs.attentions)
