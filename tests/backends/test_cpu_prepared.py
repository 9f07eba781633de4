"""The cpu backend's prepared path (qnb/backends/cpu/prepared*.py) against its interpreter.

Every launch here runs twice on fresh arguments: once through the interpreter
(``interpreter.run``) and once through the closures ``prepare`` built. The arrays must come out
bit for bit the same, and an out-of-bounds access must raise the same error (type and
message, naming the same program). The shapes are chosen to leave the fast paths'
comfort zone: partial edge blocks, grids larger or smaller than the array, aliasing
arguments, 3-D slabs, control flow that depends on the data.
"""

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16, f32, i32, ir
from qnb.backends.cpu import interpreter
from qnb.backends.cpu.prepared import prepare
from qnb.errors import QnbIndexError
from tests.suite import CASES, lowered

SUITE = [(c, np.dtype(d)) for c in CASES for d in c.dtypes]


def _grid3(grid):
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    return (*grid, 1, 1)[:3]


def _outcome(fn):
    try:
        fn()
    except QnbIndexError as err:
        return ("error", type(err).__name__, str(err.message if hasattr(err, "message") else err))
    return None


def both_ways(kernel, grid, make_args, *, exact=True, expect_prepared=True, tol=1e-6):
    """Run ``kernel`` over ``grid`` on ``make_args()`` through the interpreter and the
    prepared path; assert the same arrays (or the same error). ``make_args`` builds
    fresh arguments each time, so aliasing between them is rebuilt too."""
    probe = make_args()
    kernel_ir, _ = kernel._lower_for(probe)
    launch = prepare(kernel_ir)
    assert (launch is not None) == expect_prepared
    grid = _grid3(grid)
    stored = ir.array_uses(kernel_ir)[1]

    def run(fn):
        args = make_args()
        _, runtime = kernel._signature(args)
        outcome = _outcome(lambda: fn(runtime))
        return args, outcome

    want_args, want = run(lambda a: interpreter.run(kernel_ir, grid, a, stored))
    if launch is None:
        return
    got_args, got = run(lambda a: launch(grid, a, stored))
    assert got == want
    for index, (g, w) in enumerate(zip(got_args, want_args)):
        if isinstance(w, np.ndarray):
            if exact:
                np.testing.assert_array_equal(g, w, err_msg=f"argument {index}")
            else:
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"argument {index}")
    return got


@pytest.mark.parametrize("case,dtype", SUITE, ids=[f"{c.name}-{d}" for c, d in SUITE])
def test_suite_kernel_prepared_matches_interpreter(case, dtype):
    kernel_ir, grid, args = lowered(case, dtype)
    launch = prepare(kernel_ir)
    if launch is None:  # left to the interpreter: nothing to compare
        return
    stored = ir.array_uses(kernel_ir)[1]
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpreter.run(kernel_ir, grid, want, stored)
    launch(grid, got, stored)
    # a block-grid matmul is one GEMM: BLAS may sum each 16 products in another order
    gemm = any(isinstance(node, ir.Matmul) for node in ir.walk_body(kernel_ir.body))
    for g, w in zip(got, want):
        if isinstance(w, np.ndarray):
            if gemm and w.dtype.kind == "f":
                tol = 1e-12 if w.dtype == np.float64 else 1e-5
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
            else:
                np.testing.assert_array_equal(g, w)


def test_most_suite_kernels_are_prepared():
    """The interpreter is the fallback, not the rule."""
    prepared = [prepare(lowered(c, np.dtype(c.dtypes[0]))[0]) is not None for c in CASES]
    assert sum(prepared) >= 0.8 * len(CASES)


# ---------------------------------------------------------------------- kernels


