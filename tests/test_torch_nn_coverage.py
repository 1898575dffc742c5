"""Every class of ``torch.nn`` and every function of ``torch.nn.functional`` exists in numbagrad, at torch's module
path too, apart from the names listed below as not yet built: the lists must shrink as they are built (a listed
name that appears fails the test too, so the lists stay true). Behaviour is tested against torch elsewhere."""

import importlib
import inspect

import pytest

import numbagrad

#: torch.nn classes numbagrad does not have yet, and why.
MISSING_MODULES = {
    "DataParallel": "one process per device: numbagrad's data parallelism is DistributedDataParallel over MPI",
    "SyncBatchNorm": "needs collectives inside forward; not built",
}

#: torch.nn.functional names numbagrad does not have yet (torch's internal helpers included).
MISSING_FUNCTIONS = {
    "Optional", "boolean_dispatch", "assert_int_or_pair", "handle_torch_function", "has_torch_function",
    "has_torch_function_unary", "has_torch_function_variadic",  # torch's dispatch helpers, not user functions
}  # fmt: skip


def _torch_modules(torch):
    return sorted(
        n for n in dir(torch.nn)
        if not n.startswith("_") and inspect.isclass(getattr(torch.nn, n)) and issubclass(getattr(torch.nn, n),
                                                                                          torch.nn.Module)
    )  # fmt: skip


def _torch_functions(torch):
    F = torch.nn.functional
    return sorted(
        n for n in dir(F)
        if not n.startswith("_") and callable(getattr(F, n)) and not inspect.isclass(getattr(F, n))
    )  # fmt: skip


@pytest.mark.torch
def test_every_torch_nn_module_exists_but_the_listed_ones(torch):
    names = _torch_modules(torch)
    missing = {n for n in names if not hasattr(numbagrad.nn, n)}
    assert missing == set(MISSING_MODULES), (
        f"now missing but not listed: {sorted(missing - set(MISSING_MODULES))}; "
        f"listed but present: {sorted(set(MISSING_MODULES) - missing)}"
    )


@pytest.mark.torch
def test_every_torch_nn_module_is_at_torchs_module_path(torch):
    wrong = []
    for name in _torch_modules(torch):
        module_path = getattr(torch.nn, name).__module__
        if name in MISSING_MODULES or not module_path.startswith("torch.nn.modules."):
            continue
        ours = importlib.import_module("numbagrad" + module_path[len("torch") :])
        if getattr(ours, name, None) is not getattr(numbagrad.nn, name):
            wrong.append(f"{module_path}.{name}")
    assert not wrong


@pytest.mark.torch
def test_every_functional_exists_but_the_listed_ones(torch):
    missing = {n for n in _torch_functions(torch) if not hasattr(numbagrad.nn.functional, n)}
    assert missing == MISSING_FUNCTIONS, (
        f"now missing but not listed: {sorted(missing - MISSING_FUNCTIONS)}; "
        f"listed but present: {sorted(MISSING_FUNCTIONS - missing)}"
    )
