"""``grad_fn.next_functions`` lists a node's tensor inputs as torch lists them: no entry for a number, a dim, a
tuple or an index tensor; an entry (maybe ``(None, 0)``) for an absent bias and for a Python number that torch
wraps as a tensor (``x * 2``). A node's post-hooks get one gradient per listed input, as do callers of the node."""

import numpy as np
import pytest

import numbagrad
from torch_oracle import raises_like

RNG = np.random.default_rng(0)
X, W, B = RNG.standard_normal((4, 6)), RNG.standard_normal((5, 6)), RNG.standard_normal(5)
IMAGE, KERNEL, BIAS = RNG.standard_normal((2, 3, 6, 6)), RNG.standard_normal((4, 3, 3, 3)), RNG.standard_normal(4)
LABELS = np.array([1, 0, 3, 2])


def _leaves(lib) -> dict:
    made = {"x": X, "w": W, "b": B, "image": IMAGE, "kernel": KERNEL, "bias": BIAS, "ln": X[0], "c": BIAS[:3]}
    leaves = {k: lib.tensor(v, requires_grad=True) for k, v in made.items()}
    leaves["t"] = lib.tensor(LABELS)
    leaves["stats"] = (lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64))
    return leaves


OPS = {
    "conv2d": lambda lib, F, v: F.conv2d(v["image"], v["kernel"], v["bias"]),
    "conv2d without bias": lambda lib, F, v: F.conv2d(v["image"], v["kernel"]),
    "conv_transpose2d": lambda lib, F, v: F.conv_transpose2d(v["image"], v["kernel"].transpose(0, 1), v["bias"]),
    "addcmul": lambda lib, F, v: lib.addcmul(v["x"], v["x"], v["x"], value=2),
    "addcdiv": lambda lib, F, v: lib.addcdiv(v["x"], v["x"], v["x"] + 5),
    "addmm": lambda lib, F, v: lib.addmm(v["b"], v["x"], v["w"].t()),
    "layer_norm": lambda lib, F, v: F.layer_norm(v["x"], (6,), v["ln"], v["ln"]),
    "layer_norm without affine": lambda lib, F, v: F.layer_norm(v["x"], (6,)),
    "group_norm without affine": lambda lib, F, v: F.group_norm(v["image"], 1),
    "batch_norm with running statistics": lambda lib, F, v: F.batch_norm(v["image"], *v["stats"], training=True),
    "batch_norm in eval, affine": lambda lib, F, v: F.batch_norm(v["image"], *v["stats"], v["c"], v["c"] * 2),
    "softmax": lambda lib, F, v: F.softmax(v["x"], -1),
    "log_softmax": lambda lib, F, v: F.log_softmax(v["x"], 1),
    "mse_loss": lambda lib, F, v: F.mse_loss(v["x"], v["x"] * 2),
    "nll_loss": lambda lib, F, v: F.nll_loss(v["x"], v["t"]),
    "binary_cross_entropy": lambda lib, F, v: F.binary_cross_entropy(v["x"].sigmoid(), (v["x"] > 0).double()),
    "embedding": lambda lib, F, v: F.embedding(v["t"], v["w"]),
    "lerp": lambda lib, F, v: lib.lerp(v["x"], v["x"] * 2, 0.3),
    "clamp": lambda lib, F, v: v["x"].clamp(-1, 1),
    "where with a number": lambda lib, F, v: lib.where(v["x"] > 0, v["x"], 0.0),
    "max_pool2d": lambda lib, F, v: F.max_pool2d(v["image"], 2),
    "avg_pool2d": lambda lib, F, v: F.avg_pool2d(v["image"], 2),
    "cat": lambda lib, F, v: lib.cat([v["x"], v["x"]]),
    "stack": lambda lib, F, v: lib.stack([v["x"], v["x"]]),
    "index with a tensor": lambda lib, F, v: v["x"][v["t"]],
    "gather": lambda lib, F, v: v["x"].gather(1, v["t"].view(4, 1)),
    "scatter_add": lambda lib, F, v: lib.zeros(4, 6, dtype=lib.float64).scatter_add(
        0, v["t"].view(4, 1).expand(4, 6), v["x"]
    ),
    "sum over a dim": lambda lib, F, v: v["x"].sum(1),
    "mean": lambda lib, F, v: v["x"].mean(),
    "var": lambda lib, F, v: v["x"].var(1),
    "norm": lambda lib, F, v: v["x"].norm(),
    "topk": lambda lib, F, v: v["x"].topk(2)[0],
    "cumsum": lambda lib, F, v: v["x"].cumsum(1),
    "masked_fill": lambda lib, F, v: v["x"].masked_fill(v["x"] > 0, 0.0),
    "interpolate": lambda lib, F, v: F.interpolate(v["image"], scale_factor=2, mode="bilinear", align_corners=True),
    "leaky_relu": lambda lib, F, v: F.leaky_relu(v["x"], 0.1),
    "hardtanh": lambda lib, F, v: F.hardtanh(v["x"]),
    "x ** 2": lambda lib, F, v: v["x"] ** 2,
    "x + 2": lambda lib, F, v: v["x"] + 2,
    "2 + x": lambda lib, F, v: 2 + v["x"],
    "x - 2": lambda lib, F, v: v["x"] - 2,
    "2 - x": lambda lib, F, v: 2 - v["x"],
    "x * 2": lambda lib, F, v: v["x"] * 2,
    "2 * x": lambda lib, F, v: 2 * v["x"],
    "x / 2": lambda lib, F, v: v["x"] / 2,
    "2 / x": lambda lib, F, v: 2 / v["x"],
    "x * a bool mask": lambda lib, F, v: v["x"] * (v["x"] > 0),
    "add with alpha and a number": lambda lib, F, v: lib.add(v["x"], 2, alpha=3),
    "fmod by a number": lambda lib, F, v: lib.fmod(v["x"], 2),
    "causal attention": lambda lib, F, v: F.scaled_dot_product_attention(
        v["image"], v["image"] * 2, v["image"], is_causal=True
    ),
    "attention with a float mask": lambda lib, F, v: F.scaled_dot_product_attention(
        v["image"], v["image"], v["image"] * 3, attn_mask=lib.zeros(6, 6, dtype=lib.float64)
    ),
    "view": lambda lib, F, v: v["x"].view(2, 12),
    "split": lambda lib, F, v: v["x"].split(2)[1],
    "transpose": lambda lib, F, v: v["x"].transpose(0, 1),
}


