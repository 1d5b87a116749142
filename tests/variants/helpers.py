"""Shared pieces for the variant parity tests: weights that all matter, and a masked max difference."""

import torch


def perturb(model):
    """Random init leaves LayerNorms at 1/0 and biases at 0; make every weight matter."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def diff(a, b, mask=None) -> float:
    """max |a - b|, over the real tokens (mask 1) when a mask is given."""
    d = a - b
    return (d[mask.bool()] if mask is not None else d).abs().max().item()
