"""int8 schemes built on fused kernels (fbgemm's dynamic quantized linear): quality and speed.

Not what `quantize="int8"` runs (bertkit/inference/quantize.py); the measurements behind docs/inference.md,
"A second attempt". Every scheme is an inference copy of MiniLM with transformer-layer maps
swapped; `fp32` ones are oneDNN-packed (fastpath.PackedLinear):

  qkv: "smooth" (one fused Q|K|V map, input times 1/c, SmoothQuant alpha 0.5), "plain", "fp32"
  o:   "plain" (attention output, no smoothing), "fp32"
  ff:  r = number of intermediate channels (largest a_k w_k of the second map) taken out of int8
       and computed in fp32 as a rank-r update; the first map smoothed; None: both maps fp32

fbgemm quantizes activations per tensor (asymmetric, 8-bit) inside its kernel; weights per channel.

    python benchmarks/int8_schemes.py [--texts 96] [--speed-texts 64] [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import warnings

from bench_inference import cut_texts
from int8_quality import cosines, encode_sets, text_sets

import numpy as np
import torch
from torch import nn

from bertkit.data.assets import minilm_dir
from bertkit.inference.encode import SentenceEncoder
from bertkit.inference.fastpath import PackedLinear, encoder_linears
from bertkit.inference.quantize import calibration_inputs, input_maxima, quantize_int8

SCHEMES = {"qkv": {"qkv": "smooth", "o": "fp32", "ff": None}, "o": {"qkv": "fp32", "o": "plain", "ff": None},
           "ff r2": {"qkv": "fp32", "o": "fp32", "ff": 2},
           "all r2": {"qkv": "smooth", "o": "plain", "ff": 2}, "all r4": {"qkv": "smooth", "o": "plain", "ff": 4}}


class DynamicLinear(nn.Module):
    """y = fbgemm_int8(x * pre) with W per-channel int8; `pre` (K,) or None."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, pre: torch.Tensor | None = None):
        super().__init__()
        weight = weight.float().contiguous()
        scale = (weight.abs().amax(1).clamp(min=1e-8) / 127).double()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # quantized tensor creation is deprecated in torch 2.13
            qw = torch.quantize_per_channel(weight, scale, torch.zeros(len(scale), dtype=torch.long), 0, torch.qint8)
        self.packed = torch.ops.quantized.linear_prepack(qw, None if bias is None else bias.float())
        self.pre = pre

    def forward(self, x):
        if self.pre is not None:
            x = x * self.pre
        return torch.ops.quantized.linear_dynamic(x, self.packed, False)  # 8-bit: reduce_range costs 0.15 cosine


class FusedQKV(nn.Module):
    """query(x) runs one Q|K|V map and leaves k, v for key(x), value(x) (model.py calls all three)."""

    def __init__(self, inner: nn.Module, width: int):
        super().__init__()
        self.inner, self.width, self.stash = inner, width, None

    def forward(self, x):
        q, k, v = self.inner(x).split(self.width, -1)
        self.stash = (x, k, v)
        return q


class Stashed(nn.Module):
    def __init__(self, owner: FusedQKV, index: int):
        super().__init__()
        self.owner, self.index = [owner], index  # a list: not a submodule (no cycle in the module tree)

    def forward(self, x):
        stash = self.owner[0].stash
        if stash is None or stash[0] is not x:
            raise RuntimeError("Stashed: key/value called on another input than query (cross-attention)")
        return stash[self.index]


class SplitFF1(nn.Module):
    """act(int8 map) with the channels O zeroed (GELU(0) = 0) and act(x W1[O]^T + b1[O]) kept in fp32."""

    def __init__(self, dense: nn.Module, act: nn.Module, weight_o: torch.Tensor, bias_o: torch.Tensor):
        super().__init__()
        self.dense, self.act, self.weight_o, self.bias_o, self.stash = dense, act, weight_o, bias_o, None

    def forward(self, x):
        self.stash = self.act(torch.addmm(self.bias_o, x.reshape(-1, x.shape[-1]), self.weight_o.t()))
        return self.act(self.dense(x))


class SplitFF2(nn.Module):
    """int8 map plus the rank-r fp32 update from SplitFF1's channels: y += a_O W2[:, O]^T."""

    def __init__(self, dense: nn.Module, ff1: SplitFF1, weight_o: torch.Tensor):
        super().__init__()
        self.dense, self.ff1, self.weight_o = dense, [ff1], weight_o  # weight_o (r, N)

    def forward(self, x):
        y = self.dense(x)
        return y.view(-1, y.shape[-1]).addmm_(self.ff1[0].stash, self.weight_o).view(y.shape)


