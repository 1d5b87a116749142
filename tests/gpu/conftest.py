"""tests/gpu: what only a CUDA GPU can check (the flash kernel, bf16 training, every command on
cuda, resume on the GPU). Skipped, every one, where CUDA is not available; run them with
`python -m pytest -q tests/gpu` on a GPU machine (benchmarks/gpu/run.sh does)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _needs_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")


def mlm_batches(vocab: int, batch: int, length: int, count: int, seed: int = 0, device: str = "cuda") -> list[dict]:
    """`count` fixed MLM batches of random tokens, varied lengths (right padding), 15% labelled."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(5, vocab, (batch, length), generator=g)
        lengths = torch.randint(length // 4, length + 1, (batch,), generator=g)
        mask = (torch.arange(length)[None] < lengths[:, None]).long()
        ids = ids.masked_fill(mask == 0, 0)
        labels = ids.masked_fill((torch.rand(ids.shape, generator=g) > 0.15) | (mask == 0), -100)
        labels[:, 1] = ids[:, 1]  # at least one label per row
        out.append({"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)})
    return out
