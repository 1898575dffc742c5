"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention_forward`` (re-exported by
``nn.functional``).

Both rest on one autograd Function, ``_Attention``: its forward computes ``softmax(q @ k^T * scale + mask)``, the
optional dropout and the product with ``v``, and returns the probabilities as a second output that it also saves,
so the backward never recomputes the softmax. A causal attention the backend computes whole is
``_CausalAttention``, which keeps only each row's softmax statistics and makes the probabilities again in its
backward, as torch's flash attention does. The backward is written with differentiable tensor ops (the softmax
step is softmax's fused backward kernel, itself a differentiable node), and a saved output unpacks linked to its
node, so differentiating the backward again (double backward) comes out right.

This module imports nothing from ``nn.functional`` (which imports it): the projections are written with
``matmul`` and the dropout mask is drawn here from numbagrad's generator, as ``F.dropout`` draws its own.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import ops
from .._tensor import Tensor
from .._types import bool_, float32, float64
from ..autograd.function import Function, edges_of, make_node, saved_input_unhooked
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import trace_constant, untraced
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for
from ..ops._common import new_shell as _new
from ..ops._common import not_a_tensor
from ..ops.creation import _generator
from ..ops.linalg import Operand, matmul_node_name
from ..ops.reduction import softmax_grad

__all__ = ["multi_head_attention_forward", "scaled_dot_product_attention"]

#: torch's C++ names of the dtypes, as its attention errors print them.
_CPP_NAMES = {
    "float64": "double",
    "float32": "float",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "int64": "long int",
    "int32": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
}


def _cpp_name(t: Tensor) -> str:
    name = str(t.dtype).removeprefix("numbagrad.")
    return _CPP_NAMES.get(name, name)


def _repeat_heads(t: Tensor, times: int) -> Tensor:
    """Grouped-query attention: each key/value head serves ``times`` consecutive query heads."""
    return t if times == 1 else t.repeat_interleave(times, -3)


