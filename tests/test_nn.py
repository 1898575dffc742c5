"""nn: Module registration and traversal, containers, Parameter, layers, losses, functional and init."""

import math

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.nn import functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.scale = nn.Parameter(numbagrad.ones(1))
        self.block = nn.Sequential(nn.Linear(4, 2), nn.Tanh())
        self.register_buffer("steps", numbagrad.zeros(1))

    def forward(self, x):
        return self.block(self.fc1(x) * self.scale)


# --- registration and traversal -------------------------------------------------------------------------------
def test_named_parameters_are_own_first_then_submodules_in_registration_order():
    assert [name for name, _ in Net().named_parameters()] == [
        "scale",
        "fc1.weight",
        "fc1.bias",
        "block.0.weight",
        "block.0.bias",
    ]


def test_parameters_yield_the_registered_objects_once_even_when_shared():
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, shared)
    assert [id(p) for p in model.parameters()] == [id(shared.weight), id(shared.bias)]


def test_children_and_named_modules():
    net = Net()
    assert [type(m).__name__ for m in net.children()] == ["Linear", "Sequential"]
    assert [name for name, _ in net.named_modules()] == ["", "fc1", "block", "block.0", "block.1"]


def test_buffers_are_in_state_dict_but_not_parameters():
    net = Net()
    assert "steps" in net.state_dict()
    assert all(p is not net.steps for p in net.parameters())


def test_non_persistent_buffer_is_not_saved():
    m = nn.Module()
    m.register_buffer("tmp", numbagrad.zeros(2), persistent=False)
    assert list(m.state_dict()) == [] and [n for n, _ in m.named_buffers()] == ["tmp"]


