"""The cpu backend as the registry sees it (``CpuBackend``: compile, load, to_device) and
the trace entry point: the two places that choose between the cpu's executors and
watchers, above them all (``interpreter`` and the ``semantics`` it calls, ``prepared``
the launch path, ``trace`` the trace recorder), so that none
of those imports another back."""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager, suppress

import numpy as np

from qnb import ir
from qnb.backends.base import Artifact, Backend, BackendInfo, Options
from qnb.backends.cpu import interpreter, lanes
from qnb.backends.cpu.prepared import prepare
from qnb.errors import BackendError, QnbTypeError


class CpuBackend(Backend):
    name = "cpu"
    language = None

    def info(self) -> BackendInfo:
        return BackendInfo("cpu", True, f"NumPy {np.__version__} on the host CPU", None)

    def key_components(self):
        return {"name": "cpu"}, {"numpy": np.__version__}

    def compile(self, kernel: ir.KernelIR, options: Options) -> Artifact:
        return Artifact(text={"ir": ir.kernel_to_json(kernel), "debug": options.debug})

    def load(self, artifact: Artifact):
        # Prepared once per artifact (closures from the IR just verified and rebuilt here);
        # the interpreter runs what the prepared path does not cover.
        path = os.environ.get("QNB_CPU_PATH", "")
        if path not in ("", "interpreter", "prepared"):
            raise BackendError(f"QNB_CPU_PATH is 'interpreter' or 'prepared', not {path!r}")
        with _no_collections():
            kernel = ir.kernel_from_json(artifact.text["ir"])
            prepared = None if path == "interpreter" else prepare(kernel)
        if prepared is not None:
            return prepared  # launch(grid, args), the arrays it stores to bound
        if path == "prepared":
            raise BackendError(
                f"QNB_CPU_PATH=prepared, but the prepared path does not run kernel "
                f"{kernel.name!r} (an op it has no closure for): the interpreter would"
            )

        _loaded, stored = ir.array_uses(kernel)
        chunk = lanes.chunk_programs(kernel)

        def launch(grid, args):
            interpreter.run(kernel, grid, args, stored, chunk)

        return launch

    def to_device(self, array):
        return lanes.CpuArray(np.asarray(array))


@contextmanager
def _no_collections():
    """Python's cyclic garbage collector paused: a load makes thousands of small objects
    (IR nodes, closures) that all live as long as the launcher, so a collection in
    between frees nothing and only walks them (a fifth of a warm load, measured). Left
    as it was found where the collector was already off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def trace(
    kernel: ir.KernelIR, grid, args, kernel_parsed, parsed_units, programs=None, max_steps=None
):
    """Run with the trace recorder watching; returns a ``qnb.Trace``. ``programs`` (a
    range of flat program indices; default: the whole grid) runs and records only those
    programs. ``max_steps``: the run stops once a program has recorded that many steps
    (the trace then holds the steps up to there: ``qnb.compare``'s step budget)."""
    # (imported here: a launch nobody traces never loads the recorder)
    from qnb.backends.cpu.trace import Recorder, StepLimit

    arrays, scalars = interpreter._bind(kernel, args)
    total = grid[0] * grid[1] * grid[2]
    start = 0 if programs is None else programs.start
    if programs is not None:
        total = len(programs)
    if total > 4096:
        raise QnbTypeError(
            f"tracing records every op of every program; {total} programs is too "
            "many (use a grid of at most 4096 programs)"
        )
    bound = {name: a.reshape(shape) for name, (a, shape) in arrays.items()}
    recorder = Recorder(kernel, grid, parsed_units, range(start, start + total), bound, max_steps)
    # (at the limit the steps up to there are recorded: the rest of the run is not needed)
    with suppress(StepLimit):
        interpreter._Executor(kernel, grid, arrays, scalars, start, total, recorder).run()
    return recorder.trace(kernel_parsed)


__all__ = ["CpuBackend", "trace"]
