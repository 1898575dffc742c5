"""``numbagrad.compile`` on cuda tensors: the CPU file's checks with ``device="cuda"``, on tiny shapes. Run under
Numba's simulator in its own process (it must be set before numba is imported):

    NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/test_compile_cuda.py

On a machine with a GPU the same tests run on the hardware.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numbagrad as ng

if not ng.cuda.is_available():
    pytest.skip("no CUDA GPU, and NUMBA_ENABLE_CUDASIM=1 is not set", allow_module_level=True)

from test_compile import ROW_CALLS, ClippedIdentity, _swish_class, chains, check_chain, row_program  # noqa: E402


@pytest.mark.torch
@settings(max_examples=6, deadline=None, derandomize=True)
@given(case=chains(max_dim=3), seed=st.integers(0, 2**16))
def test_random_chains_on_cuda_match_eager_and_torch(case, seed):
    check_chain(*case, np.float64, seed, device="cuda")


@pytest.mark.torch
@pytest.mark.parametrize(
    "case",
    [
        ([(3, 4), (4,), (3, 1)], [("mul", 1), ("add", 2), ("relu", 0)], ("sum", None, False)),
        ([(3, 4), (4,)], [("mul", 1), ("tanh", 0)], ("mean", 0, False)),
        ([(3, 4), (4,)], [("mul", 1), ("sigmoid", 0)], ("sum", 1, True)),
        ([(2, 3, 2), (3, 1), (1,)], [("mul", 1), ("sub", 2), ("exp", 0)], None),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fixed_chains_on_cuda(case, dtype):
    check_chain(*case, dtype, seed=3, device="cuda")


def test_every_table_row_compiled_on_cuda_matches_eager():
    program, run = row_program(device="cuda", shape=(2, 2))
    compiled = ng.compile(program)
    run(compiled)
    values, grads = run(compiled)
    eager_values, eager_grads = run(program)
    assert len(compiled.plans[0].groups) == 1
    for name, v, e in zip(ROW_CALLS, values, eager_values):
        np.testing.assert_allclose(v, e, rtol=1e-12, atol=1e-14, err_msg=name)
    for g, e in zip(grads, eager_grads):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 0 / 0 in the simulator (numpy scalars)
@pytest.mark.parametrize("dim", [None, 1])
def test_amax_on_cuda_shares_ties_and_propagates_nan(dim):
    f = ng.compile(lambda x: (x * 1.0).amax() if dim is None else (x * 1.0).amax(dim))
    for _ in range(2):
        x = ng.tensor([[1.0, 3.0, 3.0], [2.0, np.nan, 0.0]], device="cuda", requires_grad=True)
        out = f(x)
        out.sum().backward()
    eager_x = ng.tensor([[1.0, 3.0, 3.0], [2.0, np.nan, 0.0]], requires_grad=True)
    eager = (eager_x * 1.0).amax() if dim is None else (eager_x * 1.0).amax(dim)
    eager.sum().backward()
    np.testing.assert_array_equal(out.detach().cpu().numpy(), eager.detach().numpy())
    np.testing.assert_array_equal(x.grad.cpu().numpy(), eager_x.grad.numpy())


def test_compiled_module_on_cuda_sees_a_new_batch_size():
    nn = ng.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to("cuda")
    cm = ng.compile(model)
    for batch in (2, 2, 3, 3):
        x = ng.randn(batch, 3).to("cuda")
        out = cm(x)
        assert out.device.type == "cuda"
        np.testing.assert_allclose(out.detach().cpu().numpy(), model(x).detach().cpu().numpy(), rtol=1e-6)


def test_graph_break_on_cuda_is_correct():
    def branchy(x):
        return x * 2 if x.sum() > 0 else x * 3

    f = ng.compile(branchy)
    for v in (1.0, -1.0):
        x = ng.tensor([v], device="cuda")
        np.testing.assert_array_equal(f(x).cpu().numpy(), [2 * v if v > 0 else 3 * v])
    assert len(f.graph_breaks) == 1


def test_compiled_custom_function_hands_its_backward_the_forward_values_on_cuda():
    swish = _swish_class()
    v = np.linspace(-3, 3, 7)
    for _ in range(3):
        x = ng.tensor(v, requires_grad=True, device="cuda")
        y = swish.apply(x)
        y.sum().backward()
    assert swish.forward._shared
    s = 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(y.detach().cpu().numpy(), v * s, rtol=1e-12)
    np.testing.assert_allclose(x.grad.cpu().numpy(), s + v * s * (1 - s), rtol=1e-12)


def test_a_custom_function_called_in_compiled_code_runs_compiled_on_cuda():
    f = ng.compile(lambda x: (ClippedIdentity.apply(x * 3.0) * 2.0).sum())
    for _ in range(3):
        x = ng.tensor([-1.0, 0.1, 2.0], requires_grad=True, device="cuda")
        f(x).backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), [1.5, 1.5, 1.5])
    assert ClippedIdentity.__dict__["_compiled_twin"].forward.plans


def test_a_transformer_blocks_fused_bias_and_residual_norm_on_cuda_match_eager():
    from numbagrad.ops.nn_ops import ResidualLayerNorm
    from test_compile_neighbours import _Block

    ng.manual_seed(0)
    block = _Block(4).to("cuda")
    x = ng.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32), device="cuda")
    weights = ng.linspace(-1.0, 1.0, 24, device="cuda").reshape(2, 3, 4)
    compiled = ng.compile(block, fullgraph=True)
    results = []
    for run in (block, compiled, compiled):
        block.zero_grad()
        (run(x) * weights).sum().backward()
        results.append([p.grad.cpu().numpy() for p in block.parameters()])
    for got in results[1:]:
        for a, b in zip(got, results[0], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    (plan,) = compiled._compiled.plans
    assert ResidualLayerNorm in [getattr(step, "cls", None) for step in plan.trace.steps]