@qnb.kernel
def affine(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    (Tile16.load(x, i * 16, j * 16) * 2.0 + 1.0).store(y, i * 16, j * 16)


@qnb.kernel
def affine_swapped(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    r = qnb.program_id(1) * 16
    c = qnb.program_id(0) * 16
    t = Tile16.load(x, r, c)
    qnb.where(t > 0.0, t, -t).astype(f32).T.store(y, r, c)


@qnb.kernel
def hold_then_overwrite(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    t = Tile16.load(x, i, j)  # held across a store that may change x (when y is x)
    Tile16.zeros(f32).store(y, i, j)
    (t * 3.0).store(y, i, j)


@qnb.kernel
def slab_affine(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3], s: i32):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    (Tile16.load(x[s], i, j) - 1.0).store(y[s], i, j)


@qnb.kernel
def slab_per_program(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3]):
    b = qnb.program_id(2)
    i = qnb.program_id(0) * 16
    (Tile16.load(x[b], i, 0) * 0.5).store(y[b], i, 0)


@qnb.kernel
def tile_free(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    if i < x.shape[0]:
        y[i] = 2.0 * x[i] + 1.0


@qnb.kernel
def tile_free_unguarded(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    y[i] = x[i] * x[i]


@qnb.kernel
def tile_free_2d(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    j = qnb.program_id(1)
    if i < x.shape[0] and j < x.shape[1]:
        y[i, j] = x[i, j] - 0.25


@qnb.kernel
def data_dependent(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    v = x[i]
    if v > 0.0:
        y[i] = v * 2.0
    else:
        y[i] = -v
    above = 0.0
    for k in range(4):
        if x[k] > v:
            above += 1.0
    y[i] += above


@qnb.kernel
def data_dependent_loop(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    v = x[i]
    steps = 0
    while v > 0.1:  # a different number of iterations in each program
        v = v * 0.5
        steps += 1
    y[i] = v + steps


@qnb.kernel
def causal_rows(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    """A program per 4-row block sums the blocks at and before its own (a triangle)."""
    b = qnb.program_id(0)
    acc = qnb.Tile[4, 8].zeros(f32)
    last = qnb.Tile[4, 8].zeros(f32)
    for k in range(b + 1):
        last = qnb.Tile[4, 8].load(x, k * 4, 0)
        acc = acc + last * (k + 1.0)
    (acc - last).store(y, b * 4, 0)


@qnb.kernel
def stepping_down(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1], s: i32):
    """Bounds from program ids both ways, exits at the body's top and under branches,
    a nested loop and a store to a neighbour inside the turns."""
    i = qnb.program_id(0)
    total = 0.0
    for k in range(i, s, -1):
        total = total + 0.5
        if s == 3:  # (the same in every program: an exit for all the turn's programs)
            continue
        for m in range(2):
            total = total + x[k] * (m + 1.0)
        if s > 100:
            break
    n = i % 4
    while n > 0:
        n = n - 1
        total = total - 1.0
        y[i] = total
    y[i] = total + n


@qnb.kernel
def held_view(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    """A tile the same in every program, a view of ``x``, held across turns in which some
    programs store to ``x``: the programs outside a turn keep the value they loaded."""
    i = qnb.program_id(0)
    t = qnb.Tile[1, 8].load(x, 0, 0)
    for _k in range(i):
        (t + 1.0).store(x, 0, 0)
    t.store(y, i, 0)


@qnb.kernel
def exits_per_program(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1], s: i32):
    """Per-program break and continue in uniform and varying for loops and a while,
    nested, with statements after them that the programs that left must not run."""
    i = qnb.program_id(0)
    total = 0.0
    for k in range(6):
        if (k + i) % 4 == 0:
            continue
        total = total + x[k]
        if k * 2 > i + s:
            if i % 3 == 1:
                break
            total = total * 0.5
        for m in range(i % 3 + 1):
            if m == i % 2:
                break
            total = total + 0.25
        y[i] = total
    n = 0
    while n < 5:
        n = n + 1
        if n > i:
            break
        total = total - 1.0
    y[i] = total + n


@qnb.kernel
def exit_per_program(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    total = 0.0
    for k in range(i + 1):
        if k * 3 > i:  # a different turn for each program: left to the interpreter
            break
        total = total + x[k]
    y[i] = total


@qnb.kernel
def uniform_break(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], stop: i32):
    i = qnb.program_id(0) * 16
    acc = Tile16.zeros(f32)
    for k in range(8):
        if k == stop:
            break
        if k % 2 == 1:
            continue
        acc += Tile16.load(x, i, 0)
    acc.store(y, i, 0)


@qnb.kernel
def row_softmax(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    r = qnb.program_id(0) * 16
    t = Tile16.load(x, r, 0)
    ones = Vec16.full(1.0)
    e = qnb.exp(t - qnb.outer(t.max(axis=1), ones))
    (e * qnb.outer(1.0 / e.sum(axis=1), ones)).store(y, r, 0)


@qnb.kernel
def block_reductions(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    t = Tile16.load(x, i, j)
    ones = Vec16.full(1.0)
    r = qnb.outer(t.sum(axis=0), ones) + qnb.outer(ones, t.max(axis=1) * t.sum(axis=1)) + t.sum()
    (r - t.min()).store(y, i, j)


@qnb.kernel
def tiled_matmul(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], c: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.zeros(f32)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    acc.store(c, i, j)


@qnb.kernel
def trivial(d: qnb.Array[f32, 2]):
    Tile16.full(4.0).store(d, 0, 0)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _poison(shape):
    return np.full(shape, np.nan, np.float32)


# ---------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    "shape,grid",
    [
        ((64, 48), (4, 3)),  # whole blocks, the grid covers the array
        ((37, 50), (3, 4)),  # partial edge blocks
        ((37, 50), (5, 5)),  # a grid larger than the array
        ((64, 64), (2, 3)),  # a grid smaller than the array
        ((16, 16), (1, 1)),
    ],
)
@pytest.mark.parametrize("kernel", [affine, affine_swapped], ids=["affine", "swapped"])
def test_block_grid_elementwise(kernel, shape, grid):
    both_ways(kernel, grid, lambda: [_rand(shape), _poison(shape)])


def test_block_grid_in_place_and_views():
    both_ways(affine, (3, 4), lambda: [x := _rand((37, 50)), x])  # the same array twice

    def overlapping():
        base = _rand((70, 50))
        return [base[:64], base[6:]]  # y is x shifted by 6 rows

    both_ways(affine, (4, 4), overlapping)
    both_ways(hold_then_overwrite, (3, 4), lambda: [x := _rand((37, 50)), x])
    both_ways(hold_then_overwrite, (4, 3), lambda: [x := _rand((64, 48)), x])
    both_ways(hold_then_overwrite, (4, 4), overlapping)


def test_slabs():
    def args(s):
        return lambda: [_rand((3, 40, 48)), _poison((3, 40, 48)), s]

    both_ways(slab_affine, (3, 3), args(1))
    both_ways(slab_affine, (3, 3), args(2))
    got = both_ways(slab_affine, (3, 3), args(3))  # no slab 3: the interpreter's error
    assert got is not None and "batch index out of range" in got[2]
    both_ways(slab_per_program, (3, 1, 3), lambda: [_rand((3, 40, 16)), _poison((3, 40, 16))])
    got = both_ways(slab_per_program, (3, 1, 4), lambda: [_rand((3, 40, 16)), _poison((3, 40, 16))])
    assert got is not None and "(in program (0, 0, 3))" in got[2]


@pytest.mark.parametrize("n,grid", [(1000, 1000), (1000, 1024), (1, 1), (70, 50)])
def test_tile_free(n, grid):
    both_ways(tile_free, grid, lambda: [_rand(n), _poison(n)])
    both_ways(tile_free, grid, lambda: [x := _rand(n), x])


def test_tile_free_errors_match():
    got = both_ways(tile_free_unguarded, 12, lambda: [_rand(10), _poison(10)])
    assert got is not None and "(in program (10, 0, 0))" in got[2]
    both_ways(tile_free_unguarded, 10, lambda: [_rand(10), _poison(10)])
    both_ways(tile_free_2d, (13, 9), lambda: [_rand((12, 7)), _poison((12, 7))])
    both_ways(tile_free_2d, (12, 7), lambda: [x := _rand((12, 7)), x])


def test_data_dependent_control_flow():
    both_ways(data_dependent, 64, lambda: [_rand(64, seed=3), _poison(64)])
    # a loop whose trip count differs between programs: each turn over the programs in it
    both_ways(data_dependent_loop, 32, lambda: [_rand(32), _poison(32)])
    for stop in (0, 3, 8):
        both_ways(uniform_break, 3, lambda: [_rand((48, 16)), _poison((48, 16)), stop])


def test_loops_that_differ_between_programs_run_prepared():
    """A loop whose trip count reads program_id runs on the prepared path, each turn over
    the programs still in it, with the interpreter's lock-step meaning (the same bits)."""
    both_ways(causal_rows, 6, lambda: [_rand((24, 8)), _poison((24, 8))])
    both_ways(causal_rows, (3, 2), lambda: [_rand((24, 8)), _poison((24, 8))])
    for s in (-1, 3, 200):
        both_ways(stepping_down, 11, lambda: [_rand(16), _poison(16), s])
    both_ways(stepping_down, 11, lambda: [_rand(16), _poison(16), -9])  # reads x[-1...]
    both_ways(held_view, 4, lambda: [_rand((1, 8)), _poison((4, 8))])
    both_ways(exit_per_program, 9, lambda: [_rand(9), _poison(9)])
    for s in (0, 2, 5):
        both_ways(exits_per_program, 12, lambda: [_rand(16), _poison(16), s])


def test_a_causal_loop_computes_the_triangle_only():
    """Turn k runs over the programs past k alone: the loop body sees 6, 5, ..., 1
    programs, 21 program-steps in all, not 36 (the square, masked)."""
    from qnb.backends.cpu import prepared_lanes

    seen = []
    real = prepared_lanes.narrowed

    def counting(st, lo, hi):
        seen.append(hi - lo)
        return real(st, lo, hi)

    kernel_ir, _ = causal_rows._lower_for([_rand((24, 8)), _poison((24, 8))])
    launch = prepare(kernel_ir)
    prepared_lanes.narrowed = counting
    try:
        y = _poison((24, 8))
        launch(_grid3(6), [_rand((24, 8)), y], {"y"})
    finally:
        prepared_lanes.narrowed = real
    assert seen == [5, 4, 3, 2, 1]  # (the first turn, every program, runs on the chunk)
    assert not np.isnan(y).any()


@pytest.mark.parametrize("rows", [64, 37])
def test_row_softmax(rows):
    both_ways(row_softmax, (rows + 15) // 16, lambda: [_rand((rows, 16)), _poison((rows, 16))])


@pytest.mark.parametrize("shape", [(64, 48, 32), (40, 40, 40), (16, 16, 16), (80, 32, 1030)])
def test_tiled_matmul(shape):
    """One GEMM per K step: the same sums as the per-tile products (BLAS may order the
    16 products of each sum differently, so this compares to a few ulps)."""
    m, k, n = shape

    def args():
        return [_rand((m, k), 1), _rand((k, n), 2), _poison((m, n))]

    both_ways(tiled_matmul, ((m + 15) // 16, (n + 15) // 16), args, exact=False)
    both_ways(tiled_matmul, ((m + 15) // 16 + 1, (n + 15) // 16), args, exact=False)


def test_trivial_and_read_only_refused():
    both_ways(trivial, 1, lambda: [_poison((20, 20))])
    both_ways(trivial, 1, lambda: [_poison((5, 3))])
    frozen = _poison((16, 16))
    frozen.flags.writeable = False
    with qnb.backend("cpu"), pytest.raises(qnb.QnbTypeError):
        trivial(frozen)


def test_launch_through_kernel_uses_prepared_path():
    """What ``kernel[grid](...)`` runs on cpu is the prepared launcher."""
    x = _rand((37, 50))
    y = _poison((37, 50))
    with qnb.backend("cpu"):
        affine[(3, 4)](x, y)
    np.testing.assert_array_equal(y, x * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("shape,grid", [((64, 48), (4, 3)), ((37, 50), (3, 4)), ((40, 16), (3, 1))])
def test_block_grid_reductions(shape, grid):
    both_ways(block_reductions, grid, lambda: [_rand(shape), _poison(shape)])


@qnb.kernel
def slab_order(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3], step: i32):
    p = qnb.program_id(0)
    b = (x.shape[0] - 1 - p) // step  # reversed, and shared by `step` programs
    t = Tile16.load(x[b], 0, 4)
    (t + qnb.f32(p)).store(y[b], 2, 0)


@pytest.mark.parametrize("step", [1, 2])
@pytest.mark.parametrize("shape", [(6, 10, 20), (6, 16, 16), (6, 40, 40)])
def test_slab_windows(shape, step):
    """One window of each program's slab: in order, reversed, shared (a race: the last
    program's store wins, as in the interpreter), partial windows."""
    both_ways(slab_order, 6, lambda: [_rand(shape), _poison(shape), step])
    got = both_ways(slab_order, 7, lambda: [_rand(shape), _poison(shape), step])
    assert got is not None and "batch index out of range" in got[2]


def test_an_op_the_prepared_path_does_not_know_runs_on_the_interpreter(monkeypatch):
    """New ops slot into the interpreter's tables (which the prepared path reads); one
    that is spelled anywhere else leaves the kernel to the interpreter, never to a guess."""
    x = _rand((32, 32))
    kernel_ir, _ = affine._lower_for([x, x])
    assert prepare(kernel_ir) is not None
    binary = next(n for n in ir.walk_body(kernel_ir.body) if isinstance(n, ir.Binary))
    binary.op = "not_in_any_table"
    assert prepare(kernel_ir) is None

    class Unknown(ir.Expr):  # a node class added to the IR later
        pass

    monkeypatch.setitem(ir._LAYOUTS, "Unknown", [])

    kernel_ir, _ = affine._lower_for([x, x])
    store = kernel_ir.body[-1]
    store.value = Unknown(store.value.type, store.value.loc)
    assert prepare(kernel_ir) is None


@qnb.kernel
def _padded_uniform(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], v: qnb.Array[f32, 1], r: i32):
    t = Tile16.load(x, r, r - 2, other=-5.0)  # one window for every program, before the array
    w = Tile16.load(x, 3, -1, dtype=qnb.f64)  # a conversion on the uniform path
    (t + w.astype(f32)).store(y, r + 1, -3)
    u = Vec16.load(v, r * 2, other=7.0)
    u.store(v, 20)


@qnb.kernel
def _padded_slabs(x: qnb.Array[f32, 3], y: qnb.Array[f32, 3]):
    b = qnb.program_id(0)
    t = Tile16.load(x[b], -4, -6, other=2.5)  # one window of each program's slab
    t.store(y[b], -1, -2)


@pytest.mark.parametrize("r", [-20, -3, 0, 5])
def test_padded_windows_on_the_uniform_paths_match_the_interpreter(r):
    def args():
        rng = np.random.default_rng(3)
        return [
            rng.uniform(1, 2, (20, 24)).astype(np.float32),
            np.full((20, 24), np.nan, np.float32),
            rng.uniform(1, 2, 40).astype(np.float32),
            r,
        ]

    both_ways(_padded_uniform, 3, args)


def test_padded_windows_of_slabs_match_the_interpreter():
    def args():
        rng = np.random.default_rng(4)
        return [
            rng.uniform(1, 2, (3, 12, 20)).astype(np.float32),
            np.full((3, 12, 20), np.nan, np.float32),
        ]

    both_ways(_padded_slabs, 3, args)


# ---------------------------------------------------------------------- the K loop as one GEMM


@qnb.kernel
def matmul_onto(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], c: qnb.Array[f32, 2], start: i32):
    i = qnb.program_id(1) * 16  # rows from grid axis 1
    j = qnb.program_id(0) * 16
    acc = Tile16.load(c, i, j)  # a different tile in every program
    k = -99
    for k in range(start, a.shape[1], 16):
        acc = acc + Tile16.load(a, i, k) @ Tile16.load(b, k, j)
    acc.store(c, i, j)
    if qnb.program_id(0) == 0 and qnb.program_id(1) == 0:
        c[0, 0] = k * 1.0  # the loop variable after the loop


@qnb.kernel
def matmul_two_loops(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], c: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.full(0.5)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    for k in range(16, a.shape[1], 16):  # again, from the second block of K
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    (acc * 2.0).store(c, i, j)


def _matmul_args(m, k, n, *rest):
    return lambda: [_rand((m, k), 1), _rand((k, n), 2), _rand((m, n), 3), *rest]


@pytest.mark.parametrize("shape", [(64, 48, 32), (37, 40, 50), (16, 16, 16), (20, 7, 33)])
@pytest.mark.parametrize("start", [0, -20, 5, 16, 200])
def test_k_loop_as_one_gemm_matches_interpreter(shape, start):
    """Partial tiles, a K loop that starts before the arrays or past them (zero steps:
    ``k`` keeps its value), an accumulator that differs between programs, grid axes the
    other way round, and grids larger and smaller than the arrays."""
    m, k, n = shape
    for grid in (
        ((n + 15) // 16, (m + 15) // 16),
        ((n + 15) // 16 + 1, (m + 15) // 16 + 2),
        (1, 1),
    ):
        both_ways(matmul_onto, grid, _matmul_args(m, k, n, start), exact=False, tol=1e-5)


def test_k_loop_gemm_aliasing_and_two_loops():
    both_ways(tiled_matmul, (3, 3), lambda: [x := _rand((40, 40)), x, x], exact=False, tol=1e-5)
    both_ways(matmul_onto, (3, 3), lambda: [x := _rand((40, 40)), x, x, 0], exact=False, tol=1e-5)
    both_ways(matmul_two_loops, (3, 2), _matmul_args(37, 50, 30), exact=False, tol=1e-5)


def test_k_loop_runs_as_one_gemm(monkeypatch):
    """The K loop of a tiled matmul over a grid of blocks runs no per-step product: the
    loads and the tile matmul of its body are never called."""
    from qnb.backends.cpu import prepared_linalg

    calls = []
    real = prepared_linalg._strip_product
    monkeypatch.setattr(prepared_linalg, "_strip_product", lambda *a: calls.append(1) or real(*a))
    got = both_ways(tiled_matmul, (4, 3), _matmul_args(64, 80, 48), exact=False, tol=1e-5)
    assert got is None and calls == []


@qnb.kernel
def cholesky_solve(a: qnb.Array[qnb.f64, 3], b: qnb.Array[qnb.f64, 3], x: qnb.Array[qnb.f64, 3]):
    s = qnb.program_id(0)
    lower = Tile16.load(a[s], 0, 0)
    lower.cholesky_(0.0)
    y = Tile16.load(b[s], 0, 0)
    lower.solve_triangular_(y)
    (y + lower).store(x[s], 0, 0)  # the factor is still a tile after the solve


@qnb.kernel
def cholesky_shared(a: qnb.Array[qnb.f64, 3], b: qnb.Array[qnb.f64, 3], x: qnb.Array[qnb.f64, 3]):
    s = qnb.program_id(0)
    lower = Tile16.load(a[0], 0, 0)  # one factor for every program
    lower.cholesky_(1e-3)
    y = Tile16.load(b[s], 0, 0)
    lower.solve_triangular_(y)
    y.store(x[s], 0, 0)


def _spd(count, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.uniform(-1, 1, (count, 16, 16))
    return m @ m.transpose(0, 2, 1) + 16 * np.eye(16)


@pytest.mark.parametrize("count", [1, 5, 1100])  # 1100: more than one chunk of lanes
def test_cholesky_then_solve_matches_interpreter_bit_for_bit(count):
    def args():
        rhs = np.random.default_rng(1).uniform(-1, 1, (count, 16, 16))
        return [_spd(count), rhs, np.full((count, 16, 16), np.nan)]

    both_ways(cholesky_solve, count, args)
    both_ways(cholesky_shared, count, args)
    both_ways(cholesky_solve, count, lambda: [x := _spd(count), x, x])  # in place


@qnb.kernel
def outer_ones(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], z: qnb.Array[f32, 2]):
    r = qnb.program_id(0) * 16
    t = Tile16.load(x, r, 0)
    ones = Vec16.full(1.0)
    twos = Vec16.full(1.0)
    twos = twos * 2.0  # assigned twice: not a known constant
    (qnb.outer(t.max(axis=1), ones) + qnb.outer(ones, t.min(axis=0))).store(y, r, 0)
    qnb.outer(t.sum(axis=1), twos).store(z, r, 0)


def test_outer_with_ones_matches_interpreter_on_specials():
    """``outer(v, ones)`` is ``v`` repeated (a view): the same bits as ``v * 1``,
    including -0, ±inf and NaN."""

    def args():
        x = _rand((40, 16))
        x[3, :] = -0.0
        x[5, 2], x[20, 7], x[33, 0] = np.inf, -np.inf, np.nan
        return [x, _poison((40, 16)), _poison((40, 16))]

    both_ways(outer_ones, 3, args)
    both_ways(outer_ones, 2, lambda: [x := _rand((32, 16)), x, _poison((32, 16))])


@pytest.mark.parametrize("start", [-4000, 0, 40])
def test_k_loop_gemm_far_past_the_arrays_and_specials(start):
    """A K loop far before or past the arrays reads zeros there (no allocation of the
    empty range); where only one operand has K elements (a longer than b), its ±inf
    times the other's padding 0 is NaN, as in the step-by-step loop."""

    def args():
        a = _rand((40, 48), 1)
        a[3, 40], a[20, 45] = np.inf, -np.inf  # columns b has no rows for
        return [a, _rand((33, 40), 2), _rand((40, 40), 3), start]

    both_ways(matmul_onto, (3, 3), args, exact=False, tol=1e-5)


@qnb.kernel
def matmul_long_loop(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], c: qnb.Array[f32, 2], stop: i32):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.zeros(f32)
    for k in range(-(2**20), stop, 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    acc.store(c, i, j)


def test_k_loop_gemm_over_a_huge_range_allocates_only_the_arrays():
    a, b = _rand((32, 40), 1), _rand((40, 32), 2)
    c = _poison((32, 32))
    with qnb.backend("cpu"):
        matmul_long_loop[(2, 2)](a, b, c, 2**24)  # 2**20 + 2**24 / 16 steps: one GEMM
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@qnb.kernel
def chain_of_blocks(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], z: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    t = Tile16.load(x, i, j)
    u = qnb.exp(qnb.minimum(t * 2.0 + 1.0, 3.0)) - t / (qnb.abs(t) + 1.0)
    (-(u * t + Tile16.load(z, i, j)) * 0.5).store(y, i, j)


@qnb.kernel
def chain_of_ints(x: qnb.Array[i32, 2], y: qnb.Array[i32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    t = Tile16.load(x, i, j)
    ((t * 3 + 7) // 5 - (t ^ 9)).store(y, i, j)


@pytest.mark.parametrize("rows, cols", [(256, 256), (48, 32), (37, 50)])
def test_elementwise_chains_into_the_stored_blocks(rows, cols):
    """A chain of elementwise ops over a block grid is computed straight into the stored
    region (and, from 65,536 elements, over its own temporaries): the interpreter's bits,
    also where the stored array is read by the chain (``z`` is ``y``: computed apart) and
    where edge blocks hang over the array (stored as any value)."""
    from qnb.backends.cpu import prepared_windows

    grid = ((rows + 15) // 16, (cols + 15) // 16)
    calls = []
    real = prepared_windows.WindowClosures.computes_into

    def counting(self, s, value, destination):
        into = real(self, s, value, destination)
        if into is None:
            return None
        return lambda st: calls.append(into(st)) or calls[-1]

    prepared_windows.WindowClosures.computes_into = counting
    try:
        both_ways(
            chain_of_blocks,
            grid,
            lambda: [_rand((rows, cols)), _poison((rows, cols)), _rand((rows, cols), 5)],
        )
        both_ways(
            chain_of_blocks, grid, lambda: [_rand((rows, cols)), y := _rand((rows, cols), 2), y]
        )
        ints = lambda: [  # noqa: E731
            np.random.default_rng(1).integers(-(2**31), 2**31, (rows, cols), dtype=np.int32),
            np.full((rows, cols), -1, np.int32),
        ]
        both_ways(chain_of_ints, grid, ints)
    finally:
        prepared_windows.WindowClosures.computes_into = real
    exact = rows % 16 == 0 and cols % 16 == 0
    # the three launches of each path: the prepared one computes in place where it can
    assert calls == [exact, False, exact]


@qnb.kernel
def guarded_elements(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1], n: i32):
    i = qnb.program_id(0)
    if i < n:
        y[i] = 2.0 * x[i] + 1.0


@qnb.kernel
def guarded_both_ways(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1], n: i32):
    i = qnb.program_id(0)
    if n >= i * 2:  # (the program's id on the right, scaled)
        y[i] = x[i] * 0.5 - 1.0
    else:
        y[i] = -3.0


@qnb.kernel
def shifted_elements(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    if i < x.shape[0] - 1:
        y[i] = x[i + 1] * 2.0 - x[i]


def test_conditions_the_grid_decides_and_elements_computed_into_place(monkeypatch):
    """``if i < n`` over consecutive programs is decided per chunk by its two ends (all,
    none, or computed per program where n falls inside the chunk), and ``y[i] = chain``
    is computed into y's slice, except where the chain reads y (x is y)."""
    from qnb.backends.cpu import lanes

    monkeypatch.setattr(lanes, "SCALAR_CHUNK", 64)  # (chunks of 64 programs, both paths)
    for n in (-5, 0, 64, 100, 128, 299, 300, 10**6):
        both_ways(guarded_elements, 300, lambda: [_rand(300), _poison(300), n])
        both_ways(guarded_both_ways, 300, lambda: [_rand(300), _poison(300), n])
    both_ways(guarded_elements, 300, lambda: [x := _rand(300), x, 300])
    both_ways(shifted_elements, 300, lambda: [_rand(300), _poison(300)])
    both_ways(shifted_elements, 300, lambda: [x := _rand(300), x])
    # past the array: the store's bounds error, after the value, in the same chunk
    both_ways(guarded_elements, 300, lambda: [_rand(300), _poison(200), 300])


@qnb.kernel
def atomic_old_values(x: qnb.Array[f32, 1], h: qnb.Array[f32, 1], seen: qnb.Array[f32, 1]):
    """Old values of scalar atomics: every program, only some (a per-program branch),
    and inside a loop whose trip count differs between programs."""
    i = qnb.program_id(0)
    slot = qnb.atomic_add(h, i % 3, x[i])
    m = 0.5
    if i % 2 == 0:
        m = qnb.atomic_max(h, 4, x[i] * 2.0)  # (the others keep 0.5)
    slot = slot + m
    for k in range(i % 4):
        slot = slot - qnb.atomic_min(h, 5 + k % 2, x[i] - k)
    seen[i] = slot


def test_atomic_old_values_run_prepared():
    """An atomic's old value (each program's element before its own update, in grid
    order) runs on the prepared path, assigned as the interpreter assigns it."""
    for n in (1, 7, 40):
        both_ways(
            atomic_old_values,
            n,
            lambda: [_rand(n), np.array([0, 1, -1, 0, -5, 3, -2], np.float32), _poison(n)],
        )


@qnb.kernel
def two_old_values(h: qnb.Array[i32, 1], y: qnb.Array[i32, 1]):
    i = qnb.program_id(0)
    a = qnb.atomic_add(h, 0, 1)
    b = qnb.atomic_add(h, 0, 1)
    y[i] = b - a


def test_both_paths_run_programs_in_the_same_chunks():
    """Found by an outside tester: programs in a chunk run in lock step, chunk after
    chunk, so an atomic's old value (and a race) depends on the chunks; the interpreter
    ran a kernel of scalars 65,536 programs at a time, the prepared path 2²⁰. Now both
    take ``lanes.chunk_programs``."""
    from qnb.backends.cpu import lanes

    kernel_ir, _ = two_old_values._lower_for([np.zeros(1, np.int32), np.zeros(4, np.int32)])
    assert lanes.chunk_programs(kernel_ir) == lanes.SCALAR_CHUNK > 70_000
    got = both_ways(
        two_old_values, 70_000, lambda: [np.zeros(1, np.int32), np.zeros(70_000, np.int32)]
    )
    assert got is None  # (no error)