def test_assigning_a_plain_tensor_to_a_parameter_name_is_torchs_error():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign 'numbagrad.FloatTensor' as parameter 'weight' \(torch.nn"):
        lin.weight = numbagrad.zeros(2, 2)


def test_assigning_before_init_is_torchs_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(numbagrad.zeros(1))

    with pytest.raises(AttributeError, match="cannot assign parameters before Module.__init__\\(\\) call"):
        Bad()


def test_missing_attribute_error_names_the_module():
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        _ = nn.Linear(1, 1).nope


def test_delattr_unregisters():
    net = Net()
    del net.scale
    assert "scale" not in dict(net.named_parameters())


# --- apply, train/eval, zero_grad ------------------------------------------------------------------------------
def test_apply_visits_children_first_then_self_recursively_and_returns_self():
    inner = nn.Sequential(nn.Linear(1, 1), nn.ReLU())
    outer = nn.ModuleList([inner, nn.Tanh()])
    seen = []
    assert outer.apply(lambda m: seen.append(m)) is outer
    assert seen == [inner[0], inner[1], inner, outer[1], outer]


def test_apply_initialises_weights_as_in_the_seed():
    module_list = nn.ModuleList([nn.Linear(10, 5), nn.Linear(5, 2)])
    module_list.apply(lambda m: m.weight.data.fill_(0) if isinstance(m, nn.Linear) else None)
    assert all((m.weight == 0).all() for m in module_list)


def test_train_and_eval_set_training_recursively():
    net = Net().eval()
    assert not net.training and not net.block[1].training
    assert net.train().block[0].training


def _backward_once(net):
    net(numbagrad.ones(2, 3)).sum().backward()


def test_zero_grad_sets_grads_to_none_by_default():
    net = Net()
    _backward_once(net)
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_zero_grad_without_set_to_none_zeroes_in_place():
    net = Net()
    _backward_once(net)
    grad = net.fc1.weight.grad
    net.zero_grad(set_to_none=False)
    assert net.fc1.weight.grad is grad and (grad == 0).all()


# --- state_dict ------------------------------------------------------------------------------------------------
def test_state_dict_round_trip_restores_values():
    a, b = Net(), Net()
    assert not numbagrad.equal(a.fc1.weight, b.fc1.weight)
    result = b.load_state_dict(a.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert numbagrad.equal(pa, pb), name


def test_state_dict_values_are_detached_and_share_storage():
    lin = nn.Linear(2, 2)
    w = lin.state_dict()["weight"]
    assert not w.requires_grad and np.shares_memory(w.numpy(), lin.weight.detach().numpy())


def test_load_state_dict_reports_missing_and_unexpected_keys():
    sd = nn.Linear(2, 2).state_dict()
    del sd["bias"]
    sd["extra"] = numbagrad.zeros(1)
    with pytest.raises(RuntimeError) as info:
        nn.Linear(2, 2).load_state_dict(sd)
    assert str(info.value) == (
        'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". \n\t'
        'Unexpected key(s) in state_dict: "extra". '
    )
    assert nn.Linear(2, 2).load_state_dict(sd, strict=False) == (["bias"], ["extra"])


def test_load_state_dict_reports_size_mismatch():
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape numbagrad.Size"):
        nn.Linear(3, 2).load_state_dict(nn.Linear(2, 2).state_dict())


# --- containers ------------------------------------------------------------------------------------------------
def _list(n):
    return nn.ModuleList([nn.Linear(i + 1, 1) for i in range(n)])


def test_modulelist_indexing_negative_and_slice():
    ml = _list(3)
    assert ml[-1] is ml[2]
    sliced = ml[1:]
    assert isinstance(sliced, nn.ModuleList) and list(sliced) == [ml[1], ml[2]]


def test_modulelist_index_out_of_range():
    with pytest.raises(IndexError, match="index 3 is out of range"):
        _list(3)[3]


def test_modulelist_append_extend_insert_pop_and_renumbering():
    ml = _list(2)
    a, b = ml[0], ml[1]
    c, d, e = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    assert ml.append(c) is ml
    ml.extend([d])
    ml.insert(1, e)
    assert list(ml) == [a, e, b, c, d]
    assert ml.pop(1) is e
    del ml[0]
    assert list(ml) == [b, c, d] and list(ml._modules) == ["0", "1", "2"]
    ml[0] = a
    assert ml[0] is a and len(ml) == 3


def test_modulelist_add_and_iadd():
    ml = _list(1)
    combined = ml + [nn.ReLU()]
    assert len(combined) == 2 and len(ml) == 1
    ml += [nn.ReLU()]
    assert len(ml) == 2


def test_modulelist_extend_with_non_iterable_is_torchs_error():
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable, but got Linear"):
        nn.ModuleList().extend(nn.Linear(1, 1))


def test_sequential_runs_in_order_and_slices():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    x = numbagrad.randn(4, 2)
    expected = seq[2](seq[1](seq[0](x)))
    assert numbagrad.allclose(seq(x), expected)
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2


def test_sequential_from_ordered_dict_keeps_names():
    from collections import OrderedDict

    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(1, 1)), ("act", nn.ReLU())]))
    assert [n for n, _ in seq.named_children()] == ["fc", "act"] and seq[1] is seq.act


def test_moduledict_api():
    md = nn.ModuleDict({"a": nn.ReLU()})
    md["b"] = nn.Linear(1, 1)
    assert list(md) == ["a", "b"] and "b" in md and len(md) == 2
    assert [n for n, _ in md.named_parameters()] == ["b.weight", "b.bias"]
    assert isinstance(md.pop("a"), nn.ReLU) and list(md.keys()) == ["b"]


# --- repr ------------------------------------------------------------------------------------------------------
def test_sequential_repr():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    assert repr(seq) == "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)"


def test_modulelist_repr_compresses_repeats():
    ml = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.Softmax(dim=1)])
    assert repr(ml) == (
        "ModuleList(\n  (0-1): 2 x Linear(in_features=2, out_features=2, bias=True)\n  (2): Softmax(dim=1)\n)"
    )


