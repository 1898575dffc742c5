"""Finite-difference checks of gradients (torch's ``gradcheck`` / ``gradgradcheck`` and their defaults)."""

from __future__ import annotations

import importlib
import warnings

import numpy as np

from .._tensor import Tensor
from . import forward_ad
from .engine import grad as autograd_grad
from .function import Function
from .grad_mode import enable_grad

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck:

If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `fast_mode=False` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_fast_mode=False`
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_fast_mode=False`
""".strip()


class GradcheckError(RuntimeError):
    """Raised when an analytical gradient disagrees with the numerical one."""


def _as_tuple(x) -> tuple:
    return (x,) if not isinstance(x, (tuple, list)) else tuple(x)


def _float_outputs(func, inputs) -> list:
    return [o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and (o.is_floating_point() or o.is_complex())]


# Complex tensors are checked as torch's gradcheck checks them: as real tensors of twice the elements (the real
# and imaginary part of each, ``view_as_real``'s order). Perturbing an input's real and imaginary parts gives the
# numerical Jacobian; seeding an output's gradient with 1 and with 1j gives the analytical one, whose complex
# gradient (torch's convention) is d/d(real part) + 1j * d/d(imaginary part) of that real output.
def _coordinates(t: Tensor) -> int:
    """How many real numbers ``t`` holds (two per complex element)."""
    return t.numel() * (2 if t._data.dtype.kind == "c" else 1)


def _real_flat(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 real numbers, a complex element's real part before its imaginary part."""
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag], -1).astype(np.float64).reshape(-1)
    return a.astype(np.float64).reshape(-1)


def _steps(x: Tensor, eps: float) -> tuple:
    """The perturbations of one element of ``x``: of its real part, and of its imaginary part if complex."""
    return (eps, eps * 1j) if x._data.dtype.kind == "c" else (eps,)


def _check_same_shape(before: list, after: list, eps: float, idx: tuple) -> None:
    """torch's check that perturbing an input element leaves the outputs' shapes and dtypes as they were."""
    for o1, o2 in zip(before, after):
        if o1.shape != o2.shape:
            raise AssertionError(
                f"Expected `func` to return outputs with the same shape when inputs are perturbed on index {idx} by "
                f"{eps}, but got: shapes {o1.shape} and {o2.shape}."
            )
        if o1.dtype != o2.dtype:
            raise AssertionError(
                f"Expected `func` to return outputs with the same dtype when inputs are perturbed on index {idx} by "
                f"{eps}, but got: dtypes {o1.dtype} and {o2.dtype}."
            )


def _perturbed(func, inputs, outputs: list, eps: float, x: Tensor, k: int) -> list:
    """The outputs (float64, flat) with element ``k`` of ``x`` moved by ``eps`` (shapes checked first)."""
    after = _float_outputs(func, inputs)
    _check_same_shape(outputs, after, eps, tuple(int(i) for i in np.unravel_index(k, x.shape)))
    return [_real_flat(o._host()).copy() for o in after]


def _numerical_jacobians(func, inputs, diff_inputs, eps: float) -> list:
    """J[o][i] of shape (numel(input i), numel(output o)), by central differences on the storage."""
    with enable_grad():  # gradgradcheck differentiates inside func
        outputs = _float_outputs(func, inputs)
        result = [[np.zeros((_coordinates(x), _coordinates(o))) for x in diff_inputs] for o in outputs]
        for i, x in enumerate(diff_inputs):
            flat = x._data.reshape(-1) if x._data.flags.c_contiguous else None
            if flat is None:
                raise ValueError("gradcheck needs contiguous inputs")
            steps = _steps(x, eps)
            for k in range(flat.size):
                orig = flat[k].item()
                for part, step in enumerate(steps):
                    try:
                        flat[k] = orig + step
                        plus = _perturbed(func, inputs, outputs, eps, x, k)
                        flat[k] = orig - step
                        minus = _perturbed(func, inputs, outputs, eps, x, k)
                    finally:
                        flat[k] = orig
                    for o in range(len(outputs)):
                        result[o][i][k * len(steps) + part] = (plus[o] - minus[o]) / (2 * eps)
    return result


