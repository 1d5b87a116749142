"""Attention maps: per-head statistics, rollout, flow and PNG plots.

Everything here works on one example's attention as an array of shape (L, H, T, T):
L layers, H heads, T tokens; row i of a head's matrix is query token i and sums to 1 over
the keys j (a softmax). `stack_attentions` turns a model's `out.attentions` (a tuple of L
tensors of shape (batch, H, T, T)) into that array.

Notation used in the docstrings: a = attn[l, h] (T x T), n = number of real (non-padding)
tokens; statistics only look at the n x n block of real tokens.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Sequence

import numpy as np

from bertkit.errors import ConfigError, DataError
from bertkit.runtime.plotting import pyplot, save_png

CLS_TOKENS = ("[CLS]", "<s>")
SEP_TOKENS = ("[SEP]", "</s>")


# ----------------------------------------------------------------------------- input checks
def _as_numpy(x) -> np.ndarray:
    """Accept a numpy array or a torch tensor (any device/dtype) and return float64 numpy."""
    if hasattr(x, "detach"):  # a torch tensor; avoid importing torch for numpy users
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def check_attention(attn, tokens: Sequence[str] | None = None) -> np.ndarray:
    """Return `attn` as an (L, H, T, T) float64 array, or raise DataError saying what is wrong."""
    a = _as_numpy(attn)
    if a.ndim != 4 or a.shape[2] != a.shape[3]:
        raise DataError(
            f"attention must have shape (layers, heads, T, T), got {tuple(a.shape)}; "
            "use stack_attentions(out.attentions, index) to pick one example from a batch"
        )
    if tokens is not None and len(tokens) != a.shape[2]:
        raise DataError(
            f"got {len(tokens)} tokens for attention over {a.shape[2]} positions; "
            "pass the tokens of exactly the sequence the attention was computed on"
        )
    if not np.all(np.isfinite(a)):
        raise DataError("attention contains NaN or inf values; check the model's outputs")
    return a


def _real_length(T: int, length: int | None, mask) -> int:
    """Number of real tokens: from `length`, from a 0/1 `mask` (real tokens first), or T."""
    if length is not None and mask is not None:
        raise ConfigError("give either length or mask, not both")
    if mask is not None:
        m = _as_numpy(mask).reshape(-1)
        if m.shape[0] != T:
            raise DataError(f"mask has {m.shape[0]} entries for {T} positions")
        length = int((m > 0).sum())
        if not np.all(m[:length] > 0):
            raise DataError("mask must mark real tokens first, then padding (right padding)")
    if length is None:
        return T
    if not 1 <= length <= T:
        raise ConfigError(f"length must be between 1 and {T}, got {length}")
    return int(length)


def stack_attentions(attentions, index: int = 0, attention_mask=None):
    """Pick example `index` from a model's `out.attentions` (tuple of L (B, H, T, T) tensors).

    Returns (attn, length): attn is an (L, H, n, n) float64 array cut to the n real tokens of
    that example (n from `attention_mask` of shape (B, T) if given, else T), so that padded
    positions never enter plots or statistics.
    """
    if not isinstance(attentions, (tuple, list)) or len(attentions) == 0:
        raise DataError(
            "expected out.attentions as a non-empty tuple of (batch, heads, T, T) tensors; "
            "call the model with output_attentions=True"
        )
    layers = [_as_numpy(a) for a in attentions]
    batch = layers[0].shape[0]
    if not -batch <= index < batch:
        raise ConfigError(f"example index {index} out of range: the batch has {batch} examples")
    a = np.stack([layer[index] for layer in layers])
    mask = None if attention_mask is None else _as_numpy(attention_mask)[index]
    n = _real_length(a.shape[-1], None, mask)
    return check_attention(a[:, :, :n, :n]), n


# ----------------------------------------------------------------------------- statistics
def head_statistics(
    attn,
    tokens: Sequence[str],
    length: int | None = None,
    mask=None,
    cls_tokens: Sequence[str] = CLS_TOKENS,
    sep_tokens: Sequence[str] = SEP_TOKENS,
) -> dict[str, np.ndarray]:
    """Summaries of every head's attention pattern (after Clark et al. 2019).

    Returns a dict of (L, H) arrays. With a = attn[l, h] restricted to the n real tokens and
    rows renormalised to sum to 1 (a no-op for a model that masks padding keys correctly):

    - ``entropy``  mean_i  -sum_j a_ij log a_ij   (nats; 0 = one-hot, log n = uniform)
    - ``cls``      mean_i  sum_{j: token j in cls_tokens} a_ij
    - ``sep``      mean_i  sum_{j: token j in sep_tokens} a_ij
    - ``self``     mean_i  a_ii
    - ``prev``     mean_{i>=1} a_{i,i-1}          (rows without a previous token are skipped)
    - ``next``     mean_{i<=n-2} a_{i,i+1}
    - ``distance`` mean_i  sum_j a_ij |i - j|      (in tokens)
    """
    a = check_attention(attn, tokens)
    n = _real_length(a.shape[-1], length, mask)
    a = a[:, :, :n, :n]
    a = a / np.clip(a.sum(-1, keepdims=True), 1e-12, None)
    toks = list(tokens)[:n]

    # 0 log 0 = 0: the limit, and what a head that ignores a key contributes
    plogp = np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0)
    idx = np.arange(n)
    is_cls = np.array([t in cls_tokens for t in toks])
    is_sep = np.array([t in sep_tokens for t in toks])
    nan = np.full(a.shape[:2], np.nan)  # a 1-token sequence has no previous/next token
    return {
        "entropy": -plogp.sum(-1).mean(-1),
        "cls": a[..., is_cls].sum(-1).mean(-1),
        "sep": a[..., is_sep].sum(-1).mean(-1),
        "self": a[..., idx, idx].mean(-1),
        "prev": a[..., idx[1:], idx[:-1]].mean(-1) if n > 1 else nan,
        "next": a[..., idx[:-1], idx[1:]].mean(-1) if n > 1 else nan,
        "distance": (a * np.abs(idx[:, None] - idx[None, :])).sum(-1).mean(-1),
    }


def statistics_records(stats: dict[str, np.ndarray]) -> list[dict]:
    """Flatten `head_statistics` output to one JSON-ready dict per (layer, head)."""
    L, H = next(iter(stats.values())).shape
    return [
        {"layer": l, "head": h, **{k: round(float(v[l, h]), 6) for k, v in stats.items()}}
        for l in range(L)
        for h in range(H)
    ]


# ----------------------------------------------------------------------------- rollout / flow
def _residual_attention(a: np.ndarray, add_residual: bool) -> np.ndarray:
    """Head-averaged attention per layer, (L, T, T); with the residual, A' = 0.5 A + 0.5 I.

    The skip connection carries each token's own representation forward, so Abnar & Zuidema
    (2020) model a layer as half attention, half identity. Rows are renormalised so each
    layer's matrix is row-stochastic even if the input rows were not exactly 1.
    """
    A = a.mean(axis=1)
    if add_residual:
        A = 0.5 * A + 0.5 * np.eye(A.shape[-1])
    return A / np.clip(A.sum(-1, keepdims=True), 1e-12, None)


def attention_rollout(attn, add_residual: bool = True) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020), (L, T, T).

    rollout[l] = A'_l A'_{l-1} ... A'_0 with A'_k the residual-augmented, head-averaged
    attention of layer k. Row i of rollout[l] is how much token i's output of layer l draws
    on each input token, following all paths through the layers. Each row sums to 1
    (a product of row-stochastic matrices is row-stochastic).
    """
    A = _residual_attention(check_attention(attn), add_residual)
    out = np.empty_like(A)
    acc = np.eye(A.shape[-1])
    for layer in range(A.shape[0]):
        acc = A[layer] @ acc
        out[layer] = acc
    return out


