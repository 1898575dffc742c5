"""What a compiled function reads at each call: its integer inputs (embedding indices and class targets, their range
checked at every replay), the module's current parameters, buffers and attributes, and the autocast region. An op
handed a traced tensor's storage, or a forward that changes its module, stops the trace instead of replaying the
first call's values."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.autograd import Function
from numbagrad.compile import GraphBreakError


class TokenModel(ng.nn.Module):
    """embedding -> linear -> the loss chosen: the shapes of a language model's step."""

    def __init__(self, loss: str) -> None:
        super().__init__()
        self.emb = ng.nn.Embedding(11, 6)
        self.out = ng.nn.Linear(6, 5)
        self.loss = loss

    def forward(self, idx, target):
        logits = self.out(self.emb(idx))
        if self.loss == "cross_entropy":
            return ng.nn.functional.cross_entropy(logits.reshape(-1, 5), target.reshape(-1))
        if self.loss == "cross_entropy_2d":
            return ng.nn.functional.cross_entropy(logits.transpose(1, 2), target)
        if self.loss == "smoothed":
            return ng.nn.functional.cross_entropy(logits.reshape(-1, 5), target.reshape(-1), label_smoothing=0.1)
        if self.loss == "ignore_index":
            return ng.nn.functional.cross_entropy(logits.reshape(-1, 5), target.reshape(-1), ignore_index=2)
        return ng.nn.functional.nll_loss(logits.log_softmax(-1).reshape(-1, 5), target.reshape(-1))


