"""The wgpu backend, measured (on lavapipe the device numbers are informational).

1. Launch overhead: a cached trivial kernel launched through qnb's launcher against a raw
   wgpu-py dispatch of the *same* WGSL with the *same* buffers (ratio; aim ≤ 1.25×), with
   device arrays (no copies) and with NumPy arrays (copy in, copy back).
2. Warm start vs cold: time to first result of every suite kernel on wgpu in a fresh
   process with an empty cache directory (cold) and with the directory it filled (warm).
3. Tiled matmul and batched Cholesky on the adapter vs the cpu backend vs NumPy.
4. A kernel that holds no tile (``out[i] = a[i] * 2 + 1``, a program per element): run a
   program per invocation, 64 to a workgroup, against the same IR rendered a workgroup per
   program (the layout every kernel had before), side by side (ratio).

Run: ``python benchmarks/bench_wgpu.py`` (``main()`` prints the tables).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks._timing import median_time, table  # noqa: E402
from qnb import dtypes as D  # noqa: E402
from qnb import ir  # noqa: E402

I32 = ir.scalar(D.i32)
L = ir.Loc(0, 1)


def _timeit(fn, repeat=200, warmup=5):
    return median_time(fn, repeat, warmup)


def _c(value, dtype=D.i32):
    return ir.Const(ir.scalar(dtype), L, value)


def _add(x, y):
    return ir.Binary(x.type, L, "add", x, y)


def _mul(x, y):
    return ir.Binary(x.type, L, "mul", x, y)


def _view(param, batch=None):
    return ir.ArrayView(param.name, param.type, batch)


def _load(param, row, col, batch=None):
    t = ir.tile(param.type.dtype)
    zero = ir.TileFill(t, L, "full", _c(0, param.type.dtype))
    return ir.LoadWindow(
        t, L, zero, _view(param, batch), row, _add(row, _c(16)), col, _add(col, _c(16))
    )


def _store(value, param, row, col, batch=None):
    return ir.StoreWindow(
        L, value, _view(param, batch), row, _add(row, _c(16)), col, _add(col, _c(16))
    )


def trivial_kernel() -> ir.KernelIR:
    """x[0:16, 0:16] += 1 (one program)."""
    x = ir.Param("x", ir.Type("array", D.f32, 2))
    t = ir.Var(ir.tile(D.f32), L, "t")
    body = [
        ir.Assign(L, "t", _load(x, _c(0), _c(0))),
        _store(_add(t, _c(1.0, D.f32)), x, _c(0), _c(0)),
    ]
    return ir.KernelIR("trivial", [x], body, {"t": t.type}, [ir.Unit("trivial")])


def matmul_kernel() -> ir.KernelIR:
    """c = a @ b, one program per 16×16 tile of c, looping over k tiles."""
    a, b, c = (ir.Param(n, ir.Type("array", D.f32, 2)) for n in "abc")
    row = _mul(ir.ProgramId(I32, L, "id", 0), _c(16))
    col = _mul(ir.ProgramId(I32, L, "id", 1), _c(16))
    k = ir.Var(I32, L, "k")
    acc = ir.Var(ir.tile(D.f32), L, "acc")
    body = [
        ir.Assign(L, "acc", ir.TileFill(acc.type, L, "full", _c(0.0, D.f32))),
        ir.For(
            L,
            "k",
            _c(0),
            ir.ArrayDim(I32, L, "a", 1),
            _c(16),
            [
                ir.Assign(
                    L, "acc", ir.Matmul(acc.type, L, _load(a, row, k), _load(b, k, col), acc)
                ),
            ],
        ),
        _store(acc, c, row, col),
    ]
    return ir.KernelIR("matmul", [a, b, c], body, {"acc": acc.type, "k": I32}, [ir.Unit("matmul")])


def cholesky_kernel() -> ir.KernelIR:
    """out[b] = cholesky(a[b]) for each batch b (one program each)."""
    a, out = (ir.Param(n, ir.Type("array", D.f32, 3)) for n in ("a", "out"))
    b = ir.ProgramId(I32, L, "id", 0)
    t = ir.tile(D.f32)
    chol = ir.Cholesky(t, L, _load(a, _c(0), _c(0), b), _c(1e-6, D.f32))
    body = [_store(chol, out, _c(0), _c(0), b)]
    return ir.KernelIR("batched_cholesky", [a, out], body, {}, [ir.Unit("batched_cholesky")])


def map_kernel() -> ir.KernelIR:
    """out[i] = a[i] * 2 + 1, a program per element: every value is a scalar."""
    a, out = (ir.Param(n, ir.Type("array", D.f32, 1)) for n in ("a", "out"))
    i = ir.ProgramId(I32, L, "id", 0)
    value = ir.ArrayLoad(ir.scalar(D.f32), L, _view(a), [i])
    result = _add(_mul(value, _c(2.0, D.f32)), _c(1.0, D.f32))
    body = [ir.ArrayStore(L, _view(out), [i], result)]
    return ir.KernelIR("map", [a, out], body, {}, [ir.Unit("map")])


# --------------------------------------------------------------------------- 1. launch overhead


def launch_overhead(rounds=5, repeat=100):
    """qnb's launch against raw wgpu-py's, ``rounds`` interleaved rounds of ``repeat``
    timed calls (a fifth of that for the batches of 50 launches)."""
    from qnb.backends import get
    from qnb.backends.base import Options

    backend = get("wgpu")
    dev = backend._dev()
    wgpu, device, queue = dev.wgpu, dev.device, dev.queue
    artifact = backend.compile(trivial_kernel(), Options())
    launcher = backend.load(artifact)
    host = np.zeros((16, 16), np.float32)
    x = backend.to_device(host)

    # The raw path: its own module, layout and pipeline from the same WGSL; the same
    # storage buffer and a uniform buffer with the same words, bound once.
    module = device.create_shader_module(code=artifact.text["wgsl"])
    entries = [
        {
            "binding": 0,
            "visibility": wgpu.ShaderStage.COMPUTE,
            "buffer": {"type": wgpu.BufferBindingType.storage},
        },
        {
            "binding": 1,
            "visibility": wgpu.ShaderStage.COMPUTE,
            "buffer": {"type": wgpu.BufferBindingType.uniform},
        },
    ]
    group_layout = device.create_bind_group_layout(entries=entries)
    pipeline = device.create_compute_pipeline(
        layout=device.create_pipeline_layout(bind_group_layouts=[group_layout]),
        compute={"module": module, "entry_point": "main"},
    )
    # The parameter words as qnb lays them out: the array's dims, then the launch grid.
    layout = artifact.text["layout"]
    words = np.zeros(max(4, (layout["words"] + 3) // 4 * 4), np.int32)
    for dim in layout["dims"]:
        words[dim["slot"]] = host.shape[dim["axis"]]
    words[layout["grid_slot"] : layout["grid_slot"] + 3] = 1
    uniform = device.create_buffer_with_data(
        data=words, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
    )

    def raw_bind(buffer):
        return device.create_bind_group(
            layout=group_layout,
            entries=[
                {"binding": 0, "resource": {"buffer": buffer, "offset": 0, "size": buffer.size}},
                {"binding": 1, "resource": {"buffer": uniform, "offset": 0, "size": words.nbytes}},
            ],
        )

    raw_group = raw_bind(x.buffer)

    # The baseline must compute what qnb computes: one launch of each on equal data.
    start = np.arange(256, dtype=np.float32).reshape(16, 16)
    want = start.copy()
    launcher((1, 1, 1), [want])
    checked = backend.to_device(start).buffer
    raw_dispatch_once = raw_bind(checked)

    def raw_dispatch(group):
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(1, 1, 1)
        compute.end()
        queue.submit([encoder.finish()])

    raw_dispatch(raw_dispatch_once)
    got = np.frombuffer(queue.read_buffer(checked, 0, start.nbytes), np.float32)
    if not np.array_equal(got.reshape(16, 16), want):
        raise AssertionError("the raw wgpu-py baseline does not compute what qnb does")

    # on_submitted_work_done_sync is broken in wgpu-py 0.32 (callback signature
    # mismatch with wgpu-native 29); reading 4 bytes back waits for all queued work.
    fence = backend.to_device(np.zeros(1, np.float32)).buffer

    def sync():
        queue.read_buffer(fence, 0, 4)

    batch = 50

    def qnb_batch():
        for _ in range(batch):
            launcher((1, 1, 1), [x])
        sync()

    def raw_batch():
        for _ in range(batch):
            raw_dispatch(raw_group)
        sync()

    # NumPy arguments: copy in, dispatch, copy back (the raw path does the same work).
    staging = backend.to_device(host).buffer
    raw_staging_group = raw_bind(staging)

    def qnb_numpy():
        launcher((1, 1, 1), [host])

    def raw_numpy():
        queue.write_buffer(staging, 0, host)
        raw_dispatch(raw_staging_group)
        result = queue.read_buffer(staging, 0, host.nbytes)
        host[...] = np.frombuffer(result, np.float32).reshape(16, 16)

    rows = []
    for label, ours, raw, per in (
        ("device array, 50 launches + 1 sync", qnb_batch, raw_batch, batch),
        (
            "device array, launch + sync",
            lambda: (launcher((1, 1, 1), [x]), sync()),
            lambda: (raw_dispatch(raw_group), sync()),
            1,
        ),
        ("NumPy array, copy in + launch + copy back", qnb_numpy, raw_numpy, 1),
    ):
        # Interleave the two so drift (lavapipe's threads, the CPU clock) hits both.
        t_ours, t_raw = [], []
        for _ in range(rounds):
            t_ours.append(_timeit(ours, repeat=max(1, repeat // 5) if per > 1 else repeat) / per)
            t_raw.append(_timeit(raw, repeat=max(1, repeat // 5) if per > 1 else repeat) / per)
        ours_us, raw_us = statistics.median(t_ours) * 1e6, statistics.median(t_raw) * 1e6
        rows.append((label, f"{ours_us:.1f}", f"{raw_us:.1f}", f"{ours_us / raw_us:.2f}x"))
    table(
        f"Launch overhead, trivial kernel on {backend.info().device} (µs per launch)",
        ("case", "qnb", "raw wgpu-py", "ratio"),
        rows,
    )
    return rows


# --------------------------------------------------------------------------- 2. warm vs cold


_SUITE_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {repo!r})
import numpy as np, qnb
from tests import suite
count = 0
with qnb.backend("wgpu"):
    for case in suite.CASES:
        dtype = next(d for d in case.dtypes if np.dtype(d) != np.float64)
        grid, args = case.make(np.random.default_rng(0), dtype)
        case.kernel[grid](*args)
        count += 1
outcomes = [e.outcome for e in qnb.cache.events()]
print(json.dumps({{"seconds": time.perf_counter() - t0, "kernels": count,
                   "outcomes": {{o: outcomes.count(o) for o in set(outcomes)}}}}))
"""