def _fold_heads(g: Tensor, times: int) -> Tensor:
    """The gradient of ``_repeat_heads``: sum each group of ``times`` consecutive heads."""
    if times == 1:
        return g
    shape = tuple(g.shape)
    return g.reshape(*shape[:-3], shape[-3] // times, times, *shape[-2:]).sum(-3)


def _fusable(scores: Tensor, mask) -> bool:
    """Whether the backend's ``scaled_softmax`` computes these probabilities: float32 or float64 scores, and no
    mask or one of their dtype that broadcasts to them (a mask that widens the result or promotes its dtype takes
    the ops)."""
    if scores.dtype not in (float32, float64) or scores.dim() == 0:
        return False
    if mask is None:
        return True
    shape = tuple(scores.shape)
    return mask.dtype == scores.dtype and np.broadcast_shapes(tuple(mask.shape), shape) == shape


def _blockable(q: Tensor, k: Tensor, v: Tensor) -> bool:
    """Whether the backend's ``causal_attention`` computes this causal attention: float32 or float64, one batch
    shape (no broadcasting, no grouped heads), as many keys as queries, at least two."""
    qs, ks, vs = q._data.shape, k._data.shape, v._data.shape
    return (
        q._data.dtype in _BLOCK_DTYPES
        and len(qs) >= 2
        and qs[:-2] == ks[:-2] == vs[:-2]
        and qs[-2] == ks[-2] == vs[-2] >= 2
    )


_BLOCK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class _Attention(Function):
    """``softmax(q @ k^T * scale + mask) * keep @ v`` and the probabilities, in one node.

    ``mask`` is an additive float mask (or None) broadcasting to the scores; ``keep`` is the dropout multiplier
    (zeros and ``1 / (1 - p)``; None without dropout); ``k_times``/``v_times`` repeat key/value heads for
    grouped-query attention. With ``safe``, rows whose every score is ``-inf`` get zero probabilities, as torch's
    ``scaled_dot_product_attention`` gives them (``softmax`` alone gives NaN, as torch's MultiheadAttention does
    when it returns the weights). A causal attention the backend computes whole is ``_CausalAttention``.
    """

    node_name = "ScaledDotProductFlashAttentionForCpuBackward0"
    _unlisted_inputs = (3, 4)  # (the mask and the dropout's keep mask: torch's node lists q, k and v)

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask, keep, scale: float, k_times: int, v_times: int,
                safe: bool):  # fmt: skip
        ctx.scale, ctx.k_times, ctx.v_times = scale, k_times, v_times
        scores = q.matmul(_repeat_heads(k, k_times).transpose(-2, -1))
        if _fusable(scores, mask):  # one backend call: scale, mask, softmax (and the empty rows' zeros)
            probs = Tensor._make(scores._backend.scaled_softmax(scores._data, None if mask is None else mask._data,
                                                                scale, safe and mask is not None))  # fmt: skip
        else:
            # ``mask + scores * scale`` (add's alpha): the same rounding as the product and then the sum
            scores = scores * scale if mask is None else ops.add(mask, scores, alpha=scale)
            probs = scores.softmax(-1)
            if safe and mask is not None:
                empty = scores.amax(-1, keepdim=True).isneginf()
                probs = probs.masked_fill(empty, 0.0)
        weights = probs if keep is None else probs * keep
        out = weights.matmul(_repeat_heads(v, v_times))
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(q, k, v, probs, keep)
        return out, probs

    @staticmethod
    def backward(ctx, g_out, g_probs):
        q, k, v, probs, keep = ctx.saved_tensors
        return _Attention._grads(ctx, g_out, g_probs, q, k, v, probs, keep, ctx.needs_input_grad[:4])

    @staticmethod
    def _grads(ctx, g_out, g_probs, q, k, v, probs, keep, needs: tuple) -> tuple:
        """The inputs' gradients as differentiable tensor ops (``backward``'s results)."""
        scale = ctx.scale
        need_q, need_k, need_v, need_mask = needs
        g_v = None
        g_weights = g_probs
        if g_out is not None:
            weights = probs if keep is None else probs * keep
            if need_v:
                g_v = _fold_heads(weights.transpose(-2, -1).matmul(g_out), ctx.v_times)
            g = g_out.matmul(_repeat_heads(v, ctx.v_times).transpose(-2, -1))
            if keep is not None:
                g = g * keep
            if g.shape != probs.shape:  # the probabilities broadcast against the value's batch: theirs is the sum
                g = g.sum_to_size(probs.shape)
            g_weights = g if g_probs is None else g + g_probs
        if g_weights is None or not (need_q or need_k or need_mask):
            return None, None, g_v, None, None, None, None, None, None, None
        g_scores = softmax_grad(g_weights, probs, probs.dim() - 1, False)
        g_q = g_scores.matmul(_repeat_heads(k, ctx.k_times)) * scale if need_q else None
        g_k = _fold_heads(g_scores.transpose(-2, -1).matmul(q), ctx.k_times) * scale if need_k else None
        return g_q, g_k, g_v, g_scores if need_mask else None, None, None, None, None, None, None


