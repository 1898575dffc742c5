"""The breadth of ops on cuda tensors, compared with the CPU path (values, dtypes, node names, gradients). Run under
Numba's simulator on tiny shapes:

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/test_cuda_ops.py

The elementwise rows (sinh ... addcdiv) are covered by tests/test_cuda.py's generated row tests; this file covers the
other ops, whose primitives reach the device through the cuda backend (host round trips, a diagonal view).
"""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

pytestmark = pytest.mark.cuda

X = np.arange(12.0).reshape(3, 4) / 5 - 1.0
M = np.random.default_rng(0).standard_normal((4, 4))
ZEROS = np.array([[2.0, 0.0, 3.0], [1.5, 2.0, 0.0], [0.0, 2.0, 3.0]])


def _run(device, fn, arrays):
    inputs = [numbagrad.tensor(a, device=device, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*inputs)
    outs = list(out) if isinstance(out, tuple) else [out]
    values = [(o.detach().cpu().numpy(), o.dtype, o.device.type) for o in outs]
    nodes = [type(o.grad_fn).__name__ if o.grad_fn is not None else None for o in outs]
    diff = [o for o in outs if o.requires_grad]
    grads = []
    if diff:
        total = sum((o * numbagrad.arange(1.0, o.numel() + 1.0, device=device).reshape(o.shape)).sum() for o in diff)
        total.backward()
        grads = [x.grad.cpu().numpy() for x in inputs if x.requires_grad]
    return values, nodes, grads


CASES = {
    # reductions and scans
    "cumsum": (lambda x: numbagrad.cumsum(x, 1), [X]),
    "cumprod": (lambda x: x.cumprod(0), [X]),
    "cumprod-zeros": (lambda x: numbagrad.cumprod(x, 1), [ZEROS]),
    "logsumexp": (lambda x: numbagrad.logsumexp(x, 1), [X]),
    "var_mean": (lambda x: numbagrad.var_mean(x, 0), [X]),
    "var_dim": (lambda x: x.var(1), [X]),
    "var_dims_keepdim": (lambda x: x.var((0, 1), keepdim=True, correction=0), [X]),
    "std_dim": (lambda x: x.std(0), [X]),
    "std_mean": (lambda x: numbagrad.std_mean(x, 1, keepdim=True), [X]),
    "topk": (lambda x: numbagrad.topk(x, 2), [X]),
    "argsort": (lambda x: numbagrad.argsort(x, 0, descending=True), [X]),
    "unique": (lambda x: numbagrad.unique((x * 2).round().detach(), return_inverse=True, return_counts=True), [X]),
    # linear algebra
    "addmm": (lambda a, b, c: numbagrad.addmm(a, b, c, beta=0.5, alpha=2), [X, X, M]),
    "baddbmm": (lambda a, b, c: numbagrad.baddbmm(a[None], b[None], c[None]), [X, X, M]),
    "einsum-matmul": (lambda a, b: numbagrad.einsum("ij,jk->ik", a, b), [X, M]),
    "mm": (lambda a, b: a @ b, [X, M]),
    "bmm-stacks": (lambda a, b: a[None] @ b[None], [X, M]),
    "cat": (lambda a, b: numbagrad.cat([a, b], 0), [X, M]),
    "mse-mean": (lambda a, b: numbagrad.nn.functional.mse_loss(a, b), [X, X[::-1].copy()]),
    "mse-none": (lambda a, b: numbagrad.nn.functional.mse_loss(a, b, reduction="none"), [X, X[::-1].copy()]),
    "leaky_relu": (lambda a: numbagrad.nn.functional.leaky_relu(a, 0.2), [X]),
    "sdpa-causal": (
        lambda a: numbagrad.nn.functional.scaled_dot_product_attention(a[None], a[None], a[None], is_causal=True),
        [X],
    ),
    "einsum-diagonal": (lambda m: numbagrad.einsum("ii->i", m), [M]),
    "einsum-three": (lambda a, b: numbagrad.einsum("ij,jk,kl->il", a, b, b), [X, M]),
    "outer": (lambda a: numbagrad.outer(a[0], a[1]), [X]),
    "trace": (lambda m: numbagrad.trace(m), [M]),
    "diag-matrix": (lambda m: numbagrad.diag(m, 1), [M]),
    "diag-vector": (lambda m: numbagrad.diag(m[0], -1), [M]),
    "diagonal": (lambda m: numbagrad.diagonal(m, -1), [M]),
    "triu": (lambda m: numbagrad.triu(m, 1), [M]),
    "tril": (lambda m: m.tril(), [M]),
    # indexing
    "gather": (lambda x: numbagrad.gather(x, 1, numbagrad.tensor([[0, 1], [2, 3], [1, 0]], device="cuda")), [X]),
    "scatter": (lambda x: x.scatter(1, numbagrad.tensor([[0], [2], [1]], device="cuda"), x[:, 3:] * 2), [X]),
    "scatter-value": (lambda x: x.scatter(0, numbagrad.tensor([[2, 0, 1, 1]], device="cuda"), 5.0), [X]),
    "scatter_add": (
        lambda x: x.scatter_add(1, numbagrad.tensor([[0, 0], [1, 1], [3, 3]], device="cuda"), x[:, :2] * 2),
        [X],
    ),
    "index_select": (lambda x: x.index_select(1, numbagrad.tensor([3, 0, 3], device="cuda")), [X]),
    "index_add": (lambda x: x.index_add(0, numbagrad.tensor([0, 0], device="cuda"), x[1:] * 2), [X]),
    "index_fill": (lambda x: x.index_fill(1, numbagrad.tensor([1], device="cuda"), -2.0), [X]),
    "index_put": (lambda x: x.index_put((numbagrad.tensor([0, 2], device="cuda"),), x[1] * 3, accumulate=True), [X]),
    "masked_fill": (lambda x: x.masked_fill(x > 0, 0.5), [X]),
    "masked_select": (lambda x: x.masked_select(x > 0), [X]),
    "masked_scatter": (lambda x: x.masked_scatter(x > 0, x.flatten() * 3), [X]),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim=0), [X]),
    "repeat_interleave-tensor": (lambda x: x.repeat_interleave(numbagrad.tensor([1, 0, 2], device="cuda"), 0), [X]),
    "fill_diagonal_": (lambda x: (x * 1).fill_diagonal_(3.0), [X]),
    "masked_fill_": (lambda x: (x * 1).masked_fill_(x < 0, 1.0), [X]),
    # shape
    "flip": (lambda x: numbagrad.flip(x, [0, 1]), [X]),
    "roll": (lambda x: x.roll((1, -1), (0, 1)), [X]),
    "roll-flat": (lambda x: x.roll(5), [X]),
    "split": (lambda x: x.split([1, 3], 1), [X]),
    "chunk": (lambda x: x.chunk(2), [X]),
    "unbind": (lambda x: x.unbind(1), [X]),
}