def test_parameter_repr():
    p = nn.Parameter(numbagrad.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert repr(p) == "Parameter containing:\ntensor([[1., 2.],\n        [3., 4.]], requires_grad=True)"
    assert repr(nn.Parameter(numbagrad.tensor([1.0]), requires_grad=False)) == "Parameter containing:\ntensor([1.])"


def _pairs():
    """The same model in numbagrad and torch, built from the same weights."""
    torch = pytest.importorskip("torch")
    specs = [
        lambda lib: lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.ReLU(), lib.nn.Linear(3, 1, bias=False)),
        lambda lib: lib.nn.ModuleList([lib.nn.Linear(2, 2)] * 3 + [lib.nn.Tanh(), lib.nn.Identity()]),
        lambda lib: lib.nn.ModuleDict({"a": lib.nn.Sigmoid(), "b": lib.nn.Sequential(lib.nn.Softmax(dim=0))}),
        lambda lib: lib.nn.Sequential(lib.nn.ReLU(inplace=True), lib.nn.MSELoss(), lib.nn.CrossEntropyLoss()),
    ]
    return torch, specs


def test_module_reprs_match_torch():
    torch, specs = _pairs()
    for spec in specs:
        assert repr(spec(numbagrad)) == repr(spec(torch))


def test_parameter_repr_matches_torch():
    torch = pytest.importorskip("torch")
    data = [[1.5, -2.25, 3.0], [0.001, 100.0, -7.0]]
    for dtype in ("float32", "float64"):
        ours = nn.Parameter(numbagrad.tensor(data, dtype=getattr(numbagrad, dtype)))
        theirs = torch.nn.Parameter(torch.tensor(data, dtype=getattr(torch, dtype)))
        assert repr(ours) == repr(theirs).replace("torch.", "numbagrad.")


# --- Parameter -------------------------------------------------------------------------------------------------
def test_parameter_is_a_leaf_that_requires_grad_and_shares_storage():
    t = numbagrad.zeros(3)
    p = nn.Parameter(t)
    assert isinstance(p, numbagrad.Tensor) and p.is_leaf and p.requires_grad
    p.data.fill_(2.0)
    assert (t == 2).all()


def test_ops_on_parameters_give_plain_tensors():
    p = nn.Parameter(numbagrad.ones(2))
    assert type(p * 2) is numbagrad.Tensor and type(p.detach()) is numbagrad.Tensor


def test_forward_hooks_replace_arguments_and_output_until_removed():
    """A pre-hook's returned value replaces the arguments, a forward hook's the output; a removed hook no longer
    runs."""
    lin = nn.Linear(2, 2, bias=False)
    with numbagrad.no_grad():
        lin.weight.copy_(numbagrad.eye(2))
    pre = lin.register_forward_pre_hook(lambda module, args: (args[0] * 10,))
    post = lin.register_forward_hook(lambda module, args, out: out + 1)
    x = numbagrad.tensor([[1.0, 2.0]])
    np.testing.assert_allclose(lin(x).detach().numpy(), [[11.0, 21.0]])
    pre.remove()
    np.testing.assert_allclose(lin(x).detach().numpy(), [[2.0, 3.0]])
    post.remove()
    np.testing.assert_allclose(lin(x).detach().numpy(), [[1.0, 2.0]])


# --- Linear and init -------------------------------------------------------------------------------------------
def test_linear_default_init_bounds():
    lin = nn.Linear(400, 50)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives the same bound as the bias
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.abs(b).max() <= bound and abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound


def test_linear_forward_and_gradients_match_the_formula():
    lin = nn.Linear(3, 2).double()
    x = numbagrad.randn(4, 3, dtype=numbagrad.float64, requires_grad=True)
    y = lin(x)
    assert y.grad_fn.name() == "AddmmBackward0"
    xw = x.detach().numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), xw)
    g = np.arange(8.0).reshape(4, 2)
    y.backward(numbagrad.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g @ lin.weight.detach().numpy())
    np.testing.assert_allclose(lin.weight.grad.numpy(), g.T @ x.detach().numpy())
    np.testing.assert_allclose(lin.bias.grad.numpy(), g.sum(0))


def test_linear_gradcheck_and_double_backward():
    x = numbagrad.randn(3, 2, dtype=numbagrad.float64, requires_grad=True)
    w = numbagrad.randn(4, 2, dtype=numbagrad.float64, requires_grad=True)
    b = numbagrad.randn(4, dtype=numbagrad.float64, requires_grad=True)
    assert numbagrad.autograd.gradcheck(F.linear, (x, w, b))
    assert numbagrad.autograd.gradgradcheck(lambda x, w, b: F.linear(x, w, b).tanh(), (x, w, b))


