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
