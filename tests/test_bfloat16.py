"""bfloat16, as torch's: 2-byte storage (ml_dtypes' bfloat16), computed in float32 and rounded to nearest even
once per op, with torch's promotion, finfo, printing, gradients, optimizer steps and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6)).astype(np.float32)
W1 = rng.standard_normal((8, 6)).astype(np.float32) * 0.4
B1 = rng.standard_normal(8).astype(np.float32) * 0.1
W2 = rng.standard_normal((3, 8)).astype(np.float32) * 0.4
B2 = rng.standard_normal(3).astype(np.float32) * 0.1
TARGETS = np.array([0, 2, 1, 2])
IMAGES = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
KERNEL = rng.standard_normal((3, 2, 3, 3)).astype(np.float32) * 0.3


def wide(t) -> np.ndarray:
    """A tensor of either library as a float32 numpy array (torch's bfloat16 has no ``numpy()``)."""
    return t.detach().float().numpy()


def bf16(lib, data: np.ndarray, requires_grad: bool = False):
    return lib.tensor(data).to(lib.bfloat16).requires_grad_(requires_grad)


def close(ours, theirs, tol: float = 1e-2) -> None:
    """Same dtype name and values within bfloat16's tolerance (8 significant bits: relative 2**-8 per rounding)."""
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(wide(ours), wide(theirs), rtol=tol, atol=tol)


# --- the dtype -------------------------------------------------------------------------------------------------
def test_dtype_is_a_two_byte_float():
    d = numbagrad.bfloat16
    assert d.is_floating_point and d.itemsize == 2 and repr(d) == "numbagrad.bfloat16"
    x = numbagrad.ones(5, dtype=d)
    assert x.element_size() == 2 and x.numpy().nbytes == 10 and x.is_floating_point()


def test_finfo_matches_torch(torch):
    ours, theirs = numbagrad.finfo(numbagrad.bfloat16), torch.finfo(torch.bfloat16)
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.eps == 0.0078125 and ours.resolution == 0.01 and ours.bits == 16


@pytest.mark.parametrize("other", ["float16", "float32", "float64", "int64", "int32", "uint8", "bool", "bfloat16"])
def test_promote_types_matches_torch(torch, other):
    ours = numbagrad.promote_types(numbagrad.bfloat16, getattr(numbagrad, other))
    assert ours.name == str(torch.promote_types(torch.bfloat16, getattr(torch, other))).split(".")[-1]


@pytest.mark.parametrize(
    "other",
    [1, 1.5, True, np.ones((2,), np.int64), np.ones((2,), np.float32), np.ones((2,), np.float16), np.float64(2.0)],
    ids=["int", "float", "bool", "int64_tensor", "float32_tensor", "float16_tensor", "numpy_scalar"],
)
def test_binary_result_dtype_matches_torch(torch, other):
    def run(lib):
        b = other if not isinstance(other, np.ndarray) else lib.tensor(other)
        return bf16(lib, np.array([1.25, -2.0], np.float32)) + (b.item() if isinstance(b, np.generic) else b)

    close(run(numbagrad), run(torch))


def test_casting_rounds_to_nearest_even_as_torch(torch):
    step = 2.0**-8  # half a bfloat16 ulp at 1: ties go to the even neighbour
    values = np.array([1 + step, 1 + 3 * step, -(1 + 3 * step), 1 + step * 1.01, 3.14159, 1e38, 1e-40, np.inf, np.nan])
    values = values.astype(np.float32)
    ours, theirs = wide(bf16(numbagrad, values)), wide(bf16(torch, values))
    np.testing.assert_array_equal(ours, theirs)


def test_casting_every_kind_of_float32_bit_pattern_matches_torch(torch):
    """Normals, subnormals, infinities, nans of both signs and every rounding case, stepping through the 2**32
    patterns (the rounding kernel against torch's cast; a nan stays a nan, its payload is not compared: torch's
    vectorized cast writes 0xffff, its scalar one 0x7fc0)."""
    bits = np.arange(0, 2**32, 65521, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    ours = numbagrad.tensor(values).to(numbagrad.bfloat16).float().numpy()
    theirs = torch.from_numpy(values.copy()).to(torch.bfloat16).float().numpy()
    nan = np.isnan(values)
    assert np.isnan(ours[nan]).all() and np.isnan(theirs[nan]).all() and 0 < nan.sum() < nan.size
    np.testing.assert_array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))
    back = numbagrad.tensor(theirs).to(numbagrad.bfloat16).float().numpy()
    np.testing.assert_array_equal(back[~nan].view(np.uint32), theirs[~nan].view(np.uint32))


