"""In-place ops on views and on bases with views: torch's view tracking (``CopySlices``, regenerated view
grad_fns), compared with torch on values, gradients, node names and error messages."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numbagrad
from torch_oracle import raises_like


def _run(lib, program, arrays):
    """Run ``program(lib, *leaves)`` on leaves made from ``arrays`` (all requiring grad); backward through a
    weighted sum of its result. Returns the result's values and each leaf's gradient."""
    leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
    out = program(lib, *leaves)
    weight = lib.tensor(np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape)))
    (out * weight).sum().backward()
    grads = [None if leaf.grad is None else leaf.grad.detach().numpy().copy() for leaf in leaves]
    return out.detach().numpy().copy(), grads


def _compare(torch, program, *shapes, seed: int = 0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    got, got_grads = _run(numbagrad, program, arrays)
    want, want_grads = _run(torch, program, arrays)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        if w is None:
            assert g is None
        else:
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


# --- writing a value that requires grad into a view of a plain tensor ----------------------------------------
@pytest.mark.parametrize(
    "write",
    [
        lambda v, b: v.copy_(b),
        lambda v, b: v.mul_(b),
        lambda v, b: v.add_(b),
        lambda v, b: v.fill_(b.sum()),
    ],
    ids=["copy_", "mul_", "add_", "fill_"],
)
def test_writing_into_a_view_of_a_plain_tensor_reaches_the_written_value(torch, write):
    def program(lib, b):
        x = lib.ones(4, 4, dtype=lib.float64)
        write(x.narrow(1, 2, 2), b)
        return x

    _compare(torch, program, (4, 2))


def test_setitem_of_a_plain_tensor_with_a_value_that_requires_grad(torch):
    def program(lib, b):
        x = lib.zeros(4, 4, dtype=lib.float64)
        x[:, 2:] = b
        return x

    _compare(torch, program, (4, 2))


def test_the_base_of_a_written_view_requires_grad_with_a_copyslices_node():
    x = numbagrad.zeros(4, 4)
    v = x.narrow(1, 2, 2)
    v.copy_(numbagrad.ones(4, 2, requires_grad=True))
    assert x.requires_grad and not x.is_leaf
    assert type(x.grad_fn).__name__ == "CopySlices"
    assert type(v.grad_fn).__name__ == "AsStridedBackward0"


# --- in-place on views of tensors that require grad ----------------------------------------------------------
def test_mul_on_a_narrowed_clone(torch):
    def program(lib, a):
        x = a.clone()
        x.narrow(1, 1, 2).mul_(2)
        return x

    _compare(torch, program, (3, 4))


def test_inplace_on_a_view_uses_the_views_old_values(torch):
    def program(lib, a):
        x = a * 1
        x[1].exp_()
        return x * x

    _compare(torch, program, (3, 4))


def test_inplace_on_a_view_with_an_operand_that_requires_grad(torch):
    def program(lib, a, b):
        x = a.clone()
        x[:, 1:3].mul_(b)
        return x.sin()

    _compare(torch, program, (3, 4), (3, 2))


def test_inplace_on_a_view_with_itself_and_a_sibling_view_as_operands(torch):
    def program(lib, a):
        x = a.clone()
        x[0].add_(x[0])
        x[1].add_(x[2])
        x.t()[3].sub_(x[:, 0])
        return x

    _compare(torch, program, (3, 4))


@pytest.mark.parametrize(
    "write",
    [
        lambda x: x[0:2].add_(x[1:3]),
        lambda x: x.view(-1)[1:5].add_(x.view(-1)[0:4]),
        lambda x: x[:, 0:2].add_(x[:, 1:3]),
    ],
)
def test_partly_overlapping_operands_are_refused_where_torch_can_tell(torch, write):
    outcome = []
    for lib in (numbagrad, torch):
        x = lib.ones(3, 4)
        try:
            write(x)
            outcome.append(x.tolist())
        except RuntimeError as e:
            outcome.append(str(e))
    assert outcome[0] == outcome[1]


def test_rnn_style_loop_writing_each_step_into_a_slice(torch):
    def program(lib, x, w, h0):
        h = lib.zeros(2, 4, 3, dtype=lib.float64)
        h[:, 0] = h0
        for t in range(1, 4):
            h[:, t] = lib.tanh(h[:, t - 1].clone() @ w + x[:, t])
        return h

    _compare(torch, program, (2, 4, 3), (3, 3), (2, 3))


def test_rnn_style_loop_without_clone_fails_at_backward_as_torchs(torch):
    """``h[:, t - 1] @ w`` saves the view, and the next step's write changes its version (torch refuses too)."""

    def program(lib, x, w, h0):
        h = lib.zeros(2, 4, 3, dtype=lib.float64)
        h[:, 0] = h0
        for t in range(1, 4):
            h[:, t] = lib.tanh(h[:, t - 1] @ w + x[:, t])
        return h

    arrays = [np.ones((2, 4, 3)), np.ones((3, 3)), np.ones((2, 3))]
    for lib in (numbagrad, torch):
        with pytest.raises(RuntimeError, match="is at version 4; expected version 3 instead"):
            _run(lib, program, arrays)


