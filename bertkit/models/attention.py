"""Attention kernels: the ways bertkit computes softmax(Q K^T * scale + bias) V, and the one
function that picks among them.

    kernel = choose_kernel(needs_probabilities, cpu_training_dropout, block_size)
    context, probs = KERNELS[kernel](q, k, v, bias, call)

- "sdpa": torch's fused `scaled_dot_product_attention`; never materialises the T x T
  probabilities (probs is None). The fast path.
- "explicit": the formula written out; returns the probabilities (for `output_attentions`), applies
  a head mask, and draws attention dropout with bertkit's cheap mask (dropout.py) -- on CPU SDPA
  with dropout is unfused anyway and draws its mask with the slow serial generator.
- "block_sparse": the sliding-window block pattern of variants/sparse.py, O(T w b) not O(T^2).
- "low_rank": Linformer (variants/linformer.py): keys and values projected along the sequence to
  k rows, then the explicit formula over them, O(T k) not O(T^2). Chosen whenever the model has the
  projections (config `attention_low_rank`): it is that model's function, not a faster way to the
  dense one, so it wins over every other choice; its probabilities are (M, k).

Scores that depend on positions (relative_key, T5's bias, DeBERTa's disentangled terms) arrive in `bias`,
added by the model before the kernel runs, so every kernel serves every position scheme; a
sparse pattern asked for with probabilities is the explicit kernel under the pattern's mask.
Packed batches (models/packing.py: the N real tokens of a padded batch in one (N, h, d) tensor
with cumulative sequence lengths) go through `packed_attention`: torch's variable-length flash
kernel where it runs (`flash_varlen_runs`: CUDA, bf16/fp16, no attention dropout, torch >= 2.10);
with attention dropout, optionally SDPA on nested jagged tensors (`jagged_attention`: FlashAttention's
variable-length kernel with its dropout, `SETTINGS.jagged_dropout`); else the dense kernels above on
the padded layout, so the numbers are the same either way.
A decoder's self-attention sets `call.causal`: the M queries are the last M of the T positions
(T > M with a KV cache), and query i sees keys j <= T - M + i (`causal_bias`). Cross-attention
is an ordinary call whose keys and values come from the encoder and whose bias masks its padding.
Shapes: q (B, h, M, d); k, v (B, h, T, d); bias broadcastable to (B, h, M, T).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertkit.models.dropout import drop_mask
from bertkit.models.packing import Packing
from bertkit.models.variants import sparse

# torch >= 2.10 ships FlashAttention's variable-length kernel; older builds run packed batches padded.
# Imported only where CUDA is: the module loads torch._dynamo, which doubled the start of every
# command on a CPU machine (`import bertkit` 2.8 -> 5.8 s), where the kernel never runs.
FLASH_VARLEN = None
if torch.cuda.is_available():
    try:
        from torch.nn.attention.varlen import varlen_attn as FLASH_VARLEN
    except ImportError:
        pass
# Its keywords grew with torch: `scale` and `window_size` are missing from the first releases.
VARLEN_KEYWORDS = frozenset(inspect.signature(FLASH_VARLEN).parameters) if FLASH_VARLEN is not None else frozenset()


@dataclass
class KernelSettings:
    """Process-wide switches that benchmarks flip to measure one lever alone."""

    # False: CPU training with attention dropout takes SDPA's own (slow) dropout path
    # instead of the explicit kernel with bertkit's mask (benchmarks/bench_levers.py).
    fast_cpu_dropout: bool = True
    # True: packed batches with attention dropout on a GPU run SDPA on nested (jagged) tensors,
    # FlashAttention's variable-length kernel with its dropout, instead of the padded layout.
    # Off until measured on a GPU (bench_gpu.py's bertkit_jagged_dropout variant).
    jagged_dropout: bool = False


SETTINGS = KernelSettings()


@dataclass
class AttentionCall:
    """What a kernel needs beyond q, k, v and the bias."""

    scale: float  # 1 / sqrt(d), or DeBERTa's 1 / sqrt(d * (1 + #relative terms))
    dropout_p: float = 0.0  # 0 outside training
    head_mask: torch.Tensor | None = None  # (h,) or broadcastable to (B, h, M, T); 0 silences a head
    block_size: int = 0  # block-sparse pattern (variants/sparse.py); 0 = dense
    window_blocks: int = 1
    global_cls: bool = False
    low_rank: nn.Module | None = None  # Linformer's projections (variants/linformer.py); None = dense
    causal: bool = False  # a decoder's self-attention: no query sees a later position


def choose_kernel(needs_probabilities: bool, cpu_training_dropout: bool, block_size: int,
                  low_rank: bool = False) -> str:
    """The kernel of one attention call (see the module docstring for why each wins)."""
    if low_rank:
        return "low_rank"
    if needs_probabilities or (cpu_training_dropout and SETTINGS.fast_cpu_dropout and not block_size):
        return "explicit"
    return "block_sparse" if block_size else "sdpa"


def causal_bias(bias: torch.Tensor | None, queries: int, keys: int, dtype: torch.dtype,
                device: torch.device) -> torch.Tensor:
    """`bias` (or zeros) with the future masked: (.., M, T), query i at position T - M + i sees
    keys j <= T - M + i. Masked entries are set to the dtype's minimum, not added to it, so a row
    with no key left (a left-padded position) stays finite, as in transformers' eager masks."""
    future = torch.ones(queries, keys, dtype=torch.bool, device=device).triu(keys - queries + 1)
    out = torch.zeros(1, 1, queries, keys, dtype=dtype, device=device)
    if bias is not None:
        out = out + bias
    return out.masked_fill(future, torch.finfo(dtype).min)


