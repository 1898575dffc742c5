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
