"""The cuda backend, measured on a CUDA GPU (skips with a message where there is none).

1. f16 tile matmul, 4096³ (one program per 16×16 tile of C, ``qnb.mma`` on the tensor
   cores, f32 accumulate) vs ``cupy.matmul`` (cuBLAS) on the same f16 inputs: TFLOP/s and
   the ratio; and ``block_matmul``, the same with 2×2 tiles of C per program. Beside them,
   two hand-written *layout probes* (``PROBES``): the same two algorithms with one warp per
   program, fragments loaded straight from global memory and the accumulator kept in
   fragments. They are not qnb output; they measure what a warp-per-program layout could
   give these kernels, so that the layout is chosen by numbers.
2. Batched Cholesky of 65,536 16×16 SPD f32 matrices (one program each) vs
   ``cupy.linalg.cholesky`` on the batch, beside a layout probe (one warp per matrix).
3. Launch overhead: a cached kernel launched through qnb (``k[grid](x)``: signature check,
   memo hit, launcher) vs ``cupy.RawKernel`` of the *same* generated CUDA with the same
   arguments.
4. Warm start vs cold: time to the first result of each kernel above in a fresh process
   with an empty cache directory (cold: render + NVRTC) and again with the directory the
   cold run filled (warm: the cubin from the disk cache).
5. A kernel that holds no tile (``out[i] = a[i] * 2 + 1``, a program per element): a
   thread per program, 128 to a block, vs the same IR rendered a block per program.
6. The bf16 matmul 4096³ vs cuBLAS on the same bf16 arrays; a wide row softmax
   (16,384×1024, ``Tile[16, 128]`` online over column tiles) vs CuPy in place; a causal
   attention (32 heads × seq 1024 × d 64, ``Tile[64, 64]`` blocks, online softmax over the
   key blocks at or before each query block) vs CuPy's batched products with the mask and
   an in-place softmax. Errors against float64.

Run: ``python benchmarks/bench_cuda.py`` (``main()`` prints the tables). GPU timings use
CUDA events, after warm-up, median of repeats; inputs are random (never zeros).
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# The kernels, as a user writes them. Kept as text so the warm/cold runs can define them
# in fresh processes too.
KERNELS = textwrap.dedent("""
    import math

    import qnb
    from qnb import Tile, Tile16

    @qnb.kernel
    def tile_matmul(a: qnb.Array[qnb.f16, 2], b: qnb.Array[qnb.f16, 2],
                    c: qnb.Array[qnb.f32, 2]):
        i = qnb.program_id(0) * 16
        j = qnb.program_id(1) * 16
        acc = Tile16.zeros(qnb.f32)
        for k in range(0, a.shape[1], 16):
            acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
        acc.store(c, i, j)

    @qnb.kernel
    def block_matmul(a: qnb.Array[qnb.f16, 2], b: qnb.Array[qnb.f16, 2],
                     c: qnb.Array[qnb.f32, 2]):
        # 32×32 of C per program: each loaded tile serves two products (half the loads)
        i = qnb.program_id(0) * 32
        j = qnb.program_id(1) * 32
        c00 = Tile16.zeros(qnb.f32)
        c01 = Tile16.zeros(qnb.f32)
        c10 = Tile16.zeros(qnb.f32)
        c11 = Tile16.zeros(qnb.f32)
        for k in range(0, a.shape[1], 16):
            a0 = Tile16.load(a, i, k)
            a1 = Tile16.load(a, i + 16, k)
            b0 = Tile16.load(b, k, j)
            b1 = Tile16.load(b, k, j + 16)
            c00 = qnb.mma(a0, b0, c00)
            c01 = qnb.mma(a0, b1, c01)
            c10 = qnb.mma(a1, b0, c10)
            c11 = qnb.mma(a1, b1, c11)
        c00.store(c, i, j)
        c01.store(c, i, j + 16)
        c10.store(c, i + 16, j)
        c11.store(c, i + 16, j + 16)

    @qnb.kernel
    def batched_cholesky(a: qnb.Array[qnb.f32, 3], out: qnb.Array[qnb.f32, 3]):
        b = qnb.program_id(0)
        t = Tile16.load(a[b], 0, 0)
        t.cholesky_(1e-20)
        t.store(out[b], 0, 0)

    @qnb.kernel
    def add_one(x: qnb.Array[qnb.f32, 2]):
        t = Tile16.load(x, 0, 0)
        (t + 1.0).store(x, 0, 0)

    @qnb.kernel
    def tile_matmul_bf16(a: qnb.Array[qnb.bf16, 2], b: qnb.Array[qnb.bf16, 2],
                         c: qnb.Array[qnb.f32, 2]):
        i = qnb.program_id(0) * 16
        j = qnb.program_id(1) * 16
        acc = Tile16.zeros(qnb.f32)
        for k in range(0, a.shape[1], 16):
            acc = qnb.mma(Tile16.load(a, i, k), Tile16.load(b, k, j), acc)
        acc.store(c, i, j)

    @qnb.kernel
    def wide_softmax(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        # 16 rows per program, online over 128-wide column tiles: the max and the sum in
        # one pass, then the normalised rows
        row = qnb.program_id(0) * 16
        m = Tile[16, 1].full(-math.inf, qnb.f32)
        total = Tile[16, 1].zeros(qnb.f32)
        for col in range(0, x.shape[1], 128):
            t = Tile[16, 128].load(x, row, col)
            m_new = qnb.maximum(m, t.max(axis=1, keepdims=True))
            total = total * qnb.exp(m - m_new) + qnb.exp(t - m_new).sum(axis=1, keepdims=True)
            m = m_new
        for col in range(0, x.shape[1], 128):
            t = Tile[16, 128].load(x, row, col)
            (qnb.exp(t - m) / total).store(y, row, col)

    @qnb.kernel
    def causal_attention(q: qnb.Array[qnb.f32, 3], k: qnb.Array[qnb.f32, 3],
                         v: qnb.Array[qnb.f32, 3], out: qnb.Array[qnb.f32, 3],
                         scale: qnb.f32):
        # a program per 64 query rows of one head (d = 64): online softmax over the key
        # blocks at or before its own (flash attention's loop)
        qb = qnb.program_id(0)
        h = qnb.program_id(1)
        row = qb * 64
        qt = Tile[64, 64].load(q[h], row, 0)
        rows = row + qnb.arange(64)[:, None]
        m = Tile[64, 1].full(-math.inf, qnb.f32)
        l = Tile[64, 1].zeros(qnb.f32)  # noqa: E741 (the paper's name)
        acc = Tile[64, 64].zeros(qnb.f32)
        for kb in range(qb + 1):
            col = kb * 64
            s = (qt @ Tile[64, 64].load(k[h], col, 0).T) * scale
            cols = col + qnb.arange(64)[None, :]
            s = qnb.where(cols <= rows, s, -math.inf)
            m_new = qnb.maximum(m, s.max(axis=1, keepdims=True))
            p = qnb.exp(s - m_new)
            alpha = qnb.exp(m - m_new)
            l = l * alpha + p.sum(axis=1, keepdims=True)  # noqa: E741
            acc = acc * alpha + p @ Tile[64, 64].load(v[h], col, 0)
            m = m_new
        (acc / l).store(out[h], row, 0)
""")


# Hand-written CUDA for the layout probes (see the module docstring). Same parameters,
# in the same ABI (the launch grid's three ints last), as the qnb kernels of the same
# algorithm; 8 warps (programs) per block.
PROBES = textwrap.dedent("""
    #include <cuda_fp16.h>
    #include <mma.h>
    using namespace nvcuda;

    // One warp computes SIDE×SIDE 16×16 tiles of C = A·B (row-major, every size a
    // multiple of 16·SIDE), with its accumulators in fragments for the whole k loop.
    template <int SIDE>
    __device__ void warp_matmul(const __half* a, int m, int k, const __half* b, int n,
                                float* c) {
      const int warp = blockIdx.x * 8 + threadIdx.x / 32;
      const int across = n / (16 * SIDE);
      const int ti = warp / across, tj = warp % across;
      if (ti * 16 * SIDE >= m) return;  // the last block's spare warps, whole warps
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[SIDE][SIDE];
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[SIDE];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[SIDE];
      for (int i = 0; i < SIDE; ++i)
        for (int j = 0; j < SIDE; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
      for (int kk = 0; kk < k; kk += 16) {
        for (int i = 0; i < SIDE; ++i)
          wmma::load_matrix_sync(fa[i], a + (size_t)((ti * SIDE + i) * 16) * k + kk, k);
        for (int j = 0; j < SIDE; ++j)
          wmma::load_matrix_sync(fb[j], b + (size_t)kk * n + (tj * SIDE + j) * 16, n);
        for (int i = 0; i < SIDE; ++i)
          for (int j = 0; j < SIDE; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
      }
      for (int i = 0; i < SIDE; ++i)
        for (int j = 0; j < SIDE; ++j)
          wmma::store_matrix_sync(c + (size_t)((ti * SIDE + i) * 16) * n + (tj * SIDE + j) * 16,
                                  acc[i][j], n, wmma::mem_row_major);
    }

    extern "C" __global__ void __launch_bounds__(256)
    probe_warp_tile(const __half* a, int a0, int a1, const __half* b, int b0, int b1,
                    float* c, int c0, int c1, int, int, int) {
      warp_matmul<1>(a, a0, a1, b, b1, c);
    }

    extern "C" __global__ void __launch_bounds__(256)
    probe_warp_block(const __half* a, int a0, int a1, const __half* b, int b0, int b1,
                     float* c, int c0, int c1, int, int, int) {
      warp_matmul<2>(a, a0, a1, b, b1, c);
    }

    // One warp per 16×16 matrix of a batch (8 per block), beside batched_cholesky: the
    // matrix in the warp's own shared memory, factored column by column (right-looking,
    // diagonal sqrt(max(d, 1e-20)) as cholesky_(1e-20)), __syncwarp between the steps.
    extern "C" __global__ void __launch_bounds__(256)
    probe_warp_cholesky(const float* a, int batch, int a1, int a2, float* out, int o0,
                        int o1, int o2, int, int, int) {
      __shared__ float tiles[8][16][17];  // 17: a column's elements in different banks
      const int lane = threadIdx.x % 32;
      const int b = blockIdx.x * 8 + threadIdx.x / 32;
      if (b >= batch) return;  // the last block's spare warps, whole warps
      float(*m)[17] = tiles[threadIdx.x / 32];
      for (int e = lane; e < 256; e += 32) m[e / 16][e % 16] = a[(size_t)b * 256 + e];
      __syncwarp();
      for (int j = 0; j < 16; ++j) {
        if (lane == 0) m[j][j] = sqrtf(fmaxf(m[j][j], 1e-20f));
        __syncwarp();
        if (lane > j && lane < 16) m[lane][j] /= m[j][j];
        __syncwarp();
        for (int e = lane; e < 256; e += 32) {  // the trailing lower triangle
          const int i = e / 16, k = e % 16;
          if (k > j && i >= k) m[i][k] -= m[i][j] * m[k][j];
        }
        __syncwarp();
      }
      for (int e = lane; e < 256; e += 32) {
        const int i = e / 16, k = e % 16;
        out[(size_t)b * 256 + e] = k <= i ? m[i][k] : 0.0f;
      }
    }
""")
# name: (the qnb kernel it stands beside, 16×16 tiles of C per warp along each side)
PROBE_KERNELS = {"probe_warp_tile": ("tile_matmul", 1), "probe_warp_block": ("block_matmul", 2)}
CHOLESKY_PROBE = "probe_warp_cholesky"  # beside batched_cholesky
CHOLESKY_PROBE_ABI = [
    {"name": "a", "kind": "array", "dtype": "f32", "ndim": 3, "stored": False},
    {"name": "out", "kind": "array", "dtype": "f32", "ndim": 3, "stored": True},
]
PROBE_ABI = [
    {"name": "a", "kind": "array", "dtype": "f16", "ndim": 2, "stored": False},
    {"name": "b", "kind": "array", "dtype": "f16", "ndim": 2, "stored": False},
    {"name": "c", "kind": "array", "dtype": "f32", "ndim": 2, "stored": True},
]


@functools.cache
def _probe_module():
    """The probes, compiled once per process by CuPy's NVRTC."""
    import cupy

    from qnb.backends import cuda as cuda_backend

    return cupy.RawModule(
        code=PROBES, options=("-std=c++17", *(f"-I{d}" for d in cuda_backend.include_dirs()))
    )


def probe_blocks(name: str, m: int, n: int) -> int:
    """Blocks of 256 threads (8 warps) that a probe needs for an m×n C."""
    side = 16 * PROBE_KERNELS[name][1]
    return -(-(m // side) * (n // side) // 8)


def _namespace() -> dict:
    namespace: dict = {}
    path = Path(tempfile.gettempdir()) / "qnb_bench_cuda_kernels.py"
    path.write_text(KERNELS)  # inspect.getsource needs a real file
    exec(compile(KERNELS, str(path), "exec"), namespace)
    return namespace


def _gpu_time(fn, repeat=20, warmup=3) -> float:
    """Median seconds of ``fn()`` on the device (CUDA events)."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def _table(title, header, rows):
    print(f"\n{title}")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for line in (header, ["-" * w for w in widths], *rows):
        print("  " + "  ".join(str(x).rjust(w) for x, w in zip(line, widths)))


# --------------------------------------------------------------------------- 1. matmul


def matmul(ns, n=4096):
    import cupy

    rng = cupy.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=cupy.float32).astype(cupy.float16)
    b = rng.standard_normal((n, n), dtype=cupy.float32).astype(cupy.float16)
    reference = cupy.matmul(a.astype(cupy.float32), b.astype(cupy.float32))
    theirs = _gpu_time(lambda: cupy.matmul(a, b), repeat=10)
    flops = 2.0 * n**3
    rows, measured = [], {}
    # One 16×16 tile of C per program (the benchmark of the issue), and 2×2 tiles per
    # program (half the loads per product): how much the kernel's blocking matters.
    for name, per_program in (("tile_matmul", 16), ("block_matmul", 32)):
        c = cupy.full((n, n), cupy.nan, cupy.float32)  # poisoned: all must be written
        kernel = ns[name]
        grid = (n // per_program, n // per_program)
        kernel[grid](a, b, c)
        cupy.cuda.Device().synchronize()
        error = float(cupy.linalg.norm(c - reference) / cupy.linalg.norm(reference))
        ours = _gpu_time(lambda kernel=kernel, grid=grid, c=c: kernel[grid](a, b, c), 5, 1)
        rows.append(
            [
                f"qnb {name} (WMMA)",
                f"{ours * 1e3:.2f}",
                f"{flops / ours / 1e12:.1f}",
                f"{error:.1e}",
            ]
        )
        measured[name] = (ours, error)
    module = _probe_module()
    for name, (beside, _side) in PROBE_KERNELS.items():
        c = cupy.full((n, n), cupy.nan, cupy.float32)
        function = module.get_function(name)
        blocks = (probe_blocks(name, n, n),)
        dims = (np.int32(n), np.int32(n))
        # qnb's ABI: each array, then its shape; then the launch grid (unused here)
        args = (a, *dims, b, *dims, c, *dims, *(np.int32(g) for g in (*blocks, 1, 1)))
        function(blocks, (256,), args)
        cupy.cuda.Device().synchronize()
        error = float(cupy.linalg.norm(c - reference) / cupy.linalg.norm(reference))
        probe = _gpu_time(lambda f=function, g=blocks, x=args: f(g, (256,), x), 5, 1)
        rows.append(
            [
                f"probe: {beside}, warp per program",
                f"{probe * 1e3:.2f}",
                f"{flops / probe / 1e12:.1f}",
                f"{error:.1e}",
            ]
        )
        measured[name] = (probe, error)
    rows.append(
        ["cupy.matmul (cuBLAS, f16)", f"{theirs * 1e3:.2f}", f"{flops / theirs / 1e12:.1f}", ""]
    )
    _table(f"f16 matmul {n}³ (f32 accumulate)", ["", "ms", "TFLOP/s", "rel. error"], rows)
    ours, error = measured["tile_matmul"]
    print(f"  throughput ratio qnb tile_matmul / cuBLAS: {theirs / ours:.3f}")
    print(
        f"  throughput ratio qnb block_matmul / cuBLAS: {theirs / measured['block_matmul'][0]:.3f}"
    )
    for name, (beside, _side) in PROBE_KERNELS.items():
        print(
            f"  {beside}: the warp-per-program probe is "
            f"{measured[beside][0] / measured[name][0]:.1f}× as fast as qnb's kernel"
        )
    return {
        "matmul_ratio": theirs / ours,
        "matmul_tflops": flops / ours / 1e12,
        "matmul_error": error,
        "block_matmul_ratio": theirs / measured["block_matmul"][0],
        "block_matmul_error": measured["block_matmul"][1],
        **{f"{name}_ratio": theirs / measured[name][0] for name in PROBE_KERNELS},
        **{f"{name}_error": measured[name][1] for name in PROBE_KERNELS},
    }


def matmul_bf16(ns, n=4096):
    """The one-tile-per-program matmul on bf16 inputs vs cuBLAS on the same bf16 arrays
    (CuPy 14's bfloat16; where its matmul refuses bf16, vs cuBLAS f16 of the same size,
    said so in the row)."""
    import cupy
    import ml_dtypes

    rng = cupy.random.default_rng(2)
    a32, b32 = (rng.standard_normal((n, n), dtype=cupy.float32) for _ in range(2))
    try:  # CuPy 14 takes ml_dtypes' bfloat16 as an array dtype
        a, b = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)
    except Exception as exc:  # noqa: BLE001 (not measured, and said so in the table)
        print(f"  bf16 matmul ratio: not measured (no bf16 CuPy arrays: {exc})")
        return {}
    reference = cupy.matmul(a.astype(cupy.float32), b.astype(cupy.float32))
    c = cupy.full((n, n), cupy.nan, cupy.float32)  # poisoned: all must be written
    kernel, grid = ns["tile_matmul_bf16"], (n // 16, n // 16)
    kernel[grid](a, b, c)
    cupy.cuda.Device().synchronize()
    error = float(cupy.linalg.norm(c - reference) / cupy.linalg.norm(reference))
    ours = _gpu_time(lambda: kernel[grid](a, b, c), 5, 1)
    try:
        theirs, label = _gpu_time(lambda: cupy.matmul(a, b), repeat=10), "cuBLAS, bf16"
    except Exception as exc:  # noqa: BLE001 (a CuPy without bf16 matmul: say which)
        print(f"  cupy.matmul refuses bf16 ({type(exc).__name__}: {exc}); f16 instead")
        a16, b16 = a32.astype(cupy.float16), b32.astype(cupy.float16)
        theirs, label = _gpu_time(lambda: cupy.matmul(a16, b16), repeat=10), "cuBLAS, f16"
    flops = 2.0 * n**3
    rows = [
        ["qnb tile_matmul_bf16 (WMMA)", f"{ours * 1e3:.2f}", f"{flops / ours / 1e12:.1f}",
         f"{error:.1e}"],
        [f"cupy.matmul ({label})", f"{theirs * 1e3:.2f}", f"{flops / theirs / 1e12:.1f}", ""],
    ]  # fmt: skip
    _table(f"bf16 matmul {n}³ (f32 accumulate)", ["", "ms", "TFLOP/s", "rel. error"], rows)
    print(f"  throughput ratio qnb tile_matmul_bf16 / {label}: {theirs / ours:.3f}")
    return {"bf16_matmul_ratio": theirs / ours, "bf16_matmul_error": error}


# --------------------------------------------------------------------------- 2. Cholesky


def cholesky(ns, batch=65536):
    import cupy

    rng = cupy.random.default_rng(1)
    m = rng.standard_normal((batch, 16, 16), dtype=cupy.float32)
    spd = cupy.matmul(m, m.transpose(0, 2, 1)) + 16 * cupy.eye(16, dtype=cupy.float32)
    spd = cupy.ascontiguousarray(spd)
    out = cupy.full_like(spd, cupy.nan)
    kernel = ns["batched_cholesky"]
    kernel[batch](spd, out)
    reference = cupy.linalg.cholesky(spd)
    error = float(cupy.abs(out - reference).max() / cupy.abs(reference).max())
    ours = _gpu_time(lambda: kernel[batch](spd, out))
    theirs = _gpu_time(lambda: cupy.linalg.cholesky(spd))
    # The layout probe: one warp per matrix (see PROBES), same inputs, poisoned output.
    probe_out = cupy.full_like(spd, cupy.nan)
    function = _probe_module().get_function(CHOLESKY_PROBE)
    dims = (np.int32(batch), np.int32(16), np.int32(16))
    blocks = (-(-batch // 8),)
    args = (spd, *dims, probe_out, *dims, *(np.int32(g) for g in (*blocks, 1, 1)))
    function(blocks, (256,), args)
    probe_error = float(cupy.abs(probe_out - reference).max() / cupy.abs(reference).max())
    probe = _gpu_time(lambda: function(blocks, (256,), args))
    rows = [
        ["qnb batched_cholesky", f"{ours * 1e3:.3f}", f"{batch / ours / 1e6:.1f}", f"{error:.1e}"],
        [
            "probe: warp per program",
            f"{probe * 1e3:.3f}",
            f"{batch / probe / 1e6:.1f}",
            f"{probe_error:.1e}",
        ],
        ["cupy.linalg.cholesky", f"{theirs * 1e3:.3f}", f"{batch / theirs / 1e6:.1f}", ""],
    ]
    _table(f"batched Cholesky, {batch} × 16×16 f32", ["", "ms", "Mmat/s", "max rel. error"], rows)
    print(f"  speedup qnb / cupy: {theirs / ours:.2f}×")
    print(f"  batched_cholesky: the warp-per-program probe is {ours / probe:.1f}× as fast as qnb's")
    return {
        "cholesky_speedup": theirs / ours,
        "cholesky_error": error,
        "probe_warp_cholesky_speedup": theirs / probe,
        "probe_warp_cholesky_error": probe_error,
    }


# --------------------------------------------------------------------------- softmax, attention


def _softmax_rows(xp, x, out):
    """The row softmax as a performance-minded user writes it in array module ``xp``
    (CuPy here; NumPy in the tests): in place in ``out``."""
    xp.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    xp.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)
    return out


def row_softmax(ns, rows=16384, cols=1024):
    import cupy

    x = cupy.random.default_rng(3).standard_normal((rows, cols), dtype=cupy.float32)
    y, theirs_out = cupy.full_like(x, cupy.nan), cupy.empty_like(x)
    kernel, grid = ns["wide_softmax"], rows // 16
    kernel[grid](x, y)
    reference = _softmax_rows(cupy, x.astype(cupy.float64), cupy.empty(x.shape, cupy.float64))
    error = float(cupy.abs(y - reference).max() / cupy.abs(reference).max())
    ours = _gpu_time(lambda: kernel[grid](x, y))
    theirs = _gpu_time(lambda: _softmax_rows(cupy, x, theirs_out))
    moved = 2 * x.nbytes  # read once, written once: the least any softmax moves
    table = [
        ["qnb wide_softmax (Tile[16, 128])", f"{ours * 1e3:.3f}", f"{moved / ours / 1e9:.0f}",
         f"{error:.1e}"],
        ["cupy (in place)", f"{theirs * 1e3:.3f}", f"{moved / theirs / 1e9:.0f}", ""],
    ]  # fmt: skip
    _table(f"row softmax {rows}×{cols} f32", ["", "ms", "GB/s", "max rel. error"], table)
    print(f"  speedup qnb wide_softmax / cupy: {theirs / ours:.2f}×")
    return {"softmax_speedup": theirs / ours, "softmax_error": error}


def _attention_reference(xp, q, k, v, scale, mask, s, out):
    """Causal attention in array module ``xp``: batched products, the mask added, the
    softmax in place."""
    xp.matmul(q, k.transpose(0, 2, 1), out=s)
    s *= scale
    s += mask
    _softmax_rows(xp, s, s)
    return xp.matmul(s, v, out=out)


def causal_attention(ns, heads=32, seq=1024, d=64):
    import cupy

    rng = cupy.random.default_rng(4)
    q, k, v = (rng.standard_normal((heads, seq, d), dtype=cupy.float32) for _ in range(3))
    scale = np.float32(1 / np.sqrt(d))
    out = cupy.full_like(q, cupy.nan)
    kernel, grid = ns["causal_attention"], (seq // 64, heads)
    kernel[grid](q, k, v, out, scale)
    mask = cupy.triu(cupy.full((seq, seq), -cupy.inf, cupy.float32), 1)
    scores = cupy.empty((heads, seq, seq), cupy.float32)
    theirs_out = cupy.empty_like(q)
    wide = [x.astype(cupy.float64) for x in (q, k, v)]
    reference = _attention_reference(
        cupy, *wide, float(scale), mask.astype(cupy.float64), scores.astype(cupy.float64),
        cupy.empty(q.shape, cupy.float64),
    )  # fmt: skip
    error = float(cupy.abs(out - reference).max() / cupy.abs(reference).max())
    ours = _gpu_time(lambda: kernel[grid](q, k, v, out, scale), 10, 2)
    theirs = _gpu_time(
        lambda: _attention_reference(cupy, q, k, v, scale, mask, scores, theirs_out), 10, 2
    )
    flops = 2 * 2 * heads * seq * seq * d / 2  # two products over the causal half
    table = [
        ["qnb causal_attention (Tile[64, 64])", f"{ours * 1e3:.3f}",
         f"{flops / ours / 1e12:.2f}", f"{error:.1e}"],
        ["cupy (products, mask, in-place softmax)", f"{theirs * 1e3:.3f}",
         f"{flops / theirs / 1e12:.2f}", ""],
    ]  # fmt: skip
    _table(
        f"causal attention, {heads} heads × seq {seq} × d {d}, f32",
        ["", "ms", "TFLOP/s", "max rel. error"],
        table,
    )
    print(f"  speedup qnb causal_attention / cupy: {theirs / ours:.2f}×")
    return {"attention_speedup": theirs / ours, "attention_error": error}


# --------------------------------------------------------------------------- 3. launch overhead


def launch_overhead(ns, launches=2000):
    import cupy

    from qnb.backends import cuda as cuda_backend

    kernel = ns["add_one"]
    x = cupy.zeros((16, 16), cupy.float32)
    kernel(x)  # compile and cache
    source = kernel.source("cuda")
    options = ("-std=c++17", *(f"-I{d}" for d in cuda_backend.include_dirs()))
    raw = cupy.RawKernel(source, "qnb_add_one", options=options)
    rows16 = np.int32(16)
    grid = (np.int32(1),) * 3  # every qnb kernel's last parameters: the launch grid
    raw((1,), (256,), (x, rows16, rows16, *grid))

    def per_launch(fn):
        cupy.cuda.Device().synchronize()
        best = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(launches):
                fn()
            cupy.cuda.Device().synchronize()
            best.append((time.perf_counter() - start) / launches)
        return min(best)

    ours = per_launch(lambda: kernel(x))
    theirs = per_launch(lambda: raw((1,), (256,), (x, rows16, rows16, *grid)))
    expected = 2 + 2 * 5 * launches  # every launch added 1 to each element
    assert float(x[0, 0]) == expected, (float(x[0, 0]), expected)
    _table(
        "launch overhead (host time per launch, 16×16 f32, CuPy array)",
        ["", "µs / launch"],
        [
            ["qnb cached kernel  k(x)", f"{ours * 1e6:.1f}"],
            ["cupy.RawKernel, same code", f"{theirs * 1e6:.1f}"],
        ],
    )
    print(f"  overhead ratio qnb / raw: {ours / theirs:.2f}×")
    return {"launch_us": ours * 1e6, "raw_launch_us": theirs * 1e6}


# --------------------------------------------------------------------------- 5. scalar programs


def solo_layout(ns, n=1 << 22):
    """A kernel without tiles: a thread per program vs a block per program (same IR)."""
    from unittest import mock

    import cupy

    from benchmarks.bench_wgpu import map_kernel
    from qnb import ir
    from qnb.backends import get
    from qnb.backends.base import Options

    backend = get("cuda")
    a = cupy.random.default_rng(1).standard_normal(n, dtype=cupy.float32)
    want = a * 2 + 1
    solo = backend.load(backend.compile(map_kernel(), Options()))
    with mock.patch.object(ir, "holds_tiles", lambda kernel: True):  # the block layout
        block = backend.load(backend.compile(map_kernel(), Options()))
    times = {}
    for name, launcher in (("thread per program", solo), ("block per program", block)):
        out = cupy.full(n, cupy.nan, cupy.float32)
        launcher((n, 1, 1), [a, out])
        assert bool((out == want).all()), name
        times[name] = _gpu_time(lambda run=launcher, out=out: run((n, 1, 1), [a, out]))
    base = times["block per program"]
    _table(
        f"out[i] = a[i] * 2 + 1 over {n} programs (a kernel without tiles)",
        ["layout", "ms", "GB/s", "time / block's"],
        [
            [name, f"{t * 1e3:.3f}", f"{8 * n / t / 1e9:.0f}", f"{t / base:.3f}"]
            for name, t in times.items()
        ],
    )
    print(f"  solo layout speedup: {base / times['thread per program']:.1f}×")
    return {"solo_ms": times["thread per program"] * 1e3, "solo_block_ms": base * 1e3}


# --------------------------------------------------------------------------- 4. warm vs cold

_FIRST_RESULT = textwrap.dedent("""
    import json, sys, time
    start = time.perf_counter()
    sys.path.insert(0, {repo!r})
    import cupy
    import bench_cuda_probe as probe
    ns = probe._namespace()
    import qnb
    out = {{}}
    x16 = cupy.random.default_rng(0).standard_normal((64, 64), dtype=cupy.float32)
    args = {{
        "tile_matmul": ((4, 4), (x16.astype(cupy.float16), x16.astype(cupy.float16),
                                  cupy.zeros((64, 64), cupy.float32))),
        "batched_cholesky": (8, (cupy.broadcast_to(cupy.eye(16, dtype=cupy.float32),
                                                    (8, 16, 16)).copy(),
                                  cupy.zeros((8, 16, 16), cupy.float32))),
        "add_one": (1, (cupy.zeros((16, 16), cupy.float32),)),
    }}
    for name, (grid, kernel_args) in args.items():
        t = time.perf_counter()
        ns[name][grid](*kernel_args)
        cupy.cuda.Device().synchronize()
        out[name] = time.perf_counter() - t
    out["outcomes"] = [e.outcome for e in qnb.cache.events()]
    print(json.dumps(out))
""")


def warm_vs_cold():
    with tempfile.TemporaryDirectory(prefix="qnb-bench-cuda-") as cache_dir:
        probe_dir = Path(cache_dir) / "probe"
        probe_dir.mkdir()
        (probe_dir / "bench_cuda_probe.py").write_text(Path(__file__).read_text())
        env = dict(
            os.environ,
            QNB_CACHE_DIR=str(Path(cache_dir) / "cache"),
            PYTHONPATH=os.pathsep.join(
                [str(probe_dir), str(REPO), os.environ.get("PYTHONPATH", "")]
            ),
        )
        env.pop("QNB_ALWAYS_COMPILE", None)
        script = _FIRST_RESULT.format(repo=str(REPO))
        runs = []
        for _ in ("cold", "warm"):
            done = subprocess.run(
                [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
            )
            if done.returncode != 0:
                raise RuntimeError(f"first-result probe failed:\n{done.stderr[-3000:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    rows = [
        [
            name,
            f"{cold[name] * 1e3:.0f}",
            f"{warm[name] * 1e3:.1f}",
            f"{cold[name] / warm[name]:.0f}×",
        ]
        for name in ("tile_matmul", "batched_cholesky", "add_one")
    ]
    _table(
        "time to first result in a fresh process", ["kernel", "cold ms", "warm ms", "gain"], rows
    )
    print(f"  cache outcomes: cold {cold['outcomes']}, warm {warm['outcomes']}")
    names = [row[0] for row in rows]
    return {
        "cold_ms": {k: cold[k] * 1e3 for k in names},
        "warm_ms": {k: warm[k] * 1e3 for k in names},
    }


def main() -> dict | None:
    try:
        import qnb
    except ImportError as exc:
        print(f"bench_cuda: skipped (qnb does not import: {exc})")
        return None
    info = {b.name: b for b in qnb.backends()}["cuda"]
    if not info.available:
        print(f"bench_cuda: skipped, the cuda backend is unavailable: {info.reason}")
        return None
    print(f"bench_cuda on {info.device}")
    ns = _namespace()
    results = {}
    with qnb.backend("cuda"):
        steps = (matmul, matmul_bf16, cholesky, row_softmax, causal_attention)
        for step in (*steps, launch_overhead, solo_layout):
            results.update(step(ns))
    results.update(warm_vs_cold())
    return results


if __name__ == "__main__":
    import os
    import sys

    # On the GPU machine (scripts/gpu_check.sh sets QNB_REQUIRE_CUDA=1) a skip is a failure.
    if main() is None and os.environ.get("QNB_REQUIRE_CUDA") == "1":
        sys.exit(1)
