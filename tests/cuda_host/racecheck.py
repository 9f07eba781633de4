"""Data-race check of the generated CUDA code: ThreadSanitizer over the host model.

``race_report(kernel_ir, grid, args)`` renders the kernel as the cuda backend does, builds
it with ``g++ -fsanitize=thread -DQNB_HOST_TSAN`` into a standalone program (TSan must be
in the main program, so this is not the ctypes library ``backend.py`` loads), writes the
arguments to a file, runs the program, and returns ThreadSanitizer's report ("" when it
found no race). ``prebuild`` builds many kernels into one program ahead (most of a build
is g++'s fixed cost), each in a namespace of its own as ``backend.build_many`` puts them;
the program still runs one kernel per process, the one its second argument names, so
each report is that kernel's alone. Under ``QNB_HOST_TSAN`` only barriers order one CUDA thread's accesses
before another's (see ``qnb_cuda_host.h``), so any two accesses to one address, shared or
global, with a write among them and no barrier between, are reported.
"""

from __future__ import annotations

import os
import pathlib
import platform
import shutil
import subprocess
import tempfile

import numpy as np

from qnb.backends.base import Options
from qnb.backends.cuda import dispatch
from qnb.backends.cuda_render import SCALAR_ABI, render_cuda
from qnb.errors import BackendError
from tests.cuda_host import backend as host

TSAN_FLAGS = ["-std=c++17", "-O1", "-g", "-fsanitize=thread", "-DQNB_HOST_TSAN", "-w"]