def test_conversion_methods_give_bfloat16(torch):
    x = numbagrad.tensor(X)
    assert x.bfloat16().dtype is numbagrad.bfloat16 and x.to(numbagrad.bfloat16).dtype is numbagrad.bfloat16
    np.testing.assert_array_equal(wide(x.bfloat16()), wide(torch.tensor(X).bfloat16()))
    assert x.bfloat16().float().dtype is numbagrad.float32


@pytest.mark.parametrize("shape", [(), (1,), (2, 3), (0, 2)])
def test_conversions_keep_the_shape(shape):
    x = numbagrad.ones(shape).bfloat16()
    assert x.shape == shape and x.float().shape == shape and x.double().shape == shape and x.half().shape == shape


def test_vector_norm_accumulates_in_float32_as_torch(torch):
    data = np.random.default_rng(0).standard_normal((30, 40)).astype(np.float32)
    for ord in (1, 2, 3, float("inf")):
        ours = numbagrad.linalg.vector_norm(bf16(numbagrad, data), ord)
        theirs = torch.linalg.vector_norm(bf16(torch, data), ord)
        assert ours.shape == () and ours.item() == theirs.item()


@pytest.mark.parametrize("ord", [1, 2, 3, float("inf")])
def test_tensor_norm_rounds_once_as_torch(torch, ord):
    """``Tensor.norm``: powers, sum and root in float32, one rounding (two bfloat16 roundings missed the nearest
    value by an ulp in one norm of three)."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        data = (rng.standard_normal((8, 8)) * rng.uniform(0.01, 10)).astype(np.float32)
        assert bf16(numbagrad, data).norm(ord).item() == bf16(torch, data).norm(ord).item()


@pytest.mark.parametrize("name", ["add", "sub"])
def test_alpha_scales_a_bfloat16_operand_in_the_result_dtype(torch, name):
    """``float32 + alpha * bfloat16``: the product is not rounded to bfloat16 first (torch scales in float32)."""
    a, b = X, np.random.default_rng(2).standard_normal(X.shape).astype(np.float32)
    ours = getattr(numbagrad, name)(numbagrad.tensor(a), bf16(numbagrad, b), alpha=-0.0173)
    theirs = getattr(torch, name)(torch.tensor(a), bf16(torch, b), alpha=-0.0173)
    assert ours.dtype == numbagrad.float32
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=2e-7)  # (torch fuses: an ulp at most)


def test_module_bfloat16_casts_parameters():
    m = numbagrad.nn.Linear(3, 2).bfloat16()
    assert m.weight.dtype is numbagrad.bfloat16 and m.bias.dtype is numbagrad.bfloat16 and m.weight.requires_grad


@pytest.mark.parametrize("data", [X, np.array([0.0, 1.0, -2.0], np.float32), np.array(3.5, np.float32)])
def test_printing_matches_torch(torch, data):
    ours = repr(bf16(numbagrad, data)).replace("numbagrad.", "torch.")
    assert ours == repr(bf16(torch, data))


def test_printing_with_grad_fn_matches_torch(torch):
    def run(lib):
        return repr(bf16(lib, X[:2], True) * 2).replace("numbagrad.", "torch.")

    assert run(numbagrad) == run(torch)


# --- kernels ---------------------------------------------------------------------------------------------------
UNARY = ["exp", "tanh", "sigmoid", "relu", "neg", "abs", "sqrt_abs", "log_abs", "square"]


@pytest.mark.parametrize("name", UNARY)
def test_elementwise_matches_torch(torch, name):
    def run(lib):
        x = bf16(lib, X)
        if name.endswith("_abs"):
            return getattr(x.abs() + 0.5, name[: -len("_abs")])()
        return getattr(x, name)()

    close(run(numbagrad), run(torch))


@pytest.mark.parametrize("op", ["add", "mul", "sub", "div", "maximum"])
def test_binary_matches_torch(torch, op):
    def run(lib):
        return getattr(lib, op)(bf16(lib, X), bf16(lib, X[::-1].copy()))

    close(run(numbagrad), run(torch))


@pytest.mark.parametrize("reduction", ["sum", "mean", "amax", "prod_small"])
def test_reductions_match_torch(torch, reduction):
    """Sums accumulate in float32 and round once: a bfloat16 accumulator would lose the small terms."""

    def run(lib):
        x = bf16(lib, X)
        if reduction == "prod_small":
            return (x[:2] * 0.5 + 1).prod(dim=1)
        return getattr(x, reduction)(dim=1), getattr(x, reduction)() if reduction != "amax" else x.amax()

    ours, theirs = run(numbagrad), run(torch)
    for a, b in zip(ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,)):
        close(a, b)


def test_sum_of_many_small_terms_is_accumulated_in_float32(torch):
    data = np.full(4096, 1.0, np.float32)
    assert bf16(numbagrad, data).sum().item() == bf16(torch, data).sum().item() == 4096.0


def test_matmul_and_linear_match_torch(torch):
    def run(lib):
        x, w, b = bf16(lib, X), bf16(lib, W1), bf16(lib, B1)
        return x @ w.T, lib.nn.functional.linear(x, w, b), lib.matmul(x.reshape(2, 2, 6), w.T)

    for a, b in zip(run(numbagrad), run(torch)):
        close(a, b, 2e-2)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "cross_entropy", "gelu", "dropout_eval"])
def test_nn_functional_matches_torch(torch, name):
    calls = {
        "softmax": lambda lib, x: lib.nn.functional.softmax(x, dim=1),
        "log_softmax": lambda lib, x: lib.nn.functional.log_softmax(x, dim=1),
        "layer_norm": lambda lib, x: lib.nn.functional.layer_norm(x, (6,)),
        "cross_entropy": lambda lib, x: lib.nn.functional.cross_entropy(x, lib.tensor(TARGETS)),
        "gelu": lambda lib, x: lib.nn.functional.gelu(x),
        "dropout_eval": lambda lib, x: lib.nn.functional.dropout(x, 0.5, training=False),
    }

    def run(lib):
        x = bf16(lib, X, True)
        out = calls[name](lib, x)
        out.float().sum().backward()
        return out, x.grad

    for a, b in zip(run(numbagrad), run(torch)):
        close(a, b, 3e-2)


MORE_OPS = {
    "max": lambda lib, x: x.max(),
    "argmax": lambda lib, x: x.argmax(1),
    "var": lambda lib, x: x.var(1),
    "norm": lambda lib, x: x.norm(),
    "cumsum": lambda lib, x: x.cumsum(1),
    "cat": lambda lib, x: lib.cat([x, x]),
    "where": lambda lib, x: lib.where(x > 0, x, 0.0),
    "clamp": lambda lib, x: x.clamp(-0.5, 0.5),
    "to_int64": lambda lib, x: (x * 10).to(lib.int64),
    "sort": lambda lib, x: x.sort(1).values,
    "logsumexp": lambda lib, x: x.logsumexp(1),
    "pow": lambda lib, x: x.abs() ** 1.5,
    "round": lambda lib, x: (x * 3).round(),
    "masked_fill": lambda lib, x: x.masked_fill(x > 0, 2.0),
    "gather": lambda lib, x: x.gather(1, lib.tensor([[0], [1], [2], [3]])),
    "einsum": lambda lib, x: lib.einsum("ij,kj->ik", x, x),
    "bmm": lambda lib, x: lib.bmm(x[None], x.T[None]),
    "batch_norm": lambda lib, x: lib.nn.functional.batch_norm(x, None, None, training=True),
    "mse_loss": lambda lib, x: lib.nn.functional.mse_loss(x, x.flip(0)),
    "embedding": lambda lib, x: lib.nn.functional.embedding(lib.tensor([0, 2]), x),
    "nan_to_num": lambda lib, x: (x / 0).nan_to_num(),
    "lerp": lambda lib, x: lib.lerp(x, x.flip(0), 0.3),
    "scaled_dot_product_attention": lambda lib, x: lib.nn.functional.scaled_dot_product_attention(
        x[None], x[None], x[None]
    ),
    "fill_": lambda lib, x: x.clone().fill_(0.3),
    "mul_": lambda lib, x: x.clone().mul_(1.7),
    "linspace": lambda lib, x: lib.linspace(0, 1, 5, dtype=x.dtype),
}


@pytest.mark.parametrize("name", MORE_OPS)
def test_more_ops_match_torch(torch, name):
    """Values, dtypes and (for float results) the input's gradient."""

    def run(lib):
        x = bf16(lib, X, True)
        out = MORE_OPS[name](lib, x)
        if out.is_floating_point() and out.requires_grad:
            out.float().sum().backward()
        return out, x.grad

    (ours, our_grad), (theirs, their_grad) = run(numbagrad), run(torch)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.detach().double().numpy(), theirs.detach().double().numpy(), rtol=3e-2, atol=3e-2)
    assert (our_grad is None) == (their_grad is None)
    if their_grad is not None:
        close(our_grad, their_grad, 3e-2)


