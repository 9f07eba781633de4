"""The qnb kernels and NumPy baselines of ``bench_peers``'s wider rows (issue #33): causal
attention with ``Tile[64, 64]`` blocks and an online softmax, and a row softmax over
``Tile[16, 128]`` column tiles, online too. Layer norm reuses ``bench_language``'s kernel
and its in-place NumPy form. Each NumPy baseline comes in two forms: in place (``out=``
into buffers made once, as a user who cares about speed writes it) and allocating."""

from __future__ import annotations

import math

import numpy as np

import qnb
from qnb import Tile

ATTENTION_BLOCK = 64  # rows of q and of k/v a step takes
SOFTMAX_ROWS, SOFTMAX_COLS = 16, 128  # the wide softmax's tile


@qnb.kernel
def causal_attention_64(qkv: qnb.Array[qnb.f32, 3], out: qnb.Array[qnb.f32, 2], scale: qnb.f32):
    """``qkv``: q, k and v stacked (3 × seq × d); a program per block of queries, online
    softmax over the key blocks at or before it."""
    block = qnb.program_id(0)
    first = block * ATTENTION_BLOCK
    queries = Tile[ATTENTION_BLOCK, ATTENTION_BLOCK].load(qkv[0], first, 0) * scale
    query_at = first + qnb.arange(ATTENTION_BLOCK)[:, None]
    best = Tile[ATTENTION_BLOCK, 1].full(-math.inf, qnb.f32)
    total = Tile[ATTENTION_BLOCK, 1].zeros(qnb.f32)
    acc = Tile[ATTENTION_BLOCK, ATTENTION_BLOCK].zeros(qnb.f32)
    for step in range(block + 1):
        key = step * ATTENTION_BLOCK
        keys = Tile[ATTENTION_BLOCK, ATTENTION_BLOCK].load(qkv[1], key, 0)
        causal = key + qnb.arange(ATTENTION_BLOCK)[None, :] <= query_at
        scores = qnb.where(causal, queries @ keys.T, -math.inf)
        top = qnb.maximum(best, scores.max(axis=1, keepdims=True))
        shrink = qnb.exp(best - top)
        best = top
        weights = qnb.exp(scores - top)
        acc = acc * shrink + weights @ Tile[ATTENTION_BLOCK, ATTENTION_BLOCK].load(qkv[2], key, 0)
        total = total * shrink + weights.sum(axis=1, keepdims=True)
    (acc / total).store(out, first, 0)


@qnb.kernel
def wide_softmax(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * SOFTMAX_ROWS
    best = Tile[SOFTMAX_ROWS, 1].full(-math.inf, qnb.f32)
    total = Tile[SOFTMAX_ROWS, 1].zeros(qnb.f32)
    for col in range(0, x.shape[1], SOFTMAX_COLS):  # one pass: running max and sum
        t = Tile[SOFTMAX_ROWS, SOFTMAX_COLS].load(x, row, col)
        top = qnb.maximum(best, t.max(axis=1, keepdims=True))
        total = total * qnb.exp(best - top) + qnb.exp(t - top).sum(axis=1, keepdims=True)
        best = top
    inv = 1.0 / total
    for col in range(0, x.shape[1], SOFTMAX_COLS):
        t = Tile[SOFTMAX_ROWS, SOFTMAX_COLS].load(x, row, col)
        (qnb.exp(t - best) * inv).store(y, row, col)


def softmax_in_place(x, out, top, total):
    """Row softmax of ``x`` into ``out`` through the column buffers ``top`` and ``total``."""
    np.max(x, axis=1, keepdims=True, out=top)
    np.subtract(x, top, out=out)
    np.exp(out, out=out)
    np.sum(out, axis=1, keepdims=True, out=total)
    np.divide(out, total, out=out)
    return out


def softmax_allocating(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Attention:
    """Causal attention's NumPy forms over ``q``, ``k``, ``v`` (seq × d), the in-place one
    with its buffers made here once."""

    def __init__(self, qkv):
        self.qkv = qkv
        self.q, self.k, self.v = qkv
        q = self.q
        self.scale = 1.0 / math.sqrt(q.shape[1])
        seq = q.shape[0]
        self.future = np.triu(np.ones((seq, seq), bool), 1)  # keys after each query
        self.scores = np.empty((seq, seq), np.float32)
        self.top = np.empty((seq, 1), np.float32)
        self.total = np.empty((seq, 1), np.float32)
        self.out = np.empty_like(q)

    def in_place(self):
        np.matmul(self.q, self.k.T, out=self.scores)
        np.multiply(self.scores, self.scale, out=self.scores)
        np.copyto(self.scores, -np.inf, where=self.future)
        softmax_in_place(self.scores, self.scores, self.top, self.total)
        return np.matmul(self.scores, self.v, out=self.out)

    def allocating(self):
        scores = (self.q @ self.k.T) * self.scale
        scores[self.future] = -np.inf
        return softmax_allocating(scores) @ self.v


def layer_norm_allocating(x, eps):
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + eps)
