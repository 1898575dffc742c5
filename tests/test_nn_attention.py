"""Attention: ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and the Transformer modules, compared
with torch (values, gradients, errors) with torch's parameters loaded, and with finite differences."""

import numpy as np
import pytest

import numbagrad
from numbagrad import nn
from numbagrad.autograd import gradcheck, gradgradcheck
from numbagrad.nn import functional as F

RNG = np.random.default_rng(0)


def _arrays(*shapes, dtype="float64"):
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


def _leaves(torch, arrays):
    ours = [numbagrad.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return ours, theirs


def _mask(torch, m, dtype=None):
    if m is None:
        return None, None
    m = m if dtype is None or m.dtype == bool else m.astype(dtype)
    return numbagrad.tensor(m), torch.tensor(m)


def _close(ours, theirs, tol):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


# rows: (query shape, key shape, value shape, mask, keyword arguments); row 1 of BOOL_MASK attends to nothing.
BOOL_MASK = np.array([[True, True, False], [False, False, False], [True, False, True]])
SDPA_CASES = {
    "plain": ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, {}),
    "causal_longer_keys": ((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6), None, {"is_causal": True}),
    "causal_shorter_keys": ((1, 2, 5, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, {"is_causal": True}),
    "bool_mask_empty_row": ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), BOOL_MASK, {}),
    "float_mask_broadcast_scale": (
        (1, 2, 3, 4),
        (1, 2, 3, 4),
        (1, 2, 3, 4),
        RNG.standard_normal((2, 1, 3)),
        {"scale": 0.3},
    ),  # fmt: skip
    "gqa": ((1, 4, 3, 4), (1, 2, 3, 4), (1, 1, 3, 4), BOOL_MASK, {"enable_gqa": True}),
    "five_dims": ((2, 1, 2, 3, 4), (2, 1, 2, 3, 4), (2, 1, 2, 3, 4), BOOL_MASK, {}),
    "broadcast_batch": ((2, 1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, {}),
    "two_dims": ((3, 4), (5, 4), (5, 2), None, {}),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_matches_torch_values_and_gradients(torch, case, dtype):
    qs, ks, vs, mask, kwargs = SDPA_CASES[case]
    (q, k, v), (tq, tk, tv) = _leaves(torch, _arrays(qs, ks, vs, dtype=dtype))
    m, tm = _mask(torch, mask, dtype)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kwargs)
    expected = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kwargs)
    tol = 1e-12 if dtype == "float64" else 1e-5
    assert out.dtype == getattr(numbagrad, dtype) and tuple(out.shape) == tuple(expected.shape)
    _close(out, expected, tol)
    (g,) = _arrays(tuple(expected.shape), dtype=dtype)
    out.backward(numbagrad.tensor(g))
    expected.backward(torch.tensor(g))
    for ours, theirs in ((q, tq), (k, tk), (v, tv)):
        _close(ours.grad, theirs.grad, tol)


def test_sdpa_scale_and_enable_gqa_are_keyword_only(torch):
    q = numbagrad.zeros(1, 3, 4)
    with pytest.raises(TypeError):
        torch.nn.functional.scaled_dot_product_attention(*(torch.zeros(1, 3, 4),) * 3, None, 0.0, False, 0.5)
    with pytest.raises(TypeError):
        F.scaled_dot_product_attention(q, q, q, None, 0.0, False, 0.5)


def test_sdpa_backward_reuses_the_saved_probabilities(monkeypatch):
    """The softmax runs once, in the forward; the backward (also a double backward) computes none."""
    q, k, v = (numbagrad.tensor(a, requires_grad=True) for a in _arrays((2, 3, 4), (2, 5, 4), (2, 5, 4)))
    backend = q._backend
    calls = []

    def counted(fn):
        return lambda *args: calls.append(1) or fn(*args)

    for name in ("softmax", "scaled_softmax"):  # (float32 and float64 scores take the fused scaled_softmax)
        monkeypatch.setattr(backend, name, counted(getattr(backend, name)))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert len(calls) == 1
    (gq,) = numbagrad.autograd.grad(out.sum(), q, create_graph=True)
    gq.sum().backward()
    assert len(calls) == 1


