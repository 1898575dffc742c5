"""numbagrad.func.vmap against torch.func.vmap: batching rules, the per-sample fallback, nesting, in_dims/out_dims
trees, randomness, chunking, transforms inside vmap, custom Functions and torch's errors.

Each comparison writes the function once, over a library ``lib`` (numbagrad or torch), and runs it under both
vmaps on the same float64 data."""

import numpy as np
import pytest

import numbagrad
from numbagrad import func
from numbagrad.autograd import Function, gradcheck, gradgradcheck
from numbagrad.func import _vmap


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape)


def _pair(torch, tree):
    """The same data as a numbagrad tree and a torch tree (arrays inside dicts and lists converted)."""
    if isinstance(tree, np.ndarray):
        return numbagrad.tensor(tree), torch.tensor(tree)
    if isinstance(tree, dict):
        pairs = {k: _pair(torch, v) for k, v in tree.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(tree, (list, tuple)):
        pairs = [_pair(torch, v) for v in tree]
        return type(tree)(p[0] for p in pairs), type(tree)(p[1] for p in pairs)
    return tree, tree


def _compare(torch, fn, *arrays, in_dims=0, out_dims=0, **kwargs):
    """``fn(lib, *tensors)`` under both vmaps, their outputs compared leaf by leaf."""
    ours_in, theirs_in = zip(*[_pair(torch, a) for a in arrays])
    ours = func.vmap(lambda *a: fn(numbagrad, *a), in_dims, out_dims, **kwargs)(*ours_in)
    theirs = torch.func.vmap(lambda *a: fn(torch, *a), in_dims, out_dims, **kwargs)(*theirs_in)
    ours_leaves, theirs_leaves = _vmap._flatten(ours)[0], torch.utils._pytree.tree_flatten(theirs)[0]
    assert len(ours_leaves) == len(theirs_leaves)
    for o, t in zip(ours_leaves, theirs_leaves):
        assert tuple(o.shape) == tuple(t.shape)
        assert str(o.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        tol = 1e-10 if o.dtype.itemsize >= 8 else 1e-5  # float32 sums may round in another order
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=tol, atol=tol)


def _fallbacks(monkeypatch):
    """The ops that run once per sample (no batching rule) while the test runs, by name."""
    names = []
    loop = _vmap._per_sample

    def spy(level, op, args, kwargs):
        names.append(op.__name__)
        return loop(level, op, args, kwargs)

    monkeypatch.setattr(_vmap, "_per_sample", spy)
    return names


# --- batching rules ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x, y: x * y + 1,
        lambda lib, x, y: lib.atan2(x, y).exp() - y / 3,
        lambda lib, x, y: lib.where(x > y, x, y) ** 2,
        lambda lib, x, y: lib.maximum(x, y).clamp(-0.5, 0.5),
        lambda lib, x, y: 2 - x.sigmoid() * y.tanh(),
    ],
)
def test_elementwise_ops_broadcast_batched_and_unbatched_operands(fn, torch):
    _compare(torch, fn, _rand(4, 3, 2), _rand(3, 2), in_dims=(0, None))
    _compare(torch, fn, _rand(4, 2), _rand(3, 4, 2), in_dims=(0, 1))


def test_elementwise_ops_have_a_batching_rule(monkeypatch):
    fallbacks = _fallbacks(monkeypatch)
    func.vmap(lambda x, y: numbagrad.exp(x) * y + 1)(numbagrad.ones(5, 3), numbagrad.ones(5, 1))
    assert fallbacks == []


def test_a_zero_dim_sample_promotes_as_a_zero_dim_tensor(torch):
    x, y = _rand(4), _rand(3).astype(np.float32)
    _compare(torch, lambda lib, a, b: a + b, x, y, in_dims=(0, None))


@pytest.mark.parametrize(
    "fn, shapes, in_dims",
    [
        (lambda lib, a, b: a @ b, [(4, 3, 2), (2, 5)], (0, None)),
        (lambda lib, a, b: a @ b, [(3, 2), (4, 2, 5)], (None, 0)),
        (lambda lib, a, b: a @ b, [(4, 3), (4, 3)], 0),
        (lambda lib, a, b: a @ b, [(4, 2, 3), (3, 4)], (0, 1)),
        (lambda lib, a, b: lib.matmul(a, b), [(4, 6, 2, 3), (3,)], (0, None)),
        (lambda lib, a, b: lib.matmul(a, b), [(3,), (4, 3, 2)], (None, 0)),
        (lambda lib, a, b: lib.matmul(a, b), [(4, 2, 3), (5, 3, 2)], (0, None)),
        (lambda lib, a, b: lib.mm(a, b), [(4, 2, 3), (4, 3, 5)], 0),
        (lambda lib, a, b: lib.bmm(a, b), [(4, 6, 2, 3), (6, 3, 5)], (0, None)),
        (lambda lib, a, b: lib.mv(a, b), [(2, 3), (4, 3)], (None, 0)),
        (lambda lib, a, b: lib.dot(a, b), [(4, 3), (4, 3)], 0),
    ],
)
def test_matmul_family(fn, shapes, in_dims, torch):
    _compare(torch, fn, *[_rand(*s, seed=k) for k, s in enumerate(shapes)], in_dims=in_dims)


def test_mlp_ops_have_batching_rules(monkeypatch):
    fallbacks = _fallbacks(monkeypatch)
    params = {k: numbagrad.tensor(v) for k, v in _mlp_params().items()}
    x, y = numbagrad.tensor(_rand(5, 6)), numbagrad.tensor(np.array([0, 3, 1, 1, 2]))
    func.vmap(func.grad(_mlp_loss(numbagrad)), in_dims=(None, 0, 0))(params, x, y)
    assert fallbacks == []


