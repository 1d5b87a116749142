"""Block-sparse local attention (sliding window of blocks, as BigBird/Longformer's local part).

The sequence is cut into blocks of `attention_block_size` b tokens; a query in block j attends to
the keys of blocks j - w .. j + w (w = `attention_window_blocks`). With `attention_global_cls`
token 0 ([CLS]) is global: it attends to every token and every token attends to it. Cost is
O(T (2w+1) b) instead of O(T^2).

    allowed(i, r) = |i // b - r // b| <= w   or   (global and (i == 0 or r == 0))

`block_sparse_attention` computes it blockwise: the sequence is padded to a multiple of b (and
stripped after), every query block gathers its (2w+1) b keys with `unfold`, plus the [CLS] key
when global (masked where the window already holds it), and SDPA runs on the (B, h, n, b, d)
blocks. The [CLS] query's row is ordinary dense attention. `pattern_mask` is the same pattern as a
dense T x T mask: the explicit attention path (probabilities requested) applies it, and tests
compare the two.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bertkit.errors import BertkitError, ConfigError


def pattern_mask(seq_len: int, block: int, window: int, global_cls: bool,
                 device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool, True where query i may attend to key r."""
    blocks = torch.arange(seq_len, device=device) // block
    allowed = (blocks[:, None] - blocks[None, :]).abs() <= window
    if global_cls:
        allowed[0, :] = True
        allowed[:, 0] = True
    return allowed


def restrict_bias(bias: torch.Tensor | None, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An additive bias that also forbids what `allowed` (T, T) forbids (no -inf sums: masked_fill)."""
    if bias is None:
        bias = torch.zeros((), dtype=dtype, device=allowed.device)
    shape = torch.broadcast_shapes(bias.shape, allowed.shape)
    return bias.expand(shape).masked_fill(~allowed, torch.finfo(dtype).min)


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           key_bias: torch.Tensor | None, block: int, window: int,
                           global_cls: bool, dropout_p: float = 0.0) -> torch.Tensor:
    """q, k, v (B, h, T, d); key_bias (B, 1, 1, T) additive padding bias or None -> (B, h, T, d)."""
    batch, heads, seq_len, dim = q.shape
    if k.shape[-2] != seq_len:
        raise BertkitError(f"block-sparse attention needs one key per query position; got {seq_len} "
                           f"queries and {k.shape[-2]} keys (prefix tuning adds keys: use dense attention)")
    neg = torch.finfo(q.dtype).min
    pad = (-seq_len) % block
    if key_bias is None:
        key_bias = torch.zeros(batch, 1, 1, seq_len, dtype=q.dtype, device=q.device)
    key_bias = key_bias.expand(batch, 1, 1, seq_len)
    if pad:  # pad to whole blocks; padded keys are never attended to, padded queries are cut off
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        key_bias = F.pad(key_bias, (0, pad), value=neg)
    n = (seq_len + pad) // block
    span = 2 * window + 1

    def windows(x: torch.Tensor, fill: float) -> torch.Tensor:
        """(..., n*b, c) -> (..., n, (2w+1)*b, c): the keys of blocks j-w .. j+w for every block j."""
        x = x.reshape(*x.shape[:-2], n, block, x.shape[-1])
        x = F.pad(x, (0, 0, 0, 0, window, window), value=fill)  # w missing blocks on each side
        x = x.unfold(-3, span, 1)  # (..., n, b, c, span)
        return x.movedim(-1, -3).reshape(*x.shape[:-4], n, span * block, x.shape[-2])

    k_win, v_win = windows(k, 0.0), windows(v, 0.0)
    bias_win = windows(key_bias[:, :, 0, :, None], neg)[..., 0]  # (B, 1, n, (2w+1) b)
    if global_cls:  # every block also sees key 0, unless its window already holds block 0
        k_win = torch.cat([k_win, k[:, :, None, :1].expand(-1, -1, n, -1, -1)], dim=-2)
        v_win = torch.cat([v_win, v[:, :, None, :1].expand(-1, -1, n, -1, -1)], dim=-2)
        has_cls = torch.arange(n, device=q.device) <= window
        cls_bias = key_bias[:, :, 0, :1].expand(batch, 1, n).masked_fill(has_cls, neg)
        bias_win = torch.cat([bias_win, cls_bias[..., None]], dim=-1)
    q_blocks = q.reshape(batch, heads, n, block, dim)
    context = F.scaled_dot_product_attention(q_blocks, k_win, v_win, attn_mask=bias_win[:, :, :, None, :],
                                             dropout_p=dropout_p)
    context = context.reshape(batch, heads, n * block, dim)[:, :, :seq_len]
    if global_cls:  # [CLS] reads the whole sequence
        first = F.scaled_dot_product_attention(q[:, :, :1], k, v, attn_mask=key_bias, dropout_p=dropout_p)
        context = torch.cat([first, context[:, :, 1:]], dim=2)
    return context


def validate(config) -> None:
    """Positive blocks, a window >= 0, and positions that are not a dense T x T term."""
    if config.attention_block_size is None:
        return
    if not isinstance(config.attention_block_size, int) or config.attention_block_size < 1:
        raise ConfigError(f"attention_block_size must be a positive integer (or unset for dense "
                          f"attention), got {config.attention_block_size!r}")
    if not isinstance(config.attention_window_blocks, int) or config.attention_window_blocks < 0:
        raise ConfigError(f"attention_window_blocks must be >= 0 (0 = each block alone), got "
                          f"{config.attention_window_blocks!r}")
    if config.position_embedding_type in ("relative_key", "relative_key_query", "t5_bias"):
        raise ConfigError(
            f"block-sparse attention cannot use position_embedding_type="
            f"{config.position_embedding_type!r}: relative scores are a dense T x T term; use "
            "absolute or sinusoidal positions, or unset attention_block_size")
