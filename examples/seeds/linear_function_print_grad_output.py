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
