"""The shape ops' common calls (plain ints on a plain tensor) build their view and node directly: each is held to
torch on values, gradients, node names, view tracking and errors, on that path and beside it."""

import numpy as np
import pytest

import numbagrad

CALLS = {
    "view": lambda x: x.view(6, 4),
    "view -1": lambda x: x.view(-1, 4),
    "view tuple": lambda x: x.view((4, 6)),
    "reshape": lambda x: x.reshape(2, -1),
    "flatten": lambda x: x.flatten(),
    "flatten 1": lambda x: x.flatten(1),
    "transpose": lambda x: x.transpose(0, -1),
    "permute": lambda x: x.permute(2, 0, 1),
    "permute negative": lambda x: x.permute(-1, 0, -2),
    "unsqueeze": lambda x: x.unsqueeze(-1),
    "squeeze kept": lambda x: x.squeeze(1),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "expand -1": lambda x: x[:, :1].expand(3, -1, -1, 4),
    "t": lambda x: x[0].t(),
}


def _leaf(lib):
    return lib.tensor(np.arange(24.0).reshape(2, 3, 4) / 7, requires_grad=True)


@pytest.mark.parametrize("name", CALLS)
def test_value_node_and_gradient_match_torch(torch, name):
    call = CALLS[name]
    ours, theirs = _leaf(numbagrad), _leaf(torch)
    a, b = call(ours), call(theirs)
    assert tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    assert a._is_view() and a._base is ours
    g = np.arange(float(b.numel())).reshape(tuple(b.shape))
    a.backward(numbagrad.tensor(g))
    b.backward(torch.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("name", CALLS)
def test_double_backward_goes_through_the_same_view(name):
    x = _leaf(numbagrad).double().detach().requires_grad_()
    assert numbagrad.autograd.gradcheck(lambda t: CALLS[name](t), (x,))
    assert numbagrad.autograd.gradgradcheck(lambda t: CALLS[name](t) ** 2, (x,))


def test_a_view_made_under_no_grad_refuses_an_inplace_change_that_needs_a_graph(torch):
    errors = []
    for lib in (numbagrad, torch):
        x = _leaf(lib)
        with lib.no_grad():
            v = x.view(6, 4)
        assert v.requires_grad
        with pytest.raises(RuntimeError) as info:
            v.mul_(2)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_a_view_shares_the_version_counter():
    x = numbagrad.zeros(2, 3)
    v = x.view(3, 2)
    x.add_(1)
    assert v._version == x._version == 1
    assert v[0, 0].item() == 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda lib, x: x.view(5, 5),
        lambda lib, x: x.view(-1, -1),
        lambda lib, x: x.view(),
        lambda lib, x: x.transpose(1, 2).view(24),
        lambda lib, x: x.permute(0, 0, 1),
        lambda lib, x: x.permute(0, 1, 3),
        lambda lib, x: x.unsqueeze(4),
        lambda lib, x: x.squeeze(3),
        lambda lib, x: x.expand(2, 5, 4),
        lambda lib, x: x.expand(-1, 2, 3, 4),
        lambda lib, x: x.flatten(2, 0),
    ],
)
def test_bad_calls_raise_torchs_error(torch, call):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(Exception) as info:
            call(lib, _leaf(lib))
        errors.append((type(info.value), str(info.value).split("\n")[0]))
    assert errors[0] == errors[1]


def test_split_pieces_share_one_node_and_unused_pieces_get_zero_gradients(torch):
    grads = []
    for lib in (numbagrad, torch):
        x = _leaf(lib)
        pieces = x.split(3, 2)
        assert len({id(p.grad_fn) for p in pieces}) == 1
        assert [p.output_nr for p in pieces] == [0, 1]
        assert type(pieces[0].grad_fn).__name__ == "SplitBackward0"
        (pieces[0] * 2).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_chunk_pieces_refuse_an_inplace_change_as_outputs_of_one_node(torch):
    errors = []
    for lib in (numbagrad, torch):
        a, _ = _leaf(lib).chunk(2, 1)
        with pytest.raises(RuntimeError) as info:
            a.mul_(2)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_split_under_no_grad_makes_unlinked_views(torch):
    for lib in (numbagrad, torch):
        x = _leaf(lib)
        with lib.no_grad():
            pieces = x.split([1, 2], 1)
        assert all(p.grad_fn is None and p.requires_grad and p._base is x for p in pieces)


INDEXING = {
    "slice": lambda x: x[:, 1:3],
    "slice alone": lambda x: x[1:],
    "full slice": lambda x: x[:],
    "full slices": lambda x: x[:, :],
    "int": lambda x: x[1],
    "int and step": lambda x: x[-1, ::2, 1],
    "stop past the end": lambda x: x[:, 1:10],
    "select": lambda x: x.select(1, 2),
    "narrow": lambda x: x.narrow(2, 1, 2),
}


@pytest.mark.parametrize("name", INDEXING)
def test_basic_indexing_matches_torch_on_value_node_and_gradient(torch, name):
    call = INDEXING[name]
    ours, theirs = _leaf(numbagrad), _leaf(torch)
    a, b = call(ours), call(theirs)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    assert a._base is ours
    g = np.arange(float(b.numel())).reshape(tuple(b.shape))
    a.backward(numbagrad.tensor(g))
    b.backward(torch.tensor(g))
    np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


@pytest.mark.parametrize("name", INDEXING)
def test_basic_indexing_differentiates_twice(name):
    x = _leaf(numbagrad).double().detach().requires_grad_()
    assert numbagrad.autograd.gradgradcheck(lambda t: INDEXING[name](t) ** 2, (x,))


@pytest.mark.parametrize("call", [lambda x: x[2], lambda x: x[:, -4], lambda x: x[::-1], lambda x: x[0, 0, 0, 0]])
def test_bad_basic_indices_raise_torchs_error(torch, call):
    errors = []
    for lib in (numbagrad, torch):
        with pytest.raises(Exception) as info:
            call(_leaf(lib))
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_a_parameter_view_is_a_plain_tensor_with_the_parameters_history(torch):
    names = []
    for lib in (numbagrad, torch):
        w = lib.nn.Parameter(lib.ones(3, 2))
        v = w.t()
        assert type(v) is lib.Tensor and v._base is w
        names.append(type(v.grad_fn).__name__)
        v.sum().backward()
        assert w.grad.shape == (3, 2)
    assert names[0] == names[1]
