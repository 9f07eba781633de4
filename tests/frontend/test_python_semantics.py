"""Kernels compute what the same Python would: evaluation order, rebinding, short-circuit
values, conversions and powers. Each test here was a silent wrong answer once; they run on
the cpu backend and on wgpu (lavapipe here), which share nothing but the IR."""

import numpy as np
import pytest

import qnb
from tests.conftest import require_backend
from tests.helpers import define, skip_unless_dtype_runs

I32_MAX, I32_MIN = 2**31 - 1, -(2**31)


@pytest.fixture(params=["cpu", "wgpu"])
def backend(request):
    require_backend(request.param)
    with qnb.backend(request.param):
        yield request.param


@pytest.fixture
def cpu():
    with qnb.backend("cpu"):
        yield


def kernel(source, namespace=None, name="k"):
    scope, _ = define(source, namespace)
    return scope[name]


def launch_error(source, *args, error=qnb.QnbError, namespace=None):
    with pytest.raises(error) as info:
        kernel(source, namespace)(*args)
    return info.value


# ------------------------------------------------------------------ tuple assignment


def test_tuple_assignment_computes_every_value_before_assigning(backend):
    k = kernel("""
        @qnb.kernel
        def k(x, y):
            a, b = x[0], x[1]
            a, b = b, a
            y[0] = a
            y[1] = b
            c, d = x[0], x[1]
            for i in qnb.static(range(5)):
                c, d = d, c + d
            y[2] = c
            e = f = x[0] + 1
            e = f = e + 1
            y[3] = e
            y[4] = f
        """)
    y = np.zeros(5, np.int32)
    k(np.array([5, 7], np.int32), y)
    # swap; fibonacci from (5, 7): 7, 12, 19, 31, 50; chained assignment: e == f == 7
    np.testing.assert_array_equal(y, [7, 5, 50, 7, 7])


def test_tuple_assignment_swaps_tiles(backend):
    k = kernel("""
        @qnb.kernel
        def k(x, y):
            t = Tile16.load(x, 0, 0)
            u = Tile16.zeros()
            t, u = u, t
            t.store(y, 0, 0)
            u.store(y, 0, 16)
        """)
    y = np.full((16, 32), -1, np.float32)
    k(np.ones((16, 16), np.float32), y)
    np.testing.assert_array_equal(y[:, :16], 0)
    np.testing.assert_array_equal(y[:, 16:], 1)


# ------------------------------------------------------------------ runtime control flow


def test_an_array_rebound_under_a_runtime_if_is_refused_naming_the_line(cpu):
    source = """
        @qnb.kernel
        def k(a, b, f: qnb.i32):
            out = a
            if f > 0:
                out = b
            out[0] = 1.0
        """
    a, b = np.zeros(1, np.float32), np.zeros(1, np.float32)
    err = launch_error(source, a, b, 0, error=qnb.QnbTypeError)
    assert "'out'" in err.message and "cannot be rebound under a runtime condition" in err.message
    assert "line 6" in err.message and err.lineno == 7  # the rebinding, then the use
    assert (a == 0).all() and (b == 0).all()


def test_a_tuple_rebound_under_a_runtime_if_is_refused(cpu):
    source = """
        @qnb.kernel
        def k(y, f: qnb.i32):
            p = (1, 2)
            if f > 0:
                p = (10, 20)
            y[0] = p[0]
        """
    err = launch_error(source, np.zeros(1, np.int32), 0, error=qnb.QnbTypeError)
    assert "'p'" in err.message and "runtime condition" in err.message


def test_compile_time_bindings_that_agree_or_stay_in_their_branch_are_fine(backend):
    k = kernel("""
        @qnb.kernel
        def k(a, b, f: qnb.i32):
            dt = qnb.f32
            if f > 0:
                dt = qnb.f32
                out = b
                out[0] = 1.0
            else:
                out = a
                out[0] = Tile16.ones(dt).sum()
        """)
    for flag, expected_a, expected_b in ((0, 256.0, 0.0), (1, 0.0, 1.0)):
        a, b = np.zeros(1, np.float32), np.zeros(1, np.float32)
        k(a, b, flag)
        assert (a[0], b[0]) == (expected_a, expected_b)


