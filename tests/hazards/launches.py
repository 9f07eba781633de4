"""Every launch a piece of code makes, checked: the kernels of the benchmarks and the
notebooks, launched as they launch them.

:func:`checking_launches` wraps ``Kernel._launch`` (the one path of ``k(...)`` and
``k[grid](...)``) for as long as it is open: each launch first runs ``qnb.check`` on the
same arguments (once per kernel, grid and argument signature), then runs as it would.
Run as a script, it executes notebooks' code cells in an IPython shell that way and
prints one JSON line per distinct launch checked.

    python -m tests.hazards.launches notebooks/01_first_tile_kernel.ipynb ...
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import numpy as np

import qnb
from qnb.kernel import Kernel


@contextlib.contextmanager
def checking_launches():
    """Yields the list of (kernel name, grid, qnb.Hazards) of each distinct launch."""
    found = []
    seen = set()
    launch = Kernel._launch

    def checked(self, grid, args, kwargs):
        if kwargs:
            args = tuple(self._positional(args, kwargs))
        key = (id(self), tuple(grid), tuple(_signature(a) for a in args))
        if key not in seen:
            seen.add(key)
            hazards = qnb.check(self[tuple(grid)], *args)
            found.append((self.name, tuple(grid), hazards))
        return launch(self, grid, args, {})

    Kernel._launch = checked
    try:
        yield found
    finally:
        Kernel._launch = launch


def _signature(value):
    if isinstance(value, np.ndarray | qnb.DeviceArray):
        return ("array", tuple(value.shape), str(value.dtype))
    return ("value", repr(value))


def run_notebook(path: str) -> list[dict]:
    """Execute ``path``'s code cells in a fresh IPython shell, every launch checked (a
    cell tagged raises-exception may raise; any other error stops the run)."""
    from IPython.core.interactiveshell import InteractiveShell

    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    shell = InteractiveShell.instance()
    rows = []
    with checking_launches() as found:
        for number, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
            source = "".join(cell["source"])
            result = shell.run_cell(source, silent=True)
            tags = cell.get("metadata", {}).get("tags", [])
            if not result.success and "raises-exception" not in tags:
                error = result.error_in_exec or result.error_before_exec
                raise RuntimeError(f"{path}: code cell {number} raised {error!r}")
    for name, grid, hazards in found:
        rows.append(
            {
                "notebook": path,
                "kernel": name,
                "grid": list(grid),
                "ok": hazards.ok,
                "summary": hazards.summary(),
            }
        )
    InteractiveShell.clear_instance()
    return rows


if __name__ == "__main__":
    import matplotlib

    matplotlib.use("Agg")
    for notebook_path in sys.argv[1:]:
        for row in run_notebook(notebook_path):
            print(json.dumps(row), flush=True)