def test_rnn_style_loop_with_a_recurrence_that_saves_nothing(torch):
    def program(lib, x, h0):
        h = lib.zeros(2, 4, 3, dtype=lib.float64)
        h[:, 0] = h0
        for t in range(1, 4):
            h[:, t] = lib.tanh(x[:, t] - h[:, t - 1])
        return h

    _compare(torch, program, (2, 4, 3), (2, 3))


def test_masked_write_of_a_function_of_the_input(torch):
    def program(lib, x):
        out = lib.zeros(3, 4, dtype=lib.float64)
        mask = lib.tensor(np.array([[1, 0, 1, 0], [0, 0, 1, 1], [1, 1, 0, 0]], dtype=bool))
        out[mask] = (x * 3).sin()[mask]
        return out

    _compare(torch, program, (3, 4))


def test_masked_write_into_a_view(torch):
    def program(lib, a, b):
        x = a.clone()
        row = x[1]
        row[row > 0] = b[row > 0] * 2
        return x

    _compare(torch, program, (3, 4), (4,))


def test_view_of_a_view_written_in_place(torch):
    def program(lib, a, b):
        x = a.clone()
        x.t()[1:, 0].mul_(b)
        return x

    _compare(torch, program, (3, 4), (3,))


def test_chains_of_views_through_view_transpose_and_unsqueeze(torch):
    def program(lib, a, b):
        x = a.clone()
        y = x.view(2, 6).transpose(0, 1).unsqueeze(0)
        y[0, 2:4].add_(b)
        return x

    _compare(torch, program, (3, 4), (2, 2))


def test_diagonal_and_squeeze_views_written_in_place(torch):
    def program(lib, a, b):
        x = a.clone()
        x.diagonal().mul_(b)
        x[1:2].squeeze(0).add_(1)
        return x

    _compare(torch, program, (3, 3), (3,))


def test_inplace_on_a_base_with_live_views(torch):
    def program(lib, a, b):
        x = a.clone()
        v = x[1]
        x.mul_(b)
        return v * 2 + x[0]

    _compare(torch, program, (3, 4), (3, 4))


def test_a_live_view_follows_an_inplace_op_on_a_sibling_view(torch):
    def program(lib, a):
        x = a.clone()
        whole = x.view(-1)
        x[0].pow_(2)
        return whole * 1

    _compare(torch, program, (2, 3))


def test_an_expanded_view_follows_an_inplace_op_on_its_base(torch):
    def program(lib, a, b):
        x = a.clone()
        wide = x[0].expand(3, 4)
        x[0].mul_(b)
        return wide * lib.arange(12.0, dtype=lib.float64).view(3, 4)

    _compare(torch, program, (2, 4), (4,))