@pytest.mark.parametrize("bias_shape", [(3, 2), (1,), ()], ids=["per-element", "one", "0d"])
def test_linear_bias_broadcasts_to_the_output_as_addmms(bias_shape):
    """torch's ``addmm`` adds any bias that broadcasts to the output; its gradient sums over the broadcast dims."""
    x = numbagrad.randn(3, 4, dtype=numbagrad.float64, requires_grad=True)
    w = numbagrad.randn(2, 4, dtype=numbagrad.float64, requires_grad=True)
    b = numbagrad.randn(*bias_shape, dtype=numbagrad.float64, requires_grad=True)
    y = F.linear(x, w, b)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() @ w.detach().numpy().T + b.detach().numpy())
    g = np.arange(6.0).reshape(3, 2)
    y.backward(numbagrad.tensor(g))
    expected = g if bias_shape == (3, 2) else np.full(bias_shape, g.sum())
    np.testing.assert_allclose(b.grad.numpy(), expected)
    np.testing.assert_allclose(w.grad.numpy(), g.T @ x.detach().numpy())


def test_linear_of_integers_has_no_node():
    y = F.linear(numbagrad.ones(2, 3, dtype=numbagrad.int64), numbagrad.ones(4, 3, dtype=numbagrad.int64),
                 numbagrad.ones(4, dtype=numbagrad.int64))  # fmt: skip
    assert y.dtype == numbagrad.int64 and y.grad_fn is None
    np.testing.assert_array_equal(y.numpy(), np.full((2, 4), 4))


def test_linear_shape_mismatch_is_torchs_error():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(4x3 and 2x5\)"):
        nn.Linear(2, 5)(numbagrad.ones(4, 3))


def test_linear_on_batched_input():
    lin = nn.Linear(3, 2)
    x = numbagrad.randn(5, 4, 3)
    expected = x.detach().numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()
    np.testing.assert_allclose(lin(x).detach().numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("rows, features", [(16, 128), (64, 512), (128, 16)], ids=["short", "wide", "tall"])
@pytest.mark.parametrize("bias_shape", [("rows", "features"), ("features",)], ids=["per-element", "per-feature"])
def test_float32_linear_matches_torch_and_is_contiguous_in_either_product_orientation(
    torch, rows, features, bias_shape
):
    """The backend multiplies a short float32 batch as ``W @ x.T`` and a tall one as ``x @ W.T``: either way the
    values are torch's and the output is row-major."""
    g = np.random.default_rng(0)
    x, w = g.standard_normal((rows, 300), dtype=np.float32), g.standard_normal((features, 300), dtype=np.float32)
    b = g.standard_normal(tuple({"rows": rows, "features": features}[n] for n in bias_shape), dtype=np.float32)
    y = F.linear(numbagrad.tensor(x), numbagrad.tensor(w), numbagrad.tensor(b))
    expected = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b))
    np.testing.assert_allclose(y.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
    assert y.is_contiguous() and y.stride() == expected.stride()


def test_init_fans_and_gains():
    w = numbagrad.empty(30, 20, 2)
    assert nn.init._calculate_fan_in_and_fan_out(w) == (40, 60)
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == math.sqrt(2 / 6)
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2"):
        nn.init.xavier_uniform_(numbagrad.empty(3))


def test_init_functions_fill_in_range_under_no_grad_and_return_the_tensor():
    p = nn.Parameter(numbagrad.empty(200, 100))
    assert nn.init.xavier_uniform_(p) is p
    assert np.abs(p.detach().numpy()).max() <= math.sqrt(6 / 300)
    nn.init.kaiming_uniform_(p, mode="fan_out", nonlinearity="relu")
    assert np.abs(p.detach().numpy()).max() <= math.sqrt(6 / 200)
    nn.init.constant_(p, 0.5)
    assert (p == 0.5).all()
    assert (nn.init.zeros_(p) == 0).all() and (nn.init.ones_(p) == 1).all()
    nn.init.normal_(p, 3.0, 0.1)
    assert abs(p.detach().numpy().mean() - 3.0) < 0.01
    nn.init.uniform_(p, -1.0, -0.5)
    assert p.detach().numpy().max() <= -0.5 and p.detach().numpy().min() >= -1.0
    assert p.grad_fn is None and p.requires_grad


# --- activations and losses ------------------------------------------------------------------------------------
def test_activation_modules_apply_their_function():
    x = numbagrad.tensor([[-1.0, 0.5, 2.0]])
    a = x.numpy()
    np.testing.assert_allclose(nn.ReLU()(x).numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(nn.Tanh()(x).numpy(), np.tanh(a), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp(-a)), rtol=1e-6)
    e = np.exp(a)
    np.testing.assert_allclose(nn.Softmax(dim=1)(x).numpy(), e / e.sum(1, keepdims=True), rtol=1e-6)
    assert nn.Identity(3, key=1)(x) is x


def _logits_targets():
    x = numbagrad.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]], dtype=numbagrad.float64, requires_grad=True)
    return x, numbagrad.tensor([1, 2])