def test_a_loop_that_reads_then_rebinds_an_array_is_refused(cpu):
    source = """
        @qnb.kernel
        def k(a, b, n: qnb.i32):
            out = a
            for i in range(n):
                out[i] = 1.0
                out = b
        """
    err = launch_error(source, np.zeros(3, np.float32), np.zeros(3, np.float32), 3)
    assert isinstance(err, qnb.QnbTypeError) and "'out'" in err.message
    assert "line 6" in err.message and err.lineno == 7


def test_a_loop_that_binds_an_array_before_reading_it_is_fine(backend):
    k = kernel("""
        @qnb.kernel
        def k(a, b, n: qnb.i32):
            out = a
            for i in range(n):
                out = b
                out[i] = 1.0
        """)
    a, b = np.zeros(3, np.float32), np.zeros(3, np.float32)
    k(a, b, 3)
    assert (a == 0).all() and (b == 1).all()


def test_a_static_loop_number_assigned_under_a_runtime_loop_or_if_becomes_runtime(backend):
    k = kernel("""
        @qnb.kernel
        def k(x, y):
            for i in qnb.static(range(2)):
                s = 0.0
                for j in range(x.shape[0]):
                    s = s + x[j]
                y[i] = s
                c = 1.0
                if x[0] > 100.0:
                    c = 5.0
                y[2 + i] = c
        """)
    y = np.zeros(4, np.float32)
    k(np.arange(4, dtype=np.float32), y)
    np.testing.assert_array_equal(y, [6, 6, 1, 1])


# ------------------------------------------------------------------ funcs


def test_funcs_made_by_one_factory_are_distinct_units(backend):
    def make_scale(s):
        @qnb.func
        def scale(v):
            return v * s

        return scale

    @qnb.func
    def base(v):
        return v

    def plus_one(inner):
        @qnb.func
        def f(v):
            return inner(v) + 1

        return f

    double, triple = make_scale(2), make_scale(3)
    plus_two = plus_one(plus_one(base))

    @qnb.kernel
    def k(y):
        y[0] = double(1)
        y[1] = triple(1)
        y[2] = plus_two(1)

    y = np.zeros(3, np.int32)
    k(y)
    np.testing.assert_array_equal(y, [2, 3, 3])


def test_a_func_that_calls_itself_is_still_refused(cpu):
    source = """
        @qnb.func
        def again(v):
            return again(v)

        @qnb.kernel
        def k(y):
            y[0] = again(1)
        """
    err = launch_error(source, np.zeros(1, np.int32), error=qnb.QnbTypeError)
    assert "calls itself" in err.message


def test_generated_names_never_meet_the_users(backend):
    k = kernel("""
        @qnb.func
        def f(a):
            return a * 10

        @qnb.kernel
        def k(x, y):
            choice_1 = 7
            and_2 = 8
            f_1_a = 9
            batch_1 = 4
            b = x[0] if x[1] > 0 else x[2]
            c = x[1] > 0 and f(x[1]) > 0
            d = f(x[0])
            y[0] = choice_1
            y[1] = and_2
            y[2] = f_1_a
            y[3] = batch_1
            y[4] = b
            y[5] = c
            y[6] = d
        """)
    y = np.zeros(7, np.int32)
    k(np.array([1, 1, 2], np.int32), y)
    np.testing.assert_array_equal(y, [7, 8, 9, 4, 1, 1, 10])


def test_a_trace_shows_the_users_names():
    k = kernel("""
        @qnb.func
        def f(a):
            b = a * 10
            return b

        @qnb.kernel
        def k(x, y):
            v = f(x[0])
            y[0] = v
        """)
    trace = k.trace(np.ones(1, np.float32), np.zeros(1, np.float32))
    targets = {step.target for step in trace.steps(0)}
    assert {"a", "b", "v"} <= targets


