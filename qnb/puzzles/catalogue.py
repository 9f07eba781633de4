"""Every puzzle, in teaching order: maps, guards, broadcasting, reductions, a masked row
softmax, stencils, a histogram with atomics, a scan, matrices, a causal attention.

Each NumPy definition below is what ``show`` prints: it is written for a reader, in
float64, with the names of the kernel's parameters.
"""

from __future__ import annotations

import math

import numpy as np

from qnb.puzzles.puzzle import Case, Puzzle, cdiv, nonzero

# ------------------------------------------------------------------ maps and guards


def add_ten(x):
    return x + 10.0


def multiply(x, y):
    return x * y


def guarded_square(x):
    return x * x


def clip(x, low, high):
    return np.minimum(np.maximum(x, low), high)


def scale_2d(x):
    return x * 2.0 + 1.0


VECTOR_CASES = (
    Case({"n": 1}, "a size of 1"),
    Case({"n": 200}, "not a multiple of 128"),
    Case({"n": 1000}, "not a multiple of 128, several programs"),
    Case({"n": 100_000}, "large"),
)
MATRIX_CASES = (
    Case({"rows": 1, "cols": 1}, "a size of 1"),
    Case({"rows": 37, "cols": 50}, "not a multiple of the tile"),
    Case({"rows": 300, "cols": 200}, "large, not a multiple of the tile"),
)


def _vector(rng, sizes):
    return {"x": nonzero(rng, sizes["n"])}


def _two_vectors(rng, sizes):
    return {"x": nonzero(rng, sizes["n"]), "y": nonzero(rng, sizes["n"])}


def _matrix(rng, sizes):
    return {"x": nonzero(rng, (sizes["rows"], sizes["cols"]))}


def _vec_grid(sizes):
    return (cdiv(sizes["n"], 128),)


MAPS = [
    Puzzle(
        name="add_ten",
        title="A map over a vector",
        goal="Add 10 to every element of `x`. Each program handles 128 elements with a "
        "`Vec[128]`: `Vec[128].load(x, start)` reads 0 past the end of `x`, and "
        "`v.store(out, start)` writes only the elements that exist.",
        signature="def add_ten(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(n, 128)` programs (each stores 128 elements of `out`)",
        params=("x", "out"),
        outputs=("out",),
        make=_vector,
        numpy=add_ten,
        grid=_vec_grid,
        cases=VECTOR_CASES,
    ),
    Puzzle(
        name="multiply",
        title="A map over two vectors",
        goal="Multiply `x` and `y` element by element.",
        signature="def multiply(x: qnb.Array[qnb.f32, 1], y: qnb.Array[qnb.f32, 1], "
        "out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(n, 128)` programs",
        params=("x", "y", "out"),
        outputs=("out",),
        make=_two_vectors,
        numpy=multiply,
        grid=_vec_grid,
        cases=VECTOR_CASES,
    ),
    Puzzle(
        name="guarded_square",
        title="A guard: more programs than elements",
        goal="Square every element, one program per element with scalar reads and writes "
        "(`x[i]`, `out[i] = ...`). The grid is rounded up to a multiple of 64 programs, "
        "so the last programs have no element: an element read or written past the end "
        "of an array is an error (`QnbIndexError` on cpu).",
        signature="def guarded_square(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(n, 64) * 64` programs (one per element, and some to spare)",
        params=("x", "out"),
        outputs=("out",),
        make=_vector,
        numpy=guarded_square,
        grid=lambda sizes: (cdiv(sizes["n"], 64) * 64,),
        cases=(
            Case({"n": 1}, "a size of 1"),
            Case({"n": 100}, "not a multiple of 64"),
            Case({"n": 4000}, "large, not a multiple of 64"),
        ),
        hint="`x.shape[0]` is the length of `x`.",
    ),
    Puzzle(
        name="clip",
        title="Scalar parameters",
        goal="Clip every element of `x` into `[low, high]`.",
        signature="def clip(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1], "
        "low: qnb.f32, high: qnb.f32):",
        grid_text="`cdiv(n, 128)` programs",
        params=("x", "out", "low", "high"),
        outputs=("out",),
        make=lambda rng, sizes: {"x": nonzero(rng, sizes["n"]), "low": -0.5, "high": 0.75},
        numpy=clip,
        grid=_vec_grid,
        cases=VECTOR_CASES,
    ),
    Puzzle(
        name="scale_2d",
        title="A map over a matrix",
        goal="Compute `2 x + 1` over a matrix, a `Tile[16, 32]` per program: program "
        "`(i, j)` handles rows `16 i ..` and columns `32 j ..`.",
        signature="def scale_2d(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(rows, 16), cdiv(cols, 32))` programs",
        params=("x", "out"),
        outputs=("out",),
        make=_matrix,
        numpy=scale_2d,
        grid=lambda s: (cdiv(s["rows"], 16), cdiv(s["cols"], 32)),
        cases=MATRIX_CASES,
    ),
]

