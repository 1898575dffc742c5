"""The op declarations: every public op registers here once.

``numbagrad``'s function namespace and ``__all__``, the Tensor methods and operators, and the generated tests
(``tests/samples.py`` collects each declaration's ``samples`` and ``calls``) are all read from this registry, so an
op is written in one place: its Function class(es) and its public function, decorated with ``@declare``, with its
samples. Elementwise ops are declared by their row of the table (``scalar_math.ROWS``, samples included) and
registered by ``ops/elementwise.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass

from .._samples import Call, Sample, T  # noqa: F401 - the sample forms a declaration takes
from .out_arguments import takes_out, with_out


@dataclass(frozen=True)
class Declaration:
    """What the namespace, the Tensor and the tests need to know about one public op."""

    name: str
    function: Callable
    methods: tuple = ()
    aliases: tuple = ()
    samples: tuple = ()  # ``Sample``s: arguments of ``function``
    differentiable: bool = True
    torch_name: str | None = None  # the name to compare against in torch, when it differs (None: same)
    calls: tuple = ()  # ``Call``s: operators, methods, in-place forms (numbagrad._samples)


OPS: dict[str, Declaration] = {}

#: While a ``numbagrad.func.vmap`` runs: ``dispatch(name, op, fn, args, kwargs)``, which runs a declared op called
#: with batched tensors by its batching rule (or once per sample); None otherwise, so an op pays one check.
BATCHING: list = [None]


def batchable(name: str, fn: Callable) -> Callable:
    """``fn`` as a public op that vmap can batch: with no vmap running it is ``fn`` behind one check. The wrapper
    reads only its closure, so it is made in ``fn``'s module namespace, where ``fn``'s annotations resolve (the
    stub generator reads them from there). A function that makes that check itself (``fn.checks_batching``: an
    elementwise frontend, whose fast path runs without the wrapper's frame when no vmap runs and which hands every
    other call to its own batchable form) is returned as it is."""
    if getattr(fn, "checks_batching", False):
        return fn
    hook, this = BATCHING, []

    def op(*args, **kwargs):
        dispatch = hook[0]
        if dispatch is None:
            return fn(*args, **kwargs)
        return dispatch(name, this[0], fn, args, kwargs)

    namespace = getattr(fn, "__globals__", None)
    if namespace is not None:
        op = types.FunctionType(op.__code__, namespace, op.__name__, None, op.__closure__)
    this.append(functools.update_wrapper(op, fn))
    return op


METHODS: dict[str, Callable] = {}  # Tensor attribute name -> function taking the tensor first

#: Operators (and one-operand methods, ``_one_required_operand``) whose Tensor method stays unwrapped, so the eager
#: hot path (``(x * w + b).relu().sum()``) pays no vmap check: a batched tensor (a Tensor subclass) carries the
#: batchable forms itself (``BATCHED_OPERATORS``), and Python tries a subclass's reflected operator first, so
#: ``plain * batched`` reaches them too.
REFLECTED_OPERATORS = frozenset(
    f"__{r}{op}__"
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor")
    for r in ("", "r")
) | {"__lt__", "__gt__", "__le__", "__ge__", "__eq__", "__ne__", "__neg__", "__abs__", "__invert__", "__pos__"}
BATCHED_OPERATORS: dict[str, Callable] = {}  # method name -> its batchable form, for the batched tensor class


def _one_required_operand(fn: Callable) -> bool:
    """Whether ``fn`` takes one required positional argument (``relu(input)``, ``sum(input, dim=None)``): as a
    method that argument is the tensor itself, so a batched call is always a batched tensor's own method call and
    Tensor's method can stay unwrapped. Methods with a second required operand (``add(input, other)``) keep the
    wrapper: ``plain.add(batched)`` must reach the batching rules. Read from the code object, not
    ``inspect.signature``, which cost every ``import numbagrad`` several milliseconds over the declared methods."""
    target = inspect.unwrap(fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return False
    return code.co_argcount - len(target.__defaults__ or ()) == 1


_DECLARED: set[str] = set()  # every declared name and alias (a set: the check stays O(1) as the ops grow)


def register(decl: Declaration) -> Declaration:
    """Add a declaration (its function made batchable); a name declared twice is a bug."""
    unwrapped = decl.function
    batched = batchable(decl.name, decl.function)
    names = (decl.name, *decl.aliases)
    # the namespace function takes torch's ``out=`` where torch's does; the Tensor methods never do
    decl = dataclasses.replace(decl, function=with_out(decl.name, batched) if takes_out(names) else batched)
    for name in names:
        if name in _DECLARED:
            raise ValueError(f"op {name!r} is declared twice")
    _DECLARED.update(names)
    OPS[decl.name] = decl
    for method in decl.methods:
        if method in METHODS:
            raise ValueError(f"Tensor method {method!r} is declared twice")
        if method in REFLECTED_OPERATORS or _one_required_operand(unwrapped):
            METHODS[method], BATCHED_OPERATORS[method] = unwrapped, batched
        else:
            METHODS[method] = batched
    return decl


def declare(
    fn: Callable | None = None,
    *,
    methods: bool | tuple = False,
    aliases: tuple = (),
    samples: tuple = (),
    calls: tuple = (),
    differentiable: bool = True,
    name: str | None = None,
    torch_name: str | None = None,
):
    """Register ``fn`` as the public op ``numbagrad.<name>``.

    ``methods=True`` also makes it the Tensor method of the same name (and of each alias); a tuple names the
    methods instead (``("__matmul__",)``). The tensor is the function's first argument. ``samples`` (arguments of
    the function) and ``calls`` (expressions on tensors: its operators, methods and in-place forms) feed the
    generated gradcheck and torch-comparison tests (``tests/samples.py``).
    """

    def register_fn(f: Callable) -> Callable:
        op_name = name or f.__name__
        f = _with_numpy_aliases(f)
        if methods is True:
            method_names = (op_name, *aliases)
        else:
            method_names = tuple(methods or ())
        decl = Declaration(
            op_name, f, method_names, tuple(aliases), tuple(samples), differentiable, torch_name, tuple(calls)
        )
        public = register(decl).function
        # the module keeps the form without ``out=``: the library's own calls skip that wrapper's frame
        return getattr(public, "without_out", public)

    return register_fn(fn) if fn is not None else register_fn


_NUMPY_ALIASES = {"axis": "dim", "keepdims": "keepdim"}


def _with_numpy_aliases(f: Callable) -> Callable:
    """torch takes numpy's ``axis=`` for ``dim=`` and ``keepdims=`` for ``keepdim=`` in every op that has them;
    an op with a ``dim`` or ``keepdim`` parameter is wrapped to rename them (others are returned as they are)."""
    code = f.__code__
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if not any(target in names for target in _NUMPY_ALIASES.values()):
        return f

    @functools.wraps(f)
    def renamed(*args, **kwargs):
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):  # (the common ``keepdim=`` call: two lookups)
            for alias, target in _NUMPY_ALIASES.items():
                if alias in kwargs:
                    if target in kwargs:
                        raise TypeError(f"{f.__name__}() got multiple values for argument '{target}'")
                    kwargs[target] = kwargs.pop(alias)
        return f(*args, **kwargs)

    return renamed


def bind_methods(tensor_cls: type) -> None:
    """Make every declared method a Tensor attribute (a function, so ``t.op(...)`` calls ``op(t, ...)``)."""
    for method, fn in METHODS.items():
        setattr(tensor_cls, method, fn)


def public_names() -> list[str]:
    """Every declared op's name and aliases: what ``from numbagrad.ops import *`` exports."""
    names = []
    for decl in OPS.values():
        names.append(decl.name)
        names.extend(decl.aliases)
    return sorted(n for n in names if not n.startswith("_"))
