"""``numbagrad.nn.utils``: gradient clipping, flattening parameters to one vector, weight and spectral
normalization, parametrizations, pruning, packed sequences for the RNN modules (``rnn``) and
``stateless.functional_call`` (torch's ``nn.utils``)."""

from . import parametrizations, parametrize, prune, rnn, stateless
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "prune",
    "remove_spectral_norm",
    "remove_weight_norm",
    "rnn",
    "spectral_norm",
    "stateless",
    "vector_to_parameters",
    "weight_norm",
]