_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {  // argv: the arguments' file, the kernel's index
  if (argc != 3) return 2;
  const int which = atoi(argv[2]);
  if (which < 0 || which >= (int)(sizeof QNB_ENTRIES / sizeof QNB_ENTRIES[0])) return 2;
  const int* IS_POINTER = QNB_IS_POINTER[which];
  FILE* in = fopen(argv[1], "rb");
  if (!in) return 2;
  long count = 0;
  if (fread(&count, sizeof count, 1, in) != 1) return 2;
  void** args = (void**)calloc(count, sizeof(void*));
  for (long k = 0; k < count; ++k) {  // each argument: its byte count, then its bytes
    long bytes = 0;
    if (fread(&bytes, sizeof bytes, 1, in) != 1) return 2;
    void* data = malloc(bytes > 0 ? bytes : 1);
    if (bytes > 0 && fread(data, 1, bytes, in) != (size_t)bytes) return 2;
    args[k] = data;
  }
  unsigned int blocks[3], grid[3];  // the blocks launched, and the grid they stand for
  if (fread(blocks, sizeof blocks, 1, in) != 1 || fread(grid, sizeof grid, 1, in) != 1) return 2;
  fclose(in);
  // Array parameters are passed by pointer: the slot holds the pointer to the data.
  void** slots = (void**)calloc(count, sizeof(void*));
  for (long k = 0; k < count; ++k) slots[k] = IS_POINTER[k] ? (void*)&args[k] : args[k];
  QNB_ENTRIES[which](blocks, grid, slots);
  return 0;
}
"""


# what prebuild built: a kernel's (source, entry, abi, threads) -> (its program, its index)
_BUILT: dict[tuple, tuple[pathlib.Path, int]] = {}


def _is_pointer(abi: list[dict]) -> str:
    """1 for each C parameter passed by pointer (an array's data), else 0 (the cuda ABI)."""
    pointers = []
    for entry_abi in abi:
        pointers.append(1 if entry_abi["kind"] == "array" else 0)
        if entry_abi["kind"] == "array":
            pointers += [0] * entry_abi["ndim"]
    return ", ".join(map(str, pointers)) or "0"


def _program(kernels: list[tuple[str, str, list[dict], int]]) -> pathlib.Path:
    """The standalone TSan program holding ``kernels`` (``(source, entry, abi, threads)``
    each, in a namespace of its own, the #include lines first), built once per text."""

    def pointer_table(index, abi):
        return [f"static const int is_pointer[] = {{{_is_pointer(abi)}}};"]

    lines = host.batched_lines(kernels, "qnbt", pointer_table)
    tags = [host.batched_namespace("qnbt", index) for index in range(len(kernels))]
    entries = [f"{tag}::{host.batched_entry(index)}" for index, tag in enumerate(tags)]
    tables = [f"{tag}::is_pointer" for tag in tags]
    lines += [
        "typedef long (*qnb_entry_t)(const unsigned int*, const unsigned int*, void**);",
        f"static const qnb_entry_t QNB_ENTRIES[] = {{{', '.join(entries)}}};",
        f"static const int* const QNB_IS_POINTER[] = {{{', '.join(tables)}}};",
        _MAIN,
    ]
    text = "\n".join(lines)
    flags = [*TSAN_FLAGS, "-include", str(host.SHIM)]
    stem = f"tsan-{kernels[0][1]}" if len(kernels) == 1 else "tsan-batch"
    return host.compile_once(text, stem, flags, (host.build.runtime_object((*TSAN_FLAGS, "-c")),))


def prebuild(kernel_irs: list) -> None:
    """Build the TSan programs of many kernels ahead, ``host.BATCH`` to a program, so that
    ``race_report`` of each only runs it. A batch g++ rejects is left unbuilt: each of its
    kernels then builds alone in ``race_report``, where the error names it."""
    pending = {}
    for kernel_ir in kernel_irs:
        rendered = render_cuda(kernel_ir, Options())
        spec = (rendered.text, rendered.entry, rendered.abi, rendered.threads)
        pending.setdefault(_spec_key(spec), spec)
    todo = [spec for key, spec in pending.items() if key not in _BUILT]
    for start in range(0, len(todo), host.BATCH):
        batch = todo[start : start + host.BATCH]
        try:
            program = _program(batch)
        except BackendError:
            continue
        for index, spec in enumerate(batch):
            _BUILT[_spec_key(spec)] = (program, index)


def _spec_key(spec: tuple) -> tuple:
    source, entry, abi, threads = spec
    return source, entry, repr(abi), threads


def _argument_bytes(abi: list[dict], args: list) -> list[bytes]:
    """Each C parameter's bytes, in signature order (the cuda ABI)."""
    out = []
    for entry, value in zip(abi, args):
        if entry["kind"] == "array":
            array = np.ascontiguousarray(value)
            out.append(array.tobytes())
            out += [np.int32(n).tobytes() for n in array.shape]
        else:
            out.append(np.array([value], SCALAR_ABI[entry["dtype"]].pass_as).tobytes())
    return out


def race_report(kernel_ir, grid, args, source: str | None = None) -> str:
    """ThreadSanitizer's report for one launch ("" if it saw no race). ``args`` in
    ``kernel_ir.params`` order; ``source`` replaces the rendered text (to check a probe)."""
    rendered = render_cuda(kernel_ir, Options())
    spec = (source or rendered.text, rendered.entry, rendered.abi, rendered.threads)
    program, index = _BUILT.get(_spec_key(spec)) or (_program([spec]), 0)
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(tuple(grid)))
    blocks = dispatch(grid, rendered.programs_per_block)
    parts = _argument_bytes(rendered.abi, args)
    with tempfile.NamedTemporaryFile(dir=host.BUILD, suffix=".args", delete=False) as f:
        f.write(np.int64(len(parts)).tobytes())
        for part in parts:
            f.write(np.int64(len(part)).tobytes() + part)
        f.write(np.array([*blocks, *grid], np.uint32).tobytes())
    try:
        env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66 report_signal_unsafe=0")
        command = [str(program), f.name, str(index)]
        if shutil.which("setarch"):  # TSan's fixed memory layout fails under high-entropy ASLR
            command = ["setarch", platform.machine(), "-R", *command]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    finally:
        os.unlink(f.name)
    if done.returncode == 0 and "ThreadSanitizer" not in done.stderr:
        return ""
    return done.stderr or f"exit status {done.returncode}"