def _on_device(fn, device):
    """``fn`` with the index tensors it builds on "cuda" built on ``device`` instead."""
    if device == "cuda":
        return fn
    original = numbagrad.tensor

    def tensor(data, *args, device=None, **kwargs):
        return original(data, *args, **kwargs)

    def wrapped(*inputs):
        numbagrad.tensor = tensor
        try:
            return fn(*inputs)
        finally:
            numbagrad.tensor = original

    return wrapped


@pytest.mark.parametrize("name", list(CASES))
def test_op_on_cuda_matches_cpu(name):
    fn, arrays = CASES[name]
    cpu = _run("cpu", _on_device(fn, "cpu"), arrays)
    gpu = _run("cuda", fn, arrays)
    for (a, da, _), (b, db, device) in zip(cpu[0], gpu[0]):
        assert device == "cuda" and da == db
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
    assert cpu[1] == gpu[1]
    for a, b in zip(cpu[2], gpu[2]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_diagonal_of_a_cuda_tensor_is_a_view_that_writes_through():
    m = numbagrad.zeros(3, 3, device="cuda")
    m.diagonal().fill_(2.0)
    np.testing.assert_array_equal(m.cpu().numpy(), np.eye(3) * 2)


def test_random_ops_draw_onto_the_device():
    p = numbagrad.full((4,), 0.5, device="cuda")
    assert numbagrad.bernoulli(p).device.type == "cuda"
    assert numbagrad.multinomial(p, 2).device.type == "cuda"
    assert numbagrad.normal(p, 1.0).device.type == "cuda"
    assert numbagrad.zeros(3, device="cuda").exponential_().device.type == "cuda"


def test_float16_elementwise_on_cuda_computes_in_float32_like_the_cpu():
    data = np.linspace(0.1, 3.0, 9)
    cpu = numbagrad.tensor(data, dtype=numbagrad.float16, requires_grad=True)
    gpu = numbagrad.tensor(data, dtype=numbagrad.float16, device="cuda", requires_grad=True)
    outs = [x.exp() * x for x in (cpu, gpu)]
    outs[0].backward(numbagrad.ones(9, dtype=numbagrad.float16))
    outs[1].backward(numbagrad.ones(9, dtype=numbagrad.float16, device="cuda"))
    assert outs[1].dtype is numbagrad.float16 and gpu.grad.dtype is numbagrad.float16
    np.testing.assert_array_equal(outs[1].detach().cpu().numpy(), outs[0].detach().numpy())
    np.testing.assert_array_equal(gpu.grad.cpu().numpy(), cpu.grad.numpy())


@pytest.mark.parametrize("op", ["any", "all"])
def test_any_and_all_reduce_on_the_device(op):
    data = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 0.0], [3.0, 4.0, 5.0]])
    for dim in (None, 0, 1):
        kwargs = {} if dim is None else {"dim": dim}
        gpu = getattr(numbagrad, op)(numbagrad.tensor(data, device="cuda"), **kwargs)
        cpu = getattr(numbagrad, op)(numbagrad.tensor(data), **kwargs)
        assert gpu.device.type == "cuda" and gpu.dtype is numbagrad.bool
        np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (the simulator computes with numpy scalars)
@pytest.mark.parametrize("exponent", [0.5, -0.5, 2.5])
def test_pow_roots_and_fractions_on_cuda_match_the_cpu_at_zeros_infinities_and_negatives(exponent):
    """The kernels take torch's sqrt and 1 / sqrt for 0.5 and -0.5 (-0 and -inf are where they differ from
    pow); the CPU computes them with its own versions, the device with pow corrected there."""
    data = np.array([-0.0, 0.0, -np.inf, np.inf, -2.0, 0.25, 4.0, np.nan])
    for dtype in (numbagrad.float32, numbagrad.float64):
        cpu = numbagrad.tensor(data, dtype=dtype) ** exponent
        gpu = numbagrad.tensor(data, dtype=dtype, device="cuda") ** exponent
        got, want = gpu.cpu().numpy(), cpu.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
