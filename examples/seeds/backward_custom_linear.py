import numbagrad as torch
import numbagrad.nn as nn


class CustomLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias):
        ctx.save_for_backward(input, weight, bias)
        return input @ weight.t() + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_output @ weight
        grad_weight = grad_output.t() @ input
        grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MyLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return CustomLinear.apply(x, self.weight, self.bias)


torch.manual_seed(0)
model = MyLinear(3, 2)
x = torch.randn(1, 3, requires_grad=True)
y = model(x)
loss = y.sum()
loss.backward()
print(x.grad.shape)
