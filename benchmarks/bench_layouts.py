"""Tiles of any shape, measured on cpu and wgpu (lavapipe here; ratios only), with NumPy
side by side.

1. matmul 512³ f32 with 16×16 blocks against 64×64 blocks (one program per output block,
   K stepped by the block), and on the GPU backends the 16×16 kernel at forced thread
   counts (``threads=``).
2. Row softmax over 65,536 × 128 f32 with ``Tile[16, 128]`` blocks (keepdims reductions
   and their broadcasts) against NumPy.
3. The new layout against the old one for 16×16 kernels: the same ``Tile16`` kernels
   (elementwise map, matmul 256³, Cholesky per program) timed in this tree and in a
   checkout of the baseline revision (``--baseline``, default ``15d1b44``: main before
   the layouts) in a subprocess, side by side, as old/new time ratios.

Run: ``python benchmarks/bench_layouts.py [--baseline REV] [--skip-old]``. On a machine
with a GPU and NVRTC, ``--cuda`` adds the cuda backend's times of sections 1 and 2, on
device arrays (CuPy) with a synchronize after each call: no host copy is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import qnb  # noqa: E402  (the kernels' annotations are read from this module's globals)
from benchmarks._timing import median_time, table  # noqa: E402
from qnb import Tile  # noqa: E402

# --------------------------------------------------------------------------- kernels


def shaped_kernels(threads=None):
    @qnb.kernel(threads=threads)
    def matmul(a, b, c, BM: qnb.Template, BN: qnb.Template, BK: qnb.Template):
        i, j = qnb.program_id(0), qnb.program_id(1)
        acc = Tile[BM, BN].zeros(qnb.f32)
        for k in range(0, a.shape[1], BK):
            acc = qnb.mma(Tile[BM, BK].load(a, i * BM, k), Tile[BK, BN].load(b, k, j * BN), acc)
        acc.store(c, i * BM, j * BN)

    @qnb.kernel(threads=threads)
    def row_softmax(x, out, M: qnb.Template, N: qnb.Template):
        i = qnb.program_id(0)
        t = Tile[M, N].load(x, i * M, 0)
        e = qnb.exp(t - t.max(axis=1, keepdims=True))
        (e / e.sum(axis=1, keepdims=True)).store(out, i * M, 0)

    return matmul, row_softmax


OLD_KERNELS = r"""
import json, os, statistics, sys, time
import numpy as np
import qnb
from qnb import Tile16

# QNB_BENCH_THREADS: the threads= option (this tree only: the baseline has no option)
_T = os.environ.get("QNB_BENCH_THREADS")
OPTIONS = {"threads": int(_T)} if _T else {}

@qnb.kernel
def scale_add(x, y, out):
    i, j = qnb.program_id(0), qnb.program_id(1)
    t = Tile16.load(x, i * 16, j * 16)
    u = Tile16.load(y, i * 16, j * 16)
    (t * 2.0 + u).store(out, i * 16, j * 16)

@qnb.kernel(**OPTIONS)
def matmul16(a, b, c):
    i, j = qnb.program_id(0), qnb.program_id(1)
    acc = Tile16.zeros(qnb.f32)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(Tile16.load(a, i * 16, k), Tile16.load(b, k, j * 16), acc)
    acc.store(c, i * 16, j * 16)

@qnb.kernel(**OPTIONS)
def cholesky16(a, out):
    i = qnb.program_id(0)
    t = Tile16.load(a[i], 0, 0)
    t.cholesky_(1e-6)
    t.store(out[i], 0, 0)

def best(fn, repeat=5):
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter(); fn(); samples.append(time.perf_counter() - start)
    return statistics.median(samples)