class _CausalAttention(Function):
    """``softmax(q @ k^T * scale + mask) @ v`` for ``is_causal``'s additive ``mask``, as the backend's
    ``causal_attention`` computes it whole (float32 or float64 ``q``, ``k`` and ``v`` of one batch shape, no
    dropout or grouped heads: ``_blockable``): its products skip the keys a block of queries never sees.

    It keeps what the backend's backward needs to make the probabilities again (on the CPU each row's softmax
    maximum and reciprocal sum; a device keeps the probabilities), not the ``(..., L, L)`` probabilities
    themselves, as torch's flash attention keeps only their log-sum-exp: in the char GPT's step that is 3 MiB
    less held from forward to backward. The first-order backward is the backend's kernel; the formula its
    ``fused_grads`` node differentiates (double backward) makes the probabilities again with ops from ``q``
    and ``k`` and takes ``_Attention``'s gradients.
    """

    node_name = _Attention.node_name
    _unlisted_inputs = (3,)  # (the mask: torch's node lists q, k and v)

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for plain tensors outside anomaly and inference mode, with no tracer or saved-tensor hooks
        (``st.fast``): ``forward``'s output and its node, without the general path's per-argument bookkeeping;
        anything else returns None."""
        if len(args) != 5 or not st.fast:
            return None
        q, k, v, mask = args[:4]
        if type(q) is not Tensor or type(k) is not Tensor or type(v) is not Tensor or type(mask) is not Tensor:
            return None
        qd, kd, vd, md = q._data, k._data, v._data, mask._data
        dt, kind = qd.dtype, type(qd)
        if kd.dtype is not dt or vd.dtype is not dt or type(kd) is not kind or type(vd) is not kind:
            return None
        if type(md) is not kind or q._is_inference or k._is_inference or v._is_inference:
            return None
        backend = _BACKENDS.get(kind) or backend_for(qd)
        scale = args[4]
        out, kept = _new(Tensor), _new(Tensor)
        out._data, kept._data = backend.causal_attention(qd, kd, vd, md, scale)
        edges = edges_of(args, cls)
        if not st.enabled or (edges[0][0] is None and edges[1][0] is None and edges[2][0] is None):
            return out
        ctx = cls._backward_cls()
        ctx.needs_input_grad = (edges[0][0] is not None, edges[1][0] is not None, edges[2][0] is not None,
                                edges[3][0] is not None, False)  # fmt: skip
        ctx.scale, ctx.k_times, ctx.v_times = scale, 1, 1
        ctx._input_meta = ((qd.shape, dt, backend), (kd.shape, dt, backend), (vd.shape, dt, backend),
                           (md.shape, md.dtype, backend), False)  # fmt: skip
        ctx._output_meta = ((out._data.shape, dt, backend),)
        make_node(ctx, edges, out)
        ctx._saved = [saved_input_unhooked(q), saved_input_unhooked(k), saved_input_unhooked(v),
                      saved_input_unhooked(kept), saved_input_unhooked(mask)]  # fmt: skip
        return out

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale: float):
        ctx.scale, ctx.k_times, ctx.v_times = scale, 1, 1
        out, kept = (Tensor._make(a) for a in q._backend.causal_attention(q._data, k._data, v._data, mask._data,
                                                                           scale))  # fmt: skip
        ctx.save_for_backward(q, k, v, kept, mask)
        return out

    @staticmethod
    def backward(ctx, g_out):
        q, k, v, kept, mask = ctx.saved_tensors
        scale, wanted = ctx.scale, tuple(ctx.needs_input_grad[:3])

        def kernel(g_out, q, k, v, kept, mask):
            grads = g_out._backend.causal_attention_backward(g_out._data, q._data, k._data, v._data, kept._data,
                                                             scale, *wanted)  # fmt: skip
            return tuple(None if a is None else Tensor._make(a) for a in grads)

        def formula(g_out, q, k, v, kept, mask):
            probs = ops.add(mask, q.matmul(k.transpose(-2, -1)), alpha=scale).softmax(-1)
            return _Attention._grads(ctx, g_out, None, q, k, v, probs, None, (*wanted, False))[:3]

        grads = fused_grads("ScaledDotProductFlashAttentionForCpuBackwardBackward0", kernel, formula,
                            (g_out, q, k, v, kept, mask), wanted)  # fmt: skip
        return *grads, None, None


#: ``_Attention`` as the node torch's CPU dispatch ends with on its other paths: the math path's last ``matmul``
#: (``UnsafeViewBackward0``; ``MmBackward0`` for matrices; ``CloneBackward0``/``TransposeBackward0`` where that
#: product runs transposed) and, for an empty result or no keys, the sum that makes its zeros (``AddBackward0``).
#: The same computation under each name.
_ATTENTION_AS = {
    name: type(f"_AttentionAs{name}", (_Attention,), {"node_name": name, "__doc__": _Attention.__doc__})
    for name in ("UnsafeViewBackward0", "MmBackward0", "CloneBackward0", "TransposeBackward0", "AddBackward0")
}

#: ``_CausalAttention`` under each ``_Attention`` class's node name.
_CAUSAL_AS = {_Attention: _CausalAttention} | {
    cls: type(
        f"_CausalAttentionAs{name}", (_CausalAttention,), {"node_name": name, "__doc__": _CausalAttention.__doc__}
    )
    for name, cls in _ATTENTION_AS.items()
}


def _sdpa_node(query: Tensor, key: Tensor, value: Tensor, attn_mask, dropout_p: float, gqa: tuple) -> type:
    """``_Attention`` named as the node of the path torch's CPU dispatch takes for these arguments."""
    if _flash_on_cpu(query, key, value, attn_mask, dropout_p, gqa != (1, 1)):
        return _Attention
    length, source, v_size = query.shape[-2], key.shape[-2], value.shape[-1]
    if 0 in (length, source, v_size) or any(0 in t.shape[:-2] for t in (query, key, value)):
        return _ATTENTION_AS["AddBackward0"]
    return _ATTENTION_AS[_math_node(query, key, value, attn_mask, gqa)]