def batches(n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [(ng.tensor(rng.integers(0, 11, (3, 4))), ng.tensor(rng.integers(0, 5, (3, 4)))) for _ in range(n)]


@pytest.mark.parametrize("loss", ["cross_entropy", "cross_entropy_2d", "smoothed", "ignore_index", "nll_loss"])
def test_each_call_reads_its_own_indices_and_targets(loss):
    ng.manual_seed(0)
    model = TokenModel(loss)
    compiled = ng.compile(model, fullgraph=True)
    for idx, target in batches(4) * 2:  # (the second round replays every batch's plan)
        got = compiled(idx, target)
        want = model(idx, target)
        assert float(got) == float(want)


def test_replayed_gradients_follow_each_calls_indices():
    ng.manual_seed(0)
    model = TokenModel("cross_entropy")
    compiled = ng.compile(model, fullgraph=True)
    for idx, target in batches(3):
        model.zero_grad()
        compiled(idx, target).backward()
        got = [p.grad.numpy().copy() for p in model.parameters()]
        model.zero_grad()
        model(idx, target).backward()
        for g, p in zip(got, model.parameters()):
            np.testing.assert_array_equal(g, p.grad.numpy())


@pytest.mark.parametrize(
    ("which", "at", "value", "message"),
    [(0, (0, 0), 11, "index out of range in self"), (1, (1, 2), 7, "Target 7 is out of bounds.")],
    ids=["indices", "targets"],
)
def test_a_replay_checks_the_range_of_each_calls_integer_input(which, at, value, message):
    model = TokenModel("cross_entropy")
    compiled = ng.compile(model)
    inputs = batches(1)[0]
    compiled(*inputs)
    compiled(*inputs)
    bad = [t.clone() for t in inputs]
    bad[which][at] = value
    with pytest.raises(IndexError, match=message):
        compiled(*bad)


class Doubled(Function):
    """A Function handed raw storage (``x._data``) instead of the tensor: what the trace cannot follow."""

    @staticmethod
    def forward(ctx, data):
        return ng.tensor(data * 2)

    @staticmethod
    def backward(ctx, g):
        return None


def storage_passing(x):
    return Doubled.apply(x._data) + 1


def test_an_op_given_a_traced_tensors_storage_breaks_the_trace():
    with pytest.raises(GraphBreakError, match="reads the storage of a tensor the trace follows"):
        ng.compile(storage_passing, fullgraph=True)(ng.ones(3))


def test_after_that_break_each_call_computes_with_its_own_values():
    compiled = ng.compile(storage_passing)
    for value in (1.0, 2.0, 5.0, 2.0):
        np.testing.assert_array_equal(compiled(ng.full((3,), value)).numpy(), np.full(3, value * 2 + 1))


def test_a_replaced_parameter_is_read_after_the_replacement():
    model = ng.nn.Linear(3, 2)
    compiled = ng.compile(model)
    x = ng.randn(4, 3)
    compiled(x), compiled(x)
    model.weight = ng.nn.Parameter(ng.zeros(2, 3))
    np.testing.assert_array_equal(compiled(x).detach().numpy(), model(x).detach().numpy())


def test_a_replaced_buffer_is_read_after_the_replacement():
    class Scaled(ng.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", ng.tensor(2.0))

        def forward(self, x):
            return x * self.scale

    module = Scaled()
    compiled = ng.compile(module)
    compiled(ng.ones(2)), compiled(ng.ones(2))
    module.scale = ng.tensor(4.0)
    np.testing.assert_array_equal(compiled(ng.ones(2)).numpy(), [4.0, 4.0])


def test_a_python_attribute_of_the_module_is_read_after_it_changes():
    class Temperature(ng.nn.Module):
        def __init__(self):
            super().__init__()
            self.t = 2.0

        def forward(self, x):
            return (x / self.t).softmax(-1)

    module = Temperature()
    compiled = ng.compile(module)
    x = ng.randn(2, 5)
    compiled(x), compiled(x)
    module.t = 0.5
    np.testing.assert_allclose(compiled(x).numpy(), module(x).numpy())


def test_replays_stay_replays_while_nothing_changes():
    model = ng.nn.Sequential(ng.nn.Linear(3, 4), ng.nn.ReLU(), ng.nn.Linear(4, 1))
    compiled = ng.compile(model)
    optimizer = ng.optim.SGD(model.parameters(), lr=0.1)
    x = ng.randn(5, 3)
    for _ in range(3):
        optimizer.zero_grad()
        compiled(x).sum().backward()
        optimizer.step()
    model.train()  # (the mode it already has: no change)
    assert len(compiled._compiled.plans) == 1
    plan = compiled._compiled.plans[0]
    compiled(x)
    assert compiled._compiled.plans == [plan]


def test_a_forward_that_sets_a_module_attribute_runs_eagerly():
    class Counting(ng.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * 2

    module = Counting()
    compiled = ng.compile(module)
    for _ in range(3):
        compiled(ng.ones(2))
    assert module.calls == 3
    assert [reason for reason, _ in compiled.graph_breaks] == [
        "sets the attribute 'calls' of a Counting, which a replay would not do"
    ]


def test_a_computed_tensor_kept_in_an_outside_list_breaks_the_trace():
    kept = []

    def keep(x):
        y = x * 2
        kept.append(y)
        return y + 1

    compiled = ng.compile(keep)
    for i in range(3):
        compiled(ng.ones(2) * i)
    assert [float(t.sum()) for t in kept] == [0.0, 4.0, 8.0]
    assert [reason.split(" (")[0] for reason, _ in compiled.graph_breaks] == [
        "keeps a tensor it computed where a later call could read it"
    ]


def test_the_autocast_region_is_part_of_the_guard():
    model = ng.nn.Linear(3, 2)
    compiled = ng.compile(model)
    x = ng.randn(4, 3)
    compiled(x), compiled(x)
    with ng.autocast("cpu", dtype=ng.bfloat16):
        inside = compiled(x)
        eager = model(x)
    assert inside.dtype == eager.dtype == ng.bfloat16
    assert compiled(x).dtype == ng.float32


def test_an_in_place_row_under_no_grad_keeps_the_values_node_in_a_replay():
    """``cosine_similarity`` clamps its norms in place under no_grad, as torch's does: the values change, the
    gradient stays the unclamped norm's. A replay must not turn the clamped norm into a graph-less value."""
    rng = np.random.default_rng(0)
    compiled = ng.compile(lambda a, b: ng.nn.functional.cosine_similarity(a, b))
    for _ in range(3):
        a, b = (ng.tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(2))
        a2, b2 = (t.detach().clone().requires_grad_() for t in (a, b))
        ng.nn.functional.cosine_similarity(a, b).sum().backward()
        compiled(a2, b2).sum().backward()
        np.testing.assert_allclose(a2.grad.numpy(), a.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(b2.grad.numpy(), b.grad.numpy(), rtol=1e-12)


def test_an_in_place_row_under_no_grad_on_a_computed_value_is_replayed_in_place():
    def f(x):
        y = x * 2
        with ng.no_grad():
            y.clamp_(min=1.0)
        return (y * x).sum()

    compiled = ng.compile(f, fullgraph=True)
    for value in (0.25, 2.0, 0.25):
        x = ng.full((3,), value, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        f(x).backward()
        out = compiled(x2)
        out.backward()
        assert float(out) == float(f(x.detach()))
        np.testing.assert_array_equal(x2.grad.numpy(), x.grad.numpy())


def test_a_hook_registered_on_a_part_after_compiling_runs_in_later_calls():
    model = ng.nn.Sequential(ng.nn.Linear(3, 4), ng.nn.ReLU(), ng.nn.Linear(4, 1))
    compiled = ng.compile(model)
    x = ng.randn(2, 3)
    compiled(x), compiled(x)
    seen = []
    handle = model[1].register_forward_hook(lambda module, args, out: seen.append(out.shape))
    compiled(x), compiled(x)
    handle.remove()
    compiled(x)
    assert seen == [(2, 4), (2, 4)]


def test_a_change_to_a_module_the_trace_did_not_reach_keeps_the_plans():
    model = ng.nn.Linear(3, 2)
    other = ng.nn.Linear(3, 2)
    compiled = ng.compile(model)
    x = ng.randn(4, 3)
    compiled(x), compiled(x)
    plan = compiled._compiled.plans[0]
    other.weight = ng.nn.Parameter(ng.zeros(2, 3))
    other.scale = 2.0
    compiled(x)
    assert compiled._compiled.plans == [plan]


def test_a_spectral_normed_module_compiled_computes_as_eager_each_step():
    """Its forward pre-hook assigns a new weight before every call: the compiled module reads each one."""
    from numbagrad.nn.utils import spectral_norm

    results = []
    for compiled in (False, True):
        ng.manual_seed(0)
        module = spectral_norm(ng.nn.Linear(3, 2))
        run = ng.compile(module) if compiled else module
        results.append([run(ng.full((1, 3), float(k))).detach().numpy().copy() for k in range(4)])
    for eager, replayed in zip(*results, strict=True):
        np.testing.assert_allclose(replayed, eager, rtol=1e-6)


def test_a_module_changed_by_another_keys_eager_call_is_read_afresh():
    class Reweighting(ng.nn.Module):
        """Calls of 5 rows run eagerly (the forward assigns a parameter) and give the linear a new weight."""

        def __init__(self):
            super().__init__()
            self.linear = ng.nn.Linear(3, 2)
            self.calls = 0

        def forward(self, x):
            if x.shape[0] == 5:
                self.linear.weight = ng.nn.Parameter(ng.full((2, 3), float(self.calls)))
                self.calls += 1
            return self.linear(x)

    module = Reweighting()
    compiled = ng.compile(module)
    small, large = ng.ones(2, 3), ng.ones(5, 3)
    compiled(small), compiled(small)
    for _ in range(2):
        compiled(large)
        np.testing.assert_array_equal(compiled(small).detach().numpy(), module(small).detach().numpy())


# --- Python values the traced code reads from globals and closures -------------------------------------------------
SCALE = 2.0
SHIFTS = [1.0, 2.0]
step = 0  # (a name the traced code uses as an attribute only)


def _scaled(x):
    return x * SCALE + SHIFTS[0]


def test_a_changed_global_number_is_read_at_the_next_call():
    global SCALE
    compiled = ng.compile(_scaled)
    x = ng.ones(3)
    assert compiled(x).tolist() == compiled(x).tolist() == [3.0, 3.0, 3.0]
    try:
        SCALE = 5.0
        assert compiled(x).tolist() == [6.0, 6.0, 6.0]
    finally:
        SCALE = 2.0


def test_a_global_lists_item_changed_in_place_is_read_at_the_next_call():
    compiled = ng.compile(_scaled)
    x = ng.ones(2)
    compiled(x), compiled(x)
    try:
        SHIFTS[0] = 10.0
        assert compiled(x).tolist() == [12.0, 12.0]
    finally:
        SHIFTS[0] = 1.0


def test_a_rebound_closure_variable_is_read_at_the_next_call():
    k = 2.0

    def f(x):
        return x * k

    compiled = ng.compile(f)
    x = ng.ones(2)
    compiled(x), compiled(x)
    k = 3.0
    assert compiled(x).tolist() == [3.0, 3.0]


class _ScaledByGlobal(ng.nn.Module):
    def forward(self, x):
        return x * SCALE


def test_a_global_read_by_a_submodules_forward_is_read_at_the_next_call():
    global SCALE
    compiled = ng.compile(ng.nn.Sequential(ng.nn.Identity(), _ScaledByGlobal()))
    x = ng.ones(2)
    compiled(x), compiled(x)
    try:
        SCALE = 4.0
        assert compiled(x).tolist() == [4.0, 4.0]
    finally:
        SCALE = 2.0


class _Counting(ng.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = ng.nn.Linear(2, 2)
        self.step = 1.0

    def forward(self, x):
        return self.linear(x) * self.step


def test_a_changing_global_whose_name_the_code_uses_as_an_attribute_keeps_the_plan():
    global step
    compiled = ng.compile(_Counting())
    x = ng.ones(1, 2)
    compiled(x), compiled(x)
    (plan,) = compiled._compiled.plans
    for step in range(3):  # noqa: B007 - (the training loop's counter, a global of this module)
        compiled(x)
    assert compiled._compiled.plans == [plan]


def _compiled_with_a_factor():
    """(compiled ``x * k``, a setter of the closure's ``k``)."""
    k = 0.0

    def f(x):
        return x * k

    def set_factor(value: float) -> None:
        nonlocal k
        k = value

    return ng.compile(f), set_factor


def test_a_value_that_changes_at_every_call_runs_eagerly_past_the_retrace_limit():
    from numbagrad.compile._api import RETRACE_LIMIT

    compiled, set_factor = _compiled_with_a_factor()
    x = ng.ones(2)
    with pytest.warns(UserWarning, match="in a row .* runs eagerly from now on") as caught:
        for i in range(RETRACE_LIMIT + 3):
            set_factor(float(i))
            assert compiled(x).tolist() == [i, i]
    assert len(caught) == 1
    assert compiled.plans == []
    ng.compiler.reset()  # (starts over: the next calls trace and replay)
    compiled(x), compiled(x)
    assert len(compiled.plans) == 1


def test_a_replay_between_changes_keeps_compiling():
    from numbagrad.compile._api import RETRACE_LIMIT

    compiled, set_factor = _compiled_with_a_factor()
    x = ng.ones(2)
    for i in range(RETRACE_LIMIT + 3):
        set_factor(float(i))
        compiled(x)
        assert compiled(x).tolist() == [i, i]
        assert len(compiled.plans) == 1


CONFIG = {"scale": 2.0}


def test_a_global_config_dicts_item_changed_in_place_is_read_at_the_next_call():
    def f(x):
        return x * CONFIG["scale"]

    compiled = ng.compile(f)
    x = ng.ones(2)
    compiled(x), compiled(x)
    try:
        CONFIG["scale"] = 3.0
        assert compiled(x).tolist() == [3.0, 3.0]
    finally:
        CONFIG["scale"] = 2.0


def test_a_settings_objects_field_changed_is_read_at_the_next_call():
    import argparse

    args = argparse.Namespace(scale=2.0, name="run")

    def f(x):
        return x * args.scale

    compiled = ng.compile(f)
    x = ng.ones(2)
    compiled(x), compiled(x)
    args.scale = 4.0
    assert compiled(x).tolist() == [4.0, 4.0]


class _Configured(ng.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.settings = {"scale": 2.0}

    def forward(self, x):
        return x * self.settings["scale"]


def test_a_modules_config_dict_changed_in_place_is_read_at_the_next_call():
    module = _Configured()
    compiled = ng.compile(module)
    x = ng.ones(2)
    compiled(x), compiled(x)
    module.settings["scale"] = 5.0
    assert compiled(x).tolist() == [5.0, 5.0]