@pytest.mark.parametrize("in_dims", [(0, None, None), (None, 0, 0), (0, 0, 0), (1, None, 0)])
def test_linear(in_dims, torch):
    x = _rand(4, 3) if in_dims[0] != 1 else _rand(3, 4)
    w = _rand(4, 2, 3) if in_dims[1] == 0 else _rand(2, 3)
    b = _rand(4, 2) if in_dims[2] == 0 else _rand(2)
    _compare(torch, lambda lib, x, w, b: lib.nn.functional.linear(x, w, b), x, w, b, in_dims=in_dims)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: x.sum(),
        lambda lib, x: x.sum(0),
        lambda lib, x: x.sum((-1, 0), keepdim=True),
        lambda lib, x: x.mean(dim=1),
        lambda lib, x: x.amax(-1),
        lambda lib, x: x.amin((0, 1)),
        lambda lib, x: x.max(),
        lambda lib, x: x.max(1),
        lambda lib, x: x.min(0, keepdim=True),
        lambda lib, x: x.argmax(),
        lambda lib, x: x.argmin(1),
        lambda lib, x: x.std(0),
        lambda lib, x: x.var(),
        lambda lib, x: x.prod(1),
        lambda lib, x: lib.logsumexp(x, 1),
        lambda lib, x: x.cumsum(-1),
        lambda lib, x: lib.softmax(x, -1),
        lambda lib, x: lib.log_softmax(x, 0),
        lambda lib, x: lib.nn.functional.softmax(x, dim=1),
        lambda lib, x: (x > 0).any(1),
    ],
)
def test_reductions_shift_their_dims(fn, torch):
    _compare(torch, fn, _rand(5, 2, 3))
    _compare(torch, fn, _rand(2, 5, 3), in_dims=1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: x.view(6),
        lambda lib, x: x.view(-1, 2),
        lambda lib, x: x.reshape(3, 2),
        lambda lib, x: x.transpose(0, 1),
        lambda lib, x: x.t(),
        lambda lib, x: x.T,
        lambda lib, x: x.mT,
        lambda lib, x: x.permute(1, 0),
        lambda lib, x: x.unsqueeze(0),
        lambda lib, x: x.unsqueeze(-1),
        lambda lib, x: x.unsqueeze(1).squeeze(),
        lambda lib, x: x[:1].squeeze(0),
        lambda lib, x: x.expand(4, 2, 3),
        lambda lib, x: x[0].expand_as(x),
        lambda lib, x: x.flatten(),
        lambda lib, x: x.select(1, 2),
        lambda lib, x: x.narrow(1, 1, 2),
        lambda lib, x: x.movedim(0, 1),
        lambda lib, x: x.unbind(1),
        lambda lib, x: x.split(1, dim=1),
        lambda lib, x: x.chunk(2, 0),
        lambda lib, x: lib.cat([x, x * 2], 1),
        lambda lib, x: lib.stack([x, x.exp()], -1),
        lambda lib, x: x.flip(0),
        lambda lib, x: x.view_as(x.reshape(3, 2)) if False else x.reshape_as(x.t()),
        lambda lib, x: x.diagonal(),
        lambda lib, x: x.clone().contiguous(),
        lambda lib, x: lib.zeros_like(x) + lib.ones_like(x),
    ],
)
def test_view_and_shape_ops(fn, torch):
    _compare(torch, fn, _rand(5, 2, 3))
    _compare(torch, fn, _rand(2, 3, 5), in_dims=-1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: x[1],
        lambda lib, x: x[:, 1:],
        lambda lib, x: x[..., ::2],
        lambda lib, x: x[None, 0, -1],
        lambda lib, x: x[lib.tensor([2, 0, 2])],
        lambda lib, x: x[:, lib.tensor([[1, 0]])],
        lambda lib, x: x[lib.tensor([0, 1]), lib.tensor([2, 0])],
    ],
)
def test_basic_and_integer_indexing(fn, torch):
    _compare(torch, fn, _rand(4, 3, 3))


def test_indexing_with_a_batched_index_runs_per_sample(torch):
    index = np.array([[0, 2], [1, 1], [2, 0], [0, 0]])
    _compare(torch, lambda lib, x, i: x[i], _rand(4, 3), index)
    _compare(torch, lambda lib, x, i: x[i, 1:], _rand(3, 3), index, in_dims=(None, 0))


@pytest.mark.parametrize(
    "fn, in_dims",
    [
        (lambda lib, x, i: lib.gather(x, 1, i), (0, None)),
        (lambda lib, x, i: lib.gather(x, 0, i), (None, 0)),
        (lambda lib, x, i: x.gather(-1, i), (0, 0)),
    ],
)
def test_gather(fn, in_dims, torch):
    x = _rand(4, 2, 3) if in_dims[0] == 0 else _rand(2, 3)
    i = np.random.default_rng(1).integers(0, 2, (4, 2, 3) if in_dims[1] == 0 else (2, 3))
    _compare(torch, fn, x, i, in_dims=in_dims)


def test_index_select(torch):
    _compare(torch, lambda lib, x: x.index_select(1, lib.tensor([2, 0])), _rand(4, 2, 3))