def _cross_entropy_by_hand(logits, target):
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return -logp[np.arange(len(target)), target]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_values(reduction):
    x, t = _logits_targets()
    per_sample = _cross_entropy_by_hand(x.detach().numpy(), t.numpy())
    expected = {"mean": per_sample.mean(), "sum": per_sample.sum(), "none": per_sample}[reduction]
    np.testing.assert_allclose(F.cross_entropy(x, t, reduction=reduction).detach().numpy(), expected)


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    x, t = _logits_targets()
    loss = nn.CrossEntropyLoss()(x, t)
    assert loss.grad_fn.name() == "NllLossBackward0"
    loss.backward()
    a = x.detach().numpy()
    p = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    p[np.arange(2), t.numpy()] -= 1
    np.testing.assert_allclose(x.grad.numpy(), p / 2)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradcheck_and_gradgradcheck(reduction):
    x, t = _logits_targets()
    assert numbagrad.autograd.gradcheck(lambda x: F.cross_entropy(x, t, reduction=reduction), (x,))
    assert numbagrad.autograd.gradgradcheck(lambda x: F.cross_entropy(x, t, reduction=reduction), (x,))


def test_cross_entropy_equals_nll_of_log_softmax():
    x, t = _logits_targets()
    a = F.cross_entropy(x, t, reduction="none")
    b = F.nll_loss(F.log_softmax(x, dim=1), t, reduction="none")
    assert numbagrad.allclose(a, b)
    assert numbagrad.autograd.gradcheck(lambda x: F.nll_loss(F.log_softmax(x, 1), t, reduction="sum"), (x,))