def _causal(q, k, bias, call: AttentionCall):
    """The bias a kernel applies: with `call.causal` the future is masked too (one query, the
    last position, has no future)."""
    if not call.causal or q.shape[-2] == 1:
        return bias
    return causal_bias(bias, q.shape[-2], k.shape[-2], q.dtype, q.device)


def sdpa_attention(q, k, v, bias, call: AttentionCall):
    if call.causal and bias is None and q.shape[-2] == k.shape[-2]:  # no cache, no padding: SDPA's own mask
        return F.scaled_dot_product_attention(q, k, v, dropout_p=call.dropout_p, is_causal=True,
                                              scale=call.scale), None
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=_causal(q, k, bias, call),
                                             dropout_p=call.dropout_p, scale=call.scale)
    return context, None


def explicit_attention(q, k, v, bias, call: AttentionCall):
    """softmax(Q K^T * scale + bias), dropped out, times V; returns (context, probabilities).

    Dropout's 1 / (1 - p) scale is applied to the (M x d) context rather than the (M x T)
    weights: the same numbers, a quarter of the memory passes at T = 256, d = 64.
    """
    if call.block_size:  # the sparse pattern as a dense mask: the probabilities show it
        allowed = sparse.pattern_mask(q.shape[-2], call.block_size, call.window_blocks, call.global_cls, q.device)
        bias = sparse.restrict_bias(bias, allowed, q.dtype)
    bias = _causal(q, k, bias, call)
    scores = (q * call.scale) @ k.transpose(-1, -2)
    if bias is not None:
        scores = scores + bias
    probs = scores.softmax(dim=-1)
    weights, keep_scale = probs, 1.0
    if call.dropout_p > 0:
        dropped, keep_scale = drop_mask(probs.shape, call.dropout_p, probs.device)
        weights = torch.where(dropped, 0.0, probs)
    if call.head_mask is not None:
        weights = weights * call.head_mask
    context = weights @ v
    return (context * keep_scale if keep_scale != 1.0 else context), probs


def block_sparse_attention(q, k, v, bias, call: AttentionCall):
    context = sparse.block_sparse_attention(q, k, v, bias, call.block_size, call.window_blocks, call.global_cls,
                                            dropout_p=call.dropout_p)
    return context, None


def low_rank_attention(q, k, v, bias, call: AttentionCall):
    """softmax(Q (E K)^T * scale) (F V): padded keys zeroed, keys and values projected to k rows by
    `call.low_rank`, then `explicit_attention` over them (dropout, head mask, (M, k) probabilities)."""
    k, v = call.low_rank(k, v, bias)
    return explicit_attention(q, k, v, None, call)


def flash_varlen_available(device: torch.device) -> bool:
    """Whether torch's variable-length flash kernel exists for `device`: where unpadding pays."""
    return FLASH_VARLEN is not None and device.type == "cuda"


