"""Finite-difference checks of gradients (torch's ``gradcheck`` / ``gradgradcheck`` and their defaults)."""

from __future__ import annotations

import numpy as np

from .._tensor import Tensor
from .engine import grad as autograd_grad
from .grad_mode import enable_grad


class GradcheckError(RuntimeError):
    """Raised when an analytical gradient disagrees with the numerical one."""


def _as_tuple(x) -> tuple:
    return (x,) if not isinstance(x, (tuple, list)) else tuple(x)


def _float_outputs(func, inputs) -> list:
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.is_floating_point()]


def _numerical_jacobians(func, inputs, diff_inputs, eps: float) -> list:
    """J[o][i] of shape (numel(input i), numel(output o)), by central differences on the storage."""
    with enable_grad():  # gradgradcheck differentiates inside func
        outputs = _float_outputs(func, inputs)
        result = [[np.zeros((x.numel(), o.numel())) for x in diff_inputs] for o in outputs]
        for i, x in enumerate(diff_inputs):
            flat = x._data.reshape(-1) if x._data.flags.c_contiguous else None
            if flat is None:
                raise ValueError("gradcheck needs contiguous inputs")
            for k in range(flat.size):
                orig = flat[k].item()
                flat[k] = orig + eps
                plus = [o._host().astype(np.float64).reshape(-1).copy() for o in _float_outputs(func, inputs)]
                flat[k] = orig - eps
                minus = [o._host().astype(np.float64).reshape(-1).copy() for o in _float_outputs(func, inputs)]
                flat[k] = orig
                for o in range(len(outputs)):
                    result[o][i][k] = (plus[o] - minus[o]) / (2 * eps)
    return result


def _analytical_jacobians(func, inputs, diff_inputs) -> list:
    outputs = _float_outputs(func, inputs)
    result = [[np.zeros((x.numel(), o.numel())) for x in diff_inputs] for o in outputs]
    for o_idx, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for m in range(out.numel()):
            seed = np.zeros(out.shape, out._data.dtype)
            seed.reshape(-1)[m] = 1
            grads = autograd_grad(out, diff_inputs, Tensor._make(seed), retain_graph=True, allow_unused=True)
            for i, g in enumerate(grads):
                if g is not None:
                    if g.shape != diff_inputs[i].shape:
                        raise GradcheckError("Analytical gradient has incorrect size")
                    result[o_idx][i][:, m] = g._host().astype(np.float64).reshape(-1)
    return result


def _fail(msg: str, raise_exception: bool) -> bool:
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad=False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked=None,
) -> bool:
    """Compare the Jacobian from backward with central differences, for every input that requires grad."""
    inputs = _as_tuple(inputs)
    diff_inputs = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    if not diff_inputs:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of the them have "
            "requires_grad=True."
        )
    for x in diff_inputs:
        if x.dtype.name != "float64":
            import warnings

            warnings.warn(
                f"Input #{inputs.index(x)} requires gradient and is not a double precision floating point. "
                "This check will likely fail if all the inputs are not of double precision floating point. ",
                UserWarning,
                stacklevel=2,
            )
    numerical = _numerical_jacobians(func, inputs, diff_inputs, eps)
    analytical = _analytical_jacobians(func, inputs, diff_inputs)
    for o, (num_row, ana_row) in enumerate(zip(numerical, analytical)):
        for i, (n, a) in enumerate(zip(num_row, ana_row)):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                return _fail(
                    f"Jacobian mismatch for output {o} with respect to input {i},\n"
                    f"numerical:{Tensor._make(n)!r}\nanalytical:{Tensor._make(a)!r}\n",
                    raise_exception,
                )
    again = _analytical_jacobians(func, inputs, diff_inputs)
    for a_row, b_row in zip(analytical, again):
        for a, b in zip(a_row, b_row):
            if not np.allclose(a, b, rtol=0, atol=nondet_tol):
                return _fail(
                    "Backward is not reentrant, i.e., running backward with same input and grad_output multiple "
                    "times gives different values, although analytical gradient matches numerical gradient."
                    f"The tolerance for nondeterminism was {nondet_tol}.",
                    raise_exception,
                )
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked=False,
) -> bool:
    """``gradcheck`` of the function ``(inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs)``."""
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        outs = [o for o in _float_outputs(func, inputs) if o.requires_grad]
        grad_outputs = tuple(
            Tensor._make(rng.standard_normal(o.shape).astype(o._data.dtype), requires_grad=True) for o in outs
        )
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first_derivative(*args):
        ins, gouts = args[:n], args[n:]
        outs = [o for o in _float_outputs(func, ins) if o.requires_grad]
        diff = [x for x in ins if isinstance(x, Tensor) and x.requires_grad]
        grads = autograd_grad(outs, diff, gouts, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        first_derivative,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        nondet_tol=nondet_tol,
    )
