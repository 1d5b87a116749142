"""The BERT encoder forward pass in plain NumPy: the place to learn the math.

Everything BERT computes from token ids to the pooled sentence vector, one function per step,
no autograd, no framework. It reads the same Hugging Face checkpoint directory as
`bertkit.BertModel` (config.json + model.safetensors) and gives the same outputs within 1e-5
(tests/test_numpy_reference.py checks that on the pretrained MiniLM). It is the plain BERT of
Devlin et al. (2019): learned absolute positions, post-LN, exact GELU; the variants in
bertkit/models/variants/ are not covered.

Notation: B = batch, T = tokens per row, H = hidden size, h = heads, d = H / h per head,
I = intermediate (feed-forward) size. A linear map is y = x W^T + b with W stored as
(out, in), as PyTorch and the checkpoint store it.

    x_0      = LayerNorm(E_word[ids] + E_pos[0..T-1] + E_type[types])            embeddings
    for each layer l = 1..L:
      a      = MultiHeadAttention(x_{l-1}, padding mask)
      y      = LayerNorm(x_{l-1} + a W_o^T + b_o)                                 post-LN
      x_l    = LayerNorm(y + GELU(y W_1^T + b_1) W_2^T + b_2)                     feed-forward
    pooled   = tanh(x_L[:, 0] W_p^T + b_p)                                       [CLS] pooler

Dropout only acts in training, so the forward pass here (inference) has none.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np
from safetensors.numpy import load_file

from bertkit.errors import CheckpointError, ConfigError

Weights = dict[str, np.ndarray]


@dataclass(frozen=True)
class Config:
    """The config.json fields the forward pass needs."""

    num_hidden_layers: int
    num_attention_heads: int
    hidden_size: int
    layer_norm_eps: float


# ---------------------------------------------------------------------------- loading
def load(directory: str | os.PathLike, dtype: type = np.float32) -> tuple[Config, Weights]:
    """Read config.json and model.safetensors from a model directory as NumPy arrays.

    Keys are Hugging Face's (`encoder.layer.0.attention.self.query.weight`, ...); a checkpoint
    with task heads keeps its encoder under `bert.`, which is stripped.
    """
    directory = os.fspath(directory)
    config_path = os.path.join(directory, "config.json")
    weights_path = os.path.join(directory, "model.safetensors")
    for path in (config_path, weights_path):
        if not os.path.isfile(path):
            raise CheckpointError(f"{path} is missing; the NumPy reference reads a directory holding "
                                  "config.json and model.safetensors (as save_pretrained writes)")
    with open(config_path, encoding="utf-8") as f:
        raw = json.load(f)
    check_plain_bert(raw)
    config = Config(raw["num_hidden_layers"], raw["num_attention_heads"], raw["hidden_size"],
                    raw.get("layer_norm_eps", 1e-12))
    weights = {key.removeprefix("bert."): value.astype(dtype) for key, value in load_file(weights_path).items()}
    return config, weights


def check_plain_bert(raw: dict) -> None:
    """Refuse configs whose math this file does not implement, rather than compute wrong numbers."""
    unsupported = {
        "model_type": (raw.get("model_type", "bert"), "bert"),
        "position_embedding_type": (raw.get("position_embedding_type", "absolute"), "absolute"),
        "hidden_act": (raw.get("hidden_act", "gelu"), "gelu"),
    }
    for name, (value, plain) in unsupported.items():
        if value != plain:
            raise ConfigError(f"the NumPy reference implements plain BERT ({name}={plain!r}), this "
                              f"checkpoint has {name}={value!r}; run it with bertkit.BertModel instead")
    for name in ("embedding_size", "num_hidden_groups", "num_experts", "attention_block_size"):
        if raw.get(name) is not None:
            raise ConfigError(f"the NumPy reference implements plain BERT; this checkpoint sets the "
                              f"variant switch {name}={raw[name]!r}: run it with bertkit.BertModel")


# ---------------------------------------------------------------------------- building blocks
def linear(x: np.ndarray, weights: Weights, name: str) -> np.ndarray:
    """y = x W^T + b, with W (out, in) and b (out,) stored under `name.weight`, `name.bias`."""
    return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]


def layer_norm(x: np.ndarray, weights: Weights, name: str, eps: float) -> np.ndarray:
    """LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.

    var is the biased variance (divide by H, not H - 1), as torch.nn.LayerNorm.
    """
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weights[f"{name}.weight"] + weights[f"{name}.bias"]


# NumPy has no erf; math.erf is the exact function, applied element by element (slow, but this
# file is for reading, and an approximation would be a different GELU).
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x * Phi(x) = x * (1 + erf(x / sqrt(2))) / 2, Phi the standard normal CDF.

    The exact form BERT was trained with (not the tanh approximation).
    """
    return (x * 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))).astype(x.dtype)


