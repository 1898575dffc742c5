"""``numbagrad.compile`` on the code real models are made of: it traces without a graph break (``fullgraph=True``)
and its values, gradients and module state equal eager mode's."""

from __future__ import annotations

import numpy as np

import numbagrad as ng
from numbagrad import nn


def _inputs(*shapes, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [ng.tensor(rng.standard_normal(s).astype(np.float32)) for s in shapes]


def _eager_and_compiled(make, *args, calls: int = 2):
    """Loss and parameter gradients of a module built by ``make``, eagerly and compiled with fullgraph=True, each
    from the same initial state (the state dicts after ``calls`` steps are compared too)."""
    ng.manual_seed(0)
    eager = make()
    ng.manual_seed(0)
    plain = make()
    compiled = ng.compile(plain, fullgraph=True)
    results = []
    for model, run in ((eager, eager), (plain, compiled)):
        for _ in range(calls):
            model.zero_grad()
            loss = run(*args).sum()
            loss.backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        results.append((loss.item(), grads, state))
    return results


def _assert_same(results, rtol: float = 1e-5) -> None:
    (l1, g1, s1), (l2, g2, s2) = results
    np.testing.assert_allclose(l2, l1, rtol=rtol)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-6)
    assert s1.keys() == s2.keys()
    for k in s1:
        np.testing.assert_allclose(s2[k], s1[k], rtol=rtol, atol=1e-6)


def test_parameters_of_deeply_nested_submodules_are_constants_not_a_graph_break():
    def make():
        return nn.Sequential(nn.Sequential(nn.ModuleList([nn.Sequential(nn.Sequential(nn.Linear(3, 4)))])[0]))

    (x,) = _inputs((2, 3))
    _assert_same(_eager_and_compiled(make, x))
