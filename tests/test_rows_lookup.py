"""An embedding lookup ``C[X]`` (one integer tensor picking rows) takes its own node forward and a one-pass bounds
check; held to torch on errors, a second backward and a differentiable gradient."""

import numpy as np
import pytest

import numbagrad
from numbagrad.autograd import gradcheck


@pytest.mark.parametrize("index", [[0, 5, -7], [-4, 1], [2, 3, 9]])
def test_first_out_of_range_index_is_the_one_torch_names(torch, index):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(IndexError) as info:
            lib.zeros(3, 2)[lib.tensor(index)]
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_a_failed_lookup_leaves_the_table_and_its_graph_alone():
    table = numbagrad.ones(3, 2, requires_grad=True)
    with pytest.raises(IndexError):
        table[numbagrad.tensor([0, 3])]
    assert table.grad_fn is None and table.tolist() == [[1.0, 1.0]] * 3


def test_second_backward_through_a_lookup_raises_torchs_error(torch):
    messages = []
    for lib in (numbagrad, torch):
        table = lib.ones(3, 2, requires_grad=True)
        out = table[lib.tensor([[0, 2], [2, 1]])].sum()
        out.backward(retain_graph=False)
        with pytest.raises(RuntimeError) as info:
            out.backward()
        messages.append(str(info.value).split("\n")[0])
    assert messages[0] == messages[1]


def test_lookup_gradient_is_differentiable_again():
    table = numbagrad.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    index = numbagrad.tensor([[0, 3], [3, 3]])
    assert gradcheck(lambda t: (t[index] ** 2).sum(), (table,))
    (g,) = numbagrad.autograd.grad((table[index] ** 2).sum(), table, create_graph=True)
    assert g.grad_fn is not None


def test_lookup_under_no_grad_records_nothing():
    table = numbagrad.ones(3, 2, requires_grad=True)
    with numbagrad.no_grad():
        out = table[numbagrad.tensor([1, 1])]
    assert out.grad_fn is None and not out.requires_grad and out._base is None


def test_lookup_is_a_copy_not_a_view(torch):
    for lib in (numbagrad, torch):
        table = lib.zeros(3, 2)
        out = table[lib.tensor([1])]
        out.add_(5)
        assert table.tolist() == [[0.0, 0.0]] * 3


def test_cross_entropy_ignore_index_is_skipped_by_the_bounds_check(torch):
    logits = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    target = [1, -100, 3]
    ours = numbagrad.nn.functional.cross_entropy(numbagrad.tensor(logits), numbagrad.tensor(target))
    theirs = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target))
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-6)
