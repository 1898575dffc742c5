"""Sparse COO tensors against torch: construction, printing, coalescing, to_dense/to_sparse, sparse.mm's values
and gradients (dense side and stored values), sparse.sum, and a GCN layer's training step."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn

INDICES = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]  # (0, 2) twice: uncoalesced
VALUES = [3.0, 4.0, 5.0, 1.5, -2.0]


def _pair(torch, **kw):
    return (numbagrad.sparse_coo_tensor(INDICES, VALUES, (3, 3), **kw),
            torch.sparse_coo_tensor(INDICES, VALUES, (3, 3), **kw))  # fmt: skip


@pytest.mark.torch
def test_construction_and_printing_match_torch(torch):
    ours, theirs = _pair(torch)
    assert repr(ours) == repr(theirs).replace("torch.", "numbagrad.")
    assert ours.is_sparse and ours._nnz() == theirs._nnz() and tuple(ours.shape) == tuple(theirs.shape)
    assert ours.sparse_dim() == 2 and ours.dense_dim() == 0 and not ours.is_coalesced()
    assert repr(ours.coalesce()) == repr(theirs.coalesce()).replace("torch.", "numbagrad.")
    assert repr(numbagrad.sparse_coo_tensor([[0, 2]], [1.0, 2.0])) == repr(
        torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0])
    ).replace("torch.", "numbagrad.")


@pytest.mark.torch
def test_dense_round_trips_match_torch(torch):
    ours, theirs = _pair(torch)
    np.testing.assert_array_equal(ours.to_dense().numpy(), theirs.to_dense().numpy())
    dense = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]])
    assert repr(numbagrad.tensor(dense).to_sparse()) == repr(torch.tensor(dense).to_sparse()).replace(
        "torch.", "numbagrad."
    )
    assert numbagrad.tensor(dense).layout is numbagrad.strided and ours.layout is numbagrad.sparse_coo


@pytest.mark.torch
def test_sparse_mm_matches_torch_with_gradients_to_both_sides(torch):
    ours = numbagrad.sparse_coo_tensor(INDICES, VALUES, (3, 3), dtype=numbagrad.float64, requires_grad=True)
    theirs = torch.sparse_coo_tensor(INDICES, VALUES, (3, 3), dtype=torch.float64, requires_grad=True)
    assert repr(ours) == repr(theirs).replace("torch.", "numbagrad.")
    x = np.random.default_rng(0).standard_normal((3, 4))
    xo, xt = numbagrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_ours, out_theirs = numbagrad.sparse.mm(ours, xo), torch.sparse.mm(theirs, xt)
    np.testing.assert_allclose(out_ours.detach().numpy(), out_theirs.detach().numpy(), rtol=1e-12)
    assert out_ours.grad_fn.name() == type(out_theirs.grad_fn).__name__
    g = np.random.default_rng(1).standard_normal((3, 4))
    (out_ours * numbagrad.tensor(g)).sum().backward()
    (out_theirs * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad.to_dense().numpy(), theirs.grad.to_dense().numpy(), rtol=1e-12)


def test_every_spelling_of_the_product_agrees():
    s = numbagrad.sparse_coo_tensor(INDICES, VALUES, (3, 3), dtype=numbagrad.float64)
    x = numbagrad.randn(3, 2, dtype=numbagrad.float64)
    expected = s.to_dense().numpy() @ x.numpy()
    for out in (s @ x, numbagrad.spmm(s, x), numbagrad.mm(s, x), s.mm(x), numbagrad.sparse.mm(s, x)):
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose((s.t() @ x[:, :1].reshape(3, 1)).numpy(), s.to_dense().numpy().T @ x.numpy()[:, :1])


def test_products_pass_gradcheck():
    values = numbagrad.tensor(VALUES, dtype=numbagrad.float64, requires_grad=True)
    x = numbagrad.randn(3, 2, dtype=numbagrad.float64, requires_grad=True)
    indices = numbagrad.tensor(INDICES)
    assert numbagrad.autograd.gradcheck(
        lambda v, d: numbagrad.sparse.mm(numbagrad.sparse_coo_tensor(indices, v, (3, 3)), d), (values, x)
    )
    assert numbagrad.autograd.gradgradcheck(
        lambda v, d: numbagrad.sparse.mm(numbagrad.sparse_coo_tensor(indices, v, (3, 3)), d) ** 2, (values, x)
    )


@pytest.mark.torch
def test_sparse_sum_matches_torch(torch):
    ours, theirs = _pair(torch)
    assert numbagrad.sparse.sum(ours).item() == torch.sparse.sum(theirs).item()
    assert repr(numbagrad.sparse.sum(ours, 1)) == repr(torch.sparse.sum(theirs, 1)).replace("torch.", "numbagrad.")
    np.testing.assert_array_equal(numbagrad.sparse.sum(ours, (0, 1)).numpy(), torch.sparse.sum(theirs, (0, 1)).numpy())


@pytest.mark.torch
def test_a_gcn_layer_trains_as_torchs(torch):
    """Kipf & Welling's propagation ``A @ (X @ W)`` with a normalised sparse adjacency, one SGD step."""
    rng = np.random.default_rng(2)
    n, f = 6, 4
    edges = np.array([[0, 1, 1, 2, 3, 4, 5, 0, 2, 5], [1, 0, 2, 1, 4, 3, 0, 5, 3, 2]])
    adj_values = rng.uniform(0.1, 1.0, edges.shape[1])
    features, labels = rng.standard_normal((n, f)), rng.integers(0, 2, n)
    results = []
    for lib in (numbagrad, torch):
        lib.manual_seed(0)
        layer1, layer2 = lib.nn.Linear(f, 8, dtype=lib.float64), lib.nn.Linear(8, 2, dtype=lib.float64)
        results.append((lib, layer1, layer2))
    _, t1, t2 = results[1]
    for ours, theirs in ((results[0][1], t1), (results[0][2], t2)):
        ours.load_state_dict({k: numbagrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    losses, grads = [], []
    for lib, l1, l2 in results:
        adj = lib.sparse_coo_tensor(lib.tensor(edges), lib.tensor(adj_values), (n, n))
        h = lib.relu(lib.sparse.mm(adj, l1(lib.tensor(features))))
        loss = lib.nn.functional.cross_entropy(lib.sparse.mm(adj, l2(h)), lib.tensor(labels))
        loss.backward()
        losses.append(loss.item())
        grads.append(l1.weight.grad.numpy())
    assert abs(losses[0] - losses[1]) < 1e-12
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)


@pytest.mark.torch
def test_errors_match_torch(torch):
    for call in (
        lambda m: m.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0]),
        lambda m: m.sparse_coo_tensor([0, 1], [1.0, 2.0]),
        lambda m: m.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3, 3)),
        lambda m: m.sparse.mm(m.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0]), m.ones(2, 2, dtype=m.float64)),
    ):
        with pytest.raises(RuntimeError) as theirs:
            call(torch)
        with pytest.raises(RuntimeError) as ours:
            call(numbagrad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        numbagrad.sparse_coo_tensor(INDICES, VALUES).indices()


def test_sparse_tensors_are_not_dense_tensors():
    s = numbagrad.sparse_coo_tensor(INDICES, VALUES)
    assert not isinstance(s, numbagrad.Tensor)
    with pytest.raises(TypeError):
        nn.functional.relu(s)
