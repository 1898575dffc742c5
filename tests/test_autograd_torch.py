"""Autograd behaviours checked against torch: each scenario runs on numbagrad and on torch, and their observable
results (values, dtypes, what hooks saw, errors raised) must agree. Modelled on torch's test/test_autograd.py."""

import warnings

import pytest

import numbagrad


def _plain(x):
    """Results as plain Python values (tensors become nested lists, dtypes their names) to compare across libs."""
    if isinstance(x, (tuple, list)):
        return [_plain(v) for v in x]
    if hasattr(x, "detach") and hasattr(x, "tolist"):
        return x.detach().tolist()
    if type(x).__name__ == "dtype":
        return str(x).split(".")[-1]
    return x


def same(torch, scenario):
    """Run ``scenario(lib)`` on both libraries; results, or the exception type and message, must agree."""
    results = []
    for lib in (numbagrad, torch):
        try:
            results.append(("ok", _plain(scenario(lib))))
        except Exception as e:  # the comparison is the point: the same type and text
            results.append((type(e).__name__, str(e)))
    assert results[0] == results[1]
    return results[1]


# --- gradients take their input's dtype ----------------------------------------------------------------------
def test_float64_leaf_gets_float64_grad_from_float32_seed(torch):
    def scenario(lib):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        (x * 2).backward(lib.ones(2))
        return x.grad.dtype, x.grad

    assert same(torch, scenario)[1] == ["float64", [2.0, 2.0]]


def test_autograd_grad_casts_seed_to_output_dtype(torch):
    def scenario(lib):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(x * 2, x, lib.ones(2))
        return g.dtype

    assert same(torch, scenario)[1] == "float64"


def test_autograd_backward_casts_seed(torch):
    def scenario(lib):
        x = lib.ones(2, dtype=lib.float64, requires_grad=True)
        lib.autograd.backward([x * 3], [lib.ones(2)])
        return x.grad.dtype

    assert same(torch, scenario)[1] == "float64"


def test_sum_with_wider_dtype_gives_grad_in_input_dtype(torch):
    def scenario(lib):
        x = lib.ones(3, requires_grad=True)
        seen = []
        y = x * 2
        y.register_hook(lambda g: seen.append(g.dtype))
        y.sum(dtype=lib.float64).backward()
        return x.grad.dtype, seen

    assert same(torch, scenario)[1] == ["float32", ["float32"]]


# --- node hooks ------------------------------------------------------------------------------------------------
def test_post_hook_receives_incoming_gradient_as_grad_outputs(torch):
    def scenario(lib):
        a = lib.ones(1, requires_grad=True)
        b = a * 2
        seen = []
        b.grad_fn.register_hook(lambda gi, go: seen.append((gi[0], go)))
        (b * 5).sum().backward()
        return seen

    assert same(torch, scenario)[1] == [[[10.0], [[5.0]]]]


def test_prehook_on_accumulate_grad_node_can_replace_grad(torch):
    def scenario(lib):
        a = lib.ones(2, requires_grad=True)
        y = a * 2
        acc = y.grad_fn.next_functions[0][0]
        seen = []

        def hook(grads):
            seen.append(grads[0])
            return (grads[0] * 10,)

        acc.register_prehook(hook)
        y.sum().backward()
        return type(acc).__name__, seen, a.grad

    assert same(torch, scenario)[1] == ["AccumulateGrad", [[2.0, 2.0]], [20.0, 20.0]]


def test_autograd_grad_runs_no_hook_outside_the_needed_graph(torch):
    def scenario(lib):
        a = lib.ones(1, requires_grad=True)
        seen = []
        a.register_hook(lambda g: seen.append("leaf"))
        z = a * 2
        z.register_hook(lambda g: seen.append("below"))
        y = z * 1
        y.register_hook(lambda g: seen.append(("y", g)))
        y.grad_fn.register_prehook(lambda g: seen.append("y's node"))
        (g,) = lib.autograd.grad(y * 3, y)
        return g, seen

    assert same(torch, scenario)[1] == [[3.0], [["y", [3.0]]]]


def test_autograd_grad_does_not_run_other_leaves_hooks(torch):
    def scenario(lib):
        x = lib.ones(1, requires_grad=True)
        w = lib.ones(1, requires_grad=True)
        seen = []
        w.register_hook(lambda g: seen.append("w"))
        x.register_hook(lambda g: seen.append("x"))
        lib.autograd.grad((x * w).sum(), x)
        return seen

    assert same(torch, scenario)[1] == ["x"]


