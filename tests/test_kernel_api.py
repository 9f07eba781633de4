"""The kernel API on the cpu backend: captured names re-read at each launch, Template
parameters, inferred parameter kinds, source(), trace, to_device and backends()."""

import numpy as np
import pytest

import qnb
from qnb import Tile16
from tests.helpers import define, skip_unless_dtype_runs


@pytest.fixture(autouse=True)
def cpu_backend(request):
    if "backend_name" in request.fixturenames:  # that test picks its own backend
        yield
        return
    with qnb.backend("cpu"):
        yield


def test_rebinding_a_captured_flag_gives_the_right_kernel_each_time():
    scope, _ = define("""
        FLAG = True

        @qnb.kernel
        def k(out):
            t = Tile16.zeros(qnb.f32)
            if qnb.static(FLAG):
                t.eye_()
            out[0:16, 0:16] = t
        """)
    out = np.full((16, 16), np.nan, np.float32)
    scope["k"](out)
    np.testing.assert_array_equal(out, np.eye(16))
    scope["FLAG"] = False  # a later notebook cell rebinds it
    scope["k"](out)
    np.testing.assert_array_equal(out, np.zeros((16, 16)))
    last = qnb.cache.events()[-1]
    assert last.outcome == "miss" and "captured.FLAG: True → False" in last.reason
    scope["FLAG"] = True
    scope["k"](out)
    np.testing.assert_array_equal(out, np.eye(16))
    assert qnb.cache.events()[-1].outcome in ("memory-hit", "disk-hit")


def test_closure_values_and_module_attributes_are_captured():
    import math

    def make(scale):
        @qnb.kernel
        def k(out):
            out[0] = scale * math.pi

        return k

    out = np.zeros(1, np.float32)
    make(2.0)(out)
    assert out[0] == pytest.approx(2 * np.pi, rel=1e-6)
    make(3.0)(out)
    assert out[0] == pytest.approx(3 * np.pi, rel=1e-6)


def test_template_parameters_and_inferred_kinds():
    scope, _ = define("""
        @qnb.kernel
        def k(out, flag: qnb.Template, n, scale, dtype):
            t = Tile16.full(scale, dtype)
            if qnb.static(flag):
                t = t * n
            out[0:16, 0:16] = t.astype(qnb.f32)
        """)
    out = np.zeros((16, 16), np.float32)
    scope["k"](out, True, 3, 0.5, qnb.f64)
    assert (out == 1.5).all()
    scope["k"](out, False, 3, 0.5, np.float16)
    assert (out == 0.5).all()
    sig = qnb.cache.events()[-1].components["signature"]
    assert sig == {
        "out": "Array[f32, 2]",
        "flag": "Template = False",
        "n": "i32",
        "scale": "f32",
        "dtype": "Template = f16",
    }


def test_a_changed_func_changes_the_kernel():
    scope, _ = define("""
        @qnb.func
        def helper(t):
            return t + 1

        @qnb.kernel
        def k(out):
            out[0:16, 0:16] = helper(Tile16.zeros())
        """)
    out = np.zeros((16, 16), np.float32)
    scope["k"](out)
    assert (out == 1).all()
    redefined, _ = define("""
        @qnb.func
        def helper(t):
            return t + 2
        """)
    scope["helper"] = redefined["helper"]
    scope["k"](out)
    assert (out == 2).all()
    assert "source" in qnb.cache.events()[-1].reason


def test_source_renders_ir_without_a_device():
    scope, _ = define("""
        @qnb.kernel
        def k(x: qnb.Array[qnb.f32, 2], s: qnb.f32):
            t = Tile16.load(x, 0, 0)
            (t * s).store(x, 0, 0)
        """)
    text = scope["k"].source("ir")
    assert "LoadWindow" in text and "StoreWindow" in text and "s: f32" in text
    with pytest.raises(qnb.QnbTypeError):
        scope["k"].source("ptx")


def test_source_needs_example_args_when_not_annotated():
    scope, _ = define("@qnb.kernel\ndef k(x):\n    x[0] = 1\n")
    with pytest.raises(qnb.QnbTypeError, match="example arguments"):
        scope["k"].source("ir")
    assert "Array[f64, 1]" in scope["k"].source("ir", np.zeros(3))


def test_trace_records_each_op_with_values_and_regions():
    scope, filename = define("""
        @qnb.kernel
        def k(x, out):
            i = qnb.program_id(0)
            t = Tile16.load(x, i * 16, 0)
            u = t * 2
            u.store(out, i * 16, 0)
        """)
    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    out = np.zeros_like(x)
    trace = scope["k"].trace[2](x, out)
    assert isinstance(trace, qnb.Trace)
    assert trace.programs == [(0, 0, 0), (1, 0, 0)]
    steps = trace.steps(1)
    assert [s.op for s in steps] == ["assign", "load", "mul", "store"]
    load = steps[1]
    assert load.filename == filename and load.lineno == 5 and "Tile16.load" in load.line
    assert load.reads[0].array == "x" and (load.reads[0].r0, load.reads[0].r1) == (16, 32)
    np.testing.assert_array_equal(load.output, x[16:32])
    np.testing.assert_array_equal(steps[2].inputs["t"], x[16:32])
    assert steps[3].writes[0].array == "out"
    np.testing.assert_array_equal(trace.arrays["out"], x * 2)


