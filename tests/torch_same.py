"""``same(torch, fn, *args)``: run one program on numbagrad and on torch and require the same values, dtypes,
printed node names and input gradients (the helper of the op tests)."""

from __future__ import annotations

import numpy as np

import numbagrad


def lib_args(lib, args) -> list:
    """numpy arrays become tensors of ``lib`` (float arrays requiring grad); other arguments pass through."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            t = lib.tensor(a)
            if a.dtype.kind == "f":
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def _outputs(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _outputs(o)]
    return [out] if hasattr(out, "grad_fn") else []


def _run(lib, fn, args, grads: bool):
    inputs = lib_args(lib, args)
    outs = _outputs(fn(lib, *inputs))
    values = [(o.detach().numpy().copy(), str(o.dtype).split(".")[-1]) for o in outs]
    nodes = [type(o.grad_fn).__name__ if o.grad_fn is not None else None for o in outs]
    leaves = [t for t in inputs if hasattr(t, "requires_grad") and t.requires_grad]
    gs = []
    differentiable = [o for o in outs if o.requires_grad]
    if grads and differentiable:
        total = 0
        for o in differentiable:  # a weighted sum, so each output element's gradient differs
            w = np.linspace(0.5, 1.5, o.numel()).reshape(tuple(o.shape))
            total = total + (o * lib.tensor(w, dtype=o.dtype)).sum()
        total.backward()
        gs = [None if t.grad is None else t.grad.numpy() for t in leaves]
    return values, nodes, gs


def same(torch, fn, *args, grads: bool = True, rtol: float = 1e-12) -> None:
    """``fn(lib, *args)`` on numbagrad and torch (numpy array arguments become tensors) agree in values, dtypes,
    node names and the gradients of every float input."""
    (v1, n1, g1), (v2, n2, g2) = (_run(lib, fn, args, grads) for lib in (numbagrad, torch))
    assert n1 == n2
    assert [d for _, d in v1] == [d for _, d in v2]
    for (a, _), (b, _) in zip(v1, v2):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(np.signbit(a), np.signbit(b))  # -0.0 where torch gives -0.0
    assert [g is None for g in g1] == [g is None for g in g2]
    for a, b in zip(g1, g2):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-15)
