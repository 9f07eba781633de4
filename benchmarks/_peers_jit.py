"""Numba and JAX jit for ``benchmarks/bench_peers.py``: each workload written as a user of
that tool would (Numba: loops in ``@njit``; JAX: the NumPy expression under ``jax.jit``),
inputs placed before timing, each call's answer brought back as a NumPy array. Imported
only by the peer's own process; a tool that is not installed gives no runners."""

from __future__ import annotations

import math

import numpy as np


def numba_runner(workload, arrays):
    """``setup() -> run() -> result`` for ``workload`` under Numba, or None."""
    try:
        import numba
    except ImportError:
        return None
    kernels = _numba_kernels(numba)
    if workload == "trivial":
        d = np.zeros((16, 16), np.float32)
        return _returning(lambda: kernels["trivial"](d), d)
    if workload in ("affine_tiles", "affine_elements"):
        x = arrays["x"]
        y = np.empty_like(x)
        return _returning(lambda: kernels["affine"](x.reshape(-1), y.reshape(-1)), y)
    if workload in ("softmax", "wide_softmax"):
        x = arrays["x"]
        y = np.empty_like(x)
        return _returning(lambda: kernels["softmax"](x, y), y)
    if workload == "layer_norm":
        x = arrays["x"]
        y = np.empty_like(x)
        return _returning(lambda: kernels["layer_norm"](x, y, np.float32(1e-5)), y)
    if workload == "attention":
        q, k, v = arrays["q"], arrays["k"], arrays["v"]
        out = np.empty_like(q)
        scale = np.float32(1 / math.sqrt(q.shape[1]))
        return _returning(lambda: kernels["attention"](q, k, v, out, scale), out)
    return None  # matmul, Cholesky: a Numba user calls NumPy's (LAPACK's) own


def _returning(call, out):
    def run():
        call()
        return out

    return lambda: run


def _numba_kernels(numba):
    njit = numba.njit(cache=False)

    @njit
    def trivial(d):
        d[:16, :16] = 4.0

    @njit
    def affine(x, y):
        for i in range(x.shape[0]):
            y[i] = 2.0 * x[i] + 1.0

    @njit
    def softmax(x, y):
        for r in range(x.shape[0]):
            top = x[r, 0]
            for c in range(x.shape[1]):
                top = max(top, x[r, c])
            total = 0.0
            for c in range(x.shape[1]):
                y[r, c] = math.exp(x[r, c] - top)
                total += y[r, c]
            for c in range(x.shape[1]):
                y[r, c] /= total

    @njit
    def layer_norm(x, y, eps):
        n = x.shape[1]
        for r in range(x.shape[0]):
            mean = 0.0
            for c in range(n):
                mean += x[r, c]
            mean /= n
            squares = 0.0
            for c in range(n):
                squares += (x[r, c] - mean) ** 2
            inv = 1.0 / math.sqrt(squares / n + eps)
            for c in range(n):
                y[r, c] = (x[r, c] - mean) * inv

    @njit
    def attention(q, k, v, out, scale):
        seq, depth = q.shape
        scores = np.empty(seq, np.float32)
        for i in range(seq):
            top = -np.inf
            for j in range(i + 1):
                s = 0.0
                for e in range(depth):
                    s += q[i, e] * k[j, e]
                scores[j] = s * scale
                top = max(top, scores[j])
            total = 0.0
            for e in range(depth):
                out[i, e] = 0.0
            for j in range(i + 1):
                w = math.exp(scores[j] - top)
                total += w
                for e in range(depth):
                    out[i, e] += w * v[j, e]
            for e in range(depth):
                out[i, e] /= total

    return {
        "trivial": trivial,
        "affine": affine,
        "softmax": softmax,
        "layer_norm": layer_norm,
        "attention": attention,
    }


def jax_runner(workload, arrays):
    """``setup() -> run() -> result`` for ``workload`` under ``jax.jit``, or None."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None

    def softmax(x):
        e = jnp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def cholesky_solve(a, b):
        lower = jnp.linalg.cholesky(a)  # y @ L.T == b  <=>  L @ y.T == b.T
        solve = jax.vmap(lambda m, r: jax.scipy.linalg.solve_triangular(m, r, lower=True))
        return solve(lower, b.transpose(0, 2, 1)).transpose(0, 2, 1)

    def layer_norm(x):
        mean = x.mean(axis=1, keepdims=True)
        return (x - mean) / jnp.sqrt(x.var(axis=1, keepdims=True) + 1e-5)

    def attention(q, k, v):
        seq = q.shape[0]
        scores = (q @ k.T) / math.sqrt(q.shape[1])
        future = jnp.triu(jnp.ones((seq, seq), bool), 1)
        return softmax(jnp.where(future, -jnp.inf, scores)) @ v

    forms = {
        "trivial": (lambda: jnp.full((16, 16), 4.0, jnp.float32), ()),
        "affine_tiles": (lambda x: 2 * x + 1, ("x",)),
        "affine_elements": (lambda x: 2 * x + 1, ("x",)),
        "matmul": (jnp.matmul, ("a", "b")),
        "softmax": (softmax, ("x",)),
        "wide_softmax": (softmax, ("x",)),
        "cholesky": (cholesky_solve, ("a", "b")),
        "layer_norm": (layer_norm, ("x",)),
        "attention": (attention, ("q", "k", "v")),
    }
    if workload not in forms:
        return None
    fn, names = forms[workload]
    if workload == "cholesky":
        jax.config.update("jax_enable_x64", True)  # the row is f64
    compiled = jax.jit(fn)
    inputs = [jax.device_put(arrays[name]) for name in names]
    return lambda: lambda: np.asarray(compiled(*inputs).block_until_ready())