def test_reassigning_a_func_parameter_leaves_the_callers_tile_alone(backend):
    k = kernel("""
        @qnb.func
        def total_plus_one(t):
            t = t + 1.0
            return t.sum()

        @qnb.kernel
        def k(x, y, s):
            t = Tile16.load(x, 0, 0)
            s[0] = total_plus_one(t)
            t.store(y, 0, 0)
        """)
    x = np.ones((16, 16), np.float32)
    y, s = np.zeros_like(x), np.zeros(1, np.float32)
    k(x, y, s)
    assert s[0] == 512 and (y == 1).all()


def test_in_place_ops_on_a_func_parameter_reach_the_caller(backend):
    k = kernel("""
        @qnb.func
        def update(t, u):
            u.eye_()
            t += 1.0
            t[0, 0] = 5.0
            t[:] = t * 2.0

        @qnb.kernel
        def k(y):
            t = Tile16.zeros()
            u = Tile16.zeros()
            update(t, u)
            t.store(y, 0, 0)
            u.store(y, 0, 16)
        """)
    y = np.zeros((16, 32), np.float32)
    k(y)
    expected = np.full((16, 16), 2.0, np.float32)
    expected[0, 0] = 10.0
    np.testing.assert_array_equal(y[:, :16], expected)
    np.testing.assert_array_equal(y[:, 16:], np.eye(16))


def test_a_parameter_reassigned_under_a_runtime_condition(backend):
    k = kernel("""
        @qnb.func
        def maybe_double(t, f):
            if f > 0:
                t = t * 2.0
            return t.sum()

        @qnb.kernel
        def k(x, y, f: qnb.i32):
            t = Tile16.load(x, 0, 0)
            y[0] = maybe_double(t, f)
            y[1] = t.sum()
        """)
    y = np.zeros(2, np.float32)
    k(np.ones((16, 16), np.float32), y, 1)
    np.testing.assert_array_equal(y, [512, 256])
    with qnb.backend("cpu"):
        err = launch_error(
            """
            @qnb.func
            def bad(t, f):
                if f > 0:
                    t = t * 2.0
                t.eye_()

            @qnb.kernel
            def k(y, f: qnb.i32):
                t = Tile16.zeros()
                bad(t, f)
                t.store(y, 0, 0)
            """,
            np.zeros((16, 16), np.float32),
            1,
            error=qnb.QnbTypeError,
        )
    assert "'t' is reassigned under the runtime condition at line" in err.message


def test_a_funcs_result_is_taken_when_it_returns(backend):
    k = kernel("""
        @qnb.func
        def first(c):
            return c[0]

        @qnb.func
        def bump(c):
            c[0] = 10
            return 1

        @qnb.kernel
        def k(c, y):
            y[0] = first(c) + bump(c)
        """)
    c, y = np.zeros(1, np.int32), np.zeros(1, np.int32)
    k(c, y)
    assert c[0] == 10 and y[0] == 1  # first(c) read c[0] before bump stored 10


# ------------------------------------------------------------------ augmented assignment


def test_augmented_assignment_evaluates_its_target_once(backend):
    k = kernel("""
        @qnb.func
        def next_slot(c):
            c[0] = c[0] + 1
            return c[0]

        @qnb.func
        def bump(y):
            y[0] = 10
            return 1

        @qnb.kernel
        def k(c, y, z):
            y[next_slot(c)] += 1
            t = Tile16.zeros(qnb.i32)
            t[next_slot(c), 0] += 5
            t.store(z, 0, 0)
            y[0] += bump(y)
        """)
    c, y, z = np.zeros(1, np.int32), np.zeros(4, np.int32), np.zeros((16, 16), np.int32)
    k(c, y, z)
    # y[0] += bump(y): Python reads y[0] (0) before bump stores 10 there.
    assert c[0] == 2
    np.testing.assert_array_equal(y, [1, 1, 0, 0])
    assert z[2, 0] == 5 and z.sum() == 5


# ------------------------------------------------------------------ powers and conversions