# ------------------------------------------------------------------ broadcasting


def outer_sum(a, b):
    return a[:, None] + b[None, :]


def add_bias(x, bias):
    return x + bias[None, :]


def _tile_grid(sizes):
    return (cdiv(sizes["rows"], 16), cdiv(sizes["cols"], 32))


BROADCASTING = [
    Puzzle(
        name="outer_sum",
        title="Broadcasting a column and a row",
        goal="`out[i, j] = a[i] + b[j]`: a `Vec[16]` of `a` as a column (`u[:, None]`, a "
        "`Tile[16, 1]`) plus a `Vec[32]` of `b` as a row (`v[None, :]`) broadcast to a "
        "`Tile[16, 32]`.",
        signature="def outer_sum(a: qnb.Array[qnb.f32, 1], b: qnb.Array[qnb.f32, 1], "
        "out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(rows, 16), cdiv(cols, 32))` programs, `rows = len(a)`, `cols = len(b)`",
        params=("a", "b", "out"),
        outputs=("out",),
        make=lambda rng, s: {"a": nonzero(rng, s["rows"]), "b": nonzero(rng, s["cols"])},
        numpy=outer_sum,
        grid=_tile_grid,
        cases=MATRIX_CASES,
    ),
    Puzzle(
        name="add_bias",
        title="A bias per column",
        goal="Add `bias[j]` to every element of column `j` of `x`.",
        signature="def add_bias(x: qnb.Array[qnb.f32, 2], bias: qnb.Array[qnb.f32, 1], "
        "out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(rows, 16), cdiv(cols, 32))` programs",
        params=("x", "bias", "out"),
        outputs=("out",),
        make=lambda rng, s: {
            "x": nonzero(rng, (s["rows"], s["cols"])),
            "bias": nonzero(rng, s["cols"]),
        },
        numpy=add_bias,
        grid=_tile_grid,
        cases=MATRIX_CASES,
    ),
]

# ------------------------------------------------------------------ reductions


def total(x):
    return np.array([x.sum()])


def row_sums(x):
    return x.sum(axis=1)


def column_means(x):
    return x.mean(axis=0)


def row_max(x):
    return x.max(axis=1)


def masked_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm(x, eps):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


LONG_ROWS = (
    Case({"rows": 1, "cols": 1}, "a size of 1"),
    Case({"rows": 37, "cols": 50}, "not a multiple of the tile"),
    Case({"rows": 100, "cols": 1000}, "long rows, not a multiple of 64"),
    Case({"rows": 2000, "cols": 64}, "many rows"),
)
SHORT_ROWS = (
    Case({"rows": 1, "cols": 1}, "a size of 1"),
    Case({"rows": 37, "cols": 50}, "rows shorter than the tile"),
    Case({"rows": 1000, "cols": 128}, "large: rows as long as the tile"),
)


