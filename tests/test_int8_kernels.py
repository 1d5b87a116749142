"""The fused passes around int8 products (bertkit/inference/int8_kernels.py): each compiled kernel gives
what its plain torch form gives, and a kernel that cannot be built runs unfused with a warning."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from bertkit.inference import int8_kernels as kernels
@pytest.fixture
def unfused():
    """Run `fn` with the kernels unfused (plain torch): the reference for the fused form."""
    def run(fn, *args):
        kernels.FUSE = False
        try:
            return fn(*args)
        finally:
            kernels.FUSE = True
    return run


def _sums(m=37, k=24, n=40, outliers=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(-20000, 20000, (m, n), generator=g, dtype=torch.int32)
    r = torch.rand(m, 1, generator=g) * 1e-3
    s = torch.rand(n, generator=g) * 1e-3
    b = torch.randn(n, generator=g)
    kept = torch.randn(m, outliers, generator=g) * 5
    w = torch.randn(outliers, n, generator=g)
    return y, r, s, b, kept, w


def test_quantize_rows_fused_is_the_plain_form(unfused):
    x = torch.randn(29, 24) * torch.linspace(0.1, 30, 24)
    x[3] = 0  # an all-zero row: scale clamped, q = 0
    scale = torch.rand(24) + 0.5
    index = torch.tensor([4, 17])
    scale[index] = 0
    q, r, kept = kernels.quantize_rows(x, scale, index)
    q0, r0, kept0 = unfused(kernels.quantize_rows, x, scale, index)
    assert q.dtype == torch.int8 and q.abs().max() <= 127 and (q[:, index] == 0).all() and (q[3] == 0).all()
    assert torch.allclose(r, r0) and torch.equal(kept, kept0) and torch.equal(kept, x[:, index])
    assert (q.int() - q0.int()).abs().max() <= 1  # a value on a rounding boundary may go either way
    assert torch.allclose((q.float() * r), x * scale, atol=r.max().item())  # within one step per row


@pytest.mark.parametrize("activation", sorted(kernels.DEQUANTIZE))
def test_dequantize_fused_is_the_plain_form(unfused, activation):
    y, r, s, b, kept, w = _sums()
    expected = y.double() * r.double() * s.double() + b.double() + kept.double() @ w.double()
    act = {"none": lambda t: t, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
           "relu": torch.relu}[activation]
    got = kernels.DEQUANTIZE[activation](y, r, s, b, kept, w)
    assert torch.allclose(got.double(), act(expected), rtol=1e-5, atol=1e-5)
    assert torch.allclose(got, unfused(kernels.DEQUANTIZE[activation], y, r, s, b, kept, w), rtol=1e-5, atol=1e-5)


def test_dequantize_add_layer_norm_fused_is_the_plain_form(unfused):
    y, r, s, b, kept, w = _sums(outliers=4)
    residual, weight, bias = torch.randn(37, 40), torch.rand(40) + 0.5, torch.randn(40)
    args = (y, r, s, b, kept, w, residual, weight, bias, 1e-12)
    expected = F.layer_norm(y * r * s + b + kept @ w + residual, (40,), weight, bias, 1e-12)
    assert torch.allclose(kernels.dequantize_add_layer_norm(*args), expected, rtol=1e-4, atol=1e-4)
    assert torch.allclose(kernels.dequantize_add_layer_norm(*args), unfused(kernels.dequantize_add_layer_norm, *args),
                          rtol=1e-5, atol=1e-5)


def test_a_kernel_that_cannot_be_built_runs_unfused_with_one_warning(monkeypatch):
    def cannot_build(fn, **options):
        def fail(*args):
            raise RuntimeError("no C++ compiler found\nmore detail")
        return fail

    monkeypatch.setattr(torch, "compile", cannot_build)
    double = kernels.fused(lambda x: x * 2)
    with pytest.warns(UserWarning, match="could not build .*RuntimeError: no C\\+\\+ compiler found.*unfused"):
        assert torch.equal(double(torch.ones(3)), torch.full((3,), 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        assert torch.equal(double(torch.ones(2)), torch.full((2,), 2.0))