def test_trace_shows_each_steps_inputs_as_they_were_before_it():
    # A step that assigns one of its own inputs (t = t * 2, an in-place op, acc = mma(...,
    # acc)) shows that input as it went in, not as it came out.
    scope, _ = define("""
        @qnb.kernel
        def k(x, out):
            t = Tile16.load(x, 0, 0)
            t = t * 2.0
            t += 1.0
            acc = Tile16.zeros(qnb.f32)
            acc = qnb.mma(t, t, acc)
            t.cholesky_(1e-6)
            acc.store(out, 0, 0)
        """)
    x = np.random.default_rng(0).random((16, 16)).astype(np.float32) + 1
    steps = scope["k"].trace[1](x, np.zeros_like(x)).steps(0)
    by_op = {}
    for step in steps:
        by_op.setdefault(step.op, step)
    np.testing.assert_array_equal(by_op["mul"].inputs["t"], x)
    np.testing.assert_array_equal(by_op["mul"].output, 2 * x)
    np.testing.assert_array_equal(by_op["add"].inputs["t"], 2 * x)
    np.testing.assert_array_equal(by_op["mma"].inputs["acc"], np.zeros((16, 16)))
    np.testing.assert_array_equal(by_op["cholesky_"].inputs["t"], 2 * x + 1)
    assert not np.array_equal(by_op["cholesky_"].inputs["t"], by_op["cholesky_"].output)


def test_trace_names_the_users_variables_and_describes_temporaries():
    scope, _ = define("""
        @qnb.func
        def scale(t, s):
            u = t * s
            return u

        @qnb.kernel
        def k(x, out, n: qnb.i32):
            i = qnb.program_id(0)
            y = x[i] if i < n else 0.0
            w = scale(Tile16.full(y, qnb.f32), 2.0)
            w.store(out, 0, 0)
        """)
    x = np.arange(4, dtype=np.float32)
    steps = scope["k"].trace[2](x, np.zeros((16, 16), np.float32), 1).steps(1)
    shown = [(s.op, s.target, sorted(s.inputs)) for s in steps]
    assert shown[:3] == [
        ("assign", "i", []),
        ("assign", "(… if … else …)", []),  # program 1 takes the else side: 0.0
        ("assign", "y", ["(… if … else …)"]),
    ]
    assert ("mul", "u", ["t"]) in shown  # the func's own name, not an inlined one


def test_to_device_and_backends():
    records = {b.name: b for b in qnb.backends()}
    assert set(records) == {"cpu", "wgpu", "cuda", "cuda-host"}
    assert records["cpu"].available and records["cpu"].reason is None
    for record in records.values():
        assert record.available or record.reason
    x = qnb.to_device(np.ones((16, 16), np.float32), backend="cpu")
    assert x.shape == (16, 16) and x.dtype == np.float32
    np.testing.assert_array_equal(x.numpy(), np.ones((16, 16)))


def test_tile_size_in_host_code_and_kernels():
    assert Tile16.SIZE == 16
    scope, _ = define("@qnb.kernel\ndef k(out):\n    out[0] = Tile16.SIZE * 2\n")
    out = np.zeros(1, np.int32)
    scope["k"](out)
    assert out[0] == 32


def test_cache_clear_makes_the_next_launch_look_again():
    scope, _ = define("@qnb.kernel\ndef k(out):\n    out[0] = 7\n")
    out = np.zeros(1, np.int32)
    scope["k"](out)
    scope["k"](out)
    assert qnb.cache.events()[-1].outcome == "memory-hit"
    qnb.cache.clear()
    scope["k"](out)
    assert qnb.cache.events()[-1].outcome == "miss"
    assert out[0] == 7


def test_kernel_backend_property():
    scope, _ = define("@qnb.kernel\ndef k(out):\n    out[0] = 1\n")
    k = scope["k"]
    assert k.backend is None
    k.backend = "cpu"
    assert k.backend == "cpu"
    with pytest.raises(qnb.BackendError):
        k.backend = "nope"
    k.backend = "auto"
    assert k.backend is None


def test_while_condition_calling_a_func_is_reevaluated_each_iteration(backend_name):
    scope, _ = define("""
        @qnb.func
        def below(v, limit):
            doubled = v * 2
            return doubled < limit

        @qnb.kernel
        def k(out):
            v = 1
            steps = 0
            while below(v, 100):
                v = v * 2
                steps += 1
            out[0] = v
            out[1] = steps
        """)
    out = np.zeros(2, np.int32)
    with qnb.backend(backend_name):
        scope["k"](out)
    assert list(out) == [64, 6]


