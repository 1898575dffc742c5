"""Seed 004 (the vjp method): vjp as the backward of custom Functions.

The programs as the document writes them, one after another (each keeps its own imports and classes),
with ``import numbagrad as torch``."""

# ruff: noqa: F811

# --- vjp square ---
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


# --- vjp cube ---
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


# --- vjp add mul ---
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
