"""Which results alias their inputs, for every op sample in the registry: a result that shares an input's memory
is that input or a view autograd tracks (its ``_base`` is the input's base), and it is one exactly where torch's
is. An untracked alias would let a write through it escape autograd, and would let a backward write a gradient
into memory something else still reads (``ops.elementwise``'s reuse of a saved output)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad._samples import Call
from samples import call_declared, call_inputs, call_params, declared_samples, nn_calls, op_calls, run, tensors

#: ops whose result shares the input's memory without being a view, as in torch (their callers mark the input's
#: storage as handed out: ``_tensor.expose``)
UNTRACKED_ALIASES = {"detach"}


def _run(case, lib):
    """``(outputs, inputs)`` of a registry case (a declared op's ``Sample`` or a ``Call``) under ``lib``."""
    if isinstance(case, Call):
        inputs = call_inputs(case, lib)
        return tensors(run(case, lib, *inputs)), inputs
    decl, sample = case
    out, args, kwargs = call_declared(decl, lib, sample, requires_grad=False)
    return tensors(out), tensors((args, tuple(kwargs.values())))


def _root(t):
    return t._base if t._base is not None else t


def _views(outputs, inputs) -> list:
    """For each output, for each input: is the output that input or a view of its base?"""
    return [tuple(o is x or _root(o) is _root(x) for x in inputs) for o in outputs]


CASES = [pytest.param((p.values[0], p.values[1]), id=p.id) for p in declared_samples()] + call_params(
    [*op_calls(), *nn_calls()]
)


def _name(case) -> str:
    return case.id if isinstance(case, Call) else case[0].name


@pytest.mark.parametrize("case", CASES)
def test_a_result_sharing_an_input_memory_is_a_tracked_view(case):
    outputs, inputs = _run(case, numbagrad)
    if _name(case) in UNTRACKED_ALIASES:
        return
    for o in outputs:
        for x in inputs:
            if type(o._data) is np.ndarray and type(x._data) is np.ndarray and np.shares_memory(o._data, x._data):
                assert o is x or _root(o) is _root(x)


@pytest.mark.parametrize("case", CASES)
def test_results_are_views_where_torch_results_are(case, torch):
    assert _views(*_run(case, numbagrad)) == _views(*_run(case, torch))
