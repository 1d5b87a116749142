"""FLOP ceilings of the MLM workloads: how fast bertkit could be if both ran at the same FLOP/s.

transformers computes the vocabulary projection at every position; bertkit only at the labelled
ones, and its last layer only there too (keys and values still at every position).

    python benchmarks/flops.py
"""

from __future__ import annotations

import harness

import bench_mlm

import bertkit


def main():
    for shape in ("mini", "small"):
        layers, hidden, heads, inter, batch = bench_mlm.SHAPES[shape]
        T = bench_mlm.SEQ_LEN
        cfg = bertkit.BertConfig(vocab_size=bench_mlm.VOCAB, num_hidden_layers=layers, hidden_size=hidden,
                                 num_attention_heads=heads, intermediate_size=inter)
        n = int((bench_mlm.make_batch(batch, T)["labels"] != -100).sum())
        encoder = harness.encoder_flops(cfg, [T] * batch)
        full = encoder + harness.mlm_head_flops(cfg, batch * T)
        labelled = encoder + harness.mlm_head_flops(cfg, n)
        H, I = hidden, inter
        last_pruned = 2 * batch * T * 2 * H * H + 2 * n * (2 * H * H + 2 * H * I) + 4 * n * T * H
        pruned = labelled - encoder / layers + last_pruned
        print(f"{shape}: forward GFLOP - transformers {full / 1e9:.1f}, bertkit head at labelled positions "
              f"{labelled / 1e9:.1f}, and last layer there too {pruned / 1e9:.1f}; FLOP ratio "
              f"{full / labelled:.2f}x -> {full / pruned:.2f}x")


if __name__ == "__main__":
    main()
