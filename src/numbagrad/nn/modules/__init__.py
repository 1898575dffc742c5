"""``numbagrad.nn.modules``: torch's module paths (``torch.nn.modules.rnn.LSTM`` ...), re-exporting the classes
that live in ``numbagrad.nn``'s own files, so code that imports from torch's paths runs unchanged."""