def _negative(rng, sizes):
    return {"x": -np.abs(nonzero(rng, (sizes["rows"], sizes["cols"])))}


REDUCTIONS = [
    Puzzle(
        name="total",
        title="A reduction in one program",
        goal="The sum of all of `x`, into `out[0]`. One program loops over `x` a "
        "`Vec[1024]` at a time and sums at the end.",
        signature="def total(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):",
        grid_text="1 program",
        params=("x", "out"),
        outputs=("out",),
        make=_vector,
        numpy=total,
        grid=lambda sizes: (1,),
        cases=(
            Case({"n": 1}, "a size of 1"),
            Case({"n": 1000}, "less than one Vec[1024]"),
            Case({"n": 5000}, "not a multiple of 1024"),
            Case({"n": 100_000}, "large"),
        ),
        rtol=1e-4,
        atol=1e-3,
    ),
    Puzzle(
        name="row_sums",
        title="A sum per row",
        goal="`out[i]` is the sum of row `i` of `x`: 16 rows per program, looping over "
        "the columns 64 at a time (`t.sum(axis=1)` is a `Vec[16]`).",
        signature="def row_sums(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(rows, 16)` programs",
        params=("x", "out"),
        outputs=("out",),
        make=_matrix,
        numpy=row_sums,
        grid=lambda s: (cdiv(s["rows"], 16),),
        cases=LONG_ROWS,
        rtol=1e-4,
        atol=1e-4,
    ),
    Puzzle(
        name="column_means",
        title="A mean per column",
        goal="`out[j]` is the mean of column `j` of `x`: 64 columns per program, looping "
        "over the rows 16 at a time.",
        signature="def column_means(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(cols, 64)` programs",
        params=("x", "out"),
        outputs=("out",),
        make=_matrix,
        numpy=column_means,
        grid=lambda s: (cdiv(s["cols"], 64),),
        cases=(
            Case({"rows": 1, "cols": 1}, "a size of 1"),
            Case({"rows": 37, "cols": 50}, "not a multiple of the tile"),
            Case({"rows": 1000, "cols": 300}, "large, not a multiple of the tile"),
        ),
        rtol=1e-4,
        atol=1e-5,
    ),
    Puzzle(
        name="row_max",
        title="A guard in a reduction: what padding reads",
        goal="`out[i]` is the largest element of row `i` (here every element is "
        "negative). Past the end of a row a load reads its `other` value, 0 by default: "
        "choose one that cannot win.",
        signature="def row_max(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(rows, 16)` programs",
        params=("x", "out"),
        outputs=("out",),
        make=_negative,
        numpy=row_max,
        grid=lambda s: (cdiv(s["rows"], 16),),
        cases=LONG_ROWS,
    ),
    Puzzle(
        name="masked_softmax",
        title="A masked row softmax",
        goal="The softmax of each row of `x` (rows of at most 128): `exp(x - max)` over "
        "its sum. The elements past a row's end must count for nothing: neither in the "
        "maximum nor in the sum.",
        signature="def masked_softmax(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):",
        grid_text="`cdiv(rows, 16)` programs (a `Tile[16, 128]` each)",
        params=("x", "out"),
        outputs=("out",),
        make=lambda rng, s: {"x": nonzero(rng, (s["rows"], s["cols"]), 0.5, 4.0)},
        numpy=masked_softmax,
        grid=lambda s: (cdiv(s["rows"], 16),),
        cases=SHORT_ROWS,
        rtol=1e-4,
        atol=1e-6,
    ),
    Puzzle(
        name="layer_norm",
        title="A layer norm",
        goal="Normalise each row of `x` (rows of at most 128) to mean 0 and variance 1: "
        "`(x - mean) / sqrt(var + eps)`, the mean and variance over the row's own "
        "elements only.",
        signature="def layer_norm(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], "
        "eps: qnb.f32):",
        grid_text="`cdiv(rows, 16)` programs (a `Tile[16, 128]` each)",
        params=("x", "out", "eps"),
        outputs=("out",),
        make=lambda rng, s: {"x": nonzero(rng, (s["rows"], s["cols"])), "eps": 1e-5},
        numpy=layer_norm,
        grid=lambda s: (cdiv(s["rows"], 16),),
        cases=SHORT_ROWS,
        rtol=1e-4,
        atol=1e-4,
    ),
]

