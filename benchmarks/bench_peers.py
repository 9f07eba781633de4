"""qnb's cpu backend beside NumPy/SciPy and, where installed, the interpreters of its peers.

Each workload runs once per tool, is checked against NumPy's answer, then timed
interleaved with the NumPy baseline (medians of alternating runs, so drift hits both);
the table gives each tool's time as a ratio to NumPy's (lower is better). Peers come from
the optional ``peers`` extra (``pip install -e '.[peers]'``): JAX (Pallas in interpret
mode), Triton (``TRITON_INTERPRET=1``), Warp (CPU tiles). A peer that is not installed, or
cannot run a workload, shows as "-"; nothing here is needed by ``make test``.

    python -m benchmarks peers            # all workloads
    QNB_BENCH_QUICK=1 python -m benchmarks peers   # fewer repeats
"""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import time

import numpy as np

import qnb
from qnb import Tile16, Vec16, f32, f64

QUICK = os.environ.get("QNB_BENCH_QUICK") == "1"
REPEATS = 3 if QUICK else 7


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
    """One row of the table: inputs, NumPy's answer, and a runner per tool."""

    def __init__(self, name, numpy_fn, check, runners):
        self.name = name
        self.numpy_fn = numpy_fn
        self.check = check  # (result) -> bool, against NumPy's answer
        self.runners = runners  # tool -> (setup() -> run() -> result) or None


def _close(want, rtol=1e-5, atol=1e-5):
    return lambda got: got is not None and np.allclose(got, want, rtol=rtol, atol=atol)


# The shapes of each workload: the table's, and small ones on which a test checks every
# tool (the interpreters included) in seconds.
SHAPES = {"tiles": 2048, "elements": 2**20, "matmul": 512, "softmax": 65536, "cholesky": 16384}
SMALL_SHAPES = {"tiles": 64, "elements": 1000, "matmul": 64, "softmax": 256, "cholesky": 8}


