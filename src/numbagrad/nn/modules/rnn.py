"""``numbagrad.nn.modules.rnn``: torch's path to the recurrent layers, which live in ``numbagrad.nn.rnn``."""

from ..rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from ..utils.rnn import PackedSequence

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "PackedSequence", "RNNBase", "RNNCell", "RNNCellBase"]