def test_detach_inplace_after_use_leaves_grad_unset(torch):
    def scenario(lib):
        a = lib.ones((), requires_grad=True)
        s = a.sin()
        a.detach_()
        s.backward()
        return a.grad is None, a.requires_grad

    assert same(torch, scenario)[1] == [True, False]


# --- inference mode ------------------------------------------------------------------------------------------
def test_inference_mode_false_inside_inference_mode_records_a_graph(torch):
    def scenario(lib):
        with lib.inference_mode(), lib.inference_mode(False):
            x = lib.ones(1, requires_grad=True)
            y = x * 2
            return lib.is_inference_mode_enabled(), lib.is_grad_enabled(), y.grad_fn is not None

    assert same(torch, scenario)[1] == [False, True, True]


def test_tensor_made_in_inference_mode_is_an_inference_tensor(torch):
    def scenario(lib):
        with lib.inference_mode():
            c = lib.ones(3)
        return c.is_inference(), lib.is_inference(c), lib.ones(3).is_inference(), c.clone().is_inference()

    assert same(torch, scenario)[1] == [True, True, False, False]


@pytest.mark.parametrize("write", ["add_", "mul_", "setitem"])
def test_inplace_on_inference_tensor_outside_inference_mode_raises(torch, write):
    def scenario(lib):
        with lib.inference_mode():
            c = lib.ones(3)
        if write == "setitem":
            c[0] = 5.0
        else:
            getattr(c, write)(2)
        return c

    kind, message = same(torch, scenario)
    assert kind == "RuntimeError" and message.startswith("Inplace update to inference tensor outside InferenceMode")


def test_inplace_on_inference_tensor_inside_inference_mode_is_allowed(torch):
    def scenario(lib):
        with lib.inference_mode():
            c = lib.ones(3)
            c.add_(2)
        return c

    assert same(torch, scenario)[1] == [3.0, 3.0, 3.0]


def test_inference_tensor_cannot_be_saved_for_backward(torch):
    def scenario(lib):
        with lib.inference_mode():
            c = lib.ones(3)
        x = lib.ones(3, requires_grad=True)
        return x * c

    kind, message = same(torch, scenario)
    assert kind == "RuntimeError" and message.startswith("Inference tensors cannot be saved for backward.")


def test_inference_tensor_cannot_require_grad_outside_inference_mode(torch):
    def scenario(lib):
        with lib.inference_mode():
            c = lib.ones(3)
        c.requires_grad_()

    assert same(torch, scenario)[0] == "RuntimeError"


# --- misuse -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["int scalar", "int vector", "a number"])
def test_data_of_a_leaf_requiring_grad_must_stay_floating(torch, value):
    def scenario(lib):
        a = lib.ones(2, requires_grad=True)
        a.data = {"int scalar": lib.tensor(3), "int vector": lib.ones(3, dtype=lib.int32), "a number": 3}[value]

    assert same(torch, scenario)[0] in ("RuntimeError", "TypeError")


def test_data_may_change_dtype_and_shape_without_grad(torch):
    def scenario(lib):
        a = lib.ones(2)
        a.data = lib.tensor([1, 2, 3])
        return a.dtype, a

    assert same(torch, scenario)[1] == ["int64", [1, 2, 3]]


def test_grad_cannot_be_the_leaf_itself(torch):
    def scenario(lib):
        x = lib.ones(2, requires_grad=True)
        x.grad = x

    assert same(torch, scenario) == ("RuntimeError", "can't assign Variable as its own grad")


# --- custom Functions ------------------------------------------------------------------------------------------
def test_function_returning_one_tensor_twice_returns_the_same_object(torch):
    def scenario(lib):
        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                return y, y

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 + g2

        x = lib.ones(2, requires_grad=True)
        a, b = Twice.apply(x)
        b.sum().backward()
        return a is b, x.grad

    assert same(torch, scenario)[1] == [True, [1.0, 1.0]]


def _warnings_of(action) -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return [str(w.message) for w in caught if "jit" not in str(w.message)]


def test_detect_anomaly_warns_when_made(torch):
    def scenario(lib):
        def enter():
            with lib.autograd.detect_anomaly():
                pass

        return _warnings_of(enter)

    assert same(torch, scenario)[1][0].startswith("Anomaly Detection has been enabled.")