def test_sdpa_causal_calls_of_other_sizes_and_dtypes_each_get_their_own_mask(torch):
    """The causal mask is kept between calls: a later call with other lengths or another dtype must not reuse it."""
    for (length, source), dtype in (((3, 5), "float32"), ((5, 3), "float32"), ((3, 5), "float64"), ((3, 5), "float32")):
        arrays = _arrays((1, 2, length, 4), (1, 2, source, 4), (1, 2, source, 4), dtype=dtype)
        out = F.scaled_dot_product_attention(*(numbagrad.tensor(a) for a in arrays), is_causal=True)
        expected = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, arrays), is_causal=True)
        assert out.dtype == getattr(numbagrad, dtype)
        _close(out, expected, 1e-5)


def test_sdpa_row_without_keys_is_zero():
    q, k, v = (numbagrad.tensor(a) for a in _arrays((1, 3, 4), (1, 3, 4), (1, 3, 4)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=numbagrad.tensor(BOOL_MASK))
    assert (out[0, 1] == 0).all().item()


@pytest.mark.parametrize("case", ["bool_mask_empty_row", "gqa", "causal_longer_keys", "broadcast_batch"])
def test_sdpa_gradcheck_and_gradgradcheck(case):
    qs, ks, vs, mask, kwargs = SDPA_CASES[case]
    inputs = [numbagrad.tensor(a, requires_grad=True) for a in _arrays(qs, ks, vs)]
    m = None if mask is None else numbagrad.tensor(mask)

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kwargs)

    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


def test_sdpa_float_mask_gets_the_scores_gradient():
    q, k, v, mask = (numbagrad.tensor(a, requires_grad=True) for a in _arrays((2, 3, 4), (2, 3, 4), (2, 3, 4), (3, 3)))
    assert gradgradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), (q, k, v, mask))


def test_sdpa_dropout_is_differentiable_for_a_fixed_draw():
    q, k, v = (numbagrad.tensor(a, requires_grad=True) for a in _arrays((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)))

    def fn(q, k, v):
        numbagrad.manual_seed(3)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)

    assert gradcheck(fn, (q, k, v))
    assert gradgradcheck(fn, (q, k, v))


def test_sdpa_dropout_drops_weights_and_scales_the_rest():
    """With ``v`` the identity, the output is the dropped-out weights: each zero or ``p / (1 - p)``-rescaled."""
    q, k = (numbagrad.tensor(a) for a in _arrays((2, 6, 4), (2, 6, 4)))
    v = numbagrad.eye(6, dtype=numbagrad.float64).expand(2, 6, 6)
    plain = F.scaled_dot_product_attention(q, k, v).numpy()
    dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    kept = dropped != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(dropped[kept], plain[kept] * 2.0, rtol=1e-12)


def test_sdpa_dropout_one_gives_zeros(torch):
    (q, k, v), (tq, tk, tv) = _leaves(torch, _arrays((1, 3, 4), (1, 3, 4), (1, 3, 4)))
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=1.0)
    _close(out, torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, dropout_p=1.0), 0)


SDPA_ERRORS = {
    "one_dim": ((4,), (4,), (4,), None, {}),
    "dtypes": ((1, 3, 4), (1, 3, 4), (1, 3, 4), None, {"_key_dtype": "float32"}),
    "mask_dtype": ((1, 3, 4), (1, 3, 4), (1, 3, 4), np.ones((3, 3), np.int64), {}),
    "mask_float64_query_float32": ((1, 3, 4), (1, 3, 4), (1, 3, 4), np.ones((3, 3)), {"_dtype": "float32"}),
    "gqa_heads": ((1, 4, 3, 4), (1, 3, 3, 4), (1, 3, 3, 4), None, {"enable_gqa": True}),
    "causal_and_mask": ((1, 3, 4), (1, 3, 4), (1, 3, 4), BOOL_MASK, {"is_causal": True, "dropout_p": 0.1}),
    "dropout_p": ((1, 3, 4), (1, 3, 4), (1, 3, 4), None, {"dropout_p": 1.5}),
    "key_features": ((1, 3, 4), (1, 3, 5), (1, 3, 4), None, {}),
}


