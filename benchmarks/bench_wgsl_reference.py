"""qnb's generated WGSL beside WGSL written by hand for the same work, on the same wgpu
device (lavapipe here), the same device buffers, timed the same way (dispatch, then a
4-byte read back that waits for the queue), interleaved rounds, median [range]:

1. matmul 512³ f32. The hand-written kernel is register-tiled: a workgroup of 16×16
   invocations computes a 64×64 block of C, each invocation a 4×4 micro-tile held in
   registers, with K streamed through workgroup memory in chunks of 16 (a 64×16 panel of
   A and a 16×64 panel of B per chunk). qnb's kernel is ``bench_layouts``' block matmul
   (``Tile[B, B]`` blocks, K stepped by ``Tile`` chunks), at 16×16 and 64×64 blocks.
2. Row softmax 4096×1024 f32. By hand: a workgroup of 256 invocations per row, each
   holding 4 elements in registers; the row's max and sum are tree reductions in
   workgroup memory, the row is read once and written once. qnb's kernels: the same
   work, ``row_softmax_vec`` (a program a row, the row held as one ``Vec[1024]``: read
   once, written once), and ``bench_cuda``'s ``wide_softmax`` (16 rows a program,
   ``Tile[16, 128]`` online over column tiles, then the normalised rows: each row read
   twice and its exponentials computed twice, a different algorithm).

The ratio is qnb ÷ hand-written (issue #33 aims at ≤ 1.5×). Both results are checked
against NumPy before anything is timed.

    python benchmarks/bench_wgsl_reference.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import qnb  # noqa: E402

MATMUL_WGSL = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: vec4<u32>;  // M, N, K

var<workgroup> panel_a: array<f32, 1024>;  // 64 rows x 16 of A
var<workgroup> panel_b: array<f32, 1024>;  // 16 rows x 64 of B

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) group: vec3<u32>,
        @builtin(local_invocation_id) local: vec3<u32>) {
  let n = dims.y;
  let k_total = dims.z;
  let row0 = group.y * 64u;
  let col0 = group.x * 64u;
  let flat = local.y * 16u + local.x;
  var acc: array<f32, 16>;
  for (var k0 = 0u; k0 < k_total; k0 += 16u) {
    for (var e = 0u; e < 4u; e++) {  // 256 invocations, 1024 elements of each panel
      let i = flat + e * 256u;
      panel_a[i] = a[(row0 + i / 16u) * k_total + k0 + i % 16u];
      panel_b[i] = b[(k0 + i / 64u) * n + col0 + i % 64u];
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 16u; kk++) {
      let a0 = panel_a[(local.y * 4u + 0u) * 16u + kk];
      let a1 = panel_a[(local.y * 4u + 1u) * 16u + kk];
      let a2 = panel_a[(local.y * 4u + 2u) * 16u + kk];
      let a3 = panel_a[(local.y * 4u + 3u) * 16u + kk];
      let b0 = panel_b[kk * 64u + local.x * 4u + 0u];
      let b1 = panel_b[kk * 64u + local.x * 4u + 1u];
      let b2 = panel_b[kk * 64u + local.x * 4u + 2u];
      let b3 = panel_b[kk * 64u + local.x * 4u + 3u];
      acc[0] += a0 * b0; acc[1] += a0 * b1; acc[2] += a0 * b2; acc[3] += a0 * b3;
      acc[4] += a1 * b0; acc[5] += a1 * b1; acc[6] += a1 * b2; acc[7] += a1 * b3;
      acc[8] += a2 * b0; acc[9] += a2 * b1; acc[10] += a2 * b2; acc[11] += a2 * b3;
      acc[12] += a3 * b0; acc[13] += a3 * b1; acc[14] += a3 * b2; acc[15] += a3 * b3;
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < 4u; r++) {
    for (var s = 0u; s < 4u; s++) {
      c[(row0 + local.y * 4u + r) * n + col0 + local.x * 4u + s] = acc[r * 4u + s];
    }
  }
}
"""

SOFTMAX_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> dims: vec4<u32>;  // rows, cols (= 1024)