def workloads(small=False):
    """The table's workloads; ``small``: the same kernels and checks on ``SMALL_SHAPES``
    (each name then ends in "[small]")."""
    shapes = SMALL_SHAPES if small else SHAPES
    rng = np.random.default_rng(0)
    out = []

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
            {"qnb": lambda: qnb_trivial, **_peer_runners("trivial")},
        )
    )

    x = rng.uniform(-1, 1, (shapes["tiles"],) * 2).astype(np.float32)
    y = np.empty_like(x)

    def qnb_affine():
        affine_tiles[(x.shape[0] // 16, x.shape[1] // 16)](x, y)
        return y

    out.append(
        Workload(
            "2x + 1, 2048² f32, 16×16 tiles",
            lambda: 2 * x + 1,
            _close(2 * x + 1),
            {"qnb": lambda: qnb_affine, **_peer_runners("affine_tiles", x=x)},
        )
    )

    v = rng.uniform(-1, 1, shapes["elements"]).astype(np.float32)
    w = np.empty_like(v)

    def qnb_elements():
        affine_elements[v.shape[0]](v, w)
        return w

    out.append(
        Workload(
            "2x + 1, 2²⁰ f32, one program per element",
            lambda: 2 * v + 1,
            _close(2 * v + 1),
            {"qnb": lambda: qnb_elements, **_peer_runners("affine_elements", x=v)},
        )
    )

    a = rng.uniform(-1, 1, (shapes["matmul"],) * 2).astype(np.float32)
    b = rng.uniform(-1, 1, (shapes["matmul"],) * 2).astype(np.float32)
    c = np.empty_like(a)

    def qnb_matmul():
        tiled_matmul[(a.shape[0] // 16, b.shape[1] // 16)](a, b, c)
        return c

    out.append(
        Workload(
            "matmul 512³ f32, 16×16 tiles, loop over K",
            lambda: a @ b,
            _close(a @ b, 1e-4, 1e-4),
            {"qnb": lambda: qnb_matmul, **_peer_runners("matmul", a=a, b=b)},
        )
    )

    s = rng.uniform(-4, 4, (shapes["softmax"], 16)).astype(np.float32)
    t = np.empty_like(s)

    def numpy_softmax():
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def qnb_softmax():
        row_softmax[s.shape[0] // 16](s, t)
        return t

    out.append(
        Workload(
            "row softmax 65,536×16 f32",
            numpy_softmax,
            _close(numpy_softmax(), 1e-5, 1e-6),
            {"qnb": lambda: qnb_softmax, **_peer_runners("softmax", x=s)},
        )
    )

    count = shapes["cholesky"]
    m = rng.uniform(-1, 1, (count, 16, 16))
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16)
    rhs = rng.uniform(-1, 1, (count, 16, 16))
    sol = np.empty_like(rhs)

    def numpy_cholesky_solve():
        lower = np.linalg.cholesky(spd)
        # y @ L.T == rhs  <=>  L @ y.T == rhs.T: one batched triangular solve
        return _solve_lower_batched(lower, rhs.transpose(0, 2, 1)).transpose(0, 2, 1)

    def qnb_cholesky_solve():
        cholesky_solve[count](spd, rhs, sol)
        return sol

    want = np.linalg.solve(np.linalg.cholesky(spd), rhs.transpose(0, 2, 1)).transpose(0, 2, 1)
    out.append(
        Workload(
            "batched Cholesky + solve, 16,384 × 16×16 f64",
            numpy_cholesky_solve,
            _close(want, 1e-8, 1e-10),
            {"qnb": lambda: qnb_cholesky_solve, **_peer_runners("cholesky", a=spd, b=rhs)},
        )
    )
    if small:
        for workload in out:
            workload.name += " [small]"
    return out


def _solve_lower_batched(lower, rhs):
    """NumPy's batched solve with the factor (LAPACK per matrix, looped in C): NumPy has no
    batched triangular solve, and SciPy's ``solve_triangular`` loops over a batch in
    Python (tens of seconds for 16,384 systems), which would flatter qnb."""
    return np.linalg.solve(lower, rhs)


# ---------------------------------------------------------------------- peers


PEERS = {
    "jax pallas (interpret)": "_peer_pallas",
    "warp cpu tiles": "_peer_warp",
    "triton (TRITON_INTERPRET=1)": "_peer_triton",
}


def _peer_runners(workload, **arrays):
    """``{tool: setup}`` for the peers installed here that implement ``workload``."""
    out = {}
    for tool, name in PEERS.items():
        setup = globals()[name](workload, arrays)
        if setup is not None:
            out[tool] = setup
    return out


def peer_notes():
    """One line per peer: its version here, or why it does not run. Versions come from
    the installed distributions, importing none of them (Triton must first be imported
    by ``_peers_triton``, which chooses its interpreter)."""
    notes = []
    for distribution, tool in (("jax", "jax pallas"), ("warp-lang", "warp"), ("triton", "triton")):
        try:
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            notes.append(f"{tool}: not installed (pip install -e '.[peers]')")
            continue
        line = f"{tool}: {version}"
        if distribution == "triton":
            line += f" (workloads of more than {TRITON_MAX_STEPS} block steps not run)"
        if distribution == "jax":
            line += f" (workloads of more than {PALLAS_MAX_PROGRAMS} programs not run)"
        notes.append(line)
    return notes


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


# ---------------------------------------------------------------------- running


def _median_pair(run, run_numpy, repeats):
    """Median seconds of ``run`` and ``run_numpy``, timed alternately; each timing runs
    enough calls to take about 20 ms, so microsecond launches are measurable."""
    start = time.perf_counter()
    run()
    calls = max(1, int(0.02 / max(time.perf_counter() - start, 1e-7)))
    calls = min(calls, 5000)
    times, baseline = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - start) / calls)
        start = time.perf_counter()
        for _ in range(calls):
            run_numpy()
        baseline.append((time.perf_counter() - start) / calls)
    return statistics.median(times), statistics.median(baseline)


def measure(workload, repeats=REPEATS):
    """``{tool: (seconds, numpy_seconds, ratio, ok)}`` for every runner of ``workload``.
    A tool whose checked run takes over a second is timed once more, not ``repeats``
    times (the NumPy side still gets its median)."""
    results = {}
    for tool, setup in workload.runners.items():
        try:
            run = setup()
            start = time.perf_counter()
            ok = bool(workload.check(run()))
            if time.perf_counter() - start > 1.0:
                start = time.perf_counter()
                run()
                seconds = time.perf_counter() - start
                numpy_seconds = _median_pair(workload.numpy_fn, workload.numpy_fn, repeats)[0]
            else:
                seconds, numpy_seconds = _median_pair(run, workload.numpy_fn, repeats)
        except Exception as exc:  # noqa: BLE001 - a peer that cannot run this shows why
            results[tool] = (None, None, None, f"failed: {type(exc).__name__}")
            continue
        results[tool] = (seconds, numpy_seconds, seconds / numpy_seconds, "ok" if ok else "WRONG")
    return results


def _format_seconds(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main():
    tools = ["qnb"]
    rows = []
    for line in peer_notes():
        print(line, flush=True)
    with qnb.backend("cpu"):
        for workload in workloads():
            results = measure(workload)
            for tool in results:
                if tool not in tools:
                    tools.append(tool)
            rows.append((workload.name, results))
            for tool, (seconds, numpy_seconds, ratio, ok) in results.items():
                if ratio is None:
                    ratio_text = "-"
                else:  # an interpreter's thousands need no decimals
                    ratio_text = f"{ratio:.0f}×" if ratio >= 100 else f"{ratio:.2f}×"
                print(
                    f"{workload.name:<46} {tool:<27} {_format_seconds(seconds):>10} "
                    f"NumPy {_format_seconds(numpy_seconds):>10} {ratio_text:>8}  {ok}",
                    flush=True,
                )
    return rows


if __name__ == "__main__":
    main()