def test_transposed_views_follow_an_inplace_op_on_their_base(torch):
    def program(lib, a, b):
        x = a.clone()
        t, m = x.T, x.unsqueeze(0).mT
        x.add_(b)
        return t.sin() + m[0].cos()

    _compare(torch, program, (3, 4), (3, 4))


def test_views_of_a_plain_tensor_made_before_it_requires_grad(torch):
    def program(lib, b):
        x = lib.zeros(2, 3, dtype=lib.float64)
        first, second = x[0], x[1]
        second.copy_(b)
        return first + second

    _compare(torch, program, (3,))


def test_view_grad_fns_regenerate_as_torchs(torch):
    for lib in (numbagrad, torch):
        x = lib.ones(3, 3, requires_grad=True).clone()
        v1, v2 = x[0], x[1]
        v2.mul_(2)
        assert type(x.grad_fn).__name__ == "CopySlices"
        assert type(v1.grad_fn).__name__ == "AsStridedBackward0"
        assert type(v2.grad_fn).__name__ == "AsStridedBackward0"


def test_double_backward_through_an_inplace_op_on_a_view(torch):
    def grads(lib):
        a = lib.tensor(np.array([[0.5, -1.0], [2.0, 0.25]]), requires_grad=True)
        x = a.clone()
        x[0].mul_(a[1])
        (g,) = lib.autograd.grad((x**2).sum(), a, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), a)
        return g.detach().numpy(), gg.numpy()

    for got, want in zip(grads(numbagrad), grads(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_gradcheck_through_inplace_ops_on_views():
    def f(a, b):
        x = a.clone()
        x[:, 1].mul_(b)
        x.t()[0].add_(b.sum())
        return x.tanh()

    a = numbagrad.tensor(np.random.default_rng(1).standard_normal((3, 3)), requires_grad=True)
    b = numbagrad.tensor(np.random.default_rng(2).standard_normal(3), requires_grad=True)
    assert numbagrad.autograd.gradcheck(f, (a, b))


def test_a_view_that_retains_grad_reports_the_gradient_of_its_new_value(torch):
    grads = []
    for lib in (numbagrad, torch):
        a = lib.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
        x = a.clone()
        v = x[0]
        v.retain_grad()
        x.mul_(3)
        (v * v).sum().backward()
        grads.append(v.grad.numpy())
    np.testing.assert_allclose(*grads)


# --- base, version counter, detach ---------------------------------------------------------------------------
def test_base_and_is_view_as_torch(torch):
    for lib in (numbagrad, torch):
        x = lib.zeros(2, 3)
        t = x.t()
        assert t._is_view() and t._base is x
        assert t[0]._base is x  # a view of a view has the root as its base
        assert not x._is_view() and x._base is None
        assert not x.detach()._is_view()


def test_a_view_and_its_base_share_one_version_counter():
    x = numbagrad.zeros(2, 3)
    v = x[1]
    w = v.view(3)
    w.add_(1)
    assert x._version == v._version == w._version == 1
    x.mul_(2)
    assert w._version == 2


def test_detach_shares_the_version_counter_and_data_does_not(torch):
    for lib in (numbagrad, torch):
        x = lib.ones(3, requires_grad=True).clone()
        d = x.detach()
        d.add_(1)
        assert x._version == 1
        x.data.add_(1)
        assert x._version == 1
        assert x.detach()[0].item() == 3.0


def test_values_written_through_a_view_are_seen_by_base_and_other_views():
    x = numbagrad.ones(2, 2, requires_grad=True).clone()
    v, w = x[0], x.view(4)
    v.mul_(3)
    assert x.tolist() == [[3.0, 3.0], [1.0, 1.0]]
    assert w.tolist() == [3.0, 3.0, 1.0, 1.0]


# --- errors --------------------------------------------------------------------------------------------------
def test_error_inplace_on_a_view_of_a_leaf_that_requires_grad(torch):
    raises_like(torch, lambda lib: lib.ones(3, requires_grad=True)[0:2].mul_(2))


def test_error_setitem_on_a_leaf_that_requires_grad(torch):
    def program(lib):
        x = lib.ones(3, requires_grad=True)
        x[0] = 1

    raises_like(torch, program)


@pytest.mark.parametrize(
    "pieces", [lambda x: x.unbind(0), lambda x: x.split(1), lambda x: x.split([1, 2]), lambda x: x.chunk(3)]
)
def test_error_inplace_on_an_output_of_a_multi_view_op(torch, pieces):
    raises_like(torch, lambda lib: pieces(lib.ones(3, 2, requires_grad=True).clone())[0].mul_(2))


def test_error_inplace_on_a_view_of_an_output_of_a_multi_view_op(torch):
    raises_like(torch, lambda lib: lib.ones(3, 4, requires_grad=True).clone().unbind(0)[1][1:].mul_(2))


def test_error_writing_grad_into_an_unbound_piece_of_a_plain_tensor(torch):
    def program(lib):
        source = lib.ones(3, 2, requires_grad=True)
        lib.zeros(3, 2).unbind(0)[0].copy_(source[0])

    raises_like(torch, program)


def test_inplace_on_multi_view_outputs_without_grad_is_allowed(torch):
    for lib in (numbagrad, torch):
        x = lib.zeros(2, 2)
        x.unbind(0)[1].add_(1)
        y = lib.ones(2, requires_grad=True).clone()
        with lib.no_grad():
            y.unbind(0)[0].mul_(3)
        assert x.tolist() == [[0.0, 0.0], [1.0, 1.0]] and y.tolist() == [3.0, 1.0]


def test_error_view_made_in_no_grad_mode_then_modified_with_grad(torch):
    def program(lib):
        x = lib.ones(3, 2, requires_grad=True).clone()
        with lib.no_grad():
            v = x[0]
        v.mul_(2)

    raises_like(torch, program)


def test_error_view_of_a_no_grad_view_modified_with_grad(torch):
    def program(lib):
        a = lib.ones(2, 4, requires_grad=True)
        with lib.no_grad():
            v = a[0]
        v[1:].mul_(2)

    raises_like(torch, program)


def test_error_no_grad_view_of_a_plain_tensor_modified_with_an_operand_that_requires_grad(torch):
    def program(lib):
        p = lib.ones(3)
        with lib.no_grad():
            v = p[1:]
        v.mul_(lib.ones(2, requires_grad=True))

    raises_like(torch, program)


def test_error_no_grad_pieces_of_unbind_modified_with_grad(torch):
    def program(lib):
        a = lib.ones(3, 2, requires_grad=True)
        with lib.no_grad():
            pieces = a.unbind(0)
        pieces[0].mul_(2)

    raises_like(torch, program)


@pytest.mark.parametrize("grad_mode", [True, False])
def test_error_view_returned_by_a_custom_function_without_a_graph_modified_with_grad(torch, grad_mode):
    def program(lib):
        class Tail(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x[1:]

            @staticmethod
            def backward(ctx, g):
                return None

        with lib.set_grad_enabled(grad_mode):
            y = Tail.apply(lib.ones(3))
        y.mul_(lib.ones(2, requires_grad=True))

    raises_like(torch, program)


def test_views_made_inside_a_forward_are_not_no_grad_views(torch):
    """A built-in op's forward runs without grad mode; a view it makes there is its output, not the user's."""
    for lib in (numbagrad, torch):
        x = lib.ones(3, 4, requires_grad=True).clone()
        x.narrow(1, 1, 2).mul_(2)
        x.sum().backward()


def test_no_grad_view_of_a_plain_tensor_may_be_modified_without_a_graph(torch):
    for lib in (numbagrad, torch):
        p = lib.ones(3)
        with lib.no_grad():
            v = p[1:]
        v.mul_(2)
        assert p.tolist() == [1.0, 2.0, 2.0]


def test_no_grad_view_requires_grad_as_its_base_and_drops_its_gradient(torch):
    """torch: the view requires grad (its base does) and is a leaf without an accumulator, so ops on it record a
    graph whose gradient reaches neither the view nor the base."""
    for lib in (numbagrad, torch):
        a = lib.ones(2, 3, requires_grad=True)
        with lib.no_grad():
            v = a[0]
        assert v.requires_grad and v.is_leaf and v.grad_fn is None
        y = (v * 2).sum()
        assert y.requires_grad
        y.backward()
        assert a.grad is None and v.grad is None


def test_error_inplace_on_a_view_returned_by_a_custom_function(torch):
    def program(lib):
        class AsView(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                return g

        AsView.apply(lib.ones(3, requires_grad=True).clone()).mul_(2)

    raises_like(torch, program)


def test_error_using_an_unbound_piece_after_its_base_changed(torch):
    """torch raises when the piece's grad_fn is next read, numbagrad when backward reaches it: the same error."""

    def program(lib):
        x = lib.ones(3, 2, requires_grad=True).clone()
        piece = x.unbind(0)[0]
        x.mul_(2)
        (piece * 1).sum().backward()

    raises_like(torch, program)


def test_error_using_a_no_grad_view_after_its_base_changed(torch):
    def program(lib):
        x = lib.ones(3, 2, requires_grad=True).clone()
        with lib.no_grad():
            v = x[0]
        x.mul_(3)
        (v * 1).sum().backward()

    raises_like(torch, program)


def test_error_using_a_custom_functions_view_after_its_base_changed(torch):
    def program(lib):
        class AsView(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                return g

        x = lib.ones(3, requires_grad=True).clone()
        v = AsView.apply(x)
        x.mul_(2)
        (v * 1).sum().backward()

    raises_like(torch, program)


def test_errors_leave_the_data_intact():
    x = numbagrad.ones(3, 2, requires_grad=True).clone()
    piece = x.unbind(0)[0]
    with pytest.raises(RuntimeError):
        piece.mul_(5)
    assert x.tolist() == [[1.0, 1.0]] * 3 and x._version == 0


def test_detach_inplace_of_a_view_is_refused(torch):
    raises_like(torch, lambda lib: lib.ones(3, requires_grad=True).clone()[1:].detach_())


# --- random programs --------------------------------------------------------------------------------------------
_VIEWS = [
    lambda x: x[1],
    lambda x: x[:, 1:3],
    lambda x: x.t(),
    lambda x: x.narrow(0, 1, 2),
    lambda x: x.view(-1),
    lambda x: x.transpose(0, 1)[2],
    lambda x: x.unsqueeze(0)[0, ::2],
    lambda x: x.diagonal(),
    lambda x: x.unbind(1)[0],
    lambda x: x.T[1:, 1],
]

_INPLACE = [
    lambda v, a: v.mul_(2.0),
    lambda v, a: v.add_(a.sum() * 0.5),
    lambda v, a: v.sin_(),
    lambda v, a: v.copy_(a[0, : v.shape[-1]] if v.dim() else a[0, 0]),
    lambda v, a: v.zero_(),
    lambda v, a: v.__setitem__(..., 1.5),
    lambda v, a: v.mul_(v.detach() + 1),
]


def _random_program(lib, steps, a, b):
    """Run ``steps`` (view index, op index, target) on ``a.clone()``; a step's target is a fresh view (0), a
    view kept from earlier steps (1), the base itself (2), the leaf ``a`` (3) or a view of it (4)."""
    x = a.clone()
    kept = []
    for view_k, op_k, target in steps:
        if target == 2:
            t = x
        elif target == 3:
            t = a
        elif target == 4:
            t = _VIEWS[view_k](a)
        elif target == 1 and kept:
            t = kept[-1]
        else:
            t = _VIEWS[view_k](x)
            kept.append(t)
        _INPLACE[op_k](t, b)
    return x * 1 + sum(k.sum() for k in kept[-2:]) if kept else x * 1


_STEP = st.tuples(
    st.integers(0, len(_VIEWS) - 1), st.integers(0, len(_INPLACE) - 1), st.sampled_from([0, 0, 0, 1, 1, 2, 2, 3, 4])
)


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=4))
def test_random_programs_of_views_and_inplace_ops_match_torch(torch, steps):
    rng = np.random.default_rng(len(steps))
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    results = []
    for lib in (numbagrad, torch):
        try:
            results.append(("ok", *_run(lib, lambda lib, a_, b_: _random_program(lib, steps, a_, b_), [a, b])))
        except RuntimeError as e:  # the saved-tensor check names nodes its own way: compare its type only
            same_words = not str(e).startswith("one of the variables needed for gradient computation")
            results.append(("error", type(e).__name__, str(e) if same_words else ""))
    got, want = results
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
        for g, w in zip(got[2], want[2]):
            assert (g is None) == (w is None)
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    else:
        assert got == want


def test_inplace_on_views_on_each_device(torch, device):
    def program(a, b):
        x = a.clone()
        v = x[1]
        x[0].mul_(b)
        x[:, 2:] = b[:2] * 2
        return (x * 3).sum() + (v * v).sum()

    a, b = np.arange(12.0).reshape(3, 4), np.linspace(-1.0, 1.0, 4)
    results = []
    for lib, on in ((numbagrad, device), (torch, "cpu")):
        ta, tb = lib.tensor(a, requires_grad=True, device=on), lib.tensor(b, requires_grad=True, device=on)
        program(ta, tb).backward()
        results.append([ta.grad.cpu().numpy(), tb.grad.cpu().numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_writing_into_a_view_of_a_column_major_base(torch):
    grads = []
    for lib in (numbagrad, torch):
        x = lib.from_numpy(np.asfortranarray(np.arange(12.0).reshape(3, 4)))
        b = lib.tensor(np.array([1.0, -2.0, 0.5]), requires_grad=True)
        x[:, 1].mul_(b)
        (x * lib.arange(12.0, dtype=lib.float64).view(3, 4)).sum().backward()
        grads.append((x.detach().numpy().copy(), b.grad.numpy()))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want)


def test_a_hook_on_a_view_before_it_is_changed_in_place_does_not_run(torch):
    """torch's CopySlices reads the view's old value from the base's old history, not through the view's old
    node: a hook registered on the view before the in-place op is left out of the graph."""
    results = []
    for lib in (numbagrad, torch):
        calls = []
        x = lib.ones(2, 3, requires_grad=True) * 1.0
        v = x[0]
        v.register_hook(lambda g, calls=calls: calls.append(g.tolist()))
        v.mul_(3)
        x.sum().backward()
        results.append(calls)
    assert results[0] == results[1] == []


def test_a_base_that_retains_grad_reports_the_gradient_of_its_value_after_a_view_changed(torch):
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True) * 1.0
        x.retain_grad()
        x[1:].clamp_(-1.0, 1.0)
        (x * lib.tensor([1.0, 2.0, 3.0])).sum().backward()
        results.append(x.grad.tolist())
    assert results[0] == results[1]


@pytest.mark.parametrize("make", ["no_grad", "unbind"])
def test_error_changing_a_refused_view_after_its_base_changed_names_how_it_was_made(torch, make):
    def program(lib):
        x = lib.ones(2, 3, requires_grad=True) * 1.0
        if make == "no_grad":
            with lib.no_grad():
                v = x[0]
        else:
            v = x.unbind(0)[0]
        x.mul_(2)
        v.add_(1)

    raises_like(torch, program)


@pytest.mark.parametrize("on_view", [False, True])
@pytest.mark.parametrize("changed_after", [False, True])
def test_an_inplace_op_that_saves_its_result_saves_the_tensor_itself(torch, on_view, changed_after):
    """relu_ saves its output, which is the tensor it changed: a later in-place change of it stops backward."""
    results = []
    for lib in (numbagrad, torch):
        a = lib.tensor([[1.0, -2.0], [3.0, -4.0]], requires_grad=True)
        x = a * 1
        (x[0] if on_view else x).relu_()
        if changed_after:
            with lib.no_grad():
                x.add_(1)
        try:
            (x * x).sum().backward()
            results.append(a.grad.tolist())
        except RuntimeError as error:
            results.append(str(error).split(":")[0])
    assert results[0] == results[1]


def test_views_follow_a_change_of_their_base_made_without_grad(torch):
    """torch regenerates a view's grad_fn after any in-place change of its base, with grad or without: a hook
    registered on the view's old node leaves the graph."""
    results = []
    for lib in (numbagrad, torch):
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        v = a.expand(2, 2, 2)
        v.register_hook(lambda g: g * 2)
        with lib.no_grad():
            a.t().mul_(3)
        (v * v).sum().backward()
        results.append((type(v.grad_fn).__name__, a.grad.tolist()))
    assert results[0] == results[1]


def test_error_using_a_no_grad_view_after_its_base_changed_without_grad(torch):
    def program(lib):
        p = lib.ones(2, 3, requires_grad=True)
        with lib.no_grad():
            v = p[0]
            p.add_(1)
        (v * 1).sum().backward()

    raises_like(torch, program)


def test_error_copy_into_a_no_grad_view_from_a_source_that_requires_grad_before_shapes(torch):
    def program(lib):
        p = lib.ones(3)
        with lib.no_grad():
            v = p[1:]
        v.copy_(lib.ones(4, requires_grad=True))

    raises_like(torch, program)


def _view_left_behind(lib, make: str):
    """A view that may not follow its base's in-place change, and the base, changed in place after the view was
    made (``make``: how the view was made; ``sibling``: the change goes through another view of the base)."""
    base = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True) * 1.0
    if make == "no_grad":
        with lib.no_grad():
            view = base[:2]
    elif make in ("unbind", "sibling"):
        view = base.unbind(0)[1]
    elif make == "split":
        view = base.split(2)[0]
    else:

        class AsView(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                return g

        view = AsView.apply(base)
    if make == "sibling":
        base[2:].mul_(2)
    else:
        base.mul_(2)
    return view, base


VIEW_MAKERS = ["no_grad", "unbind", "split", "custom_function", "sibling"]


@pytest.mark.parametrize("make", VIEW_MAKERS)
def test_error_reading_grad_fn_of_a_view_left_behind_by_its_base(torch, make):
    raises_like(torch, lambda lib: _view_left_behind(lib, make)[0].grad_fn)


@pytest.mark.parametrize("make", VIEW_MAKERS)
def test_error_using_a_view_left_behind_by_its_base(torch, make):
    raises_like(torch, lambda lib: _view_left_behind(lib, make)[0] * 2)


def test_error_reading_is_leaf_of_a_view_left_behind_by_its_base(torch):
    raises_like(torch, lambda lib: _view_left_behind(lib, "unbind")[0].is_leaf)


def test_error_reading_grad_fn_of_a_view_left_behind_repeats_in_no_grad_mode(torch):
    def program(lib):
        view, _ = _view_left_behind(lib, "split")
        with pytest.raises(RuntimeError):
            _ = view.grad_fn
        with lib.no_grad():
            _ = view.grad_fn

    raises_like(torch, program)


def test_error_changing_a_view_left_behind_by_its_base_says_it_is_being_modified(torch):
    raises_like(torch, lambda lib: _view_left_behind(lib, "unbind")[0].mul_(2))


@pytest.mark.parametrize("make", ["no_grad", "unbind"])
def test_a_view_left_behind_by_its_base_still_requires_grad_prints_and_computes_without_grad(torch, make):
    results = []
    for lib in (numbagrad, torch):
        view, base = _view_left_behind(lib, make)
        with lib.no_grad():
            doubled = view * 2
        results.append((view.requires_grad, repr(view).replace("numbagrad", "torch"), doubled.tolist()))
    assert results[0] == results[1]


def test_a_base_that_left_a_view_behind_still_differentiates(torch):
    grads = []
    for lib in (numbagrad, torch):
        leaf = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        base = leaf * 1.0
        pieces = base.unbind(0)
        base.mul_(3)
        (base * base).sum().backward()
        grads.append((leaf.grad.tolist(), pieces[0].requires_grad))
    assert grads[0] == grads[1]