@pytest.mark.parametrize("backend_name", ["cpu", "wgpu", "cuda-host"])
def test_integer_powers_stay_integers_and_wrap(backend_name):
    require_backend(backend_name)
    k = kernel("""
        @qnb.kernel
        def k(x, y, z):
            i = qnb.program_id(0)
            y[i] = x[i, 0] ** x[i, 1]
            z[i] = x[i, 0] ** 9
        """)
    x = np.array([[7, 9], [3, 20], [-3, 3], [0, 0], [-2, 31], [2, 40], [-7, 11]], np.int32)
    y, z = np.zeros(len(x), np.int32), np.zeros(len(x), np.int32)
    with qnb.backend(backend_name):
        k[len(x)](x, y, z)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(y, x[:, 0] ** x[:, 1])
        np.testing.assert_array_equal(z, x[:, 0] ** np.int32(9))


def test_an_integer_to_a_negative_literal_power_is_a_float(cpu):
    k = kernel("""
        @qnb.kernel
        def k(x, y):
            y[0] = x[0] ** -1
        """)
    y = np.zeros(1, np.float32)
    k(np.array([4], np.int32), y)
    assert y[0] == 0.25


def test_constant_conversions_round_and_saturate_as_the_runtime_ones(backend):
    k = kernel("""
        @qnb.kernel
        def k(x, y, z):
            y[0] = qnb.f16(0.1)
            y[1] = qnb.f16(x[0])
            y[2] = qnb.f32(0.1)
            y[3] = qnb.f32(x[0])
            y[4] = float(0.1)
            z[0] = qnb.i32(3.9e10)
            z[1] = int(-3.9e10)
            z[2] = qnb.i32(-2.9)
            z[3] = qnb.i32(x[1])
        """)
    skip_unless_dtype_runs(backend, np.float16)
    y, z = np.zeros(5, np.float32), np.zeros(4, np.int32)
    k(np.array([0.1, 3.9e10], np.float32), y, z)
    f16, f32 = float(np.float16(0.1)), float(np.float32(0.1))
    np.testing.assert_array_equal(y, np.float32([f16, f16, f32, f32, f32]))
    np.testing.assert_array_equal(z, [I32_MAX, I32_MIN, -2, I32_MAX])


def test_constant_conversions_past_the_range_and_of_special_strings(cpu):
    k = kernel("""
        @qnb.kernel
        def k(x, y, z):
            m = float("-inf")
            for i in range(x.shape[0]):
                m = max(m, x[i])
            y[0] = m
            y[1] = qnb.f16(70000.0)
            y[2] = float("inf")
            y[3] = float("nan")
            y[4] = qnb.f64("-inf")
            z[0] = qnb.i32(float("nan"))
        """)
    y, z = np.zeros(5, np.float64), np.ones(1, np.int32)
    k(np.float32([-3, -1, -2]), y, z)
    assert y[0] == -1 and y[1] == np.inf and y[2] == np.inf and np.isnan(y[3])
    assert y[4] == -np.inf and z[0] == 0


# ------------------------------------------------------------------ and / or


def test_and_or_give_the_deciding_operand_as_python_does(backend):
    k = kernel("""
        @qnb.kernel
        def k(x, y):
            y[0] = x[0] or 2.5
            y[1] = x[1] and 2.5
            y[2] = x[0] or x[1] or 7.0
            y[3] = 0.0 or x[1]
            y[4] = 2.5 or x[0]
            y[5] = (x[0] > 0) or (x[1] > 0)
            y[6] = x[2] > 0 and x[0] or 9.0
        """)
    x = np.float32([0.0, 3.0, 1.0])
    y = np.zeros(7, np.float32)
    k(x, y)
    a, b, c = (float(v) for v in x)
    expected = [a or 2.5, b and 2.5, a or b or 7.0, 0.0 or b, 2.5, (a > 0) or (b > 0)]
    np.testing.assert_array_equal(y, [*expected, (c > 0 and a) or 9.0])


