"""``qnb.Tile[M, N]`` and ``qnb.Vec[N]`` in the language and the front end: the type
objects, shapes as compile-time values, NumPy broadcasting (and its refusals, naming both
shapes), misuse of shaped ops, the cache key and ``source("ir")`` carrying the shape, and
the quadrants-compatible slice forms (run on cpu, against NumPy written here)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import qnb
from qnb import Tile, Tile16, Tile32, Vec, Vec16, Vec32
from qnb.backends.cpu.prepared import prepare
from tests.helpers import define

# ----------------------------------------------------------------------------- the types


def test_one_class_object_per_shape():
    assert qnb.Tile[16, 16] is qnb.Tile16 is Tile16
    assert qnb.Tile32 is qnb.Tile[32, 32] is Tile32
    assert qnb.Vec[16] is qnb.Vec16 is Vec16
    assert qnb.Vec[32] is qnb.Vec32 is Vec32
    assert Tile[8, 32] is Tile[8, 32]
    assert Tile[8, 32] is not Tile[32, 8]
    assert Tile[np.int64(8), 32] is Tile[8, 32]


def test_shape_and_size():
    assert Tile[8, 32].SHAPE == (8, 32)
    assert Tile16.SHAPE == (16, 16) and Tile16.SIZE == 16
    assert Tile32.SIZE == 32 and Tile[64, 64].SIZE == 64
    assert Vec[8].SIZE == 8 and Vec[8].SHAPE == (8,) and Vec16.SIZE == 16
    assert not hasattr(Tile[8, 32], "SIZE")  # SIZE is the side of a square tile
    assert not hasattr(Tile[8, 32], "eye")  # the identity is square only
    assert hasattr(Tile[8, 8], "eye")
    assert Tile[1, 1].SHAPE == (1, 1) and Tile[128, 128].SHAPE == (128, 128)
    assert Vec[16384].SIZE == 16384


def test_tile16_and_vec16_keep_their_docstrings():
    assert "Tile16.load(img, r - 1" in Tile16.load.__doc__
    assert "16×16" in Tile16.__doc__
    assert "Vec16.load(arr, r0, r1, col)" in Vec16.__doc__
    for name in ("load_", "store", "astype", "sum", "row", "col", "eye_", "cholesky_"):
        assert getattr(Tile16, name).__doc__
    assert Tile[8, 32].load.__doc__ == Tile16.load.__doc__


@pytest.mark.parametrize(
    "make,size",
    [
        (lambda: Tile[3, 4], "3"),
        (lambda: Tile[16, 256], "256"),
        (lambda: Tile[0, 16], "0"),
        (lambda: Tile[128, 256], "256"),
        (lambda: Vec[12], "12"),
        (lambda: Vec[32768], "32768"),
        (lambda: Tile[16], "16"),
        (lambda: Tile[True, 16], "True"),
    ],
)
def test_bad_shapes_raise_at_the_users_line(make, size):
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(qnb.QnbTypeError) as info:
        make()
    err = info.value
    assert size in err.message, err.message
    assert err.filename == __file__
    assert err.lineno in (line, _line_of(make))


def _line_of(fn) -> int:
    return fn.__code__.co_firstlineno


def test_constructors_outside_a_kernel_say_so():
    with pytest.raises(qnb.QnbOutsideKernelError, match=r"Tile\[8, 32\].zeros"):
        Tile[8, 32].zeros()
    with pytest.raises(qnb.QnbOutsideKernelError, match=r"Tile\[8, 32\]\(...\)"):
        Tile[8, 32](qnb.f32)
    with pytest.raises(qnb.QnbOutsideKernelError, match="arange"):
        qnb.arange(16)


# ----------------------------------------------------------------------------- in kernels


def launch_error(source, *args, error=qnb.QnbTypeError, namespace=None):
    scope, filename = define(source, {"Tile": Tile, "Vec": Vec, **(namespace or {})})
    with pytest.raises(error) as info, qnb.backend("cpu"):
        scope["k"](*args)
    err = info.value
    assert err.filename == filename and err.lineno is not None, err
    return err


F32_2D = np.ones((16, 16), np.float32)


@pytest.mark.parametrize(
    "body,expected,line",
    [
        ("t = Tile[3, 16].zeros()", "the size 3 is not a power of two", 3),
        ("t = Tile[16, 512].zeros()", "the size 512", 3),
        ("n = qnb.program_id(0)\n    t = Tile[n, 16].zeros()", "compile-time sizes", 4),
        ("v = Vec[24].zeros()", "Vec[24]", 3),
        ("v = qnb.arange(12)", "the size 12", 3),
        ("t = Tile[8, 16].eye()", "square", 3),
        ("t = Tile[8, 16].zeros()\n    t.eye_()", "Tile[8, 16]", 4),
        ("t = Tile[8, 16].zeros()\n    s = t.SIZE", "SHAPE", 4),
        ("t = Tile[8, 16].zeros()\n    u = t @ t", "Tile[8, 16] @ a Tile[8, 16]", 4),
        (
            "a = Tile[8, 16].zeros()\n    b = Tile[16, 4].zeros()\n"
            "    c = qnb.mma(a, b, Tile[8, 8].zeros())",
            "must be a Tile[8, 4]",
            5,
        ),
        (
            "L = Tile[8, 8].eye()\n    B = Tile[4, 16].zeros()\n    L.solve_triangular_(B)",
            "L is a Tile[8, 8] and B a Tile[4, 16]",
            5,
        ),
        (
            "L = Tile[8, 16].zeros()\n    B = Tile16.zeros()\n    L.solve_triangular_(B)",
            "square",
            5,
        ),
        (  # rebinding is allowed, but not to another shape inside a loop over the name
            "t = Tile[8, 32].zeros()\n    for i in range(2):\n        t = Tile16.zeros()",
            "cannot hold a Tile16",
            5,
        ),
        ("t = Tile[8, 32].zeros()\n    t[:] = Tile16.zeros()", "expected a Tile[8, 32]", 4),
        ("u = qnb.outer(Vec[256].zeros(), Vec[128].zeros())", "16384", 3),
        ("t = Tile[8, 32].zeros()\n    u = t + Vec[8].zeros()", "Tile[8, 32] and a Vec[8]", 4),
        (
            "t = Tile[8, 32].zeros()\n    u = qnb.where(t > 0, t, Tile[32, 8].zeros())",
            "Tile[8, 32] and a Tile[32, 8]",
            4,
        ),
        ("t = Tile[8, 32].zeros()\n    s = t.sum(axis=1, keepdims=1)", "keepdims", 4),
    ],
)
def test_shape_misuse_raises_at_the_kernel_line(body, expected, line):
    err = launch_error(f"@qnb.kernel\ndef k(x):\n    {body}\n", F32_2D)
    assert expected in err.message, err.message
    assert err.lineno == line, err


def test_element_index_outside_a_shaped_tile_is_an_index_error():
    err = launch_error(
        "@qnb.kernel\ndef k(x):\n    t = Tile[8, 32].zeros()\n    x[0, 0] = t[qnb.program_id(0) + 8, 0]\n",
        F32_2D,
        error=qnb.QnbIndexError,
    )
    assert "0..7, 0..31" in err.message and err.lineno == 4


def test_sizes_from_literals_captured_constants_templates_static_loops_and_locals():
    scope, _ = define(
        """
        BM = 8
        @qnb.kernel
        def k(x, out, BN: qnb.Template):
            n = 4
            acc = Tile[BM, BN].zeros()
            for s in qnb.static(range(2)):
                acc += Tile[BM, BN].load(x, 0, 0) * (s + 1)
            out[0:8, 0:BN] = acc + Tile[8, n].ones()[0, 0] + Tile[BM, BN].SHAPE[1] + acc.SHAPE[0]
        """,
        {"Tile": Tile},
    )
    x = np.random.default_rng(1).uniform(1, 2, (8, 32)).astype(np.float32)
    out = np.full((8, 32), np.nan, np.float32)
    with qnb.backend("cpu"):
        scope["k"](x, out, 32)
    np.testing.assert_allclose(out, x * 3 + 1 + 32 + 8, rtol=1e-6)


# ----------------------------------------------------------------------------- broadcasting

BROADCAST_SHAPES = [(4, 8), (1, 8), (4, 1), (1, 1), (8, 4), (8,), (1,), (4,), (2, 8)]


@qnb.kernel
def broadcast_add(a, b, out, A: qnb.Template, B: qnb.Template, C: qnb.Template):
    if qnb.static(len(A) == 2):
        x = Tile[A[0], A[1]].load(a, 0, 0)
    else:
        x = Vec[A[0]].load(a, 0)
    if qnb.static(len(B) == 2):
        y = Tile[B[0], B[1]].load(b, 0, 0)
    else:
        y = Vec[B[0]].load(b, 0)
    z = x + y * 2 - qnb.where(x > y, x, y) * qnb.maximum(x, y)
    if qnb.static(len(C) == 2):
        z.store(out, 0, 0)
    else:
        z.store(out, 0)


@pytest.mark.parametrize("sa", BROADCAST_SHAPES, ids=str)
@pytest.mark.parametrize("sb", BROADCAST_SHAPES, ids=str)
def test_broadcasting_is_numpys(sa, sb):
    rng = np.random.default_rng(7)
    a = rng.uniform(1, 2, sa).astype(np.float32)
    b = rng.uniform(1, 2, sb).astype(np.float32)
    try:
        want = a + b * 2 - np.where(a > b, a, b) * np.maximum(a, b)
    except ValueError:
        want = None
    shape = want.shape if want is not None else (1,)
    out = np.full(shape, np.nan, np.float32)
    with qnb.backend("cpu"):
        if want is None:
            with pytest.raises(qnb.QnbTypeError) as info:
                broadcast_add(a, b, out, sa, sb, shape)
            names = [_spelled(sa), _spelled(sb)]
            assert all(name in info.value.message for name in names), info.value.message
            assert "do not broadcast" in info.value.message
            return
        broadcast_add(a, b, out, sa, sb, shape)
    np.testing.assert_array_equal(out, want.astype(np.float32))


def _spelled(shape) -> str:
    if len(shape) == 1:
        return f"Vec[{shape[0]}]" if shape[0] not in (16, 32) else f"Vec{shape[0]}"
    return f"Tile[{shape[0]}, {shape[1]}]"


def test_broadcast_operands_become_ir_broadcasts():
    a = np.ones((4, 8), np.float32)
    text = broadcast_add.source("ir", a, np.ones(8, np.float32), a, (4, 8), (8,), (4, 8))
    assert "Broadcast<Tile[4, 8][f32]>" in text
    assert "local x: Tile[4, 8][f32]" in text and "local y: Vec[8][f32]" in text


# ----------------------------------------------------------------------------- cache key


@qnb.kernel
def scaled_rows(x, out, N: qnb.Template):
    t = Tile[N, N].load(x, 0, 0)
    (t - t.sum(axis=1, keepdims=True) / N).store(out, 0, 0)


def test_two_template_shapes_are_two_cache_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path))
    qnb.cache.clear()
    rng = np.random.default_rng(3)
    results = {}
    with qnb.backend("cpu"):
        for n in (16, 32, 16):
            x = rng.uniform(1, 2, (n, n)).astype(np.float32)
            out = np.full((n, n), np.nan, np.float32)
            scaled_rows(x, out, n)
            np.testing.assert_allclose(out, x - x.sum(axis=1, keepdims=True) / n, rtol=1e-5)
            results[n] = out
    events = [e for e in qnb.cache.events() if e.kernel.endswith("scaled_rows")]
    assert [e.outcome for e in events] == ["miss", "miss", "memory-hit"]
    assert events[0].key != events[1].key and events[2].key == events[0].key
    assert "signature" in str(events[1].reason)
    text16 = scaled_rows.source("ir", results[16], results[16], 16)
    text32 = scaled_rows.source("ir", results[32], results[32], 32)
    assert "Tile16[f32]" in text16 and "Tile32[f32]" in text32
    assert "Reshape<Tile[32, 1][f32]>" in text32


# ----------------------------------------------------------------------------- slice forms


@qnb.kernel
def slice_forms(x, x3, line, rows, cols, y, y_line):
    rows[0, 0:16] = x[2, 3:10]  # a row window: v[j] = x[2, 3 + j] where 3 + j < 10
    rows[1, 0:16] = x3[1, 4, 20:40]  # a row of a slab, past the array's edge
    rows[2, 0:16] = line[5:30]
    cols[0, 0:16] = x[1:12, 3]
    v = x[0, 0:16]
    y[1:5, 2] = v  # a column window of the output
    y[3, 0:7] = v  # a row window
    y_line[2:9] = v


def test_row_slices_and_vec_slice_stores_at_tile16():
    rng = np.random.default_rng(5)
    x = rng.uniform(1, 2, (14, 24)).astype(np.float32)
    x3 = rng.uniform(1, 2, (2, 6, 30)).astype(np.float32)
    line = rng.uniform(1, 2, 20).astype(np.float32)
    rows = np.full((3, 16), np.nan, np.float32)
    cols = np.full((1, 16), np.nan, np.float32)
    y = np.full((10, 12), np.nan, np.float32)
    y_line = np.full(12, np.nan, np.float32)
    with qnb.backend("cpu"):
        slice_forms(x, x3, line, rows, cols, y, y_line)
    want_rows = np.zeros((3, 16), np.float32)
    want_rows[0, :7] = x[2, 3:10]
    want_rows[1, :10] = x3[1, 4, 20:30]
    want_rows[2, :15] = line[5:20]
    want_cols = np.zeros((1, 16), np.float32)
    want_cols[0, :11] = x[1:12, 3]
    v = x[0, :16]
    want_y = np.full((10, 12), np.nan, np.float32)
    want_y[1:5, 2] = v[:4]
    want_y[3, 0:7] = v[:7]
    want_line = np.full(12, np.nan, np.float32)
    want_line[2:9] = v[:7]
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(cols, want_cols)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(y_line, want_line)


def test_a_row_window_outside_the_array_is_an_index_error():
    # as a column window's column is (arr[r0:r1, col]): only the padded forms skip a line
    err = launch_error(
        "@qnb.kernel\ndef k(x):\n    x[20, 0:7] = Vec16.zeros()\n", F32_2D, error=qnb.QnbIndexError
    )
    assert "row index out of range" in err.message and err.lineno == 3
    out = np.full((4, 4), 7.0, np.float32)
    scope, _ = define(
        "@qnb.kernel\ndef k(x):\n    qnb.Vec[4].full(1.0).store_row(x, -1, 0)\n"
        "    qnb.Vec[4].full(2.0).store_col(x, 0, 9)\n"
    )
    with qnb.backend("cpu"):
        scope["k"](out)
    np.testing.assert_array_equal(out, np.full((4, 4), 7.0, np.float32))


# ----------------------------------------------------------------------------- padded loads


@qnb.kernel
def padded_other(x, line, out, vecs, other: qnb.f32, M: qnb.Template, N: qnb.Template):
    i = qnb.program_id(0)
    r = i * 7 - 9
    Tile[M, N].load(x, r, r + 3, other=other).store(out, i * M, 0)
    vecs[i, 0:N] = Vec[N].load(line, r * 2, other=other)


@pytest.mark.parametrize("other", [math.nan, math.inf, -math.inf, -2.5])
@pytest.mark.parametrize("shape", [(8, 32), (32, 32), (1, 16), (16, 1)], ids=str)
def test_loads_with_negative_and_past_the_end_offsets(other, shape):
    m, n = shape
    rng = np.random.default_rng(11)
    x = rng.uniform(1, 2, (20, 27)).astype(np.float32)
    line = rng.uniform(1, 2, 23).astype(np.float32)
    programs = 6  # r runs from -9 (before the array) to 26 (past its end)
    out = np.zeros((programs * m, n), np.float32)
    vecs = np.zeros((programs, n), np.float32)
    with qnb.backend("cpu"):
        padded_other[programs](x, line, out, vecs, other, m, n)
    for i in range(programs):
        r = i * 7 - 9
        want = np.full((m, n), other, np.float32)
        want_v = np.full(n, other, np.float32)
        for a in range(m):
            for b in range(n):
                if 0 <= r + a < 20 and 0 <= r + 3 + b < 27:
                    want[a, b] = x[r + a, r + 3 + b]
        for b in range(n):
            if 0 <= 2 * r + b < 23:
                want_v[b] = line[2 * r + b]
        np.testing.assert_array_equal(out[i * m : (i + 1) * m], want)
        np.testing.assert_array_equal(vecs[i], want_v)


# ----------------------------------------------------------------------------- cpu paths


def test_prepared_path_takes_other_shapes_and_tile16():
    a = np.ones((32, 32), np.float32)
    shaped, _ = scaled_rows._lower_for([a, a, 32])
    assert prepare(shaped) is not None  # no fallback to the interpreter
    plain = qnb.kernel(_tile16_copy)
    square, _ = plain._lower_for([a, a])
    assert prepare(square) is not None


def _tile16_copy(x, y):
    Tile16.load(x, 0, 0).store(y, 0, 0)


def test_trace_records_tiles_of_any_shape():
    x = np.random.default_rng(2).uniform(1, 2, (8, 32)).astype(np.float32)
    out = np.zeros((8, 32), np.float32)
    trace = copy_wide.trace[1](x, out)
    steps = trace.steps(0)
    assert steps[0].output.shape == (8, 32)
    np.testing.assert_array_equal(steps[0].output, x)
    assert steps[-1].writes and steps[-1].writes[0].r1 == 8 and steps[-1].writes[0].c1 == 32
    np.testing.assert_array_equal(trace.arrays["out"], x * 2)


@qnb.kernel
def copy_wide(x, out):
    t = Tile[8, 32].load(x, 0, 0)
    (t * 2).store(out, 0, 0)


@qnb.kernel
def line_windows(x, y, col: qnb.i32):
    v = x[0:16, col]
    y[2, 0:16] = v


def test_debug_mode_checks_the_fixed_index_of_a_line_as_cpu_does():
    from qnb.frontend.checks import add_bounds_checks

    x = np.ones((16, 16), np.float32)
    kernel_ir, _ = line_windows._lower_for([x, x, 3])
    _, table = add_bounds_checks(kernel_ir)
    messages = [check.message for check in table]
    assert "column index out of range for 'x'" in messages
    assert "row index out of range for 'y'" in messages
    with qnb.backend("cpu"), pytest.raises(qnb.QnbIndexError, match="column index out of range"):
        line_windows(x, x.copy(), 16)


@qnb.func
def bump(t, v):
    t += v[None, :]  # in place: the caller's tile
    return t.sum(axis=0)


@qnb.kernel
def lists_funcs_branches(x, out, sums, flag: qnb.i32):
    accs = [Tile[8, 32](qnb.f64) for k in qnb.static(range(2))]
    for k in qnb.static(range(2)):
        accs[k] = accs[k] + Tile[8, 32].load(x, 0, 0).astype(qnb.f64) * (k + 1)
    t = accs[0] + accs[1]
    if flag > 0:
        t = t * 2
    else:
        t = t - Vec[32].ones(qnb.f64)
    s = bump(t, Vec[32].full(0.5, qnb.f64))
    t.store(out, 0, 0)
    sums[0:32] = s


@pytest.mark.parametrize("flag", [1, 0])
def test_shaped_tiles_in_lists_funcs_and_runtime_branches(flag):
    x = np.random.default_rng(9).uniform(1, 2, (8, 32)).astype(np.float32)
    out = np.full((8, 32), np.nan, np.float64)
    sums = np.full(32, np.nan, np.float64)
    with qnb.backend("cpu"):
        lists_funcs_branches(x, out, sums, flag)
    t = x.astype(np.float64) * 3
    t = t * 2 if flag else t - 1
    t = t + 0.5
    np.testing.assert_allclose(out, t, rtol=1e-12)
    np.testing.assert_allclose(sums, t.sum(axis=0), rtol=1e-12)


def test_a_captured_tile_type_enters_the_key():
    scope, _ = define(
        """
        T = qnb.Tile[8, 32]
        @qnb.kernel
        def k(x, out):
            T.load(x, 0, 0).store(out, 0, 0)
        """
    )
    x = np.random.default_rng(8).uniform(1, 2, (16, 32)).astype(np.float32)
    with qnb.backend("cpu"):
        for rows in (8, 16, 8):
            scope["T"] = Tile[rows, 32]
            out = np.zeros((16, 32), np.float32)
            scope["k"](x, out)
            np.testing.assert_array_equal(out[:rows], x[:rows])
            np.testing.assert_array_equal(out[rows:], 0)
