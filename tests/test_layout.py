"""The package's layout rules, read from its source (ast), so they cannot drift.

* No import cycles between numbagrad's modules, counting imports inside functions.
* The only way up is ``numbagrad._upward``: the upper references it holds are listed here (``UPWARD``), only
  ``numbagrad.ops`` registers them, and no module sets attributes on another numbagrad module (the injection a
  lower layer could otherwise be reached up through, unseen by the import rules).
* Nothing imports upward: each module belongs to a layer (the scalar table and the small value types at the
  bottom, then the backends, the Tensor, autograd, the ops, the libraries built on them, the public face), and
  imports only from its own layer or below. This includes the never-rules: ``_tensor``/``_types``/``_printing``
  import no autograd, ops or nn; ``backend`` imports no ops, autograd or nn; ``autograd`` imports no nn or optim.
* At most 10 function-level imports of the package's own modules, each with a comment saying why it is lazy.
* ``from numbagrad.ops import *`` exports only public names.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from pathlib import Path

import pytest

import numbagrad
from numbagrad import _upward

ROOT = Path(numbagrad.__file__).parent

#: Layer of each top-level part of the package (a module imports only from its own layer or below).
LAYERS = {
    "_types": 0,
    "_upward": 0,
    "_samples": 0,
    "_printing": 0,
    "scalar_math": 0,
    "_typeinfo": 2,
    "backend": 1,
    "_tensor": 2,
    "autograd": 3,
    "ops": 4,
    "extend": 5,
    "nn": 5,
    "optim": 5,
    "serialization": 5,
    "_interop": 5,
    "cache": 5,
    "utils": 5,
    "cuda": 5,
    "amp": 5,
    "func": 5,
    "sparse": 5,
    "linalg": 5,
    "compile": 6,
    "compiler": 6,
    "_generator": 4,
    "distributed": 5,
    "testing": 5,
    "distributions": 5,
    "fft": 5,
    "special": 5,
    "profiler": 4,
    "__init__": 7,
    "__main__": 7,
    "_stubs": 7,
}
MAX_LAZY_IMPORTS = 10
#: The upper modules the lower layers reach, by their name in ``numbagrad._upward``: nothing else goes up.
UPWARD = {"ops": "numbagrad.ops", "grad_mode": "numbagrad.autograd.grad_mode", "autograd": "numbagrad.autograd"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


MODULES = _modules()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The numbagrad modules an import statement loads (``from . import a, b`` loads two)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "numbagrad"]
    if node.level == 0:
        base = node.module or ""
        if base.split(".")[0] != "numbagrad":
            return []
    else:
        parts = module.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    targets = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        targets.append(candidate if candidate in MODULES else base)
    return targets


def _imports() -> list[tuple[str, str, bool, int, Path]]:
    """(importer, imported, inside a function?, line, file) for every import of a numbagrad module."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        inner = {id(n) for f in functions for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(module, is_package, node):
                    if target in MODULES and target != module:
                        found.append((module, target, id(node) in inner, node.lineno, path))
    return found


IMPORTS = _imports()


def _layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    return LAYERS[key]


def test_every_module_has_a_layer():
    missing = sorted({m.split(".")[1] for m in MODULES if "." in m} - set(LAYERS))
    assert not missing, f"add these parts of the package to LAYERS: {missing}"