def test_mark_dirty_on_a_tensor_that_is_not_an_input_warns(torch):
    def scenario(lib):
        class Dirty(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_dirty(y)
                return y

            @staticmethod
            def backward(ctx, g):
                return g

        x = lib.ones(2, requires_grad=True)
        return [m.split(" (Triggered")[0] for m in _warnings_of(lambda: Dirty.apply(x))]

    assert same(torch, scenario)[1] == [
        "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have been mutated should "
        "be passed to ctx.mark_dirty()."
    ]


def test_graph_node_is_a_virtual_base_class(torch):
    def scenario(lib):
        node_cls = lib.autograd.graph.Node
        y = lib.ones(1, requires_grad=True) * 2
        acc = y.grad_fn.next_functions[0][0]
        return isinstance(y.grad_fn, node_cls), node_cls in type(y.grad_fn).__mro__, isinstance(acc, node_cls)

    assert same(torch, scenario)[1] == [True, False, True]


# --- saved-tensor hooks ------------------------------------------------------------------------------------------
def test_saved_tensors_hooks_pack_each_saved_tensor_and_unpack_in_backward(torch):
    def scenario(lib):
        packed = []

        def pack(t):
            packed.append(t.shape)
            return t * 1  # a copy: backward must work from the unpacked value alone

        def unpack(t):
            return t

        x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = (x.sin() * x).exp().sum()
        n_packed = len(packed)
        y.backward()
        return n_packed, [round(v, 10) for v in x.grad.tolist()]

    n, grad = same(torch, scenario)[1]
    assert n == 4 and len(grad) == 3


def test_saved_tensors_hooks_apply_to_custom_function_saves(torch):
    def scenario(lib):
        log = []

        class Square(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        def pack(t):
            log.append("pack")
            return t.detach() * 10

        def unpack(t):
            log.append("unpack")
            return t

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = Square.apply(x)
        y.sum().backward()
        return log, x.grad  # the gradient sees what unpack returned (10x)

    assert same(torch, scenario)[1] == [["pack", "unpack"], [20.0, 40.0]]


def test_unpack_hook_must_return_a_tensor(torch):
    def scenario(lib):
        x = lib.ones(2, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: 3):
            y = (x * x).sum()
        y.backward()

    assert same(torch, scenario)[0] == "TypeError"


def test_disable_saved_tensors_hooks_rejects_hooks_with_its_message(torch):
    def scenario(lib):
        with lib.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
            with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass

    assert same(torch, scenario) == ("RuntimeError", "no hooks here")


def test_save_on_cpu_gives_the_same_gradient(torch):
    def scenario(lib):
        x = lib.tensor([0.5, 1.0, 2.0], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.save_on_cpu():
            y = (x.exp() * x).sum()
        y.backward()
        return [round(v, 10) for v in x.grad.tolist()]

    same(torch, scenario)


def test_saved_tensor_hooks_skip_the_inplace_check_as_torch(torch):
    def scenario(lib):
        x = lib.ones(2, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            a = x * 1
            y = a.sin()
        a.add_(1)
        y.sum().backward()

    assert same(torch, scenario)[0] == "ok"


# --- hooks over leaves and over several tensors ------------------------------------------------------------------
def test_post_accumulate_grad_hook_sees_the_accumulated_grad(torch):
    def scenario(lib):
        x = lib.ones(2, requires_grad=True)
        seen = []
        x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        return seen

    assert same(torch, scenario)[1] == [[2.0, 2.0], [5.0, 5.0]]


def _grads_or_none(gs):
    return [None if g is None else g.tolist() for g in gs]


def test_multi_grad_hook_all_runs_once_per_backward_with_the_computed_grads(torch):
    def scenario(lib):
        a, b, c = (lib.ones(2, requires_grad=True) for _ in range(3))
        log = []
        handle = lib.autograd.graph.register_multi_grad_hook((a, b, c), lambda gs: log.append(_grads_or_none(gs)))
        (a * 2 + b * 3).sum().backward()
        (c * 5).sum().backward()
        handle.remove()
        (a * 2).sum().backward()
        return log

    assert same(torch, scenario)[1] == [[[2.0, 2.0], [3.0, 3.0], None], [None, None, [5.0, 5.0]]]


def test_multi_grad_hook_any_runs_for_the_first_grad_only(torch):
    def scenario(lib):
        a, b = lib.ones(2, requires_grad=True), lib.ones(2, requires_grad=True)
        log = []
        lib.autograd.graph.register_multi_grad_hook((a, b), lambda g: log.append(g.tolist()), mode="any")
        (a * 2 + b * 3).sum().backward()
        return log

    assert same(torch, scenario)[1] == [[3.0, 3.0]]


def test_multi_grad_hook_counts_only_what_autograd_grad_computes(torch):
    def scenario(lib):
        x = lib.ones(2, requires_grad=True)
        y = x * 2
        log = []
        lib.autograd.graph.register_multi_grad_hook((x, y), lambda gs: log.append(_grads_or_none(gs)))
        lib.autograd.grad((y * 3).sum(), y)
        return log

    assert same(torch, scenario)[1] == [[None, [3.0, 3.0]]]


def test_multi_grad_hook_rejects_unknown_mode(torch):
    def scenario(lib):
        lib.autograd.graph.register_multi_grad_hook((lib.ones(1, requires_grad=True),), print, mode="some")

    assert same(torch, scenario)[0] == "ValueError"


# --- gradcheck options ---------------------------------------------------------------------------------------------
def _gradcheck_outcome(lib, fn_name, **options):
    class Square(lib.autograd.Function):  # no jvp
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Wrong(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    fns = {"sin": lambda t: t.sin() * t, "square": Square.apply, "wrong": Wrong.apply, "mask": lambda t: t[t > 0.0]}
    x = lib.tensor([0.0 if fn_name == "mask" else 0.5, 1.5], dtype=lib.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.autograd.gradcheck(fns[fn_name], (x,), **options)


@pytest.mark.parametrize(
    ("fn_name", "options"),
    [
        ("sin", {"check_forward_ad": True}),
        ("square", {"check_forward_ad": True}),
        ("square", {"check_forward_ad": True, "raise_exception": False}),
        ("wrong", {"raise_exception": False}),
        ("wrong", {"check_backward_ad": False}),
        ("wrong", {"fast_mode": True, "raise_exception": False}),
        ("sin", {"fast_mode": True}),
        ("square", {"check_undefined_grad": True}),
        ("mask", {}),
        ("sin", {"check_grad_dtypes": True}),
        ("sin", {"masked": True}),
    ],
)
def test_gradcheck_options_behave_as_torch(torch, fn_name, options):
    def scenario(lib):
        return _gradcheck_outcome(lib, fn_name, **options)

    kind, value = same_kind(torch, scenario)
    assert kind in ("ok", "NotImplementedError", "AssertionError")


def same_kind(torch, scenario):
    """Like ``same``, for messages that name the library (``torch.Size``): compared with that name removed."""
    results = []
    for lib in (numbagrad, torch):
        try:
            results.append(("ok", _plain(scenario(lib))))
        except Exception as e:
            results.append((type(e).__name__, str(e).replace(lib.__name__ + ".", "")))
    assert results[0] == results[1]
    return results[1]


def test_gradcheck_fast_mode_reports_mismatch_as_torch(torch):
    messages = []
    for lib in (numbagrad, torch):
        with pytest.raises(lib.autograd.gradcheck.__globals__["GradcheckError"]) as info:
            _gradcheck_outcome(lib, "wrong", fast_mode=True)
        messages.append(str(info.value))
    for m in messages:
        assert m.startswith("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:")
        assert "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876" in m


def _leaky_gradcheck(lib, when_undefined_only: bool, **options):
    class Leaky(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if g is None:
                return lib.ones(2, dtype=lib.float64)  # a gradient out of nothing
            return g * 2 if when_undefined_only else g * 2 + 1

    x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.autograd.gradcheck(Leaky.apply, (x,), atol=10, rtol=10, **options)


def test_gradcheck_catches_backward_not_multiplied_by_grad_output(torch):
    assert same(torch, lambda lib: _leaky_gradcheck(lib, False)) == (
        "GradcheckError",
        "backward not multiplied by grad_output",
    )


def test_gradcheck_catches_backward_that_mishandles_undefined_grads(torch):
    kind, message = same(torch, lambda lib: _leaky_gradcheck(lib, True))
    assert kind == "GradcheckError" and message.startswith("Expected all input grads to be undefined or zero")


def test_gradcheck_undefined_grad_check_can_be_switched_off(torch):
    assert same(torch, lambda lib: _leaky_gradcheck(lib, True, check_undefined_grad=False)) == ("ok", True)


def test_gradgradcheck_passes_options_through(torch):
    def scenario(lib):
        x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
        return lib.autograd.gradgradcheck(lambda t: t.sin() * t, (x,), fast_mode=True, check_fwd_over_rev=True)

    assert same(torch, scenario)[1] is True


# --- the legacy Variable ------------------------------------------------------------------------------------------
def test_variable_makes_a_detached_alias_that_may_require_grad(torch):
    def scenario(lib):
        t = lib.ones(2)
        v = lib.autograd.Variable(t, requires_grad=True)
        y = lib.ones(2, requires_grad=True) * 2
        w = lib.autograd.Variable(y)
        return (
            type(v) is lib.Tensor,
            v is t,
            v.requires_grad,
            t.requires_grad,
            v.data_ptr() == t.data_ptr(),
            w.grad_fn is None,
            isinstance(t, lib.autograd.Variable),
        )

    assert same(torch, scenario)[1] == [True, False, True, False, True, True, True]


def test_variable_volatile_warns_and_does_nothing(torch):
    def scenario(lib):
        t = lib.ones(2)
        return _warnings_of(lambda: lib.autograd.Variable(t, volatile=True))

    assert same(torch, scenario)[1] == [
        "volatile was removed and now has no effect. Use `with torch.no_grad():` instead."
    ]


@pytest.mark.parametrize("case", ["not a tensor", "int requires grad"])
def test_variable_errors_as_torch(torch, case):
    def scenario(lib):
        if case == "not a tensor":
            return lib.autograd.Variable(3)
        return lib.autograd.Variable(lib.ones(2, dtype=lib.int64), requires_grad=True)

    assert same(torch, scenario)[0] in ("TypeError", "RuntimeError")


# --- second backward through indexing ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["setitem advanced", "getitem advanced", "getitem mask", "getitem slice"])
def test_second_backward_through_indexing_as_torch(torch, case):
    def scenario(lib):
        b = lib.ones(3, requires_grad=True)
        if case == "setitem advanced":
            y = lib.zeros(3)
            y[[1, 2]] = b[[1, 1]]
        elif case == "getitem advanced":
            y = b[[1, 1]]
        elif case == "getitem mask":
            y = b[lib.tensor([True, False, True])]
        else:
            y = b[1:]
        y.sum().backward()
        y.sum().backward()
        return b.grad

    same(torch, scenario)


# --- batched gradients ---------------------------------------------------------------------------------------------
def test_grad_with_batched_grad_outputs_gives_one_vjp_per_row(torch):
    def scenario(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (jac,) = lib.autograd.grad(x * x, x, lib.eye(3), is_grads_batched=True)
        (rows,) = lib.autograd.grad((x * x).sum(), x, lib.ones(2), is_grads_batched=True)
        return jac, rows

    assert same(torch, scenario)[1] == [[[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 6.0]], [[2.0, 4.0, 6.0]] * 2]


def test_grad_batched_grad_outputs_need_a_batch_dim(torch):
    def scenario(lib):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        return lib.autograd.grad(x * x, x, lib.ones(3), is_grads_batched=True)

    kind, message = same_kind(torch, scenario)
    assert kind == "RuntimeError" and message.startswith("If `is_grads_batched=True`")


def test_accumulate_grad_node_hooks_run_in_torch_order(torch):
    def scenario(lib):
        a = lib.ones(2, requires_grad=True)
        y = a * 2
        acc = y.grad_fn.next_functions[0][0]
        log = []
        acc.register_hook(lambda gi, go: log.append(("post", len(gi), go[0].tolist(), a.grad is None)))
        acc.register_prehook(lambda go: log.append(("pre", a.grad is None)))
        a.register_hook(lambda g: log.append(("tensor", a.grad is None)))
        a.register_post_accumulate_grad_hook(lambda t: log.append(("post accumulate", t.grad.tolist())))
        y.sum().backward()
        lib.autograd.grad((a * 3).sum(), a)  # captured, not accumulated: only the tensor hook runs
        return log

    assert same(torch, scenario)[1] == [
        ["tensor", True],
        ["pre", True],
        ["post accumulate", [2.0, 2.0]],
        ["post", 0, [2.0, 2.0], False],
        ["tensor", False],
    ]