def _flash_on_cpu(query: Tensor, key: Tensor, value: Tensor, attn_mask, dropout_p: float, grouped: bool) -> bool:
    """Whether torch's CPU dispatch (``use_flash_attention_cpp``) takes its flash kernel: no dropout; three 4-d
    tensors of one batch size, one head count (or, grouped, key and value heads alike dividing the query's), one
    head size, keys and queries, unit last strides; and no mask or one that needs no grad, 2-d or 4-d, whose last
    two sizes are the scores' or 1 (and, 4-d, whose first two are the batch's and the heads' or 1)."""
    if dropout_p > 0.0 or query.dim() != 4 or key.dim() != 4 or value.dim() != 4:
        return False
    (batch, heads, length, size), (k_batch, k_heads, source, k_size) = query.shape, key.shape
    v_batch, v_heads, _, v_size = value.shape
    if not batch == k_batch == v_batch or not size == k_size == v_size or length == 0 or source == 0:
        return False
    if not (heads == k_heads == v_heads or (grouped and k_heads == v_heads and heads % k_heads == 0)):
        return False
    if not (_unit_last_stride(query) and _unit_last_stride(key) and _unit_last_stride(value)):
        return False
    if attn_mask is None:
        return True
    if attn_mask.requires_grad or attn_mask.size(-2) not in (length, 1) or attn_mask.size(-1) not in (source, 1):
        return False
    if attn_mask.dim() == 4:
        return attn_mask.shape[0] in (1, batch) and attn_mask.shape[1] in (1, heads)
    return attn_mask.dim() == 2


def _unit_last_stride(t: Tensor) -> bool:
    """``t.stride(-1) == 1``, read off a plain tensor's storage (``stride()`` builds every dim's)."""
    if type(t) is not Tensor:
        return t.stride(-1) == 1
    data = t._data
    return data.strides[-1] == data.dtype.itemsize


def _math_node(query: Tensor, key: Tensor, value: Tensor, attn_mask, gqa: tuple) -> str:
    """The node torch's math path ends with: that of its ``matmul`` of the probabilities (a new tensor of the
    scores' shape, needing grad where the query, the key or the mask does) by the value (a new one when its
    heads are repeated for grouped query heads)."""
    k_shape, v_shape = _grouped_shape(key, gqa[0]), _grouped_shape(value, gqa[1])
    batch = np.broadcast_shapes(tuple(query.shape[:-2]), k_shape[:-2])
    needs = query.requires_grad or key.requires_grad or (attn_mask is not None and attn_mask.requires_grad)
    probs = Operand.contiguous((*batch, query.shape[-2], key.shape[-2]), needs)
    v = Operand.of(value) if gqa[1] == 1 else Operand.contiguous(v_shape, value.requires_grad)
    return matmul_node_name(probs, v)


