"""The cpu backend's batched Cholesky and triangular solve (qnb/backends/cpu/semantics.py), run
"lanes last" over chunks of programs: the moves in and out of that layout are exact for
every layout and count of programs, and the arithmetic is DESIGN.md's column-by-column
definition, program by program, bit for bit."""

import ml_dtypes
import numpy as np
import pytest

from qnb.backends.cpu import lanes, semantics

# Counts of programs around the block and chunk boundaries of the moves: fewer than a
# block, one block, not a whole number of blocks, whole blocks, more than a chunk.
COUNTS = [
    1,
    5,
    lanes.LANE_BLOCK,
    37,
    3 * lanes.LANE_BLOCK,
    lanes.LANE_CHUNK + 3 * lanes.LANE_BLOCK + 1,
]


def _layouts(programs):
    """The same values as C-ordered, Fortran-ordered and strided program arrays."""
    yield "c-order", np.ascontiguousarray(programs)
    yield "f-order", np.asfortranarray(programs)
    wide = np.zeros((programs.shape[0] * 2, *programs.shape[1:]), programs.dtype)
    wide[::2] = programs
    yield "every-other", wide[::2]


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("shape", [(16, 16), (3, 5), (32, 32), ()])  # (): a per-program eps
def test_lanes_last_moves_are_exact_in_every_layout(count, shape):
    rng = np.random.default_rng(count)
    values = rng.standard_normal((count, *shape))
    shared = rng.standard_normal((1, *shape))
    seen = []

    def fn(part, one, out):
        lanes = out.shape[-1]
        seen.append(lanes)
        assert part.strides[-1] == part.itemsize and part.shape == (*shape, lanes)
        assert one.shape[:-1] == shape and one.shape[-1] in (1, lanes)
        assert out.strides[-1] == out.itemsize and out.shape == (*shape, lanes)
        np.add(part * 2, one, out=out)

    for name, programs in _layouts(values):
        seen.clear()
        got = lanes._lanes_last(fn, programs, shared, shape=shape)
        assert got.shape == (count, *shape), name
        assert count == 1 or got.strides[0] == got.itemsize, name  # lanes last
        np.testing.assert_array_equal(got, values * 2 + shared, err_msg=name)
        # (a lone program runs as two copies of itself: see the bit-for-bit test below)
        assert sum(seen) == max(count, 2) and max(seen) <= lanes.LANE_CHUNK


def _cholesky_by_definition(a, eps):
    """DESIGN.md: column j's diagonal is sqrt(max(a_jj - s, eps)) with s the sum of the
    squares to its left, in order; the rows below subtract their dot product with row j
    (in order) and divide by it; the strict upper triangle is 0."""
    size = a.shape[0]
    lower = np.zeros_like(a)
    for j in range(size):
        s = a.dtype.type(0)
        for k in range(j):
            s = s + lower[j, k] * lower[j, k]
        lower[j, j] = np.sqrt(np.maximum(a[j, j] - s, eps))
        for i in range(j + 1, size):
            dot = a.dtype.type(0)
            for k in range(j):
                dot = dot + lower[i, k] * lower[j, k]
            lower[i, j] = (a[i, j] - dot) / lower[j, j]
    return lower


def _solve_by_definition(lower, rhs):
    """X with X @ L.T == B, column by column: X[:, k] = (B[:, k] - X[:, :k] · L[k, :k]) / L[k, k]."""
    x = np.zeros_like(rhs)
    for k in range(rhs.shape[1]):
        for i in range(rhs.shape[0]):
            dot = rhs.dtype.type(0)
            for m in range(k):
                dot = dot + x[i, m] * lower[k, m]
            x[i, k] = (rhs[i, k] - dot) / lower[k, k]
    return x


def _spd(count, size, dtype, seed):
    rng = np.random.default_rng(seed)
    m = rng.uniform(-1, 1, (count, size, size))
    return (m @ m.transpose(0, 2, 1) + 0.5 * np.eye(size)).astype(dtype)