@pytest.mark.parametrize("case", list(SDPA_ERRORS))
def test_sdpa_errors_are_torchs(torch, case):
    qs, ks, vs, mask, kwargs = SDPA_ERRORS[case]
    kwargs = dict(kwargs)
    dtype = kwargs.pop("_dtype", "float64")
    key_dtype = kwargs.pop("_key_dtype", dtype)
    q, v = _arrays(qs, vs, dtype=dtype)
    (k,) = _arrays(ks, dtype=key_dtype)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    with pytest.raises(Exception) as theirs:
        torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=_mask(torch, mask)[1], **kwargs)
    with pytest.raises(theirs.type) as ours:
        m = _mask(torch, mask)[0]
        F.scaled_dot_product_attention(*(numbagrad.tensor(a) for a in (q, k, v)), attn_mask=m, **kwargs)
    assert str(ours.value) == str(theirs.value).replace("torch.Size", "numbagrad.Size")


# --- MultiheadAttention ----------------------------------------------------------------------------------------------
def _pair(torch, ours_cls, theirs_cls, *args, **kwargs):
    """The module built by numbagrad and by torch (float64), ours holding torch's state_dict."""
    theirs = theirs_cls(*args, **kwargs, dtype=torch.float64)
    ours = ours_cls(*args, **kwargs, dtype=numbagrad.float64)
    state = {name: numbagrad.tensor(t.detach().numpy()) for name, t in theirs.state_dict().items()}
    ours.load_state_dict(state)
    return ours, theirs


def _compare_module(torch, ours, theirs, arrays, call, tol=1e-10, **kwargs):
    """Run ``call(module, *inputs, **kwargs)`` on both; compare outputs, input gradients and parameter gradients."""
    (xs, txs) = _leaves(torch, arrays)
    out, expected = call(ours, *xs, **kwargs), call(theirs, *txs, **{k: _torchify(torch, v) for k, v in kwargs.items()})
    outs = out if isinstance(out, tuple) else (out,)
    expecteds = expected if isinstance(expected, tuple) else (expected,)
    loss, tloss = 0, 0
    for o, e in zip(outs, expecteds, strict=True):
        assert (o is None) == (e is None)
        if o is None:
            continue
        assert tuple(o.shape) == tuple(e.shape)
        _close(o, e, tol)
        (w,) = _arrays(tuple(e.shape))
        loss, tloss = loss + (o * numbagrad.tensor(w)).sum(), tloss + (e * torch.tensor(w)).sum()
    loss.backward()
    tloss.backward()
    for x, tx in zip(xs, txs, strict=True):
        _close(x.grad, tx.grad, tol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, tol)


def _torchify(torch, v):
    return torch.tensor(v.numpy()) if isinstance(v, numbagrad.Tensor) else v


def _mha_call(module, q, k=None, v=None, **kwargs):
    k = q if k is None else k
    v = k if v is None else v
    return module(q, k, v, **kwargs)


def test_mha_parameter_names_and_shapes_are_torchs(torch):
    for kwargs in ({}, {"kdim": 3, "vdim": 5}, {"bias": False, "add_bias_kv": True}):
        ours = nn.MultiheadAttention(8, 2, **kwargs)
        theirs = torch.nn.MultiheadAttention(8, 2, **kwargs)
        assert {n: tuple(t.shape) for n, t in ours.state_dict().items()} == {
            n: tuple(t.shape) for n, t in theirs.state_dict().items()
        }
        assert list(dict(ours.named_parameters())) == list(dict(theirs.named_parameters()))
        assert type(ours.out_proj).__name__ == "NonDynamicallyQuantizableLinear"