# ------------------------------------------------------------------ stencils


def stencil_3(x):
    padded = np.pad(x, 1)
    return padded[:-2] + padded[1:-1] + padded[2:]


def box_blur(img):
    padded = np.pad(img, 1)
    rows, cols = img.shape
    return sum(padded[i : i + rows, j : j + cols] for i in range(3) for j in range(3)) / 9.0


STENCILS = [
    Puzzle(
        name="stencil_3",
        title="A stencil",
        goal="`out[i] = x[i - 1] + x[i] + x[i + 1]`, with 0 for the elements outside `x`. "
        "A load may start before the array (`start - 1`): what lies outside reads 0.",
        signature="def stencil_3(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(n, 128)` programs",
        params=("x", "out"),
        outputs=("out",),
        make=_vector,
        numpy=stencil_3,
        grid=_vec_grid,
        cases=VECTOR_CASES,
    ),
    Puzzle(
        name="box_blur",
        title="A 2-D stencil: a box blur",
        goal="Each element of `out` is the mean of the 3×3 block of `img` around it "
        "(outside `img`: 0). Program `(i, j)` stores a 16×16 tile; `qnb.static(range(-1, "
        "2))` unrolls the nine shifted loads.",
        signature="def box_blur(img: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(rows, 16), cdiv(cols, 16))` programs",
        params=("img", "out"),
        outputs=("out",),
        make=lambda rng, s: {"img": nonzero(rng, (s["rows"], s["cols"]))},
        numpy=box_blur,
        grid=lambda s: (cdiv(s["rows"], 16), cdiv(s["cols"], 16)),
        cases=MATRIX_CASES,
    ),
]

# ------------------------------------------------------------------ atomics and scans


def histogram(x, bins):
    return np.bincount(x, minlength=bins)[:bins]


def _histogram_inputs(rng, sizes):
    # (bins is for the NumPy definition, not a kernel parameter)
    return {"x": rng.integers(0, sizes["bins"], sizes["n"], dtype=np.int32), "bins": sizes["bins"]}


def prefix_sums(x):
    return np.cumsum(x)


ATOMICS_AND_SCANS = [
    Puzzle(
        name="histogram",
        title="A histogram with atomics",
        goal="`hist[b]` counts the elements of `x` equal to `b`. Many programs add to one "
        "bin: a plain store from several programs to one element is a race; "
        "`qnb.atomic_add(hist, index, 1)` adds once per index, safely. (`hist` starts at "
        "0 here, not poisoned.)",
        signature="def histogram(x: qnb.Array[qnb.i32, 1], hist: qnb.Array[qnb.i32, 1]):",
        grid_text="`cdiv(n, 128)` programs",
        params=("x", "hist"),
        outputs=("hist",),
        make=_histogram_inputs,
        numpy=histogram,
        grid=lambda s: (cdiv(s["n"], 128),),
        cases=(
            Case({"n": 1, "bins": 1}, "a size of 1"),
            Case({"n": 1000, "bins": 37}, "not a multiple of 128"),
            Case({"n": 100_000, "bins": 256}, "large"),
        ),
        output_dtypes={"hist": np.int32},
        initial={"hist": 0},
    ),
    Puzzle(
        name="prefix_sums",
        title="A scan",
        goal="`out[i] = x[0] + ... + x[i]`: one program, a `Vec[1024]` at a time with "
        "`v.cumsum()`, carrying the total so far into the next block.",
        signature="def prefix_sums(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):",
        grid_text="1 program",
        params=("x", "out"),
        outputs=("out",),
        make=lambda rng, s: {"x": rng.uniform(0.25, 2.0, s["n"]).astype(np.float32)},
        numpy=prefix_sums,
        grid=lambda s: (1,),
        cases=(
            Case({"n": 1}, "a size of 1"),
            Case({"n": 5000}, "not a multiple of 1024"),
            Case({"n": 100_000}, "large"),
        ),
        rtol=1e-4,
        atol=1e-3,
        hint="a loop `for start in range(0, x.shape[0], 1024)`; the last element of a "
        "block's scan is the total to carry (past the end, the loads read 0).",
    ),
]

