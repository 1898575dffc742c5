"""Seed 002 (Extending autograd): the new-style LinearFunction, MulConstant, set_materialize_grads, and
backward with an explicit gradient.

The programs as the document writes them, one after another (each keeps its own imports and classes),
with ``import numbagrad as torch``."""

# ruff: noqa: F811

# --- linear function ---
import numbagrad as torch
from numbagrad import autograd


class LinearFunction(autograd.Function):
    # Note that forward, setup_context, and backward are @staticmethods
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    # inputs is a Tuple of all of the inputs passed to forward.
    # output is the output of the forward().
    def setup_context(ctx, inputs, output):  # output 沒用到
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    # This function has only a single output, so it gets only one gradient
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        # These needs_input_grad checks are optional and there only to
        # improve efficiency. If you want to make your code simpler, you can
        # skip them. Returning gradients for inputs that don't require it is
        # not an error.
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


# --- linear function print grad output ---
import numbagrad as torch
from numbagrad import autograd


class LinearFunction(autograd.Function):
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    @staticmethod
    def backward(ctx, *grad_output):  # save_for_backward, 所以 backward 還是需要 ctx 的, 不像 forward
        print(grad_output)  # 驗證 .backward(grad)
        x, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None  # 先設置好 None, 那么不需要梯度的變量, 梯度就返回 None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output[0].mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output[0].t().mm(x)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output[0].sum(0)
        return grad_input, grad_weight, grad_bias


linear = LinearFunction.apply
a = torch.randn(2, 3)
w = torch.randn(4, 3, requires_grad=True)
b = torch.randn(4, requires_grad=True)
ln = linear(a, w, b)
ln.backward(torch.ones(2, 4))


# --- mul constant ---
import numbagrad as torch
from numbagrad.autograd import Function


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        # ctx is a context object that can be used to stash information
        # for backward computation
        tensor, constant = inputs
        ctx.constant = constant  # 非 Tensor 直接保存在 ctx 中, 而不是 save_for_backward

    @staticmethod
    def backward(ctx, grad_output):
        # We return as many input gradients as there were arguments.
        # Gradients of non-Tensor arguments to forward must be None.
        return grad_output * ctx.constant, None  # const 的梯度


# --- mul constant no materialize ---
import numbagrad as torch
from numbagrad.autograd import Function


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        tensor, constant = inputs
        ctx.set_materialize_grads(False)  # 不太懂這個 materialize 啥意思
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        # Here we must handle None grad_output tensor. In this case we
        # can skip unnecessary computations and just return None.
        if grad_output is None:
            return None, None
        # We return as many input gradients as there were arguments.
        # Gradients of non-Tensor arguments to forward must be None.
        return grad_output * ctx.constant, None


# --- backward norm ---
import numbagrad as torch

x = torch.randn(2, 3, requires_grad=True)
y = torch.norm(x, dim=1)  # 是個向量shape=(2)
y.retain_grad()
grad = torch.randn(
    2
)  # y 的 grad, 平時調用 loss.backward() 空參數, 其實是 loss.backward(torch.tensor(1.0)), 也即 loss 自己的 grad
y.backward(grad)  # 調用 backward 函數會執行其 grad_fn 的 backward, 沿著計算圖鏈式地反向傳播
print(grad)
print(y.grad_fn)
print(y.grad)
print(x.grad)
# %%
x = torch.randn(2, 3, requires_grad=True)
z = torch.norm(x)
z.retain_grad()
grad = torch.tensor(1.0)
z.backward(grad)  # 其實是 loss.backward(torch.tensor(1.0))
print(z.grad_fn)
print(z.grad)
print(x.grad)