def test_or_runs_its_right_side_only_when_python_would(backend):
    k = kernel("""
        @qnb.func
        def mark(c):
            c[0] = c[0] + 1
            return 4.0

        @qnb.kernel
        def k(x, c, y):
            y[0] = x[0] or mark(c)
            y[1] = x[1] or mark(c)
        """)
    c, y = np.zeros(1, np.int32), np.zeros(2, np.float32)
    k(np.float32([2.0, 0.0]), c, y)
    assert c[0] == 1 and list(y) == [2.0, 4.0]


# ------------------------------------------------------------------ captured values


def test_numpy_scalars_captured_or_passed_as_templates_are_values(backend):
    k = kernel(
        """
        @qnb.kernel
        def k(x, y, n: qnb.Template):
            for i in range(n):
                y[i] = x[i] * S + SIZES[-1]
            y[3] = x.shape[-1]
        """,
        {"S": np.float32(0.5), "SIZES": (np.int64(4), np.int32(8))},
    )
    y = np.zeros(4, np.float32)
    k(np.float32([2, 4, 6]), y, np.int64(3))
    np.testing.assert_array_equal(y, [9, 10, 11, 3])


def test_a_negative_literal_element_index_is_refused_when_lowered(cpu):
    for line in ("y[0] = x[-1]", "y[0] = Tile16.zeros()[0, -1]", "x[-1] = 1.0"):
        err = launch_error(
            f"@qnb.kernel\ndef k(x, y):\n    {line}\n",
            np.zeros(2, np.float32),
            np.zeros(1, np.float32),
            error=qnb.QnbSyntaxError,
        )
        assert "Negative indices" in err.message and err.lineno == 3


# ------------------------------------------------------------------ first assigned in a loop


def test_a_variable_first_assigned_in_a_loop_is_readable_after_it(backend):
    # A runtime variable is one storage on every path: the path where the loop body never
    # ran leaves it as it was (zero), it does not make the name ambiguous.
    k = kernel("""
        @qnb.func
        def split(t):
            return t * 2.0, t + 1.0, t.sum()

        @qnb.kernel
        def k(x, y, z, n: qnb.i32):
            for i in range(n):
                last = x[i]
            y[0] = last
            i = 0
            while i < n:
                t = Tile16.full(x[i], qnb.f32)
                i += 1
            y[1] = t[0, 0]
            for i in range(n):
                c, a2, s = split(Tile16.full(x[i], qnb.f32))
            c.store(z, 0, 0)
            a2.store(z, 0, 16)
            y[2] = s
        """)
    x = np.float32([1, 2, 3])
    for n in (3, 0):
        y, z = np.full(3, -1, np.float32), np.full((16, 32), -1, np.float32)
        k(x, y, z, n)
        last = x[n - 1] if n else 0.0
        np.testing.assert_array_equal(y, [last, last, 256 * last])
        np.testing.assert_array_equal(z[:, :16], 2 * last)
        np.testing.assert_array_equal(z[:, 16:], last + 1 if n else 0.0)


# ------------------------------------------------------------------ static loops under runtime flow


def test_a_static_loops_number_under_a_runtime_if_becomes_a_runtime_variable(backend):
    k = kernel("""
        @qnb.kernel
        def k(x, y, n: qnb.i32):
            if n > 0:
                for i in qnb.static(range(3)):
                    m = i * 10
            else:
                m = 7
            y[0] = m
            if n > 0:
                for i in qnb.static(range(3)):
                    h = i * 0.5
            else:
                h = 7
            y[1] = h
            for j in range(n):
                for i in qnb.static(range(3)):
                    b = i * 10 + j
                if x[j] > 0.0:
                    break  # after the static loop: b is the static loop's last value
                b = -1
            y[2] = b
        """)
    x = np.float32([0, 1, 0])
    for n, expected in ((3, [20, 1.0, 21]), (1, [20, 1.0, -1]), (0, [7, 7.0, 0])):
        y = np.full(3, -5, np.float32)
        k(x, y, n)
        np.testing.assert_array_equal(y, expected)