# --- training ----------------------------------------------------------------------------------------------------
def mlp(lib):
    m = lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.ReLU(), lib.nn.Linear(8, 3))
    with lib.no_grad():
        for p, value in zip(m.parameters(), (W1, B1, W2, B2)):
            p.copy_(lib.tensor(value))
    return m.bfloat16()


def test_mlp_gradients_match_torch(torch):
    def run(lib):
        m = mlp(lib)
        loss = lib.nn.functional.cross_entropy(m(bf16(lib, X)), lib.tensor(TARGETS))
        loss.backward()
        return [loss] + [p.grad for p in m.parameters()]

    for a, b in zip(run(numbagrad), run(torch)):
        close(a, b, 3e-2)


def test_cnn_gradients_match_torch(torch):
    def run(lib):
        x, k = bf16(lib, IMAGES, True), bf16(lib, KERNEL, True)
        h = lib.nn.functional.max_pool2d(lib.nn.functional.relu(lib.nn.functional.conv2d(x, k, padding=1)), 2)
        out = lib.nn.functional.avg_pool2d(h, 3).flatten(1)
        out.float().pow(2).sum().backward()
        return out, x.grad, k.grad

    for a, b in zip(run(numbagrad), run(torch)):
        close(a, b, 5e-2)


def test_gradients_accumulate_in_bfloat16_as_torch(torch):
    def run(lib):
        w = bf16(lib, W1, True)
        for scale in (1.0, 0.3, 0.01):
            (w * scale).sum().backward()
        return w.grad

    close(run(numbagrad), run(torch), 0)