def test_cross_entropy_class_weights_and_ignore_index_by_hand():
    x = numbagrad.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0], [0.0, 0.0, 0.0]], dtype=numbagrad.float64)
    t = numbagrad.tensor([1, 2, -100])
    w = numbagrad.tensor([1.0, 2.0, 3.0], dtype=numbagrad.float64)
    per_sample = _cross_entropy_by_hand(x.numpy()[:2], t.numpy()[:2])
    expected = (2.0 * per_sample[0] + 3.0 * per_sample[1]) / (2.0 + 3.0)  # weighted mean, third sample ignored
    assert F.cross_entropy(x, t, weight=w).item() == pytest.approx(expected, rel=1e-12)
    none = F.nll_loss(F.log_softmax(x, 1), t, weight=w, reduction="none").numpy()
    np.testing.assert_allclose(none, [2.0 * per_sample[0], 3.0 * per_sample[1], 0.0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_cross_entropy_and_nll_loss_match_torch(reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    logits, target, weight = rng.standard_normal((5, 3)), np.array([0, 2, -1, 1, 2]), rng.uniform(0.5, 2, 3)
    results = []
    for lib in (numbagrad, torch):
        x = lib.tensor(logits, requires_grad=True)
        kw = dict(weight=lib.tensor(weight), ignore_index=-1, reduction=reduction)
        a = lib.nn.CrossEntropyLoss(**kw)(x, lib.tensor(target))
        b = lib.nn.NLLLoss(**kw)(lib.nn.functional.log_softmax(x, 1), lib.tensor(target))
        (a.sum() + 2 * b.sum()).backward()
        results.append((a.detach().numpy(), b.detach().numpy(), x.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


def test_weighted_cross_entropy_gradgradcheck():
    x, t = _logits_targets()
    w = numbagrad.tensor([0.5, 2.0, 1.0], dtype=numbagrad.float64)
    assert numbagrad.autograd.gradgradcheck(lambda x: F.cross_entropy(x, t, weight=w), (x,))


def test_cross_entropy_target_out_of_bounds():
    x, _ = _logits_targets()
    with pytest.raises(IndexError, match="Target 3 is out of bounds."):
        F.cross_entropy(x, numbagrad.tensor([0, 3]))


def test_invalid_reduction():
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.mse_loss(numbagrad.ones(2), numbagrad.ones(2), reduction="bad")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_value_and_gradient(reduction):
    x = numbagrad.tensor([1.0, 2.0, 4.0], dtype=numbagrad.float64, requires_grad=True)
    y = numbagrad.tensor([0.0, 2.0, 1.0], dtype=numbagrad.float64)
    loss = nn.MSELoss(reduction=reduction)(x, y)
    sq = np.array([1.0, 0.0, 9.0])
    np.testing.assert_allclose(loss.detach().numpy(), {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction])
    assert numbagrad.autograd.gradcheck(lambda x: F.mse_loss(x, y, reduction=reduction), (x,))


def test_losses_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    logits, target = rng.standard_normal((6, 4)), rng.integers(0, 4, 6)
    for lib, out in ((numbagrad, []), (torch, [])):
        x = lib.tensor(logits, requires_grad=True)
        loss = lib.nn.CrossEntropyLoss()(x, lib.tensor(target)) + lib.nn.MSELoss()(x, lib.zeros(6, 4, dtype=x.dtype))
        loss.backward()
        out.extend([loss.item(), x.grad.numpy()])
        if lib is numbagrad:
            ours = out
        else:
            theirs = out
    assert ours[0] == pytest.approx(theirs[0], rel=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)


def test_module_half_converts_float_parameters_and_buffers_in_place():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    w = model[0].weight
    model.half()
    assert model[0].weight is w and w.dtype == numbagrad.float16 and w.requires_grad
    assert model[1].running_mean.dtype == numbagrad.float16
    assert model[1].num_batches_tracked.dtype == numbagrad.int64


def test_module_to_double_converts_parameters_in_place():
    lin = nn.Linear(2, 2)
    w = lin.weight
    lin.double()
    assert lin.weight is w and w.dtype == numbagrad.float64 and w.requires_grad


@pytest.mark.parametrize("shape", [(2,), (3, 2, 2)], ids=["1d", "3d"])
def test_linear_gradcheck_on_other_input_ranks(shape):
    x = numbagrad.randn(*shape, dtype=numbagrad.float64, requires_grad=True)
    w = numbagrad.randn(4, 2, dtype=numbagrad.float64, requires_grad=True)
    b = numbagrad.randn(4, dtype=numbagrad.float64, requires_grad=True)
    assert numbagrad.autograd.gradcheck(F.linear, (x, w, b))


def test_deepcopy_and_pickle_keep_parameters():
    import copy
    import pickle

    seq = nn.Sequential(nn.Linear(2, 3))
    for clone in (copy.deepcopy(seq), pickle.loads(pickle.dumps(seq))):
        w = clone[0].weight
        assert isinstance(w, nn.Parameter) and w.requires_grad and w is not seq[0].weight
        assert numbagrad.equal(w, seq[0].weight)


def test_module_moves_to_device_and_trains_there(device):
    lin = nn.Linear(3, 2).to(device)
    assert lin.weight.device.type == device and isinstance(lin.weight, nn.Parameter)
    x = numbagrad.randn(4, 3).to(device)
    loss = nn.CrossEntropyLoss()(lin(x), numbagrad.tensor([0, 1, 1, 0]).to(device))
    loss.backward()
    assert lin.weight.grad.device.type == device
    cpu = nn.Linear(3, 2)
    cpu.load_state_dict({k: v.cpu() for k, v in lin.state_dict().items()})
    expected = nn.CrossEntropyLoss()(cpu(x.cpu()), numbagrad.tensor([0, 1, 1, 0]))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
