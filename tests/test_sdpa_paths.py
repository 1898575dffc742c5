"""F.scaled_dot_product_attention's node against torch's CPU dispatch: the flash kernel's node
(``ScaledDotProductFlashAttentionForCpuBackward0``) where torch takes it, else the node its math path ends with
(the last matmul's: ``UnsafeViewBackward0``, ``MmBackward0``, ``CloneBackward0``) or, for an empty result or no
keys, ``AddBackward0``; the values and gradients stay torch's on every path."""

import numpy as np
import pytest

import numbagrad


def _t(lib, shape, grad=True, dtype="float32", seed=0, layout=None):
    data = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    t = lib.tensor(data if layout is None else np.ascontiguousarray(data.transpose(layout)))
    t = t if layout is None else t.permute(*np.argsort(layout).tolist())
    return t.requires_grad_(grad)


def _mask(lib, shape, dtype="bool", grad=False):
    data = np.random.default_rng(7).standard_normal(shape) > -1.0 if dtype == "bool" else np.zeros(shape, dtype)
    return lib.tensor(data, requires_grad=grad)


Q4 = (2, 2, 4, 8)
CASES = {
    # the flash kernel's
    "4-d": (Q4, Q4, Q4, {}),
    "4-d float64": (Q4, Q4, Q4, {"dtype": "float64"}),
    "4-d causal": (Q4, Q4, Q4, {"is_causal": True}),
    "2-d bool mask": (Q4, Q4, Q4, {"mask": (4, 4)}),
    "4-d float mask": (Q4, Q4, Q4, {"mask": ((2, 1, 4, 4), "float32")}),
    "mask broadcast in its last dims": (Q4, Q4, Q4, {"mask": (4, 1)}),
    "more keys than queries": (Q4, (2, 2, 6, 8), (2, 2, 6, 8), {}),
    "grouped heads": ((2, 4, 4, 8), (2, 1, 4, 8), (2, 1, 4, 8), {"enable_gqa": True}),
    "heads as a view": (Q4, Q4, Q4, {"layout": (0, 2, 1, 3)}),
    "query alone needs grad": (Q4, Q4, Q4, {"grads": (True, False, False)}),
    # the math path's
    "3-d": ((2, 4, 8), (2, 4, 8), (2, 4, 8), {}),
    "2-d": ((4, 8), (4, 8), (4, 8), {}),
    "5-d": ((1, *Q4), (1, *Q4), (1, *Q4), {}),
    "dropout": (Q4, Q4, Q4, {"dropout_p": 1.0}),
    "3-d mask": (Q4, Q4, Q4, {"mask": (2, 4, 4)}),
    "mask needing grad": (Q4, Q4, Q4, {"mask": ((4, 4), "float32", True)}),
    "broadcast batch": (Q4, (1, 2, 4, 8), (1, 2, 4, 8), {}),
    "broadcast heads": (Q4, (2, 1, 4, 8), (2, 1, 4, 8), {}),
    "grouped heads of two sizes": ((2, 4, 4, 8), (2, 2, 4, 8), (2, 1, 4, 8), {"enable_gqa": True}),
    "value of another head size": (Q4, Q4, (2, 2, 4, 6), {}),
    "query's last dim strided": (Q4, Q4, Q4, {"layout": (0, 1, 3, 2)}),
    "one query batch, two value batches": ((1, 4, 8), (1, 4, 8), (2, 4, 8), {}),
    "matrices by a stack of values": ((4, 8), (4, 8), (3, 4, 8), {}),
    "the same, only the value needs grad": ((4, 8), (4, 8), (3, 4, 8), {"grads": (False, False, True)}),
    # empty
    "no keys": (Q4, (2, 2, 0, 8), (2, 2, 0, 8), {}),
    "no queries": ((2, 2, 0, 8), Q4, Q4, {}),
    "no value features": (Q4, Q4, (2, 2, 4, 0), {}),
    "no query features": ((2, 2, 4, 0), (2, 2, 4, 0), Q4, {}),
}


def _run(lib, shapes, options):
    dtype = options.get("dtype", "float32")
    grads = options.get("grads", (True, True, True))
    q, k, v = (
        _t(lib, s, g, dtype, i, options.get("layout") if i == 0 else None)
        for i, (s, g) in enumerate(zip(shapes, grads))
    )
    if options.get("layout") and options["layout"] != (0, 1, 3, 2):  # heads as a view: all three
        k, v = (_t(lib, s, g, dtype, i, options["layout"]) for i, (s, g) in enumerate(zip(shapes[1:], grads[1:]), 1))
    kwargs = {key: options[key] for key in ("is_causal", "dropout_p", "enable_gqa") if key in options}
    if "mask" in options:
        spec = options["mask"]
        kwargs["attn_mask"] = _mask(lib, *spec) if isinstance(spec[0], tuple) else _mask(lib, spec)
    out = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs)
    out.backward(lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(dtype)))
    grads = [None if t.grad is None else t.grad.numpy() for t in (q, k, v)]
    return out.grad_fn.name(), out.detach().numpy(), grads


@pytest.mark.parametrize("shapes, options", [(c[:3], c[3]) for c in CASES.values()], ids=list(CASES))
def test_node_values_and_gradients_match_torch(torch, shapes, options):
    if options.get("dropout_p"):  # (p = 1: every weight dropped, so the values are torch's too)
        assert options["dropout_p"] == 1.0
    (their_node, their_out, their_grads), (node, out, grads) = (
        _run(lib, shapes, options) for lib in (torch, numbagrad)
    )
    assert node == their_node
    np.testing.assert_allclose(out, their_out, rtol=1e-5, atol=1e-6)
    for mine, expected in zip(grads, their_grads):
        assert (mine is None) == (expected is None)
        if mine is not None:
            np.testing.assert_allclose(mine, expected, rtol=1e-4, atol=1e-5)


def test_a_one_dim_mask_raises_torch_error(torch):
    from torch_oracle import raises_like

    raises_like(torch, lambda lib: lib.nn.functional.scaled_dot_product_attention(*(lib.ones(Q4),) * 3, lib.ones(4)))


def test_a_query_batch_broadcast_against_the_values_passes_gradcheck_and_gradgradcheck():
    q, k = (_t(numbagrad, (1, 3, 4), dtype="float64", seed=i) for i in (0, 1))
    v = _t(numbagrad, (2, 3, 4), dtype="float64", seed=2)
    attention = numbagrad.nn.functional.scaled_dot_product_attention
    assert numbagrad.autograd.gradcheck(attention, (q, k, v))
    assert numbagrad.autograd.gradgradcheck(attention, (q, k, v))
