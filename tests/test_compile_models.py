"""``numbagrad.compile`` on the code real models are made of: it traces without a graph break (``fullgraph=True``)
and its values, gradients and module state equal eager mode's."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.compile import GraphBreakError


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


def test_in_place_activations_on_computed_values_are_traced_as_eager():
    def make():
        return nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 4), nn.LeakyReLU(0.2, inplace=True))

    (x,) = _inputs((5, 3))
    _assert_same(_eager_and_compiled(make, x))


def test_an_in_place_method_on_a_computed_value_is_replayed_as_eager():
    def f(x, w):
        h = x * w
        h.add_(1.0)
        return h.tanh_().sum()

    x, w = _inputs((2, 3), (2, 3))
    w.requires_grad_()
    compiled = ng.compile(f, fullgraph=True)
    for _ in range(2):
        w.grad = None
        out = compiled(x, w)
        out.backward()
    t = np.tanh(x.numpy() * w.detach().numpy() + 1)
    np.testing.assert_allclose(out.item(), t.sum(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), x.numpy() * (1 - t**2), rtol=1e-5)


def test_an_in_place_change_of_an_input_still_breaks_the_graph_and_changes_the_input():
    def f(x):
        return x.relu_() + 1

    (x,) = _inputs((4,))
    expected = x.numpy().clip(0) + 1
    with pytest.raises(GraphBreakError, match="in place"):
        ng.compile(f, fullgraph=True)(x.clone())
    compiled = ng.compile(f)
    for _ in range(2):
        y = x.clone()
        np.testing.assert_allclose(compiled(y).numpy(), expected, rtol=1e-6)
        np.testing.assert_array_equal(y.numpy(), x.numpy().clip(0))


def test_an_in_place_change_of_a_view_of_a_computed_value_breaks_the_graph_and_stays_right():
    def f(x):
        h = x * 2
        h[0].relu_()
        return h

    (x,) = _inputs((2, 3))
    expected = x.numpy() * 2
    expected[0] = expected[0].clip(0)
    with pytest.raises(GraphBreakError, match="in place"):
        ng.compile(f, fullgraph=True)(x)
    compiled = ng.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(compiled(x).numpy(), expected, rtol=1e-6)


def test_an_in_place_change_of_a_detached_input_breaks_the_graph_and_changes_the_input():
    def f(x):
        x.detach().add_(1.0)
        return x * 2

    compiled = ng.compile(f)
    for v in (1.0, 2.0):
        x = ng.tensor([v, -v])
        np.testing.assert_array_equal(compiled(x).numpy(), [2 * v + 2, 2 - 2 * v])
        np.testing.assert_array_equal(x.numpy(), [v + 1, 1 - v])
    assert len(compiled.graph_breaks) == 1


def test_table_rows_whose_result_is_unused_are_not_replayed():
    def f(x):
        x.exp()  # computed and dropped: no replay step
        return x.tanh() * 2

    compiled = ng.compile(f, fullgraph=True)
    (x,) = _inputs((3,))
    np.testing.assert_allclose(compiled(x).numpy(), np.tanh(x.numpy()) * 2, rtol=1e-6)
    np.testing.assert_allclose(compiled(x).numpy(), np.tanh(x.numpy()) * 2, rtol=1e-6)
    (plan,) = compiled.plans
    assert "exp" not in [n.row.name for g in plan.groups for n in g.nodes]
    assert len(plan.trace.steps) == 2


def test_binary_cross_entropy_compiled_equals_eager():
    def make():
        return nn.Sequential(nn.Linear(3, 2), nn.Sigmoid())

    (x,) = _inputs((4, 3))
    target = ng.tensor(np.random.default_rng(1).uniform(0, 1, (4, 2)).astype(np.float32))

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = make()

        def forward(self, x):
            return nn.functional.binary_cross_entropy(self.body(x), target)

    _assert_same(_eager_and_compiled(Loss, x))


def test_binary_cross_entropy_checks_every_compiled_call_input_range():
    """The range check runs in the op's forward, so a replayed plan raises torch's error for a later input."""
    loss = ng.compile(lambda p, t: nn.functional.binary_cross_entropy(p, t))
    target = ng.full((3,), 0.5)
    for _ in range(2):  # the trace, then a replay
        loss(ng.tensor([0.2, 0.5, 0.9]), target)
    bad = ng.tensor([0.2, 1.5, 0.9])
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        loss(bad, target)
    np.testing.assert_array_equal(bad.numpy(), np.float32([0.2, 1.5, 0.9]))


def _bench_models():
    """``benchmarks/bench_models.py``'s model builders (the training steps the benchmark times)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "bench_models.py")
    spec = importlib.util.spec_from_file_location("bench_models_for_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gpt", "mlp", "wavenet", "vae", "cnn", "lstm", "seq2seq", "dcgan", "unet"])
def test_a_compiled_benchmark_model_trains_as_eager_on_changing_batches(name):
    """Each step sees another batch (other indices and targets), so a replay that read the first call's inputs
    would diverge at once."""
    bench = _bench_models()
    build = bench.MODELS[name]
    if name == "gpt":
        build = lambda lib, rng: bench.gpt(lib, rng, n_layer=1, n_embd=32, block=8, batch=2)  # noqa: E731
    runs = []
    for compiled in (False, True):
        rng = np.random.default_rng(0)
        ng.manual_seed(0)
        cls, make_optimizer, batch_data, clip = build(ng, rng)
        model = cls()
        if name == "cnn":
            model.eval()
        optimizer = make_optimizer(model)
        step = bench._stepper(ng, ng.compile(model, fullgraph=True) if compiled else model, optimizer,
                              [batch_data() for _ in range(3)], clip)  # fmt: skip
        losses = [float(step()) for _ in range(4)]
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()]))
    (eager_losses, eager_params), (losses, params) = runs
    assert len(set(eager_losses)) > 1  # (the batches differ)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    # The fused kernels round differently from the eager ops, and AdamW turns a gradient that is rounding noise
    # alone (the key projection's bias, which softmax ignores) into updates of a fraction of its rate, 3e-4: the
    # two differ by 1e-5 after three steps here. A step on another batch moves weights by about the rate.
    atol = 5e-5 if name == "gpt" else 1e-6
    for a, b in zip(eager_params, params, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=atol)


def test_a_causal_attention_traces_after_an_eager_call_made_its_mask():
    """The causal mask is cached by the first call, eager here: the trace reads it as a constant."""
    rng = np.random.default_rng(0)
    q, k, v = (ng.tensor(rng.standard_normal((2, 3, 5, 4)).astype(np.float32)) for _ in range(3))

    def attend(q, k, v):
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum(-1)

    eager = attend(q, k, v)
    compiled = ng.compile(attend, fullgraph=True)
    compiled(q, k, v)
    q2 = q * 2
    np.testing.assert_allclose(compiled(q2, k, v).numpy(), attend(q2, k, v).numpy(), rtol=1e-6)
    np.testing.assert_allclose(compiled(q, k, v).numpy(), eager.numpy(), rtol=1e-6)
    assert not any(step.cls.__name__ in ("Tril", "MaskedFill") for step in compiled.plans[0].trace.steps)