# ------------------------------------------------------------------ matrices


def transpose(x):
    return x.T


def outer_product(u, v):
    return np.outer(u, v)


def matvec(a, x):
    return a @ x


def matmul(a, b):
    return a @ b


def linear_relu(x, w, bias):
    return np.maximum(x @ w + bias[None, :], 0.0)


def causal_attention(q, k, v, scale):
    s = q @ k.T * scale
    s = np.where(np.tri(len(q), dtype=bool), s, -np.inf)  # key j <= query i
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


PRODUCT_CASES = (
    Case({"m": 1, "k": 1, "n": 1}, "a size of 1"),
    Case({"m": 37, "k": 50, "n": 29}, "not a multiple of the tile"),
    Case({"m": 256, "k": 192, "n": 128}, "large"),
)


def _product(rng, s):
    return {"a": nonzero(rng, (s["m"], s["k"])), "b": nonzero(rng, (s["k"], s["n"]))}


def _linear(rng, s):
    return {
        "x": nonzero(rng, (s["m"], s["k"])),
        "w": nonzero(rng, (s["k"], s["n"])),
        "bias": nonzero(rng, s["n"]),
    }


def _attention(rng, s):
    shape = (s["seq"], s["d"])
    return {
        "q": nonzero(rng, shape),
        "k": nonzero(rng, shape),
        "v": nonzero(rng, shape),
        "scale": 1.0 / math.sqrt(s["d"]),
    }


