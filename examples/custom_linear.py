"""Seed 003 (the backward method): MultiplyByTwo, Square, AddAndMultiply, and a MyLinear Module
built on a custom Function.

The programs as the document writes them, one after another (each keeps its own imports and classes),
with ``import numbagrad as torch``."""

# ruff: noqa: F811

# --- backward multiply by two ---
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


# --- backward square ---
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


# --- backward add and multiply ---
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


# --- backward custom linear ---
import numbagrad as torch
import numbagrad.nn as nn


class CustomLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias):
        ctx.save_for_backward(input, weight, bias)
        return input @ weight.t() + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_output @ weight
        grad_weight = grad_output.t() @ input
        grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MyLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return CustomLinear.apply(x, self.weight, self.bias)


torch.manual_seed(0)
model = MyLinear(3, 2)
x = torch.randn(1, 3, requires_grad=True)
y = model(x)
loss = y.sum()
loss.backward()
print(x.grad.shape)
