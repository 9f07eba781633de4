"""Execute the teaching notebooks and store their real outputs, or check them under nbval.

    .venv/bin/python scripts/run_notebooks.py              # run every notebooks/*.ipynb, store outputs
    .venv/bin/python scripts/run_notebooks.py notebooks/02_tiled_matmul.ipynb
    .venv/bin/python scripts/run_notebooks.py --check      # what `make test` runs: nbval

Both modes run the notebooks the same way, so what is stored is what is checked:

- in sorted order, each in the current environment's ``python3`` kernel;
- each with a fresh, empty kernel cache of its own (so the "compiled / loaded from disk"
  lines are those of a first run, and two notebooks defining a kernel of one name never
  see each other's entries; under nbval, ``notebooks/conftest.py`` gives each its own);
- on the *reference machine*, whatever this machine has: no CUDA device
  (``CUDA_VISIBLE_DEVICES=""``) and the wgpu backend on Mesa's CPU Vulkan driver lavapipe
  (``WGPUPY_WGPU_ADAPTER_NAME``), so ``"auto"`` picks ``cpu`` and every "available /
  not available" line reads the same on a laptop, a CI runner or a GPU server. qnb's own
  settings (``QNB_CACHE``, ``QNB_ALWAYS_COMPILE``, …) are removed from the environment;
- with a private ``XDG_RUNTIME_DIR`` (so lavapipe says nothing on stderr).

Storing rewrites each notebook in place with its outputs and execution counts (cell tags
are kept); then check with ``--check`` (or ``make test``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
SANITIZE = ROOT / "notebooks" / "sanitize.cfg"
CHECK_CACHE = ROOT / "build" / "nbval-cache"

# The environment the stored outputs assume (None: removed). wgpu-py picks the first
# adapter whose summary contains WGPUPY_WGPU_ADAPTER_NAME: lavapipe's Vulkan adapter reads
# "llvmpipe (LLVM …) (CPU) via Vulkan". Without lavapipe installed, wgpu is "not available"
# and the notebooks' wgpu lines differ: `make system-deps` installs it.
REFERENCE_MACHINE = {
    "CUDA_VISIBLE_DEVICES": "",
    "WGPUPY_WGPU_ADAPTER_NAME": "(CPU) via Vulkan",
    "QNB_BACKEND": None,
    "QNB_CACHE": None,
    "QNB_ALWAYS_COMPILE": None,
    "QNB_CACHE_MAX_BYTES": None,
}


def private_runtime_dir() -> str:
    path = ROOT / "build" / "xdg-runtime"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return str(path)


def reference_environment(cache_dir: str | os.PathLike) -> dict[str, str]:
    """This process's environment as the notebooks expect it, with ``cache_dir`` as the
    kernel cache."""
    env = dict(os.environ)
    for name, value in REFERENCE_MACHINE.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env["QNB_CACHE_DIR"] = str(cache_dir)
    if not env.get("XDG_RUNTIME_DIR") or not os.path.isdir(env["XDG_RUNTIME_DIR"]):
        env["XDG_RUNTIME_DIR"] = private_runtime_dir()
    return env


def run(path: Path, timeout: int) -> float:
    import nbformat
    from nbclient import NotebookClient

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
    client.execute()  # a cell tagged raises-exception may raise; any other error stops here
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def store(paths: list[Path], timeout: int) -> int:
    caches = tempfile.mkdtemp(prefix="qnb-notebook-caches-")
    environment = reference_environment(caches)
    os.environ.clear()  # the kernels nbclient starts inherit it
    os.environ.update(environment)
    failed = False
    try:
        for path in paths:
            os.environ["QNB_CACHE_DIR"] = tempfile.mkdtemp(dir=caches)
            try:
                seconds = run(path, timeout)
                print(f"{path.name}: {seconds:.1f} s")
            except Exception as exc:  # report every notebook, then fail
                failed = True
                print(f"{path.name}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        shutil.rmtree(caches, ignore_errors=True)
    return 1 if failed else 0


def check(paths: list[Path], pytest_args: list[str]) -> int:
    """nbval over ``paths``, strict, after the sanitizers in notebooks/sanitize.cfg."""
    shutil.rmtree(CHECK_CACHE, ignore_errors=True)
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
        "--nbval", "--nbval-current-env", "--nbval-sanitize-with", str(SANITIZE),
        *pytest_args, *(os.path.relpath(path, ROOT) for path in paths),
    ]  # fmt: skip
    env = reference_environment(CHECK_CACHE)
    env["QNB_NOTEBOOK_CACHES"] = str(CHECK_CACHE)  # one cache per notebook under it
    return subprocess.call(command, cwd=ROOT, env=env)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="compare under nbval, store nothing")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell (storing)")
    parser.add_argument(
        "--pytest-args", default="", help="extra pytest arguments with --check, e.g. '-q -x'"
    )
    args = parser.parse_args(argv)
    paths = sorted(p.resolve() for p in args.notebooks) or sorted(
        (ROOT / "notebooks").glob("*.ipynb")
    )
    if args.check:
        return check(paths, args.pytest_args.split())
    return store(paths, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