def test_layer_norm_and_activations(torch):
    w, b = _rand(3, seed=5), _rand(3, seed=6)

    def fn(lib, x):
        F = lib.nn.functional
        h = F.layer_norm(x, (3,), lib.tensor(w), lib.tensor(b))
        return F.gelu(h) + F.relu(h) + F.silu(h) + F.leaky_relu(h, 0.2)

    _compare(torch, fn, _rand(4, 2, 3))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction, torch):
    target = np.array([[0, 2, 1], [1, 1, 0], [2, 0, -100], [0, 0, 0]])

    def loss(lib, x, t):
        return lib.nn.functional.cross_entropy(x, t, reduction=reduction)

    _compare(torch, loss, _rand(4, 3, 3), target)
    _compare(torch, loss, _rand(4, 3, 3), target[0], in_dims=(0, None))
    _compare(torch, loss, _rand(4, 3), target[:, 0])


# --- tensor methods --------------------------------------------------------------------------------------------------
def _augmented_assignments(x):
    y = x * 1
    y += 1
    y *= x
    return y


def _index_assignments(x):
    y = x.clone()
    y[:, 0] = 1.0
    y[1] = y[2] * 2
    return y


_METHOD_CASES = {  # name: fn(lib, x) for one (3, 3) sample
    "repeat": lambda L, x: x.repeat(2, 1),
    "tile": lambda L, x: x.tile((2,)),
    "expand-1": lambda L, x: x[:, :1].expand(-1, 3),
    "masked_fill": lambda L, x: x.masked_fill(x > 0, 0.5),
    "type_as": lambda L, x: x.float().type_as(x),
    "to": lambda L, x: x.to(L.float32),
    "einsum": lambda L, x: L.einsum("ij,jk->ik", x, x.t()),
    "topk": lambda L, x: x.topk(2, dim=1).values,
    "argsort": lambda L, x: x.argsort(1),
    "cummax": lambda L, x: x.cummax(0).values,
    "norm": lambda L, x: x.norm(dim=1),
    "norm_all": lambda L, x: x.norm(),
    "lerp": lambda L, x: x.lerp(x * 2, 0.3),
    "where_scalar": lambda L, x: L.where(x > 0, x, 0.0),
    "ops": lambda L, x: x.abs().sqrt().sign() + x.round() + x**2 + 2**x + x // 2 + x % 2 - x,
    "bool": lambda L, x: (~(x > 0)).sum(),
    "all": lambda L, x: (x > -10).all(),
    "any_dim": lambda L, x: (x > 0).any(0),
    "clone_mul_": lambda L, x: x.clone().mul_(2),
    "iadd": lambda L, x: _augmented_assignments(x),
    "size_view": lambda L, x: x.view(x.size(0), -1).sum(-1),
    "new_zeros": lambda L, x: x.new_zeros(3) + x[0],
    "zeros_shape": lambda L, x: L.zeros(x.shape, dtype=x.dtype) + x,
    "index_tensor_setitem": lambda L, x: _index_assignments(x),
    "roll": lambda L, x: x.roll(1, 1),
    "tril": lambda L, x: x.tril(),
    "diag": lambda L, x: L.diag(x[0]),
    "outer": lambda L, x: L.outer(x[0], x[1]),
    "kron": lambda L, x: L.kron(x, x),
    "matrix_exp": lambda L, x: L.linalg.inv(x @ x.t() + L.eye(3, dtype=x.dtype)),
    "split_sizes": lambda L, x: x.split([1, 2], dim=1)[1],
    "scatter_add": lambda L, x: L.zeros(3, 3, dtype=x.dtype).scatter_add(0, L.tensor([[0, 1, 2]]), x[:1]),
    "amax_keep": lambda L, x: x.amax(1, keepdim=True),
    "logsumexp_tuple": lambda L, x: L.logsumexp(x, (0, 1)),
    "mean_dtype": lambda L, x: x.mean(dtype=L.float32),
    "prod_all": lambda L, x: x.prod(),
    "median_all": lambda L, x: x.median(),
    "var_mean": lambda L, x: L.var_mean(x, 1)[0],
    "count_nonzero": lambda L, x: L.count_nonzero(x > 0),
}


@pytest.mark.parametrize("fn", _METHOD_CASES.values(), ids=_METHOD_CASES.keys())
def test_tensor_methods_under_vmap(fn, torch):
    _compare(torch, fn, _rand(4, 3, 3))


# --- the per-sample fallback ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn",
    [
        lambda lib, x: lib.nn.functional.mse_loss(x, x.flip(0) * 2),
        lambda lib, x: lib.trace(x),
        lambda lib, x: lib.linalg.det(x),
        lambda lib, x: lib.tril(x, -1),
        lambda lib, x: lib.nn.functional.pad(x, (1, 0)),
        lambda lib, x: x.sort(1).values,
    ],
)
def test_ops_without_a_rule_run_per_sample(fn, torch):
    _compare(torch, fn, _rand(4, 3, 3))


def test_an_op_without_a_rule_falls_back_to_the_loop(monkeypatch):
    fallbacks = _fallbacks(monkeypatch)
    func.vmap(numbagrad.trace)(numbagrad.ones(6, 2, 2))
    assert fallbacks == ["trace"]


def test_in_place_ops_write_into_the_batch(torch):
    def fn(lib, x, y):
        x = x.clone()
        x.mul_(y).add_(1)
        x[0] = 5.0
        x.tril_()
        return x

    _compare(torch, fn, _rand(4, 3, 3), _rand(3, 3), in_dims=(0, None))


