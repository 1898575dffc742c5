"""Every op sample, read from the one registry the ops write them in (``numbagrad._samples``): the arguments
(``Sample``) and call forms (``Call``) of each ``@declare``, the call forms of each elementwise row
(``scalar_math.ROWS``), and the ``nn.functional`` calls (``numbagrad.nn._samples``). The generated tests
(test_declarations, test_ops, test_torch_compare, test_nn_functional, test_first_vs_second_order, and the vmap and
forward-mode tests) take their cases from here, and run a sample on numbagrad or torch with the helpers below.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import numbagrad
from numbagrad._samples import Call, Sample, T
from numbagrad.nn._samples import CALLS as NN_CALLS
from numbagrad.ops._registry import OPS, Declaration
from numbagrad.scalar_math import ROWS


# --- the registry --------------------------------------------------------------------------------------------------
def declared_samples() -> list:
    """``pytest.param(decl, sample)`` for every ``Sample`` of every declared op, ids ``<op>-<k>``."""
    return [
        pytest.param(decl, sample, id=f"{decl.name}-{k}")
        for decl in OPS.values()
        for k, sample in enumerate(decl.samples)
    ]


def op_calls() -> list[Call]:
    """Every ``Call`` of the declared ops and of the elementwise rows."""
    return [call for owner in (*OPS.values(), *ROWS.values()) for call in owner.calls]


def nn_calls() -> list[Call]:
    """Every ``Call`` of ``nn.functional``."""
    return [call for calls in NN_CALLS.values() for call in calls]


def every_sample():
    """``(owner, sample)`` for every sample in the registry: each declared op's ``Sample``s and ``Call``s, each
    elementwise row's ``Call``s, each ``nn.functional`` function's ``Call``s."""
    for decl in OPS.values():
        for sample in (*decl.samples, *decl.calls):
            yield decl.name, sample
    for row in ROWS.values():
        for call in row.calls:
            yield f"row {row.name}", call
    for name, calls in NN_CALLS.items():
        for call in calls:
            yield f"nn.functional.{name}", call


def call_params(calls: list[Call]) -> list:
    return [pytest.param(call, id=call.id) for call in calls]


# --- running a Call ------------------------------------------------------------------------------------------------
def draw(spec: T, rng: np.random.Generator) -> np.ndarray:
    """The data of one tensor: ``spec.values`` as given (no draw), else drawn from ``rng``."""
    if spec.values is not None:
        return np.array(spec.values, dtype=spec.dtype)
    if spec.dtype == "bool":
        return rng.random(spec.shape) < 0.5
    if spec.dtype.startswith("int"):
        return rng.integers(0, spec.high, spec.shape).astype(spec.dtype)
    lo, hi = spec.domain
    return rng.uniform(lo, hi, spec.shape).astype(spec.dtype)


def call_inputs(call: Call, lib, seed: int = 0) -> list:
    """The call's tensors under ``lib`` (numbagrad or torch), the same values for both: float ones require grad
    unless their spec is a constant."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in call.specs:
        data = draw(spec, rng)
        t = lib.tensor(data)
        if spec.grad and data.dtype.kind == "f":
            t.requires_grad_(True)
        out.append(t)
    return out


def run(call: Call, lib, *tensors):
    """``call`` on ``tensors`` of ``lib``: its function receives ``lib`` (or ``lib.<namespace>``)."""
    return call.fn(functools.reduce(getattr, call.namespace.split("."), lib) if call.namespace else lib, *tensors)


def call_function(call: Call, inputs: list):
    """``(fn, leaves)``: ``call`` as a function of the inputs that require grad, returning its float outputs that
    require grad (what gradcheck and gradgradcheck differentiate)."""
    leaves = [t for t in inputs if t.requires_grad]

    def fn(*xs):
        it = iter(xs)
        out = run(call, numbagrad, *[next(it) if t.requires_grad else t for t in inputs])
        return tuple(t for t in tensors(out) if t.is_floating_point() and t.requires_grad)

    return fn, leaves


# --- running a Sample (the arguments of a declared op's function) ------------------------------------------------
def _specs(value) -> list:
    if isinstance(value, T):
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _specs(v)]
    return []


def arrays(sample: Sample) -> list:
    """The data of the sample's tensors, in order."""
    rng = np.random.default_rng(0)
    return [draw(spec, rng) for spec in _specs((sample.args, tuple(sample.kwargs.values())))]


def materialize(value, lib, data: list, requires_grad: bool):
    """Replace every ``T`` in a sample by a tensor of ``lib`` (numbagrad or torch) made from the next array."""
    if isinstance(value, T):
        array = data.pop(0)
        t = lib.tensor(array)
        if requires_grad and value.grad and array.dtype.kind == "f":
            t.requires_grad_(True)
        return t
    if isinstance(value, list):
        return [materialize(v, lib, data, requires_grad) for v in value]
    if isinstance(value, tuple):
        return tuple(materialize(v, lib, data, requires_grad) for v in value)
    return value


def call_declared(decl: Declaration, lib, sample: Sample, requires_grad: bool):
    """``(out, args, kwargs)``: the declared op on the sample's arguments, under numbagrad or torch."""
    data = arrays(sample)
    args = materialize(sample.args, lib, data, requires_grad)
    kwargs = {k: materialize(v, lib, data, requires_grad) for k, v in sample.kwargs.items()}
    name = decl.torch_name or decl.name
    if lib is numbagrad:
        return decl.function(*args, **kwargs), args, kwargs
    if not hasattr(lib, name):  # a method-only op in torch (Tensor.expand)
        return getattr(args[0], name)(*args[1:], **kwargs), args, kwargs
    return getattr(lib, name)(*args, **kwargs), args, kwargs


def leaves(value) -> list:
    """The tensors in ``value`` (nested lists and tuples) that are leaves requiring grad."""
    if hasattr(value, "requires_grad") and hasattr(value, "grad_fn"):
        return [value] if value.requires_grad and value.grad_fn is None else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in leaves(v)]
    return []


def swap(value, replace: dict):
    """``value`` with the objects whose id is a key of ``replace`` replaced (nested lists and tuples)."""
    if id(value) in replace:
        return replace[id(value)]
    if isinstance(value, list):
        return [swap(v, replace) for v in value]
    if isinstance(value, tuple):
        return tuple(swap(v, replace) for v in value)
    return value


def declared_function(decl: Declaration, sample: Sample):
    """``(fn, inputs)``: the declared op as a function of the sample's float leaves, returning its float outputs."""
    _, args, kwargs = call_declared(decl, numbagrad, sample, requires_grad=True)
    inputs = leaves((args, tuple(kwargs.values())))

    def fn(*xs):
        replace = dict(zip(map(id, inputs), xs))
        out = decl.function(*swap(args, replace), **{k: swap(v, replace) for k, v in kwargs.items()})
        return tuple(t for t in tensors(out) if t.is_floating_point())

    return fn, inputs


def tensors(out) -> list:
    """The tensors of an op's result (a tensor, or nested tuples and lists of them)."""
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o)]
    return [out] if hasattr(out, "grad_fn") else []
