"""Seed 000 (Function.apply): a custom square, a sum of products, and non-tensor arguments.

The programs as the document writes them, one after another (each keeps its own imports and classes),
with ``import numbagrad as torch``."""

# ruff: noqa: F811

# --- apply square ---
import numbagrad as torch


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 2 * x


x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
res = Square.apply(x)
print(res)


# --- apply sumprod ---
import numbagrad as torch


class SumProd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return torch.sum(a * b)

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a


t1 = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
t2 = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
res = SumProd.apply(t1, t2)
print(res)


# --- apply scaleadd ---
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