@pytest.mark.parametrize(
    "write", [lambda x, y: x.mul_(y), lambda x, y: x.copy_(y), lambda x, y: x.__setitem__(0, y[0])]
)
def test_writing_a_batch_into_an_unbatched_tensor_is_refused(write, torch):
    def call(vmap, lib):
        x = lib.zeros(3)
        return vmap(lambda y: write(x, y))(lib.ones(4, 3))

    _both_raise(
        torch,
        call,
        RuntimeError,
        r"vmap: inplace arithmetic\(self, \*extra_args\) is not possible",
    )


def test_item_and_data_dependent_control_flow_are_refused():
    with pytest.raises(RuntimeError, match=r"vmap: It looks like you're calling \.item\(\)"):
        func.vmap(lambda x: x.sum().item())(numbagrad.ones(3, 2))
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        func.vmap(lambda x: x if x.sum() > 0 else -x)(numbagrad.ones(3, 2))


def test_batched_tensor_shows_the_sample_shape_inside():
    seen = {}

    def fn(x):
        seen.update(shape=tuple(x.shape), dim=x.dim(), size=x.size(-1), numel=x.numel(), length=len(x))
        seen["repr"] = repr(x)
        return x

    func.vmap(fn)(numbagrad.ones(5, 2, 3))
    assert seen == {**seen, "shape": (2, 3), "dim": 2, "size": 3, "numel": 6, "length": 2}
    assert seen["repr"].startswith("BatchedTensor(lvl=")


# --- in_dims, out_dims, nesting, chunks --------------------------------------------------------------------------
def test_in_dims_and_out_dims_as_trees(torch):
    def fn(lib, inputs, scale):
        return {"sum": inputs["a"] + inputs["b"][0] * scale, "pair": (inputs["a"].exp(), scale)}

    a, b, s = _rand(3, 4), _rand(2, 3, 4), _rand(3)
    _compare(
        torch, fn, {"a": a, "b": [b]}, s, in_dims=({"a": 1, "b": [2]}, None), out_dims={"sum": 1, "pair": (0, None)}
    )


@pytest.mark.parametrize("out_dims", [0, 1, -1, (2,)])
def test_out_dims_place_the_batch(out_dims, torch):
    _compare(torch, lambda lib, x: x.t() * 2, _rand(4, 2, 3), out_dims=out_dims)


def test_unbatched_outputs_are_broadcast_over_the_batch(torch):
    const = _rand(3)
    _compare(torch, lambda lib, x, c: (x.sum(), c * 2), _rand(4, 2), const, in_dims=(0, None))


def test_nested_vmap(torch):
    def inner(lib, x, y):
        return (
            lib.vmap(lambda a: (a @ y).sum() * a, in_dims=0)(x)
            if lib is torch
            else func.vmap(lambda a: (a @ y).sum() * a)(x)
        )

    _compare(torch, inner, _rand(3, 4, 2), _rand(2, 5), in_dims=(0, None))
    _compare(torch, inner, _rand(4, 3, 2), _rand(3, 2, 5), in_dims=(1, 0))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 10])
def test_chunk_size_gives_the_same_result(chunk_size, torch):
    _compare(torch, lambda lib, x: (x.sum(0), x * 2), _rand(7, 3), out_dims=(0, 1), chunk_size=chunk_size)


# --- errors --------------------------------------------------------------------------------------------------------
def _both_raise(torch, call, error, match):
    with pytest.raises(error, match=match):
        call(torch.func.vmap, torch)
    with pytest.raises(error, match=match):
        call(func.vmap, numbagrad)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda vmap, lib: vmap(lambda x: x)(), ValueError, r"got no inputs"),
        (lambda vmap, lib: vmap(lambda x: x, in_dims=[0])(lib.ones(2)), ValueError, r"expected `in_dims` to be int"),
        (lambda vmap, lib: vmap(lambda x, y: x, in_dims=(0,))(lib.ones(2), lib.ones(2)), ValueError,
         r"in_dims is not compatible with the structure of `inputs`"),
        (lambda vmap, lib: vmap(lambda x: x, in_dims=2)(lib.ones(2, 2)), ValueError,
         r"Got in_dim=2 for some input, but that input is a Tensor of dimensionality 2 so expected in_dim to "
         r"satisfy -2 <= in_dim < 2"),
        (lambda vmap, lib: vmap(lambda x: x, in_dims=(0, 0))(lib.ones(2), 3.0), ValueError,
         r"Got in_dim=0 for an input but the input is of type <class 'float'>"),
        (lambda vmap, lib: vmap(lambda x: x, in_dims="a")(lib.ones(2)), ValueError, r"expected `in_dims`"),
        (lambda vmap, lib: vmap(lambda x: x, in_dims=(0.5,))(lib.ones(2)), ValueError,
         r"Got in_dim=0.5 for an input but in_dim must be either an integer dimension or None"),
        (lambda vmap, lib: vmap(lambda x: x, in_dims=(None,))(lib.ones(2)), ValueError,
         r"vmap: Expected at least one Tensor to vmap over"),
        (lambda vmap, lib: vmap(lambda x, y: x + y)(lib.ones(2), lib.ones(3)), ValueError,
         r"Expected all tensors to have the same size in the mapped dimension, got sizes \[2, 3\]"),
        (lambda vmap, lib: vmap(lambda x: (x, x), out_dims=(0, 0, 0))(lib.ones(2)), ValueError,
         r"out_dims is not compatible with the structure of `outputs`"),
        (lambda vmap, lib: vmap(lambda x: x, out_dims=None)(lib.ones(2)), ValueError,
         r"can not return a BatchedTensor when out_dim is None"),
        (lambda vmap, lib: vmap(lambda x: 3.0)(lib.ones(2)), ValueError, r"must only return Tensors, got type"),
        (lambda vmap, lib: vmap(lambda x: x, randomness="sometimes")(lib.ones(2)), RuntimeError,
         r"Only allowed values for randomness are 'error', 'different', or 'same'. Got sometimes"),
        (lambda vmap, lib: vmap(lambda x: x, chunk_size=0)(lib.ones(2)), ValueError,
         r"vmap: chunk_size should be None or greater than 0. \(got 0\)"),
        (lambda vmap, lib: vmap(lambda x: x + lib.rand(2))(lib.ones(3, 2)), RuntimeError,
         r"vmap: called random operation while in randomness error mode"),
        (lambda vmap, lib: vmap(lambda x: lib.nn.functional.dropout(x, 0.5))(lib.ones(3, 2)), RuntimeError,
         r"vmap: called random operation while in randomness error mode"),
    ],
)  # fmt: skip
def test_errors_match_torch(call, error, match, torch):
    _both_raise(torch, call, error, match)


