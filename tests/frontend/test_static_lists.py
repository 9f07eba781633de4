"""Compile-time lists of tiles, vecs and scalars (``qnb/frontend/lists.py``).

A static-unrolled accumulation over a list of 4 tiles lowers to the same IR as the kernel
written out by hand (element ``accs[k]`` where the hand kernel has ``a{k}``) and gives
its result on every backend; reads, writes, ``len``, ``for x in qnb.static(xs)`` and
comprehensions; a runtime index and other misuse raise the contract's errors at the
user's line.
"""

from __future__ import annotations

import re
import runpy

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16


@qnb.kernel
def listed(x, out):
    accs = [Tile16.zeros(qnb.f32) for k in qnb.static(range(4))]
    for r in range(x.shape[0] // 16):
        for k in qnb.static(range(len(accs))):
            accs[k] += Tile16.load(x, r * 16, k * 16)
    for k in qnb.static(range(4)):
        accs[k].store(out, 0, k * 16)


@qnb.kernel
def by_hand(x, out):
    a0 = Tile16.zeros(qnb.f32)
    a1 = Tile16.zeros(qnb.f32)
    a2 = Tile16.zeros(qnb.f32)
    a3 = Tile16.zeros(qnb.f32)
    for r in range(x.shape[0] // 16):
        a0 += Tile16.load(x, r * 16, 0)
        a1 += Tile16.load(x, r * 16, 16)
        a2 += Tile16.load(x, r * 16, 32)
        a3 += Tile16.load(x, r * 16, 48)
    a0.store(out, 0, 0)
    a1.store(out, 0, 16)
    a2.store(out, 0, 32)
    a3.store(out, 0, 48)


def _normalised(ir_text: str) -> list[str]:
    text = re.sub(r"accs\[(\d)\]", r"a\1", ir_text)
    text = re.sub(r"\(0 \+ 16\)|\('add', 0, 16\)", "'add', 0, 16)", text)
    lines = [re.sub(r"\s*# line \d+$", "", line) for line in text.splitlines()[1:]]
    return sorted(lines[:5]) + lines[5:]  # the declarations are in first-use order


def test_unrolled_list_accumulation_is_the_hand_unrolled_kernel():
    x = np.zeros((48, 64), np.float32)
    out = np.zeros((16, 64), np.float32)
    assert _normalised(listed.source("ir", x, out)) == _normalised(by_hand.source("ir", x, out))


def test_unrolled_list_accumulation_gives_the_hand_kernels_result(backend_name):
    x = np.random.default_rng(4).standard_normal((48, 64)).astype(np.float32)
    got, want = (np.full((16, 64), np.nan, np.float32) for _ in range(2))
    with qnb.backend(backend_name):
        listed(x, got)
        by_hand(x, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, x.reshape(3, 16, 64).sum(0), rtol=1e-6, atol=1e-6)


@qnb.kernel
def mixed(x, out, vout, sout):
    items = [Tile16.load(x, 0, 0), Tile16.load(x, 0, 16), Tile16.load(x, 16, 0)]
    rows = [items[k].row(k) for k in qnb.static(range(3))]
    scales = [2.0, 3.0, -1.0]
    total = Tile16.zeros(qnb.f32)
    for t in qnb.static(items):
        t *= 2.0  # the element itself, as on a list of NumPy arrays
    for k in qnb.static(range(len(items))):
        total += items[k] * scales[k]
    items[-1] = total  # a write with a compile-time (negative) index
    for t in qnb.static(items):
        total = total + t
    total.store(out, 0, 0)
    acc = Vec16.zeros(qnb.f32)
    for v in qnb.static(rows):
        acc += v
    acc.store(vout, 0)
    n = 0.0
    for s in qnb.static(scales):
        if s > 0:  # a runtime branch over a list's scalar
            n += s
    sout[0] = n
    sout[1] = len(scales)


def test_reads_writes_len_and_iteration(backend_name):
    x = np.random.default_rng(9).standard_normal((32, 32)).astype(np.float32)
    out = np.full((16, 16), np.nan, np.float32)
    vout = np.full(16, np.nan, np.float32)
    sout = np.full(2, np.nan, np.float32)
    with qnb.backend(backend_name):
        mixed(x, out, vout, sout)
    tiles = [x[:16, :16], x[:16, 16:], x[16:, :16]]
    rows = [tiles[k][k] for k in range(3)]
    doubled = [2 * t for t in tiles]
    total = 2 * doubled[0] + 3 * doubled[1] - doubled[2]
    want = total + doubled[0] + doubled[1] + total
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(vout, sum(rows), rtol=1e-6)
    assert sout.tolist() == [5.0, 3.0]


def test_a_list_element_keeps_its_name_in_the_ir():
    x, out = np.zeros((32, 32), np.float32), np.zeros((16, 16), np.float32)
    text = mixed.source("ir", x, out, np.zeros(16, np.float32), np.zeros(2, np.float32))
    assert "local items[0]: Tile16[f32]" in text and "items[2] = " in text


def _user_kernel(tmp_path, body: str):
    source = "import qnb\n@qnb.kernel\ndef k(x, out):\n" + body
    path = tmp_path / "lists_user.py"
    path.write_text(source)
    return runpy.run_path(str(path))["k"], str(path)


@pytest.mark.parametrize(
    ("body", "error", "message", "line"),
    [
        (
            "    ts = [qnb.Tile16.load(x, 0, 0), qnb.Tile16.load(x, 0, 16)]\n"
            "    i = qnb.program_id(0)\n"
            "    ts[i].store(out, 0, 0)\n",
            qnb.QnbTypeError,
            "indexed with a compile-time int .* this index is a runtime value",
            6,
        ),
        (
            "    ts = [qnb.Tile16.load(x, 0, 0)]\n"
            "    i = qnb.program_id(0)\n"
            "    ts[i] = qnb.Tile16.load(x, 0, 16)\n",
            qnb.QnbTypeError,
            "this index is a runtime value",
            6,
        ),
        (
            "    ts = [qnb.Tile16.load(x, 0, 0)]\n    ts[1].store(out, 0, 0)\n",
            qnb.QnbIndexError,
            "list index 1 is out of range for a list of 1",
            5,
        ),
        (
            "    ts = [x]\n",
            qnb.QnbTypeError,
            "a compile-time list holds tiles, vecs or scalars",
            4,
        ),
    ],
    ids=["runtime-read", "runtime-write", "out-of-range", "array-item"],
)
def test_misuse_raises_at_the_users_line(tmp_path, body, error, message, line):
    k, path = _user_kernel(tmp_path, body)
    x = np.ones((16, 32), np.float32)
    with pytest.raises(error, match=message) as raised:
        k(x, np.zeros((16, 16), np.float32))
    assert (raised.value.filename, raised.value.lineno) == (path, line)


def test_a_comprehension_over_a_runtime_range_is_refused_at_decoration(tmp_path):
    with pytest.raises(qnb.QnbSyntaxError, match=r"\[expr for k in qnb.static") as raised:
        _user_kernel(tmp_path, "    ts = [qnb.Tile16.load(x, 0, 0) for k in range(4)]\n")
    assert raised.value.lineno == 4
