"""Seed 002 (the three applys): Module.apply over a ModuleList, Tensor.apply_, and Function.apply.

The programs as the document writes them, one after another (each keeps its own imports and classes),
with ``import numbagrad as torch``."""

# ruff: noqa: F811

# --- modulelist apply init weights ---
import numbagrad as torch
import numbagrad.nn as nn

# 創建一個 ModuleList 包含兩個線性層
module_list = nn.ModuleList([nn.Linear(10, 5), nn.Linear(5, 2)])


# 定義一個函數用于初始化權重為0
def init_weights(module):
    if isinstance(module, nn.Linear):
        module.weight.data.fill_(0)


# 應用函數到 ModuleList 的每個子模塊上
module_list.apply(init_weights)
# 打印每個線性層的權重
for module in module_list:
    print(module.weight)


# --- tensor apply add ---
import numbagrad as torch


def add(x):
    return x + 1


a = torch.randn(2, 3)
print(a)
# tensor([[-1.6572, -0.7502, -0.9984],
# [ 0.3035, -0.6085, -0.1091]])
b = a.apply_(add)
print(a)
print(b)
# tensor([[-0.6572, 0.2498, 0.0016],
# [ 1.3035, 0.3915, 0.8909]])
# tensor([[-0.6572, 0.2498, 0.0016],
# [ 1.3035, 0.3915, 0.8909]])
print(b is a)
# True, 說明 a.apply_(add) 不返回新的張量, 是 inplace 的


# --- custom relu ---
import numbagrad as torch
from numbagrad import autograd


class CustomReLUFunction(autograd.Function):
    @staticmethod
    def forward(ctx, *args, **kwargs):
        x = args[0]
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, *grad_outputs):
        (x,) = ctx.saved_tensors
        grad_output = grad_outputs[0]
        grad_input = grad_output.clone()  # 意思是不改變傳進來的 outputs 的 grad 嗎?
        grad_input[x < 0] = 0
        return grad_input


# 使用自定義的 ReLU 激活函數
custom_relu = CustomReLUFunction.apply  # 注意這里的 apply
a = torch.randn(5, requires_grad=True)
output = CustomReLUFunction.apply(a)
output.backward(torch.ones_like(a))
print(a)
print(output)
print(a.grad)
