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