def _grouped_shape(t: Tensor, times: int) -> tuple:
    """``t``'s shape after ``_repeat_heads``."""
    shape = tuple(t.shape)
    return shape if times == 1 else (*shape[:-3], shape[-3] * times, *shape[-2:])


def _dropout_keep(shape: tuple, p: float, like: Tensor) -> Tensor:
    """The dropout multiplier of ``shape``: 0 with probability ``p``, else ``1 / (1 - p)`` (as ``F.dropout``)."""
    dt = like._data.dtype
    if p == 1.0:
        keep = np.zeros(shape, dt)
    else:
        kept = _generator().random(shape, dtype=np.float32) >= np.float32(p)
        keep = kept.astype(dt) * dt.type(1.0 / (1.0 - p))
    return Tensor._make(like._backend.from_host(keep))


def _additive(mask: Tensor, dtype) -> Tensor:
    """A boolean mask (True: attend) as the float mask added to the scores (0 where True, ``-inf`` elsewhere)."""
    return ops.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask.logical_not(), -math.inf)


def _check_sdpa(query: Tensor, key: Tensor, value: Tensor, attn_mask, dropout_p: float, enable_gqa: bool) -> tuple:
    """torch's checks, in its order; returns how often each key and value head repeats (grouped-query)."""
    for i, (name, t) in enumerate((("query", query), ("key", key), ("value", value))):
        if not isinstance(t, Tensor):
            raise not_a_tensor("scaled_dot_product_attention", name, i + 1, t)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
            f"{query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} instead."
        )
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_cpp_name(query)} key.dtype: {_cpp_name(key)} and value.dtype: {_cpp_name(value)} instead."
        )
    if attn_mask is not None and attn_mask.dtype not in (bool_, float32, query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
            f"{_cpp_name(attn_mask)} and  query.dtype: {_cpp_name(query)} instead."
        )
    if query.size(-1) != key.size(-1):  # the error of the batched product the scores come from
        batch = math.prod(np.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2])))
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {query.size(-1)}] but got: "
            f"[{batch}, {key.size(-1)}]."
        )
    if dropout_p < 0.0 or dropout_p > 1.0:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if not enable_gqa:
        return 1, 1
    heads, k_heads, v_heads = query.size(-3), key.size(-3), value.size(-3)
    if heads % k_heads or heads % v_heads:
        raise RuntimeError("Number of heads in key and value must divide the number of heads in ")
    return heads // k_heads, heads // v_heads


def _plain_triple(query, key, value) -> bool:
    """Whether ``query``, ``key`` and ``value`` are plain Tensors of at least two dims, of one dtype, the query's
    and the key's last dims equal: the operands that pass ``_check_sdpa``'s checks of them."""
    if type(query) is not Tensor or type(key) is not Tensor or type(value) is not Tensor:
        return False
    q, k, v = query._data, key._data, value._data
    return (
        q.ndim >= 2
        and k.ndim >= 2
        and v.ndim >= 2
        and q.dtype is k.dtype
        and q.dtype is v.dtype
        and q.shape[-1] == k.shape[-1]
    )


