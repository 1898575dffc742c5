"""Every public function, class, method and Tensor method has a docstring.

The public surface is enumerated, not listed by hand: each module's ``__all__`` (or, without one, its non-underscore
names whose objects numbagrad defines), the public methods and properties of each public class, and so every
non-underscore Tensor attribute (most are bound from op declarations). A docstring counts when it is non-empty and
written for numbagrad: not one a class inherits from outside numbagrad (``object``'s, ``Exception``'s,
``functools.partial``'s), nor one Python generates (a dataclass's or NamedTuple's signature line). A method without
its own docstring that overrides a documented method of a base class counts as documented, as ``help()`` and
``inspect.getdoc`` show the base's text for it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import types
from dataclasses import dataclass

import pytest

# The modules whose public names are checked. ``numbagrad.distributed`` and ``numbagrad.nn.parallel`` document
# themselves on their own branch. A module that does not import here (an optional extra) is skipped, not failed.
MODULES = (
    "numbagrad",
    "numbagrad.autograd",
    "numbagrad.autograd.functional",
    "numbagrad.nn",
    "numbagrad.nn.functional",
    "numbagrad.nn.init",
    "numbagrad.nn.utils",
    "numbagrad.optim",
    "numbagrad.optim.lr_scheduler",
    "numbagrad.optim.swa_utils",
    "numbagrad.amp",
    "numbagrad.func",
    "numbagrad.sparse",
    "numbagrad.testing",
    "numbagrad.fft",
    "numbagrad.nn.utils.parametrize",
    "numbagrad.nn.utils.parametrizations",
    "numbagrad.nn.utils.prune",
    "numbagrad.utils.data",
    "numbagrad.compile",
    "numbagrad.compiler",
    "numbagrad.cache",
    "numbagrad.cuda",
    "numbagrad.serialization",
    "numbagrad.extend",
    "numbagrad.linalg",
    "numbagrad.special",
)


def _ours(obj) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] == "numbagrad"


def public_names(module: types.ModuleType) -> list[str]:
    """``__all__``, or the non-underscore names whose objects numbagrad defines (imports like ``np`` are not API)."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return sorted(n for n in vars(module) if not n.startswith("_") and _ours(getattr(module, n)))


def _generated(doc: str, obj) -> bool:
    """A docstring Python wrote: inherited from a class outside numbagrad, or a dataclass/NamedTuple signature."""
    bases = obj.__mro__[1:] if inspect.isclass(obj) else type(obj).__mro__
    if any(not _ours(base) and doc == base.__doc__ for base in bases):
        return True
    name = re.escape(getattr(obj, "__name__", ""))
    return inspect.isclass(obj) and re.fullmatch(rf"{name}\(.*\)", doc.strip(), re.S) is not None


def own_doc(obj) -> str | None:
    """The docstring ``obj`` itself carries (a class's own, not a base's), unless Python generated it."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip() or _generated(doc, obj):
        return None
    return doc


def member_doc(cls: type, name: str) -> str | None:
    """The docstring of ``cls.<name>``: its own, else that of the method it overrides in a base class."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            raw = klass.__dict__[name]
            if isinstance(raw, (staticmethod, classmethod)):
                raw = raw.__func__
            doc = raw.__doc__ if isinstance(raw, (property, functools.cached_property)) else own_doc(raw)
            if isinstance(doc, str) and doc.strip():
                return doc
    return None


def public_members(cls: type) -> list[str]:
    """The non-underscore methods, properties and nested classes of ``cls`` that numbagrad defines (on ``cls`` or a
    base of its own): what ``help(cls)`` lists, less data attributes and what ``object`` or the stdlib provide."""
    names = []
    for name in dir(cls):
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if name.startswith("_") or owner is None or not _ours(owner):
            continue
        raw = owner.__dict__[name]
        if isinstance(raw, (staticmethod, classmethod, property, functools.cached_property)) or callable(raw):
            names.append(name)
    return names


def _is_api(obj) -> bool:
    """A function or class (or another callable object of ours); modules, dtypes and constants are not."""
    if isinstance(obj, types.ModuleType):
        return False
    return inspect.isclass(obj) or inspect.isroutine(obj) or (callable(obj) and _ours(type(obj)))


@functools.cache
def surface() -> dict[str, list[tuple[str, bool]] | None]:
    """For each module of ``MODULES``: ``(label, documented)`` for each public callable it exports and each public
    member of its classes, or ``None`` when the module does not import. A member is listed once, by the public
    name of the class that defines it, under the first module exporting that class (or a subclass of it)."""
    result: dict[str, list[tuple[str, bool]] | None] = {}
    classes: list[tuple[str, type]] = []  # (module name, public class), in order of discovery
    public_label: dict[int, tuple[str, str]] = {}  # id(class) -> (module name, label), the first export
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            result[module_name] = None
            continue
        entries = result[module_name] = []
        for name in public_names(module):
            obj = getattr(module, name)
            if not _is_api(obj):
                continue
            label = f"{module_name}.{name}"
            entries.append((label, own_doc(obj) is not None))
            if inspect.isclass(obj) and _ours(obj):
                classes.append((module_name, obj))
                public_label.setdefault(id(obj), (module_name, label))
    members_seen: set[tuple[int, str]] = set()
    for module_name, cls in classes:
        for member in public_members(cls):
            owner = next(k for k in cls.__mro__ if member in k.__dict__)
            if (id(owner), member) not in members_seen:
                members_seen.add((id(owner), member))
                home, owner_label = public_label.get(
                    id(owner), (module_name, f"{owner.__module__}.{owner.__qualname__}")
                )
                result[home].append((f"{owner_label}.{member}", member_doc(cls, member) is not None))
    return result


