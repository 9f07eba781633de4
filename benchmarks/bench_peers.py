"""qnb's cpu backend beside NumPy and, where installed, its peers (issue #33).

Each tool runs in a process of its own. There, each workload's first call is checked
against NumPy's answer; then the tool, NumPy in place (``out=`` into buffers made once, as a
user who cares about speed writes it) and NumPy allocating are each warmed up until their
first calls' cost is gone and timed in paired rounds (``benchmarks/_steady.py``). A row
gives the tool's median time and its ratio to each NumPy form, median [range] over the
rounds (lower is better; the in-place ratio is the one to read). Peers come from the
optional ``peers`` extra (``pip install -e '.[peers]'``): Numba, JAX (jit, and Pallas in
interpret mode), Warp (CPU tiles; SIMT for the tile-free form), Triton
(``TRITON_INTERPRET=1``). A peer that is not installed prints "not installed"; one
without a kernel for a row, or capped there, prints "not run". Nothing here is needed by
``make test``.

    python -m benchmarks peers            # all workloads, every tool
    python -m benchmarks.bench_peers --tool numba   # one tool, in this process
    QNB_BENCH_QUICK=1 python -m benchmarks peers   # fewer rounds
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import qnb
from benchmarks import _peers_jit, _peers_rows, _steady, bench_language
from qnb import Tile16, Vec16, f32, f64

REPO = Path(__file__).resolve().parents[1]
QUICK = os.environ.get("QNB_BENCH_QUICK") == "1"
REPEATS = 3 if QUICK else 5


# ---------------------------------------------------------------------- qnb kernels


@qnb.kernel
def trivial(d: qnb.Array[f32, 2]):
    Tile16.full(4.0).store(d, 0, 0)


@qnb.kernel
def affine_tiles(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    (Tile16.load(x, i, j) * 2.0 + 1.0).store(y, i, j)


@qnb.kernel
def affine_elements(x: qnb.Array[f32, 1], y: qnb.Array[f32, 1]):
    i = qnb.program_id(0)
    if i < x.shape[0]:
        y[i] = 2.0 * x[i] + 1.0


@qnb.kernel
def tiled_matmul(a: qnb.Array[f32, 2], b: qnb.Array[f32, 2], c: qnb.Array[f32, 2]):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    acc = Tile16.zeros(f32)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
    acc.store(c, i, j)


@qnb.kernel
def row_softmax(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2]):
    r = qnb.program_id(0) * 16
    t = Tile16.load(x, r, 0)
    ones = Vec16.full(1.0)
    e = qnb.exp(t - qnb.outer(t.max(axis=1), ones))
    (e * qnb.outer(1.0 / e.sum(axis=1), ones)).store(y, r, 0)


@qnb.kernel
def cholesky_solve(a: qnb.Array[f64, 3], b: qnb.Array[f64, 3], x: qnb.Array[f64, 3]):
    s = qnb.program_id(0)
    lower = Tile16.load(a[s], 0, 0)
    lower.cholesky_(0.0)
    y = Tile16.load(b[s], 0, 0)
    lower.solve_triangular_(y)  # y @ L.T == b[s]
    y.store(x[s], 0, 0)


# ---------------------------------------------------------------------- workloads


class Workload:
    """One row of the table: NumPy's two forms, the check of an answer, a runner per tool."""

    def __init__(self, name, numpy_fn, check, runners, numpy_alloc=None):
        self.name = name
        self.numpy_fn = numpy_fn  # in place (out=, buffers made once): the ratio's baseline
        self.numpy_alloc = numpy_alloc or numpy_fn  # the plain allocating expression
        self.check = check  # (result) -> bool, against NumPy's answer
        self.runners = runners  # tool -> (setup() -> run() -> result) or None


def _close(want, rtol=1e-5, atol=1e-5):
    return lambda got: got is not None and np.allclose(got, want, rtol=rtol, atol=atol)