def _attention(query, key, value, mask, dropout_p: float, scale: float, gqa: tuple, safe: bool,
               causal: bool = False, node: type = _Attention) -> tuple:  # fmt: skip
    """The output, the probabilities and the dropout multiplier (None without dropout); ``mask`` is an additive
    float mask or None (``causal``: the causal one, whose attention the backend may compute whole: then no
    probabilities are kept, and None stands for them); ``node``: ``_Attention`` or one of its names."""
    keep = None
    if dropout_p > 0.0:
        key_batch = tuple(key.shape[:-2])
        if gqa[0] != 1:
            key_batch = (*key_batch[:-1], key_batch[-1] * gqa[0])
        batch = np.broadcast_shapes(tuple(query.shape[:-2]), key_batch)
        shape = (*batch, query.shape[-2], key.shape[-2])
        if mask is not None:
            shape = np.broadcast_shapes(shape, tuple(mask.shape))
        keep = _dropout_keep(tuple(shape), dropout_p, query)
    if causal and keep is None and gqa == (1, 1) and _blockable(query, key, value):
        return _CAUSAL_AS[node].apply(query, key, value, mask, scale), None, None
    out, probs = node.apply(query, key, value, mask, keep, scale, gqa[0], gqa[1], safe)
    return out, probs, keep


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, *, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:  # fmt: skip
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims, leading dims broadcast.

    ``attn_mask``: boolean (True: take part) or float (added to the scores), broadcasting to ``(..., L, S)``;
    ``is_causal``: query ``i`` sees keys ``j <= i`` (giving ``attn_mask`` too is an error, as torch documents);
    ``scale`` defaults to ``1 / sqrt(E)``; ``enable_gqa`` lets key/value have fewer heads (dim -3)
    than query. A row with no key to attend gives zeros, as torch's does. Dropout uses numbagrad's generator.
    """
    if attn_mask is None and not enable_gqa and type(dropout_p) is float and _plain_triple(query, key, value):
        gqa = (1, 1) if 0.0 <= dropout_p <= 1.0 else _check_sdpa(query, key, value, None, dropout_p, False)
    else:
        gqa = _check_sdpa(query, key, value, attn_mask, dropout_p, enable_gqa)
    dtype = query.dtype
    mask = None
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if attn_mask is not None:
        mask = _additive(attn_mask, dtype) if attn_mask.dtype == bool_ else attn_mask.to(dtype)
    length, source = query.size(-2), key.size(-2)
    if is_causal:
        mask = _causal_mask(length, source, dtype, query.device)
    # (no features: the scores are 0 at any scale, as torch scales query and key before their product; 1/0 is not)
    factor = (1.0 / math.sqrt(query.size(-1)) if query.size(-1) else 1.0) if scale is None else scale
    # a causal mask leaves every row key 0 when there is one: no row can be all ``-inf``
    safe = not (is_causal and source > 0)
    node = _sdpa_node(query, key, value, attn_mask, dropout_p, gqa)
    return _attention(query, key, value, mask, dropout_p, factor, gqa, safe, is_causal, node)[0]


#: (length, source, dtype, device) -> the additive causal mask: a model asks for the same few shapes every step,
#: and building one takes four ops. Never written to (the attention only adds it); cleared when it grows large.
_CAUSAL: dict = {}


def _causal_mask(length: int, source: int, dtype, device) -> Tensor:
    """The additive mask of ``is_causal``: 0 where key ``j <= i`` (query ``i``), ``-inf`` elsewhere."""
    key = (length, source, dtype, str(device))
    mask = _CAUSAL.get(key)
    if mask is None:
        if len(_CAUSAL) >= 32:
            _CAUSAL.clear()
        with untraced():
            keep = ops.ones(length, source, dtype=bool_, device=device).tril()
            mask = _CAUSAL[key] = _additive(keep, dtype)
    return trace_constant(mask)


# --- multi-head attention ------------------------------------------------------------------------------------------
def _linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    out = x.matmul(weight.t())
    return out if bias is None else out + bias


def _mha_shape_check(query: Tensor, key: Tensor, value: Tensor, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """torch's checks of the shapes; True for batched (3-D) input, False for unbatched (2-D)."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D"
                f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D"
                f" but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                f" but found {attn_mask.dim()}-D tensor instead"
            )
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D"
                f" but found {key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D"
                f" but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D"
                    f" but found {attn_mask.dim()}-D tensor instead"
                )
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D query tensor")


def _none_or_dtype(input: Tensor | None):  # noqa: A002
    """``input``'s dtype, or None for None (torch's helper, used to compare two masks' types)."""
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask, mask_name: str, other_type, other_name: str, target_type, check_other: bool = True):
    """A boolean mask (True: masked out) as an additive float mask of ``target_type``; float masks pass through."""
    if mask is None:
        return None
    if mask.dtype != bool_ and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=3,
        )
    if mask.is_floating_point():
        return mask
    return ops.zeros(tuple(mask.shape), dtype=target_type, device=mask.device).masked_fill(mask, -math.inf)


