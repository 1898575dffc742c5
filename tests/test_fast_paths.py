"""The eager fast paths (an elementwise op's ``_fast_apply``/``_fast_one``/``_fast_pair``, ``sum``'s) skip only
what the general path would not do: they run while ``state.fast`` says no tracer, inference mode, anomaly mode or
saved-tensor hooks is active, and the nodes they build inline are the ones ``make_node`` builds."""

import threading
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd.function import make_node
from numbagrad.autograd.grad_mode import state
from numbagrad.autograd.graph import saved_tensors_hooks
from numbagrad.autograd.profiler import profile


def _anomaly():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (its "Anomaly Detection has been enabled" warning)
        return numbagrad.autograd.detect_anomaly()


MODES = {
    "inference_mode": numbagrad.inference_mode,
    "detect_anomaly": _anomaly,
    "saved_tensors_hooks": lambda: saved_tensors_hooks(lambda t: t, lambda t: t),
    "profiler": profile,
}


def test_fast_is_set_outside_every_mode():
    assert state.fast is True


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_clears_fast_while_it_is_active(mode):
    with MODES[mode]():
        inside = state.fast
    assert (inside, state.fast) == (False, True)


def test_set_anomaly_enabled_clears_fast_until_it_is_turned_off():
    numbagrad.set_anomaly_enabled(True)
    inside = state.fast
    numbagrad.set_anomaly_enabled(False)
    assert (inside, state.fast) == (False, True)


def test_fast_is_per_thread():
    seen = []
    with numbagrad.inference_mode():
        worker = threading.Thread(target=lambda: seen.append(state.fast))
        worker.start()
        worker.join()
    assert seen == [True]


@pytest.mark.parametrize(
    "op, packed",
    [("mul", 2), ("relu", 1), ("add", 0)],  # torch's mul saves both inputs, relu its result, add nothing
)
def test_saved_tensor_hooks_pack_what_torch_packs(torch, op, packed):
    def count(lib, hooks):
        calls = []
        x, w = (lib.tensor([1.0, -2.0, 3.0], requires_grad=True) for _ in range(2))
        with hooks(lambda t: calls.append(1) or t, lambda t: t):
            y = {"mul": lambda: x * w, "relu": lambda: lib.relu(x), "add": lambda: x + w}[op]()
        y.sum().backward()
        return len(calls)

    ours = count(numbagrad, saved_tensors_hooks)
    assert ours == count(torch, torch.autograd.graph.saved_tensors_hooks) == packed


@pytest.mark.parametrize("op", ["mul", "relu", "sum"])
def test_a_fast_path_node_has_every_field_make_node_gives(op):
    x, w = (numbagrad.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True) for _ in range(2))
    y = {"mul": lambda: x * w, "relu": lambda: numbagrad.relu(x), "sum": lambda: x.sum()}[op]()
    node = y.grad_fn
    reference = type(node)()
    before = set(vars(reference))
    out = numbagrad.Tensor._make(y._data.copy())
    make_node(reference, node._edges, out)
    assert set(vars(reference)) - before <= set(vars(node))
    assert (out.grad_fn, y.grad_fn) == (reference, node)
    assert reference._sequence_nr > node._sequence_nr


def test_fast_path_nodes_are_numbered_in_creation_order():
    x, w = (numbagrad.tensor([1.0, 2.0], requires_grad=True) for _ in range(2))
    first, second = x * w, numbagrad.relu(x)
    assert second.grad_fn._sequence_nr > first.grad_fn._sequence_nr
