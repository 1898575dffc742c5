"""``Module.register_full_backward_hook`` and ``register_full_backward_pre_hook``: what the hooks see and return, in
which order they run, compared with torch's on the same modules and values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import numbagrad as ng

W = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def _values(grads) -> list:
    return [None if g is None else g.detach().numpy().astype(np.float64).tolist() for g in grads]


def _assert_same_log(ours, theirs) -> None:
    """The same entries in the same order, numbers equal within float32 rounding (each library's BLAS sums in
    its own order)."""
    if isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), (ours, theirs)
        for mine, expected in zip(ours, theirs):
            _assert_same_log(mine, expected)
    elif isinstance(theirs, float):
        assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-6)
    else:
        assert ours == theirs


def _linear(lib):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(W))
        lin.bias.fill_(0.5)
    return lin


def _recorder(log: list, tag: str):
    def hook(module, grad_input, grad_output):
        log.append((tag, "grad_input", _values(grad_input)))
        log.append((tag, "grad_output", _values(grad_output)))

    return hook


def _pre_recorder(log: list, tag: str, scale=None):
    def hook(module, grad_output):
        log.append((tag, "pre", _values(grad_output)))
        return None if scale is None else tuple(None if g is None else g * scale for g in grad_output)

    return hook


def _seen_by_hooks(lib, case: str) -> list:
    """The hooks' log and the input's gradient, for one case, under numbagrad or torch."""
    log: list = []
    lin = _linear(lib)
    x = lib.tensor(X, requires_grad=True)
    if case == "hook":
        lin.register_full_backward_hook(_recorder(log, "linear"))
        (lin(x) ** 2).sum().backward()
    elif case == "pre_hook_scales_grad_output":
        lin.register_full_backward_pre_hook(_pre_recorder(log, "pre", 3.0))
        lin.register_full_backward_hook(_recorder(log, "linear"))
        (lin(x) ** 2).sum().backward()
    elif case == "hook_replaces_grad_input":
        lin.register_full_backward_hook(lambda module, gi, go: (gi[0] * 0 + 1,))
        (lin(x) ** 2).sum().backward()
    elif case == "no_input_requires_grad":
        lin.register_full_backward_hook(_recorder(log, "linear"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (lin(x.detach()) ** 2).sum().backward()
    elif case == "non_tensor_and_constant_arguments":

        class Two(lib.nn.Module):
            def forward(self, a, k, b):
                return a * b, (a + b).sum(), k

        module = Two()
        module.register_full_backward_hook(_recorder(log, "two"))
        u, v, _ = module(x, 3, lib.tensor(np.full((4, 3), 2.0, np.float32)))
        (u.sum() + v * 2).backward()
    elif case == "order_in_a_sequential":
        seq = lib.nn.Sequential(_linear(lib), lib.nn.Tanh(), lib.nn.Linear(2, 2))
        with lib.no_grad():
            seq[2].weight.copy_(lib.tensor([[1.0, -2.0], [0.5, 0.25]]))
        for i, m in enumerate(seq):
            m.register_full_backward_hook(_recorder(log, f"child {i}"))
        seq.register_full_backward_hook(_recorder(log, "sequential"))
        seq(x).sum().backward()
    elif case == "prepend_and_remove":
        first = lin.register_full_backward_hook(lambda m, gi, go: log.append("first"))
        lin.register_full_backward_hook(lambda m, gi, go: log.append("second"))
        lin.register_full_backward_hook(lambda m, gi, go: log.append("prepended"), prepend=True)
        lin(x).sum().backward()
        first.remove()
        lin(x).sum().backward()
    log.append(("x.grad", None if x.grad is None else _values([x.grad])))
    return log


CASES = [
    "hook",
    "pre_hook_scales_grad_output",
    "hook_replaces_grad_input",
    "no_input_requires_grad",
    "non_tensor_and_constant_arguments",
    "order_in_a_sequential",
    "prepend_and_remove",
]


@pytest.mark.parametrize("case", CASES)
def test_backward_hooks_see_and_return_what_torchs_do(torch, case):
    _assert_same_log(_seen_by_hooks(ng, case), _seen_by_hooks(torch, case))


def test_a_hook_returning_the_wrong_number_of_grad_inputs_raises_torchs_error():
    lin = _linear(ng)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(
        RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2, but expected 1"
    ):
        lin(ng.tensor(X, requires_grad=True)).sum().backward()


def test_a_hook_on_a_module_without_input_gradients_may_not_return_gradients():
    lin = _linear(ng)
    lin.register_full_backward_hook(lambda m, gi, go: (ng.ones(4, 3),))
    with pytest.warns(UserWarning, match="Full backward hook is firing"):
        with pytest.raises(RuntimeError, match="should always return None or None for all gradients"):
            lin(ng.tensor(X)).sum().backward()


def test_a_non_tensor_output_is_warned_about():
    class Listed(ng.nn.Module):
        def forward(self, x):
            return [x * 2]

    module = Listed()
    module.register_full_backward_hook(lambda m, gi, go: None)
    with pytest.warns(UserWarning, match="module output should be a Tensor or a tuple of Tensors"):
        module(ng.ones(2, requires_grad=True))


def test_a_compiled_model_runs_the_backward_hooks_of_its_parts_each_step():
    model = ng.nn.Sequential(_linear(ng), ng.nn.Tanh())
    seen = []
    model[0].register_full_backward_hook(lambda m, gi, go: seen.append(float(go[0].sum())))
    compiled = ng.compile(model)
    for scale in (1.0, 2.0, 3.0):
        compiled(ng.tensor(X * scale, requires_grad=True)).sum().backward()
    eager = []
    model[0]._backward_hooks.clear()
    model[0].register_full_backward_hook(lambda m, gi, go: eager.append(float(go[0].sum())))
    for scale in (1.0, 2.0, 3.0):
        model(ng.tensor(X * scale, requires_grad=True)).sum().backward()
    assert seen == eager
    assert [reason for reason, _ in compiled.graph_breaks] == ["calls a Linear that has backward hooks"]