MATRICES = [
    Puzzle(
        name="transpose",
        title="A transpose",
        goal="`out = x.T`: program `(i, j)` loads a `Tile[32, 32]` at rows `32 i`, columns "
        "`32 j` of `x`, and stores its `.T` where it belongs in `out`.",
        signature="def transpose(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(rows, 32), cdiv(cols, 32))` programs (`rows, cols = x.shape`)",
        params=("x", "out"),
        outputs=("out",),
        make=_matrix,
        numpy=transpose,
        grid=lambda s: (cdiv(s["rows"], 32), cdiv(s["cols"], 32)),
        cases=MATRIX_CASES,
    ),
    Puzzle(
        name="outer_product",
        title="An outer product",
        goal="`out[i, j] = u[i] * v[j]`, with `qnb.outer`.",
        signature="def outer_product(u: qnb.Array[qnb.f32, 1], v: qnb.Array[qnb.f32, 1], "
        "out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(rows, 32), cdiv(cols, 32))` programs, `rows = len(u)`, `cols = len(v)`",
        params=("u", "v", "out"),
        outputs=("out",),
        make=lambda rng, s: {"u": nonzero(rng, s["rows"]), "v": nonzero(rng, s["cols"])},
        numpy=outer_product,
        grid=lambda s: (cdiv(s["rows"], 32), cdiv(s["cols"], 32)),
        cases=MATRIX_CASES,
    ),
    Puzzle(
        name="matvec",
        title="A matrix times a vector",
        goal="`y = a @ x`: 16 rows of `a` per program, looping over the columns 64 at a "
        "time (a `Tile[16, 64]` times a `Vec[64]` broadcast as a row, summed along it).",
        signature="def matvec(a: qnb.Array[qnb.f32, 2], x: qnb.Array[qnb.f32, 1], "
        "y: qnb.Array[qnb.f32, 1]):",
        grid_text="`cdiv(rows, 16)` programs",
        params=("a", "x", "y"),
        outputs=("y",),
        make=lambda rng, s: {
            "a": nonzero(rng, (s["rows"], s["cols"])),
            "x": nonzero(rng, s["cols"]),
        },
        numpy=matvec,
        grid=lambda s: (cdiv(s["rows"], 16),),
        cases=(
            Case({"rows": 1, "cols": 1}, "a size of 1"),
            Case({"rows": 37, "cols": 50}, "not a multiple of the tile"),
            Case({"rows": 300, "cols": 1000}, "large"),
        ),
        rtol=1e-4,
        atol=1e-4,
    ),
    Puzzle(
        name="matmul",
        title="A tiled matrix product",
        goal="`c = a @ b`: program `(i, j)` computes a 32×32 tile of `c` by accumulating "
        "`qnb.mma` over the tiles of `a`'s rows and `b`'s columns.",
        signature="def matmul(a: qnb.Array[qnb.f32, 2], b: qnb.Array[qnb.f32, 2], "
        "c: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(m, 32), cdiv(n, 32))` programs (`a` is m×k, `b` k×n)",
        params=("a", "b", "c"),
        outputs=("c",),
        make=_product,
        numpy=matmul,
        grid=lambda s: (cdiv(s["m"], 32), cdiv(s["n"], 32)),
        cases=PRODUCT_CASES,
        rtol=1e-4,
        atol=1e-4,
    ),
    Puzzle(
        name="linear_relu",
        title="A fused linear layer",
        goal="`out = relu(x @ w + bias)`, the bias added per column, in one kernel.",
        signature="def linear_relu(x: qnb.Array[qnb.f32, 2], w: qnb.Array[qnb.f32, 2], "
        "bias: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 2]):",
        grid_text="`(cdiv(m, 32), cdiv(n, 32))` programs (`x` is m×k, `w` k×n)",
        params=("x", "w", "bias", "out"),
        outputs=("out",),
        make=_linear,
        numpy=linear_relu,
        grid=lambda s: (cdiv(s["m"], 32), cdiv(s["n"], 32)),
        cases=PRODUCT_CASES,
        rtol=1e-4,
        atol=1e-4,
    ),
    Puzzle(
        name="causal_attention",
        title="Causal attention",
        goal="One head of causal self-attention: `softmax(q k^T * scale)` with query `i` "
        "seeing keys `j <= i` only, times `v`. 32 queries per program, the keys in blocks "
        "of 32 up to the diagonal, with an online softmax (a running maximum and sum, "
        "rescaled as each block comes). `d` (the head size) is at most 32.",
        signature="def causal_attention(q: qnb.Array[qnb.f32, 2], k: qnb.Array[qnb.f32, 2], "
        "v: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], scale: qnb.f32):",
        grid_text="`cdiv(seq, 32)` programs (`q`, `k`, `v` are seq×d)",
        params=("q", "k", "v", "out", "scale"),
        outputs=("out",),
        make=_attention,
        numpy=causal_attention,
        grid=lambda s: (cdiv(s["seq"], 32),),
        cases=(
            Case({"seq": 1, "d": 1}, "a size of 1"),
            Case({"seq": 37, "d": 32}, "not a multiple of the block"),
            Case({"seq": 300, "d": 32}, "large"),
        ),
        rtol=1e-4,
        atol=1e-5,
        hint="mask with `qnb.where(cols <= rows, s, -math.inf)` (`rows`, `cols`: the "
        "positions of the block's queries and keys, from `qnb.arange`).",
    ),
]

PUZZLES = {
    p.name: p for p in (*MAPS, *BROADCASTING, *REDUCTIONS, *STENCILS, *ATOMICS_AND_SCANS, *MATRICES)
}

__all__ = ["PUZZLES"]
