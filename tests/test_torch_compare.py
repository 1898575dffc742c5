"""The same programs under PyTorch and under numbagrad (``import numbagrad as torch``): printed output must be
identical once module names are normalised, and gradients equal. Also checks that the node names written in
the declared ops' and rows' call samples (``tests/samples.py``) are torch's own. Skipped as a whole when torch is
not installed."""

from __future__ import annotations

import contextlib
import io
import re
import textwrap

import numpy as np
import pytest

import numbagrad
from samples import call_inputs, call_params, op_calls, run

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def default_print_options():
    torch.set_printoptions(profile="default")
    numbagrad.set_printoptions(profile="default")
    yield
    torch.set_printoptions(profile="default")
    numbagrad.set_printoptions(profile="default")


@pytest.mark.parametrize("case", call_params(op_calls()))
def test_case_matches_torch_node_values_and_gradients(case):
    ours, theirs = call_inputs(case, numbagrad), call_inputs(case, torch)
    y, y_torch = run(case, numbagrad, *ours), run(case, torch, *theirs)
    assert type(y_torch.grad_fn).__name__ == case.node
    assert type(y.grad_fn).__name__ == case.node
    assert tuple(y.shape) == tuple(y_torch.shape)
    np.testing.assert_allclose(y.detach().numpy(), y_torch.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(1).standard_normal(tuple(y_torch.shape))
    y.backward(numbagrad.tensor(g, dtype=numbagrad.float64))
    y_torch.backward(torch.tensor(g, dtype=torch.float64))
    for a, b in zip(ours, theirs):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


PROGRAMS = {
    "requires_grad_and_grad_fn": """
        x = torch.tensor([1., 2., 3.], requires_grad=True)
        print(x)
        y = x * x
        print(y)
        z = y.sum()
        print(z)
        z.backward()
        print(x.grad)
        print(x.is_leaf, y.is_leaf, y.requires_grad, x.grad_fn)
    """,
    "node_names_in_reprs": """
        a = torch.tensor([[1., -2.], [3., 4.]], requires_grad=True)
        b = torch.tensor([0.5, 1.5], requires_grad=True)
        for t in (a + b, a - b, a * b, a / b, a ** 2, 2 ** b, -a, 1 - b, a @ b, a.mm(a), a.sum(), a.sum(1),
                  a.mean(), a.mean(0), a.exp(), a.tanh(), a.relu(), a.sigmoid(), a.t(), a[0], a[:, 1:], a.view(4),
                  a.max(), a.abs(), a.clamp(0, 1), torch.where(a > 0, a, b), a.softmax(1), a.norm()):
            print(t)
    """,
    "float64_suffix": """
        x = torch.tensor([1.5, 2.0], dtype=torch.float64, requires_grad=True)
        print(x)
        print(x * 2)
        print(torch.zeros(2, dtype=torch.float64))
        print(torch.tensor(3.25, dtype=torch.double))
        print(x.dtype, x.float().dtype, x.shape, x.size(), x.size(0))
    """,
    "integer_and_bool_tensors": """
        i = torch.arange(6).reshape(2, 3)
        print(i)
        print(i * 2, i.sum(), i.dtype)
        print(torch.tensor([1, 2], dtype=torch.int32))
        print(torch.tensor([-100, 5, 7]))
        print(i > 2, (i > 2).dtype)
        print(torch.tensor(True), torch.tensor([True, False]))
    """,
    "four_decimals_and_padding": """
        print(torch.tensor([1 / 3, 2 / 3, 1.0]))
        print(torch.tensor([[1.5, -200.25], [3.0, 4.0]]))
        print(torch.tensor([7., 9., 11.]))
        print(torch.tensor([0.1, 100.0, -0.0001]))
    """,
    "scientific_mode": """
        print(torch.tensor([1e-5, 1e5]))
        print(torch.tensor([1e-10, 1.0]))
        print(torch.tensor([123456789.0, 1.0]))
        print(torch.tensor([1e-8, 2e-8], dtype=torch.float64))
    """,
    "wide_tensors_wrap_at_80_columns": """
        print(torch.arange(40.) / 7)
        print(torch.linspace(0, 1, 30))
        print(torch.arange(50))
        print(torch.arange(30.).reshape(2, 15) * 1000)
    """,
    "two_and_three_dimensional": """
        print(torch.arange(24.).reshape(2, 3, 4))
        print(torch.eye(3))
        print(torch.ones(2, 1, 2, dtype=torch.int64))
        print(torch.zeros(0), torch.zeros(2, 0))
    """,
    "broadcast_gradients": """
        a = torch.tensor([[1., 2., 3.], [4., 5., 6.]], requires_grad=True)
        b = torch.tensor([10., 20., 30.], requires_grad=True)
        c = torch.tensor([[2.], [3.]], requires_grad=True)
        loss = ((a * b + c) / (b - c)).sum()
        loss.backward()
        print(loss)
        print(a.grad)
        print(b.grad)
        print(c.grad)
    """,
    "type_promotion": """
        i = torch.tensor([1, 2, 3])
        f = torch.tensor([1., 2., 3.])
        d = torch.tensor([1., 2., 3.], dtype=torch.float64)
        print((i + 1.5).dtype, (i + 1).dtype, (i + True).dtype, (i * f).dtype, (f * d).dtype)
        print((f + torch.tensor(2., dtype=torch.float64)).dtype, (i + torch.tensor(2.)).dtype)
        print((i / 2).dtype, (i / i).dtype, i.sum().dtype, (torch.tensor([True]) + 1).dtype)
        j = torch.tensor([1, 2, 3], dtype=torch.int32)
        print((j + 1).dtype, (j + i).dtype, (j + 2.5).dtype, (j + torch.tensor(1.5, dtype=torch.float64)).dtype)
        print(torch.exp(i), torch.tensor([True, False]) & torch.tensor([True, True]))
    """,
    "reductions_and_shapes": """
        x = torch.arange(12.).reshape(3, 4)
        print(x.sum(0), x.sum(1, keepdim=True), x.mean(), x.amax(1), x.prod(0))
        print(x.var(), x.std(1), x.norm(), x.argmax(), x.argmax(1))
        print(x.t().shape, x.permute(1, 0).shape, x.unsqueeze(1).shape, x.view(-1).shape, x.flatten().shape)
        print(torch.cat([x, x]).shape, torch.stack([x, x], 2).shape, x[None, ..., None].shape)
        print(x[1], x[:, 2], x[x > 5], x[torch.tensor([2, 0])], x[..., -1])
    """,
    "inplace_and_versions": """
        x = torch.ones(3)
        v = x[1:]
        print(x._version, v._version)
        x.add_(1)
        v.mul_(3)
        x[0] = 7
        x += 1
        print(x, v, x._version, v._version)
        w = torch.tensor([1., 2.], requires_grad=True)
        h = w * 2
        h.mul_(w)
        h[0] = 0.0
        h.sum().backward()
        print(h, w.grad)
    """,
    "softmax_and_matmul": """
        x = torch.tensor([[1., 2., 3.], [1., 0., -1.]], requires_grad=True)
        w = torch.tensor([[0.5, -1.], [2., 0.3], [1., 1.5]], requires_grad=True)
        y = torch.log_softmax(x @ w, dim=1)
        print(y)
        (y * torch.tensor([[1., 3.], [-2., 0.5]])).sum().backward()
        print(x.grad)
        print(w.grad)
    """,
    "max_min_sort_return_types": """
        x = torch.tensor([[1., 5., 2.], [3., 2., 8.]], requires_grad=True)
        print(x.max(1))
        print(torch.min(x, 0, keepdim=True))
        print(x.sort(descending=True))
        values, indices = x.max(dim=0)
        values.sum().backward()
        print(indices, x.grad)
    """,
    "no_grad_and_detach": """
        x = torch.tensor([1., 2.], requires_grad=True)
        with torch.no_grad():
            y = x * 2
        print(y, y.requires_grad)
        d = x.detach()
        print(d, d.requires_grad, x.data)
        print(torch.tensor(2.5).item(), torch.tensor([[1, 2]]).tolist())
    """,
}

_MODULE_NAME = re.compile(r"\btorch\.(Size|float32|float64|int64|int32|bool|return_types)\b")


def _run(module, source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(textwrap.dedent(source), "<program>", "exec"), {"torch": module})
    return out.getvalue()


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_prints_what_torch_prints(name):
    expected = _MODULE_NAME.sub(r"numbagrad.\1", _run(torch, PROGRAMS[name]))
    assert _run(numbagrad, PROGRAMS[name]) == expected
