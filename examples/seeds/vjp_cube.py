import numbagrad as torch


class CubeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input**3

    @staticmethod
    def vjp(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad_input = 3 * input**2 * grad_output
        return grad_input


torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = CubeFunction.apply(x)
y.sum().backward()
print(x.grad)
