import numbagrad as torch


class SquareFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input**2

    @staticmethod
    def vjp(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad_input = 2 * input * grad_output
        return grad_input


x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
y = SquareFunction.apply(x)
y.sum().backward()
print(x.grad)
