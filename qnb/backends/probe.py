"""Probe builds: a GPU kernel that also records, for one chosen program, each step's value.

``qnb.compare`` finds where a GPU backend first parts from the cpu reference by running
one program again in a *probe build* (``Options(probe=True)``, its own cache entry).
A step is what the cpu trace records (``qnb.TraceStep``): every ``Assign`` and every
store statement a program runs, in order, loops included. The probe build is the same
kernel with two hidden parameters added here, as IR (so every launcher passes them as
it passes any other):

- ``qnb_probe``, an i32 array the chosen program writes its steps into (the walker
  marks it stored, so the launchers copy it back);
- ``qnb_probe_program``, the chosen program's flat index in the grid (x fastest).

The buffer holds ``[count, entry, entry, ...]``: ``count`` is the number of steps the
program ran (``STEP_BUDGET + 1`` means more than the budget), and each entry is one
header word (``kind | dtype << 2 | log2(M) << 5 | log2(N) << 8 | line << 12``, with
``(M, N)`` the tile's shape, ``(1, N)`` for a Vec[N] and ``(1, 1)`` for a scalar) and the
value's words: M·N for a tile (element ``[i, j]`` at ``N * i + j``), N for a vec, 1 for a
scalar; f64 takes two
words per element (low, high), f16 and bf16 are widened to f32 (exactly), a bool is 0
or 1.
Entries stop where the buffer or the budget ends; the count goes on (to the budget).

The walker (``GpuRenderer.probe_*`` in qnb/backends/gpu/probe_steps.py) writes the entries; each target
spells only how a value becomes words (``probe_words``). Nothing else in the kernel
changes, so a probe build's results equal the normal build's (tested on the suite).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from qnb import ir
from qnb.dtypes import bf16, bool_, f16, f32, f64, i32

PROBE_PARAM = "qnb_probe"
PROGRAM_PARAM = "qnb_probe_program"
STEP_BUDGET = 10_000  # steps a probe records at most (contract)

KINDS = ("scalar", "vec", "tile")
DTYPES = (f16, f32, f64, i32, bool_, bf16)  # (3 bits of the header)


def add_probe(kernel: ir.KernelIR) -> ir.KernelIR:
    """A copy of ``kernel`` with the two hidden probe parameters appended."""
    params = [
        *kernel.params,
        ir.Param(PROBE_PARAM, ir.Type("array", i32, 1)),
        ir.Param(PROGRAM_PARAM, ir.scalar(i32)),
    ]
    return replace(kernel, params=params)


def is_probe(kernel: ir.KernelIR) -> bool:
    return any(p.name == PROBE_PARAM for p in kernel.params)


def value_words(typ: ir.Type) -> int:
    """Words one value of this type takes in an entry (its header not included)."""
    return typ.size * (2 if typ.dtype is f64 else 1)


def header(typ: ir.Type, line: int) -> int:
    rows, cols = (1, 1, *typ.shape)[-2:]  # a scalar (1, 1), a Vec[N] (1, N)
    return (
        KINDS.index(typ.kind)
        | DTYPES.index(typ.dtype) << 2
        | (rows.bit_length() - 1) << 5
        | (cols.bit_length() - 1) << 8
        | max(0, line) << 12
    )


def _header_type(head: int) -> ir.Type:
    kind, dtype = KINDS[head & 3], DTYPES[(head >> 2) & 7]
    rows, cols = 1 << ((head >> 5) & 7), 1 << ((head >> 8) & 15)
    return ir.value_type(dtype, {"scalar": (), "vec": (cols,), "tile": (rows, cols)}[kind])


def words_for(values: list) -> int:
    """The buffer size (in words) that holds entries for these values (a program's cpu
    trace outputs), with room for the count: what a probe run allocates."""
    total = 1
    for value in values:
        if isinstance(value, np.ndarray):
            total += 1 + value.size * (2 if value.dtype.itemsize == 8 else 1)
        else:  # a Python scalar: its dtype is not kept, so room for an f64
            total += 1 + 2
    return total


def new_buffer(words: int) -> np.ndarray:
    return np.zeros(max(int(words), 1), np.int32)


def decode(buffer: np.ndarray) -> tuple[list, int]:
    """``(values, count)``: the recorded values, in step order (NumPy arrays, or Python
    scalars for scalars), and how many steps the program ran (``STEP_BUDGET + 1``: more)."""
    words = np.asarray(buffer, np.int32)
    count = int(words[0])
    values, at = [], 1
    while len(values) < min(count, STEP_BUDGET) and at < len(words):
        typ = _header_type(int(words[at]))
        size = value_words(typ)
        if at + 1 + size > len(words):
            break
        values.append(_value(words[at + 1 : at + 1 + size], typ))
        at += 1 + size
    return values, count


def _value(words: np.ndarray, typ: ir.Type):
    dtype = typ.dtype
    if dtype is f64:
        data = words.view(np.uint32).astype(np.uint64)
        data = (data[0::2] | data[1::2] << np.uint64(32)).view(np.float64)
    elif dtype in (f32, f16, bf16):  # (f16 and bf16 widened to f32, exactly)
        data = words.view(np.float32).astype(dtype.numpy)
    elif dtype is bool_:
        data = words != 0
    else:
        data = words.copy()
    if typ.kind == "scalar":
        return data[0].item()
    return data.reshape(typ.shape)


__all__ = ["PROBE_PARAM", "PROGRAM_PARAM", "STEP_BUDGET", "add_probe", "decode", "is_probe"]