def test_and_guards_a_func_call_on_its_right(backend_name):
    scope, _ = define("""
        @qnb.func
        def positive(x, i):
            value = x[i]
            return value > 0

        @qnb.kernel
        def k(x, out):
            i = qnb.program_id(0)
            if i < x.shape[0] and positive(x, i):
                out[i] = 1
        """)
    x = np.array([1.0, -1.0, 2.0], np.float32)
    out = np.zeros(4, np.int32)
    with qnb.backend(backend_name):
        scope["k"][4](x, out)  # program 3 must not read x[3]
    assert list(out) == [1, 0, 1, 0]


def test_conditional_expression_evaluates_only_the_side_python_would(backend_name):
    scope, _ = define("""
        @qnb.func
        def count_call(calls):
            calls[0] = calls[0] + 1
            return 10.0

        @qnb.kernel
        def k(x, out, calls, take: qnb.i32):
            i = qnb.program_id(0)
            out[i] = x[i] if i < x.shape[0] else -1.0   # no read of x[i] past its end
            if i == 0:
                out[4] = count_call(calls) if take > 0 else 2.0
        """)
    x = np.array([5.0, 6.0, 7.0], np.float32)
    for take, want_calls, want_last in ((0, 0, 2.0), (1, 1, 10.0)):
        out = np.full(5, np.nan, np.float32)
        calls = np.zeros(1, np.float32)
        with qnb.backend(backend_name):
            scope["k"][4](x, out, calls, take)
        np.testing.assert_array_equal(out, [5.0, 6.0, 7.0, -1.0, want_last])
        assert calls[0] == want_calls


def test_f16_sums_accumulate_in_f32_and_round_once(backend_name):
    scope, _ = define("""
        @qnb.kernel
        def k(x, total, rows, cols):
            t = Tile16.load(x, 0, 0)
            total[0] = t.sum()
            t.sum(axis=1).store(rows, 0)
            t.sum(axis=0).store(cols, 0)
        """)
    skip_unless_dtype_runs(backend_name, np.float16)
    x = np.random.default_rng(11).uniform(0, 4, (16, 16)).astype(np.float16)
    total, rows, cols = np.zeros(1, np.float16), np.zeros(16, np.float16), np.zeros(16, np.float16)
    with qnb.backend(backend_name):
        scope["k"](x, total, rows, cols)
    wide = x.astype(np.float64)
    # Within one f16 ulp of the exact sum (summing in f16, 256 terms drift by several).
    for got, exact in ((total, [wide.sum()]), (rows, wide.sum(axis=1)), (cols, wide.sum(axis=0))):
        ulp = np.spacing(np.abs(np.asarray(exact, np.float16)))
        assert (np.abs(got.astype(np.float64) - exact) <= ulp).all(), (got, exact)


def test_a_store_of_one_value_to_one_place_under_a_per_program_branch(backend_name):
    # Nothing in the store varies by program, but the branch does (the cpu backend once
    # failed here with an internal IndexError).
    scope, _ = define("""
        @qnb.kernel
        def k(out):
            i = qnb.program_id(0)
            if i == 2:
                out[4] = 2.0
        """)
    out = np.zeros(5, np.float32)
    with qnb.backend(backend_name):
        scope["k"][4](out)
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 2])


def test_conditional_expression_mixes_a_tile_and_a_scalar(backend_name):
    scope, _ = define("""
        @qnb.kernel
        def k(x, out, flag: qnb.i32):
            t = Tile16.load(x, 0, 0)
            (t * 2.0 if flag > 0 else 0.5).store(out, 0, 0)
        """)
    x = np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32)
    for flag, want in ((1, 2 * x), (0, np.full((16, 16), 0.5, np.float32))):
        out = np.full((16, 16), np.nan, np.float32)
        with qnb.backend(backend_name):
            scope["k"][1](x, out, flag)
        np.testing.assert_allclose(out, want, rtol=1e-6)


def test_tile_condition_with_a_storing_func_is_refused_at_the_users_line():
    scope, _ = define("""
        @qnb.func
        def mark(out):
            out[0, 0] = 1.0
            return Tile16.zeros(qnb.f32)

        @qnb.kernel
        def k(x, out):
            t = Tile16.load(x, 0, 0)
            u = mark(out) if t > 0.0 else t
            u.store(out, 0, 0)
        """)
    with pytest.raises(qnb.QnbTypeError, match="computes both sides") as info:
        scope["k"][1](np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32))
    assert "mark(out) if t > 0.0 else t" in str(info.value)


def test_static_loop_names_stay_static_but_runtime_branches_decide_at_run_time():
    scope, _ = define("""
        @qnb.kernel
        def k(flags, out):
            for i in qnb.static(range(3)):
                j = i * 2  # static: usable inside qnb.static(...)
                if qnb.static(j >= 2):
                    out[i, 0] = j
                if flags[i] > 0:
                    y = 1
                else:
                    y = 2
                out[i, 1] = y
        """)
    flags = np.array([1, -1, 1], np.int32)
    out = np.full((3, 2), -7, np.int32)
    scope["k"](flags, out)
    assert out.tolist() == [[-7, 1], [2, 2], [4, 1]]


def test_a_func_call_under_a_method_is_inlined_once():
    scope, _ = define("""
        @qnb.func
        def bump(out):
            out[0] = out[0] + 1
            return Tile16.ones()

        @qnb.kernel
        def k(out):
            total = bump(out).sum()
            out[1] = total
        """)
    out = np.zeros(2, np.float32)
    scope["k"](out)
    assert out.tolist() == [1.0, 256.0]  # bump's store ran once, not twice