# --- randomness ----------------------------------------------------------------------------------------------------
def test_randomness_same_draws_once_for_every_sample():
    x = numbagrad.zeros(4, 3)
    out = func.vmap(lambda a: a + numbagrad.rand(3), randomness="same")(x).numpy()
    assert np.ptp(out, axis=0).max() == 0
    dropped = func.vmap(lambda a: numbagrad.nn.functional.dropout(a + 1), randomness="same")(x).numpy()
    assert (dropped == dropped[0]).all()


def test_randomness_different_draws_for_each_sample():
    x = numbagrad.zeros(4, 3)
    out = func.vmap(lambda a: a + numbagrad.rand(3), randomness="different")(x).numpy()
    assert len({tuple(row) for row in out}) == 4
    like = func.vmap(lambda a: numbagrad.randn_like(a), randomness="different")(x).numpy()
    assert len({tuple(row) for row in like}) == 4


def test_dropout_outside_training_is_not_random(torch):
    _compare(torch, lambda lib, x: lib.nn.functional.dropout(x, 0.5, training=False), _rand(3, 2))


# --- transforms and autograd inside and around vmap -------------------------------------------------------------
def _mlp_loss(lib):
    F = lib.nn.functional

    def loss(params, x, y):
        h = F.relu(F.linear(x, params["w1"], params["b1"]))
        return F.cross_entropy(F.linear(h, params["w2"], params["b2"]).unsqueeze(0), y.unsqueeze(0))

    return loss


def _mlp_params(sizes=(6, 8, 4)):
    rng = np.random.default_rng(3)
    return {"w1": rng.standard_normal((sizes[1], sizes[0])), "b1": rng.standard_normal(sizes[1]),
            "w2": rng.standard_normal((sizes[2], sizes[1])), "b2": rng.standard_normal(sizes[2])}  # fmt: skip


def test_per_sample_gradients_of_an_mlp_match_torch_func(torch):
    params = _mlp_params()
    x, y = _rand(5, 6), np.array([0, 3, 1, 1, 2])
    ours = func.vmap(func.grad(_mlp_loss(numbagrad)), in_dims=(None, 0, 0))(
        {k: numbagrad.tensor(v) for k, v in params.items()}, numbagrad.tensor(x), numbagrad.tensor(y)
    )
    theirs = torch.func.vmap(torch.func.grad(_mlp_loss(torch)), in_dims=(None, 0, 0))(
        {k: torch.tensor(v) for k, v in params.items()}, torch.tensor(x), torch.tensor(y)
    )
    for k in params:
        assert tuple(ours[k].shape) == tuple(theirs[k].shape)
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-10, atol=1e-12)
        assert not ours[k].requires_grad