def test_a_static_loop_variable_keeps_its_last_item(backend):
    k = kernel("""
        @qnb.kernel
        def k(y, n: qnb.i32):
            i = 5
            for i in qnb.static(range(3)):
                pass
            y[0] = i
            j = 5
            for j in qnb.static(range(0)):
                pass
            y[1] = j
            for r in range(n):
                for q in qnb.static(range(4)):
                    y[3] = r
            y[2] = q
        """)
    for n, expected in ((2, [2, 5, 3, 1]), (0, [2, 5, 0, -1])):
        y = np.full(4, -1, np.int32)
        k(y, n)
        np.testing.assert_array_equal(y, expected)


def test_static_loop_numbers_that_stay_inside_a_runtime_block_cost_no_store(cpu):
    k = kernel("""
        @qnb.kernel
        def k(y, n: qnb.i32):
            for j in range(n):
                for i in qnb.static(range(3)):
                    off = i * 2
                    y[off] = j
        """)
    text = k.source("ir", np.zeros(8, np.int32), 1)
    assert "local j" in text and "local i" not in text and "local off" not in text, text


# ------------------------------------------------------------------ evaluation order


def test_operands_are_taken_before_a_later_call_changes_them(backend):
    source = """
        @qnb.func
        def bump_arr(x):
            x[0] = x[0] + 10.0
            return 1.0

        @qnb.func
        def bump(a):
            a += 1.0
            return 0.0

        @qnb.func
        def add3(a, b, c):
            return a * 100.0 + b * 10.0 + c

        @qnb.func
        def next_slot(c):
            c[0] = c[0] + 1
            return c[0]

        @qnb.kernel
        def k(x, y, c):
            t = Tile16.zeros(qnb.f32)
            y[0] = t[0, 0] + bump(t)
            y[1] = x[0] + bump_arr(x)
            y[2] = add3(x[0], bump_arr(x), x[0])
            y[3] = max(x[0], bump_arr(x) + 20.0)
            y[4] = x[0] < bump_arr(x) + 30.0
            y[next_slot(c) + 4] = x[0]
            y[6] = t.sum() + bump(t) + t[0, 0]
            y[7] = (t + bump(t))[0, 0]  # a tile variable is the tile, as an array is
            a, b = x[0], bump_arr(x)
            y[8] = a
            y[9] = x[0]
        """
    scope, _ = define(source)
    x, y, c = np.float32([2.0]), np.full(10, np.nan, np.float32), np.zeros(1, np.int32)
    scope["k"](x, y, c)
    # The same source run as Python, with NumPy arrays for the tiles.
    python, _ = define(source.replace("@qnb.func", "").replace("@qnb.kernel", ""))
    python["Tile16"] = type("T", (), {"zeros": staticmethod(lambda d: np.zeros((16, 16)))})
    px, py, pc = np.float32([2.0]), np.full(10, np.nan, np.float32), np.zeros(1, np.int32)
    python["k"](px, py, pc)
    np.testing.assert_array_equal(y, py)
    assert x[0] == px[0] and c[0] == pc[0] == 1


def test_operands_are_not_copied_when_nothing_later_runs_code(cpu):
    k = kernel("""
        @qnb.func
        def twice(v):
            return v * 2.0

        @qnb.kernel
        def k(x, y):
            y[0] = x[0] + twice(x[1]) * x[2] < x[3]
        """)
    text = k.source("ir", np.zeros(4, np.float32), np.zeros(1, np.float32))
    assert "operand" not in text, text


def test_a_chained_comparison_short_circuits_and_evaluates_its_middle_once(backend):
    k = kernel("""
        @qnb.func
        def side(c, v):
            c[0] = c[0] + 1
            return v

        @qnb.kernel
        def k(x, c, y):
            y[0] = x[0] < x[1] < side(c, 5.0)
            y[1] = x[1] < side(c, 3.0) < x[0]
            y[2] = 0 < 1 < x[0] <= x[0]
        """)
    c, y = np.zeros(1, np.int32), np.full(3, -1, np.float32)
    k(np.float32([2.0, 1.0]), c, y)
    assert c[0] == 1  # the first comparison is false: side() runs once, for y[1]
    np.testing.assert_array_equal(y, [0, 0, 1])


# ------------------------------------------------------------------ tuple targets


