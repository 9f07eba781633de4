"""Execute the teaching notebooks and store their real outputs, the way ``make test`` checks them.

    .venv/bin/python scripts/run_notebooks.py              # every notebooks/*.ipynb
    .venv/bin/python scripts/run_notebooks.py notebooks/02_tiled_matmul.ipynb

As under ``make test``: the notebooks run in sorted order in the current environment's
``python3`` kernel, with one fresh, empty kernel cache for the whole run (so the
"compiled / loaded from disk" lines are those of a first run) and a private
``XDG_RUNTIME_DIR`` (so Mesa's lavapipe driver says nothing on stderr). Each notebook is
rewritten in place with its outputs and execution counts; cell tags are kept.
Then check with ``make test`` (or the nbval command it runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def private_runtime_dir() -> str:
    path = ROOT / "build" / "xdg-runtime"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return str(path)


def run(path: Path, timeout: int) -> float:
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.setdefault("language_info", {"name": "python"})
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        # Saved with the notebook (as JupyterLab does here, see scripts/configure_lab.py), so an
        # opened, unrun notebook shows its TileView/TraceView/CacheView widgets.
        store_widget_state=True,
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell")
    args = parser.parse_args(argv)
    paths = sorted(args.notebooks or (ROOT / "notebooks").glob("*.ipynb"))
    os.environ["XDG_RUNTIME_DIR"] = private_runtime_dir()
    cache = tempfile.mkdtemp(prefix="qnb-notebook-cache-")
    os.environ["QNB_CACHE_DIR"] = cache
    failed = False
    try:
        for path in paths:
            try:
                seconds = run(path, args.timeout)
                print(f"{path.name}: {seconds:.1f} s")
            except Exception as exc:  # report every notebook, then fail
                failed = True
                print(f"{path.name}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
