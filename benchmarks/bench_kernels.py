"""asv suites: generated elementwise kernels, forward + backward, accumulation and apply_, by size and dtype.

``setup`` warms the JIT (and the disk cache) so the timings are kernel time, not compile time. The ``device``
parameter is ready for cuda: without a GPU those cases are skipped (``NotImplementedError`` is asv's skip).
"""

import numpy as np

import numbagrad as ng

SIZES = [1_000, 100_000, 10_000_000]
DTYPES = ["float32", "float64"]
DEVICES = ["cpu", "cuda"]


def _require(device: str) -> None:
    if device == "cuda" and not ng.cuda.is_available():
        raise NotImplementedError("no CUDA device")


def _tensors(n: int, dtype: str, device: str, k: int, requires_grad: bool):
    gen = np.random.default_rng(0)
    arrays = [gen.standard_normal(n).astype(dtype) for _ in range(k)]
    return [ng.tensor(a, device=device, requires_grad=requires_grad) for a in arrays]


class ReluAffine:
    """``relu(x * w + b)``: three fused-kernel ops, the issue's headline benchmark."""

    params = (SIZES, DTYPES, DEVICES)
    param_names = ["n", "dtype", "device"]

    def setup(self, n, dtype, device):
        _require(device)
        ng.warmup(["mul", "add", "relu"], dtypes=(dtype,))
        self.x, self.w, self.b = _tensors(n, dtype, device, 3, True)
        self.ones = ng.ones(n, dtype=getattr(ng, dtype), device=device)
        self.time_forward_backward(n, dtype, device)

    def time_forward(self, n, dtype, device):
        with ng.no_grad():
            ng.relu(self.x * self.w + self.b)

    def time_forward_backward(self, n, dtype, device):
        for t in (self.x, self.w, self.b):
            t.grad = None
        ng.relu(self.x * self.w + self.b).backward(self.ones)


class Unary:
    """One table row forward and backward (transcendental: arithmetic-bound rather than memory-bound)."""

    params = (["sigmoid", "tanh", "exp"], [100_000], DTYPES, DEVICES)
    param_names = ["op", "n", "dtype", "device"]

    def setup(self, op, n, dtype, device):
        _require(device)
        ng.warmup([op], dtypes=(dtype,))
        (self.x,) = _tensors(n, dtype, device, 1, True)
        self.fn = getattr(ng, op)
        self.ones = ng.ones(n, dtype=getattr(ng, dtype), device=device)
        self.time_forward_backward(op, n, dtype, device)

    def time_forward_backward(self, op, n, dtype, device):
        self.x.grad = None
        self.fn(self.x).backward(self.ones)


class Accumulate:
    """Gradient accumulation into an existing ``.grad`` (the compiled in-place kernel)."""

    params = (SIZES, DTYPES, DEVICES)
    param_names = ["n", "dtype", "device"]

    def setup(self, n, dtype, device):
        _require(device)
        (self.x,) = _tensors(n, dtype, device, 1, True)
        self.ones = ng.ones(n, dtype=getattr(ng, dtype), device=device)
        self.x.backward(self.ones)  # first gradient: .grad now exists
        self.x.backward(self.ones)

    def time_accumulate(self, n, dtype, device):
        self.x.backward(self.ones)


def _ops() -> dict:
    """The ops ``TensorOps`` times: each a step on a (256, 400) float32 tensor ``x`` (and a bias row ``b``)."""

    def backward(y):
        y.sum().backward()

    return {
        "add_": lambda x, b, idx: x.detach().add_(b[0]),
        "pow2_f+b": lambda x, b, idx: backward(x**2),
        "bias_add_f+b": lambda x, b, idx: backward(x + b[0]),
        "softmax_f+b": lambda x, b, idx: backward(ng.softmax(x, 1) * b),
        "log_softmax_f+b": lambda x, b, idx: backward(ng.log_softmax(x, 1) * b),
        "topk5": lambda x, b, idx: x.detach().topk(5, 1),
        "cumsum": lambda x, b, idx: x.detach().cumsum(1),
        "sum_dim1": lambda x, b, idx: x.detach().sum(1),
        "sum_dim0": lambda x, b, idx: x.detach().sum(0),
        "sum": lambda x, b, idx: x.detach().sum(),
        "reciprocal_pow_f+b": lambda x, b, idx: backward(x**-1),
        "index_select_f+b": lambda x, b, idx: backward(x.index_select(0, idx)),
        "sqrt_pow_f+b": lambda x, b, idx: backward(x.abs() ** 0.5),
        "pow2.5": lambda x, b, idx: x.detach().abs() ** 2.5,
        "log2": lambda x, b, idx: x.detach().abs().log2(),
        "sinh": lambda x, b, idx: x.detach().sinh(),
        "atan2": lambda x, b, idx: ng.atan2(x.detach(), b),
        "asin": lambda x, b, idx: (x.detach() * 0.3).asin(),
        "sin_f+b": lambda x, b, idx: backward(x.sin()),
        "tan": lambda x, b, idx: x.detach().tan(),
        "tanh": lambda x, b, idx: x.detach().tanh(),
        "erf": lambda x, b, idx: x.detach().erf(),
        "atanh": lambda x, b, idx: (x.detach() * 0.3).atanh(),
        "asinh": lambda x, b, idx: x.detach().asinh(),
        "exp2": lambda x, b, idx: x.detach().exp2(),
        "hypot": lambda x, b, idx: ng.hypot(x.detach(), b),
        "remainder": lambda x, b, idx: x.detach() % b,
        "fmod": lambda x, b, idx: ng.fmod(x.detach(), b),
    }


class TensorOps:
    """Tensor ops that each had one slow piece until it was replaced: an aliased in-place kernel, a broadcast copy,
    a softmax of five ops, a full sort for ``topk``, numpy's scans and sums and ``np.add.at``, libm's ``pow``,
    ``log2``, ``sinh``, ``atan2``, ``asin``, ``sin``, ``tan``, ``atanh``, ``asinh``, ``exp2``, ``hypot`` and ``fmod``
    called per element (``x ** -1`` too), float32 ``tanh`` and ``erf`` computed in float64, and float32 sums
    converting every element to float64."""

    params = (list(_ops()), DEVICES)
    param_names = ["op", "device"]

    def setup(self, op, device):
        _require(device)
        gen = np.random.default_rng(0)
        self.x = ng.tensor(gen.standard_normal((256, 400)).astype(np.float32), device=device, requires_grad=True)
        self.b = ng.tensor(gen.standard_normal((1, 400)).astype(np.float32), device=device)
        self.idx = ng.tensor(gen.integers(0, 256, 300), device=device)
        self.fn = _ops()[op]
        self.time_op(op, device)

    def time_op(self, op, device):
        self.x.grad = None
        self.fn(self.x, self.b, self.idx)


def double_plus_one(v):
    return v * 2 + 1


class Apply:
    """``Tensor.apply_`` with a compiled callable."""

    params = ([1_000, 100_000], DTYPES + ["int64"])
    param_names = ["n", "dtype"]

    def setup(self, n, dtype):
        self.t = ng.zeros(n, dtype=getattr(ng, dtype))
        self.t.apply_(double_plus_one)

    def time_apply(self, n, dtype):
        self.t.zero_().apply_(double_plus_one)


class Import:
    """Time to import numbagrad in a fresh process (asv's ``timeraw_`` runs in a new interpreter)."""

    def timeraw_import(self):
        return "import numbagrad"
