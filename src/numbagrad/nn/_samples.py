"""The samples of ``nn.functional``: calls written once for numbagrad and torch, by function name.

Each function's calls are its part of the single sample registry (``numbagrad._samples``): the generated
tests (``tests/samples.py``) compare each with torch (values, dtypes, gradients, node names, in float64 and
float32), run gradcheck and gradgradcheck on it. Each call takes ``nn.functional`` (numbagrad's or torch's) and
its tensors. The ``second_*`` calls have two differentiable inputs, so that gradgradcheck differentiates each
input's gradient by the other (mixed second derivatives). Kept apart from ``nn/functional.py`` so the functions
read without them; nothing imports this module but the tests.
"""

from __future__ import annotations

from .._samples import Call, T

NF = "nn.functional"  # the namespace each call receives
X = T(3, 4, domain=(-3.0, 3.0))
IMG = T(2, 3, 6, 7)

#: ``nn.functional`` name -> its calls
CALLS: dict[str, tuple[Call, ...]] = {
    # activations
    "relu6": (
        Call("relu6", lambda F, x: F.relu6(x * 4), X, namespace=NF),
        Call("relu6_inplace", lambda F, x: F.relu6(x * 4, inplace=True), X, namespace=NF),
    ),
    "hardtanh": (Call("hardtanh", lambda F, x: F.hardtanh(x, -0.5, 1.5), X, namespace=NF),),
    "leaky_relu": (
        Call("leaky_relu", lambda F, x: F.leaky_relu(x, 0.2), X, namespace=NF),
        Call("leaky_relu_default", lambda F, x: F.leaky_relu(x), X, namespace=NF),
        Call("leaky_relu_inplace", lambda F, x: F.leaky_relu(x * 1, 0.3, inplace=True), X, namespace=NF),
    ),
    "elu": (Call("elu", lambda F, x: F.elu(x, 0.7), X, namespace=NF),),
    "selu": (
        Call("selu", lambda F, x: F.selu(x), X, namespace=NF),
        Call("selu_inplace", lambda F, x: F.selu(x * 1, inplace=True), X, namespace=NF),
    ),
    "gelu": (
        Call("gelu", lambda F, x: F.gelu(x), X, namespace=NF),
        Call("gelu_tanh", lambda F, x: F.gelu(x, approximate="tanh"), X, namespace=NF),
    ),
    "silu": (
        Call("silu", lambda F, x: F.silu(x), X, namespace=NF),
        Call("silu_inplace", lambda F, x: F.silu(x * 1, inplace=True), X, namespace=NF),
    ),
    "mish": (
        Call("mish", lambda F, x: F.mish(x), X, namespace=NF),
        Call("mish_inplace", lambda F, x: F.mish(x * 1, inplace=True), X, namespace=NF),
    ),
    "softplus": (
        Call("softplus", lambda F, x: F.softplus(x), X, namespace=NF),
        Call("softplus_beta_threshold", lambda F, x: F.softplus(x, beta=2.0, threshold=3.0), X, namespace=NF),
    ),
    "softsign": (Call("softsign", lambda F, x: F.softsign(x), X, namespace=NF),),
    "hardswish": (
        Call("hardswish", lambda F, x: F.hardswish(x * 2), X, namespace=NF),
        Call("hardswish_inplace", lambda F, x: F.hardswish(x * 2, inplace=True), X, namespace=NF),
    ),
    "hardsigmoid": (
        Call("hardsigmoid", lambda F, x: F.hardsigmoid(x * 2), X, namespace=NF),
        Call("hardsigmoid_inplace", lambda F, x: F.hardsigmoid(x * 2, inplace=True), X, namespace=NF),
    ),
    "logsigmoid": (Call("logsigmoid", lambda F, x: F.logsigmoid(x * 10), X, namespace=NF),),
    "tanhshrink": (Call("tanhshrink", lambda F, x: F.tanhshrink(x), X, namespace=NF),),
    "glu": (
        Call("glu", lambda F, x: F.glu(x), X, namespace=NF),
        Call("glu_dim0", lambda F, x: F.glu(x, 0), T(4, 3), namespace=NF),
        Call("second_glu", lambda F, x, w: F.glu(x * w.sum(), 1), T(2, 2, 4, 5), T(2, 3), namespace=NF),
    ),
    "softmin": (Call("softmin", lambda F, x: F.softmin(x, 1), X, namespace=NF),),
    "celu": (
        # torch's celu backward takes 1 / alpha in float32 (derivatives.yaml: 1.0 / alpha.toFloat()), a relative 1e-8
        Call("celu", lambda F, x: F.celu(x, 0.7), X, rtol=1e-7, namespace=NF),
        Call("celu_inplace", lambda F, x: F.celu(x * 1, 1.5, inplace=True), X, rtol=1e-7, namespace=NF),
    ),
    "hardshrink": (Call("hardshrink", lambda F, x: F.hardshrink(x), X, namespace=NF),),
    "softshrink": (Call("softshrink", lambda F, x: F.softshrink(x, 0.8), X, namespace=NF),),
    "threshold": (Call("threshold", lambda F, x: F.threshold(x, 0.5, -2.0), X, namespace=NF),),
    "threshold_": (Call("threshold_", lambda F, x: F.threshold_(x * 1, 0.5, -2.0), X, namespace=NF),),
    "rrelu": (
        Call("rrelu_eval", lambda F, x: F.rrelu(x, 0.1, 0.3), X, namespace=NF),
        Call("rrelu_eval_inplace", lambda F, x: F.rrelu(x * 1, inplace=True), X, namespace=NF),
    ),
    "prelu": (
        Call("prelu_one_weight", lambda F, x, w: F.prelu(x, w), X, T(1), namespace=NF),
        Call("prelu_per_channel", lambda F, x, w: F.prelu(x, w), IMG, T(3), namespace=NF),
        Call("prelu_1d_input", lambda F, x, w: F.prelu(x, w), T(5), T(1), namespace=NF),
        Call("second_prelu", lambda F, x, w: F.prelu(x, w) * x, T(1, 2, 2, 5), T(2), namespace=NF),
    ),
    # in place (on a non-leaf)
    "leaky_relu_": (Call("leaky_relu_", lambda F, x: F.leaky_relu_(x * 1, 0.3), X, namespace=NF),),
    "elu_": (Call("elu_", lambda F, x: F.elu_(x * 1, 0.5), X, namespace=NF),),
    "hardtanh_": (Call("hardtanh_", lambda F, x: F.hardtanh_(x * 1, -1.0, 0.5), X, namespace=NF),),
    # distances and normalization of vectors
    "normalize": (
        Call("normalize", lambda F, x: F.normalize(x), X, namespace=NF),
        Call("normalize_p1_dim0", lambda F, x: F.normalize(x, p=1.0, dim=0), X, namespace=NF),
    ),
    "cosine_similarity": (
        Call("cosine_similarity", lambda F, a, b: F.cosine_similarity(a, b), X, X, namespace=NF),
        Call(
            "cosine_similarity_broadcast",
            lambda F, a, b: F.cosine_similarity(a, b, dim=-1),
            T(3, 4),
            T(4),
            namespace=NF,
        ),
    ),
    "pairwise_distance": (
        Call("pairwise_distance", lambda F, a, b: F.pairwise_distance(a, b), X, X, namespace=NF),
        Call(
            "pairwise_distance_p1_keepdim",
            lambda F, a, b: F.pairwise_distance(a, b, 1.0, keepdim=True),
            X,
            X,
            namespace=NF,
        ),
        Call("pairwise_distance_p3", lambda F, a, b: F.pairwise_distance(a, b, 3.0), X, X, namespace=NF),
        Call("pairwise_distance_1d", lambda F, a, b: F.pairwise_distance(a, b), T(5), T(5), namespace=NF),
        Call("second_pairwise_distance", lambda F, x, w: F.pairwise_distance(x, w, p=3.0), T(4, 5), T(5), namespace=NF),
    ),
    # padding, embedding
    "pad": (
        Call("pad", lambda F, x: F.pad(x, (1, 2)), X, namespace=NF),
        Call("pad_value_2d", lambda F, x: F.pad(x, (1, 0, 2, 1), value=-1.5), IMG, namespace=NF),
        Call("pad_negative_crops", lambda F, x: F.pad(x, (-1, 2, 1, -1)), IMG, namespace=NF),
        Call(
            "second_pad",
            lambda F, x, w: F.pad(x * w.sum(), (1, -1, 2, 0), value=0.5) ** 2,
            T(2, 2, 4, 5),
            T(2, 3),
            namespace=NF,
        ),
    ),
    "embedding": (
        Call("embedding", lambda F, w, i: F.embedding(i, w), T(5, 3), T(2, 4, dtype="int64", high=5), namespace=NF),
        Call(
            "embedding_padding_idx",
            lambda F, w, i: F.embedding(i, w, padding_idx=1),
            T(5, 3),
            T(2, 4, dtype="int64", high=5),
            true_gradient=False,
            namespace=NF,
        ),
        Call(
            "embedding_scale_grad_by_freq",
            lambda F, w, i: F.embedding(i, w, scale_grad_by_freq=True),
            T(5, 3),
            T(2, 4, dtype="int64", high=3),
            true_gradient=False,
            namespace=NF,
        ),
        Call(
            "second_embedding",
            lambda F, x, w, i: F.embedding(i, w) * x,
            T(3, 3),
            T(6, 3),
            T(dtype="int64", values=(1, 0, 1)),
            namespace=NF,
        ),
    ),
    # normalization layers
    "layer_norm": (
        Call("layer_norm", lambda F, x: F.layer_norm(x, (4,)), X, namespace=NF),
        Call(
            "layer_norm_affine", lambda F, x, w, b: F.layer_norm(x, (6, 7), w, b), IMG, T(6, 7), T(6, 7), namespace=NF
        ),
        Call("layer_norm_weight_only", lambda F, x, w: F.layer_norm(x, (4,), w, eps=1e-3), X, T(4), namespace=NF),
        Call(
            "second_layer_norm", lambda F, x, w: F.layer_norm(x, (5,), w[:5], w[5:]), T(1, 2, 2, 5), T(10), namespace=NF
        ),
    ),
    "batch_norm": (
        Call(
            "batch_norm_train",
            lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
            IMG,
            T(3),
            T(3),
            namespace=NF,
        ),
        Call("batch_norm_train_1d", lambda F, x: F.batch_norm(x, None, None, training=True), T(5, 3), namespace=NF),
        Call(
            "batch_norm_eval",
            lambda F, x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
            IMG,
            T(3, grad=False),
            T(3, domain=(0.5, 2.0), grad=False),
            T(3),
            T(3),
            namespace=NF,
        ),
        Call(
            "second_batch_norm",
            lambda F, x, w: F.batch_norm(x, None, None, w[:2], w[2:], training=True),
            T(2, 2, 4, 5),
            T(4),
            namespace=NF,
        ),
    ),
    "group_norm": (
        Call("group_norm", lambda F, x: F.group_norm(x, 3), IMG, namespace=NF),
        Call("group_norm_affine", lambda F, x, w, b: F.group_norm(x, 1, w, b), IMG, T(3), T(3), namespace=NF),
        Call("group_norm_3d", lambda F, x, w, b: F.group_norm(x, 2, w, b), T(3, 4, 5), T(4), T(4), namespace=NF),
        Call("second_group_norm", lambda F, x, w: F.group_norm(x, 2, w[:2], w[2:]), T(2, 2, 4, 5), T(4), namespace=NF),
    ),
    # convolution and pooling
    "conv2d": (
        Call("conv2d", lambda F, x, w, b: F.conv2d(x, w, b), IMG, T(4, 3, 3, 2), T(4), namespace=NF),
        Call(
            "conv2d_stride_padding_dilation",
            lambda F, x, w: F.conv2d(x, w, None, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
            IMG,
            T(2, 3, 2, 3),
            namespace=NF,
        ),
        Call("conv2d_groups", lambda F, x, w, b: F.conv2d(x, w, b, groups=3), IMG, T(6, 1, 3, 3), T(6), namespace=NF),
        Call("conv2d_same", lambda F, x, w: F.conv2d(x, w, padding="same"), IMG, T(2, 3, 2, 4), namespace=NF),
        Call(
            "conv2d_same_dilated",
            lambda F, x, w: F.conv2d(x, w, padding="same", dilation=2),
            IMG,
            T(2, 3, 3, 2),
            namespace=NF,
        ),
        Call("conv2d_valid", lambda F, x, w: F.conv2d(x, w, padding="valid"), IMG, T(2, 3, 2, 2), namespace=NF),
        Call("conv2d_unbatched", lambda F, x, w: F.conv2d(x, w, stride=2), T(3, 6, 7), T(2, 3, 3, 3), namespace=NF),
        # mixed second derivatives (each input's gradient differentiated by the other input): the generated
        # tests/test_first_vs_second_order.py runs gradgradcheck on every case here
        Call(
            "second_conv2d",
            lambda F, x, w: F.conv2d(x, w, stride=2, padding=1),
            T(2, 2, 4, 5),
            T(3, 2, 3, 3),
            namespace=NF,
        ),
        Call(
            "second_conv2d_groups",
            lambda F, x, w: F.conv2d(x, w.reshape(4, 1, 3, 3)[:, :, :2], groups=2, dilation=(1, 2)),
            T(2, 2, 4, 5),
            T(4, 9),
            namespace=NF,
        ),
    ),
    "conv1d": (
        Call("conv1d", lambda F, x, w, b: F.conv1d(x, w, b, padding=1), T(2, 3, 9), T(4, 3, 3), T(4), namespace=NF),
        Call(
            "conv1d_stride_dilation_groups",
            lambda F, x, w: F.conv1d(x, w, stride=2, dilation=2, groups=3),
            T(2, 3, 11),
            T(6, 1, 2),
            namespace=NF,
        ),
        Call(
            "conv1d_same_unbatched", lambda F, x, w: F.conv1d(x, w, padding="same"), T(3, 8), T(2, 3, 4), namespace=NF
        ),
    ),
    "max_pool2d": (
        Call("max_pool2d", lambda F, x: F.max_pool2d(x, 2), IMG, namespace=NF),
        Call("max_pool2d_stride_padding", lambda F, x: F.max_pool2d(x, 3, 2, 1), IMG, namespace=NF),
        Call(
            "max_pool2d_dilation_ceil",
            lambda F, x: F.max_pool2d(x, 2, 2, dilation=2, ceil_mode=True),
            IMG,
            namespace=NF,
        ),
        Call("max_pool2d_unbatched_rect", lambda F, x: F.max_pool2d(x, (2, 3), (1, 2)), T(3, 6, 7), namespace=NF),
        Call("max_pool2d_indices", lambda F, x: F.max_pool2d(x, 2, return_indices=True), IMG, namespace=NF),
        Call(
            "second_max_pool2d", lambda F, x, w: F.max_pool2d(x * w.sum(), 2, 1), T(2, 2, 4, 5), T(2, 3), namespace=NF
        ),
    ),
    "avg_pool2d": (
        Call("avg_pool2d", lambda F, x: F.avg_pool2d(x, 2), IMG, namespace=NF),
        Call("avg_pool2d_padding", lambda F, x: F.avg_pool2d(x, 3, 2, 1), IMG, namespace=NF),
        Call(
            "avg_pool2d_no_pad_count_ceil",
            lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            IMG,
            namespace=NF,
        ),
        Call("avg_pool2d_divisor", lambda F, x: F.avg_pool2d(x, (2, 3), divisor_override=4), IMG, namespace=NF),
        Call(
            "second_avg_pool2d",
            lambda F, x, w: F.avg_pool2d(x * w.sum(), 3, 2, 1, count_include_pad=False) ** 2,
            T(2, 2, 4, 5),
            T(2, 3),
            namespace=NF,
        ),
    ),
    "adaptive_avg_pool2d": (
        Call("adaptive_avg_pool2d", lambda F, x: F.adaptive_avg_pool2d(x, (4, 3)), IMG, namespace=NF),
        Call("adaptive_avg_pool2d_grow", lambda F, x: F.adaptive_avg_pool2d(x, 8), T(2, 3, 5, 4), namespace=NF),
        Call("adaptive_avg_pool2d_none", lambda F, x: F.adaptive_avg_pool2d(x, (None, 2)), IMG, namespace=NF),
        Call("adaptive_avg_pool2d_1x1", lambda F, x: F.adaptive_avg_pool2d(x, 1), IMG, namespace=NF),
        Call(
            "second_adaptive_avg_pool2d",
            lambda F, x, w: F.adaptive_avg_pool2d(x * w.sum(), (2, 3)) ** 2,
            T(2, 2, 4, 5),
            T(2, 3),
            namespace=NF,
        ),
    ),
    # losses
    "l1_loss": (
        Call("l1_loss", lambda F, x, t: F.l1_loss(x, t), X, T(3, 4, grad=False), namespace=NF),
        Call("l1_loss_sum", lambda F, x, t: F.l1_loss(x, t, reduction="sum"), X, T(3, 4), namespace=NF),
        Call("l1_loss_none", lambda F, x, t: F.l1_loss(x, t, reduction="none"), X, T(3, 4), namespace=NF),
        Call(
            "l1_loss_weight",
            lambda F, x, t, w: F.l1_loss(x, t, weight=w),
            X,
            T(3, 4, grad=False),
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
    ),
    "mse_loss": (
        Call(
            "mse_loss_weight",
            lambda F, x, t, w: F.mse_loss(x, t, weight=w),
            X,
            T(3, 4, grad=False),
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
    ),
    "smooth_l1_loss": (
        Call("smooth_l1_loss", lambda F, x, t: F.smooth_l1_loss(x, t), X, T(3, 4), namespace=NF),
        Call(
            "smooth_l1_loss_beta",
            lambda F, x, t: F.smooth_l1_loss(x, t, reduction="sum", beta=0.5),
            X,
            T(3, 4, grad=False),
            namespace=NF,
        ),
        Call(
            "smooth_l1_loss_beta0",
            lambda F, x, t: F.smooth_l1_loss(x, t, beta=0.0),
            X,
            T(3, 4, grad=False),
            namespace=NF,
        ),
        Call("second_smooth_l1_loss", lambda F, x, t: F.smooth_l1_loss(x, t, beta=0.5), T(18), T(18), namespace=NF),
    ),
    "huber_loss": (
        Call("huber_loss", lambda F, x, t: F.huber_loss(x, t), X, T(3, 4), namespace=NF),
        Call(
            "huber_loss_delta_none",
            lambda F, x, t: F.huber_loss(x, t, "none", 0.5),
            X,
            T(3, 4, grad=False),
            namespace=NF,
        ),
        Call(
            "huber_loss_weight",
            lambda F, x, t, w: F.huber_loss(x, t, weight=w),
            X,
            T(3, 4, grad=False),
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
    ),
    "nll_loss": (
        Call("nll_loss", lambda F, x, t: F.nll_loss(x, t), X, T(3, dtype="int64", high=4), namespace=NF),
        Call(
            "nll_loss_weight_sum",
            lambda F, x, t, w: F.nll_loss(x, t, w, reduction="sum"),
            X,
            T(3, dtype="int64", high=4),
            T(4, grad=False),
            namespace=NF,
        ),
        Call(
            "nll_loss_weight_ignore_mean",
            lambda F, x, w, i: F.nll_loss(x, i, w, ignore_index=3),
            X,
            T(4, domain=(0.5, 2.0), grad=False),
            T(dtype="int64", values=(1, 3, 1)),
            namespace=NF,
        ),
        Call(
            "nll_loss_none",
            lambda F, x, t: F.nll_loss(x, t, reduction="none"),
            X,
            T(3, dtype="int64", high=4),
            namespace=NF,
        ),
        Call("nll_loss_1d", lambda F, x, i: F.nll_loss(x, i), T(4), T(dtype="int64", values=2), namespace=NF),
        Call("nll_loss_4d", lambda F, x, t: F.nll_loss(x, t), IMG, T(2, 6, 7, dtype="int64", high=3), namespace=NF),
        Call(
            "nll_loss_3d_none",
            lambda F, x, t: F.nll_loss(x, t, reduction="none"),
            T(2, 3, 5),
            T(2, 5, dtype="int64", high=3),
            namespace=NF,
        ),
        Call(
            "second_nll_loss",
            lambda F, x, w, i: F.nll_loss((x * w).log_softmax(1), i),
            T(4, 5),
            T(5),
            T(dtype="int64", values=(0, 4, 2, 1)),
            namespace=NF,
        ),
    ),
    "cross_entropy": (
        Call("cross_entropy", lambda F, x, t: F.cross_entropy(x, t), X, T(3, dtype="int64", high=4), namespace=NF),
        Call(
            "cross_entropy_sum",
            lambda F, x, t: F.cross_entropy(x, t, reduction="sum"),
            X,
            T(3, dtype="int64", high=4),
            namespace=NF,
        ),
        Call(
            "cross_entropy_none",
            lambda F, x, t: F.cross_entropy(x, t, reduction="none"),
            X,
            T(3, dtype="int64", high=4),
            namespace=NF,
        ),
        Call(
            "cross_entropy_weight_ignore",
            lambda F, x, w, i: F.cross_entropy(x, i, w, ignore_index=0),
            X,
            T(4, domain=(0.5, 2.0), grad=False),
            T(dtype="int64", values=(1, 0, 2)),
            namespace=NF,
        ),
        Call(
            "cross_entropy_smoothing",
            lambda F, x, t: F.cross_entropy(x, t, label_smoothing=0.1),
            X,
            T(3, dtype="int64", high=4),
            namespace=NF,
        ),
        Call(
            "cross_entropy_smoothing_weight_ignore",
            lambda F, x, w, i: F.cross_entropy(x, i, w, ignore_index=3, label_smoothing=0.3),
            X,
            T(4, domain=(0.5, 2.0), grad=False),
            T(dtype="int64", values=(1, 3, 2)),
            namespace=NF,
        ),
        Call(
            "cross_entropy_smoothing_none",
            lambda F, x, t: F.cross_entropy(x, t, reduction="none", label_smoothing=0.2),
            X,
            T(3, dtype="int64", high=4),
            namespace=NF,
        ),
        Call(
            "cross_entropy_smoothing_sum_weight",
            lambda F, x, t, w: F.cross_entropy(x, t, w, reduction="sum", label_smoothing=0.2),
            X,
            T(3, dtype="int64", high=4),
            T(4, domain=(0.5, 2.0), grad=False),
            namespace=NF,
        ),
        Call("cross_entropy_1d", lambda F, x, i: F.cross_entropy(x, i), T(4), T(dtype="int64", values=1), namespace=NF),
        Call(
            "cross_entropy_4d",
            lambda F, x, t: F.cross_entropy(x, t),
            IMG,
            T(2, 6, 7, dtype="int64", high=3),
            namespace=NF,
        ),
        Call(
            "cross_entropy_3d_none",
            lambda F, x, t: F.cross_entropy(x, t, reduction="none"),
            T(2, 3, 5),
            T(2, 5, dtype="int64", high=3),
            namespace=NF,
        ),
        Call(
            "cross_entropy_4d_weight_ignore_smoothing_sum",
            lambda F, x, w, t: F.cross_entropy(x, t, w, ignore_index=1, label_smoothing=0.2, reduction="sum"),
            IMG,
            T(3, domain=(0.5, 2.0), grad=False),
            T(2, 6, 7, dtype="int64", high=3),
            namespace=NF,
        ),
        Call(
            "cross_entropy_3d_weight_smoothing_none",
            lambda F, x, w, t: F.cross_entropy(x, t, w, label_smoothing=0.1, reduction="none"),
            T(2, 4, 5),
            T(4, domain=(0.5, 2.0), grad=False),
            T(2, 5, dtype="int64", high=4),
            namespace=NF,
        ),
        Call(
            "cross_entropy_3d_transposed_ignore",
            lambda F, x, t: F.cross_entropy(x.transpose(1, 2), t, ignore_index=2),
            T(2, 5, 3),
            T(2, 5, dtype="int64", high=3),
            namespace=NF,
        ),
        Call(
            "cross_entropy_probs",
            lambda F, x, p: F.cross_entropy(x, p),
            X,
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
        Call(
            "cross_entropy_probs_sum",
            lambda F, x, p: F.cross_entropy(x, p, reduction="sum"),
            X,
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
        Call(
            "cross_entropy_probs_weight_smoothing_none",
            lambda F, x, p, w: F.cross_entropy(x, p, w, reduction="none", label_smoothing=0.1),
            X,
            T(3, 4, domain=(0.0, 1.0), grad=False),
            T(4, domain=(0.5, 2.0), grad=False),
            namespace=NF,
        ),
        Call(
            "second_cross_entropy",
            lambda F, x, w, i: F.cross_entropy(x * w, i, label_smoothing=0.2),
            T(4, 5),
            T(5),
            T(dtype="int64", values=(0, 4, 2, 1)),
            namespace=NF,
        ),
    ),
    "binary_cross_entropy": (
        Call(
            "binary_cross_entropy",
            lambda F, x, t: F.binary_cross_entropy(x, t),
            T(3, 4, domain=(0.05, 0.95)),
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
        Call(
            "binary_cross_entropy_weight_sum",
            lambda F, x, t, w: F.binary_cross_entropy(x, t, w, reduction="sum"),
            T(3, 4, domain=(0.05, 0.95)),
            T(3, 4, domain=(0.0, 1.0)),
            T(4, domain=(0.5, 2.0), grad=False),
            namespace=NF,
        ),
    ),
    "binary_cross_entropy_with_logits": (
        Call(
            "bce_with_logits",
            lambda F, x, t: F.binary_cross_entropy_with_logits(x, t),
            X,
            T(3, 4, domain=(0.0, 1.0)),
            namespace=NF,
        ),
        Call(
            "bce_with_logits_weight_pos_weight",
            lambda F, x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw, reduction="none"),
            X,
            T(3, 4, domain=(0.0, 1.0)),
            T(3, 1, domain=(0.5, 2.0), grad=False),
            T(4, domain=(0.5, 3.0), grad=False),
            namespace=NF,
        ),
        Call(
            "second_bce_with_logits",
            lambda F, x, t: F.binary_cross_entropy_with_logits(x, t.sigmoid()),
            T(18),
            T(18),
            namespace=NF,
        ),
    ),
    "kl_div": (
        Call(
            "kl_div_batchmean",
            lambda F, x, t: F.kl_div(x, t, reduction="batchmean"),
            X,
            T(3, 4, domain=(0.0, 1.0), grad=False),
            namespace=NF,
        ),
        Call(
            "kl_div_sum", lambda F, x, t: F.kl_div(x, t, reduction="sum"), X, T(3, 4, domain=(0.1, 1.0)), namespace=NF
        ),
        Call(
            "kl_div_none_log_target",
            lambda F, x, t: F.kl_div(x, t, reduction="none", log_target=True),
            X,
            T(3, 4),
            namespace=NF,
        ),
    ),
}