def _analytical_jacobians(func, inputs, diff_inputs, check_grad_dtypes: bool = False) -> list:
    """J[o][i] from one backward per output element; ``check_grad_dtypes``: each gradient must have its input's
    dtype (torch's "Gradient has dtype mismatch")."""
    outputs = _float_outputs(func, inputs)
    result = [[np.zeros((_coordinates(x), _coordinates(o))) for x in diff_inputs] for o in outputs]
    for o_idx, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        seeds = (1, 1j) if out._data.dtype.kind == "c" else (1,)
        for m in range(out.numel()):
            for part, value in enumerate(seeds):
                seed = np.zeros(out.shape, out._data.dtype)
                seed.reshape(-1)[m] = value
                grads = autograd_grad(out, diff_inputs, Tensor._make(seed), retain_graph=True, allow_unused=True)
                for i, g in enumerate(grads):
                    if g is not None:
                        if g.shape != diff_inputs[i].shape:
                            raise GradcheckError("Analytical gradient has incorrect size")
                        if check_grad_dtypes and g.dtype != diff_inputs[i].dtype:
                            raise GradcheckError("Gradient has dtype mismatch")
                        result[o_idx][i][:, m * len(seeds) + part] = _real_flat(g._host())
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
    check_batched_forward_grad: bool = False,
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
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    for x in diff_inputs:
        if x.dtype.name not in ("float64", "complex128"):
            warnings.warn(
                f"Input #{inputs.index(x)} requires gradient and is not a double precision floating point. "
                "This check will likely fail if all the inputs are not of double precision floating point. ",
                UserWarning,
                stacklevel=2,
            )
    if fast_mode and check_backward_ad:
        if not _fast_check(func, inputs, diff_inputs, eps, atol, rtol, raise_exception):
            return False
    slow_backward = check_backward_ad and not fast_mode
    # (fast mode's backward check needs no whole numerical Jacobian: only the forward check or slow mode do)
    numerical = _numerical_jacobians(func, inputs, diff_inputs, eps) if slow_backward or check_forward_ad else None
    if slow_backward:
        analytical = _analytical_jacobians(func, inputs, diff_inputs, check_grad_dtypes)
        with enable_grad():
            complex_outs = {k for k, o in enumerate(_float_outputs(func, inputs)) if o.is_complex()}
        if not _compare(numerical, analytical, rtol, atol, raise_exception, "", complex_outs):
            return False
        again = _analytical_jacobians(func, inputs, diff_inputs)
        for a_row, b_row in zip(analytical, again):
            for a, b in zip(a_row, b_row):
                if not np.allclose(a, b, rtol=0, atol=nondet_tol):
                    return _fail(
                        "Backward is not reentrant, i.e., running backward with same input and grad_output "
                        "multiple times gives different values, although analytical gradient matches numerical "
                        f"gradient.The tolerance for nondeterminism was {nondet_tol}.",
                        raise_exception,
                    )
    if check_forward_ad:
        forward = _forward_jacobians(func, inputs, diff_inputs)
        complex_ins = {k for k, x in enumerate(diff_inputs) if x.is_complex()}
        if not _compare(numerical, forward, rtol, atol, raise_exception, "computed with forward mode ", complex_ins):
            return False
    if check_batched_forward_grad and not _batched_forward_grads_ok(func, inputs, diff_inputs, raise_exception):
        return False
    if not check_backward_ad:
        return True
    _check_backward_mul_by_grad_output(func, inputs, diff_inputs, masked)
    if check_undefined_grad:
        _undefined_grads_ok(func, inputs, diff_inputs)
    if check_batched_grad:
        return _batched_grads_ok(func, inputs, diff_inputs, raise_exception)
    return True