rng = np.random.default_rng(0)
qnb.set_backend("wgpu")
x = rng.standard_normal((1024, 1024)).astype(np.float32)
y = rng.standard_normal((1024, 1024)).astype(np.float32)
out = np.zeros_like(x)
a = rng.standard_normal((256, 256)).astype(np.float32)
b = rng.standard_normal((256, 256)).astype(np.float32)
c = np.zeros((256, 256), np.float32)
m = rng.standard_normal((1024, 16, 16)).astype(np.float32)
spd = (m @ m.transpose(0, 2, 1) + 16 * np.eye(16, dtype=np.float32)).astype(np.float32)
chol = np.zeros_like(spd)
times = {
    "map 1024x1024": best(lambda: scale_add[64, 64](x, y, out)),
    "matmul 256^3": best(lambda: matmul16[16, 16](a, b, c)),
    "cholesky 1024 x 16x16": best(lambda: cholesky16[1024](spd, chol)),
}
assert np.allclose(out, x * 2 + y, atol=1e-5)
assert np.allclose(c, a @ b, atol=1e-3)
assert np.allclose(np.tril(chol), np.linalg.cholesky(spd), atol=1e-3)
print(json.dumps(times))
"""


def _run_old_kernels(tree: Path, threads: int | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), QNB_CACHE_DIR=tempfile.mkdtemp())
    env["QNB_BENCH_THREADS"] = str(threads or "")
    script = Path(tempfile.mkdtemp()) / "tile16_kernels.py"  # (kernels need a source file)
    script.write_text(OLD_KERNELS)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tree
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _checkout(rev: str) -> Path:
    """The tree of ``rev`` (git archive: no worktree, nothing written to the repository)."""
    target = Path(tempfile.mkdtemp(prefix="qnb-baseline-"))
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev], capture_output=True, cwd=REPO, check=True
    ).stdout
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(target, filter="data")
    return target


def _device(backend: str):
    """``(to, back, sync)`` for ``backend``: on cuda the arrays live on the device (CuPy)
    and each timed call ends with a synchronize, so no PCIe copy is timed; elsewhere
    NumPy arrays and nothing to wait for."""
    if backend != "cuda":
        return (lambda x: x), (lambda x: x), (lambda: None)
    import cupy

    return cupy.asarray, cupy.asnumpy, cupy.cuda.Device().synchronize


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default="15d1b44")
    parser.add_argument("--skip-old", action="store_true")
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--sections", default="123", help="which sections to run")
    options = parser.parse_args()
    has_wgpu = {b.name: b for b in qnb.backends()}["wgpu"].available
    if "3" in options.sections:
        if has_wgpu:
            old_vs_new(options)
        else:  # (a GPU machine without Vulkan: sections 1 and 2 still run)
            print("3. skipped: the wgpu backend is unavailable here")
    if "1" not in options.sections and "2" not in options.sections:
        return

    backends = ["cpu"] + (["wgpu"] if has_wgpu else []) + (["cuda"] if options.cuda else [])
    rng = np.random.default_rng(0)

    # 1. matmul 512^3
    a = rng.standard_normal((512, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    want = a @ b
    rows = []
    for backend in backends:
        to, back, sync = _device(backend)
        da, db = to(a), to(b)
        with qnb.backend(backend):
            times = {}
            for label, block, threads in [
                ("16x16 blocks (auto: 256 threads)", 16, None),
                ("16x16 blocks, threads=64", 16, 64),
                ("16x16 blocks, threads=16", 16, 16),
                ("64x64 blocks (auto: 256 threads)", 64, None),
            ]:
                if backend == "cpu" and threads:
                    continue  # threads= is a GPU layout option
                matmul, _ = shaped_kernels(threads)
                c = to(np.full((512, 512), np.nan, np.float32))
                grid = (512 // block, 512 // block)
                step = 16 if block == 16 else 32
                times[label] = median_time(
                    lambda m=matmul, g=grid, c=c, s=block, k=step, ab=(da, db), w=sync: (
                        m[g](*ab, c, s, s, k),
                        w(),
                    ),
                    repeat=3,
                )
                assert np.allclose(back(c), want, atol=1e-2), label
            base = times["16x16 blocks (auto: 256 threads)"]
            for label, t in times.items():
                rows.append((backend, label, t, f"{base / t:.2f}x"))
    numpy_time = median_time(lambda: a @ b)
    rows = [(b, k, f"{t * 1e3:.1f} ms", s, f"{t / numpy_time:.2f}x") for b, k, t, s in rows]
    rows.append(("numpy", "a @ b", f"{numpy_time * 1e3:.2f} ms", "", "1.00x"))
    table(
        "1. matmul 512^3 f32",
        ["backend", "kernel", "time", "speed vs 16x16 auto", "vs numpy"],
        rows,
    )

    # 2. row softmax 65536 x 128
    x = rng.standard_normal((65536, 128)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    rows = []
    numpy_time = median_time(
        lambda: (
            np.exp(x - x.max(axis=1, keepdims=True))
            / np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)
        )
    )
    for backend in backends:
        to, back, sync = _device(backend)
        dx = to(x)
        with qnb.backend(backend):
            _, softmax = shaped_kernels()
            out = to(np.full_like(x, np.nan))
            t = median_time(
                lambda f=softmax, o=out, i=dx, w=sync: (f[65536 // 16](i, o, 16, 128), w()),
                repeat=3,
            )
            assert np.allclose(back(out), want, atol=1e-5)
            rows.append(
                (backend, "Tile[16, 128] rows", f"{t * 1e3:.1f} ms", f"{t / numpy_time:.2f}x")
            )
    rows.append(("numpy", "exp / sum", f"{numpy_time * 1e3:.1f} ms", "1.00x"))
    table("2. row softmax 65536x128 f32", ["backend", "kernel", "time", "vs numpy"], rows)


def old_vs_new(options) -> None:
    """Section 3 (run first: the other sections' programs do not share its machine time)."""
    old = None if options.skip_old else _run_old_kernels(_checkout(options.baseline))
    rows = []
    for threads in (None, 16, 64):
        new = _run_old_kernels(REPO, threads)
        for k, v in new.items():
            ratio = "-" if old is None else f"{old[k] / v:.2f}x"
            base = "-" if old is None else f"{old[k] * 1e3:.1f} ms"
            label = f"{k}, threads={threads or 'auto (256)'}"
            rows.append((label, base, f"{v * 1e3:.1f} ms", ratio))
    table(
        f"3. Tile16 kernels on wgpu: the old layout ({options.baseline}: 256 threads, an "
        "element each) vs the new",
        ["kernel (new layout's threads)", "old", "new", "old/new (>1: new faster)"],
        rows,
    )


if __name__ == "__main__":
    main()