def softmax(scores: np.ndarray) -> np.ndarray:
    """softmax(s)_j = exp(s_j - max s) / sum_k exp(s_k - max s) over the last axis.

    Subtracting the row maximum changes nothing mathematically and keeps exp from overflowing.
    """
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------- the encoder
def embeddings(input_ids: np.ndarray, token_type_ids: np.ndarray, weights: Weights,
               config: Config) -> np.ndarray:
    """x_0[b, t] = LayerNorm(E_word[ids[b, t]] + E_pos[t] + E_type[types[b, t]]), (B, T, H).

    Positions count 0..T-1 in every row; padding sits at the end, so real tokens get the same
    positions whatever the padding.
    """
    seq_len = input_ids.shape[1]
    x = (weights["embeddings.word_embeddings.weight"][input_ids]
         + weights["embeddings.position_embeddings.weight"][np.arange(seq_len)][None]
         + weights["embeddings.token_type_embeddings.weight"][token_type_ids])
    return layer_norm(x, weights, "embeddings.LayerNorm", config.layer_norm_eps)


def padding_bias(attention_mask: np.ndarray, dtype: type) -> np.ndarray:
    """0/1 mask (B, T) -> additive bias (B, 1, 1, T): 0 where a key may be attended, the most
    negative float where it is padding, so exp() of its score is 0 and no query reads it."""
    return np.where(attention_mask[:, None, None, :] == 1, 0.0, np.finfo(dtype).min).astype(dtype)


def self_attention(x: np.ndarray, bias: np.ndarray, weights: Weights, prefix: str,
                   config: Config) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head scaled dot-product attention; returns (context (B, T, H), probs (B, h, T, T)).

    Q = x W_q^T + b_q, K and V likewise, each split into h heads of d columns: (B, h, T, d).
    Per head: P = softmax(Q K^T / sqrt(d) + bias), context = P V. The heads' contexts are put
    side by side again, (B, T, h * d) = (B, T, H). Dividing by sqrt(d) keeps the scores' variance
    near 1 whatever the head width, so the softmax does not saturate.
    """
    batch, seq_len, hidden = x.shape
    heads, head_dim = config.num_attention_heads, hidden // config.num_attention_heads

    def split_heads(y: np.ndarray) -> np.ndarray:  # (B, T, H) -> (B, h, T, d)
        return y.reshape(batch, seq_len, heads, head_dim).transpose(0, 2, 1, 3)

    q = split_heads(linear(x, weights, f"{prefix}.query"))
    k = split_heads(linear(x, weights, f"{prefix}.key"))
    v = split_heads(linear(x, weights, f"{prefix}.value"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim).astype(x.dtype) + bias
    probs = softmax(scores)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq_len, hidden)
    return context, probs


def layer(x: np.ndarray, bias: np.ndarray, weights: Weights, index: int,
          config: Config) -> tuple[np.ndarray, np.ndarray]:
    """One post-LN transformer block; returns (x_l, the attention probabilities).

    y   = LayerNorm(x + context W_o^T + b_o)              attention sub-layer, residual, norm
    x_l = LayerNorm(y + GELU(y W_1^T + b_1) W_2^T + b_2)  feed-forward H -> I -> H, residual, norm
    """
    name = f"encoder.layer.{index}"
    eps = config.layer_norm_eps
    context, probs = self_attention(x, bias, weights, f"{name}.attention.self", config)
    y = layer_norm(x + linear(context, weights, f"{name}.attention.output.dense"), weights,
                   f"{name}.attention.output.LayerNorm", eps)
    widened = gelu(linear(y, weights, f"{name}.intermediate.dense"))
    out = layer_norm(y + linear(widened, weights, f"{name}.output.dense"), weights,
                     f"{name}.output.LayerNorm", eps)
    return out, probs


def pooler(x: np.ndarray, weights: Weights) -> np.ndarray:
    """pooled = tanh(x[:, 0] W_p^T + b_p): the [CLS] state through one dense layer, (B, H)."""
    return np.tanh(linear(x[:, 0], weights, "pooler.dense"))


@dataclass
class Output:
    last_hidden_state: np.ndarray  # (B, T, H)
    pooler_output: np.ndarray | None  # (B, H); None when the checkpoint has no pooler
    hidden_states: tuple[np.ndarray, ...]  # embeddings, then each layer's output
    attentions: tuple[np.ndarray, ...]  # per layer, (B, h, T, T)


def forward(input_ids: np.ndarray, weights: Weights, config: Config,
            attention_mask: np.ndarray | None = None, token_type_ids: np.ndarray | None = None
            ) -> Output:
    """The whole encoder: token ids (B, T) -> contextual vectors and the pooled [CLS] vector.

    attention_mask: 1 for real tokens, 0 for padding (default all 1). token_type_ids: the segment
    of each token, 0 for sentence A and 1 for B (default all 0).
    """
    input_ids = np.asarray(input_ids)
    if input_ids.ndim != 2:
        raise ConfigError(f"input_ids must have shape (batch, sequence), got {input_ids.shape}")
    dtype = weights["embeddings.word_embeddings.weight"].dtype
    attention_mask = np.ones_like(input_ids) if attention_mask is None else np.asarray(attention_mask)
    token_type_ids = np.zeros_like(input_ids) if token_type_ids is None else np.asarray(token_type_ids)
    x = embeddings(input_ids, token_type_ids, weights, config)
    bias = padding_bias(attention_mask, dtype)
    hidden_states, attentions = [x], []
    for index in range(config.num_hidden_layers):
        x, probs = layer(x, bias, weights, index, config)
        hidden_states.append(x)
        attentions.append(probs)
    pooled = pooler(x, weights) if "pooler.dense.weight" in weights else None
    return Output(x, pooled, tuple(hidden_states), tuple(attentions))