@pytest.mark.parametrize(
    "name, options",
    [
        ("SGD", {"lr": 0.1, "momentum": 0.9}),
        ("Adam", {"lr": 0.01}),
        ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
    ],
)
def test_optimizer_steps_match_torch(torch, name, options):
    def run(lib):
        m = mlp(lib)
        opt = getattr(lib.optim, name)(m.parameters(), **options)
        for _ in range(3):
            opt.zero_grad()
            lib.nn.functional.cross_entropy(m(bf16(lib, X)), lib.tensor(TARGETS)).backward()
            opt.step()
        return list(m.parameters())

    for a, b in zip(run(numbagrad), run(torch)):
        close(a, b, 2e-2)


def test_cuda_refuses_bfloat16_with_a_clear_error():
    """On Numba's CUDA simulator (a subprocess: it must be chosen before numbagrad is imported)."""
    import os
    import subprocess
    import sys

    code = (
        "import numbagrad as t\n"
        "for make in (lambda: t.ones(2, dtype=t.bfloat16).cuda(), lambda: t.ones(2, device='cuda').bfloat16()):\n"
        "    try:\n"
        "        make()\n"
        "    except RuntimeError as e:\n"
        "        print('cannot hold bfloat16' in str(e))\n"
    )
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["True", "True"]


def test_import_does_not_load_ml_dtypes():
    """ml_dtypes' import costs about as much as numbagrad's: it loads with the first bfloat16 tensor."""
    import subprocess
    import sys

    code = "import sys, numbagrad; print('ml_dtypes' in sys.modules, numbagrad.bfloat16.itemsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "2"]


# --- checkpoints ---------------------------------------------------------------------------------------------------
def test_torch_checkpoint_of_bfloat16_loads_bit_for_bit(torch, tmp_path):
    x = torch.tensor(X).bfloat16()
    torch.save({"w": x, "p": torch.nn.Parameter(x[1:, ::2])}, tmp_path / "t.pt")
    loaded = numbagrad.load(tmp_path / "t.pt")
    assert loaded["w"].dtype is numbagrad.bfloat16 and isinstance(loaded["p"], numbagrad.nn.Parameter)
    np.testing.assert_array_equal(wide(loaded["w"]), wide(x))
    np.testing.assert_array_equal(wide(loaded["p"]), wide(x[1:, ::2]))


