"""The Functions behind ``nn.functional`` that are not elementwise rows: convolution, pooling, normalization,
embedding, padding, ``glu``, the p-norm of ``pairwise_distance``, and the fused losses.

Each is one graph node with torch's node name. The heavy lifting is a backend primitive (``backend/cpu.py``,
"nn primitives"; the cuda backend runs those through the host), so nothing here tests the device.

Double backward: a backward that runs a kernel (convolution's, the normalizations') returns its gradients through
``autograd.fused.fused_grads``, a node whose own backward differentiates the same gradients written with
differentiable operations; the kernel runs with and without ``create_graph``. The backward of a linear map
(convolution's im2col, pooling, embedding lookup, padding) is its adjoint, applied through ``LinearMap`` whose own
backward is the map again, so every order of derivative exists.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._tensor import Tensor
from ..autograd.function import (
    BATCHING,
    NOT_A_TENSOR_INPUT,
    Function,
    edge_of,
    make_node,
    releasing,
    saved_input_unhooked,
)
from ..autograd.fused import fused_grads
from ..autograd.grad_mode import state
from ..backend import _BY_TYPE as _BACKENDS
from ..backend import backend_for
from ..scalar_math import ROWS
from ._common import new_shell as _new
from .indexing import where as _where
from .shape import cat
from .sparse import SparseCOOTensor


def _t(data) -> Tensor:
    return Tensor._make(data)


class LinearMap(Function):
    """``y = f(x)`` for a linear map ``f`` on storage arrays; its gradient is ``f_t(g)`` with ``f_t`` the adjoint
    (which is itself a ``LinearMap`` back to ``f``, so higher derivatives exist)."""

    node_name = "LinearMapBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, f, f_t) -> Tensor:
        ctx.f, ctx.f_t = f, f_t
        return _t(f(x._data))

    @staticmethod
    def backward(ctx, g: Tensor):
        return linear_map(g, ctx.f_t, ctx.f), None, None


def linear_map(x: Tensor, f, f_t) -> Tensor:
    """``LinearMap.apply(x, f, f_t)``; where grad mode is off (a backward without ``create_graph``), which would
    record no node, and where nothing else sees op calls through ``apply`` (``state.fast``: no compile tracer,
    forward-AD level, profiler or inference mode; and no ``vmap``), ``f`` on the storage alone: the apply cost
    about a third of an embedding's backward node (the makemore MLP's (32, 3) indices of a (27, 10) table, 1
    thread: 11.7 and 13.7 us in two runs, 8.7 and 10.4 without)."""
    st = state
    if not st.enabled and st.fast and BATCHING[0] is None:
        return _t(f(x._data))
    return LinearMap.apply(x, f, f_t)


# --- convolution -------------------------------------------------------------------------------------------------
class ConvGeometry:
    """Everything about one convolution but the data, seen from the convolution (the transposed convolution runs
    it backwards): 2-d or 3-d sizes (a 1-d convolution is a 2-d one of height 1), the leading padding offsets,
    groups, the output's spatial size ``out``, the internal shape ``in_shape`` (N, C, *spatial) of the large side,
    and the caller's shapes of the large side (``big_shape``) and of the small side (``small_shape``)."""

    __slots__ = ("kernel", "stride", "padding", "dilation", "groups", "out", "in_shape", "big_shape", "small_shape")

    def __init__(self, kernel, stride, padding, dilation, groups, out, in_shape, big_shape, small_shape) -> None:
        self.kernel, self.stride, self.padding, self.dilation = kernel, stride, padding, dilation
        self.groups, self.out, self.in_shape = groups, out, in_shape
        self.big_shape, self.small_shape = big_shape, small_shape

    @property
    def k(self) -> int:
        """Rows of the columns: channels times kernel positions."""
        return self.in_shape[1] * math.prod(self.kernel)

    @property
    def length(self) -> int:
        """Columns of the columns: output positions."""
        return math.prod(self.out)

    def _planes(self) -> tuple:
        """The 2-d passes that make a 3-d im2col: first the depth windows of (N, C, D, H * W), then the (h, w)
        windows of (N, C * kd * od, H, W)."""
        n, c, d, h, w = self.in_shape
        (kd, kh, kw), (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = self.kernel, self.stride, self.padding, self.dilation
        od, oh, ow = self.out
        depth = _Plane((n, c, d, h * w), (kd, 1), (sd, 1), (pd, 0), (dd, 1), (od, h * w))
        rows = _Plane((n, c * kd * od, h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw), (oh, ow))
        return depth, rows

    def columns(self, x: Tensor) -> Tensor:
        """(N, C * K, L) columns of the large side ``x``: each output position's receptive field (differentiable)."""
        x = x.reshape(self.in_shape)
        if len(self.kernel) == 2:
            plane = _Plane(self.in_shape, self.kernel, self.stride, self.padding, self.dilation, self.out)
            return plane.columns(x)
        depth, rows = self._planes()
        n, c = self.in_shape[:2]
        (kd, kh, kw), (od, oh, ow) = self.kernel, self.out
        cols = rows.columns(depth.columns(x).reshape(rows.shape))
        cols = cols.reshape(n, c, kd, od, kh, kw, oh, ow).permute(0, 1, 2, 4, 5, 3, 6, 7)
        return cols.reshape(n, self.k, self.length)

    def image(self, cols: Tensor) -> Tensor:
        """The adjoint of ``columns``: (N, C * K, L) columns summed back into the large side (differentiable)."""
        if len(self.kernel) == 2:
            plane = _Plane(self.in_shape, self.kernel, self.stride, self.padding, self.dilation, self.out)
            return plane.image(cols).reshape(self.big_shape)
        depth, rows = self._planes()
        n, c = self.in_shape[:2]
        (kd, kh, kw), (od, oh, ow) = self.kernel, self.out
        cols = cols.reshape(n, c, kd, kh, kw, od, oh, ow).permute(0, 1, 2, 5, 3, 4, 6, 7)
        planes = rows.image(cols.reshape(n, c * kd * od * kh * kw, oh * ow))
        return depth.image(planes.reshape(n, c * kd, od * depth.out[1])).reshape(self.big_shape)


class _Plane:
    """One 2-d im2col over (N, C, H, W) as a differentiable ``LinearMap`` (its adjoint is col2im). The storage
    maps also take and give the caller's shapes of the image and of the columns (``unfold`` of unbatched input)."""

    def __init__(self, shape, kernel, stride, padding, dilation, out, image_shape=None, cols_shape=None) -> None:
        self.shape, self.kernel, self.stride, self.padding, self.dilation, self.out = (
            tuple(shape), tuple(kernel), tuple(stride), tuple(padding), tuple(dilation), tuple(out)
        )  # fmt: skip
        k = self.shape[1] * self.kernel[0] * self.kernel[1]
        self.image_shape = self.shape if image_shape is None else tuple(image_shape)
        self.cols_shape = (self.shape[0], k, self.out[0] * self.out[1]) if cols_shape is None else tuple(cols_shape)

    def im2col(self, x):
        b = backend_for(x)
        x = b.reshape(x, self.shape)
        cols = b.im2col(x, self.kernel, self.stride, self.padding, self.dilation, self.out)
        return b.reshape(cols, self.cols_shape)

    def col2im(self, cols):
        b = backend_for(cols)
        cols = b.reshape(b.ascontiguous(cols), (self.shape[0], -1, self.out[0] * self.out[1]))
        x = b.col2im(cols, self.shape, self.kernel, self.stride, self.padding, self.dilation, self.out)
        return b.reshape(x, self.image_shape)

    def columns(self, x: Tensor) -> Tensor:
        return linear_map(x.reshape(self.shape), self.im2col, self.col2im)

    def image(self, cols: Tensor) -> Tensor:
        return linear_map(cols.contiguous(), self.col2im, self.im2col)


def _grouped(t: Tensor, groups: int) -> Tensor:
    """(N, C, *) as (N, groups, C / groups, positions)."""
    return t.reshape(t.shape[0], groups, t.shape[1] // groups, -1)


def _channel_bias(out: Tensor, bias) -> Tensor:
    return out if bias is None else out + bias.reshape(_channel_shape(out))


def _weight_grad(small: Tensor, big: Tensor, geom: ConvGeometry) -> Tensor:
    """The weight's gradient ``sum_n small[n] @ columns(big[n]).T`` per group, shaped (O, C / groups, *kernel):
    of a convolution (``small`` the output gradient, ``big`` its input) and of a transposed one (``small`` its
    input, ``big`` the output gradient) alike."""
    g = geom.groups
    cols = geom.columns(big).reshape(geom.in_shape[0], g, geom.k // g, geom.length)
    w = _grouped(small, g).matmul(cols.transpose(2, 3)).sum(0)
    return w.reshape(small.shape[1], geom.in_shape[1] // g, *geom.kernel)


class Convolution(Function):
    """``conv1d``/``conv2d``/``conv3d`` in one node: im2col then one matrix product per group (plus the bias).
    Its input gradient is the transposed convolution of the output gradient, and the transposed convolution's is
    this one: each is the other's backward, so every order of derivative exists."""

    node_name = "ConvolutionBackward0"
    _listed_inputs = (2,)  # (an absent bias is listed in next_functions, as torch does)
    _trusted = True
    _node_defaults = releasing("kept")  # (the columns or input its backend forward kept)

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias, geom: ConvGeometry) -> Tensor:
        ctx.geom, ctx.kept = geom, None
        ctx.save_for_backward(x, weight)
        if len(geom.kernel) == 2:  # the backend's fused 2-d convolution, which keeps what its backward needs
            backend = x._backend
            x4 = backend.reshape(x._data, geom.in_shape)
            w4 = backend.reshape(weight._data, (weight.shape[0], geom.in_shape[1] // geom.groups, *geom.kernel))
            b = None if bias is None else bias._data
            out, ctx.kept = backend.conv2d(x4, w4, b, geom.stride, geom.padding, geom.dilation, geom.groups, geom.out)
            return _t(backend.reshape(out, geom.small_shape))
        g = geom.groups
        cols = geom.columns(x).reshape(geom.in_shape[0], g, geom.k // g, geom.length)
        out = weight.reshape(g, weight.shape[0] // g, geom.k // g).matmul(cols)
        return _channel_bias(out.reshape(geom.small_shape), bias)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        geom = ctx.geom
        wanted = ctx.needs_input_grad[:3]

        def formula(g, x, weight):
            gx = ConvolutionTranspose.apply(g, weight, None, geom) if wanted[0] else None
            gw = _weight_grad(g, x, geom).reshape(weight.shape) if wanted[1] else None
            gb = g.sum((0, *range(2, g.dim()))) if wanted[2] else None
            return gx, gw, gb

        if len(geom.kernel) != 2:  # (the forward ran on ops: its backward is ops too)
            return *formula(g, x, weight), None
        kept = ctx.kept

        def kernel(g, x, weight):  # the backend's fused 2-d backward, on what its forward kept
            backend = g._backend
            n, o = geom.in_shape[0], weight.shape[0]
            g4 = backend.reshape(g._data, (n, o, *geom.out))
            w4 = backend.reshape(weight._data, (o, geom.in_shape[1] // geom.groups, *geom.kernel))
            gx, gw, gb = backend.conv2d_backward(g4, kept, geom.in_shape, w4, geom.stride, geom.padding,
                                                 geom.dilation, geom.groups, *wanted)  # fmt: skip
            gx = _t(backend.reshape(gx, x._data.shape)) if wanted[0] else None
            gw = _t(backend.reshape(gw, weight._data.shape)) if wanted[1] else None
            return gx, gw, (_t(gb) if wanted[2] else None)

        return *fused_grads("ConvolutionBackwardBackward0", kernel, formula, (g, x, weight), wanted), None


class ConvolutionTranspose(Function):
    """``conv_transpose1d/2d/3d`` in one node: the adjoint of the convolution of ``geom`` (one matrix product per
    group, then col2im), plus the bias. ``weight`` is (C_in, C_out / groups, *kernel), the convolution's layout.
    A 2-d one runs the backend's convolution input gradient forward; its backward convolves the output gradient
    once (``conv2d``), whose columns also give the weight's gradient."""

    node_name = "ConvolutionBackward0"
    _listed_inputs = (2,)  # (an absent bias is listed in next_functions, as torch does)
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias, geom: ConvGeometry) -> Tensor:
        ctx.geom = geom
        ctx.save_for_backward(x, weight)
        g = geom.groups
        if len(geom.kernel) == 2:
            backend = x._backend
            x4 = backend.reshape(x._data, (geom.in_shape[0], weight.shape[0], *geom.out))
            w4 = backend.reshape(weight._data, (weight.shape[0], geom.in_shape[1] // g, *geom.kernel))
            out, _, _ = backend.conv2d_backward(x4, None, geom.in_shape, w4, geom.stride, geom.padding, geom.dilation,
                                                g, True, False, False)  # fmt: skip
            return _channel_bias(_t(backend.reshape(out, geom.big_shape)), bias)
        w = weight.reshape(g, weight.shape[0] // g, geom.k // g).transpose(1, 2)
        cols = w.matmul(_grouped(x, g)).reshape(geom.in_shape[0], geom.k, geom.length)
        return _channel_bias(geom.image(cols), bias)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        geom = ctx.geom
        wanted = ctx.needs_input_grad[:3]

        def formula(g, x, weight):
            gx = Convolution.apply(g, weight, None, geom).reshape(x.shape) if wanted[0] else None
            gw = _weight_grad(x, g, geom).reshape(weight.shape) if wanted[1] else None
            gb = g.sum((0, *range(2, g.dim()))) if wanted[2] else None
            return gx, gw, gb

        if len(geom.kernel) != 2:
            return *formula(g, x, weight), None

        def kernel(g, x, weight):  # one convolution of g: its output is x's gradient, its columns give weight's
            backend = g._backend
            groups, n, o = geom.groups, geom.in_shape[0], weight.shape[0]
            w4 = backend.reshape(weight._data, (o, geom.in_shape[1] // groups, *geom.kernel))
            g4 = backend.reshape(g._data, geom.in_shape)
            gx = gw = gb = None
            if wanted[0]:  # (kept: what that convolution's backward needs, g's columns or g itself)
                gx, kept = backend.conv2d(g4, w4, None, geom.stride, geom.padding, geom.dilation, groups, geom.out)
                gx = _t(backend.reshape(gx, x._data.shape))
            else:
                kept = backend.im2col(g4, geom.kernel, geom.stride, geom.padding, geom.dilation, geom.out)
            if wanted[1]:  # sum_n x[n] @ cols[n].T per group: the convolution's weight gradient with x as its g
                x4 = backend.reshape(x._data, (n, o, *geom.out))
                _, gw, _ = backend.conv2d_backward(x4, kept, geom.in_shape, w4, geom.stride, geom.padding,
                                                   geom.dilation, groups, False, True, False)  # fmt: skip
                gw = _t(backend.reshape(gw, weight._data.shape))
            if wanted[2]:
                gb = g.sum((0, *range(2, g.dim())))
            return gx, gw, gb

        return *fused_grads("ConvolutionBackwardBackward0", kernel, formula, (g, x, weight), wanted), None


# --- pooling -------------------------------------------------------------------------------------------------------
_POOL_EDGES = (NOT_A_TENSOR_INPUT,) * 5  # the edges of a max pool's non-tensor arguments
_FIRST_OF_6 = (True, False, False, False, False, False)


class MaxPool2d(Function):
    """Max over windows of the last two dims: (values, int64 indices into each input plane)."""

    node_name = "MaxPool2DWithIndicesBackward0"

    @classmethod
    def _fast_apply(cls, args: tuple, st):
        """``apply`` for a plain float32 or float64 Tensor outside anomaly and inference mode, with no tracer or
        saved-tensor hooks (``st.fast``): ``forward``'s two outputs and the node ``_link_general`` builds for them
        (the indices marked non-differentiable, saved as an input is), without the general path's per-output
        bookkeeping; anything else (other pools, other dtypes) returns None."""
        x = args[0]
        if cls is not MaxPool2d or type(x) is not Tensor or not st.fast or x._is_inference:
            return None
        data = x._data
        dt = data.dtype
        if dt.kind != "f" or dt.itemsize < 4:
            return None
        _, kernel, stride, padding, dilation, out_hw = args
        backend = _BACKENDS.get(type(data)) or backend_for(data)
        shape = data.shape
        lead = shape[:-2]
        out, idx = backend.max_pool2d(
            backend.reshape(data, (math.prod(lead), *shape[-2:])), kernel, stride, padding, dilation, out_hw
        )
        values, indices = _new(Tensor), _new(Tensor)
        values._data = backend.reshape(out, (*lead, *out_hw))
        indices._data = backend.reshape(idx, (*lead, *out_hw))
        if st.enabled and (x._requires_grad or x.grad_fn is not None):
            ctx = cls._backward_cls()
            ctx.needs_input_grad = _FIRST_OF_6
            ctx.in_shape, ctx.dims, ctx.args = x.shape, 2, 5
            ctx.non_differentiable = (indices,)
            ctx._input_meta = ((shape, dt, backend), False, False, False, False, False)
            ctx._output_meta = [(values._data.shape, dt, backend), (indices._data.shape, idx.dtype, backend)]
            make_node(ctx, (edge_of(x), *_POOL_EDGES), [values, indices])
            ctx._saved = [saved_input_unhooked(indices)]
        return values, indices

    @staticmethod
    def forward(ctx, x: Tensor, kernel, stride, padding, dilation, out_hw):
        backend = x._backend
        planes = math.prod(x.shape[:-2])
        x3 = backend.reshape(x._data, (planes, *x.shape[-2:]))
        out, idx = backend.max_pool2d(x3, kernel, stride, padding, dilation, out_hw)
        shape = (*x.shape[:-2], *out_hw)
        indices = _t(backend.reshape(idx, shape))
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.in_shape, ctx.dims, ctx.args = x.shape, 2, 5
        return _t(backend.reshape(out, shape)), indices

    @staticmethod
    def backward(ctx, g: Tensor, _g_indices):
        """Each output gradient added at its maximum's flat index in its plane (the plane seen as 2-d: rows of the
        last dim)."""
        (indices,) = ctx.saved_tensors
        in_shape, k = tuple(ctx.in_shape), ctx.dims
        planes = math.prod(in_shape[:-k])
        in_hw = (math.prod(in_shape[-k:-1]), in_shape[-1])
        out_hw = (math.prod(g.shape[-k:-1]), g.shape[-1])
        backend = indices._backend
        idx = backend.reshape(indices._data, (planes, *out_hw))

        def scatter(gd):
            b = backend
            return b.reshape(b.max_pool2d_backward(b.reshape(gd, (planes, *out_hw)), idx, in_hw), in_shape)

        def gather(gg):
            b = backend
            flat = b.reshape(b.ascontiguous(gg), (planes, in_hw[0] * in_hw[1]))
            picked = b.take_along_axis(flat, b.reshape(idx, (planes, out_hw[0] * out_hw[1])), 1)
            return b.reshape(picked, g.shape)

        return linear_map(g, scatter, gather), *([None] * ctx.args)


class MaxPool3d(MaxPool2d):
    """Max over windows of the last three dims, as two passes of the 2-d kernel: the (h, w) windows of each depth
    slice, then the depth windows of those maxima. Scanning depth first keeps torch's choice among equal maxima
    (the first in (d, h, w) order; the last NaN). Indices are ``(d * H + h) * W + w`` in each input volume."""

    node_name = "MaxPool3DWithIndicesBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, kernel, stride, padding, dilation, out):
        b = x._backend
        *lead, d, h, w = x.shape
        planes = math.prod(lead)
        od, oh, ow = out
        rows, idx_hw = b.max_pool2d(b.reshape(x._data, (planes * d, h, w)), kernel[1:], stride[1:], padding[1:],
                                    dilation[1:], (oh, ow))  # fmt: skip
        depth = b.reshape(rows, (planes, d, oh * ow))
        values, idx_d = b.max_pool2d(depth, (kernel[0], 1), (stride[0], 1), (padding[0], 0), (dilation[0], 1),
                                     (od, oh * ow))  # fmt: skip
        chosen = _t(idx_d) // (oh * ow)  # the depth of each maximum (past the input for an empty window)
        inside = chosen.clamp(max=d - 1)
        picked = _t(b.take_along_axis(b.reshape(idx_hw, (planes, d, oh * ow)), inside._data, 1))
        indices = (chosen * (h * w) + picked).reshape(*lead, od, oh, ow)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.in_shape, ctx.dims, ctx.args = x.shape, 3, 5
        return _t(b.reshape(values, (*lead, od, oh, ow))), indices


class _PoolMaps:
    """The forward and adjoint array maps of an average pool (``adaptive``: torch's adaptive windows)."""

    def __init__(self, in_shape, out_hw, adaptive: bool, args: tuple = ()) -> None:
        self.in_shape, self.out_hw, self.adaptive, self.args = tuple(in_shape), tuple(out_hw), adaptive, args
        self.planes = math.prod(self.in_shape[:-2])
        self.out_shape = (*self.in_shape[:-2], *self.out_hw)

    def forward(self, x):
        b = backend_for(x)
        x3 = b.reshape(b.ascontiguous(x), (self.planes, *self.in_shape[-2:]))
        if self.adaptive:
            out = b.adaptive_avg_pool2d(x3, self.out_hw)
        else:
            out = b.avg_pool2d(x3, *self.args, self.out_hw)
        return b.reshape(out, self.out_shape)

    def adjoint(self, g):
        if self.adaptive and 0 in self.out_shape:  # (torch's forward allows an empty window grid, its backward not)
            shape = list(self.out_shape)
            empty = next(d for d in range(1 if len(shape) == 4 else 0, len(shape)) if shape[d] == 0)
            raise RuntimeError(
                "adaptive_avg_pool2d_backward(): Expected grad_output to have non-zero size for non-batch dimensions, "
                f"but grad_output has sizes {shape} with dimension {empty} being empty"
            )
        b = backend_for(g)
        g3 = b.reshape(b.ascontiguous(g), (self.planes, *self.out_hw))
        if self.adaptive:
            gx = b.adaptive_avg_pool2d_backward(g3, self.in_shape[-2:])
        else:
            gx = b.avg_pool2d_backward(g3, *self.args, self.in_shape[-2:])
        return b.reshape(gx, self.in_shape)


class AvgPool2d(Function):
    """Mean over windows of the last two dims (torch's ``count_include_pad`` and ``divisor_override``)."""

    node_name = "AvgPool2DBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, maps: _PoolMaps) -> Tensor:
        ctx.maps = maps
        return _t(maps.forward(x._data))

    @staticmethod
    def backward(ctx, g: Tensor):
        maps = ctx.maps
        return linear_map(g, maps.adjoint, maps.forward), None


class AdaptiveAvgPool2d(AvgPool2d):
    node_name = "AdaptiveAvgPool2DBackward0"


def adaptive_windows(size: int, out: int) -> np.ndarray:
    """(out, longest window) input positions of torch's adaptive windows ``[floor(i * size / out),
    ceil((i + 1) * size / out))``, each row padded with its window's last position (a repeat changes no maximum)."""
    bounds = [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]
    k = max((stop - start for start, stop in bounds), default=1)
    return np.array([[min(start + j, stop - 1) for j in range(k)] for start, stop in bounds], np.int64).reshape(out, k)


def window_positions(tables, in_sizes) -> np.ndarray:
    """The flat positions (``(d * H + h) * W + w``) of every element of every window, (..., O, K) with ``O`` the
    output positions and ``K`` the window's elements, both in row-major (d, h, w) order, from one (..., out, k)
    table of input positions per spatial dim (leading dims, if any, are per plane)."""
    lead = np.broadcast_shapes(*(t.shape[:-2] for t in tables))
    n = len(tables)
    flat = np.zeros((*lead, *([1] * (2 * n))), np.int64)
    for d, (table, size) in enumerate(zip(tables, in_sizes)):
        out, k = table.shape[-2:]
        shape = [1] * (2 * n)
        shape[d], shape[n + d] = out, k
        flat = flat * size + table.reshape(*table.shape[:-2], *shape)
    o, k = math.prod(t.shape[-2] for t in tables), math.prod(t.shape[-1] for t in tables)
    return flat.reshape(*lead, o, k)


class WindowMaxPool(MaxPool2d):
    """Max over given windows of the last ``dims`` dims: (values, indices into each input plane), the first
    maximum of each window in scan order or its last NaN, as torch's adaptive and fractional kernels pick.
    ``positions`` (``window_positions``) is shared by all planes, or has one leading row per plane."""

    @staticmethod
    def forward(ctx, x: Tensor, positions: np.ndarray, out):
        b = x._backend
        dims = len(out)
        lead, in_sizes = x.shape[:-dims], x.shape[-dims:]
        planes = math.prod(lead)
        o, k = positions.shape[-2:]
        flat = x.reshape(planes, math.prod(in_sizes))
        pos = _t(b.constant(np.ascontiguousarray(positions)))
        if positions.ndim == 2:
            block = flat.index_select(1, pos.reshape(-1)).reshape(planes, o, k)
        else:
            block = flat.gather(1, pos.reshape(planes, o * k)).reshape(planes, o, k)
        values, arg = block.max(-1)
        nan = block.isnan()
        last_nan = (k - 1) - nan.flip(-1).to(arg.dtype).argmax(-1)
        arg = _where(nan.any(-1), last_nan, arg)
        full = pos.expand(planes, o, k) if positions.ndim == 2 else pos.reshape(planes, o, k)
        indices = full.gather(2, arg.unsqueeze(-1)).reshape(*lead, *out)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.in_shape, ctx.dims, ctx.args = x.shape, dims, 2
        return values.reshape(*lead, *out), indices


class AdaptiveMaxPool2d(WindowMaxPool):
    node_name = "AdaptiveMaxPool2DBackward0"


class AdaptiveMaxPool3d(WindowMaxPool):
    node_name = "AdaptiveMaxPool3DBackward0"


class FractionalMaxPool2d(WindowMaxPool):
    node_name = "FractionalMaxPool2DBackward0"


class FractionalMaxPool3d(WindowMaxPool):
    node_name = "FractionalMaxPool3DBackward0"


class _DepthThenPlanes:
    """The array maps of a 3-d average pool as two 2-d ones: the depth windows of (P, D, H * W), then the (h, w)
    windows of each of the (P * OD) slices. Window sizes and valid counts are products over the dims, so the
    means are torch's; a ``divisor_override`` takes the two passes as sums, then divides."""

    def __init__(self, in_shape, kernel, stride, padding, count_include_pad: bool, divisor: int, out) -> None:
        *lead, d, h, w = in_shape
        self.planes = math.prod(lead)
        self.in_shape, self.out_shape = tuple(in_shape), (*lead, *out)
        od, oh, ow = out
        depth = ((kernel[0], 1), (stride[0], 1), (padding[0], 0), count_include_pad, 1 if divisor else 0)
        rows = (kernel[1:], stride[1:], padding[1:], count_include_pad, 1 if divisor else 0)
        self.depth = _PoolMaps((self.planes, d, h * w), (od, h * w), False, depth)
        self.rows = _PoolMaps((self.planes * od, h, w), (oh, ow), False, rows)
        self.scale = 1.0 / divisor if divisor else None

    def _scaled(self, a):
        if self.scale is None:
            return a
        b = backend_for(a)
        return b.elementwise(_mul_row(), [a, b.full((), self.scale, a.dtype)], (), a.dtype)

    def forward(self, x):
        b = backend_for(x)
        mid = self.depth.forward(b.reshape(b.ascontiguous(x), self.depth.in_shape))
        out = self.rows.forward(b.reshape(b.ascontiguous(mid), self.rows.in_shape))
        return self._scaled(b.reshape(out, self.out_shape))

    def adjoint(self, g):
        b = backend_for(g)
        mid = self.rows.adjoint(b.reshape(b.ascontiguous(g), self.rows.out_shape))
        gx = self.depth.adjoint(b.reshape(b.ascontiguous(mid), self.depth.out_shape))
        return self._scaled(b.reshape(gx, self.in_shape))


class AvgPool3d(AvgPool2d):
    """Mean over windows of the last three dims (its maps: ``_DepthThenPlanes``)."""

    node_name = "AvgPool3DBackward0"


# --- resampling: interpolation and adaptive average pooling --------------------------------------------------------
@functools.lru_cache(maxsize=512)
def resample_matrix(mode: str, in_size: int, out_size: int, align_corners: bool, scale, dtype,
                    legacy: bool = False) -> np.ndarray:  # fmt: skip
    """``_resample_matrix``, read-only and cached: a model resamples the same sizes every step, and building one
    costs about 30 us of numpy calls."""
    m = _resample_matrix(mode, in_size, out_size, align_corners, scale, dtype, legacy)
    m.flags.writeable = False
    return m


def _resample_matrix(mode: str, in_size: int, out_size: int, align_corners: bool, scale, dtype,
                     legacy: bool) -> np.ndarray:  # fmt: skip
    """The (out_size, in_size) matrix of one spatial dim's resampling, with torch's source positions and weights:
    ``nearest``/``nearest-exact`` pick one element, ``linear`` mixes two, ``cubic`` four (clamped at the edges),
    ``area`` averages torch's adaptive windows. ``scale`` is the user's scale factor (or None); positions are
    computed in ``dtype`` as torch's kernels do. ``legacy``: the nearest picks of torch's older kernels (every
    backward, and the 2-d forward): float32 ratios, exact copies at 1x and 2x."""
    m = np.zeros((out_size, in_size), np.float64)
    rows = np.arange(out_size)
    if mode == "area":
        for i in range(out_size):
            start, stop = (i * in_size) // out_size, -((-(i + 1) * in_size) // out_size)
            m[i, start:stop] = 1.0 / (stop - start)
        return m
    if mode in ("nearest", "nearest-exact"):
        f = np.float32 if legacy else dtype.type
        ratio = f(1.0 / scale) if scale is not None and scale > 0 else f(in_size) / f(out_size)
        if legacy:
            pos = rows.astype(f) + (f(0.5) if mode == "nearest-exact" else f(0.0))
            src = np.floor(pos * ratio)
        elif mode == "nearest":
            src = np.floor((ratio * rows.astype(f)).astype(np.float32))
        else:
            real = np.maximum(ratio * (rows.astype(f) + f(0.5)) - f(0.5), f(0.0))
            src = np.floor((real + f(0.5)).astype(np.float32))
        src = np.minimum(src.astype(np.int64), in_size - 1)
        if legacy and mode == "nearest" and out_size in (in_size, 2 * in_size):
            src = rows // (out_size // in_size)
        m[rows, src] = 1.0
        return m
    if mode == "linear" and in_size == out_size:  # torch copies (whatever the scale factor)
        return np.eye(out_size)
    f = dtype.type
    if align_corners:
        ratio = f(in_size - 1) / f(out_size - 1) if out_size > 1 else f(0.0)
        real = ratio * rows.astype(f)
    else:
        ratio = f(1.0 / scale) if scale is not None and scale > 0 else f(in_size) / f(out_size)
        real = ratio * (rows.astype(f) + f(0.5)) - f(0.5)
        if mode == "linear":
            real = np.maximum(real, f(0.0))
    index = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lam = np.clip(real - index.astype(f), f(0.0), f(1.0)).astype(np.float64)
    if mode == "linear":
        np.add.at(m, (rows, index), 1.0 - lam)
        np.add.at(m, (rows, index + (index < in_size - 1)), lam)
        return m
    a = -0.75  # torch's bicubic: Keys' cubic convolution with A = -0.75, taps clamped to the edges
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # noqa: E731 - |x| <= 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # noqa: E731 - 1 < |x| < 2
    for tap, w in enumerate((far(lam + 1), near(lam), near(1 - lam), far(2 - lam))):
        np.add.at(m, (rows, np.clip(index - 1 + tap, 0, in_size - 1)), w)
    return m


def antialiased_matrix(kind: str, in_size: int, out_size: int, align_corners: bool, scale, dtype) -> np.ndarray:
    """The (out_size, in_size) matrix of torch's antialiased ``bilinear``/``bicubic`` resampling of one dim: a
    triangle (``linear``) or Keys cubic with ``a = -0.5`` (``cubic``) filter, stretched by the scale when
    downsampling, over the inputs within its support, its weights normalized to sum to one."""
    f = dtype.type
    if align_corners:
        ratio = f(in_size - 1) / f(out_size - 1) if out_size > 1 else f(0.0)
    else:
        ratio = f(1.0 / scale) if scale is not None and scale > 0 else f(in_size) / f(out_size)
    taps = 2 if kind == "linear" else 4
    support = f(taps * 0.5) * ratio if ratio >= 1.0 else f(taps * 0.5)
    widest = int(math.ceil(support)) * 2 + 1
    inv = f(1.0) / ratio if ratio >= 1.0 else f(1.0)
    a = -0.5

    def weight(x):
        x = abs(x)
        if kind == "linear":
            return 1.0 - x if x < 1.0 else 0.0
        if x < 1.0:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2.0 else 0.0

    m = np.zeros((out_size, in_size), np.float64)
    for i in range(out_size):
        center = ratio * f(i + 0.5)
        lo = max(int(center - support + f(0.5)), 0)
        size = min(max(min(int(center + support + f(0.5)), in_size) - lo, 0), widest)
        w = np.array([weight(float((f(j + lo) - center + f(0.5)) * inv)) for j in range(size)], np.float64)
        total = w.sum()
        m[i, lo : lo + size] = w / total if total != 0 else w
    return m


class Resample(Function):
    """A separable resampling of the trailing dims: per dim (dim, forward matrix, backward matrix), the forward
    one applied along it. The gradient applies the transposed backward matrix (torch's backward kernels pick
    nearest elements by an older rule than its forward ones), as another ``Resample`` whose own gradient is the
    forward matrix again, so higher derivatives exist. Subclasses carry torch's node name for each mode."""

    node_name = "ResampleBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, mats: tuple) -> Tensor:
        ctx.mats = mats
        return _along_dims(x, [(d, m) for d, m, _ in mats])

    @classmethod
    def backward(cls, ctx, g: Tensor):
        return cls.apply(g, tuple((d, back.T, m.T) for d, m, back in reversed(ctx.mats))), None


def _along_dims(x: Tensor, mats) -> Tensor:
    """``x`` with each (dim, (new, old) matrix) applied along its dim, as contiguous matrix products on the storage
    (the forward of one node: no tensor ops): one GEMM over the rows for the last dim, ``matrix @ block`` over the
    leading dims for another."""
    b = x._backend
    data, shape = x._data, tuple(x.shape)
    for d, m in mats:
        new = (*shape[:d], m.shape[0], *shape[d + 1 :])
        if d == len(shape) - 1:
            rows = b.reshape(b.ascontiguous(data), (-1, shape[d]))
            data = b.matmul(rows, b.constant(_matrix_in(m.T, data.dtype)))
        else:
            lead, after = math.prod(shape[:d]), math.prod(shape[d + 1 :])
            block = b.reshape(b.ascontiguous(data), (lead, shape[d], after))
            data = b.matmul(b.constant(_matrix_in(m, data.dtype)), block)
        data, shape = b.reshape(data, new), new
    return _t(data)


def _matrix_in(m: np.ndarray, dtype) -> np.ndarray:
    """A resampling matrix as a C-contiguous array of the data's dtype."""
    return np.ascontiguousarray(m, dtype=dtype)


def _resample_node(name: str) -> type:
    return type(name.replace("Backward0", ""), (Resample,), {"node_name": name, "__doc__": Resample.__doc__})


RESAMPLE_NODES = {
    name: _resample_node(name)
    for name in [f"UpsampleNearest{k}DBackward0" for k in (1, 2, 3)]
    + [f"UpsampleNearestExact{k}DBackward0" for k in (1, 2, 3)]
    + ["UpsampleLinear1DBackward0", "UpsampleBilinear2DBackward0", "UpsampleTrilinear3DBackward0"]
    + ["UpsampleBicubic2DBackward0", "AdaptiveAvgPool3DBackward0"]
    + ["UpsampleBilinear2DAaBackward0", "UpsampleBicubic2DAaBackward0"]
}


# --- rearrangements: pixel and channel shuffles, fold and unfold ------------------------------------------------------
class PixelShuffle(Function):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r); its gradient is ``PixelUnshuffle`` and the reverse."""

    node_name = "PixelShuffleBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, r: int) -> Tensor:
        ctx.r = r
        *lead, c, h, w = x.shape
        out = x.reshape(*lead, c // (r * r), r, r, h, w)
        k = len(lead)
        out = out.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2).reshape(*lead, c // (r * r), h * r, w * r)
        return out.clone() if r == 1 else out

    @staticmethod
    def backward(ctx, g: Tensor):
        return PixelUnshuffle.apply(g, ctx.r), None


class PixelUnshuffle(Function):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), the inverse of ``PixelShuffle``."""

    node_name = "PixelUnshuffleBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, r: int) -> Tensor:
        ctx.r = r
        *lead, c, h, w = x.shape
        out = x.reshape(*lead, c, h // r, r, w // r, r)
        k = len(lead)
        out = out.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3).reshape(*lead, c * r * r, h // r, w // r)
        return out.clone() if r == 1 else out

    @staticmethod
    def backward(ctx, g: Tensor):
        return PixelShuffle.apply(g, ctx.r), None


class ChannelShuffle(Function):
    """(N, g * k, *) -> channel ``i * k + j`` moved to ``j * g + i``; its gradient shuffles back with ``k`` groups."""

    node_name = "ChannelShuffleBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, groups: int) -> Tensor:
        ctx.groups = groups
        n, c, *rest = x.shape
        out = x.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(x.shape)
        return out.clone() if groups in (1, c) else out

    @staticmethod
    def backward(ctx, g: Tensor):
        return ChannelShuffle.apply(g, g.shape[1] // ctx.groups), None


class Im2Col(LinearMap):
    """``unfold``: (N, C, H, W) -> (N, C * kh * kw, L) sliding blocks, under torch's node name."""

    node_name = "Im2ColBackward0"


class Col2Im(LinearMap):
    """``fold``: (N, C * kh * kw, L) blocks summed into (N, C, H, W), under torch's node name."""

    node_name = "Col2ImBackward0"


# --- normalization -------------------------------------------------------------------------------------------------
def _normalized(x: Tensor, axes, eps: float):
    """(x - mean) * rstd over ``axes``, with differentiable statistics (the double-backward path)."""
    mean = x.mean(axes, keepdim=True)
    centered = x - mean
    rstd = ((centered * centered).mean(axes, keepdim=True) + eps).rsqrt()
    return centered * rstd, rstd


def _norm_input_grad(gxhat: Tensor, xhat: Tensor, rstd, axes) -> Tensor:
    """The gradient through ``xhat = (x - mean(x)) * rstd(x)`` over ``axes``, given the gradient of ``xhat``."""
    return rstd * (gxhat - gxhat.mean(axes, keepdim=True) - xhat * (gxhat * xhat).mean(axes, keepdim=True))


class LayerNorm(Function):
    """``layer_norm`` in one node: a Numba kernel normalizes each row of the trailing ``normalized_shape``."""

    node_name = "NativeLayerNormBackward0"
    _listed_inputs = (1, 2)  # (weight and bias, listed in next_functions when absent, as torch does)
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, weight, bias, shape: tuple, n: int, eps: float) -> Tensor:
        out, mean, rstd = x._backend.layer_norm(
            x._data, None if weight is None else weight._data, None if bias is None else bias._data, eps, n
        )
        ctx.stats, ctx.shape, ctx.n, ctx.eps = (mean, rstd), shape, n, eps
        ctx.save_for_backward(x, weight)
        return _t(out)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        wanted = ctx.needs_input_grad[:3]
        n, shape, (mean, rstd) = ctx.n, ctx.shape, ctx.stats

        def kernel(g, x, weight):
            w = None if weight is None else weight._data
            gx, gw, gb = g._backend.layer_norm_backward(
                g._data, x._data, mean, rstd, w, shape, wanted[0], wanted[1] or wanted[2]
            )
            return [_t(a) if want else None for a, want in zip((gx, gw, gb), wanted)]

        def formula(g, x, weight):
            x2, g2 = x.reshape(-1, n), g.reshape(-1, n)
            xhat, rstd = _normalized(x2, -1, ctx.eps)
            gxhat = g2 * weight.reshape(n) if weight is not None else g2
            gx = _norm_input_grad(gxhat, xhat, rstd, -1).reshape(x.shape)
            return gx, (g2 * xhat).sum(0).reshape(shape), g2.sum(0).reshape(shape)

        grads = fused_grads("NativeLayerNormBackwardBackward0", kernel, formula, (g, x, weight), wanted)
        return *grads, None, None, None


class ResidualLayerNorm(Function):
    """``s = a + (v + c)`` and ``layer_norm(s)`` in one node that returns both: a transformer block's residual add
    and the norm after it, ``c`` being the bias of the linear layer that made ``v`` (or None). ``numbagrad.compile``
    puts it where a trace has a linear layer, the residual add and the norm in a row.

    The forward normalizes each block of rows right after summing it, while it is in cache; the backward adds the
    gradient ``s`` gets from its other uses (the residual stream's) into the norm's input gradient in place, where
    the unfused graph accumulates the two into a new array; one node replaces three. The values are the unfused
    ops' within float rounding: the norm is ``LayerNorm``'s kernel, the sum may be taken as ``(a + v) + c``."""

    node_name = "ResidualLayerNormBackward"
    _listed_inputs = (2, 3, 4)  # (c, weight and bias, listed in next_functions when absent)
    _trusted = True

    @staticmethod
    def forward(ctx, a: Tensor, v: Tensor, c, weight, bias, shape: tuple, n: int, eps: float):
        s, out, mean, rstd = a._backend.residual_layer_norm(
            a._data, v._data, *(None if t is None else t._data for t in (c, weight, bias)), eps, n
        )
        ctx.stats, ctx.shape, ctx.n, ctx.eps = (mean, rstd), shape, n, eps
        ctx.set_materialize_grads(False)
        total = _t(s)
        ctx.save_for_backward(total, weight)
        return total, _t(out)

    @staticmethod
    def backward(ctx, gs, gy):
        s, weight = ctx.saved_tensors
        need_a, need_v, need_c, need_w, need_b = ctx.needs_input_grad[:5]
        n, shape, (mean, rstd) = ctx.n, ctx.shape, ctx.stats
        if gy is None:  # the norm's output unused: the sum's gradient passes through the add
            gc = gs.reshape(-1, n).sum(0) if need_c and gs is not None else None
            return (gs if need_a else None), (gs if need_v else None), gc, None, None, None, None, None
        wanted = (need_a or need_v, need_w, need_b, need_c)

        def kernel(gy, gs, s, weight):
            w = None if weight is None else weight._data
            grads = gy._backend.layer_norm_backward(
                gy._data, s._data, mean, rstd, w, shape, wanted[0], wanted[1] or wanted[2],
                None if gs is None else gs._data, wanted[3],
            )  # fmt: skip
            grads = grads if wanted[3] else (*grads, None)
            return [_t(a) if want else None for a, want in zip(grads, wanted)]

        def formula(gy, gs, s, weight):
            s2, g2 = s.reshape(-1, n), gy.reshape(-1, n)
            xhat, rstd = _normalized(s2, -1, ctx.eps)
            gxhat = g2 * weight.reshape(n) if weight is not None else g2
            total = _norm_input_grad(gxhat, xhat, rstd, -1).reshape(s.shape)
            if gs is not None:
                total = total + gs
            gc = total.reshape(-1, n).sum(0)
            return total, (g2 * xhat).sum(0).reshape(shape), g2.sum(0).reshape(shape), gc

        inputs = (gy, gs, s, weight)
        total, gw, gb, gc = fused_grads("ResidualLayerNormBackwardBackward", kernel, formula, inputs, wanted)
        return (total if need_a else None), (total if need_v else None), gc, gw, gb, None, None, None


def _channel_shape(x: Tensor) -> tuple:
    """(1, C, 1, ...): a per-channel vector shaped to broadcast against (N, C, *)."""
    return (1, x.shape[1]) + (1,) * (x.dim() - 2)


class BatchNorm(Function):
    """``batch_norm`` in one node. Training: normalize by the batch statistics over every dim but the channel
    (and update the running statistics in place, the variance unbiased); eval: by the running statistics. The
    backend's ``batch_norm`` does it in one pass per job (statistics, update, normalize and affine), and its
    ``batch_norm_backward`` the three gradients: a training step's norm costs two primitives, not a dozen ops.

    ``counter`` (a module's ``num_batches_tracked``, or None) is counted up here too, and ``momentum=None`` then
    means the cumulative average, ``1 / counter``: every buffer update happens inside this one op, so a compiled
    module replays them all (an update in the module's own code would break its trace)."""

    node_name = "NativeBatchNormBackward0"
    _listed_inputs = (1, 2)  # (weight and bias, listed in next_functions when absent, as torch does)
    _unlisted_inputs = (3, 4)  # (the running statistics, which torch does not differentiate)
    _trusted = True  # (the kernel's gradients have their inputs' shapes and dtypes)
    _simple = True  # (no tensor op inside: apply's simple path)

    @staticmethod
    def forward(ctx, x: Tensor, weight, bias, running_mean, running_var, training: bool, momentum, eps: float, counter):
        if training and counter is not None:  # ``counter.add_(1)`` on the storage, without an in-place op's checks
            count = counter._data
            counter._backend.elementwise(ROWS["add"], [count, 1], (), count.dtype, out=count)
            counter._bump_version()
            if momentum is None:
                momentum = 1.0 / float(counter._host())
        if momentum is None:
            momentum = 0.0
        backend = x._backend
        out, mean, rstd, new_mean, new_var = backend.batch_norm(
            x._data, *(None if t is None else t._data for t in (weight, bias, running_mean, running_var)),
            training, float(momentum), float(eps),
        )  # fmt: skip
        for stat, new in ((running_mean, new_mean), (running_var, new_var)):
            if new is not None:  # a buffer update, written into the running statistic's storage (or made there)
                if new is not stat._data:
                    stat._backend.setitem(stat._data, (Ellipsis,), new)
                stat._bump_version()
        ctx.training, ctx.eps, ctx.axes, ctx.stats = training, eps, (0, *range(2, x.dim())), (mean, rstd)
        # In training the backward needs the batch's statistics only: the running ones are not saved (as torch's
        # native_batch_norm does not), so a second forward that updates them in place before this backward runs
        # (a GAN's discriminator on real and generated images) is no "modified by an inplace operation".
        stats = (None, None) if training else (running_mean, running_var)
        ctx.save_for_backward(x, weight, *stats)
        return _t(out)

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight, running_mean, running_var = ctx.saved_tensors
        wanted = ctx.needs_input_grad[:3]

        def kernel(g, x, weight):  # on the forward's mean and rstd
            mean, rstd = ctx.stats
            grads = g._backend.batch_norm_backward(g._data, x._data, mean, rstd, None if weight is None else
                                                   weight._data, ctx.training, *wanted)  # fmt: skip
            return tuple(None if d is None else _t(d) for d in grads)

        def formula(g, x, weight):  # the statistics recomputed differentiably
            axes, cshape = ctx.axes, _channel_shape(x)
            if ctx.training:
                xhat, rstd = _normalized(x, axes, ctx.eps)
            else:
                rstd = (running_var.reshape(cshape) + ctx.eps).rsqrt()
                xhat = (x - running_mean.reshape(cshape)) * rstd
            gxhat = g * weight.reshape(cshape) if weight is not None else g
            gx = None
            if wanted[0]:
                gx = _norm_input_grad(gxhat, xhat, rstd, axes) if ctx.training else gxhat * rstd
            gw = (g * xhat).sum(axes) if wanted[1] else None
            gb = g.sum(axes) if wanted[2] else None
            return gx, gw, gb

        gx, gw, gb = fused_grads("NativeBatchNormBackwardBackward0", kernel, formula, (g, x, weight), wanted)
        return gx, gw, gb, None, None, None, None, None, None


class GroupNorm(Function):
    """``group_norm`` in one node: the layer-norm kernel over each (sample, group), then a per-channel affine."""

    node_name = "NativeGroupNormBackward0"
    _listed_inputs = (1, 2)  # (weight and bias, listed in next_functions when absent, as torch does)

    @staticmethod
    def forward(ctx, x: Tensor, weight, bias, groups: int, eps: float) -> Tensor:
        backend = x._backend
        n = x.shape[0]
        size = x.numel() // (n * groups) if n * groups else 0
        xhat, mean, rstd = backend.layer_norm(x._data, None, None, eps, size)
        xhat = _t(xhat)
        cshape = _channel_shape(x)
        out = xhat * weight.reshape(cshape) if weight is not None else xhat
        if bias is not None:
            out = out + bias.reshape(cshape)
        ctx.groups, ctx.eps, ctx.stats, ctx.xhat = groups, eps, (mean, rstd), xhat
        ctx.save_for_backward(x, weight)
        return out if out is not xhat else xhat.clone()

    @staticmethod
    def backward(ctx, g: Tensor):
        x, weight = ctx.saved_tensors
        wanted = ctx.needs_input_grad[:3]
        n, groups = x.shape[0], ctx.groups
        cshape = _channel_shape(x)
        axes = (0, *range(2, x.dim()))

        def kernel(g, x, weight):  # the layer-norm kernel's backward per (sample, group), on the forward's stats
            gxhat = g * weight.reshape(cshape) if weight is not None else g
            gx = None
            if wanted[0]:
                mean, rstd = ctx.stats
                size = x.numel() // (n * groups)
                gx, _, _ = g._backend.layer_norm_backward(gxhat._data, x._data, mean, rstd, None, (size,), True, False)
                gx = _t(gx)
            gw = (g * ctx.xhat).sum(axes) if wanted[1] else None
            gb = g.sum(axes) if wanted[2] else None
            return gx, gw, gb

        def formula(g, x, weight):
            gxhat = g * weight.reshape(cshape) if weight is not None else g
            xhat_g, rstd = _normalized(x.reshape(n, groups, -1), -1, ctx.eps)
            gx = _norm_input_grad(gxhat.reshape(n, groups, -1), xhat_g, rstd, -1).reshape(x.shape)
            return gx, (g * xhat_g.reshape(x.shape)).sum(axes), g.sum(axes)

        gx, gw, gb = fused_grads("NativeGroupNormBackwardBackward0", kernel, formula, (g, x, weight), wanted)
        return gx, gw, gb, None, None


# --- embedding and padding -------------------------------------------------------------------------------------------
class Embedding(Function):
    """Rows of ``weight`` picked by integer ``indices``; the gradient adds each output row back into its row
    (none into ``padding_idx``; divided by the index's count in the batch with ``scale_grad_by_freq``)."""

    node_name = "EmbeddingBackward0"
    _trusted = True
    _simple = True  # (the forward is backend calls only: apply's simple path)

    @staticmethod
    def forward(ctx, weight: Tensor, input: Tensor, padding_idx, scale_grad_by_freq: bool) -> Tensor:
        """``input``: the integer index tensor on ``weight``'s device. Its range is checked here, in the op, so
        that a compiled replay checks each call's indices too."""
        backend = weight._backend
        indices = input._data
        shape = weight._data.shape  # (the storage's plain tuple: a Size costs a microsecond a read)
        input._backend.check_index(indices, 0, shape[0], None, _embedding_index_error)
        flat = backend.reshape(indices, (-1,))
        rows = backend.getitem(weight._data, (flat,))
        ctx.indices, ctx.num, ctx.dim = flat, shape[0], shape[1]
        ctx.padding_idx, ctx.scale = padding_idx, scale_grad_by_freq
        return _t(backend.reshape(rows, (*indices.shape, shape[1])))

    @staticmethod
    def backward(ctx, g: Tensor):
        flat, num, dim = ctx.indices, ctx.num, ctx.dim
        padding_idx, scale = ctx.padding_idx, ctx.scale

        def factor(b, dtype):
            """Per looked-up row: 0 for ``padding_idx``, 1 / the index's count with ``scale_grad_by_freq``
            (None: all ones), from backend ops on the indices' device."""
            result = None
            if scale:
                counts = b.index_add_zeros((num,), dtype, (flat,), b.full((flat.shape[0],), 1, dtype))
                result = b.elementwise(ROWS["reciprocal"], [b.getitem(counts, (flat,))], (), dtype)
            if padding_idx is not None:
                keep = b.elementwise(ROWS["ne"], [flat, padding_idx], (), flat.dtype, out_dtype=dtype)
                result = keep if result is None else b.elementwise(_mul_row(), [result, keep], (), dtype)
            return result

        def weighted(b, rows):
            f = factor(b, rows.dtype)
            return rows if f is None else b.elementwise(_mul_row(), [rows, b.reshape(f, (-1, 1))], (), rows.dtype)

        def scatter(gd):
            b = backend_for(gd)
            rows = weighted(b, b.reshape(b.ascontiguous(gd), (flat.shape[0], dim)))
            return b.index_add_zeros((num, dim), rows.dtype, (flat,), rows)

        def gather(gw):
            b = backend_for(gw)
            return b.reshape(weighted(b, b.getitem(gw, (flat,))), g.shape)

        return linear_map(g, scatter, gather), None, None, None


def _embedding_index_error(bad: int) -> IndexError:
    return IndexError("index out of range in self")


class SparseEmbedding(Embedding):
    """``Embedding`` whose weight gradient is sparse, as torch's ``sparse=True``: one stored row per looked-up
    index (uncoalesced, ``padding_idx``'s left out), so an optimizer touches only the rows that were used."""

    @staticmethod
    def backward(ctx, g: Tensor):
        if ctx.scale:
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        b = g._backend
        flat = b.to_host(ctx.indices)  # (the sparse gradient's index array is built on the host)
        rows = g.reshape(flat.shape[0], ctx.dim)
        keep = slice(None) if ctx.padding_idx is None else np.flatnonzero(flat != ctx.padding_idx)
        indices = _t(b.from_host(np.ascontiguousarray(flat[keep].reshape(1, -1))))
        if ctx.padding_idx is not None:
            rows = rows.index_select(0, _t(b.from_host(keep.astype(np.int64))))
        return SparseCOOTensor(indices, rows, (ctx.num, ctx.dim)), None, None, None


def _mul_row():
    return ROWS["mul"]


class ConstantPad(Function):
    """``pad(mode='constant')``: a bigger tensor filled with ``value`` holding the input (negative pads crop).
    Its gradient is the same op with the pads negated and zero fill."""

    node_name = "ConstantPadNdBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, pads: tuple, value) -> Tensor:
        backend = x._backend
        shape, src, dst = pad_geometry(x.shape, pads)
        out = backend.full(shape, value, x._data.dtype)
        if all(s.stop > s.start for s in src):
            backend.setitem(out, dst, backend.getitem(x._data, src))
        ctx.pads = pads
        return _t(out)

    @staticmethod
    def backward(ctx, g: Tensor):
        return ConstantPad.apply(g, tuple(-p for p in ctx.pads), 0), None, None


def pad_geometry(shape: tuple, pads: tuple) -> tuple:
    """(padded shape, source slices, destination slices) for torch's pad list (last dim first, (left, right))."""
    shape = list(shape)
    src = [slice(0, s) for s in shape]
    dst = [slice(0, s) for s in shape]
    for k in range(len(pads) // 2):
        d = len(shape) - 1 - k
        left, right = pads[2 * k], pads[2 * k + 1]
        size = shape[d]
        src[d] = slice(max(-left, 0), max(size - max(-right, 0), max(-left, 0)))
        dst[d] = slice(max(left, 0), max(left, 0) + src[d].stop - src[d].start)
        shape[d] = size + left + right
    return tuple(shape), tuple(src), tuple(dst)


class _IndexPadMaps:
    """``reflect``/``replicate``/``circular`` padding as a gather along each padded dim (``index`` a 1-d int64
    array of source positions per dim), and its adjoint, the scatter-add of the same indices."""

    def __init__(self, in_shape: tuple, indices: tuple) -> None:
        self.in_shape, self.indices = tuple(in_shape), indices  # indices: ((dim, positions), ...)

    def forward(self, x):
        b = backend_for(x)
        for dim, index in self.indices:
            x = b.index_select(x, dim, index)
        return x

    def adjoint(self, g):
        b = backend_for(g)
        shape = list(g.shape)
        for dim, index in reversed(self.indices):
            shape[dim] = self.in_shape[dim]
            g = b.index_add(b.zeros(tuple(shape), g.dtype), dim, index, b.ascontiguous(g))
        return g


class IndexPad(Function):
    """``pad`` in mode ``reflect``, ``replicate`` or ``circular``: one gather node; its gradient sums each output
    element back into the input element it copies (a ``LinearMap``, so higher derivatives exist)."""

    node_name = "IndexPadBackward0"
    _trusted = True

    @staticmethod
    def forward(ctx, x: Tensor, maps: _IndexPadMaps) -> Tensor:
        ctx.maps = maps
        return _t(maps.forward(x._data))

    @staticmethod
    def backward(ctx, g: Tensor):
        maps = ctx.maps
        return linear_map(g, maps.adjoint, maps.forward), None


def _pad_node(mode: str, k: int) -> type:
    """``IndexPad`` under torch's node name for ``mode`` over ``k`` dims (circular padding is a copy into slices
    there, ``CopySlices``)."""
    name = {"reflect": f"ReflectionPad{k}DBackward0", "replicate": f"ReplicationPad{k}DBackward0"}.get(
        mode, "CopySlices"
    )
    return type(f"IndexPad{mode.title()}{k}d", (IndexPad,), {"node_name": name, "__doc__": IndexPad.__doc__})


PAD_NODES = {(mode, k): _pad_node(mode, k) for mode in ("reflect", "replicate", "circular") for k in (1, 2, 3)}


# --- small composites with their own node --------------------------------------------------------------------------
class Glu(Function):
    """``a * sigmoid(b)`` for the two halves of ``dim``."""

    node_name = "GluBackward0"

    @staticmethod
    def forward(ctx, x: Tensor, dim: int) -> Tensor:
        a, b = x.chunk(2, dim)
        ctx.dim = dim
        ctx.save_for_backward(x)
        return a * b.sigmoid()

    @staticmethod
    def backward(ctx, g: Tensor):
        (x,) = ctx.saved_tensors
        a, b = x.chunk(2, ctx.dim)
        s = b.sigmoid()
        ga = g * s
        return cat((ga, ga * a * (1 - s)), ctx.dim), None


class PNorm(Function):
    """``norm(x, p, dim, keepdim)`` as torch's ``NormBackward1`` (what ``pairwise_distance`` returns)."""

    node_name = "NormBackward1"

    @staticmethod
    def forward(ctx, x: Tensor, p: float, dim: int, keepdim: bool) -> Tensor:
        a = x.abs()
        if p == math.inf:
            out = a.amax(dim, keepdim=True)
        elif p == -math.inf:
            out = a.amin(dim, keepdim=True)
        elif p == 0:
            out = (a != 0).to(x.dtype).sum(dim, keepdim=True)
        elif p == 1:
            out = a.sum(dim, keepdim=True)
        elif p == 2:
            out = (a * a).sum(dim, keepdim=True).sqrt()
        else:
            out = (a**p).sum(dim, keepdim=True) ** (1.0 / p)
        ctx.p, ctx.dim, ctx.keepdim = p, dim, keepdim
        if not keepdim:
            out = out.squeeze(dim)
        ctx.save_for_backward(x, out)  # the output itself: under create_graph the norm is differentiable
        return out

    @staticmethod
    def backward(ctx, g: Tensor):
        x, norm = ctx.saved_tensors
        p = ctx.p
        if not ctx.keepdim:
            g, norm = g.unsqueeze(ctx.dim), norm.unsqueeze(ctx.dim)
        if p == 0:
            grad = x * 0
        elif p == 1:
            grad = x.sign() * g
        elif p == 2:
            grad = x * _where(norm == 0, 0.0, g / norm)
        elif math.isinf(p):
            hit = (x.abs() == norm).to(x.dtype)
            grad = x.sign() * hit * (g / hit.sum(ctx.dim, keepdim=True))
        else:
            a = x.abs()
            grad = x.sign() * a ** (p - 1) * _where(norm == 0, 0.0, g / norm ** (p - 1))
        return grad, None, None, None
