"""Seed 001 (the Function class): AddConstant forward and backward, and Square.

AddConstant.backward returns a gradient for the float 5.0: numbagrad warns and drops it (SPEC section 2)
where torch raises.

The programs as the document writes them, one after another (each keeps its own imports and classes),
with ``import numbagrad as torch``."""

# ruff: noqa: F811

# --- function add constant ---
import numbagrad as torch


class AddConstant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, constant):
        ctx.save_for_backward(input)
        ctx.constant = constant

        output = input + constant
        return output

    @staticmethod
    def backward(ctx, grad_output):
        # Производная по входу равна 1
        grad_input = grad_output
        # Производная по константе равна сумме градиентов
        grad_constant = grad_output.sum()

        return grad_input, grad_constant


# Создаём тензор и применяем операцию
t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
res = AddConstant.apply(t, 5.0)
print(res)


# --- function add constant backward ---
import numbagrad as torch


class AddConstant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, constant):
        ctx.save_for_backward(input)
        ctx.constant = constant

        output = input + constant
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output
        grad_constant = grad_output.sum()

        return grad_input, grad_constant


t = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
res = AddConstant.apply(t, 5.0)

# Вычисляем градиенты
loss = res.sum()
loss.backward()
print(t.grad)


# --- function square ---
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
