import numbagrad as torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input**2

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # градиент x^2 равен 2 * x
        return grad_output * 2 * input


x = torch.tensor([4.0], requires_grad=True)
square = Square.apply
y = square(x)
y.backward()
print(x.grad)
