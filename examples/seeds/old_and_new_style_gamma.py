import numbagrad as torch


class F(torch.autograd.Function):
    def __init__(self, gamma=0.1):
        super().__init__()
        self.gamma = gamma

    def forward(self, args):
        pass

    def backward(self, args):
        pass


class F_new(torch.autograd.Function):
    @staticmethod
    def forward(ctx, args, gamma):
        ctx.gamma = gamma
        pass

    @staticmethod
    def backward(ctx, args):
        pass


gamma = 0.1
inp = torch.tensor([1.0, 2.0], requires_grad=True)
print(F_new.apply(inp, gamma))
F(gamma)(inp)