var<workgroup> partial: array<f32, 256>;

fn reduce_max(lane: u32, value: f32) -> f32 {
  partial[lane] = value;
  workgroupBarrier();
  for (var half = 128u; half > 0u; half /= 2u) {
    if (lane < half) { partial[lane] = max(partial[lane], partial[lane + half]); }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();
  return result;
}

fn reduce_sum(lane: u32, value: f32) -> f32 {
  partial[lane] = value;
  workgroupBarrier();
  for (var half = 128u; half > 0u; half /= 2u) {
    if (lane < half) { partial[lane] = partial[lane] + partial[lane + half]; }
    workgroupBarrier();
  }
  let result = partial[0];
  workgroupBarrier();
  return result;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) group: vec3<u32>,
        @builtin(local_invocation_id) local: vec3<u32>) {
  let base = group.x * dims.y;
  let lane = local.x;
  // 4 elements a lane, 256 apart (consecutive lanes read consecutive words)
  let v0 = x[base + lane];
  let v1 = x[base + lane + 256u];
  let v2 = x[base + lane + 512u];
  let v3 = x[base + lane + 768u];
  let m = reduce_max(lane, max(max(v0, v1), max(v2, v3)));
  let e0 = exp(v0 - m);
  let e1 = exp(v1 - m);
  let e2 = exp(v2 - m);
  let e3 = exp(v3 - m);
  let total = reduce_sum(lane, (e0 + e1) + (e2 + e3));
  y[base + lane] = e0 / total;
  y[base + lane + 256u] = e1 / total;
  y[base + lane + 512u] = e2 / total;
  y[base + lane + 768u] = e3 / total;
}
"""


class HandWritten:
    """A hand-written WGSL kernel dispatched through wgpu-py on qnb's own device: its
    storage buffers (qnb device arrays, bound in order, the last read-write) and a
    uniform of four u32 words."""

    def __init__(self, dev, code: str, arrays, words):
        wgpu, device = dev.wgpu, dev.device
        self.device, self.queue = device, dev.queue
        storage = wgpu.BufferBindingType
        entries = [
            {
                "binding": i,
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {
                    "type": storage.storage if i == len(arrays) - 1 else storage.read_only_storage
                },
            }
            for i in range(len(arrays))
        ]
        entries.append(
            {
                "binding": len(arrays),
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": storage.uniform},
            }
        )
        group_layout = device.create_bind_group_layout(entries=entries)
        self.pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=[group_layout]),
            compute={"module": device.create_shader_module(code=code), "entry_point": "main"},
        )
        uniform = device.create_buffer_with_data(
            data=np.asarray(words, np.uint32), usage=wgpu.BufferUsage.UNIFORM
        )
        buffers = [array.buffer for array in arrays] + [uniform]
        self.group = device.create_bind_group(
            layout=group_layout,
            entries=[
                {"binding": i, "resource": {"buffer": buf, "offset": 0, "size": buf.size}}
                for i, buf in enumerate(buffers)
            ],
        )

    def __call__(self, groups) -> None:
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(self.pipeline)
        compute.set_bind_group(0, self.group)
        compute.dispatch_workgroups(*groups)
        compute.end()
        self.queue.submit([encoder.finish()])


def _paired(named: dict, rounds: int) -> dict:
    """Each callable's seconds over ``rounds`` interleaved rounds (after one warm-up call
    of each: lavapipe compiles a pipeline at its first dispatch)."""
    for fn in named.values():
        fn()
    times = {name: [] for name in named}
    for _ in range(rounds):
        for name, fn in named.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def _row(label, seconds, reference):
    median = statistics.median(seconds)
    ratios = [s / r for s, r in zip(seconds, reference)]
    return (
        label,
        f"{median * 1e3:.1f} ms",
        f"{median / statistics.median(reference):.2f}x",
        f"[{min(ratios):.2f}-{max(ratios):.2f}]",
    )


def matmul(backend, n=512, rounds=3):
    """Rows of section 1: the hand-written kernel, then qnb at 16×16 and 64×64 blocks."""
    from benchmarks.bench_layouts import shaped_kernels

    dev = backend._dev()
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    want = a.astype(np.float64) @ b.astype(np.float64)
    da, db = backend.to_device(a), backend.to_device(b)
    fence = backend.to_device(np.zeros(1, np.float32)).buffer
    outs = {name: backend.to_device(np.full((n, n), np.nan, np.float32)) for name in "hqQ"}
    hand = HandWritten(dev, MATMUL_WGSL, [da, db, outs["h"]], [n, n, n, 0])
    kernel, _ = shaped_kernels()

    def sync():
        dev.queue.read_buffer(fence, 0, 4)

    runs = {
        "hand-written, 4x4 registers, 64x64 workgroup": lambda: (hand((n // 64, n // 64, 1)), sync()),
        "qnb Tile[16, 16] blocks": lambda: (kernel[n // 16, n // 16](da, db, outs["q"], 16, 16, 16), sync()),
        "qnb Tile[64, 64] blocks": lambda: (kernel[n // 64, n // 64](da, db, outs["Q"], 64, 64, 32), sync()),
    }  # fmt: skip
    for fn in runs.values():  # every result right before any is timed
        fn()
    for out in outs.values():
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-3)
    times = _paired(runs, rounds)
    reference = times[next(iter(runs))]
    return [_row(f"matmul {n}^3: {name}", t, reference) for name, t in times.items()]


def _row_softmax_vec(cols):
    """A program a row of ``cols`` (a power of two) columns, held as one ``Vec``."""

    @qnb.kernel
    def row_softmax_vec(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        row = qnb.program_id(0)
        v = qnb.Vec[cols].load_row(x, row, 0)
        e = qnb.exp(v - v.max())
        (e / e.sum()).store_row(y, row, 0)

    return row_softmax_vec


def softmax(backend, rows=4096, cols=1024, rounds=3):
    """Rows of section 2: the hand-written kernel, then qnb's row_softmax_vec (the same
    work) and wide_softmax (online over column tiles)."""
    from benchmarks.bench_cuda import _namespace, _softmax_rows

    dev = backend._dev()
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32) * 3
    want = _softmax_rows(np, x.astype(np.float64), np.empty(x.shape))
    dx = backend.to_device(x)
    fence = backend.to_device(np.zeros(1, np.float32)).buffer
    outs = {name: backend.to_device(np.full_like(x, np.nan)) for name in "hvq"}
    hand = HandWritten(dev, SOFTMAX_WGSL, [dx, outs["h"]], [rows, cols, 0, 0])
    kernel = _namespace()["wide_softmax"]
    whole = _row_softmax_vec(cols)

    def sync():
        dev.queue.read_buffer(fence, 0, 4)

    runs = {
        "hand-written, workgroup per row": lambda: (hand((rows, 1, 1)), sync()),
        f"qnb row_softmax_vec, Vec[{cols}] a row": lambda: (whole[rows](dx, outs["v"]), sync()),
        "qnb wide_softmax, Tile[16, 128]": lambda: (kernel[rows // 16](dx, outs["q"]), sync()),
    }
    for fn in runs.values():
        fn()
    for out in outs.values():
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-7)
    times = _paired(runs, rounds)
    reference = times[next(iter(runs))]
    return [_row(f"softmax {rows}x{cols}: {name}", t, reference) for name, t in times.items()]


def main(argv=None) -> list:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args(argv)
    from benchmarks._timing import table
    from qnb.backends import get

    info = {b.name: b for b in qnb.backends()}["wgpu"]
    if not info.available:
        print(f"bench_wgsl_reference: skipped, the wgpu backend is unavailable: {info.reason}")
        return []
    backend = get("wgpu")
    with qnb.backend("wgpu"):
        rows = matmul(backend, rounds=options.rounds) + softmax(backend, rounds=options.rounds)
    table(
        f"qnb's WGSL beside hand-written WGSL on {info.device} (ratio to hand-written)",
        ["kernel", "median", "ratio", "range"],
        rows,
    )
    return rows


if __name__ == "__main__":
    main()
