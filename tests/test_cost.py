"""``qnb.cost``: FLOPs and bytes of a launch counted from its IR, against hand counts.

Each kernel's count is worked out by hand in the test (its formula beside it) from the
rules in ``qnb/cost.py``: an elementwise float op on S elements is S, a reduction of n
into one n − 1, ``a @ b`` M·N·(2K − 1), ``mma`` 2·M·N·K; bytes are the elements of each
window that exist in the array. The bytes are checked a second way too, where the cpu
trace can record the launch: the regions the trace says each program read and wrote
(clamped to the arrays by the executor itself), summed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import qnb
from qnb import cost

f32, f64, i32 = qnb.f32, qnb.f64, qnb.i32
Tile16, Vec16 = qnb.Tile16, qnb.Vec16


def counted(launch, *args):
    return launch.specialize(*args).cost(args)


def traced_bytes(launch, *args) -> int:
    """What the cpu trace says the launch read and wrote, in bytes."""
    kernel, grid = (launch.kernel, launch.grid) if isinstance(launch, qnb.Launch) else (launch, 1)
    trace = kernel.trace[grid](*[np.array(a) if isinstance(a, np.ndarray) else a for a in args])
    sizes = {name: a.itemsize for name, a in zip(kernel.param_names, args) if hasattr(a, "dtype")}
    total = 0
    for program in trace.programs:
        for step in trace.steps(program):
            for region in [*step.reads, *step.writes]:
                area = max(0, region.r1 - region.r0) * max(0, region.c1 - region.c0)
                total += area * sizes[region.array]
    return total


# ----------------------------------------------------------------- elementwise and memory


@qnb.kernel
def scale_rows(x: qnb.Array[f32, 2], out: qnb.Array[f32, 2], s: f32):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    (t * s + 1.0).store(out, i * 16, 0)


def test_elementwise_counts_every_element_and_moves_the_windows_that_exist():
    x = np.ones((40, 16), np.float32)  # 3 programs: 16, 16 and 8 rows exist
    found = counted(scale_rows[3], x, np.zeros_like(x), 2.0)
    assert found.flops == 3 * (256 + 256)  # * and + on the whole tile in every program
    assert found.flops_by_op == {"mul": 768, "add": 768}
    assert found.bytes_loaded == {"x": 40 * 16 * 4} and found.bytes_stored == {"out": 40 * 16 * 4}
    assert found.bytes == 2 * 40 * 16 * 4 == traced_bytes(scale_rows[3], x, np.zeros_like(x), 2.0)
    assert found.unknown == ()


def test_a_window_past_the_array_moves_nothing():
    x = np.ones((16, 16), np.float32)
    found = counted(scale_rows[3], x, np.zeros_like(x), 2.0)  # programs 1, 2: no rows
    assert found.bytes == 2 * 256 * 4 and found.flops == 3 * 512


@qnb.kernel
def stencil(img: qnb.Array[f32, 2], out: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    t = Tile16.load(img, i * 16 - 1, j * 16 - 1)  # a padded load: rows/cols before 0 absent
    t.store(out, i * 16, j * 16)


def test_padded_windows_count_only_the_elements_inside_the_array():
    img = np.ones((20, 20), np.float32)
    found = counted(stencil[2, 2], img, np.zeros_like(img))
    # loads start at -1 and 15: rows 0..14 (15) and 15..19 (5), the same for columns
    loaded = (15 + 5) * (15 + 5)
    stored = 20 * 20  # stores at 0 and 16: 16 + 4 rows, 16 + 4 columns
    assert found.bytes_loaded == {"img": loaded * 4} and found.bytes_stored == {"out": stored * 4}
    assert found.flops == 0
    assert found.bytes == traced_bytes(stencil[2, 2], img, np.zeros_like(img))


@qnb.kernel
def int_and_cast(x: qnb.Array[i32, 2], out: qnb.Array[f32, 2]):
    t = Tile16.load(x, 0, 0)
    u = (t * 3 + 1).astype(f32)  # i32 work and a cast: no FLOPs
    (u - 0.5).store(out, 0, 0)  # one f32 op per element


def test_integer_work_and_casts_count_no_flops():
    found = counted(int_and_cast, np.ones((16, 16), np.int32), np.zeros((16, 16), np.float32))
    assert found.flops_by_op == {"sub": 256} and found.flops == 256
    assert found.bytes == 256 * 4 + 256 * 4


@qnb.kernel
def vectors(x: qnb.Array[f32, 1], m: qnb.Array[f32, 2], out: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    v = Vec16.load(x, i * 16)
    c = Vec16.load_col(m, 0, i)  # column i of m: 5 rows exist
    (qnb.sqrt(v) * c).store(out, i * 16)


def test_vec_loads_and_stores_count_their_existing_elements():
    x, m = np.ones(20, np.float32), np.ones((5, 3), np.float32)
    found = counted(vectors[2], x, m, np.zeros(20, np.float32))
    assert found.flops_by_op == {"sqrt": 32, "mul": 32}
    assert found.bytes_loaded == {"x": 20 * 4, "m": 2 * 5 * 4}  # 16 + 4; column 0, column 1
    assert found.bytes_stored == {"out": 20 * 4}
    assert found.bytes == traced_bytes(vectors[2], x, m, np.zeros(20, np.float32))


# ----------------------------------------------------------------- reductions, softmax


@qnb.kernel
def reductions(x: qnb.Array[f32, 2], rows: qnb.Array[f32, 1], total: qnb.Array[f32, 1]):
    t = qnb.Tile[8, 32].load(x, 0, 0)
    t.max(axis=0).store(rows, 0)  # 32 outputs of 8: 32·7
    total[0] = t.sum() + t.min(axis=1).sum()  # 255; 8·31 then 7; one add


def test_a_reduction_of_n_into_one_output_counts_n_minus_one():
    found = counted(
        reductions, np.ones((8, 32), np.float32), np.zeros(32, np.float32), np.zeros(1, np.float32)
    )
    assert found.flops_by_op == {"max": 32 * 7, "sum": 255 + 7, "min": 8 * 31, "add": 1}
    assert found.bytes == 8 * 32 * 4 + 32 * 4 + 4


@qnb.kernel
def softmax(x: qnb.Array[f32, 2], out: qnb.Array[f32, 2]):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0, other=-math.inf)
    e = qnb.exp(t - t.max(axis=1, keepdims=True))
    (e / e.sum(axis=1, keepdims=True)).store(out, i * 16, 0)


def test_softmax_counts_by_op():
    x = np.ones((24, 16), np.float32)
    found = counted(softmax[2], x, np.zeros_like(x))
    per_program = {"max": 16 * 15, "sub": 256, "exp": 256, "sum": 16 * 15, "div": 256}
    assert found.flops_by_op == {op: 2 * n for op, n in per_program.items()}
    assert found.bytes == 2 * 24 * 16 * 4 == traced_bytes(softmax[2], x, np.zeros_like(x))


# ----------------------------------------------------------------- linear algebra


@qnb.kernel
def tiled_matmul(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], c: qnb.Array[f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    acc = Tile16.zeros(f32)
    for k in range(0, a.shape[1], 16):  # a runtime bound: the array's shape
        acc = qnb.mma(Tile16.load(a, i * 16, k), Tile16.load(b, k, j * 16), acc)
    acc.store(c, i * 16, j * 16)


def test_a_tiled_matmul_is_two_m_n_k():
    m, k, n = 32, 40, 48  # K = 40: three steps of 16 (the last 8 columns wide)
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    found = counted(tiled_matmul[2, 3], a, b, np.zeros((m, n), np.float32))
    assert found.flops == found.flops_by_op["mma"] == 6 * 3 * (2 * 16 * 16 * 16)
    # every program reads its strip of a (16 × 40) and of b (40 × 16) once
    assert found.bytes_loaded == {"a": 6 * 16 * 40 * 4, "b": 6 * 40 * 16 * 4}
    assert found.bytes_stored == {"c": m * n * 4}
    assert found.bytes == traced_bytes(tiled_matmul[2, 3], a, b, np.zeros((m, n), np.float32))


@qnb.kernel
def products(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], out: qnb.Array[f32, 2]):
    p = qnb.Tile[16, 8].load(a, 0, 0) @ qnb.Tile[8, 32].load(b, 0, 0)  # 16·32·(2·8 − 1)
    u = qnb.Vec[16].load_col(a, 0, 0)
    w = qnb.Vec[32].load_row(b, 0, 0)
    (p + qnb.outer(u, w)).store(out, 0, 0)  # outer 16·32, add 16·32


def test_a_product_without_accumulator_and_an_outer_product():
    a, b = np.ones((16, 8), np.float32), np.ones((8, 32), np.float32)
    found = counted(products, a, b, np.zeros((16, 32), np.float32))
    assert found.flops_by_op == {"matmul": 16 * 32 * 15, "outer": 512, "add": 512}


@qnb.kernel
def factor_and_solve(a: qnb.Array[f64, 2], rhs: qnb.Array[f64, 2]):
    t = qnb.Tile[8, 8].load(a, 0, 0)
    t.cholesky_(1e-12)
    x = qnb.Tile[4, 8].load(rhs, 0, 0)
    t.solve_triangular_(x)
    x.store(rhs, 0, 0)


def test_cholesky_and_triangular_solve_count_their_formulas():
    n, m = 8, 4
    # column j: the diagonal 2j + 2 (2 for j = 0), each element below it 2j + 1 (1 for j = 0)
    by_hand = sum((2 * j + 2) + (n - 1 - j) * (2 * j + 1) for j in range(n))
    assert cost.cholesky_flops(2) == 7  # sqrt(max(a00)), a10 / L00, sqrt(max(a11 − L10²))
    spd = np.eye(8) * 4.0 + 1.0
    found = counted(factor_and_solve, spd, np.ones((4, 8)))
    assert found.flops_by_op == {"cholesky_": by_hand, "solve_triangular_": m * n * n}
    assert found.bytes == (64 + 32 + 32) * 8


# ----------------------------------------------------------------- control flow


@qnb.kernel
def running_sum(x: qnb.Array[f32, 1], out: qnb.Array[f32, 1], n: i32):
    acc = 0.0
    for i in range(n):  # a runtime bound: the launch's scalar
        acc += x[i] * 2.0
    out[0] = acc


def test_a_loop_with_a_runtime_bound_counts_its_trips():
    x = np.ones(1000, np.float32)
    found = counted(running_sum, x, np.zeros(1, np.float32), 777)
    assert found.flops_by_op == {"mul": 777, "add": 777}
    assert found.bytes_loaded == {"x": 777 * 4} and found.bytes_stored == {"out": 4}


@qnb.kernel
def column_strips(x: qnb.Array[f32, 2], out: qnb.Array[f32, 2], width: i32):
    i = qnb.program_id(0)
    acc = Tile16.zeros(f32)
    for c in range(0, width, 16):  # windows move with the loop: each pass counted alone
        acc = acc + Tile16.load(x, i * 16, c)
    acc.store(out, i * 16, 0)


def test_windows_that_move_with_a_loop_are_counted_pass_by_pass():
    x = np.ones((16, 40), np.float32)
    found = counted(column_strips[1], x, np.zeros((16, 16), np.float32), 40)
    assert found.flops_by_op == {"add": 3 * 256}
    assert found.bytes_loaded == {"x": 16 * 40 * 4}  # 16 + 16 + 8 columns
    assert found.bytes == traced_bytes(column_strips[1], x, np.zeros((16, 16), np.float32), 40)


@qnb.kernel
def triangle(out: qnb.Array[f32, 1], s: f32):
    i = qnb.program_id(0)
    acc = 0.0
    for _k in range(i):  # a trip count of its own in every program
        acc = acc + s
    out[i] = acc


def test_a_trip_count_that_differs_between_programs():
    found = counted(triangle[10], np.zeros(10, np.float32), 1.0)
    assert found.flops == sum(range(10)) and found.bytes_stored == {"out": 10 * 4}


@qnb.kernel
def guarded(x: qnb.Array[f32, 1], out: qnb.Array[f32, 1], n: i32):
    i = qnb.program_id(0)
    if i < n and i % 2 == 0:
        out[i] = x[i] / 3.0
    else:
        out[i] = 0.0


def test_branches_on_program_ids_and_scalars():
    found = counted(guarded[30], np.ones(30, np.float32), np.zeros(30, np.float32), 11)
    assert found.flops == 6  # programs 0, 2, 4, 6, 8, 10
    assert found.bytes_loaded == {"x": 6 * 4} and found.bytes_stored == {"out": 30 * 4}


@qnb.kernel
def until_break(x: qnb.Array[f32, 1], out: qnb.Array[f32, 1], stop: i32):
    total = 0.0
    for k in range(100):
        if k == stop:
            break
        if k % 3 == 0:
            continue
        total = total + x[k]
    out[0] = total * qnb.num_programs(0)


def test_break_and_continue_end_the_passes_they_should():
    found = counted(until_break, np.ones(100, np.float32), np.zeros(1, np.float32), 10)
    kept = [k for k in range(10) if k % 3]  # 1, 2, 4, 5, 7, 8
    assert found.flops_by_op == {"add": len(kept), "mul": 1}
    assert found.bytes_loaded == {"x": len(kept) * 4}


def test_a_kernel_without_program_ids_is_counted_once_for_the_whole_grid():
    x = np.ones(100, np.float32)
    found = counted(running_sum[1 << 20], x, np.zeros(1, np.float32), 5)
    assert found.flops == (1 << 20) * 10


# ----------------------------------------------------------------- what cannot be counted


@qnb.kernel
def scan_until_zero(x: qnb.Array[f32, 1], out: qnb.Array[f32, 1]):
    n = 0
    while x[n] > 0.0:
        n += 1
    out[0] = n * 1.0


def test_a_loop_steered_by_memory_is_unknown_and_says_where():
    found = counted(scan_until_zero, np.array([1, 1, 0], np.float32), np.zeros(1, np.float32))
    line = scan_until_zero.firstlineno + 2  # the while
    assert found.flops is None and found.bytes is None
    assert found.unknown == (f"line {line}: a loop whose condition is read from memory",)
    assert "FLOPs unknown" in str(found)


@qnb.kernel
def placed_by_data(x: qnb.Array[f32, 2], where: qnb.Array[i32, 1], out: qnb.Array[f32, 2]):
    row = where[0]
    (Tile16.load(x, row, 0) * 2.0).store(out, 0, 0)


def test_a_window_placed_by_memory_leaves_the_flops_known_and_the_bytes_unknown():
    found = counted(
        placed_by_data,
        np.ones((16, 16), np.float32),
        np.zeros(1, np.int32),
        np.zeros((16, 16), np.float32),
    )
    assert found.flops == 256 and found.bytes is None
    line = placed_by_data.firstlineno + 2
    assert found.unknown == (f"line {line}: a window placed by a value read from memory",)


@qnb.kernel
def costless_branch(x: qnb.Array[f32, 1], out: qnb.Array[i32, 1]):
    flag = 0
    if x[0] > 0.0:  # a branch on memory that costs nothing either way
        flag = 1
    out[0] = flag


def test_a_branch_on_memory_that_costs_nothing_either_way_is_counted():
    found = counted(costless_branch, np.ones(1, np.float32), np.zeros(1, np.int32))
    assert found.flops == 1 and found.bytes == 4 + 4  # the comparison; x[0], out[0]


def test_the_step_budget_makes_a_count_unknown_not_slow(monkeypatch):
    monkeypatch.setattr(cost, "STEP_BUDGET", 50)
    found = counted(triangle[200], np.zeros(200, np.float32), 1.0)
    assert found.flops is None and "more than 50 statement steps" in found.unknown[0]


@pytest.mark.parametrize("grid", [1, 7, (3, 5)])
def test_counts_match_the_trace_on_a_launch_of_any_grid(grid):
    x = np.arange(80 * 48, dtype=np.float32).reshape(80, 48)
    launch = stencil[grid]
    assert counted(launch, x, np.zeros_like(x)).bytes == traced_bytes(launch, x, np.zeros_like(x))