def test_per_sample_gradients_equal_a_loop_of_single_sample_backwards():
    params = {k: numbagrad.tensor(v) for k, v in _mlp_params().items()}
    x, y = numbagrad.tensor(_rand(5, 6)), numbagrad.tensor(np.array([0, 3, 1, 1, 2]))
    per_sample = func.vmap(func.grad(_mlp_loss(numbagrad)), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        _mlp_loss(numbagrad)(leaves, x[i], y[i]).backward()
        for k, leaf in leaves.items():
            np.testing.assert_allclose(per_sample[k][i].numpy(), leaf.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_vmap_of_jacrev(torch):
    def fn(lib, x, w):
        jacrev = func.jacrev if lib is numbagrad else torch.func.jacrev
        return jacrev(lambda a: (a @ w).sin())(x)

    _compare(torch, fn, _rand(4, 3), _rand(3, 2), in_dims=(0, None))


def test_vmap_of_vjp_with_batched_cotangents(torch):
    def fn(lib, x, v):
        vjp = func.vjp if lib is numbagrad else torch.func.vjp
        _, pull = vjp(lambda a: a.exp() * 2, x)
        return pull(v)[0]

    _compare(torch, fn, _rand(3), _rand(4, 3), in_dims=(None, 0))


def test_grad_of_vmap(torch):
    def fn(lib, x):
        grad_fn = func.grad if lib is numbagrad else torch.func.grad
        vmap = func.vmap if lib is numbagrad else torch.func.vmap
        return grad_fn(lambda a: vmap(lambda r: (r.sin() * r).sum())(a).sum())(x)

    ours, theirs = fn(numbagrad, numbagrad.tensor(_rand(3, 2))), fn(torch, torch.tensor(_rand(3, 2)))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


def _transform_pair(torch, make, *arrays):
    """``make(lib, transforms)`` built once over numbagrad.func and once over torch.func, run on the same data."""
    ours = make(numbagrad, func)(*[numbagrad.tensor(a) for a in arrays])
    theirs = make(torch, torch.func)(*[torch.tensor(a) for a in arrays])
    ours, theirs = _vmap._flatten(ours)[0], torch.utils._pytree.tree_flatten(theirs)[0]
    for o, t in zip(ours, theirs, strict=True):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "make, shapes",
    [
        (lambda L, f: f.vmap(f.vmap(f.grad(lambda x, w: (x * w).sin().sum()), (0, None)), (0, None)),
         [(3, 4, 2), (2,)]),
        (lambda L, f: f.vmap(f.hessian(lambda x: (x.sin() * x).sum())), [(3, 2)]),
        (lambda L, f: f.vmap(f.jacfwd(lambda x: x.exp() * 2)), [(3, 2)]),
        (lambda L, f: f.vmap(lambda x, v: f.jvp(lambda a: a.sin(), (x,), (v,))[1]), [(3, 2), (3, 2)]),
        (lambda L, f: f.vmap(f.grad(lambda x, y: (x * y).sum(), argnums=(0, 1))), [(3, 2), (3, 2)]),
        (lambda L, f: f.vmap(f.grad(lambda x: ((x**2).sum(), x.mean()), has_aux=True)), [(3, 2)]),
        (lambda L, f: f.vmap(f.jacrev(lambda x, w: L.nn.functional.linear(x, w).tanh(), argnums=1), (0, None)),
         [(3, 2), (4, 2)]),
        (lambda L, f: f.grad(lambda w: f.vmap(f.grad(lambda x, w: (x * w).sin().sum()), (0, None))(w * 2, w).sum()),
         [(2,)]),
    ],
    ids=["vmap-vmap-grad", "hessian", "jacfwd", "jvp", "grad-argnums", "grad-has-aux", "jacrev-weights",
         "grad-of-vmap-of-grad"],
)  # fmt: skip
def test_transforms_compose_with_vmap(make, shapes, torch):
    _transform_pair(torch, make, *[_rand(*s, seed=k) for k, s in enumerate(shapes)])


def test_per_sample_gradients_of_a_module_by_functional_call(torch):
    model = numbagrad.nn.Sequential(numbagrad.nn.Linear(3, 4), numbagrad.nn.ReLU(), numbagrad.nn.Linear(4, 2)).double()
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).double()
    with torch.no_grad():
        for p, q in zip(model.parameters(), twin.parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))

    def make(L, f):
        module = model if L is numbagrad else twin
        params = {k: v.detach() for k, v in module.named_parameters()}

        def loss(p, x, y):
            return L.nn.functional.mse_loss(f.functional_call(module, p, (x.unsqueeze(0),)), y.unsqueeze(0))

        return lambda x, y: f.vmap(f.grad(loss), in_dims=(None, 0, 0))(params, x, y)

    _transform_pair(torch, make, _rand(5, 3), _rand(5, 2, seed=1))


def test_backward_through_vmap_reaches_the_inputs(torch):
    x = numbagrad.tensor(_rand(4, 3), requires_grad=True)
    tx = torch.tensor(_rand(4, 3), requires_grad=True)
    func.vmap(lambda a: (a * a).sum().exp())(x).sum().backward()
    torch.func.vmap(lambda a: (a * a).sum().exp())(tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_ensemble_over_stacked_module_weights(torch):
    models = [numbagrad.nn.Linear(3, 2).double() for _ in range(4)]
    params, buffers = func.stack_module_state(models)
    x = numbagrad.tensor(_rand(5, 3))
    out = func.vmap(lambda p, b: func.functional_call(models[0], (p, b), (x,)), in_dims=(0, 0))(params, buffers)
    expected = numbagrad.stack([m(x) for m in models])
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)