@pytest.mark.parametrize("module_name", MODULES)
def test_every_public_callable_has_a_docstring(module_name):
    entries = surface()[module_name]
    if entries is None:
        pytest.skip(f"{module_name} does not import here")
    missing = [label for label, documented in entries if not documented]
    assert not missing, f"{len(missing)} of {len(entries)} public callables have no docstring:\n  " + "\n  ".join(
        missing
    )


# --- the enumeration itself ---------------------------------------------------------------------------------------
def test_the_enumeration_reaches_functions_classes_methods_properties_and_bound_ops():
    import numbagrad

    labels = {label for entries in surface().values() if entries for label, _ in entries}
    expected = {
        "numbagrad.zeros",  # a declared op
        "numbagrad.sin",  # a function generated from a table row
        "numbagrad.Tensor",
        "numbagrad.Tensor.add_",  # an in-place method generated from a row
        "numbagrad.Tensor.sum",  # a method bound from a declaration
        "numbagrad.Tensor.shape",  # a property
        "numbagrad.nn.Linear.forward",
        "numbagrad.nn.functional.relu",  # nn.functional has no __all__: its own public names
        "numbagrad.optim.Optimizer.zero_grad",
        "numbagrad.utils.data.DataLoader",
    }
    assert expected <= labels
    assert "numbagrad.float32" not in labels and "numbagrad.pi" not in labels  # values, not callables
    assert not any(label.endswith(".__add__") for label in labels)  # operators are not checked
    assert "numbagrad.nn.Parameter.add_" not in labels  # inherited from Tensor: checked once, there
    tensor_api = [
        n
        for n, v in vars(numbagrad.Tensor).items()
        if not n.startswith("_") and (callable(v) or isinstance(v, property))
    ]
    assert len(tensor_api) > 200 and {f"numbagrad.Tensor.{n}" for n in tensor_api} <= labels


def _fake(cls: type) -> type:
    cls.__module__ = "numbagrad._fake"  # as if numbagrad defined it
    return cls


def test_a_class_without_its_own_docstring_is_undocumented():
    class Base:
        """A base."""

    bare = _fake(type("Bare", (Base,), {}))
    assert own_doc(_fake(Base)) == "A base."
    assert own_doc(bare) is None  # the base's docstring documents the base, not the subclass


def test_docstrings_python_generates_do_not_count():
    @dataclass
    class Point:
        x: int

    error = _fake(type("BadThing", (ValueError,), {"__doc__": ValueError.__doc__}))
    assert Point.__doc__.startswith("Point(x: ")  # generated by @dataclass
    assert own_doc(_fake(Point)) is None
    assert own_doc(error) is None
    assert own_doc(functools.partial(print, "x")) is None
    assert own_doc(lambda: None) is None


def test_an_override_inherits_its_base_methods_docstring_but_a_new_method_does_not():
    class Base:
        def step(self):
            """Take a step."""

    class Child(Base):
        def step(self):
            pass

        def extra(self):
            pass

    _fake(Base)
    _fake(Child)
    assert member_doc(Child, "step") == "Take a step."
    assert member_doc(Child, "extra") is None
    assert public_members(Child) == ["extra", "step"]


def test_members_from_outside_numbagrad_are_not_checked():
    error = _fake(type("Failure", (RuntimeError,), {"__doc__": "It failed.", "detail": lambda self: None}))
    assert public_members(error) == ["detail"]  # not with_traceback/add_note, which Python documents


# --- the elementwise table --------------------------------------------------------------------------------------
def test_every_elementwise_row_has_a_description():
    """Each row of the table says in words, in its ``doc``, what it computes."""
    from numbagrad.scalar_math import ROWS

    assert [name for name, row in ROWS.items() if not row.doc.strip() or "\n" in row.doc] == []


def test_a_generated_row_function_starts_with_its_rows_description():
    import numbagrad
    from numbagrad.scalar_math import ROWS

    generated = [row for row in ROWS.values() if row.frontend and row.names and not row.names[0].startswith("_")]
    assert len(generated) > 50
    for row in generated:
        assert getattr(numbagrad, row.names[0]).__doc__.splitlines()[0] == row.doc, row.name


def test_an_inplace_row_method_says_it_is_in_place():
    import numbagrad
    from numbagrad.scalar_math import ROWS

    assert numbagrad.Tensor.mul_.__doc__ == f"In-place ``mul``, into this tensor: {ROWS['mul'].doc}"