def max_flow(capacity: np.ndarray, source: int, sink: int, eps: float = 1e-12) -> float:
    """Maximum flow from `source` to `sink` in a graph given as a dense capacity matrix.

    Edmonds–Karp: repeatedly find a shortest augmenting path in the residual graph by
    breadth-first search and push the path's bottleneck capacity along it. Residual capacity
    r(u, v) = c(u, v) - f(u, v) + f(v, u), kept in one matrix `r`. Terminates after
    O(V E) augmentations; the flow found equals the minimum source–sink cut.
    """
    r = np.array(capacity, dtype=np.float64)
    if r.ndim != 2 or r.shape[0] != r.shape[1]:
        raise DataError(f"capacity must be a square matrix, got shape {r.shape}")
    if np.any(r < 0):
        raise DataError("capacities must be non-negative")
    if source == sink:
        raise ConfigError("source and sink must be different nodes")
    total = 0.0
    while True:
        parent = np.full(r.shape[0], -1)
        parent[source] = source
        queue = deque([source])
        while queue and parent[sink] < 0:
            u = queue.popleft()
            for v in np.flatnonzero((r[u] > eps) & (parent < 0)):
                parent[v] = u
                queue.append(v)
        if parent[sink] < 0:  # no augmenting path left: the flow is maximal
            return total
        path, v = [], sink
        while v != source:
            path.append((parent[v], v))
            v = parent[v]
        push = min(r[u, v] for u, v in path)
        for u, v in path:
            r[u, v] -= push
            r[v, u] += push
        total += push


