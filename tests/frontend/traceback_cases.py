"""A user's script for tests/frontend/test_tracebacks.py: each function makes one qnb
error (``python this_file.py CASE``; the pytest run imports it and calls each)."""

import sys

import numpy as np

import qnb

x = np.ones((16, 16), np.float32)


class Settings:
    SCALE = 2.0


def decoration():
    @qnb.kernel
    def bad(a: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.zeros(qnb.f32)
        t[:] = a[0:, 0:16]


def decoration_with_options():
    @qnb.kernel(backend="cpu", debug=True)
    def bad(a: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.zeros(qnb.f32)
        t[:] = a[0:, 0:16]


def func_decoration():
    @qnb.func
    def helper(a):
        return {a: 1}


@qnb.kernel(backend="cpu")
def copy(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    qnb.Tile16.load(a, 0, 0).store(out, 0, 0)


def launch_type():
    copy[1](x, np.zeros((16, 16), np.int32))


def call_type():
    copy(x, np.zeros((16, 16), np.int32))


LOOKUP = {"a": 1}


@qnb.kernel(backend="cpu")
def captures(a: qnb.Array[qnb.f32, 2]):
    t = qnb.Tile16.load(a, 0, 0) * LOOKUP
    t.store(a, 0, 0)


def launch_capture():
    captures[1](x)


@qnb.kernel(backend="cpu")
def outside(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    out[i, 0] = 1.0


def launch_index():
    outside[20](x, np.zeros_like(x))


@qnb.kernel
def mistyped(a: qnb.Array[qnb.f32, 2]):
    t = qnb.Tile16.load(a, 0, 0) + qnb.f32
    t.store(a, 0, 0)


def source():
    mistyped.source("wgsl")


@qnb.kernel(backend="cpu")
def static_read(a: qnb.Array[qnb.f32, 2]):
    t = qnb.Tile16.load(a, 0, 0)
    if qnb.static(Settings.MISSING > 1):
        t = t * 2.0
    t.store(a, 0, 0)


def static():
    static_read[1](x)


def trace():
    copy.trace[1](x, np.zeros((16, 16), np.int32))


def bad_grid():
    copy[0](x, x)


def keyword():
    copy[1](x, output=x)


def device_copy():
    qnb.to_device(np.ones(4, np.int64), backend="cpu")


def backend_name():
    with qnb.backend("nope"):
        pass


def compare_type():
    qnb.compare(copy[1], x, np.zeros((16, 16), np.int32), backends=["cpu"])


if __name__ == "__main__":
    globals()[sys.argv[1]]()
