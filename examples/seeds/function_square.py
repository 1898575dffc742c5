import numbagrad as torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        output = input**2
        return output

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        # Производная от x^2 равна 2*x
        grad_input = 2 * input * grad_output
        return grad_input


t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
res = Square.apply(t)
print(res)

loss = res.sum()
loss.backward()
print(t.grad)