def test_the_launch_fast_path_agrees_with_the_full_argument_check():
    scope, _ = define("""
        @qnb.kernel
        def typed(x: qnb.Array[qnb.f32, 2], n: qnb.i32, s: qnb.f64, y):
            pass

        @qnb.kernel
        def loose(x: qnb.Array, y: qnb.Array[qnb.f16], z):
            pass
        """)
    typed, loose = scope["typed"], scope["loose"]
    f32, f64 = np.zeros((16, 16), np.float32), np.zeros((4, 4, 4))
    cases = [
        (typed, (f32, 3, 1.5, f64)),
        (typed, (f32, 2**31, 1.5, f64)),  # n out of i32 range: the full check explains
        (typed, (f32, True, 1.5, f64)),  # a bool for an i32
        (typed, (f32, 3, 2, f64)),  # an int for an f64 (the full check converts it)
        (typed, (f32.T.copy(order="F"), 3, 1.5, f64)),  # not C-contiguous
        (typed, (f64, 3, 1.5, f64)),  # wrong dtype
        (typed, (f32, 3, 1.5, 2.5)),  # a scalar for an unannotated parameter
        (loose, (f64, np.zeros(8, np.float16), f32)),
        (loose, (f64, np.zeros(8, np.float32), f32)),
        (loose, (np.zeros((2, 2, 2, 2)), np.zeros(8, np.float16), f32)),  # 4-D
        (loose, (np.zeros(3, np.int64), np.zeros(8, np.float16), f32)),  # unsupported dtype
    ]
    fast_taken = 0
    for kernel, args in cases:
        fast = kernel._fast_signature(args)
        try:
            full = kernel._signature(args)[0]
        except qnb.QnbTypeError:
            assert fast is None, args  # only the full check may reject, with its message
            continue
        assert fast in (None, full), (fast, full)
        fast_taken += fast is not None
    assert fast_taken == 2  # the two common calls do take it


def test_the_one_array_fast_path_agrees_with_the_full_argument_check():
    # A kernel of one annotated array has its own unrolled fast check: the same answers.
    scope, _ = define("""
        @qnb.kernel
        def fill(d: qnb.Array[qnb.f32, 2]):
            Tile16.full(4.0).store(d, 0, 0)
        """)
    fill = scope["fill"]
    f32 = np.zeros((16, 16), np.float32)
    cases = [
        (f32,),
        (f32[None],),  # rank 3
        (f32[0],),  # rank 1
        (f32[:, ::2],),  # not C-contiguous
        (f32.astype(np.float64),),  # wrong dtype
        (f32.astype(np.dtype(np.float32).newbyteorder()),),  # a non-native f32
        (f32.tolist(),),  # not an array
        (3.0,),
        (f32, f32),  # too many
        (),
    ]
    fast_taken = 0
    for args in cases:
        fast = fill._fast_signature(args)
        try:
            full = fill._signature(args)[0]
        except qnb.QnbTypeError:
            assert fast is None, args
            continue
        assert fast in (None, full), (fast, full)
        fast_taken += fast is not None
    assert fast_taken == 1
    d = np.zeros((16, 16), np.float32)
    fill(d)
    assert (d == 4.0).all()


