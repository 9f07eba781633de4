"""Warp's CPU tile kernels for ``benchmarks/bench_peers.py`` (imported only where warp-lang
is installed: the optional ``peers`` extra). Each is the qnb kernel of the same workload
written with Warp's tiles (``wp.tile_load`` / ``wp.tile_store`` on 16×16 blocks, one
block per program, ``block_dim=1`` as Warp runs tiles on the CPU); the tile-free form is
a plain SIMT kernel. Warp compiles them to native code on first use (cached by Warp)."""

from __future__ import annotations

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def trivial(d: wp.array2d(dtype=float)):
    wp.tile_store(d, wp.tile_full(shape=(16, 16), value=4.0, dtype=float))


@wp.func
def _affine(v: float):
    return 2.0 * v + 1.0


@wp.kernel
def affine_tiles(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    t = wp.tile_load(x, shape=(16, 16), offset=(i * 16, j * 16))
    wp.tile_store(y, wp.tile_map(_affine, t), offset=(i * 16, j * 16))


@wp.kernel
def affine_elements(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + 1.0


@wp.kernel
def matmul(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(16, 16), dtype=float)
    for k in range(a.shape[1] // 16):
        ta = wp.tile_load(a, shape=(16, 16), offset=(i * 16, k * 16))
        tb = wp.tile_load(b, shape=(16, 16), offset=(k * 16, j * 16))
        wp.tile_matmul(ta, tb, acc)
    wp.tile_store(c, acc, offset=(i * 16, j * 16))


@wp.kernel
def softmax(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(x, shape=(16, 16), offset=(i * 16, 0))
    row_max = wp.tile_reshape(wp.tile_reduce(wp.max, t, axis=1), shape=(16, 1))
    e = wp.tile_map(wp.exp, t - wp.tile_broadcast(row_max, shape=(16, 16)))
    row_sum = wp.tile_reshape(wp.tile_sum(e, axis=1), shape=(16, 1))
    wp.tile_store(
        y, wp.tile_map(wp.div, e, wp.tile_broadcast(row_sum, shape=(16, 16))), offset=(i * 16, 0)
    )


@wp.kernel
def cholesky(
    a: wp.array3d(dtype=wp.float64),
    b: wp.array3d(dtype=wp.float64),
    x: wp.array3d(dtype=wp.float64),
):
    s = wp.tid()
    lower = wp.tile_cholesky(wp.tile_load(a[s], shape=(16, 16)))
    rhs = wp.tile_transpose(wp.tile_load(b[s], shape=(16, 16)))
    # L X = Bᵀ: X is the transpose of qnb's y (y @ Lᵀ == b)
    wp.tile_store(x[s], wp.tile_transpose(wp.tile_lower_solve(lower, rhs)))


# The wider rows as plain SIMT kernels, a thread per row (per query row for attention):
# Warp's CPU tiles run one program at a time with block_dim=1, so a row loop is how a Warp
# user would write these for the CPU.


@wp.kernel
def softmax_rows(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    r = wp.tid()
    top = x[r, 0]
    for c in range(x.shape[1]):
        top = wp.max(top, x[r, c])
    total = wp.float32(0.0)
    for c in range(x.shape[1]):
        e = wp.exp(x[r, c] - top)
        y[r, c] = e
        total += e
    for c in range(x.shape[1]):
        y[r, c] = y[r, c] / total


@wp.kernel
def layer_norm_rows(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float), eps: float):
    r = wp.tid()
    n = float(x.shape[1])
    mean = wp.float32(0.0)
    for c in range(x.shape[1]):
        mean += x[r, c]
    mean = mean / n
    squares = wp.float32(0.0)
    for c in range(x.shape[1]):
        squares += (x[r, c] - mean) * (x[r, c] - mean)
    inv = 1.0 / wp.sqrt(squares / n + eps)
    for c in range(x.shape[1]):
        y[r, c] = (x[r, c] - mean) * inv


@wp.kernel
def attention_rows(
    q: wp.array2d(dtype=float),
    k: wp.array2d(dtype=float),
    v: wp.array2d(dtype=float),
    out: wp.array2d(dtype=float),
    scale: float,
):
    i = wp.tid()  # a query row, online over the keys at or before it
    best = wp.float32(-1.0e30)
    total = wp.float32(0.0)
    for e in range(q.shape[1]):
        out[i, e] = 0.0
    for j in range(i + 1):
        s = wp.float32(0.0)
        for e in range(q.shape[1]):
            s += q[i, e] * k[j, e]
        s = s * scale
        top = wp.max(best, s)
        shrink = wp.exp(best - top)
        w = wp.exp(s - top)
        total = total * shrink + w
        for e in range(q.shape[1]):
            out[i, e] = out[i, e] * shrink + w * v[j, e]
        best = top
    for e in range(q.shape[1]):
        out[i, e] = out[i, e] / total


def runner(workload, arrays):
    """``setup() -> run() -> result`` for ``workload`` (arrays already on Warp's CPU
    device before timing, as qnb's are NumPy's), or None."""

    def on_device(a, dtype=float):
        return wp.array(np.ascontiguousarray(a), dtype=dtype, device=DEVICE)

    def tiled(kernel, dim, inputs, out):
        def run():
            wp.launch_tiled(kernel, dim=dim, inputs=inputs, block_dim=1, device=DEVICE)
            return out.numpy()

        return lambda: run

    if workload == "trivial":
        d = wp.zeros((16, 16), dtype=float, device=DEVICE)
        return tiled(trivial, 1, [d], d)
    if workload == "affine_tiles":
        x = on_device(arrays["x"])
        y = wp.empty_like(x)
        return tiled(affine_tiles, (x.shape[0] // 16, x.shape[1] // 16), [x, y], y)
    if workload == "affine_elements":
        x = on_device(arrays["x"])
        y = wp.empty_like(x)

        def run():
            wp.launch(affine_elements, dim=x.shape[0], inputs=[x, y], device=DEVICE)
            return y.numpy()

        return lambda: run
    if workload == "matmul":
        a, b = on_device(arrays["a"]), on_device(arrays["b"])
        c = wp.empty((a.shape[0], b.shape[1]), dtype=float, device=DEVICE)
        return tiled(matmul, (a.shape[0] // 16, b.shape[1] // 16), [a, b, c], c)
    if workload == "softmax":
        x = on_device(arrays["x"])
        y = wp.empty_like(x)
        return tiled(softmax, x.shape[0] // 16, [x, y], y)
    if workload == "cholesky":
        a, b = on_device(arrays["a"], wp.float64), on_device(arrays["b"], wp.float64)
        x = wp.empty_like(b)
        return tiled(cholesky, a.shape[0], [a, b, x], x)
    if workload in ("wide_softmax", "layer_norm", "attention"):
        return _simt_rows(workload, arrays, on_device)
    return None


def _simt_rows(workload, arrays, on_device):
    if workload == "attention":
        q, k, v = (on_device(arrays[name]) for name in "qkv")
        out = wp.empty_like(q)
        kernel, inputs = attention_rows, [q, k, v, out, 1.0 / float(np.sqrt(q.shape[1]))]
    else:
        x = on_device(arrays["x"])
        out = wp.empty_like(x)
        kernel = softmax_rows if workload == "wide_softmax" else layer_norm_rows
        inputs = [x, out] + ([1e-5] if workload == "layer_norm" else [])

    def run():
        wp.launch(kernel, dim=out.shape[0], inputs=inputs, device=DEVICE)
        return out.numpy()

    return lambda: run
