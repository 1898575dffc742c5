"""L-BFGS (Nocedal): a quasi-Newton method over all parameters as one flat vector, with an optional strong-Wolfe
line search (torch's ``LBFGS``).

The vectors (gradient, direction, the curvature pairs) are flat Tensors on the parameters' device, built from
ordinary tensor ops; the scalars of the two-loop recursion and of the line search (directional derivatives, step
lengths, the curvature ratios) are Python floats, so float64 parameters follow torch's arithmetic exactly.
"""

from __future__ import annotations

from collections.abc import Callable

from .._tensor import Tensor
from ..autograd.grad_mode import enable_grad, no_grad
from ..ops import cat
from .optimizer import Optimizer, _check_tensor_lr


def _cubic_minimizer(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                     bounds: tuple[float, float] | None = None) -> float:  # fmt: skip
    """The minimizer of the cubic through ``(x1, f1)`` and ``(x2, f2)`` with slopes ``g1`` and ``g2``, clamped to
    ``bounds`` (by default the interval between the points); the bounds' midpoint when the cubic has no real
    stationary point."""
    lower, upper = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    discriminant = d1**2 - g1 * g2
    if discriminant < 0:
        return (lower + upper) / 2.0
    d2 = discriminant**0.5
    if x1 <= x2:
        candidate = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        candidate = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(candidate, lower), upper)