def smoothing(weight: torch.Tensor, input_max: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """c_k = a_k^alpha / w_k^(1 - alpha) (as quantize.py)."""
    return input_max.clamp(min=1e-5) ** alpha / weight.abs().amax(0).clamp(min=1e-5) ** (1 - alpha)


def build(model: nn.Module, tokenizer, scheme: dict) -> nn.Module:
    m = copy.deepcopy(model).eval()
    maxima = input_maxima(m, encoder_linears(m), calibration_inputs(m.config, tokenizer))
    for i, layer in enumerate(m.encoder.layer):
        att, name = layer.attention.self, f"encoder.layer.{i}."
        if scheme["qkv"] == "fp32":
            att.query, att.key, att.value = PackedLinear(att.query), PackedLinear(att.key), PackedLinear(att.value)
        else:
            weight = torch.cat([att.query.weight, att.key.weight, att.value.weight]).detach()
            bias = torch.cat([att.query.bias, att.key.bias, att.value.bias]).detach()
            pre = None
            if scheme["qkv"] == "smooth":
                c = smoothing(weight, maxima[name + "attention.self.query"])
                weight, pre = weight * c, 1 / c
            fused = FusedQKV(DynamicLinear(weight, bias, pre), att.query.out_features)
            att.query, att.key, att.value = fused, Stashed(fused, 1), Stashed(fused, 2)
        out = layer.attention.output
        out.dense = PackedLinear(out.dense) if scheme["o"] == "fp32" else DynamicLinear(out.dense.weight.detach(), out.dense.bias.detach())
        inter, ff_out = layer.intermediate, layer.output
        if scheme["ff"] is None:
            inter.dense, inter.intermediate_act_fn = PackedLinear(inter.dense, inter.intermediate_act_fn), nn.Identity()
            ff_out.dense = PackedLinear(ff_out.dense)
            continue
        w1, b1 = inter.dense.weight.detach().clone(), inter.dense.bias.detach().clone()
        w2, b2 = ff_out.dense.weight.detach().clone(), ff_out.dense.bias.detach()
        outliers = (maxima[name + "output.dense"] * w2.abs().amax(0)).topk(scheme["ff"]).indices
        weight_o, bias_o, weight2_o = w1[outliers].clone(), b1[outliers].clone(), w2[:, outliers].t().contiguous()
        w1[outliers], b1[outliers], w2[:, outliers] = 0, 0, 0
        c = smoothing(w1, maxima[name + "intermediate.dense"])
        ff1 = SplitFF1(DynamicLinear(w1 * c, b1, 1 / c), inter.intermediate_act_fn, weight_o, bias_o)
        inter.dense, inter.intermediate_act_fn = ff1, nn.Identity()
        ff_out.dense = SplitFF2(DynamicLinear(w2, b2), ff1, weight2_o)
    for p in m.parameters():
        p.requires_grad_(False)
    m.inference_copy = "int8 (experimental scheme)"
    return m


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=96)
    p.add_argument("--speed-texts", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--schemes", nargs="+", choices=list(SCHEMES), default=list(SCHEMES))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    fp32 = SentenceEncoder.from_pretrained(minilm_dir())
    original = fp32.model
    sets = text_sets(fp32.tokenizer, args.texts, 111, ("Thanks!", "Hi", "ok"))
    reference = encode_sets(fp32, sets)
    encoders = {"fp32": fp32, "shipped int8": SentenceEncoder(quantize_int8(original, fp32.tokenizer), fp32.tokenizer)}
    encoders.update({s: SentenceEncoder(build(original, fp32.tokenizer, SCHEMES[s]), fp32.tokenizer) for s in args.schemes})
    for name, encoder in list(encoders.items())[1:]:
        cosine = cosines(encoder, sets, reference)
        print(name, {k: f"min {c.min():.4f} mean {c.mean():.4f}" for k, c in cosine.items()},
              "Thanks!/Hi", cosine["titles"][-3:-1].round(4), flush=True)
    speed_texts = cut_texts(fp32.tokenizer, 8, 256, args.speed_texts, seed=0)
    calls = {n: (lambda e=e: e.encode(speed_texts, max_length=256, show_progress=False)) for n, e in encoders.items()}
    times = {n: [] for n in calls}
    for r in range(args.repeats):  # alternating, order flipped every repeat
        for n, call in (list(calls.items()) if r % 2 == 0 else list(calls.items())[::-1]):
            started = time.perf_counter()
            call()
            times[n].append(time.perf_counter() - started)
    for n in calls:
        ratio = [a / b for a, b in zip(times["fp32"], times[n])]
        print(f"{n}: {np.median(times[n]):.2f} s, speed vs fp32 {np.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f})")


if __name__ == "__main__":
    main(sys.argv[1:])
