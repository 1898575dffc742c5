import numbagrad as torch

a = torch.randn(2, 3, device="cuda:0")
a.apply_(lambda x: x + 1)
# TypeError: apply_ is only implemented on CPU tensors
