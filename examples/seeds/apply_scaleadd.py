import numbagrad as torch


class ScaleAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, add):
        ctx.save_for_backward(x)
        ctx.scale = scale
        ctx.add = add
        return x * scale + add

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * ctx.scale, None, None


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
res = ScaleAdd.apply(x, 2.0, 5.0)
print(res)