# The shapes of each workload: (the table's, a small one on which a test checks every
# tool, the interpreters included, in seconds).
SHAPES = {
    "tiles": (2048, 64),
    "elements": (2**20, 1000),
    "matmul": (512, 64),
    "softmax": (65536, 256),
    "cholesky": (16384, 8),
    "wide_softmax": ((4096, 1024), (32, 256)),
    "layer_norm": ((8192, 1024), (32, 256)),
    "attention": (1024, 128),
}


def _affine_in_place(x, t):
    np.multiply(x, 2, out=t)
    return np.add(t, 1, out=t)


def workloads(small=False, tools=None):
    """The table's workloads; ``small``: the same kernels and checks on the small shapes
    (the second of each pair in ``SHAPES``; each name then ends in "[small]"); ``tools``:
    the peers to set up (all by default; qnb is always there)."""
    shapes = {name: pair[small] for name, pair in SHAPES.items()}
    rng = np.random.default_rng(0)
    out = []

    def peers(workload, **arrays):
        return _peer_runners(workload, tools, **arrays)

    d = np.zeros((16, 16), np.float32)

    def numpy_trivial():
        d[:16, :16] = 4.0
        return d

    def qnb_trivial():
        trivial(d)
        return d

    out.append(
        Workload(
            "launch of a trivial kernel (16×16 fill)",
            numpy_trivial,
            _close(np.full((16, 16), 4.0, np.float32)),
            {"qnb": lambda: qnb_trivial, **peers("trivial")},
            lambda: np.full((16, 16), 4.0, np.float32),
        )
    )

    x = rng.uniform(-1, 1, (shapes["tiles"],) * 2).astype(np.float32)
    y, x_scratch = np.empty_like(x), np.empty_like(x)

    def qnb_affine():
        affine_tiles[(x.shape[0] // 16, x.shape[1] // 16)](x, y)
        return y

    out.append(
        Workload(
            f"2x + 1, {x.shape[0]}² f32, 16×16 tiles",
            lambda: _affine_in_place(x, x_scratch),
            _close(2 * x + 1),
            {"qnb": lambda: qnb_affine, **peers("affine_tiles", x=x)},
            lambda: 2 * x + 1,
        )
    )

    v = rng.uniform(-1, 1, shapes["elements"]).astype(np.float32)
    w, v_scratch = np.empty_like(v), np.empty_like(v)

    def qnb_elements():
        affine_elements[v.shape[0]](v, w)
        return w

    out.append(
        Workload(
            f"2x + 1, {v.shape[0]:,} f32, one program per element",
            lambda: _affine_in_place(v, v_scratch),
            _close(2 * v + 1),
            {"qnb": lambda: qnb_elements, **peers("affine_elements", x=v)},
            lambda: 2 * v + 1,
        )
    )

    a = rng.uniform(-1, 1, (shapes["matmul"],) * 2).astype(np.float32)
    b = rng.uniform(-1, 1, (shapes["matmul"],) * 2).astype(np.float32)
    c, c_numpy = np.empty_like(a), np.empty_like(a)

    def qnb_matmul():
        tiled_matmul[(a.shape[0] // 16, b.shape[1] // 16)](a, b, c)
        return c

    out.append(
        Workload(
            f"matmul {a.shape[0]}³ f32, 16×16 tiles, loop over K",
            lambda: np.matmul(a, b, out=c_numpy),
            _close(a @ b, 1e-4, 1e-4),
            {"qnb": lambda: qnb_matmul, **peers("matmul", a=a, b=b)},
            lambda: a @ b,
        )
    )

    s = rng.uniform(-4, 4, (shapes["softmax"], 16)).astype(np.float32)
    name = f"row softmax {s.shape[0]:,}×16 f32"
    out.append(_softmax_row(name, s, row_softmax, "softmax", peers, (1e-5, 1e-6)))
    out.append(_cholesky_row(rng, shapes, peers))
    s = rng.uniform(-4, 4, shapes["wide_softmax"]).astype(np.float32)
    name = f"row softmax {s.shape[0]}×{s.shape[1]} f32, Tile[16, 128] online"
    wide = _peers_rows.wide_softmax
    out.append(_softmax_row(name, s, wide, "wide_softmax", peers, (1e-5, 1e-7)))
    out.append(_layer_norm_row(rng, shapes, peers))
    out.append(_attention_row(rng, shapes, peers))
    if small:
        for workload in out:
            workload.name += " [small]"
    return out


def _row(name, forms, tolerance, qnb_run, peers):
    """A row whose NumPy comes in both forms, ``(in_place, allocating)``; its check
    compares with the allocating answer within ``(rtol, atol)``."""
    in_place, allocating = forms
    return Workload(
        name,
        in_place,
        _close(allocating(), *tolerance),
        {"qnb": lambda: qnb_run, **peers},
        allocating,
    )


def _softmax_row(name, x, kernel, workload, peers, tolerance):
    """A row softmax of ``x`` by ``kernel``, a program per 16 rows."""
    y, y_numpy = np.empty_like(x), np.empty_like(x)
    top, total = (np.empty((x.shape[0], 1), np.float32) for _ in range(2))

    def qnb_softmax():
        kernel[x.shape[0] // 16](x, y)
        return y

    forms = (
        lambda: _peers_rows.softmax_in_place(x, y_numpy, top, total),
        lambda: _peers_rows.softmax_allocating(x),
    )
    return _row(name, forms, tolerance, qnb_softmax, peers(workload, x=x))


def _cholesky_row(rng, shapes, peers):
    count = shapes["cholesky"]
    m = rng.uniform(-1, 1, (count, 16, 16))
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16)
    rhs = rng.uniform(-1, 1, (count, 16, 16))
    sol = np.empty_like(rhs)

    def numpy_cholesky_solve():  # (NumPy's linalg has no out=: one form only)
        lower = np.linalg.cholesky(spd)
        # y @ L.T == rhs  <=>  L @ y.T == rhs.T: one batched triangular solve
        return _solve_lower_batched(lower, rhs.transpose(0, 2, 1)).transpose(0, 2, 1)

    def qnb_cholesky_solve():
        cholesky_solve[count](spd, rhs, sol)
        return sol

    want = np.linalg.solve(np.linalg.cholesky(spd), rhs.transpose(0, 2, 1)).transpose(0, 2, 1)
    return Workload(
        f"batched Cholesky + solve, {count:,} × 16×16 f64",
        numpy_cholesky_solve,
        _close(want, 1e-8, 1e-10),
        {"qnb": lambda: qnb_cholesky_solve, **peers("cholesky", a=spd, b=rhs)},
    )


def _layer_norm_row(rng, shapes, peers):
    rows, width = shapes["layer_norm"]
    x = (rng.standard_normal((rows, width)) * 2 + 0.5).astype(np.float32)
    y, y_numpy, scratch = (np.empty_like(x) for _ in range(3))

    def qnb_norm():
        bench_language.layer_norm[rows // 16](x, y, 1e-5)
        return y

    def numpy_norm():
        bench_language.numpy_layer_norm(x, y_numpy, 1e-5, scratch)
        return y_numpy

    forms = (numpy_norm, lambda: _peers_rows.layer_norm_allocating(x, 1e-5))
    name = f"layer norm {rows}×{width} f32, Tile[16, 128]"
    return _row(name, forms, (1e-4, 1e-4), qnb_norm, peers("layer_norm", x=x))


def _attention_row(rng, shapes, peers):
    seq, block = shapes["attention"], _peers_rows.ATTENTION_BLOCK
    qkv = rng.uniform(-1, 1, (3, seq, block)).astype(np.float32)
    forms = _peers_rows.Attention(qkv)
    q, k, v = qkv
    o = np.empty_like(q)

    def qnb_attention():
        _peers_rows.causal_attention_64[seq // block](qkv, o, forms.scale)
        return o

    name = f"causal attention seq {seq}, d {block} f32, Tile[64, 64] online"
    return _row(
        name,
        (forms.in_place, forms.allocating),
        (1e-4, 1e-5),
        qnb_attention,
        peers("attention", q=q, k=k, v=v),
    )


def _solve_lower_batched(lower, rhs):
    """NumPy's batched solve with the factor (LAPACK per matrix, looped in C): NumPy has no
    batched triangular solve, and SciPy's ``solve_triangular`` loops over a batch in
    Python (tens of seconds for 16,384 systems), which would flatter qnb."""
    return np.linalg.solve(lower, rhs)


# ---------------------------------------------------------------------- peers


PEERS = {
    "numba": "_peer_numba",
    "jax jit": "_peer_jax",
    "jax pallas (interpret)": "_peer_pallas",
    "warp cpu (tiles; SIMT where tile-free)": "_peer_warp",
    "triton (TRITON_INTERPRET=1)": "_peer_triton",
}
DISTRIBUTIONS = {  # the package each peer needs, for "not installed"
    "numba": "numba",
    "jax jit": "jax",
    "jax pallas (interpret)": "jax",
    "warp cpu (tiles; SIMT where tile-free)": "warp-lang",
    "triton (TRITON_INTERPRET=1)": "triton",
}


def _peer_runners(workload, tools=None, **arrays):
    """``{tool: setup}`` for the peers installed here (of ``tools``: all by default) that
    implement ``workload``."""
    out = {}
    for tool, name in PEERS.items():
        if tools is not None and tool not in tools:
            continue
        setup = globals()[name](workload, arrays)
        if setup is not None:
            out[tool] = setup
    return out


def installed(tool):
    """Whether ``tool``'s package is installed here (importing none)."""
    try:
        importlib.metadata.version(DISTRIBUTIONS[tool])
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def peer_notes():
    """One line per peer: its version here, or "not installed". Versions come from the
    installed distributions, importing none of them (Triton must first be imported by
    ``_peers_triton``, which chooses its interpreter)."""
    notes = []
    for tool, distribution in DISTRIBUTIONS.items():
        if not installed(tool):
            notes.append(f"{tool}: not installed (pip install -e '.[peers]')")
            continue
        line = f"{tool}: {distribution} {importlib.metadata.version(distribution)}"
        if distribution == "triton":
            line += f" (workloads of more than {TRITON_MAX_STEPS} block steps not run)"
        if tool.startswith("jax pallas"):
            line += f" (workloads of more than {PALLAS_MAX_PROGRAMS} programs not run)"
        notes.append(line)
    return notes


def _peer_numba(workload, arrays):
    """Numba's ``@njit`` loops (``benchmarks/_peers_jit.py``)."""
    return _peers_jit.numba_runner(workload, arrays)


def _peer_jax(workload, arrays):
    """The NumPy expression under ``jax.jit`` (``benchmarks/_peers_jit.py``)."""
    return _peers_jit.jax_runner(workload, arrays)


# Triton's interpreter runs each program's body as Python over NumPy blocks, so its time
# grows with programs × the steps of a kernel's loop (measured here with Triton 3.9: 1.5 ms
# a block of 2x + 1, 2 ms a block of the softmax, 0.4 ms a K step of the matmul, 0.11 ms a
# program of the tile-free form, 2.5 ms a column step of the Cholesky). A workload of more
# steps than this is not run on it: the tile-free form (2²⁰ steps) would take about 2
# minutes a call, the Cholesky (16,384 × 32) about 22 minutes; the 2x + 1 (16,384) 25 s.
TRITON_MAX_STEPS = 32768


def _peer_triton(workload, arrays):
    """Triton's interpreter (``TRITON_INTERPRET=1``) on NumPy arrays, without PyTorch
    (``benchmarks/_peers_triton.py``)."""
    try:
        from benchmarks import _peers_triton
    except ImportError:
        return None
    return _peers_triton.runner(workload, arrays, TRITON_MAX_STEPS)


def _peer_warp(workload, arrays):
    """Warp's compiled CPU tiles (``benchmarks/_peers_warp.py``)."""
    try:
        from benchmarks import _peers_warp
    except ImportError:
        return None
    return _peers_warp.runner(workload, arrays)


# Pallas's interpret mode takes time that grows with programs × array size (measured here:
# 2x+1 on 256² in 24 ms, 512² in 225 ms; 2048² would take about a minute a call), so a
# workload of more programs than this is not run on it.
PALLAS_MAX_PROGRAMS = 4096


def _peer_pallas(workload, arrays):
    """JAX Pallas in interpret mode (``interpret=True``), one 16×16 block per program."""
    programs = {
        "affine_tiles": lambda: arrays["x"].size // 256,
        "softmax": lambda: arrays["x"].shape[0] // 16,
        "matmul": lambda: arrays["a"].shape[0] * arrays["b"].shape[1] // 256,
    }.get(workload, lambda: 1)()
    if programs > PALLAS_MAX_PROGRAMS:
        return None
    if workload == "attention":
        return _pallas_attention(arrays)
    try:
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl
    except ImportError:
        return None

    def elementwise_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + 1

    def softmax_kernel(x_ref, o_ref):
        t = x_ref[...]
        e = jnp.exp(t - t.max(axis=1, keepdims=True))
        o_ref[...] = e / e.sum(axis=1, keepdims=True)

    if workload == "trivial":

        def fill_kernel(o_ref):
            o_ref[...] = jnp.full((16, 16), 4.0, jnp.float32)

        call = pl.pallas_call(
            fill_kernel, out_shape=jax.ShapeDtypeStruct((16, 16), jnp.float32), interpret=True
        )
        fn = jax.jit(call)
        return lambda: lambda: np.asarray(fn().block_until_ready())
    if workload == "matmul":
        # Pallas's block matmul: each program's row strip of a by column strip of b
        a, b = jnp.asarray(arrays["a"]), jnp.asarray(arrays["b"])
        depth = a.shape[1]

        def matmul_kernel(x_ref, y_ref, o_ref):
            o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        call = pl.pallas_call(
            matmul_kernel,
            out_shape=jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
            grid=(a.shape[0] // 16, b.shape[1] // 16),
            in_specs=[
                pl.BlockSpec((16, depth), lambda i, j: (i, 0)),
                pl.BlockSpec((depth, 16), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((16, 16), lambda i, j: (i, j)),
            interpret=True,
        )
        fn = jax.jit(call)
        return lambda: lambda: np.asarray(fn(a, b).block_until_ready())
    if workload == "affine_tiles":
        x = jnp.asarray(arrays["x"])
        block = pl.BlockSpec((16, 16), lambda i, j: (i, j))
        call = pl.pallas_call(
            elementwise_kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // 16, x.shape[1] // 16),
            in_specs=[block],
            out_specs=block,
            interpret=True,
        )
        fn = jax.jit(call)
        return lambda: lambda: np.asarray(fn(x).block_until_ready())
    if workload == "softmax":
        x = jnp.asarray(arrays["x"])
        block = pl.BlockSpec((16, 16), lambda i: (i, 0))
        call = pl.pallas_call(
            softmax_kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // 16,),
            in_specs=[block],
            out_specs=block,
            interpret=True,
        )
        fn = jax.jit(call)
        return lambda: lambda: np.asarray(fn(x).block_until_ready())
    return None


def _pallas_attention(arrays):
    """Causal attention in Pallas (interpret mode): a program per 64-row query block, a
    ``fori_loop`` over the key blocks at or before it, online softmax (qnb's kernel)."""
    try:
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl
    except ImportError:
        return None
    q, k, v = (jnp.asarray(arrays[name]) for name in "qkv")
    (seq, depth), block = q.shape, _peers_rows.ATTENTION_BLOCK
    scale = 1.0 / math.sqrt(depth)

    def kernel(q_ref, k_ref, v_ref, o_ref):
        first = pl.program_id(0) * block
        queries = q_ref[...] * scale
        query_at = first + jnp.arange(block)[:, None]

        def step(kb, carry):
            best, total, acc = carry
            keys = pl.ds(kb * block, block)
            scores = queries @ k_ref[keys, :].T
            scores = jnp.where(
                kb * block + jnp.arange(block)[None, :] <= query_at, scores, -jnp.inf
            )
            top = jnp.maximum(best, scores.max(axis=1, keepdims=True))
            weights, shrink = jnp.exp(scores - top), jnp.exp(best - top)
            total = total * shrink + weights.sum(axis=1, keepdims=True)
            return top, total, acc * shrink + weights @ v_ref[keys, :]

        start = (
            jnp.full((block, 1), -jnp.inf, jnp.float32),
            jnp.zeros((block, 1), jnp.float32),
            jnp.zeros((block, depth), jnp.float32),
        )
        _, total, acc = jax.lax.fori_loop(0, pl.program_id(0) + 1, step, start)
        o_ref[...] = acc / total

    whole = pl.BlockSpec((seq, depth), lambda i: (0, 0))
    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(seq // block,),
        in_specs=[pl.BlockSpec((block, depth), lambda i: (i, 0)), whole, whole],
        out_specs=pl.BlockSpec((block, depth), lambda i: (i, 0)),
        interpret=True,
    )
    fn = jax.jit(call)
    return lambda: lambda: np.asarray(fn(q, k, v).block_until_ready())


# ---------------------------------------------------------------------- running

SLOW_CALL = 5.0  # seconds: a tool whose checked call takes longer gets at most 3 rounds


def measure(workload, repeats=REPEATS):
    """``{tool: Result}`` for every runner of ``workload``: its first call checked against
    NumPy's answer, then (warmed up until its first calls' cost is gone, see
    ``benchmarks/_steady.py``) timed in paired rounds with NumPy's in-place and
    allocating forms."""
    results = {}
    for tool, setup in workload.runners.items():
        try:
            run = setup()
            start = time.perf_counter()
            ok = bool(workload.check(run()))
            rounds = repeats if time.perf_counter() - start < SLOW_CALL else min(repeats, 3)
            times = _steady.paired_rounds(
                {"tool": run, "numpy": workload.numpy_fn, "alloc": workload.numpy_alloc}, rounds
            )
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run this shows why
            results[tool] = Result(None, None, None, None, f"failed: {type(exc).__name__}")
            continue
        results[tool] = Result(
            statistics.median(times["tool"]),
            statistics.median(times["numpy"]),
            _steady.ratio_summary(times["tool"], times["numpy"]),
            _steady.ratio_summary(times["tool"], times["alloc"]),
            "ok" if ok else "WRONG",
        )
    return results


class Result:
    """A tool's row: median seconds, NumPy's (in place), the ratios to NumPy in place and to
    allocating NumPy as (median, lowest, highest) over the rounds, and the check."""

    def __init__(self, seconds, numpy_seconds, ratio, ratio_alloc, ok):
        self.seconds, self.numpy_seconds, self.ok = seconds, numpy_seconds, ok
        self.ratio, self.ratio_alloc = ratio, ratio_alloc


def _format_seconds(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def format_ratio(summary):
    """``2.61× [2.30–3.58]``, or "-"."""
    if summary is None:
        return "-"

    def one(r):  # an interpreter's thousands need no decimals
        return f"{r:.0f}" if r >= 100 else f"{r:.2f}"

    median, low, high = summary
    return f"{one(median)}× [{one(low)}–{one(high)}]"


def run_tool(tool, repeats=REPEATS):
    """Time ``tool`` (qnb or a peer) on every workload in this process, a line a row."""
    with qnb.backend("cpu"):
        for workload in workloads(tools=[tool]):
            if tool not in workload.runners:
                print(f"{workload.name:<52} {tool:<40} not run (no kernel, or capped)", flush=True)
                continue
            r = measure(workload, repeats)[tool]
            print(
                f"{workload.name:<52} {tool:<40} {_format_seconds(r.seconds):>10} "
                f"NumPy {_format_seconds(r.numpy_seconds):>10} "
                f"in place {format_ratio(r.ratio):>22} "
                f"allocating {format_ratio(r.ratio_alloc):>22}  {r.ok}",
                flush=True,
            )


def main(argv=None):
    """Every tool, each in a process of its own (``--tool NAME``: that one here)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--tool"]:
        run_tool(argv[1])
        return
    for line in peer_notes():
        print(line, flush=True)
    for tool in ["qnb", *PEERS]:
        if tool != "qnb" and not installed(tool):
            print(f"{tool:<40} not installed", flush=True)
            continue
        command = [sys.executable, "-m", "benchmarks.bench_peers", "--tool", tool]
        subprocess.run(command, cwd=REPO, check=False)


if __name__ == "__main__":
    main()
