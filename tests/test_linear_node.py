"""``F.linear``'s one node, against torch: without a bias over any number of leading dims (``MmBackward0`` for a
matrix input, ``UnsafeViewBackward0`` above), with torch's values, gradients, second derivatives and errors; and
complex gradients (the conjugates) with and without a bias."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng

SHAPES = [(5,), (4, 5), (2, 3, 5), (2, 1, 3, 5), (0, 5), (2, 0, 5)]


def _run(lib, shape, dtype):
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    w = lib.tensor(rng.standard_normal((6, 5)).astype(dtype), requires_grad=True)
    y = lib.nn.functional.linear(x, w)
    (gx, gw) = lib.autograd.grad((y * y).sum(), (x, w), create_graph=True)
    (gx.sum() + (gw * gw).sum()).backward()
    return y, x.grad, w.grad


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values_gradients_and_second_derivatives_match_torch(torch, shape, dtype):
    ours, theirs = _run(ng, shape, dtype), _run(torch, shape, dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape)
        # (absolute error relative to the largest value: float32 sums of values in the hundreds that cancel to
        # about 1 keep fewer digits, and the BLAS of each library sums in its own order)
        expected = b.detach().numpy()
        scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
        np.testing.assert_allclose(a.detach().numpy(), expected, rtol=tol, atol=tol * scale)
    assert type(ours[0].grad_fn).__name__ == type(theirs[0].grad_fn).__name__


def test_bfloat16_rounds_once_as_torch(torch):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 4, 8)), rng.standard_normal((5, 8))
    ours = ng.nn.functional.linear(ng.tensor(x).bfloat16(), ng.tensor(w).bfloat16()).float().numpy()
    theirs = torch.nn.functional.linear(torch.tensor(x).bfloat16(), torch.tensor(w).bfloat16()).float().numpy()
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(
    "x_shape,w_shape,w_dtype",
    [((4, 5), (6, 4), "float32"), ((2, 3, 5), (6, 4), "float32"), ((4, 5), (6, 5), "float64")],
)
def test_errors_match_torch(torch, x_shape, w_shape, w_dtype):
    def error(lib):
        x = lib.zeros(x_shape)
        w = lib.zeros(w_shape, dtype=getattr(lib, w_dtype))
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.linear(x, w)
        return str(info.value)

    assert error(ng) == error(torch)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)], ids=str)
def test_complex_gradients_and_second_derivatives_match_torch(torch, shape, bias):
    rng = np.random.default_rng(2)

    def run(lib):
        def draw(s):
            return lib.tensor(rng.standard_normal(s) + 1j * rng.standard_normal(s), requires_grad=True)

        x, w, b = draw(shape), draw((5, 4)), draw((5,))
        y = lib.nn.functional.linear(x, w, b if bias else None)
        gx, gw = lib.autograd.grad((y.abs() ** 2).sum(), (x, w), create_graph=True)
        ((gx.abs() ** 2).sum() + (gw.abs() ** 2).sum()).backward()
        return [t.detach().numpy() for t in (y, x.grad, w.grad)]

    state = rng.bit_generator.state
    ours = run(ng)
    rng.bit_generator.state = state
    for a, b in zip(ours, run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
