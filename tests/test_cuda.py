"""cuda tensors, compared with the CPU path. Run under Numba's simulator on tiny shapes:

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/test_cuda.py

(the simulator runs every GPU thread in Python). On a machine with a GPU the same tests run on the hardware.
"""

import os
import warnings

import numpy as np
import pytest

import numbagrad
from numbagrad.scalar_math import ROWS, example_params

if not numbagrad.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

from numbagrad.backend import cuda as backend  # noqa: E402
from numbagrad.ops.elementwise import function_for  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def both(array, requires_grad=False):
    """The same float64 data as a cpu and a cuda tensor."""
    a = numbagrad.tensor(np.asarray(array, dtype=np.float64), requires_grad=requires_grad)
    b = numbagrad.tensor(np.asarray(array, dtype=np.float64), device="cuda", requires_grad=requires_grad)
    return a, b


def host(t):
    assert t.device.type == "cuda", f"expected a cuda result, got {t.device}"
    return t.detach().cpu().numpy()


def row_inputs(row, rng):
    shapes = [(2, 3), (3,), (2, 1)][: row.arity]
    return [rng.uniform(*row.domain, size=s) for s in shapes]


@pytest.mark.parametrize("name", sorted(name for name, row in ROWS.items() if row.differentiable))
def test_every_row_forward_and_backward_match_cpu(name):
    row = ROWS[name]
    data = row_inputs(row, np.random.default_rng(1))
    needs = [i not in row.no_formula for i in range(len(data))]  # (zeta's x, igamma's a: no formula)
    cpu = [numbagrad.tensor(d, requires_grad=n) for d, n in zip(data, needs)]
    gpu = [numbagrad.tensor(d, device="cuda", requires_grad=n) for d, n in zip(data, needs)]
    fn = function_for(name)
    out_cpu = fn.apply(*cpu, *example_params(ROWS[name]))
    out_gpu = fn.apply(*gpu, *example_params(ROWS[name]))
    np.testing.assert_allclose(host(out_gpu), out_cpu.detach().numpy(), rtol=1e-12)
    g = np.random.default_rng(2).uniform(0.5, 1.5, size=out_cpu.shape)
    out_cpu.backward(numbagrad.tensor(g))
    out_gpu.backward(numbagrad.tensor(g, device="cuda"))
    for c, d in zip(cpu, gpu):
        if c.requires_grad:
            np.testing.assert_allclose(host(d.grad), c.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(name for name, row in ROWS.items() if not row.differentiable))
def test_every_row_without_gradient_runs_on_the_device_like_cpu(name):
    row = ROWS[name]
    data = row_inputs(row, np.random.default_rng(1))
    if row.integral_only:
        data = [np.round(d * 3).astype(np.int64) for d in data]
    out_cpu = function_for(name).apply(*[numbagrad.tensor(d) for d in data])
    out_gpu = function_for(name).apply(*[numbagrad.tensor(d, device="cuda") for d in data])
    assert out_gpu.device.type == "cuda" and out_gpu.dtype == out_cpu.dtype
    if out_cpu.is_floating_point():  # (the Bessel functions: exp and log of the device's libm, to the last bit or so)
        np.testing.assert_allclose(host(out_gpu), out_cpu.numpy(), rtol=1e-14)
    else:
        np.testing.assert_array_equal(host(out_gpu), out_cpu.numpy())


def test_float32_forward_matches_numpy_reference():
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    t = numbagrad.tensor(x, device="cuda")
    np.testing.assert_allclose(host(t.tanh()), np.tanh(x), rtol=1e-6)
    assert t.tanh().dtype == numbagrad.float32


def test_scalar_operands_and_zero_dim_cpu_tensor():
    a, b = both([1.0, 2.0, 3.0])
    np.testing.assert_allclose(host(2.0 - b * numbagrad.tensor(3.0)), 2.0 - a.numpy() * 3)


def test_transfers_round_trip_and_report_device():
    x = numbagrad.arange(6.0).reshape(2, 3)
    y = x.cuda()
    assert y.device == numbagrad.device("cuda", 0) and y.is_cuda and not x.is_cuda
    assert y.to("cpu").device.type == "cpu"
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    assert x.to("cuda", numbagrad.float64).dtype == numbagrad.float64