def flash_varlen_runs(q: torch.Tensor, call: AttentionCall, window: int = -1) -> bool:
    """Whether this packed call can take the flash kernel: half precision (flash has no fp32 path),
    no attention dropout (torch's varlen_attn has none), no head mask or causal mask, and a scale
    other than 1/sqrt(d) or a sliding window only where this torch's varlen_attn takes them."""
    default_scale = math.isclose(call.scale * math.sqrt(q.shape[-1]), 1.0)
    return (flash_varlen_available(q.device) and q.dtype in (torch.float16, torch.bfloat16)
            and call.dropout_p == 0 and call.head_mask is None and not call.causal
            and (default_scale or "scale" in VARLEN_KEYWORDS)
            and (window < 0 or "window_size" in VARLEN_KEYWORDS))


def flash_varlen(q, k, v, queries, keys, scale: float, window: int = -1) -> torch.Tensor:
    """torch's varlen flash kernel on packed (N, h, d) tokens; `queries` and `keys` carry cu_seqlens and
    max_len (a Packing, or an encoder's Unpadding). `window` >= 0: a token sees only the keys
    at most that many positions away."""
    options = {"scale": scale} if "scale" in VARLEN_KEYWORDS else {}  # else 1/sqrt(d): flash_varlen_runs
    if window >= 0:
        options["window_size"] = (window, window)
    return FLASH_VARLEN(q, k, v, queries.cu_seqlens, keys.cu_seqlens, queries.max_len, keys.max_len, **options)


def flash_jagged_runs(q: torch.Tensor, call: AttentionCall) -> bool:
    """Whether a packed call with attention dropout takes SDPA on jagged tensors (the switch
    `SETTINGS.jagged_dropout`): CUDA, half precision, no head mask or causal mask."""
    return (SETTINGS.jagged_dropout and q.device.type == "cuda" and q.dtype in (torch.float16, torch.bfloat16)
            and call.dropout_p > 0 and call.head_mask is None and not call.causal)


def jagged_attention(q, k, v, queries: Packing, keys: Packing, call: AttentionCall) -> torch.Tensor:
    """Packed q (Nq, h, d), k, v (N, h, d) -> context (Nq, h, d) by SDPA on nested jagged tensors
    (B, h, j, d) with the packings' offsets: on a GPU, FlashAttention's variable-length kernel,
    attention dropout included (torch's varlen_attn has none)."""
    def jagged(x: torch.Tensor, packing: Packing) -> torch.Tensor:
        return torch.nested.nested_tensor_from_jagged(x, packing.cu_seqlens.long(), max_seqlen=packing.max_len
                                                      ).transpose(1, 2)

    context = F.scaled_dot_product_attention(jagged(q, queries), jagged(k, keys), jagged(v, keys),
                                             dropout_p=call.dropout_p, scale=call.scale)
    return context.transpose(1, 2).values()


def packed_attention(q, k, v, bias, keys: Packing, call: AttentionCall):
    """q (Nq, h, d), k, v (N, h, d) of packed tokens (`keys` says where they sit) -> context (Nq, h, d).

    The queries are every key (Nq = N) or, for a last layer run at a few positions, a (B, M)
    grid of them (Nq = B * M, `Packing.full`). Without the flash kernel (see the module doc) the
    padded layout runs the dense kernel the padded model would, with its (B, 1, 1, T) `bias`.
    """
    queries = keys if q.shape[0] == keys.tokens else Packing.full(keys.batch, q.shape[0] // keys.batch, q.device)
    if flash_varlen_runs(q, call):
        return flash_varlen(q, k, v, queries, keys, call.scale)
    if flash_jagged_runs(q, call):
        return jagged_attention(q, k, v, queries, keys, call)
    q, k, v = (p.pad(x).transpose(1, 2) for p, x in ((queries, q), (keys, k), (keys, v)))  # (B, h, T, d)
    kernel = choose_kernel(call.head_mask is not None, call.dropout_p > 0 and q.device.type == "cpu", 0)
    context, _ = KERNELS[kernel](q, k, v, bias, call)
    return queries.unpad(context.transpose(1, 2))


KERNELS = {"sdpa": sdpa_attention, "explicit": explicit_attention, "block_sparse": block_sparse_attention,
           "low_rank": low_rank_attention}


def default_scale(head_dim: int, scale_factor: int = 1) -> float:
    return 1.0 / math.sqrt(head_dim * scale_factor)
