import numbagrad as torch


class AddMulFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a + b, a * b

    @staticmethod
    def vjp(ctx, grad_output1, grad_output2):
        a, b = ctx.saved_tensors
        grad_a = grad_output1 + b * grad_output2
        grad_b = grad_output1 + a * grad_output2
        return grad_a, grad_b


a = torch.tensor([2.0, 3.0, 4.0], requires_grad=True)
b = torch.tensor([5.0, 6.0, 7.0], requires_grad=True)
sum_res, mul_res = AddMulFunction.apply(a, b)
loss = sum_res.sum() + mul_res.sum()
loss.backward()
print(a.grad)
print(b.grad)