#: ``numbagrad.func._vmap.batched_vjps``, bound when that module loads (``check_batched_grad`` loads it).
BATCHED_VJPS: list = [None]

_BATCHED_GRAD_FAILED = "gradcheck or gradgradcheck failed while testing batched gradient computation."


def _batched_grads_ok(func, inputs, diff_inputs, raise_exception: bool) -> bool:
    """torch's ``_test_batched_grad``: for each output, the vector-Jacobian products of two random grad_outputs
    computed at once under vmap (the function run on inputs batched over the grad_outputs, so every op's batching
    rule and its backward are exercised) equal the products computed one grad_output at a time."""
    if BATCHED_VJPS[0] is None:
        importlib.import_module("numbagrad.func")  # lazy: vmap sits above autograd, and binds BATCHED_VJPS
    with enable_grad():
        outputs = [(k, o) for k, o in enumerate(_float_outputs(func, inputs)) if o.requires_grad]
    rng = np.random.default_rng(0)
    for o_idx, (k, out) in enumerate(outputs):
        grad_outputs = Tensor._make(rng.standard_normal((2, *out.shape)).astype(out._data.dtype))
        expected = []
        for g in grad_outputs.unbind(0):
            grads = autograd_grad([out], diff_inputs, [g], retain_graph=True, allow_unused=True)
            expected.append([np.zeros(x.shape) if r is None else r._host() for r, x in zip(grads, diff_inputs)])
        try:
            result = BATCHED_VJPS[0](lambda *ins, k=k: _float_outputs(func, ins)[k], inputs, grad_outputs)
        except RuntimeError as ex:
            raise GradcheckError(f"While computing batched gradients, got: {ex}\n\n{_BATCHED_GRAD_FAILED}") from ex
        for i_idx, got in enumerate(result):
            want = np.stack([row[i_idx] for row in expected])
            if not np.allclose(got._host(), want):
                return _fail(
                    f"For output {o_idx} and input {i_idx}:\n\n{_BATCHED_GRAD_FAILED}\n\nGot:\n{got!r}\n\n"
                    f"Expected:\n{Tensor._make(want)!r}",
                    raise_exception,
                )
    return True


#: ``numbagrad.func._batched_jvps``, bound when ``numbagrad.func`` loads (``check_batched_forward_grad`` loads it).
BATCHED_JVPS: list = [None]

_BATCHED_FORWARD_GRAD_FAILED = (  # (torch's text, its blank first line and its typo included)
    "\ngradcheck failed while testing batched gradient computation with forward-mode AD.\nThis test is enabled "
    "automatically when both `check_batched_grad=True`\nand `check_forward_ad=True`, but can be disabled in the "
    "following ways\ndependong on how the test was invoked (via a test that calls gradcheck\ndirectly or via an "
    "autogenerated test).\n\nIf you are adding a new operator, please file an issue and then use one of the\n"
    "workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.\nIf the test\n- manually "
    "invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck\n  with `check_batched_forward_grad=False` as "
    "a keyword argument.\n- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test\n"
    "  to have `check_batched_forward_grad=False`\n"
)


def _batched_forward_grads_ok(func, inputs, diff_inputs, raise_exception: bool) -> bool:
    """torch's ``_test_batched_grad_forward_ad``: for each input, the forward-mode tangents of the outputs along
    two random tangents computed at once under vmap (so the ops' batching rules carry the tangents, and a custom
    Function's ``jvp`` runs over the batch) equal those computed one tangent at a time."""
    if BATCHED_JVPS[0] is None:
        importlib.import_module("numbagrad.func")  # lazy: vmap and jvp sit above autograd, and bind BATCHED_JVPS
    rng = np.random.default_rng(0)
    for x in diff_inputs:
        index = next(k for k, a in enumerate(inputs) if a is x)
        tangents = Tensor._make(rng.standard_normal((2, *x.shape)).astype(x._data.dtype))
        expected = BATCHED_JVPS[0](func, inputs, index, tangents, False)
        try:
            result = BATCHED_JVPS[0](func, inputs, index, tangents, True)
        except RuntimeError as ex:
            raise GradcheckError(
                f"While computing batched gradients, got: {ex}\n\n{_BATCHED_FORWARD_GRAD_FAILED}"
            ) from ex
        for k, (got, want) in enumerate(zip(result, expected)):
            if not np.allclose(got._host(), want._host()):
                return _fail(
                    f"For output {k} and input {k}:\n\n{_BATCHED_FORWARD_GRAD_FAILED}\n\nGot:\n{got!r}\n\n"
                    f"Expected:\n{want!r}",
                    raise_exception,
                )
    return True


