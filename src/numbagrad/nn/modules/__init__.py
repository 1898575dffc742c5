"""``numbagrad.nn.modules``: the module paths torch's pickles and imports name (``torch.nn.modules.linear`` ...),
each re-exporting classes defined elsewhere in ``numbagrad.nn``."""