# --- custom Functions ----------------------------------------------------------------------------------------------
class _CubeGenerated(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g


class _CubeWithRule(Function):
    calls = []

    @staticmethod
    def forward(x, dim):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * g, None

    @staticmethod
    def vmap(info, in_dims, x, dim):
        _CubeWithRule.calls.append((info.batch_size, info.randomness, in_dims))
        return _CubeWithRule.apply(x.movedim(in_dims[0], 0), dim), 0


class _CubeWithoutRule(_CubeGenerated):
    generate_vmap_rule = False


class _OldStyle(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_function_with_generated_vmap_rule_and_its_gradient():
    x = numbagrad.tensor(_rand(4, 3))
    np.testing.assert_allclose(func.vmap(_CubeGenerated.apply)(x).numpy(), x.numpy() ** 3)
    grads = func.vmap(func.grad(lambda a: _CubeGenerated.apply(a).sum()))(x)
    np.testing.assert_allclose(grads.numpy(), 3 * x.numpy() ** 2, rtol=1e-12)


def test_function_with_a_vmap_staticmethod_is_batched_by_it():
    _CubeWithRule.calls.clear()
    x = numbagrad.tensor(_rand(3, 4))
    out = func.vmap(lambda a: _CubeWithRule.apply(a, 0), in_dims=1, randomness="same")(x)
    np.testing.assert_allclose(out.numpy(), (x.numpy() ** 3).T)
    assert _CubeWithRule.calls == [(4, "same", (0, None))]
    grads = func.vmap(func.grad(lambda a: _CubeWithRule.apply(a, 0).sum()))(x)
    np.testing.assert_allclose(grads.numpy(), 3 * x.numpy() ** 2, rtol=1e-12)


def test_function_without_vmap_support_is_refused():
    with pytest.raises(RuntimeError, match="it does not have vmap support. Please override and implement the vmap"):
        func.vmap(_CubeWithoutRule.apply)(numbagrad.ones(2, 2))
    with pytest.raises(RuntimeError, match="it must override the setup_context staticmethod"):
        func.vmap(_OldStyle.apply)(numbagrad.ones(2, 2))

    class Both(_CubeWithRule):
        generate_vmap_rule = True

    with pytest.raises(RuntimeError, match="it has both generate_vmap_rule=True and an overridden vmap"):
        func.vmap(lambda a: Both.apply(a, 0))(numbagrad.ones(2, 2))


def test_base_vmap_staticmethod_raises_torchs_error():
    with pytest.raises(NotImplementedError, match="you must either override the vmap staticmethod"):
        Function.vmap(None, (0,), numbagrad.ones(1))


# --- gradcheck's batched gradients ---------------------------------------------------------------------------------
def test_gradcheck_checks_batched_grads():
    x = numbagrad.tensor(_rand(3, 2), requires_grad=True)
    assert gradcheck(lambda a: (a.sin() @ a.t()).tanh(), (x,), check_batched_grad=True)
    assert gradgradcheck(lambda a: (a.sin() @ a.t()).tanh(), (x,), check_batched_grad=True)


def test_gradcheck_reports_a_wrong_batched_grad():
    class WrongUnderVmap(Function):
        """Doubles its input, but its vmap rule triples it: right one sample at a time, wrong in a batch."""

        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def vmap(info, in_dims, x):
            return x * 3, in_dims[0]

    x = numbagrad.tensor(_rand(3), requires_grad=True)
    assert gradcheck(WrongUnderVmap.apply, (x,))
    with pytest.raises(numbagrad.autograd.GradcheckError, match="failed while testing batched gradient"):
        gradcheck(WrongUnderVmap.apply, (x,), check_batched_grad=True)
    assert not gradcheck(WrongUnderVmap.apply, (x,), check_batched_grad=True, raise_exception=False)


# --- nn.functional ---------------------------------------------------------------------------------------------------
_FUNCTIONAL_CASES = {  # name: (fn(F, *tensors), arrays, in_dims)
    "mse": (lambda F, x, y: F.mse_loss(x, y), [_rand(4, 3), _rand(4, 3, seed=1)], 0),
    "l1": (lambda F, x, y: F.l1_loss(x, y, reduction="sum"), [_rand(4, 3), _rand(3, seed=1)], (0, None)),
    "smooth_l1": (lambda F, x, y: F.smooth_l1_loss(x, y), [_rand(4, 3), _rand(4, 3, seed=1)], 0),
    "bce_logits": (
        lambda F, x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
        [_rand(4, 3), _rand(4, 3, seed=1)],
        0,
    ),
    "nll": (
        lambda F, x, t: F.nll_loss(F.log_softmax(x, -1), t),
        [_rand(4, 2, 3), np.array([[0, 1], [2, 2], [1, 0], [0, 0]])],
        0,
    ),
    "conv1d": (lambda F, x, w: F.conv1d(x, w), [_rand(4, 2, 5), _rand(3, 2, 2, seed=1)], (0, None)),
    "conv2d": (
        lambda F, x, w: F.conv2d(x.unsqueeze(0), w, padding=1).squeeze(0),
        [_rand(4, 2, 4, 4), _rand(3, 2, 3, 3, seed=1)],
        (0, None),
    ),
    "max_pool2d": (lambda F, x: F.max_pool2d(x, 2), [_rand(4, 2, 4, 4)], 0),
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x, 2), [_rand(4, 2, 4)], 0),
    "embedding": (
        lambda F, i, w: F.embedding(i, w),
        [np.array([[0, 1], [2, 2], [1, 0], [0, 3]]), _rand(4, 3)],
        (0, None),
    ),
    "embedding_w": (lambda F, i, w: F.embedding(i, w), [np.array([0, 1, 2]), _rand(5, 4, 3)], (None, 0)),
    "one_hot": (lambda F, i: F.one_hot(i, 4), [np.array([0, 1, 2, 3])], 0),
    "normalize": (lambda F, x: F.normalize(x, dim=-1), [_rand(4, 2, 3)], 0),
    "cos_sim": (lambda F, x, y: F.cosine_similarity(x, y, dim=-1), [_rand(4, 2, 3), _rand(2, 3, seed=1)], (0, None)),
    "softplus": (lambda F, x: F.softplus(x, beta=2), [_rand(4, 3)], 0),
    "elu": (lambda F, x: F.elu(x), [_rand(4, 3)], 0),
    "leaky": (lambda F, x: F.leaky_relu(x, 0.1), [_rand(4, 3)], 0),
    "hardtanh": (lambda F, x: F.hardtanh(x), [_rand(4, 3)], 0),
    "relu6": (lambda F, x: F.relu6(x * 4), [_rand(4, 3)], 0),
    "sigmoid": (lambda F, x: F.sigmoid(x) + F.tanh(x), [_rand(4, 3)], 0),
    "gelu_tanh": (lambda F, x: F.gelu(x, approximate="tanh"), [_rand(4, 3)], 0),
    "softmin": (lambda F, x: F.softmin(x, 0), [_rand(4, 3, 2)], 0),
    "pad": (lambda F, x: F.pad(x, (1, 2), value=3.0), [_rand(4, 3)], 0),
    "layer_norm_batched_w": (lambda F, x, w: F.layer_norm(x, (3,), w), [_rand(4, 2, 3), _rand(4, 3, seed=1)], 0),
    "group_norm": (lambda F, x: F.group_norm(x.unsqueeze(0), 2).squeeze(0), [_rand(4, 4, 3)], 0),
    "batch_norm_eval": (
        lambda F, x, m, v: F.batch_norm(x, m, v),
        [_rand(4, 5, 3), _rand(3, seed=1), np.abs(_rand(3, seed=2))],
        (0, None, None),
    ),
    "ce_probs": (lambda F, x, y: F.cross_entropy(x, y.softmax(-1)), [_rand(4, 2, 3), _rand(4, 2, 3, seed=1)], 0),
    "ce_smooth": (
        lambda F, x, t: F.cross_entropy(x, t, label_smoothing=0.1),
        [_rand(4, 2, 3), np.array([[0, 1], [2, 2], [1, 0], [0, 0]])],
        0,
    ),
    "ce_weight": (
        lambda F, x, t, w: F.cross_entropy(x, t, weight=w),
        [_rand(4, 2, 3), np.array([[0, 1], [2, 2], [1, 0], [0, 0]]), np.abs(_rand(3, seed=3))],
        (0, 0, None),
    ),
    "kl_div": (
        lambda F, x, y: F.kl_div(x.log_softmax(-1), y.softmax(-1), reduction="batchmean"),
        [_rand(4, 2, 3), _rand(4, 2, 3, seed=1)],
        0,
    ),
    "interpolate": (lambda F, x: F.interpolate(x.unsqueeze(0), scale_factor=2).squeeze(0), [_rand(4, 2, 3)], 0),
    "sdpa": (lambda F, q: F.scaled_dot_product_attention(q, q, q), [_rand(4, 2, 3, 4)], 0),
    "mha_like": (lambda F, x, w: F.linear(x, w).softmax(-1) @ x, [_rand(4, 3, 3), _rand(3, 3, seed=1)], (0, None)),
}


