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