def warm_vs_cold():
    try:
        from tests import suite  # noqa: F401
    except Exception as exc:
        print(f"\nWarm vs cold: skipped (the kernel suite is not importable: {exc})")
        return None
    runs: dict[str, list] = {"cold (empty cache)": [], "warm (disk hits)": []}
    outcomes: dict[str, str] = {}
    for _ in range(3):  # alternate fresh cold/warm pairs; report medians (shared CPUs are noisy)
        env = dict(os.environ, QNB_CACHE_DIR=tempfile.mkdtemp(prefix="qnb-bench-wgpu-"))
        env.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp())
        for label in runs:
            out = subprocess.run(
                [sys.executable, "-c", _SUITE_CHILD.format(repo=str(REPO))],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if out.returncode:
                print(f"\nWarm vs cold: the child failed:\n{out.stderr[-2000:]}")
                return None
            result = json.loads(out.stdout.strip().splitlines()[-1])
            runs[label].append(result["seconds"])
            outcomes[label] = ", ".join(f"{k}: {v}" for k, v in sorted(result["outcomes"].items()))
    rows = [
        (label, f"{statistics.median(t):.2f}", f"{min(t):.2f}", outcomes[label])
        for label, t in runs.items()
    ]
    table(
        "Suite (23 kernels, first dtype) on wgpu in a fresh process: time to all first "
        "results, s, incl. imports and device start; the artifact holds WGSL, so a warm "
        "start skips lowering and rendering but still builds modules and pipelines",
        ("run", "median", "min", "cache events"),
        rows,
    )
    return rows


# --------------------------------------------------------------------------- 3. device work


def device_work():
    from qnb.backends import get
    from qnb.backends.base import Options

    wgpu_backend = get("wgpu")
    try:
        cpu_backend = get("cpu")
        cpu_ok = cpu_backend.info().available
    except Exception:
        cpu_ok = False
    rng = np.random.default_rng(0)
    rows = []

    def run_on(backend, kernel, grid, args):
        launcher = backend.load(backend.compile(kernel, Options()))
        launcher(grid, args)  # warm-up (lavapipe JITs at the first dispatch)
        return _timeit(lambda: launcher(grid, args), repeat=3, warmup=0)

    for n in (64, 128):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.zeros((n, n), np.float32)
        grid = (n // 16, n // 16, 1)
        t_wgpu = run_on(wgpu_backend, matmul_kernel(), grid, [a, b, c])
        err = float(np.abs(c - a @ b).max())
        t_cpu = run_on(cpu_backend, matmul_kernel(), grid, [a, b, c.copy()]) if cpu_ok else None
        t_np = _timeit(lambda a=a, b=b: a @ b, repeat=20)
        rows.append(
            (
                f"matmul {n}x{n} f32",
                f"{t_wgpu * 1e3:.1f}",
                f"{t_cpu * 1e3:.1f}" if t_cpu else "n/a",
                f"{t_np * 1e3:.3f}",
                f"{err:.1e}",
            )
        )
    for batch in (64, 512):
        x = rng.standard_normal((batch, 16, 16), dtype=np.float32)
        spd = (x @ x.transpose(0, 2, 1) + 16 * np.eye(16, dtype=np.float32)).astype(np.float32)
        out = np.zeros_like(spd)
        t_wgpu = run_on(wgpu_backend, cholesky_kernel(), (batch, 1, 1), [spd, out])
        err = float(np.abs(out - np.linalg.cholesky(spd)).max())
        t_cpu = (
            run_on(cpu_backend, cholesky_kernel(), (batch, 1, 1), [spd, out.copy()])
            if cpu_ok
            else None
        )
        t_np = _timeit(lambda spd=spd: np.linalg.cholesky(spd), repeat=20)
        rows.append(
            (
                f"cholesky {batch}x16x16 f32",
                f"{t_wgpu * 1e3:.1f}",
                f"{t_cpu * 1e3:.1f}" if t_cpu else "n/a",
                f"{t_np * 1e3:.3f}",
                f"{err:.1e}",
            )
        )
    table(
        f"Device work (ms, median; NumPy arrays in and out) on {wgpu_backend.info().device}",
        ("kernel", "wgpu", "cpu backend", "NumPy", "max err (wgpu)"),
        rows,
    )
    return rows


# --------------------------------------------------------------------------- 4. scalar programs


def solo_layout(n=1 << 16, repeat=5):
    """A kernel without tiles, a program per invocation vs a workgroup per program."""
    from unittest import mock

    from qnb.backends import get
    from qnb.backends.base import Options

    backend = get("wgpu")
    a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    want = a * 2 + 1
    launchers = {"program per invocation": backend.load(backend.compile(map_kernel(), Options()))}
    with mock.patch.object(ir, "holds_tiles", lambda kernel: True):  # the block layout
        block = backend.load(backend.compile(map_kernel(), Options()))
        launchers["workgroup per program"] = block
    times = {}
    for launcher in launchers.values():
        out = np.full(n, np.nan, np.float32)
        launcher((n, 1, 1), [a, out])  # warm-up, and the check
        np.testing.assert_array_equal(out, want)
    for _ in range(repeat):  # alternate the two, so that drift hits both alike
        for name, launcher in launchers.items():
            start = time.perf_counter()
            launcher((n, 1, 1), [a, out])
            times.setdefault(name, []).append(time.perf_counter() - start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["workgroup per program"]
    rows = [(name, f"{t * 1e3:.2f}", f"{t / base:.3f}") for name, t in medians.items()]
    table(
        f"out[i] = a[i] * 2 + 1 over {n} programs (ms, median of {repeat}; "
        f"ratio to a workgroup per program) on {backend.info().device}",
        ("layout", "ms", "ratio"),
        rows,
    )
    return medians


def main() -> None:
    from qnb.backends import get

    info = get("wgpu").info()
    if not info.available:
        print(f"wgpu backend unavailable: {info.reason}")
        return
    launch_overhead()
    device_work()
    solo_layout()
    warm_vs_cold()


if __name__ == "__main__":
    main()