def _listed(lib, name: str):
    y = OPS[name](lib, lib.nn.functional, _leaves(lib))
    node = y.grad_fn
    return type(node).__name__, [None if n is None else type(n).__name__ for n, _ in node.next_functions]


@pytest.mark.parametrize("name", list(OPS))
def test_next_functions_list_the_tensor_inputs_as_torch_does(torch, name):
    assert _listed(numbagrad, name) == _listed(torch, name)


def _custom_function(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y, z=None):
            return x * k + y

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, g, None

    return Scale


def test_a_custom_function_lists_its_tensor_arguments_only(torch):
    def listed(lib):
        x, y = lib.ones(2, requires_grad=True), lib.ones(2)
        out = _custom_function(lib).apply(x, 2, y, None)
        return [None if n is None else type(n).__name__ for n, _ in out.grad_fn.next_functions]

    assert listed(numbagrad) == listed(torch) == ["AccumulateGrad", None]


def test_a_post_hook_gets_one_gradient_per_listed_input_and_may_replace_them():
    x = numbagrad.ones(2, requires_grad=True)
    y = _custom_function(numbagrad).apply(x, 2, numbagrad.ones(2), None)
    seen = []

    def hook(grad_inputs, grad_outputs):
        seen.append(len(grad_inputs))
        return (grad_inputs[0] * 10, grad_inputs[1])

    y.grad_fn.register_hook(hook)
    y.sum().backward()
    assert seen == [2]
    assert x.grad.tolist() == [20.0, 20.0]


def test_calling_a_node_returns_one_gradient_per_listed_input_a_lone_one_unwrapped(torch):
    def called(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        lone = (x * 3).sum(0).grad_fn(lib.tensor(1.0))
        pair = (x * 2).grad_fn(lib.ones(2))
        return lone.tolist(), [None if g is None else g.tolist() for g in pair]

    assert called(numbagrad) == called(torch) == ([1.0, 1.0], [[2.0, 2.0], None])


def test_an_index_tensor_that_requires_no_grad_is_not_listed_but_a_float_one_is(torch):
    def listed(lib, target):
        x = lib.tensor(X, requires_grad=True)
        node = lib.nn.functional.mse_loss(x, target).grad_fn
        return [None if n is None else type(n).__name__ for n, _ in node.next_functions]

    assert listed(numbagrad, numbagrad.zeros(4, 6, dtype=numbagrad.float64)) == ["AccumulateGrad", None]
    assert listed(torch, torch.zeros(4, 6, dtype=torch.float64)) == ["AccumulateGrad", None]


def test_add_with_alpha_and_a_number_operand_scales_the_number(torch):
    ours = numbagrad.add(numbagrad.tensor([1.0, 2.0]), 2, alpha=3)
    theirs = torch.add(torch.tensor([1.0, 2.0]), 2, alpha=3)
    assert ours.tolist() == theirs.tolist() == [7.0, 8.0]


def test_a_post_hook_returning_another_count_raises_torchs_error(torch):
    def step(lib):
        x = lib.ones(2, requires_grad=True)
        y = x * 2

        def myhook(grad_inputs, grad_outputs):
            return (grad_inputs[0],) * 3

        y.grad_fn.register_hook(myhook)
        y.sum().backward()

    raises_like(torch, step)