@pytest.mark.parametrize("fn, arrays, in_dims", _FUNCTIONAL_CASES.values(), ids=_FUNCTIONAL_CASES.keys())
def test_nn_functional_under_vmap(fn, arrays, in_dims, torch):
    _compare(torch, lambda lib, *a: fn(lib.nn.functional, *a), *arrays, in_dims=in_dims)


# --- every declared op, from its declaration's samples ----------------------------------------------------------
def _declared_cases():
    from samples import declared_samples

    return declared_samples()


def _sample_tensors(decl, sample, batch: int, batch_all: bool):
    """The sample's arrays ``batch`` times (floats shifted per sample), and which of them are mapped over."""
    from samples import arrays

    draws = [[a + 0.1 * b if a.dtype.kind == "f" else a for a in arrays(sample)] for b in range(batch)]
    mapped = [a.dtype.kind == "f" and (batch_all or k == 0) for k, a in enumerate(draws[0])]
    return draws, mapped


def _call_with(decl, sample, tensors: list):
    from samples import materialize

    data = list(tensors)
    args = materialize(sample.args, _AsIs, data, False)
    kwargs = {k: materialize(v, _AsIs, data, False) for k, v in sample.kwargs.items()}
    return decl.function(*args, **kwargs)


class _AsIs:
    """A ``lib`` for ``samples.materialize`` whose ``tensor`` keeps numbagrad tensors as they are."""

    @staticmethod
    def tensor(x):
        return x if isinstance(x, numbagrad.Tensor) else numbagrad.tensor(x)


@pytest.mark.parametrize("batch_all", [True, False], ids=["all-mapped", "first-mapped"])
@pytest.mark.parametrize(("decl", "sample"), _declared_cases())
def test_declared_op_under_vmap_equals_the_op_per_sample(decl, sample, batch_all):
    if decl.name == "quantile":  # its q must stay in [0, 1]
        batch_all = False
    draws, mapped = _sample_tensors(decl, sample, 3, batch_all)
    if not any(mapped):
        pytest.skip("no floating-point tensor to map over")
    batched = [numbagrad.tensor(np.stack([d[k] for d in draws])) for k in range(len(mapped)) if mapped[k]]

    def per_sample(*mapped_tensors):
        it = iter(mapped_tensors)
        return _call_with(decl, sample, [next(it) if m else draws[0][k] for k, m in enumerate(mapped)])

    out = func.vmap(per_sample, randomness="same")(*batched)
    from samples import tensors

    got = tensors(out)
    expected = [tensors(per_sample(*[t[b] for t in batched])) for b in range(3)]
    assert len(got) == len(expected[0])
    for j, g in enumerate(got):
        want = np.stack([e[j].detach().numpy() for e in expected])
        assert g.shape == want.shape
        np.testing.assert_allclose(g.detach().numpy(), want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize(("decl", "sample"), [c for c in _declared_cases() if c.values[0].differentiable])
def test_declared_op_passes_gradcheck_with_batched_grads(decl, sample):
    from samples import declared_function

    fn, inputs = declared_function(decl, sample)
    if not inputs:
        pytest.skip("no input requires grad")
    assert gradcheck(fn, tuple(inputs), check_batched_grad=True)


def test_results_keep_the_graph_to_weights_the_function_closes_over(torch):
    w = numbagrad.tensor(_rand(3, 2), requires_grad=True)
    tw = torch.tensor(_rand(3, 2), requires_grad=True)
    x = _rand(4, 3, seed=1)
    func.vmap(lambda a: (a @ w).tanh().sum())(numbagrad.tensor(x)).sum().backward()
    torch.func.vmap(lambda a: (a @ tw).tanh().sum())(torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