def test_tuple_assignment_to_elements_and_from_a_shape(backend):
    k = kernel("""
        @qnb.kernel
        def k(y, d, x, i: qnb.i32, j: qnb.i32):
            y[i], y[j] = y[j], y[i]
            rows, cols = x.shape
            d[0] = rows
            d[1] = cols
            t = Tile16.load(x, 0, 0)
            t[0, 0], t[0, 1] = t[0, 1], t[0, 0]
            d[2] = qnb.i32(t[0, 0])
            n, d[n] = 3, 77
        """)
    y, d = np.float32([1, 2, 3]), np.zeros(4, np.int32)
    x = np.arange(16 * 20, dtype=np.float32).reshape(16, 20)
    k(y, d, x, 0, 2)
    np.testing.assert_array_equal(y, [3, 2, 1])
    np.testing.assert_array_equal(d, [16, 20, 1, 77])


# ------------------------------------------------------------------ qnb.static


def test_static_reads_numbers_bound_outside_runtime_control_flow(backend):
    k = kernel("""
        @qnb.kernel
        def k(y, shape: qnb.Template):
            rows, cols = shape
            n = qnb.static(2)
            for j in qnb.static(range(cols)):
                y[j] = j
            for j in qnb.static(range(n)):
                y[4 + j] = rows
        """)
    y = np.zeros(6, np.float32)
    k(y, (7, 3))
    np.testing.assert_array_equal(y, [0, 1, 2, 0, 7, 7])
    with qnb.backend("cpu"):
        err = launch_error(
            """
            @qnb.kernel
            def k(y, f: qnb.i32):
                n = 2
                if f > 0:
                    n = 3
                for j in qnb.static(range(n)):
                    y[j] = 1.0
            """,
            np.zeros(4, np.float32),
            1,
            error=qnb.QnbTypeError,
        )
    assert "'n' is a runtime value" in err.message


def test_static_may_call_library_functions_which_enter_the_key_by_name(cpu):
    import math

    k = kernel(
        """
        @qnb.kernel
        def k(y):
            for i in qnb.static(range(sum(SIZES))):
                y[i] = i
            y[6] = qnb.static(math.ceil(len(str(sorted(SIZES)))) + int(np.prod(SIZES)))
        """,
        {"SIZES": (3, 1, 2), "math": math},
    )
    y = np.zeros(7, np.float32)
    k(y)
    np.testing.assert_array_equal(y, [0, 1, 2, 3, 4, 5, 15])
    captured = qnb.cache.events()[-1].components["captured"]
    assert captured["sum"] == ["library", "builtins.sum"]
    assert captured["math.ceil"] == ["library", "math.ceil"]
    assert captured["np.prod"] == ["library", "numpy.prod"]
    assert "sum: builtins.sum" in qnb.cache.explain(k)  # shown by its name


def test_static_refuses_functions_no_key_can_follow(cpu):
    def helper(n):
        return n * 2

    for name, value in (("helper", helper), ("open", open)):
        err = launch_error(
            f"""
            @qnb.kernel
            def k(y):
                y[0] = qnb.static({name}(1))
            """,
            np.zeros(1, np.float32),
            namespace={name: value},
            error=qnb.QnbCaptureError,
        )
        assert f"calls {name!r}" in err.message and "inside qnb.static(...)" in err.message
        assert err.lineno == 4


# ---- what a kernel reads must be in its key (each of these served a stale kernel)


def test_an_intrinsic_under_another_name_enters_the_key(cpu):
    scope, _ = define("@qnb.kernel\ndef k(x):\n    x[0] = OP(x[1], x[2])\n", {"OP": max})
    k = scope["k"]
    x = np.array([0, 1, 5], np.float32)
    k(x)
    assert x[0] == 5
    scope["OP"] = min  # as a later notebook cell would
    x = np.array([0, 1, 5], np.float32)
    k(x)
    assert x[0] == 1
    event = qnb.cache.events()[-1]
    assert event.outcome == "miss" and "captured.OP" in event.reason


