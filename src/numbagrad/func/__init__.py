"""``numbagrad.func``: torch.func's composable transforms over the reverse-mode engine.

``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``jacfwd``, ``jvp``, ``hessian``, ``vmap``, ``functional_call``
and ``stack_module_state``, with torch's signatures (``argnums``, ``has_aux``, pytrees of tensors in tuples, lists
and dicts). Each transform runs the function on fresh aliases of its inputs with grad mode on and differentiates
with ``create_graph=True``, so transforms nest (``jacrev(jacrev(f))``, ``vmap(grad(f))``); results are cut from the
graph when the outermost transform returns.

How numbagrad computes them, where torch differs:
- ``jvp`` and ``jacfwd`` run in forward mode (``autograd.forward_ad``), inside vmaps too (``vmap(jvp(f))``: the
  tangents ride on the batched tensors' values, so a custom Function's ``jvp`` runs once over the batch). Forward
  mode has a single level, so inside another transform (``jacrev(jvp...)``, ``jacfwd(jacfwd(f))``) they fall back
  to the double-vjp identity (the vjp of a vjp is linear in its cotangent, and its own vjp is the jvp) and
  reverse-mode rows: the same values, with a graph an enclosing transform can differentiate. ``hessian`` is
  ``jacfwd(jacrev(f))``: forward-over-reverse.
- ``vmap`` runs the function once over batched tensors (``func._vmap``): ops with a batching rule run once on the
  whole batch, any other op once per sample; transforms inside vmap differentiate the batch at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from .. import ops
from .._tensor import Tensor
from ..autograd import forward_ad
from ..autograd.engine import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad
from ..autograd.gradcheck import BATCHED_JVPS, _float_outputs
from . import _depth, _vmap

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "stack_module_state",
    "vjp",
    "vmap",
]


def _lift(tree):
    """At the outermost level, the results without their graph (torch.func's results are plain tensors)."""
    if _depth.depth.value:
        return tree
    return _map(lambda t: t.detach(), tree)


# --- pytrees -----------------------------------------------------------------------------------------------------
def _flatten(tree) -> tuple[list, object]:
    """The tensors of a nested tuple/list/dict structure, in order, and a spec to rebuild it."""
    if isinstance(tree, Tensor):
        return [tree], "T"
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for key, item in tree.items():
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((key, len(sub), spec))
        return leaves, (dict, specs)
    return [], ("leaf", tree)


def _unflatten(leaves: list, spec):
    if spec == "T":
        return leaves[0]
    kind, specs = spec
    if kind == "leaf":
        return specs
    if kind is dict:
        out, i = {}, 0
        for key, n, sub in specs:
            out[key] = _unflatten(leaves[i : i + n], sub)
            i += n
        return out
    items, i = [], 0
    for n, sub in specs:
        items.append(_unflatten(leaves[i : i + n], sub))
        i += n
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def _map(fn, tree):
    leaves, spec = _flatten(tree)
    return _unflatten([fn(t) for t in leaves], spec)


def _alias(t: Tensor) -> Tensor:
    """A fresh tensor to differentiate with respect to: a differentiable alias of an input that already requires
    grad (so an enclosing transform still sees through it), a new leaf of one that does not."""
    if not t.is_floating_point():
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    batched = _vmap.batched_alias(t)  # inside vmap: an input batched at every running level
    if batched is not None:
        return batched
    return t.view_as(t) if t.requires_grad else _vmap.transform_leaf(t)


def _argnums(argnums, nargs: int, name: str) -> tuple:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{name}: Expected argnums to be a non-empty tuple of ints")
    for n in nums:
        if not isinstance(n, int):
            raise RuntimeError(f"{name}: Got argnums={argnums}. Expected an int or a tuple of ints.")
        if not -nargs <= n < nargs:
            raise RuntimeError(f"Got argnum={n}, but only {nargs} positional inputs")
    return tuple(n % nargs for n in nums)


def _grads(outputs: list, inputs: list, cotangents: list | None = None) -> list:
    """d(outputs . cotangents)/d(inputs) with a graph, zeros where an input is unused."""
    needed = [(o, c) for o, c in zip(outputs, cotangents or [None] * len(outputs)) if o.requires_grad]
    if not needed:
        return [ops.zeros_like(t) for t in inputs]
    outs = [o for o, _ in needed]
    cots = [c if c is not None else ops.ones_like(o) for o, c in needed]
    result = _autograd_grad(outs, inputs, cots, retain_graph=True, create_graph=True, allow_unused=True)
    return [g if g is not None else ops.zeros_like(t) for g, t in zip(result, inputs)]


def _split_aux(out, has_aux: bool, name: str):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(
            f"{name}(f)(*args): output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    return out


# --- grad and vjp ------------------------------------------------------------------------------------------------
def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``func``'s gradient with respect to the ``argnums`` inputs, and its value (and aux): ``func`` must return a
    scalar tensor."""

    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad_and_value")
        with _depth.Level(), enable_grad():
            leaves, spec = _flatten([args[i] for i in nums])
            inner = [_alias(t) for t in leaves]
            new_args = list(args)
            for i, value in zip(nums, _unflatten(inner, spec)):
                new_args[i] = value
            out, aux = _split_aux(func(*new_args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(out, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(
                    f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with "
                    f"{out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?"
                )
            grads = _unflatten(_grads([out], inner), spec)
        result = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = (out, aux) if has_aux else out
        return _lift(result), _lift(value)

    return wrapper


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """``func``'s gradient with respect to the ``argnums`` inputs (with ``has_aux``: and its aux output)."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def vjp(func: Callable, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``: ``vjp_fn(cotangents)`` gives the cotangents' products with the Jacobian, one
    per primal; it may be called many times."""
    with _depth.Level(), enable_grad():
        leaves, spec = _flatten(list(primals))
        inner = [_alias(t) for t in leaves]
        out, aux = _split_aux(func(*_unflatten(inner, spec)), has_aux, "vjp")
    out_leaves, out_spec = _flatten(out)

    def vjp_fn(*cotangents):
        tree = cotangents[0] if len(cotangents) == 1 else cotangents
        cot_leaves, _ = _flatten(tree)
        if len(cot_leaves) != len(out_leaves):
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure of outputs to the function."
            )
        for c, o in zip(cot_leaves, out_leaves):
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[0] has a shape of {c.shape} and output[0] has a shape of "
                    f"{o.shape}."
                )
        with _depth.Level(), enable_grad():
            grads = _grads(out_leaves, inner, cot_leaves)
        return _lift(tuple(_unflatten(grads, spec)))

    result = (_lift(out), vjp_fn)
    return (*result, _lift(aux)) if has_aux else result


def jvp(func: Callable, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)``: the directional derivative along ``tangents``, in forward mode (see the
    module docstring for the nested case)."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to "
                           "call f(*primals).")  # fmt: skip
    p_leaves, spec = _flatten(list(primals))
    t_leaves, _ = _flatten(list(tangents))
    if len(p_leaves) != len(t_leaves):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have the same python structure. For "
            "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
            f"{primals} and tangents with structure {tangents}"
        )
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                "jvp(f, primals, tangents): Expected primals and tangents to have the same shape. Got primals with "
                f"shape {tuple(p.shape)} and tangents with shape {tuple(t.shape)}"
            )
    if not _forward_mode_available():
        return _jvp_by_double_vjp(func, p_leaves, spec, t_leaves, has_aux)
    with _depth.Level(), _vmap.forward_mode(), forward_ad.dual_level():
        duals = [_make_dual(p, t) for p, t in zip(p_leaves, t_leaves)]
        out, aux = _split_aux(func(*_unflatten(duals, spec)), has_aux, "jvp")
        out_leaves, out_spec = _flatten(out)
        primal_out, tangent_out = [], []
        for o in out_leaves:
            primal, tangent = _unpack_dual(o)
            primal_out.append(primal)
            tangent_out.append(tangent)
    result = (_lift(_unflatten(primal_out, out_spec)), _lift(_unflatten(tangent_out, out_spec)))
    return (*result, _lift(aux)) if has_aux else result


def _forward_mode_available() -> bool:
    """Whether ``jvp``/``jacfwd`` can run in forward mode here: no forward-AD level is active (it has one) and no
    transform runs but vmaps (whose batched tensors carry their tangents on their values)."""
    return forward_ad._current_level < 0 and _vmap.only_vmaps_running()


def _make_dual(primal: Tensor, tangent: Tensor) -> Tensor:
    """``make_dual`` of the plain values under any running vmaps: the primal and the tangent are each broadcast
    over every running level (``_vmap.spread``), the dual made of the values and batched again, so the ops inside
    (batched by their rules, or sample by sample) carry the tangent, and so do custom Functions (their ``jvp``)."""
    value, levels = _vmap.spread(primal)
    return _vmap.wrap_levels(forward_ad.make_dual(value, _vmap.spread(tangent)[0]), levels)


def _unpack_dual(t: Tensor) -> tuple[Tensor, Tensor]:
    """``(primal, tangent)`` of an output of a function run on ``_make_dual``'s tensors, batched at the levels the
    output is: zeros for an output without a tangent."""
    value, levels = _vmap.unwrap_levels(t)
    primal, tangent = forward_ad.unpack_dual(value)
    if tangent is None:
        tangent = ops.zeros_like(primal)
    return _vmap.wrap_levels(primal, levels), _vmap.wrap_levels(tangent, levels)


def _jvp_by_double_vjp(func: Callable, p_leaves: list, spec, t_leaves: list, has_aux: bool):
    """``jvp`` inside another transform or a forward-AD level (torch nests transforms; numbagrad's forward mode has
    one level): the vjp ``u -> J^T u`` is linear in ``u``, and its vjp with the tangents is ``J t``, with a graph
    through everything, so an enclosing transform can differentiate the result."""
    with _depth.Level(), enable_grad():
        inner = [_alias(t) for t in p_leaves]
        out, aux = _split_aux(func(*_unflatten(inner, spec)), has_aux, "jvp")
        out_leaves, out_spec = _flatten(out)
        dummies = [ops.zeros_like(o).requires_grad_(True) for o in out_leaves]
        pullback = _grads(out_leaves, inner, dummies)
        pushed = _grads(pullback, dummies, t_leaves)
    result = (_lift(out), _lift(_unflatten(pushed, out_spec)))
    return (*result, _lift(aux)) if has_aux else result


def _batched_jvps(func: Callable, inputs: tuple, index: int, tangents: Tensor, batched: bool) -> tuple:
    """For gradcheck's ``check_batched_forward_grad``: the forward-mode tangents of ``func``'s floating-point
    outputs along each tangent in the batch ``tangents`` (dim 0) of input ``index`` (the others held fixed),
    stacked: computed in one vmap of ``jvp`` when ``batched``, one tangent at a time otherwise."""
    fixed = [a.detach() if isinstance(a, Tensor) else a for a in inputs]

    def outputs_of(x):
        return tuple(_float_outputs(func, (*fixed[:index], x, *fixed[index + 1 :])))

    def one(t):
        return jvp(outputs_of, (fixed[index],), (t,))[1]

    if batched:
        return vmap(one)(tangents)
    return tuple(ops.stack(list(column)) for column in zip(*[one(t) for t in tangents.unbind(0)]))


BATCHED_JVPS[0] = _batched_jvps


# --- Jacobians -----------------------------------------------------------------------------------------------------
def _jacobian(func: Callable, argnums, has_aux: bool, name: str) -> Callable:
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), name)
        with _depth.Level(), enable_grad():
            leaves, spec = _flatten([args[i] for i in nums])
            inner = [_alias(t) for t in leaves]
            new_args = list(args)
            for i, value in zip(nums, _unflatten(inner, spec)):
                new_args[i] = value
            out, aux = _split_aux(func(*new_args, **kwargs), has_aux, name)
            out_leaves, out_spec = _flatten(out)
            per_output = []
            for o in out_leaves:
                flat = o.reshape(-1)
                rows = [_grads([flat[k]], inner) for k in range(flat.numel())]
                jacs = []
                for j, t in enumerate(inner):
                    if rows:
                        jac = ops.stack([row[j] for row in rows]).reshape(*o.shape, *t.shape)
                    else:
                        jac = ops.zeros(*o.shape, *t.shape, dtype=t.dtype, device=t.device)
                    jacs.append(jac)
                grouped = _unflatten(jacs, spec)
                per_output.append(grouped[0] if isinstance(argnums, int) else tuple(grouped))
            result = _unflatten(per_output, out_spec)
        return (_lift(result), _lift(aux)) if has_aux else _lift(result)

    return wrapper


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable:  # fmt: skip
    """The Jacobian of ``func`` with respect to the ``argnums`` inputs, one reverse pass per output element: shape
    ``output.shape + input.shape``."""
    return _jacobian(func, argnums, has_aux, "jacrev")


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error") -> Callable:
    """The Jacobian of ``func`` with respect to the ``argnums`` inputs, column by column in forward mode: one
    forward pass per input element, shape ``output.shape + input.shape``. Inside a transform other than vmap or a
    forward-AD level (numbagrad's forward mode has one level), it is built from reverse-mode rows instead: the same
    matrix."""
    reverse = _jacobian(func, argnums, has_aux, "jacfwd")

    def wrapper(*args, **kwargs):
        if not _forward_mode_available():
            return reverse(*args, **kwargs)
        nums = _argnums(argnums, len(args), "jacfwd")
        leaves, spec = _flatten([args[i] for i in nums])
        for t in leaves:
            if not t.is_floating_point():
                raise RuntimeError("jacfwd: Expected all differentiated inputs to be floating point or complex tensors")
        columns: list = []  # per (input leaf, element): the output leaves' tangents
        out = aux = out_spec = None
        with _depth.Level(), _vmap.forward_mode(), forward_ad.dual_level():
            for j, x in enumerate(leaves):
                for k in range(x.numel()):
                    duals = []
                    for i, t in enumerate(leaves):
                        value, levels = _vmap.spread(t)  # (under vmap: every sample's column at once)
                        direction = ops.zeros_like(value)
                        if i == j:
                            direction.view(*value.shape[: len(levels)], -1)[..., k] = 1
                        primal = forward_ad.make_dual(_vmap.transform_leaf(value), direction)
                        duals.append(_vmap.wrap_levels(primal, levels))
                    new_args = list(args)
                    for i, value in zip(nums, _unflatten(duals, spec)):
                        new_args[i] = value
                    out, aux = _split_aux(func(*new_args, **kwargs), has_aux, "jacfwd")
                    out_leaves, out_spec = _flatten(out)
                    columns.append([_unpack_dual(o)[1] for o in out_leaves])
            if out is None:  # every differentiated input is empty: run once for the outputs' structure
                out, aux = _split_aux(func(*args, **kwargs), has_aux, "jacfwd")
                out_leaves, out_spec = _flatten(out)
        per_output = []
        for m, o in enumerate(out_leaves):
            jacs, start = [], 0
            for t in leaves:
                cols = [columns[start + k][m] for k in range(t.numel())]
                start += t.numel()
                if cols:
                    jacs.append(ops.stack(cols, dim=-1).reshape(*o.shape, *t.shape))
                else:
                    jacs.append(ops.zeros(*o.shape, *t.shape, dtype=o.dtype, device=o.device))
            grouped = _unflatten(jacs, spec)
            per_output.append(grouped[0] if isinstance(argnums, int) else tuple(grouped))
        result = _unflatten(per_output, out_spec)
        return (_lift(result), _lift(aux)) if has_aux else _lift(result)

    return wrapper


def hessian(func: Callable, argnums=0) -> Callable:
    """The Hessian of a scalar ``func``: the Jacobian of its gradient."""
    return jacfwd(jacrev(func, argnums), argnums)


# --- vmap ----------------------------------------------------------------------------------------------------------
def vmap(
    func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size: int | None = None
) -> Callable:
    """``func`` mapped over a batch dimension of its inputs (``in_dims``: one per argument, or None for an argument
    every sample shares), its results with the batch at ``out_dims``: see ``func._vmap``. Run as the outermost
    transform, a result keeps its graph where it reaches a tensor of the user's that requires grad (inputs, or
    weights the function closes over), and is a plain tensor otherwise (``vmap(grad(f))``'s, as torch.func's)."""
    batched = _vmap.vmap(func, in_dims, out_dims, randomness, chunk_size=chunk_size)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        out = batched(*args, **kwargs)
        if _depth.depth.value:
            return out
        return _map(lambda t: t if _vmap.reaches_user_leaf(t) else t.detach(), out)

    return wrapper


# --- modules as functions ------------------------------------------------------------------------------------------
def _swap(module, name: str, value):
    """Put ``value`` where ``module``'s parameter or buffer ``name`` (dotted) is; return what was there."""
    *path, leaf = name.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)
    for store in (owner._parameters, owner._buffers):
        if leaf in store:
            old = store[leaf]
            store[leaf] = value
            return owner, store, leaf, old
    raise AttributeError(f"{type(module).__name__} has no parameter or buffer {name!r}")


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):  # fmt: skip
    """Call ``module`` with its parameters and buffers replaced by the given tensors (a dict, or a tuple of dicts),
    then put the originals back: a module as a pure function of its weights."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        merged = dict(dicts)
    else:
        merged = {}
        for d in dicts:
            repeated = set(merged) & set(d)
            if repeated:
                raise ValueError(f"{sorted(repeated)} appeared in multiple dictionaries; behavior of functional call "
                                 "is ambiguous")  # fmt: skip
            merged.update(d)
    if strict:
        own = set(dict(module.named_parameters())) | set(dict(module.named_buffers()))
        missing, unexpected = sorted(own - set(merged)), sorted(set(merged) - own)
        if missing or unexpected:
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                + "\n\t".join(
                    ([f"Unexpected key(s): {', '.join(map(repr, unexpected))}."] if unexpected else [])
                    + ([f"Missing key(s): {', '.join(map(repr, missing))}."] if missing else [])
                )
            )
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    swapped = []
    try:
        for name, value in merged.items():
            swapped.append(_swap(module, name, value))
        return module(*args, **(kwargs or {}))
    finally:
        for _, store, leaf, old in reversed(swapped):
            store[leaf] = old


def stack_module_state(models) -> tuple[dict, dict]:
    """The parameters and buffers of same-shaped ``models``, each stacked along a new leading dim (parameters as new
    leaves that require grad), ready for ``vmap(functional_call)`` ensembles."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    kind = type(models[0])
    if not all(type(m) is kind for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    params = {
        name: ops.stack([dict(m.named_parameters())[name] for m in models]).detach().requires_grad_(p.requires_grad)
        for name, p in models[0].named_parameters()
    }
    buffers = {
        name: ops.stack([dict(m.named_buffers())[name] for m in models]) for name, _ in models[0].named_buffers()
    }
    return params, buffers
