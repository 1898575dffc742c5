"""The vocabulary of op samples: the example calls the generated tests run, on numbagrad and on torch alike.

An op's samples are written next to the op, in one of three places: its ``@declare`` (``samples=`` and
``calls=``, ops/_registry.py), its row of the elementwise table (``Row.calls``, scalar_math.py), or, for
``nn.functional``, the table in nn/_samples.py (kept apart from nn/functional.py so the functions stay readable).
``tests/samples.py`` collects every sample from those places, and every generated test reads it there.

Two forms: a ``Sample`` gives the arguments of the op's public function; a ``Call`` is any expression on tensors
written once for both libraries (an operator, a reflected operator, an in-place form, an index assignment, a
method), with the graph node torch names its result with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class T:
    """A tensor in a sample: drawn at random with this shape (float64 unless ``dtype`` says otherwise) from
    ``domain``, or integers in ``[0, high)``; or exactly ``values`` (nothing drawn). A float tensor requires grad
    unless ``grad=False`` (a constant: a target, a running statistic)."""

    shape: tuple
    dtype: str = "float64"
    domain: tuple = (-2.0, 2.0)
    high: int = 3
    grad: bool = True
    values: object = None

    def __init__(
        self,
        *shape: int,
        dtype: str = "float64",
        domain: tuple = (-2.0, 2.0),
        high: int = 3,
        grad: bool = True,
        values: object = None,
    ) -> None:
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "grad", grad)
        object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class Sample:
    """Example arguments of an op's public function (``T`` marks tensors)."""

    args: tuple
    kwargs: dict

    def __init__(self, *args, **kwargs) -> None:
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "kwargs", kwargs)


@dataclass(frozen=True)
class Call:
    """A sample written as an expression: ``fn(lib, *tensors)``, where ``lib`` is numbagrad or torch (or its
    ``namespace``, ``"nn.functional"``) and the tensors are drawn from ``specs``.

    ``id`` names the sample's tests; ``node`` is the graph node torch names the result with (None: whatever
    torch's is); ``rtol`` the tolerance of the comparison with torch (float64); ``true_gradient=False`` marks a
    call whose torch gradient is deliberately not the derivative (``padding_idx``), so no finite differences.
    """

    id: str
    fn: Callable
    specs: tuple
    node: str | None = None
    rtol: float = 1e-10
    true_gradient: bool = True
    namespace: str = ""

    def __init__(
        self,
        id: str,  # noqa: A002 - the sample's name, as pytest's ids
        fn: Callable,
        *specs: T,
        node: str | None = None,
        rtol: float = 1e-10,
        true_gradient: bool = True,
        namespace: str = "",
    ) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "specs", specs)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "rtol", rtol)
        object.__setattr__(self, "true_gradient", true_gradient)
        object.__setattr__(self, "namespace", namespace)


def assigned(target, key, value):
    """``target`` after ``target[key] = value``: an index assignment as an expression, for a ``Call``."""
    target[key] = value
    return target