class _Point:
    """One trial of the line search: step length ``t``, loss ``f``, flat gradient ``g`` and slope ``gtd`` along
    the direction."""

    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t: float, f: float, g: Tensor, gtd: float) -> None:
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate: Callable[[float], tuple[float, Tensor]], t: float, d: Tensor, f: float, g: Tensor,
                  gtd: float, c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple[float, Tensor, float, int]:  # fmt: skip
    """A step length along ``d`` meeting the strong Wolfe conditions (sufficient decrease ``c1``, curvature
    ``c2``), from ``t``: first widen until a bracket holds a minimizer, then shrink the bracket by cubic
    interpolation (Nocedal & Wright, algorithms 3.5 and 3.6, as minFunc and torch run them). Returns the loss,
    gradient and step length of the best point and the number of evaluations."""
    d_norm = float(d.abs().max())
    start = _Point(0, f, g.clone(), gtd)

    def trial(t: float) -> _Point:
        f_t, g_t = evaluate(t)
        return _Point(t, f_t, g_t, float(g_t.dot(d)))

    def sufficient_decrease(p: _Point) -> bool:
        return not p.f > f + c1 * p.t * gtd

    def curvature(p: _Point) -> bool:
        return abs(p.gtd) <= -c2 * gtd

    # Widening: find an interval that must contain a point meeting both conditions.
    prev, new = start, trial(t)
    evals, ls_iter = 1, 0
    bracket: list[_Point] | None = None
    done = False
    while ls_iter < max_ls:
        if not sufficient_decrease(new) or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if curvature(new):
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        guess = _cubic_minimizer(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                                 bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))  # fmt: skip
        prev, new = new, trial(guess)
        evals += 1
        ls_iter += 1
    if ls_iter == max_ls:  # no bracket within the budget: between the start and the last trial
        bracket = [_Point(0, f, g, gtd), new]
    assert bracket is not None

    # Zoom: shrink the bracket [low, high] (low: the lower loss) until the curvature condition holds.
    insufficient_progress = False
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1].t - bracket[0].t) * d_norm < tolerance_change:
            break
        a, b = bracket
        t = _cubic_minimizer(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:  # too close to an end: move inward unless progress was fine
            if insufficient_progress or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        new = trial(t)
        evals += 1
        ls_iter += 1
        if not sufficient_decrease(new) or new.f >= bracket[low].f:
            bracket[high] = new
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if curvature(new):
                done = True
            elif new.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = new
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters (one param group, torch's restriction); ``step(closure)`` runs up
    to ``max_iter`` iterations and ``max_eval`` evaluations of the closure, which must recompute the loss and the
    gradients. ``line_search_fn="strong_wolfe"`` picks each step length by a strong-Wolfe line search, ``None``
    takes ``lr``. The curvature history (``old_dirs``, ``old_stps``, ``ro``) persists in the state between steps.
    """

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:  # fmt: skip
        _check_tensor_lr(lr)
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size,
                        line_search_fn=line_search_fn)  # fmt: skip
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: list[Tensor] = self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        """Every parameter's gradient (zeros where there is none) in one flat Tensor."""
        return cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in self._params], 0)

    def _move(self, step: float, direction: Tensor) -> None:
        """``params += step * direction``, the flat direction split back into the parameters."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset : offset + n].view_as(p), alpha=step)
            offset += n

    def _evaluate(self, closure: Callable) -> float:
        with enable_grad():
            return float(closure())

    def step(self, closure: Callable):  # type: ignore[override]
        """Run L-BFGS iterations, calling ``closure`` for every loss and gradient; returns the loss the first
        call gave."""
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]  # lr may be a Tensor
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with no_grad():
            with enable_grad():
                orig_loss = closure()
            loss = float(orig_loss)
            evals = 1
            state["func_evals"] += 1
            flat_grad = self._flat_grad()
            if float(flat_grad.abs().max()) <= tolerance_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:  # steepest descent
                    d = flat_grad.neg()
                    old_dirs, old_stps, ro, H_diag = [], [], [], 1
                else:
                    H_diag = self._record_pair(flat_grad.sub(prev_flat_grad), d.mul(t), old_dirs, old_stps, ro, H_diag,
                                               history_size)  # fmt: skip
                    if "al" not in state:
                        state["al"] = [None] * history_size
                    d = self._direction(flat_grad, old_dirs, old_stps, ro, H_diag, state["al"])
                if prev_flat_grad is None:
                    prev_flat_grad = flat_grad.clone()
                else:
                    prev_flat_grad.copy_(flat_grad)
                prev_loss = loss
                # the first step is scaled down by the gradient's size, as the later ones need not be
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
                gtd = float(flat_grad.dot(d))
                if gtd > -tolerance_change:  # not a descent direction
                    break
                ls_evals = 0
                if line_search_fn is not None:
                    if line_search_fn != "strong_wolfe":
                        raise RuntimeError("only 'strong_wolfe' is supported")
                    start = [p.clone() for p in self._params]

                    def evaluate(step: float, direction=d, start=start) -> tuple[float, Tensor]:
                        self._move(step, direction)
                        f = self._evaluate(closure)
                        g = self._flat_grad()
                        for p, x in zip(self._params, start):
                            p.copy_(x)
                        return f, g

                    loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad, gtd,
                                                                 max_ls=max_eval - evals)  # fmt: skip
                    self._move(t, d)
                    converged = float(flat_grad.abs().max()) <= tolerance_grad
                else:
                    self._move(t, d)
                    converged = False
                    if n_iter != max_iter:  # the last iteration's loss is the next step's first evaluation
                        loss = self._evaluate(closure)
                        flat_grad = self._flat_grad()
                        converged = float(flat_grad.abs().max()) <= tolerance_grad
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if n_iter == max_iter or evals >= max_eval or converged:
                    break
                if float(d.mul(t).abs().max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                    break
            state["d"], state["t"] = d, t
            state["old_dirs"], state["old_stps"], state["ro"], state["H_diag"] = old_dirs, old_stps, ro, H_diag
            state["prev_flat_grad"], state["prev_loss"] = prev_flat_grad, prev_loss
        return orig_loss

    @staticmethod
    def _record_pair(y: Tensor, s: Tensor, old_dirs: list, old_stps: list, ro: list, H_diag: float,
                     history_size: int) -> float:  # fmt: skip
        """Keep the last step ``s`` and its gradient change ``y`` when their curvature ``y.s`` is positive enough
        (dropping the oldest pair beyond ``history_size``); the new initial scaling ``y.s / y.y``, or the old."""
        ys = float(y.dot(s))
        if ys <= 1e-10:
            return H_diag
        if len(old_dirs) == history_size:
            del old_dirs[0], old_stps[0], ro[0]
        old_dirs.append(y)
        old_stps.append(s)
        ro.append(1.0 / ys)
        return ys / float(y.dot(y))

    @staticmethod
    def _direction(flat_grad: Tensor, old_dirs: list, old_stps: list, ro: list, H_diag: float, al: list) -> Tensor:
        """The quasi-Newton direction ``-H g`` by the two-loop recursion over the curvature pairs, ``H_diag`` the
        initial scaling (``al`` holds the first loop's coefficients, kept in the state as torch keeps them)."""
        q = flat_grad.neg()
        for i in reversed(range(len(old_dirs))):
            al[i] = float(old_stps[i].dot(q)) * ro[i]
            q.add_(old_dirs[i], alpha=-al[i])
        r = q.mul(H_diag)
        for i in range(len(old_dirs)):
            be_i = float(old_dirs[i].dot(r)) * ro[i]
            r.add_(old_stps[i], alpha=al[i] - be_i)
        return r
