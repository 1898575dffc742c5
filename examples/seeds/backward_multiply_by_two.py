import numbagrad as torch


class MultiplyByTwo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input * 2

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # градиент по входу равен grad_output * 2
        return grad_output * 2


x = torch.tensor([3.0], requires_grad=True)
multiply = MultiplyByTwo.apply
y = multiply(x)
y.backward()
print(x.grad)