def test_nothing_imports_upward():
    upward = [
        f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)}) at {path.name}:{line}"
        for a, b, _, line, path in IMPORTS
        if _layer(b) > _layer(a) and not b.startswith(a + ".")  # a package may import its own submodules
    ]
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize(
    ("lower", "forbidden"),
    [
        ("numbagrad._tensor", ("numbagrad.autograd", "numbagrad.ops", "numbagrad.nn")),
        ("numbagrad._types", ("numbagrad.autograd", "numbagrad.ops", "numbagrad.nn")),
        ("numbagrad._printing", ("numbagrad.autograd", "numbagrad.ops", "numbagrad.nn")),
        ("numbagrad.backend", ("numbagrad.ops", "numbagrad.autograd", "numbagrad.nn")),
        ("numbagrad.autograd", ("numbagrad.nn", "numbagrad.optim")),
    ],
)
def test_never_rules(lower, forbidden):
    bad = [
        f"{a} imports {b}"
        for a, b, _, _, _ in IMPORTS
        if (a == lower or a.startswith(lower + ".")) and any(b == f or b.startswith(f + ".") for f in forbidden)
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_counting_function_level_imports():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a, b, _, _, _ in IMPORTS:
        if not b.startswith(a + "."):  # a package importing its own submodules is how packages load
            graph[a].add(b)
    cycles = _strongly_connected(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in cycles)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        result.append(component)
    return result


def test_function_level_imports_are_few_and_say_why():
    lazy = [(a, b, line, path) for a, b, inner, line, path in IMPORTS if inner]
    listing = "\n".join(f"{path.relative_to(ROOT)}:{line} {a} -> {b}" for a, b, line, path in lazy)
    assert len(lazy) <= MAX_LAZY_IMPORTS, f"{len(lazy)} function-level imports of numbagrad modules:\n{listing}"
    for _, _, line, path in lazy:
        lines = path.read_text().splitlines()
        said = lines[line - 1] + lines[line - 2]
        assert "lazy" in said, f"{path.relative_to(ROOT)}:{line}: say why this import is lazy (a '# lazy: ...' comment)"


def test_star_import_of_the_ops_exports_only_public_names():
    namespace: dict = {}
    exec("from numbagrad.ops import *", namespace)  # noqa: S102 - the statement under test
    names = [n for n in namespace if n != "__builtins__"]
    assert names and not [n for n in names if n.startswith("_")]
    assert {"add", "sum", "matmul", "tensor", "where"} <= set(names)
    assert not {"getitem", "setitem", "inplace", "wrap_dim", "sum_to_shape", "backend_for"} & set(names)


# --- the registered upward references ---------------------------------------------------------------------------
def _module_aliases(module: str, path: Path, tree: ast.Module) -> set[str]:
    """The names a module binds to numbagrad modules by importing them (``from .. import _tensor`` binds
    ``_tensor``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias, target in zip(node.names, _resolve(module, path.name == "__init__.py", node)):
                if target in MODULES and target.endswith("." + alias.name):
                    names.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "numbagrad":
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


@functools.cache
def _trees() -> list[tuple[str, Path, ast.Module]]:
    """(module, file, syntax tree) of every module, parsed once for the tests below."""
    return [(module, path, ast.parse(path.read_text())) for module, path in MODULES.items()]


def test_the_registered_upward_references_are_the_listed_ones():
    assert set(inspect.signature(_upward.register).parameters) == set(UPWARD)
    for name, module in UPWARD.items():
        assert getattr(_upward, name) is importlib.import_module(module)


def test_the_registry_imports_nothing_of_numbagrad():
    assert [b for a, b, _, _, _ in IMPORTS if a == "numbagrad._upward"] == []


def test_only_the_ops_package_registers_upward_references():
    callers = [
        module
        for module, _, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "_upward"
    ]  # fmt: skip
    assert callers == ["numbagrad.ops"]


def test_the_lower_layers_read_only_registered_names():
    unknown = [
        f"{path.relative_to(ROOT)}:{node.lineno} _upward.{node.attr}"
        for _, path, tree in _trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "_upward"
        and node.attr not in UPWARD and node.attr != "register"
    ]  # fmt: skip
    assert not unknown, "\n".join(unknown)


def test_no_module_sets_attributes_on_another_module():
    """``_tensor._ops = ...`` in an upper module would give a lower one a way up that no import shows."""
    found = []
    for module, path, tree in _trees():
        aliases = _module_aliases(module, path, tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                objects = node.args[:1]
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
                objects = [t.value for t in flat if isinstance(t, ast.Attribute)]
            else:
                continue
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} sets an attribute of the module {o.id}"
                for o in objects
                if isinstance(o, ast.Name) and o.id in aliases
            ]
    assert not found, "\n".join(found)


def _attribute_assignments(tree: ast.AST, names: set) -> list:
    """(line, attribute) of each assignment to ``<anything>.<name>`` for a name in ``names``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            found += [(node.lineno, t.attr) for t in flat if isinstance(t, ast.Attribute) and t.attr in names]
    return found


#: The two hottest node builders, which make ``make_node``'s stores for one output inline (a call costs as much as
#: the stores): module -> their function names. tests/test_fast_paths.py checks that their nodes have exactly the
#: fields ``make_node`` gives.
INLINED_NODE_BUILDERS = {"numbagrad.ops.elementwise": {"_fast_one", "_fast_pair"}}


def test_graph_nodes_are_made_only_by_the_node_builder():
    """A node's edges and creation order are set only by ``autograd.function.make_node`` (or, inline, by the
    listed hottest fast paths), so no fast path can build a node that lacks what the general path records."""
    found = []
    for module, path, tree in _trees():
        if module == "numbagrad.autograd.function":
            continue
        inlined = INLINED_NODE_BUILDERS.get(module, set())
        allowed = {
            node.lineno
            for fn in ast.walk(tree)
            if isinstance(fn, ast.FunctionDef) and fn.name in inlined
            for node in ast.walk(fn)
            if hasattr(node, "lineno")
        }
        found += [
            f"{path.relative_to(ROOT)}:{line} sets {attr}"
            for line, attr in _attribute_assignments(tree, {"_edges", "_sequence_nr"})
            if line not in allowed
        ]
    assert not found, "\n".join(found)


def test_the_inlined_node_builders_exist_and_store_both_fields():
    """Each listed inline node builder stores the edges and the creation order (a rename cannot leave the list
    naming nothing)."""
    trees = {module: tree for module, _, tree in _trees()}
    for module, names in INLINED_NODE_BUILDERS.items():
        functions = {fn.name: fn for fn in ast.walk(trees[module]) if isinstance(fn, ast.FunctionDef)}
        for name in names:
            stored = {attr for _, attr in _attribute_assignments(functions[name], {"_edges", "_sequence_nr"})}
            assert stored == {"_edges", "_sequence_nr"}, (module, name)