def test_numbagrad_checkpoint_of_bfloat16_round_trips(tmp_path):
    m = mlp(numbagrad)
    numbagrad.save({"model": m.state_dict(), "view": m[0].weight[::2]}, tmp_path / "n.pt")
    loaded = numbagrad.load(tmp_path / "n.pt")
    for name, value in m.state_dict().items():
        assert loaded["model"][name].dtype is numbagrad.bfloat16
        np.testing.assert_array_equal(wide(loaded["model"][name]), wide(value))
    np.testing.assert_array_equal(wide(loaded["view"]), wide(m[0].weight[::2]))


def test_state_dict_from_torch_bfloat16_model_drives_the_same_outputs(torch, tmp_path):
    theirs = mlp(torch)
    torch.save(theirs.state_dict(), tmp_path / "m.pt")
    ours = numbagrad.nn.Sequential(numbagrad.nn.Linear(6, 8), numbagrad.nn.ReLU(), numbagrad.nn.Linear(8, 3))
    ours.bfloat16().load_state_dict(numbagrad.load(tmp_path / "m.pt"))
    close(ours(bf16(numbagrad, X)), theirs(bf16(torch, X)))


# --- autocast ------------------------------------------------------------------------------------------------------
def test_cpu_autocast_runs_a_small_cnn_as_torch(torch):
    """conv2d and linear run in bfloat16, relu and pooling keep their input's dtype, cross_entropy computes in
    float32; the float32 parameters get float32 gradients."""

    def run(lib):
        conv = lib.nn.Conv2d(2, 3, 3, padding=1)
        head = lib.nn.Linear(27, 3)
        with lib.no_grad():
            conv.weight.copy_(lib.tensor(KERNEL))
            conv.bias.zero_()
            head.weight.copy_(lib.tensor(np.resize(W1, (3, 27))))
            head.bias.zero_()
        with lib.autocast("cpu", dtype=lib.bfloat16):
            h = lib.nn.functional.max_pool2d(lib.nn.functional.relu(conv(lib.tensor(IMAGES))), 2)
            logits = head(h.flatten(1))
            loss = lib.nn.functional.cross_entropy(logits, lib.tensor(TARGETS[:2]))
        loss.backward()
        return h, logits, loss, conv.weight.grad, head.weight.grad

    ours, theirs = run(numbagrad), run(torch)
    assert [str(t.dtype).split(".")[-1] for t in ours] == ["bfloat16", "bfloat16", "float32", "float32", "float32"]
    for a, b in zip(ours, theirs):
        close(a, b, 5e-2)


def test_assert_close_uses_torchs_bfloat16_tolerances(torch):
    """rtol 1.6e-2, atol 1e-5: a 1% difference passes, a 5% one fails with torch's report."""
    near, far = (np.array([1.0, 2.0, 3.0], np.float32) * np.float32(s) for s in (1.01, 1.05))
    messages = []
    for lib in (numbagrad, torch):
        base = bf16(lib, np.array([1.0, 2.0, 3.0], np.float32))
        lib.testing.assert_close(base, bf16(lib, near))
        with pytest.raises(AssertionError) as failed:
            lib.testing.assert_close(base, bf16(lib, far))
        messages.append(str(failed.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("name", ["det", "svd", "cholesky", "pinv"])
def test_lapack_ops_refuse_bfloat16_as_torch(torch, name):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises((RuntimeError, NotImplementedError)) as failed:
            getattr(lib.linalg, name)(bf16(lib, np.eye(3, dtype=np.float32)))
        errors.append((type(failed.value), str(failed.value).replace("numbagrad.", "torch.")))
    assert errors[0] == errors[1]


def test_legacy_bfloat16_tensor_type_matches_torch(torch):
    for lib in (numbagrad, torch):
        x = lib.BFloat16Tensor([1.5, 2.0])
        assert isinstance(x, lib.BFloat16Tensor) and x.dtype is lib.bfloat16 and x.type() == "torch.BFloat16Tensor"
        assert lib.ones(2).type(lib.BFloat16Tensor).dtype is lib.bfloat16


def test_optimizer_step_on_a_parameter_larger_than_one_update_chunk_matches_torch(torch):
    """The float32 copies are made a chunk at a time: the step is the same across the chunks' seams."""
    data = np.random.default_rng(2).standard_normal(2**16 + 300).astype(np.float32)

    def run(lib):
        p = bf16(lib, data, True)
        opt = lib.optim.Adam([p], lr=0.01, amsgrad=True)
        for _ in range(2):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        return p

    close(run(numbagrad), run(torch), 1e-2)