def test_static_refuses_getattr_on_a_module(cpu):
    import types

    cfg = types.ModuleType("cfg")
    cfg.SCALE = 2.0
    err = launch_error(
        """
        @qnb.kernel
        def k(x):
            x[0] = qnb.static(getattr(cfg, "SCALE"))
        """,
        np.zeros(2, np.float32),
        error=qnb.QnbCaptureError,
        namespace={"cfg": cfg},
    )
    assert "'getattr'" in err.message and "qnb.static" in err.message


def test_an_enum_member_whose_value_is_not_a_constant_is_refused(cpu):
    import enum

    class Mode(enum.Enum):
        A = [2.0]

    err = launch_error(
        "@qnb.kernel\ndef k(x):\n    x[0] = qnb.static(M.value[0])\n",
        np.zeros(2, np.float32),
        error=qnb.QnbCaptureError,
        namespace={"M": Mode.A},
    )
    assert "'M.value'" in err.message or "'M'" in err.message


def test_a_comprehension_variable_in_static_has_its_own_scope(cpu):
    k = kernel(
        """
        @qnb.kernel
        def k(x):
            s = qnb.static(sum(N for N in range(3)))
            x[0] = N + s
        """,
        {"N": 2.0},
    )
    x = np.zeros(2, np.float32)
    k(x)
    assert x[0] == 5.0


# ------------------------------------------- an early return that compile-time pruning ends

EARLY_RETURN = """
    @qnb.func
    def pick(t):
        if qnb.static(DOUBLE):
            return t * 2.0
        elif qnb.static(NEGATE):
            if qnb.static(TWICE):
                return -t - t
            return -t
        t = t + 1.0
        return t

    @qnb.kernel
    def k(x, y):
        t = qnb.Tile16.load(x, 0, 0)
        pick(t).store(y, 0, 0)
        if qnb.static(STOP):
            return
        y[0, 0] = 100.0
    """


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"DOUBLE": True}, lambda x: x * 2),
        ({"NEGATE": True, "TWICE": True}, lambda x: -2 * x),
        ({"NEGATE": True}, lambda x: -x),
        ({}, lambda x: x + 1),
    ],
)
@pytest.mark.parametrize("stop", [True, False])
def test_an_early_return_in_a_compile_time_branch_ends_the_func(backend, flags, expected, stop):
    """As in Python: the taken branch's return ends the func (or the kernel), and the
    statements after it never run."""
    names = {"DOUBLE": False, "NEGATE": False, "TWICE": False, **flags, "STOP": stop}
    k = kernel(EARLY_RETURN, names)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    y = np.full((16, 16), np.nan, np.float32)
    k(x, y)
    want = expected(x)
    if not stop:
        want[0, 0] = 100.0
    np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.parametrize(
    "body,message",
    [
        (
            "for i in range(3):\n        if i == 1:\n            return t\n    return t",
            "return inside a for loop",
        ),
        ("while n > 0:\n        return t\n    return t", "return inside a while loop"),
        ("return t\n    t = t + 1.0", "the statements after this return never run"),
        (
            "if qnb.static(True):\n        return t\n        t = t + 1.0\n    return t",
            "the statements after this return never run",
        ),
    ],
)
def test_a_return_no_pruning_can_place_at_the_end_is_refused_at_decoration(body, message):
    with pytest.raises(qnb.QnbSyntaxError) as info:
        define(f"@qnb.func\ndef f(t, n):\n    {body}\n")
    assert message in info.value.message
    assert "`if qnb.static(...)`" in info.value.message
    assert info.value.lineno is not None and info.value.lineno >= 3


def test_an_early_return_under_a_runtime_if_is_refused_at_its_line(cpu):
    source = """
        @qnb.func
        def f(v, n):
            if n > 0:
                return v
            return v + 1

        @qnb.kernel
        def k(y, n):
            y[0] = f(1, n)
        """
    err = launch_error(source, np.zeros(1, np.int32), 3, error=qnb.QnbSyntaxError)
    assert "decided at run time" in err.message
    assert err.lineno == 5  # the return, in the cell's own numbering