def test_i32_arithmetic_wraps_as_numpys_does(backend_name):
    # Signed overflow is undefined in C++ (and INT_MIN // -1 traps on x86): the CUDA code
    # must wrap like NumPy and WGSL, products and sums inside @, .sum() and outer included.
    scope, _ = define("""
        @qnb.kernel
        def k(x, y, out, sums):
            a = Tile16.load(x, 0, 0)
            b = Tile16.load(y, 0, 0)
            (a * b).store(out[0], 0, 0)
            (a + b).store(out[1], 0, 0)
            (a - b).store(out[2], 0, 0)
            (-a).store(out[3], 0, 0)
            (a // b).store(out[4], 0, 0)
            (a % b).store(out[5], 0, 0)
            (a @ b).store(out[6], 0, 0)
            qnb.outer(a.row(3), b.col(5)).store(out[7], 0, 0)
            sums[0] = a.sum()
        """)
    rng = np.random.default_rng(17)
    x = rng.integers(-(2**31), 2**31, (16, 16), dtype=np.int64).astype(np.int32)
    y = rng.integers(-(2**31), 2**31, (16, 16), dtype=np.int64).astype(np.int32)
    x[0, :2], y[0, :2] = -(2**31), [-1, 1]  # INT_MIN // -1 and INT_MIN % -1
    y[1, :3] = 0  # x // 0 and x % 0 give 0, as NumPy's do
    out, sums = np.zeros((8, 16, 16), np.int32), np.zeros(1, np.int32)
    with qnb.backend(backend_name):
        scope["k"](x, y, out, sums)
    with np.errstate(all="ignore"):
        want = [x * y, x + y, x - y, -x, x // y, x % y, x @ y, np.outer(x[3], y[:, 5])]
        np.testing.assert_array_equal(out, np.stack(want).astype(np.int32))
        assert sums[0] == x.sum(dtype=np.int32)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_to_i32_truncates_saturates_and_sends_nan_to_zero(backend_name, dtype):
    scope, _ = define("""
        @qnb.kernel
        def k(x, out):
            qnb.Vec16.load(x, 0).astype(qnb.i32).store(out, 0)
        """)
    with np.errstate(all="ignore"):
        values = [1e10, -1e10, np.nan, np.inf, -np.inf, 2.7, -2.7, 0.5, -0.5, 65504.0, 3e9]
        x = np.array(values + [0.0] * 5, dtype)
    want = np.where(np.isnan(x), 0, np.clip(np.trunc(x.astype(np.float64)), -(2**31), 2**31 - 1))
    out = np.zeros(16, np.int32)
    if backend_name == "wgpu" and dtype == np.float64:
        with pytest.raises(qnb.BackendError, match="WGSL has no f64"), qnb.backend("wgpu"):
            scope["k"](x, out)
        return
    skip_unless_dtype_runs(backend_name, dtype)
    with qnb.backend(backend_name), np.errstate(all="ignore"):
        scope["k"](x, out)
    np.testing.assert_array_equal(out, want.astype(np.int32))


def test_nan_propagates_through_maximum_minimum_reductions_and_pow(backend_name):
    # NumPy's maximum/minimum/max/min return NaN for a NaN operand; WGSL's builtins need
    # not, and WGSL lets a compiler assume no NaNs (qnb tests the bits).
    scope, _ = define("""
        @qnb.kernel
        def k(x, y, m, out, scalars):
            a = qnb.Vec16.load(x, 0)
            b = qnb.Vec16.load(y, 0)
            qnb.maximum(a, b).store(out, 0)
            qnb.minimum(a, b).store(out, 16)
            (a ** b).store(out, 32)
            t = Tile16.load(m, 0, 0)
            scalars[0] = t.max()
            scalars[1] = t.min()
            scalars[2] = a.max()
        """)
    nan = np.nan
    x = np.array([nan, 1, 2, 1, nan, 3, 0.5, 4, 1, 1, 1, 1, 1, 1, 1, 1], np.float32)
    y = np.array([1, nan, 0, nan, 0, 2, -1, 0.5, 2, 2, 2, 2, 2, 2, 2, 2], np.float32)
    m = np.random.default_rng(4).standard_normal((16, 16)).astype(np.float32)
    m[7, 9] = nan
    out, scalars = np.zeros(48, np.float32), np.zeros(3, np.float32)
    with qnb.backend(backend_name), np.errstate(all="ignore"):
        scope["k"](x, y, m, out, scalars)
        want = np.concatenate([np.maximum(x, y), np.minimum(x, y), x**y])
    np.testing.assert_allclose(out, want, rtol=1e-6, equal_nan=True)
    assert np.isnan(scalars).all(), scalars


def test_float_floordiv_and_mod_at_infinities_zero_and_nan(backend_name):
    scope, _ = define("""
        @qnb.kernel
        def k(x, y, out):
            a = qnb.Vec16.load(x, 0)
            b = qnb.Vec16.load(y, 0)
            (a // b).store(out, 0)
            (a % b).store(out, 16)
        """)
    nan, inf = np.nan, np.inf
    x = np.array([inf, -inf, 3, -3, 3, -3, 0, 7.5, -7.5, 7.5, nan, 1, 5, -5, 2, 0], np.float32)
    y = np.array([2, 2, -inf, inf, inf, -inf, inf, 2, 2, -2, 1, nan, 0, 0, 0.5, -4], np.float32)
    out = np.zeros(32, np.float32)
    with qnb.backend(backend_name), np.errstate(all="ignore"):
        scope["k"](x, y, out)
        want = np.concatenate([x // y, x % y])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_float_floordiv_and_mod_are_numpys_bit_for_bit(backend_name, dtype):
    # NumPy's divmod works from an exact fmod; WGSL has none, so qnb brings its own.
    scope, _ = define("""
        @qnb.kernel
        def k(x, y, q, r):
            p = qnb.program_id(0) * 16
            a = qnb.Vec16.load(x, p)
            b = qnb.Vec16.load(y, p)
            (a // b).store(q, p)
            (a % b).store(r, p)
        """)
    skip_unless_dtype_runs(backend_name, dtype)
    rng = np.random.default_rng(21)
    n = 16 * 256
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dtype)
    y = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)).astype(dtype)
    x[:3], y[:3] = [1, -1, 7], [0.1, 0.1, 0.7]  # 1 // 0.1 is 9: the quotient rounds up to 10
    q, r = np.zeros(n, dtype), np.zeros(n, dtype)
    with qnb.backend(backend_name), np.errstate(all="ignore"):
        scope["k"][n // 16](x, y, q, r)
        np.testing.assert_array_equal(q, x // y)
        np.testing.assert_array_equal(r, x % y)


def test_a_loaded_tile_keeps_its_values_when_the_array_is_overwritten(backend_name):
    # Tiles are values. The cpu backend loads whole blocks as views of the array and must
    # copy them before a store that changes what they hold (also when the store goes
    # through another parameter bound to the same array).
    scope, _ = define("""
        @qnb.kernel
        def slabs(x, y, out):
            b = qnb.program_id(0)
            t = Tile16.load(x[b], 0, 0)
            u = t.T
            (t * 2.0).store(y[b], 0, 0)
            t.store(out[b], 0, 0)
            u.store(out[b], 16, 0)

        @qnb.kernel
        def grid(src, dst, out):
            i = qnb.program_id(0) * 16
            j = qnb.program_id(1) * 16
            t = Tile16.load(src, i, j)
            Tile16.zeros(qnb.f32).store(dst, i, j)
            t.store(out, i, j)
        """)
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((3, 16, 16)).astype(np.float32)
    for same in (False, True):
        x = x0.copy()
        y = x if same else np.full_like(x0, np.nan)
        out = np.full((3, 32, 16), np.nan, np.float32)
        with qnb.backend(backend_name):
            scope["slabs"][3](x, y, out)
        np.testing.assert_array_equal(out[:, :16], x0)
        np.testing.assert_array_equal(out[:, 16:], x0.transpose(0, 2, 1))
        np.testing.assert_array_equal(y, 2 * x0)

    g0 = rng.standard_normal((64, 48)).astype(np.float32)
    for same in (False, True):
        src = g0.copy()
        dst = src if same else np.full_like(g0, np.nan)
        out = np.full_like(g0, np.nan)
        with qnb.backend(backend_name):
            scope["grid"][(4, 3)](src, dst, out)
        np.testing.assert_array_equal(out, g0)
        np.testing.assert_array_equal(dst, np.zeros_like(g0))
        if not same:
            np.testing.assert_array_equal(src, g0)


def test_batched_cholesky_and_solve_across_many_programs():
    # The cpu backend factors in passes of LANE_CHUNK programs; 1,100 programs cross
    # two pass boundaries and end in a partial pass.
    from qnb.backends.cpu import lanes

    scope, _ = define("""
        @qnb.kernel
        def factor_solve(a, rhs, lower, x):
            b = qnb.program_id(0)
            t = Tile16.load(a[b], 0, 0)
            t.cholesky_(0.0)
            t.store(lower[b], 0, 0)
            r = Tile16.load(rhs[b], 0, 0)
            t.solve_triangular_(r)
            r.store(x[b], 0, 0)
        """)
    count = 2 * lanes.LANE_CHUNK + 76
    rng = np.random.default_rng(9)
    m = rng.uniform(-1, 1, (count, 16, 16))
    a = m @ m.transpose(0, 2, 1) + 16 * np.eye(16)
    rhs = rng.standard_normal((count, 16, 16))
    lower = np.full_like(a, np.nan)
    x = np.full_like(a, np.nan)
    scope["factor_solve"][count](a, rhs, lower, x)
    want = np.linalg.cholesky(a)
    np.testing.assert_allclose(lower, want, rtol=1e-12, atol=1e-12)
    # L.solve_triangular_(B) overwrites B with X where X @ L.T == B (DESIGN.md)
    np.testing.assert_allclose(x @ want.transpose(0, 2, 1), rhs, rtol=1e-10, atol=1e-10)


def test_whole_block_loads_and_stores_in_every_program_order(backend_name):
    # The cpu backend moves whole aligned blocks without indexing when the programs tile
    # an array in launch order (either axis first), or read consecutive slabs; other
    # orders, partial grids and strided grids take the general path. All must agree.
    scope, _ = define("""
        @qnb.func
        def copy_and_double(x, y, z, i, j):
            t = Tile16.load(x, i, j)
            t.store(y, i, j)
            (t * 2.0).store(z, i, j)

        @qnb.kernel
        def rows_first(x, y, z):
            i = qnb.program_id(0) * 16
            j = qnb.program_id(1) * 16
            Tile16.load(x, i, j).store(y, i, j)  # a load straight into a store
            t = Tile16.load(x, i, j)
            (t * 2.0).store(z, i, j)

        @qnb.kernel
        def cols_first(x, y, z):
            copy_and_double(x, y, z, qnb.program_id(1) * 16, qnb.program_id(0) * 16)

        @qnb.kernel
        def reversed_rows(x, y, z):
            i = (qnb.num_programs(0) - 1 - qnb.program_id(0)) * 16
            copy_and_double(x, y, z, i, qnb.program_id(1) * 16)

        @qnb.kernel
        def every_other(x, y, z):
            copy_and_double(x, y, z, qnb.program_id(0) * 32, qnb.program_id(1) * 16)

        @qnb.kernel
        def reversed_slabs(x, y, z):
            b = qnb.program_id(0)
            t = Tile16.load(x[x.shape[0] - 1 - b], 16, 0)
            t.store(y[b], 16, 0)
            (t * 2.0).store(z[b], 16, 0)
        """)
    rng = np.random.default_rng(10)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    cases = [  # (kernel, grid, the rows of x its programs cover)
        ("rows_first", (4, 3), np.s_[:]),
        ("cols_first", (3, 4), np.s_[:]),
        ("rows_first", (2, 3), np.s_[:32]),  # a partial grid
        ("reversed_rows", (4, 3), np.s_[:]),
        ("every_other", (2, 3), np.s_[[*range(16), *range(32, 48)]]),
    ]
    for name, grid, covered in cases:
        y, z = np.full_like(x, np.nan), np.full_like(x, np.nan)
        with qnb.backend(backend_name):
            scope[name][grid](x, y, z)
        want_y, want_z = np.full_like(x, np.nan), np.full_like(x, np.nan)
        want_y[covered], want_z[covered] = x[covered], 2 * x[covered]
        np.testing.assert_array_equal(y, want_y, err_msg=f"{name}{grid}")
        np.testing.assert_array_equal(z, want_z, err_msg=f"{name}{grid}")
    slabs = rng.standard_normal((5, 32, 16)).astype(np.float32)
    y, z = np.full_like(slabs, np.nan), np.full_like(slabs, np.nan)
    with qnb.backend(backend_name):
        scope["reversed_slabs"][5](slabs, y, z)
    np.testing.assert_array_equal(y[:, 16:], slabs[::-1, 16:])
    np.testing.assert_array_equal(z[:, 16:], 2 * slabs[::-1, 16:])
    assert np.isnan(y[:, :16]).all() and np.isnan(z[:, :16]).all()


def test_arguments_may_be_passed_by_name():
    scope, _ = define("""
        @qnb.kernel
        def axpy(x, y, out, a: qnb.f32):
            i = qnb.program_id(0) * 16
            (Vec16.load(x, i) * a + Vec16.load(y, i)).store(out, i)
        """)
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((2, 32)).astype(np.float32)
    want = 3 * x + y
    for launch in (
        lambda out: scope["axpy"][2](x, y, out=out, a=3.0),
        lambda out: scope["axpy"][2](a=3.0, out=out, y=y, x=x),
        lambda out: scope["axpy"].trace[2](x, y, a=3.0, out=out),
    ):
        out = np.full(32, np.nan, np.float32)
        launch(out)
        np.testing.assert_allclose(out, want, rtol=1e-6)


COPY_TILE = """
    @qnb.kernel
    def copy(src, dst):
        Tile16.load(src, 0, 0).store(dst, 0, 0)
    """


def test_a_read_only_array_is_refused_only_where_the_kernel_stores(backend_name):
    scope, filename = define(COPY_TILE)
    frozen = np.arange(256, dtype=np.float32).reshape(16, 16)
    frozen.flags.writeable = False
    out = np.zeros((16, 16), np.float32)
    with qnb.backend(backend_name):
        scope["copy"](frozen, out)  # read only: fine
        np.testing.assert_array_equal(out, frozen)
        with pytest.raises(qnb.QnbTypeError, match="'dst' is read-only") as info:
            scope["copy"](out, frozen)
        if backend_name == "cpu":  # a trace runs on the cpu backend too
            with pytest.raises(qnb.QnbTypeError, match="'dst' is read-only"):
                scope["copy"].trace[1](out, frozen)
    assert info.value.filename == filename and info.value.lineno == 3  # the def line
    assert "def copy(src, dst)" in str(info.value)


def test_another_backends_device_array_is_refused_at_its_parameter(backend_name):
    scope, filename = define(COPY_TILE)
    other = "cuda-host" if backend_name == "cpu" else "cpu"
    with qnb.backend(other):
        foreign = qnb.to_device(np.ones((16, 16), np.float32))
    with qnb.backend(backend_name), pytest.raises(qnb.QnbError) as info:
        scope["copy"](foreign, np.zeros((16, 16), np.float32))
    err = info.value
    assert err.filename == filename and err.lineno == 3, err
    shown, caret = str(err).splitlines()[2:4]
    assert caret.index("^") == shown.index("src"), str(err)  # the caret is at src


def test_a_dimension_past_i32_is_refused_before_anything_is_copied(backend_name, tmp_path):
    # A sparse file: 2**31 f16 elements of address space and no memory; the launch must
    # refuse the shape before it reads (or copies) any of it.
    scope, filename = define("""
        @qnb.kernel
        def head(x, out):
            Vec16.load(x, 0).store(out, 0)
        """)
    path = tmp_path / "huge.f16"
    with open(path, "wb") as f:
        f.truncate(2**32)
    huge = np.memmap(path, np.float16, mode="r", shape=(2**31,))
    with (
        qnb.backend(backend_name),
        pytest.raises(qnb.QnbTypeError, match="below 2\\*\\*31") as info,
    ):
        scope["head"](huge, np.zeros(16, np.float16))
    assert info.value.filename == filename and info.value.lineno == 3


def test_cuda_flat_offsets_are_64_bit():
    scope, _ = define("""
        @qnb.kernel
        def k(x: qnb.Array[qnb.f32, 3], out: qnb.Array[qnb.f32, 2]):
            b = qnb.program_id(0)
            Tile16.load(x[b], 0, 0).store(out, 0, 0)
            out[1, 2] = x[b, 3, 4]
        """)
    cuda, wgsl = scope["k"].source("cuda"), scope["k"].source("wgsl")
    assert cuda.count("(long long)") >= 4  # the slab, row and element offsets
    assert "long" not in wgsl  # WGSL indexes in i32: a storage binding is far smaller


@pytest.mark.parametrize("grid", [(3, 5, 2), (7,), (2, 9)])
def test_cuda_folds_a_grid_past_its_y_and_z_limits_on_cuda_host(monkeypatch, grid):
    # CUDA launches at most 65535 blocks on y and z; past that qnb launches the programs
    # in a row on x and the kernel recovers their ids. Run here on cuda-host with the
    # limits lowered to 4, so that small grids take the folded path.
    from qnb.backends import cuda
    from tests.conftest import require_backend
    from tests.helpers import check_program_ids

    require_backend("cuda-host")
    monkeypatch.setattr(cuda, "_MAX_GRID", (2**31 - 1, 4, 4))
    check_program_ids("cuda-host", grid, holds_tile=True)
    monkeypatch.setattr(cuda, "_MAX_GRID", (8, 4, 4))
    with pytest.raises(qnb.BackendError, match="at most 8"):
        check_program_ids("cuda-host", (3, 5), holds_tile=True)


@pytest.mark.parametrize("grid", [(1,), (127,), (300,), (7, 50), (3, 5, 20), (2, 70000)])
def test_cuda_runs_a_program_per_thread_when_the_kernel_holds_no_tile(monkeypatch, grid):
    # 128 programs to a block, in a row on x whatever the grid's shape (so y and z have
    # no 65535 limit); threads of the last block past the last program do nothing.
    from qnb.backends import cuda
    from tests.conftest import require_backend
    from tests.helpers import check_program_ids

    require_backend("cuda-host")
    check_program_ids("cuda-host", grid)
    monkeypatch.setattr(cuda, "_MAX_GRID", (2, 4, 4))  # 2 blocks: 256 programs
    check_program_ids("cuda-host", (256,))
    with pytest.raises(qnb.BackendError, match="at most 256"):
        check_program_ids("cuda-host", (257,))


def test_programs_storing_to_one_block_leave_one_of_their_values(backend_name):
    # A race between programs has no defined winner (see ARCHITECTURE), but it is no
    # error: every element ends up with some program's value. (The cpu backend raised a
    # NumPy shape error here when the block was aligned.)
    scope, _ = define("""
        @qnb.kernel
        def race(out):
            p = qnb.program_id(0)
            Tile16.full(p * 1.0 + 1.0, qnb.f32).store(out, 16, 0)
        """)
    out = np.zeros((32, 16), np.float32)
    with qnb.backend(backend_name):
        scope["race"][3](out)
    assert np.isin(out[16:], [1.0, 2.0, 3.0]).all(), out[16:]
    assert (out[:16] == 0).all()


def test_each_func_object_enters_the_key_under_its_own_unit():
    # Two modules with a func of one name, each reading its own FACTOR: both values
    # must be in the key (one of them missing would serve a stale kernel across processes).
    moda, _ = define(
        "FACTOR = 2.0\n@qnb.func\ndef scale(t):\n    return t * FACTOR\n", {"__name__": "moda"}
    )
    modb, _ = define(
        "FACTOR = 1.0\n@qnb.func\ndef scale(t):\n    return t * FACTOR\n", {"__name__": "modb"}
    )

    def make(s):
        @qnb.func
        def f(t):
            return t * s

        return f

    f2, f3 = make(2.0), make(3.0)
    scope, _ = define(
        """
        @qnb.kernel
        def k(o):
            t = Tile16.ones(qnb.f32)
            (scale_a(t) + scale_b(t) * 10.0 + f2(t) * 100.0 + f3(t) * 1000.0).store(o, 0, 0)
        """,
        {"scale_a": moda["scale"], "scale_b": modb["scale"], "f2": f2, "f3": f3},
    )
    out = np.zeros((16, 16), np.float32)
    scope["k"](out)
    assert out[0, 0] == 2 + 10 + 200 + 3000
    components = qnb.cache.events()[-1].components
    factory = f"{__name__}:{make.__qualname__}.<locals>.f"
    assert set(components["captured"]) == {
        "moda:scale.FACTOR",
        "modb:scale.FACTOR",
        f"{factory}.s",
        f"{factory}#2.s",
    }
    assert {"moda:scale", "modb:scale", factory, f"{factory}#2"} <= set(components["source"])


def test_always_compile_compiles_every_launch(monkeypatch):
    scope, _ = define("@qnb.kernel\ndef k(y):\n    y[0] = 1\n")
    y = np.zeros(1, np.int32)
    scope["k"](y)
    monkeypatch.setenv("QNB_ALWAYS_COMPILE", "1")
    scope["k"](y)
    scope["k"](y)
    assert [e.outcome for e in qnb.cache.events()[-2:]] == ["miss", "miss"]
    monkeypatch.delenv("QNB_ALWAYS_COMPILE")
    scope["k"](y)
    assert qnb.cache.events()[-1].outcome == "memory-hit"
