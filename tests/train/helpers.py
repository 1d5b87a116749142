"""Small shared pieces for the trainer tests: a tiny model config, BBC examples, a masker.

The masker here is deliberately minimal (it is test scaffolding, not the library's
`MLMCollator`): it pads, and replaces ~15% of non-special tokens by [MASK] using its own
torch.Generator, whose state it can save and restore like a real collator.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import numpy as np
import torch

from bertkit.models.config import BertConfig
from bertkit.models.heads import IGNORE_INDEX

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4


def tiny_config(vocab_size: int, dropout: float = 0.1) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=128, max_position_embeddings=64,
                      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def bbc_files(bbc_dir: str, n: int = 60) -> list[str]:
    files = []
    for topic in sorted(os.listdir(bbc_dir)):
        names = sorted(os.listdir(os.path.join(bbc_dir, topic)))[: n // 5]
        files.extend(os.path.join(bbc_dir, topic, f) for f in names)
    return files


def bbc_examples(tokenizer, files: list[str], max_len: int = 32) -> list[dict]:
    """Lines of the articles as [CLS] ids [SEP], cut to max_len (varied lengths on purpose)."""
    lines = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines.extend(line.strip() for line in f if len(line.split()) >= 4)
    ids = tokenizer.encode_batch(lines)
    out = []
    for row in ids:
        for start in range(0, len(row), max_len - 2):
            piece = row[start:start + max_len - 2]
            if len(piece) >= 4:
                out.append({"input_ids": np.array([CLS, *piece, SEP], dtype=np.int64)})
    return out


class SimpleMasker:
    """Pad + 15% [MASK] with a private generator; `static=True` masks by position hash instead."""

    def __init__(self, seed: int = 0, rate: float = 0.15, static: bool = False):
        self.gen = torch.Generator().manual_seed(seed)
        self.rate, self.static = rate, static

    def __call__(self, examples: list[dict]) -> dict:
        length = max(len(e["input_ids"]) for e in examples)
        ids = torch.full((len(examples), length), PAD, dtype=torch.long)
        for i, e in enumerate(examples):
            ids[i, :len(e["input_ids"])] = torch.as_tensor(e["input_ids"])
        attention = (ids != PAD).long()
        special = (ids == CLS) | (ids == SEP) | (ids == PAD)
        if self.static:  # depends only on the tokens: the same in every process
            score = ((ids * 7919 + torch.arange(length) * 104729) % 1000).float() / 1000
        else:
            score = torch.rand(ids.shape, generator=self.gen)
        chosen = (score < self.rate) & ~special
        chosen[:, 1] |= ~chosen.any(dim=1)  # at least one label per row
        labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
        inputs = torch.where(chosen, torch.full_like(ids, MASK), ids)
        return {"input_ids": inputs, "attention_mask": attention, "labels": labels}

    def state_dict(self) -> dict:
        return {"rng": self.gen.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.gen.set_state(state["rng"])


def poison_from_forward(model, n: int) -> None:
    """From the model's n-th forward pass on, its embeddings' output (so the loss) is NaN."""
    def poison(module, args, output):
        poison.calls += 1
        return output * float("nan") if poison.calls >= n else output

    poison.calls = 0
    model.bert.embeddings.register_forward_hook(poison)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(script, timeout: float = 180) -> str:
    """`script` in two gloo processes under the real torchrun, 1 thread each; its stdout. A run
    of its own session: on a time-out the launcher and its workers are killed, never orphaned."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(script)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 0, err[-3000:]
    return out