def flow_graph(attn, add_residual: bool = True) -> np.ndarray:
    """Capacity matrix of the layered attention graph, ((L+1) T) x ((L+1) T).

    Node l*T + j is token j at layer l (l = 0: the inputs). Layer l's attention A'_l connects
    input j (at level l) to output i (at level l+1) with capacity A'_l[i, j].
    """
    A = _residual_attention(check_attention(attn), add_residual)
    L, T, _ = A.shape
    cap = np.zeros(((L + 1) * T, (L + 1) * T))
    for layer in range(L):
        lo, hi = layer * T, (layer + 1) * T
        cap[lo:hi, hi : hi + T] = A[layer].T  # edge j -> i carries A'[i, j]
    return cap


def attention_flow(
    attn,
    targets: Sequence[int] | None = None,
    sources: Sequence[int] | None = None,
    add_residual: bool = True,
) -> np.ndarray:
    """Attention flow (Abnar & Zuidema 2020): max-flow from input tokens to output tokens.

    flow[t, s] = maximum flow from input token sources[s] (layer 0) to token targets[t] at the
    last layer, in the graph of `flow_graph`. Unlike rollout (which multiplies weights along
    every path), flow treats attention weights as pipe capacities. Each value lies in [0, 1]
    (the target's incoming capacities sum to 1) but rows need not sum to 1. With one layer
    flow equals rollout, since every path is a single edge.

    Cost: one max-flow per (target, source) pair on an (L+1) T node graph; pick the targets
    you need (e.g. [0] for [CLS]) for long sequences.
    """
    a = check_attention(attn)
    L, T = a.shape[0], a.shape[-1]
    targets = list(range(T)) if targets is None else list(targets)
    sources = list(range(T)) if sources is None else list(sources)
    for name, pos in (("target", targets), ("source", sources)):
        bad = [p for p in pos if not 0 <= p < T]
        if bad:
            raise ConfigError(f"{name} positions {bad} out of range: valid positions are 0..{T - 1}")
    cap = flow_graph(a, add_residual)
    out = np.zeros((len(targets), len(sources)))
    for ti, t in enumerate(targets):
        for si, s in enumerate(sources):
            out[ti, si] = max_flow(cap, s, L * T + t)
    return out


# ----------------------------------------------------------------------------- plots
def _check_layer_head(a: np.ndarray, layer: int, head: int) -> None:
    L, H = a.shape[:2]
    if not 0 <= layer < L:
        raise ConfigError(f"layer {layer} out of range: valid layers are 0..{L - 1}")
    if not 0 <= head < H:
        raise ConfigError(f"head {head} out of range: valid heads are 0..{H - 1}")


def plot_head(attn, tokens: Sequence[str], layer: int, head: int, path: str | os.PathLike,
              title: str | None = None) -> None:
    """Heatmap of one head (rows = query tokens, columns = key tokens) as a PNG.

    `title` defaults to "layer L, head H"; pass one when plotting something else shaped like a
    head, e.g. a rollout matrix as `rollout[:, None]`.
    """
    a = check_attention(attn, tokens)
    _check_layer_head(a, layer, head)
    plt = pyplot()
    T = a.shape[-1]
    size = min(12.0, 2.5 + 0.28 * T)
    fig, ax = plt.subplots(figsize=(size, size), dpi=100)
    im = ax.imshow(a[layer, head], cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(T), list(tokens), rotation=90, fontsize=8)
    ax.set_yticks(range(T), list(tokens), fontsize=8)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title or f"layer {layer}, head {head}", fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    save_png(fig, path)


def plot_grid(attn, tokens: Sequence[str], path: str | os.PathLike) -> None:
    """Small multiples of every head: a layers x heads grid of heatmaps, as a PNG."""
    a = check_attention(attn, tokens)
    plt = pyplot()
    L, H = a.shape[:2]
    fig, axes = plt.subplots(L, H, figsize=(1.2 * H + 0.6, 1.2 * L + 0.6), dpi=100, squeeze=False)
    for l in range(L):
        for h in range(H):
            ax = axes[l][h]
            ax.imshow(a[l, h], cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
            if l == 0:
                ax.set_title(f"h{h}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"L{l}", fontsize=8)
    fig.suptitle(f"attention of {len(tokens)} tokens: layers (rows) x heads (columns)", fontsize=9)
    fig.tight_layout()
    save_png(fig, path)
