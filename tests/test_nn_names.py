"""Every nn.functional function and nn module of the first nn request exists (and is what torch calls it)."""

import pytest

from numbagrad import nn
from numbagrad.nn import functional as F

FUNCTIONAL = """
relu6 leaky_relu elu selu gelu silu mish softplus softsign hardtanh hardswish hardsigmoid logsigmoid tanhshrink glu
softmin gumbel_softmax normalize cosine_similarity pairwise_distance dropout embedding one_hot pad layer_norm
batch_norm group_norm conv1d conv2d max_pool2d avg_pool2d adaptive_avg_pool2d l1_loss smooth_l1_loss huber_loss
nll_loss cross_entropy binary_cross_entropy binary_cross_entropy_with_logits kl_div mse_loss
leaky_relu_ elu_ selu_ hardtanh_ relu_ relu softmax log_softmax linear sigmoid tanh
scaled_dot_product_attention multi_head_attention_forward
conv3d conv_transpose1d conv_transpose2d conv_transpose3d interpolate upsample adaptive_avg_pool1d adaptive_avg_pool3d
pixel_shuffle pixel_unshuffle channel_shuffle native_channel_shuffle fold unfold instance_norm
max_pool1d max_pool3d avg_pool1d avg_pool3d adaptive_max_pool1d adaptive_max_pool2d
""".split()

MODULES = """
ParameterList ParameterDict Flatten Unflatten ReLU6 LeakyReLU ELU SELU GELU SiLU Mish Softplus Hardtanh Hardswish
Hardsigmoid LogSoftmax Dropout LayerNorm BatchNorm1d BatchNorm2d GroupNorm Embedding Conv1d Conv2d MaxPool2d AvgPool2d
AdaptiveAvgPool2d L1Loss SmoothL1Loss HuberLoss NLLLoss BCELoss BCEWithLogitsLoss KLDivLoss
MultiheadAttention Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer
Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d
ConstantPad3d ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d
CircularPad1d CircularPad2d CircularPad3d Upsample UpsamplingNearest2d UpsamplingBilinear2d
PixelShuffle PixelUnshuffle ChannelShuffle Fold Unfold InstanceNorm1d InstanceNorm2d InstanceNorm3d
MaxPool1d MaxPool3d AvgPool1d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool3d
AdaptiveMaxPool1d AdaptiveMaxPool2d
""".split()


@pytest.mark.parametrize("name", FUNCTIONAL)
def test_functional_name_exists(name):
    assert callable(getattr(F, name, None)), f"nn.functional.{name} is missing"


@pytest.mark.parametrize("name", MODULES)
def test_module_exists_and_is_exported(name):
    cls = getattr(nn, name, None)
    assert isinstance(cls, type) and issubclass(cls, nn.Module), f"nn.{name} is missing"
    assert name in nn.__all__


@pytest.mark.torch
def test_every_listed_name_is_torchs():
    torch = pytest.importorskip("torch")
    assert [n for n in FUNCTIONAL if not hasattr(torch.nn.functional, n)] == []
    assert [n for n in MODULES if not hasattr(torch.nn, n)] == []


@pytest.mark.torch
def test_every_nn_export_is_a_torch_name():
    torch = pytest.importorskip("torch")
    assert [n for n in nn.__all__ if not hasattr(torch.nn, n)] == []