def _in_projection(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v) -> tuple:
    return _linear(query, w_q, b_q), _linear(key, w_k, b_k), _linear(value, w_v, b_v)


def _pad_last(t: Tensor) -> Tensor:
    """Append one zero column on the last dim (a mask's entry for an added key)."""
    return ops.cat([t, ops.zeros((*t.shape[:-1], 1), dtype=t.dtype, device=t.device)], -1)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple:
    """Multi-head attention over ``(L, N, E)`` inputs (or unbatched ``(L, E)``), as ``nn.MultiheadAttention``
    computes it: project, split into heads, attend, merge, project out. Returns the output and, with
    ``need_weights``, the attention weights (averaged over heads unless ``average_attn_weights=False``)."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(
        key_padding_mask, "key_padding_mask", None if attn_mask is None else attn_mask.dtype, "attn_mask", query.dtype
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
            "`generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # sdpa's causal flag replaces the mask
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype, check_other=False)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}"
            )
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be {(tgt_len, src_len)}."
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                    f"{(bsz * num_heads, tgt_len, src_len)}."
                )
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = ops.cat([k, bias_k.repeat(1, bsz, 1)])
        v = ops.cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask = None if attn_mask is None else _pad_last(attn_mask)
        key_padding_mask = None if key_padding_mask is None else _pad_last(key_padding_mask)
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads(k, static_k, bsz, num_heads, head_dim, "k")
    v = _heads(v, static_v, bsz, num_heads, head_dim, "v")
    if add_zero_attn:
        zeros = ops.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = ops.cat([k, zeros], 1), ops.cat([v, zeros], 1)
        attn_mask = None if attn_mask is None else _pad_last(attn_mask)
        key_padding_mask = None if key_padding_mask is None else _pad_last(key_padding_mask)
    src_len = k.size(1)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape[:1]) != (bsz,):
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(
                f"Expected key_padded_mask.shape[1] to be {src_len}, but got {key_padding_mask.shape[1]}"
            )
        padding = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        padding = padding.reshape(bsz * num_heads, 1, src_len)
        attn_mask = padding if attn_mask is None else attn_mask + padding
    if not training:
        dropout_p = 0.0
    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        out, probs, keep = _attention(q, k, v, attn_mask, dropout_p, math.sqrt(1.0 / head_dim), (1, 1), False)
        if keep is not None:  # torch returns the dropped-out weights its output was computed from
            probs = probs * keep
        weights = probs.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
    else:
        mask = attn_mask
        if mask is not None:
            if mask.size(0) == 1:
                mask = mask.unsqueeze(0)
            else:
                mask = mask.reshape(bsz, num_heads, -1, src_len)
        if is_causal:
            causal = _additive(ops.ones(tgt_len, src_len, dtype=bool_, device=q.device).tril(), q.dtype)
            mask = causal if mask is None else mask + causal
        q4 = q.reshape(bsz, num_heads, tgt_len, head_dim)
        k4 = k.reshape(bsz, num_heads, src_len, head_dim)
        v4 = v.reshape(bsz, num_heads, src_len, head_dim)
        out = _attention(q4, k4, v4, mask, dropout_p, 1.0 / math.sqrt(head_dim), (1, 1), True)[0]
        weights = None
    out = out.reshape(bsz, num_heads, tgt_len, head_dim).permute(2, 0, 1, 3).reshape(tgt_len * bsz, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not is_batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights


def _heads(t: Tensor, static, bsz: int, num_heads: int, head_dim: int, name: str) -> Tensor:
    """``(S, N, E)`` as ``(N * heads, S, head_dim)``, or the given ``static_k``/``static_v`` after torch's checks."""
    if static is None:
        return t.reshape(t.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if static.size(0) != bsz * num_heads:
        raise AssertionError(f"expecting static_{name}.size(0) of {bsz * num_heads}, but got {static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting static_{name}.size(2) of {head_dim}, but got {static.size(2)}")
    return static