# 1 and LANE_CHUNK + 1: a lone program in a pass, whose dot products einsum alone would
# sum in another order.
@pytest.mark.parametrize(
    "count", [1, 2, 37, lanes.LANE_CHUNK + 1, lanes.LANE_CHUNK + 3 * lanes.LANE_BLOCK]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_and_solve_are_the_column_definition_bit_for_bit(count, dtype):
    size = 8 if count > 100 else 16  # (the definition is a Python loop per element)
    a = _spd(count, size, dtype, count)
    a[::2, -1, -1] -= 100  # not positive definite: the last pivot is clamped to eps
    eps = np.full((1,), 0.05, dtype)
    lower = lanes._lanes_last(semantics._cholesky, np.asfortranarray(a), eps, shape=(size, size))
    rhs = np.random.default_rng(1).uniform(-1, 1, (count, 3, size)).astype(dtype)
    x = lanes._lanes_last(semantics._solve_lower, lower, rhs, shape=(3, size))
    for p in range(count):
        want = _cholesky_by_definition(a[p], eps[0])
        np.testing.assert_array_equal(lower[p], want, err_msg=f"program {p}")
        assert (lower[p, -1, -1] == np.sqrt(eps[0])) == (p % 2 == 0)
        np.testing.assert_array_equal(x[p], _solve_by_definition(want, rhs[p]), err_msg=f"{p}")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_cholesky_keeps_its_dtype_and_factors(dtype):
    count = 3 * lanes.LANE_BLOCK
    a = _spd(count, 16, np.float64, 2) + 16 * np.eye(16)
    lower = lanes._lanes_last(
        semantics._cholesky, a.astype(dtype), np.zeros(1, dtype), shape=(16, 16)
    )
    assert lower.dtype == dtype
    want = np.linalg.cholesky(a)
    np.testing.assert_allclose(lower.astype(np.float64), want, rtol=0.05, atol=0.05)
    assert (np.triu(lower.astype(np.float64), 1) == 0).all()


@pytest.mark.parametrize("count", [2, 37, lanes.LANE_CHUNK + 3 * lanes.LANE_BLOCK + 1])
def test_a_lanes_last_result_feeds_the_next_op_without_a_move(count):
    # Cholesky's result is a view of a lanes-last array: the solve after it reads that
    # array in place (no move into scratch), and the answer is the moved one's.
    a = _spd(count, 16, np.float64, 3)
    eps = np.zeros(1)
    lower = lanes._lanes_last(semantics._cholesky, a, eps, shape=(16, 16))
    assert lower.strides[0] == lower.itemsize
    rhs = np.random.default_rng(4).uniform(-1, 1, (count, 16, 16))
    seen = []

    def solve(factor, b, out):
        seen.append(np.shares_memory(factor, lower))
        return semantics._solve_lower(factor, b, out)

    x = lanes._lanes_last(solve, lower, rhs, shape=(16, 16), dtype=rhs.dtype)
    assert seen and all(seen)
    moved = lanes._lanes_last(
        semantics._solve_lower, np.ascontiguousarray(lower), rhs, shape=(16, 16)
    )
    np.testing.assert_array_equal(x, moved)


@pytest.mark.parametrize("count", [128, lanes.LANE_CHUNK, 16384])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_lanes_last_rows_are_not_a_power_of_two_apart(count, dtype):
    # Rows a power of two (>= 1 KiB) apart would share cache sets and alias between a
    # step's loads and stores; the result pads them.
    got = lanes._lanes_last_result((4, 4), dtype, count)
    itemsize = np.dtype(dtype).itemsize
    assert got.shape == (4, 4, count) and got.strides[-1] == itemsize
    assert got.strides[-2] % 1024 != 0


def test_operands_read_once_are_read_in_place(monkeypatch):
    # Cholesky reads each element of ``a`` once, the solve each of its right-hand side:
    # neither is moved lanes last first; the solve's factor (re-read) is, unless it is
    # already lanes last. The answers are those of moving everything.
    moved = []

    class Recording(lanes._LaneMoves):
        def to_lanes_last(self, programs):
            moved.append(programs.shape[1:])
            return super().to_lanes_last(programs)

    monkeypatch.setattr(lanes, "_LaneMoves", Recording)
    count = lanes.LANE_CHUNK + 3 * lanes.LANE_BLOCK
    a = _spd(count, 16, np.float64, 5)
    rhs = np.random.default_rng(6).uniform(-1, 1, (count, 3, 16))
    lower = lanes._lanes_last(semantics._cholesky, a, np.zeros(1), shape=(16, 16))
    x = lanes._lanes_last(semantics._solve_lower, lower, rhs, shape=(3, 16), dtype=rhs.dtype)
    assert moved == []
    x_moved = lanes._lanes_last(
        semantics._solve_lower, np.ascontiguousarray(lower), rhs, shape=(3, 16), dtype=rhs.dtype
    )
    assert moved and set(moved) == {(16, 16)}  # the factor only
    np.testing.assert_array_equal(x, x_moved)
    for p in (0, count - 1):
        want = _cholesky_by_definition(a[p], 0.0)
        np.testing.assert_array_equal(lower[p], want)
        np.testing.assert_array_equal(x[p], _solve_by_definition(want, rhs[p]))