def _compare(
    numerical: list, analytical: list, rtol: float, atol: float, raise_exception: bool, mode: str, split=()
) -> bool:
    """Compare the Jacobians pair by pair. ``split``: the complex outputs (backward mode) or complex inputs (forward
    mode), whose imaginary parts torch checks first and then their real parts, naming the part when they fail;
    here those are the odd and then the even columns (outputs) or rows (inputs) of the real Jacobians."""
    element = "inputs" if mode else "outputs"
    passes = [("imaginary", slice(1, None, 2)), ("real", slice(0, None, 2))] if split else [("", slice(None))]
    for part, cut in passes:
        for o, (num_row, ana_row) in enumerate(zip(numerical, analytical)):
            for i, (n, a) in enumerate(zip(num_row, ana_row)):
                prefix = ""
                if (i if mode else o) in split:
                    n, a = (n[cut], a[cut]) if mode else (n[:, cut], a[:, cut])
                    prefix = f"While considering the {part} part of complex {element} only, "
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    return _fail(
                        f"{prefix}Jacobian {mode}mismatch for output {o} with respect to input {i},\n"
                        f"numerical:{Tensor._make(n)!r}\nanalytical:{Tensor._make(a)!r}\n",
                        raise_exception,
                    )
    return True


def _check_backward_mul_by_grad_output(func, inputs, diff_inputs, masked) -> None:
    """With zero output gradients every input gradient must be zero (``masked``: close to zero), and of its
    input's dtype and size; torch raises here whatever ``raise_exception``."""
    with enable_grad():
        outputs = [o for o in _float_outputs(func, inputs) if o.requires_grad]
        zeros = [Tensor._make(np.zeros(o.shape, o._data.dtype)) for o in outputs]
        grads = autograd_grad(outputs, diff_inputs, zeros, allow_unused=True)
    for g, x in zip(grads, diff_inputs):
        if g is None:
            continue
        values = g._host()
        if (not np.allclose(values, 0)) if masked else np.any(values != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != x.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.shape != x.shape:
            raise GradcheckError("grad is incorrect size")


def _forward_jacobians(func, inputs, diff_inputs) -> list:
    """J[o][i] column by column in forward mode, as torch's check does: each input element in turn carries a unit
    tangent (every other differentiable input a zero one) and the outputs' tangents are that column. A complex
    input's element is perturbed in its real part (tangent 1) and then its imaginary part (tangent 1j), torch's
    check of the real and the imaginary inputs; complex tangents are read as (real, imaginary) pairs, the rows
    and columns of the numerical Jacobian. An op or a custom Function without forward AD raises its
    NotImplementedError here, whatever ``raise_exception``."""
    with forward_ad.dual_level():
        outputs = _float_outputs(func, inputs)
        result = [[np.zeros((_coordinates(x), _coordinates(o))) for x in diff_inputs] for o in outputs]
        for i, x in enumerate(diff_inputs):
            units = _steps(x, 1.0)
            for k in range(x.numel()):
                for part, unit in enumerate(units):
                    duals = []
                    for a in inputs:
                        if any(a is d for d in diff_inputs):
                            direction = np.zeros(a.shape, a._data.dtype)
                            if a is x:
                                direction.reshape(-1)[k] = unit
                            duals.append(forward_ad.make_dual(a, Tensor._make(a._backend.from_host(direction))))
                        else:
                            duals.append(a)
                    for o_idx, out in enumerate(_float_outputs(func, duals)):
                        tangent = forward_ad.unpack_dual(out).tangent
                        if tangent is not None:
                            result[o_idx][i][k * len(units) + part, :] = _real_flat(tangent._host())
    return result


def _fast_check(func, inputs, diff_inputs, eps: float, atol: float, rtol: float, raise_exception: bool) -> bool:
    """torch's fast mode. A function with complex outputs is checked twice, as torch does: on the imaginary parts
    of its complex outputs, then on their real parts (each a real function of the same inputs)."""
    with enable_grad():
        complex_outs = {k for k, o in enumerate(_float_outputs(func, inputs)) if o.is_complex()}
    if not complex_outs:
        return _fast_check_real(func, inputs, diff_inputs, eps, atol, rtol, raise_exception, set(), "")
    for part in ("imaginary", "real"):

        def part_of(*ins, attr=part[:4]):
            return tuple(getattr(o, attr) if o.is_complex() else o for o in _float_outputs(func, ins))

        if not _fast_check_real(part_of, inputs, diff_inputs, eps, atol, rtol, raise_exception, complex_outs, part):
            return False
    return True


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    """A random vector of ``n`` non-negative values and norm 1 (torch's fast-mode ``u`` and ``v``)."""
    values = rng.random(n)
    return values / np.linalg.norm(values)


def _fast_check_real(
    func, inputs, diff_inputs, eps: float, atol: float, rtol: float, raise_exception: bool, complex_outs, part
) -> bool:
    """Per (input, output) pair of a function with real outputs, ``v^T J u`` for random ``u`` and ``v``, from a
    directional central difference and from one backward, instead of whole Jacobians. A complex input gets two
    real vectors ``(ur, ui)``: the difference along ``ur`` plus 1j times the one along ``1j * ui`` is set against
    ``Re(vJ) . ur + 1j * Im(vJ) . ui`` (the conjugate Wirtinger derivative), so the real and imaginary parts of the
    gradient are each checked. atol is scaled by ``sum(u) * sum(v)``, as torch scales it."""
    rng = np.random.default_rng(0)
    with enable_grad():
        outputs = _float_outputs(func, inputs)
    us = [[_unit(rng, x.numel()) for _ in _steps(x, 1.0)] for x in diff_inputs]
    vs = [_unit(rng, o.numel()) for o in outputs]
    for i, x in enumerate(diff_inputs):
        flat = x._data.reshape(-1)
        orig = flat.copy()
        numerical = [0j] * len(outputs)
        for direction, step in zip(us[i], _steps(x, eps)):
            try:
                flat[:] = orig + step * direction
                plus = [o._host().astype(np.float64).reshape(-1) for o in _float_outputs(func, inputs)]
                flat[:] = orig - step * direction
                minus = [o._host().astype(np.float64).reshape(-1) for o in _float_outputs(func, inputs)]
            finally:
                flat[:] = orig
            for o in range(len(outputs)):
                numerical[o] += (step / eps) * float(vs[o] @ ((plus[o] - minus[o]) / (2 * eps)))
        for o, out in enumerate(outputs):
            analytical = 0j
            if out.requires_grad:
                seed = Tensor._make(vs[o].reshape(out.shape).astype(out._data.dtype))
                (g,) = autograd_grad(out, x, seed, retain_graph=True, allow_unused=True)
                if g is not None:
                    vj = g._host().reshape(-1)
                    analytical = float(vj.real @ us[i][0])
                    if len(us[i]) == 2:
                        analytical += 1j * float(vj.imag @ us[i][1])
            if len(us[i]) == 1:
                numerical[o], analytical = numerical[o].real, analytical.real
            tol = atol * sum(float(u.sum()) for u in us[i]) * float(vs[o].sum())
            if not np.isclose(analytical, numerical[o], rtol=rtol, atol=tol):
                prefix = f"While considering the {part} part of complex outputs only, " if o in complex_outs else ""
                slow_n = _numerical_jacobians(func, inputs, [x], eps)[o][0]
                slow_a = _analytical_jacobians(func, inputs, [x])[o][0]
                message = (
                    f"{prefix}Jacobian mismatch for output {o} with respect to input {i},\n"
                    f"numerical:{Tensor._make(np.asarray(numerical[o]))!r}\n"
                    f"analytical:{Tensor._make(np.asarray(analytical))!r}\n\n"
                    "The above quantities relating the numerical and analytical jacobians are computed \n"
                    "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more background \n"
                    "about fast mode. Below, we recompute numerical and analytical jacobians in slow mode:\n\n"
                    f"Numerical:\n {Tensor._make(slow_n)!r}\n"
                    f"Analytical:\n{Tensor._make(slow_a)!r}\n\n"
                    f"The max per-element difference (slow mode) is: {np.abs(slow_n - slow_a).max()}.\n"
                )
                if np.allclose(slow_a, slow_n, rtol=rtol, atol=atol):
                    message += FAST_FAIL_SLOW_OK_MSG
                return _fail(message, raise_exception)
    return True


class _UndefinedGrad(Function):
    """Identity whose backward hands on an undefined (None) gradient: what torch's ``UndefinedGrad`` does to
    check that backward functions cope with missing output gradients."""

    node_name = "UndefinedGradBackward"

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return None


def _undefined_grads_ok(func, inputs, diff_inputs) -> bool:
    """torch's ``check_undefined_grad``: with every output gradient undefined (then each in turn, when there are
    several), backward runs and gives input gradients that are None or zero."""
    with enable_grad():
        n = len([o for o in _float_outputs(func, inputs) if o.requires_grad])
        cases = [None] + (list(range(n)) if n > 1 else [])
        for undefined in cases:
            outputs = [o for o in _float_outputs(func, inputs) if o.requires_grad]
            checked = [
                _UndefinedGrad.apply(o) if undefined is None or k == undefined else o for k, o in enumerate(outputs)
            ]
            zeros = [Tensor._make(np.zeros(o.shape, o._data.dtype)) for o in checked]
            try:
                grads = autograd_grad(checked, diff_inputs, zeros, allow_unused=True)
            except RuntimeError as e:
                _warn_bc_breaking()
                raise GradcheckError(
                    'Expected backward function to handle undefined output grads. Please look at "Notes about '
                    'undefined output gradients" in "tools/autograd/derivatives.yaml"'
                ) from e
            for g in grads:
                if g is not None and np.any(g._host() != 0):
                    _warn_bc_breaking()
                    raise GradcheckError(
                        "Expected all input grads to be undefined or zero when all output grads are undefined or "
                        'zero. Please look at "Notes about undefined output gradients" in '
                        '"tools/autograd/derivatives.yaml"'
                    )
    return True


def _warn_bc_breaking() -> None:
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled by default, but it "
        "may break existing callers of this function. If this is true for you, you can call this function with "
        '"check_undefined_grad=False" to disable the feature',
        UserWarning,
        stacklevel=3,
    )


def _random(rng: np.random.Generator, o: Tensor) -> np.ndarray:
    """Standard normal values of ``o``'s shape and dtype (a complex one's real and imaginary parts each)."""
    values = rng.standard_normal(o.shape)
    if o._data.dtype.kind == "c":
        values = values + 1j * rng.standard_normal(o.shape)
    return values.astype(o._data.dtype)


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
        grad_outputs = tuple(Tensor._make(_random(rng, o), requires_grad=True) for o in outs)
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
        check_undefined_grad=check_undefined_grad,
        check_grad_dtypes=check_grad_dtypes,
        check_batched_grad=check_batched_grad,
        check_forward_ad=check_fwd_over_rev,
        check_backward_ad=check_rev_over_rev,
        fast_mode=fast_mode,
        masked=masked,
    )
