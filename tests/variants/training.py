"""A shared check that a variant trains: a tiny MLM fitted to one fixed masked batch."""

import torch


def fit_one_masked_batch(model, steps: int, lr: float = 5e-3) -> tuple[list[float], torch.Tensor, torch.Tensor]:
    """Train `model` (a BertForMaskedLM over ids 5..59, [MASK] = 4) for `steps` AdamW steps on
    one random batch of 8 x 16 ids with 30% masked; returns the loss of every step, the
    masked input ids and the labels (-100 where not masked). The batch is
    drawn from torch's global generator, so seed it first."""
    ids = torch.randint(5, 60, (8, 16))
    labels = torch.full_like(ids, -100)
    masked = torch.rand(ids.shape) < 0.3
    labels[masked] = ids[masked]
    inputs = ids.masked_fill(masked, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = model(input_ids=inputs, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, inputs, labels