def test_mha_initialisation_is_torchs():
    """Projections xavier-uniform (bound sqrt(6 / (fan_in + fan_out))), biases zero, bias_k/bias_v xavier-normal."""
    m = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    bound = (6 / (8 + 24)) ** 0.5
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert (m.in_proj_bias.detach().numpy() == 0).all() and (m.out_proj.bias.detach().numpy() == 0).all()
    assert m.bias_k.detach().numpy().std() > 0


MHA_CASES = {
    "self_batch_first": (dict(batch_first=True), [(2, 4, 8)], {}),
    "cross_kdim_vdim": (dict(kdim=3, vdim=5), [(4, 2, 8), (5, 2, 3), (5, 2, 5)], {}),
    "bias_kv_zero_attn": (
        dict(add_bias_kv=True, add_zero_attn=True),
        [(4, 2, 8), (3, 2, 8)],
        {"key_padding_mask": np.array([[False, False, True], [False, True, False]])},
    ),  # fmt: skip
    "masks_per_head": (
        dict(),
        [(4, 2, 8), (3, 2, 8)],
        {
            "attn_mask": RNG.standard_normal((4, 4, 3)),
            "key_padding_mask": np.array([[0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]]),
        },
    ),  # fmt: skip
    "no_weights_padding": (
        dict(batch_first=True),
        [(2, 4, 8)],
        {"need_weights": False, "key_padding_mask": np.array([[0, 0, 0, 1], [0, 1, 0, 0]], bool)},
    ),
    "per_head_weights": (dict(bias=False), [(4, 2, 8)], {"average_attn_weights": False}),
    "unbatched": (dict(), [(4, 8), (3, 8)], {"attn_mask": np.triu(np.ones((4, 3), bool), 1)}),
    "causal_hint": (
        dict(batch_first=True),
        [(2, 4, 8)],
        {"need_weights": False, "is_causal": True, "attn_mask": np.triu(np.ones((4, 4), bool), 1)},
    ),
}


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("case", list(MHA_CASES))
def test_mha_matches_torch(torch, case, training):
    init, shapes, kwargs = MHA_CASES[case]
    ours, theirs = _pair(torch, nn.MultiheadAttention, torch.nn.MultiheadAttention, 8, 2, **init)
    ours.train(training)
    theirs.train(training)
    kwargs = {k: numbagrad.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    _compare_module(torch, ours, theirs, _arrays(*shapes), _mha_call, **kwargs)


def test_mha_weights_of_a_row_without_keys_are_nan_as_torchs(torch):
    """The weights path is a plain softmax, as torch's: a query that may see no key gets NaN."""
    ours, theirs = _pair(torch, nn.MultiheadAttention, torch.nn.MultiheadAttention, 8, 2)
    (x,) = _arrays((3, 1, 8))
    mask = np.zeros((3, 3), bool)
    mask[1] = True
    out, weights = ours(*(numbagrad.tensor(x),) * 3, attn_mask=numbagrad.tensor(mask))
    t_out, t_weights = theirs(*(torch.tensor(x),) * 3, attn_mask=torch.tensor(mask))
    assert np.isnan(t_weights.detach().numpy()).any()
    np.testing.assert_array_equal(np.isnan(weights.detach().numpy()), np.isnan(t_weights.detach().numpy()))
    np.testing.assert_array_equal(np.isnan(out.detach().numpy()), np.isnan(t_out.detach().numpy()))


def test_mha_dropout_in_training_returns_the_dropped_weights():
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = numbagrad.tensor(_arrays((5, 1, 8), dtype="float32")[0])
    _, weights = m(x, x, x, average_attn_weights=False)
    w = weights.detach().numpy()
    assert (w == 0).any() and (w.sum(-1) != 1).any()
    m.eval()
    _, weights = m(x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(weights.detach().numpy().sum(-1), 1.0, rtol=1e-6)


MHA_ERRORS = {
    "heads": ((8, 3), {}, None),
    "sizes": ((0, 2), {}, None),
    "causal_without_mask": ((8, 2), {"is_causal": True}, (4, 2, 8)),
    "mask_shape": ((8, 2), {"attn_mask": np.zeros((4, 4), bool)}, (3, 2, 8)),
    "query_dims": ((8, 2), {}, (1, 3, 2, 8)),
    "mask_dtype": ((8, 2), {"attn_mask": np.zeros((3, 3), np.int64)}, (3, 2, 8)),
}


@pytest.mark.parametrize("case", list(MHA_ERRORS))
def test_mha_errors_are_torchs(torch, case):
    args, kwargs, shape = MHA_ERRORS[case]
    with pytest.raises(Exception) as theirs:
        m = torch.nn.MultiheadAttention(*args)
        x = torch.tensor(_arrays(shape, dtype="float32")[0])
        m(
            x,
            x,
            x,
            **{k: torch.tensor(v) for k, v in kwargs.items() if k != "is_causal"},
            is_causal="is_causal" in kwargs,
        )
    with pytest.raises(theirs.type) as ours:
        m = nn.MultiheadAttention(*args)
        x = numbagrad.tensor(_arrays(shape, dtype="float32")[0])
        m(x, x, x, **{k: numbagrad.tensor(v) for k, v in kwargs.items() if k != "is_causal"},
          is_causal="is_causal" in kwargs)  # fmt: skip
    assert str(ours.value) == str(theirs.value).replace("torch.Size", "numbagrad.Size")


def test_multi_head_attention_forward_matches_torch(torch):
    ours, theirs = _pair(torch, nn.MultiheadAttention, torch.nn.MultiheadAttention, 8, 2)

    def call(m, x):
        fn = (
            F.multi_head_attention_forward
            if isinstance(m, nn.Module)
            else torch.nn.functional.multi_head_attention_forward
        )
        return fn(x, x, x, 8, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight,
                  m.out_proj.bias, training=False)  # fmt: skip

    _compare_module(torch, ours, theirs, _arrays((3, 2, 8)), call)


def test_multi_head_attention_forward_with_static_keys_matches_torch(torch):
    ours, theirs = _pair(torch, nn.MultiheadAttention, torch.nn.MultiheadAttention, 8, 2)

    def call(m, x, static_k, static_v):
        fn = (
            F.multi_head_attention_forward
            if isinstance(m, nn.Module)
            else torch.nn.functional.multi_head_attention_forward
        )
        return fn(x, x, x, 8, 2, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight,
                  m.out_proj.bias, training=False, static_k=static_k, static_v=static_v)  # fmt: skip

    _compare_module(torch, ours, theirs, _arrays((3, 2, 8), (4, 5, 4), (4, 5, 4)), call)


# --- Transformer -----------------------------------------------------------------------------------------------------
CAUSAL4 = np.triu(np.full((4, 4), -np.inf), 1)


def _relu_squared(x):
    return x.relu() ** 2


ENCODER_LAYER_CASES = {
    "post_norm": (dict(), (4, 2, 8), {}),
    "pre_norm_gelu_batch_first": (
        dict(norm_first=True, activation="gelu", batch_first=True),
        (2, 4, 8),
        {"src_key_padding_mask": np.array([[0, 0, 1, 0], [0, 0, 0, 1]], bool)},
    ),  # fmt: skip
    "callable_activation_no_bias": (
        dict(activation=_relu_squared, bias=False, layer_norm_eps=1e-3),
        (4, 2, 8),
        {"src_mask": CAUSAL4, "is_causal": True},
    ),  # fmt: skip
}


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("case", list(ENCODER_LAYER_CASES))
def test_encoder_layer_matches_torch(torch, case, training):
    init, shape, kwargs = ENCODER_LAYER_CASES[case]
    ours, theirs = _pair(torch, nn.TransformerEncoderLayer, torch.nn.TransformerEncoderLayer, 8, 2, 16, 0.0, **init)
    ours.train(training)
    theirs.train(training)
    kwargs = {k: numbagrad.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    _compare_module(torch, ours, theirs, _arrays(shape), lambda m, x, **kw: m(x, **kw), **kwargs)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(torch, norm_first):
    ours, theirs = _pair(torch, nn.TransformerDecoderLayer, torch.nn.TransformerDecoderLayer, 8, 2, 16, 0.0,
                         norm_first=norm_first)  # fmt: skip
    kwargs = {"tgt_mask": numbagrad.tensor(CAUSAL4), "memory_key_padding_mask": numbagrad.tensor(np.array([[0, 0, 1],
              [0, 0, 0]], bool))}  # fmt: skip
    _compare_module(torch, ours, theirs, _arrays((4, 2, 8), (3, 2, 8)), lambda m, t, mem, **kw: m(t, mem, **kw),
                    **kwargs)  # fmt: skip


def test_encoder_and_decoder_stacks_match_torch(torch):
    ours_layer, theirs_layer = _pair(torch, nn.TransformerEncoderLayer, torch.nn.TransformerEncoderLayer, 8, 2, 16, 0.0)
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        theirs = torch.nn.TransformerEncoder(theirs_layer, 2, torch.nn.LayerNorm(8, dtype=torch.float64))
    with pytest.warns(UserWarning, match="enable_nested_tensor is True"):
        ours = nn.TransformerEncoder(ours_layer, 2, nn.LayerNorm(8, dtype=numbagrad.float64))
    _compare_module(
        torch, ours, theirs, _arrays((4, 2, 8)), lambda m, x, **kw: m(x, **kw), mask=numbagrad.tensor(CAUSAL4)
    )
    dec_ours, dec_theirs = _pair(torch, nn.TransformerDecoderLayer, torch.nn.TransformerDecoderLayer, 8, 2, 16, 0.0)
    ours, theirs = nn.TransformerDecoder(dec_ours, 2), torch.nn.TransformerDecoder(dec_theirs, 2)
    _compare_module(torch, ours, theirs, _arrays((4, 2, 8), (3, 2, 8)), lambda m, t, mem: m(t, mem))


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch_with_its_state_dict(torch, batch_first):
    args = dict(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=16, dropout=0.0,
                batch_first=batch_first)  # fmt: skip
    ours, theirs = _pair(torch, nn.Transformer, torch.nn.Transformer, **args)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    src, tgt = ((2, 3, 8), (2, 4, 8)) if batch_first else ((3, 2, 8), (4, 2, 8))
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=numbagrad.float64)
    _compare_module(torch, ours, theirs, _arrays(src, tgt), lambda m, s, t, **kw: m(s, t, **kw), tgt_mask=tgt_mask)


def test_generate_square_subsequent_mask_is_torchs(torch):
    ours = nn.Transformer.generate_square_subsequent_mask(4)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(4)
    assert ours.dtype == numbagrad.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_transformer_initialises_matrices_xavier_uniform():
    model = nn.Transformer(8, 2, 1, 1, 16)
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    assert np.abs(w).max() <= (6 / (8 + 16)) ** 0.5
    np.testing.assert_array_equal(model.encoder.norm.weight.detach().numpy(), np.ones(8))


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_transformer_errors_are_torchs(torch):
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        torch.nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        model(numbagrad.zeros(3, 2, 8), numbagrad.zeros(3, 1, 8))
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
        model(numbagrad.zeros(3, 2, 8), numbagrad.zeros(3, 2, 4))


def test_modules_live_at_torchs_paths():
    from numbagrad.nn.modules import activation, linear, transformer

    assert issubclass(linear.NonDynamicallyQuantizableLinear, nn.Linear)
    assert activation.MultiheadAttention is nn.MultiheadAttention
    assert transformer.TransformerEncoderLayer is nn.TransformerEncoderLayer


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_reprs_are_torchs(torch):
    for name, args in (("MultiheadAttention", (8, 2)), ("TransformerEncoderLayer", (8, 2, 16)),
                       ("TransformerDecoderLayer", (8, 2, 16)), ("Transformer", (8, 2, 1, 1, 16))):  # fmt: skip
        assert repr(getattr(nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))


def test_encoder_layer_dropout_acts_in_training_only():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = numbagrad.tensor(_arrays((4, 2, 8), dtype="float32")[0])
    assert not np.array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())
