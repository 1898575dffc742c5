import numbagrad as torch


class AddAndMultiply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a + b, a * b

    @staticmethod
    def backward(ctx, grad_output1, grad_output2):
        a, b = ctx.saved_tensors
        # градиенты по a и b
        grad_a = grad_output1 + grad_output2 * b
        grad_b = grad_output1 + grad_output2 * a
        return grad_a, grad_b


a = torch.tensor([2.0], requires_grad=True)
b = torch.tensor([3.0], requires_grad=True)
addmul = AddAndMultiply.apply
y1, y2 = addmul(a, b)
# суммарная потеря
loss = y1 + y2
loss.backward()
print(a.grad, b.grad)