def test_storage_is_a_numba_device_array():
    if backend.simulator():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray as DeviceArray
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray as DeviceArray

    t = numbagrad.ones(3, device="cuda")
    assert isinstance(t._data, DeviceArray)
    with pytest.raises(AttributeError):
        t._data.sum  # noqa: B018 - the simulator must not hand numpy's methods to ops by accident


@pytest.mark.parametrize(
    "make",
    [
        lambda: numbagrad.zeros(2, 3, device="cuda"),
        lambda: numbagrad.ones(2, device="cuda"),
        lambda: numbagrad.full((2,), 7.0, device="cuda"),
        lambda: numbagrad.arange(4, device="cuda"),
        lambda: numbagrad.randn(2, 2, device="cuda"),
        lambda: numbagrad.tensor([1, 2], device="cuda"),
    ],
)
def test_creation_functions_take_device(make):
    assert make().device.type == "cuda"


def test_printing_shows_the_device():
    t = numbagrad.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    assert repr(t) == "tensor([1., 2.], device='cuda:0', requires_grad=True)"
    assert repr(t * 2) == "tensor([2., 4.], device='cuda:0', grad_fn=<MulBackward0>)"


def test_mixing_devices_is_an_error():
    a = numbagrad.ones(2)
    b = numbagrad.ones(2, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b


def test_numpy_of_cuda_tensor_raises_torch_error():
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        numbagrad.ones(2, device="cuda").numpy()


def test_gradient_accumulates_across_backward_calls_and_reduces_broadcast():
    (w_cpu, w), (b_cpu, b) = both([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], True), both([0.5, -1.0, 2.0], True)
    for _ in range(2):
        ((w * b).tanh() * 3).sum().backward()
        ((w_cpu * b_cpu).tanh() * 3).sum().backward()
    np.testing.assert_allclose(host(w.grad), w_cpu.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(host(b.grad), b_cpu.grad.numpy(), rtol=1e-12)
    assert b.grad.shape == (3,)


@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_with_dim_run_on_the_device(op, dim, keepdim):
    data = np.random.default_rng(3).normal(size=(2, 3, 4))
    a, b = both(data, True)
    kwargs = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    if dim is None and op != "sum":
        kwargs = {"dim": (0, 1, 2)} if op in ("amax", "amin") else {}
    out_a, out_b = getattr(a, op)(**kwargs), getattr(b, op)(**kwargs)
    np.testing.assert_allclose(host(out_b), out_a.detach().numpy(), rtol=1e-12)
    out_a.sum().backward()
    out_b.sum().backward()
    np.testing.assert_allclose(host(b.grad), a.grad.numpy(), rtol=1e-12)


def test_large_reduction_uses_partial_sums():
    data = np.arange(1000, dtype=np.float64)
    assert numbagrad.tensor(data, device="cuda").sum().item() == data.sum()


def test_integer_sum_is_int64():
    t = numbagrad.tensor([[True, False], [True, True]], device="cuda")
    assert t.sum().item() == 3 and t.sum().dtype == numbagrad.int64


@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 3)), ((2, 3, 4), (4, 5)), ((3,), (3, 2)), ((4, 3), (3,))])
def test_matmul_matches_cpu_values_and_gradients(sa, sb):
    rng = np.random.default_rng(4)
    (a_cpu, a), (b_cpu, b) = both(rng.normal(size=sa), True), both(rng.normal(size=sb), True)
    out, out_cpu = a @ b, a_cpu @ b_cpu
    np.testing.assert_allclose(host(out), out_cpu.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    out_cpu.sum().backward()
    np.testing.assert_allclose(host(a.grad), a_cpu.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(host(b.grad), b_cpu.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("index", [1, (slice(None), 1), (Ellipsis, None), (slice(0, 2), slice(1, None))])
def test_basic_indexing_gives_views_with_gradients(index):
    a, b = both(np.arange(12.0).reshape(3, 4), True)
    out, out_cpu = b[index], a[index]
    np.testing.assert_array_equal(host(out), out_cpu.detach().numpy())
    (out * 2).sum().backward()
    (out_cpu * 2).sum().backward()
    np.testing.assert_array_equal(host(b.grad), a.grad.numpy())


def test_advanced_indexing_and_masks():
    a, b = both(np.arange(6.0))
    idx = numbagrad.tensor([4, 0, 4])
    np.testing.assert_array_equal(host(b[idx.cuda()]), a[idx].numpy())
    np.testing.assert_array_equal(host(b[b > 2]), a[a > 2].numpy())


def test_setitem_basic_advanced_and_broadcast():
    a, b = both(np.zeros((3, 4)))
    for t in (a, b):
        t[0] = 5.0
        t[:, 1] = numbagrad.tensor([1.0, 2.0, 3.0], device=t.device)
        t[numbagrad.tensor([2], device=t.device)] = -1.0
        t[1:, 2:] += 1
    np.testing.assert_array_equal(host(b), a.numpy())


def test_inplace_on_a_transposed_view_writes_through():
    a, b = both(np.arange(6.0).reshape(2, 3))
    for t in (a, b):
        t.t().mul_(2)
    np.testing.assert_array_equal(host(b), a.numpy())


def test_where_and_cat():
    a, b = both([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(host(numbagrad.where(b > 0, b, 0.0)), numbagrad.where(a > 0, a, 0.0).numpy())
    np.testing.assert_array_equal(host(numbagrad.cat([b, b * 2])), numbagrad.cat([a, a * 2]).numpy())


def test_apply_runs_the_callable_on_the_device():
    t = numbagrad.tensor([1.0, 2.0, 3.0], device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled, not the slow fallback
        assert t.apply_(lambda v: v * v + 1) is t
    np.testing.assert_array_equal(host(t), [2.0, 5.0, 10.0])
    assert t._version == 1


def test_apply_on_a_non_contiguous_view():
    t = numbagrad.arange(6.0, device="cuda").reshape(2, 3)
    t.t().apply_(lambda v: -v)
    np.testing.assert_array_equal(host(t), -np.arange(6.0).reshape(2, 3))


def test_map_runs_the_callable_on_the_device():
    """It used to write into a host copy and leave the cuda tensor unchanged."""
    t = numbagrad.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert t.map_(numbagrad.tensor([10.0, 20.0], device="cuda"), lambda a, b: a * b - 1) is t
    np.testing.assert_array_equal(host(t), [[9.0, 39.0], [29.0, 79.0]])
    assert t._version == 1


def test_map_and_apply_fall_back_to_python_on_a_host_copy_and_write_back():
    labels = {1.0: 5.0}

    def relabel(v):  # a dict global: Numba cannot compile it
        return labels.get(v, v)

    t = numbagrad.tensor([1.0, 2.0], device="cuda")
    with pytest.warns(RuntimeWarning, match="Numba could not compile relabel"):
        t.apply_(relabel)
    np.testing.assert_array_equal(host(t), [5.0, 2.0])


def test_map_refuses_a_tensor_on_another_device():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        numbagrad.ones(2, device="cuda").map_(numbagrad.ones(2), lambda a, b: a + b)


def test_apply_of_a_non_number_raises_and_leaves_the_tensor():
    t = numbagrad.tensor([1.0, 2.0], device="cuda")
    with pytest.raises(TypeError, match="must be real number, not NoneType"):
        t.apply_(lambda v: None)
    np.testing.assert_array_equal(host(t), [1.0, 2.0])


def test_apply_refuses_tensors_that_require_grad():
    t = numbagrad.ones(2, device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call apply_"):
        t.apply_(lambda v: v)


def test_custom_function_on_cuda():
    class Cube(numbagrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = numbagrad.tensor([1.0, -2.0], device="cuda", requires_grad=True)
    y = Cube.apply(x)
    assert repr(y) == "tensor([ 1., -8.], device='cuda:0', grad_fn=<CubeBackward>)"
    y.sum().backward()
    np.testing.assert_array_equal(host(x.grad), [3.0, 12.0])


def test_user_elementwise_function_on_cuda():
    import math

    @numbagrad.elementwise(grads=[lambda g, out, x: g * (out + (1 - out) / (1 + math.exp(-x)))])
    def swish(x):
        return x / (1 + math.exp(-x))

    a, b = both([-1.0, 0.5, 2.0], True)
    swish(b).sum().backward()
    swish(a).sum().backward()
    np.testing.assert_allclose(host(b.grad), a.grad.numpy(), rtol=1e-12)


def _sgd_step(i, p, g, lr):
    p[i] -= lr * g[i]


def test_foreach_runs_a_fused_update():
    p = numbagrad.tensor([1.0, 2.0], device="cuda")
    g = numbagrad.tensor([0.5, -1.0], device="cuda")
    backend.foreach(_sgd_step, [p._data, g._data], (0.1,))
    np.testing.assert_allclose(host(p), [0.95, 2.1])


def test_generated_loop_with_closing_reductions_combines_blocks_atomically():
    from numbagrad.backend import codegen

    body = "v = x[i] * x[i]\ntotal += v\npeak = max(peak, v)"
    loop = codegen.loop_source("cuda", "kernel", ["x"], body, "x.shape[0]", reduce=(("total", "+"), ("peak", "max")))
    kernel = codegen.load_module("test_cuda_reduce", codegen.module_source("cuda", loop)).kernel
    data = np.linspace(-2.0, 1.0, 50)
    total, peak = backend.full((1,), 0.0, np.float64), backend.full((1,), -np.inf, np.float64)
    kernel[2, 8](backend.from_host(data), total, peak)  # two blocks of a power-of-two size
    np.testing.assert_allclose(backend.to_host(total), [(data * data).sum()], rtol=1e-12)
    assert backend.to_host(peak).tolist() == [4.0]


def test_optimizer_step_on_cuda():
    optim = pytest.importorskip("numbagrad.optim")
    if not hasattr(optim, "SGD"):
        pytest.skip("numbagrad.optim.SGD is not written yet")
    w = numbagrad.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(host(w), [0.8, 1.6])


def test_as_tensor_shares_memory_through_the_cuda_array_interface():
    src = numbagrad.tensor([1.0, 2.0], device="cuda")
    view = numbagrad.as_tensor(src.detach())  # a tensor is returned as is; go through the interface:
    assert view is not None
    shared = numbagrad.Tensor._make(backend.as_device_array(src))
    shared[0] = 9.0
    assert src[0].item() == 9.0
    assert src.__cuda_array_interface__["shape"] == (2,)


def test_cuda_array_interface_refuses_tensors_that_require_grad():
    with pytest.raises(RuntimeError, match="requires grad"):
        numbagrad.ones(2, device="cuda", requires_grad=True).__cuda_array_interface__  # noqa: B018


def test_namespace_queries():
    assert numbagrad.cuda.is_available()
    assert numbagrad.cuda.device_count() >= 1
    numbagrad.cuda.synchronize()


@pytest.mark.parametrize(
    ("name", "update"),
    [("SGD", "sgd"), ("Adam", "adam"), ("AdamW", "adam"), ("RMSprop", "rmsprop"), ("Adagrad", "adagrad")],
)
def test_optimizer_steps_run_on_the_device(name, update, monkeypatch):
    """The fused update runs as a CUDA kernel (``backend.cuda.foreach``), not through a host copy."""
    launched = []
    original = backend.foreach
    monkeypatch.setattr(backend, "foreach", lambda step, *args: launched.append(step.__name__) or original(step, *args))
    w = numbagrad.nn.Parameter(numbagrad.tensor([1.0, 2.0, 3.0], device="cuda"))
    w_cpu = numbagrad.nn.Parameter(numbagrad.tensor([1.0, 2.0, 3.0]))
    for p in (w, w_cpu):
        opt = getattr(numbagrad.optim, name)([p], lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
    assert launched == [f"{update}_update"] * 2
    np.testing.assert_allclose(w.cpu().tolist(), w_cpu.tolist(), rtol=1e-6)
