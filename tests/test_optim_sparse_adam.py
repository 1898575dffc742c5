"""Sparse embedding gradients and ``optim.SparseAdam`` against torch: the sparse COO gradient of
``nn.Embedding(sparse=True)``/``F.embedding(sparse=True)`` (entries, padding, accumulation), 30 SparseAdam steps of
an embedding model, and torch's errors (dense gradients, bad hyper-parameters, dense optimizers given sparse
gradients)."""

from __future__ import annotations

import numpy as np
import pytest

import numbagrad
from numbagrad import nn


def _dense(grad) -> np.ndarray:
    return grad.to_dense().detach().numpy()


def _embedding_pair(torch, padding_idx=None, seed: int = 0):
    w = np.random.default_rng(seed).standard_normal((7, 3))
    theirs = torch.nn.Embedding(7, 3, padding_idx=padding_idx, sparse=True, _weight=torch.tensor(w))
    ours = nn.Embedding(7, 3, padding_idx=padding_idx, sparse=True, _weight=numbagrad.tensor(w))
    return ours, theirs


INDICES = [[0, 1, 3], [3, 0, 6]]


@pytest.mark.parametrize("padding_idx", [None, 1])
def test_sparse_embedding_gradient_is_torchs_sparse_tensor(torch, padding_idx):
    ours, theirs = _embedding_pair(torch, padding_idx)
    scale = np.arange(18.0).reshape(2, 3, 3)
    (theirs(torch.tensor(INDICES)) * torch.tensor(scale)).sum().backward()
    (ours(numbagrad.tensor(INDICES)) * numbagrad.tensor(scale)).sum().backward()
    g, expected = ours.weight.grad, theirs.weight.grad
    assert g.is_sparse and not g.is_coalesced() and tuple(g.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(g._indices().numpy(), expected._indices().numpy())
    np.testing.assert_array_equal(g._values().numpy(), expected._values().numpy())


def test_sparse_gradients_accumulate_and_meet_dense_ones_like_torch(torch):
    w = np.random.default_rng(1).standard_normal((7, 3))
    grads = []
    for lib in (numbagrad, torch):
        weight = lib.tensor(w, requires_grad=True)
        F = lib.nn.functional
        first = F.embedding(lib.tensor(INDICES), weight, sparse=True).sum()
        (first + F.embedding(lib.tensor([2]), weight, sparse=True).sum()).backward()
        F.embedding(lib.tensor([5, 5]), weight, sparse=True).sum().backward()
        sparse = weight.grad
        mixed = lib.tensor(w, requires_grad=True)
        (F.embedding(lib.tensor(INDICES), mixed, sparse=True).sum() + mixed.square().sum()).backward()
        grads.append((sparse._nnz(), _dense(sparse), mixed.grad.is_sparse, mixed.grad.detach().numpy()))
    (n_ours, d_ours, s_ours, m_ours), (n_theirs, d_theirs, s_theirs, m_theirs) = grads
    assert (n_ours, s_ours) == (n_theirs, s_theirs) == (9, False)
    np.testing.assert_array_equal(d_ours, d_theirs)
    np.testing.assert_allclose(m_ours, m_theirs, rtol=1e-15)


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sparse_adam_30_steps_match_torch(torch, dtype, maximize):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((10, 4)).astype(dtype)
    head = rng.standard_normal((4, 2)).astype(dtype)
    batches = [rng.integers(0, 10, (3, 2)) for _ in range(30)]
    results = []
    for lib in (numbagrad, torch):
        emb = lib.nn.Embedding(10, 4, padding_idx=0, sparse=True, _weight=lib.tensor(w))
        opt = lib.optim.SparseAdam(emb.parameters(), lr=0.05, betas=(0.8, 0.95), eps=1e-6, maximize=maximize)
        for idx in batches:
            opt.zero_grad()
            loss = (emb(lib.tensor(idx)) @ lib.tensor(head)).tanh().sum()
            loss.backward()
            opt.step()
        state = opt.state[emb.weight]
        results.append((emb.weight.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy(),
                        state["step"]))  # fmt: skip
    tol = 1e-12 if dtype == "float64" else 2e-5
    for a, b in zip(results[0][:3], results[1][:3]):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    assert results[0][3] == results[1][3] == 30


def test_sparse_adam_refuses_dense_gradients_like_torch(torch):
    messages = []
    for lib in (numbagrad, torch):
        w = lib.zeros(3, requires_grad=True)
        w.sum().backward()
        with pytest.raises(RuntimeError) as err:
            lib.optim.SparseAdam([w]).step()
        messages.append(str(err.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "Adamax"])
def test_dense_optimizers_refuse_sparse_gradients_like_torch(torch, name):
    messages = []
    for lib in (numbagrad, torch):
        emb = lib.nn.Embedding(4, 2, sparse=True)
        emb(lib.tensor([1, 2])).sum().backward()
        with pytest.raises(RuntimeError) as err:
            getattr(lib.optim, name)(emb.parameters()).step()
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_scale_grad_by_freq_with_sparse_gradients_fails_in_backward_like_torch(torch):
    messages = []
    for lib in (numbagrad, torch):
        out = lib.nn.Embedding(4, 2, sparse=True, scale_grad_by_freq=True)(lib.tensor([1, 1]))
        with pytest.raises(RuntimeError) as err:
            out.sum().backward()
        messages.append(str(err.value))
    assert messages[0] == messages[1]


@pytest.mark.parametrize("kw", [{"lr": 0.0}, {"eps": 0.0}, {"betas": (1.0, 0.9)}, {"betas": (0.9, -0.1)}], ids=str)
def test_sparse_adam_argument_errors_match_torch(torch, kw):
    with pytest.raises(ValueError) as theirs:
        torch.optim.SparseAdam([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError) as ours:
        numbagrad.optim.SparseAdam([numbagrad.zeros(2, requires_grad=True)], **kw)
    assert str(ours.value) == str(theirs.value)


def test_zero_grad_without_none_empties_a_sparse_gradient_like_torch(torch):
    results = []
    for lib in (numbagrad, torch):
        emb = lib.nn.Embedding(4, 2, sparse=True)
        emb(lib.tensor([1, 2])).sum().backward()
        lib.optim.SparseAdam(emb.parameters()).zero_grad(set_to_none=False)
        empty = emb.weight.grad._nnz()
        emb(lib.tensor([3])).sum().backward()
        results.append((empty, emb.weight.grad._nnz(), _dense(emb.weight.grad)))
    assert results[0][:2] == results[1][:2] == (0, 1)
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_sparse_gradients_of_two_backward_calls_keep_torchs_entry_order(torch):
    entries = []
    for lib in (numbagrad, torch):
        emb = lib.nn.Embedding(5, 2, sparse=True)
        emb(lib.tensor([4, 1])).sum().backward()
        (2 * emb(lib.tensor([0]))).sum().backward()
        entries.append((emb.weight.grad._indices().numpy(), emb.weight.grad._values().numpy()))
    np.testing.assert_array_equal(entries[0][0], entries[1][0])
    np.testing.assert_array_equal(entries[0][1], entries[1][1])


@pytest.mark.parametrize(
    "mode,kw", [("sum", {}), ("mean", {"padding_idx": 1}), ("sum", {"per_sample_weights": True})], ids=str
)
def test_sparse_embedding_bag_gradient_is_torchs(torch, mode, kw):
    w = np.random.default_rng(5).standard_normal((6, 3))
    psw = np.random.default_rng(6).standard_normal(5)
    grads = []
    for lib in (numbagrad, torch):
        weight = lib.tensor(w, requires_grad=True)
        extra = {"padding_idx": kw["padding_idx"]} if "padding_idx" in kw else {}
        if kw.get("per_sample_weights"):
            extra["per_sample_weights"] = lib.tensor(psw)
        out = lib.nn.functional.embedding_bag(lib.tensor([0, 1, 3, 3, 5]), weight, lib.tensor([0, 2]), mode=mode,
                                              sparse=True, **extra)  # fmt: skip
        (out * out).sum().backward()
        grads.append((weight.grad._indices().numpy(), weight.grad._values().numpy()))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


def test_sparse_embedding_bag_refuses_max_mode_like_torch(torch):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(ValueError) as err:
            lib.nn.EmbeddingBag(4, 2, mode="max", sparse=True)(lib.tensor([[0, 1]]))
        messages.append(str(err.value))
    assert messages[0] == messages[1]


def test_sparse_adam_trains_an_embedding_bag_like_torch(torch):
    w = np.random.default_rng(7).standard_normal((8, 3))
    batches = [np.random.default_rng(s).integers(0, 8, (4, 3)) for s in range(10)]
    weights = []
    for lib in (numbagrad, torch):
        bag = lib.nn.EmbeddingBag.from_pretrained(lib.tensor(w), freeze=False, mode="mean", sparse=True)
        opt = lib.optim.SparseAdam(bag.parameters(), lr=0.1)
        for idx in batches:
            opt.zero_grad()
            bag(lib.tensor(idx)).sin().sum().backward()
            opt.step()
        weights.append(bag.weight.detach().numpy())
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-12, atol=1e-12)
