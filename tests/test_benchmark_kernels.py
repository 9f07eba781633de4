"""The kernels ``benchmarks/bench_cuda.py`` times on a GPU compute the right thing, on
every backend that runs here (GPU time is scarce: a wrong kernel must not reach it)."""

import sys
import time

import numpy as np
import pytest

import qnb
from benchmarks import bench_cuda
from tests.helpers import skip_unless_dtype_runs


@pytest.fixture(scope="module")
def kernels():
    return bench_cuda._namespace()


@pytest.mark.parametrize(("name", "per_program"), [("tile_matmul", 16), ("block_matmul", 32)])
def test_matmul_kernels(backend_name, kernels, name, per_program):
    skip_unless_dtype_runs(backend_name, np.float16)
    rng = np.random.default_rng(0)
    n = 96
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    c = np.full((n, n), np.nan, np.float32)
    with qnb.backend(backend_name):
        kernels[name][(n // per_program, n // per_program)](a, b, c)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_batched_cholesky_and_add_one(backend_name, kernels):
    rng = np.random.default_rng(1)
    m = rng.standard_normal((8, 16, 16)).astype(np.float32)
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16, dtype=np.float32)
    out = np.full_like(spd, np.nan)
    x = rng.standard_normal((16, 16)).astype(np.float32)
    y = x.copy()
    with qnb.backend(backend_name):
        kernels["batched_cholesky"][8](spd, out)
        kernels["add_one"](y)
    np.testing.assert_allclose(out, np.linalg.cholesky(spd), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y, x + 1, rtol=1e-6)


def test_bf16_matmul(backend_name, kernels):
    import ml_dtypes

    rng = np.random.default_rng(5)
    n = 48
    a, b = (rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16) for _ in range(2))
    c = np.full((n, n), np.nan, np.float32)
    if backend_name == "wgpu":  # WGSL has no bf16: refused at the user's line, said so
        with qnb.backend("wgpu"), pytest.raises(qnb.BackendError, match="WGSL has no bf16"):
            kernels["tile_matmul_bf16"][(n // 16, n // 16)](a, b, c)
        return
    with qnb.backend(backend_name):
        kernels["tile_matmul_bf16"][(n // 16, n // 16)](a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_wide_softmax_and_its_cupy_baseline(backend_name, kernels):
    # 3 column tiles of 128: the online max/sum carries across tiles
    x = np.random.default_rng(6).standard_normal((32, 384)).astype(np.float32) * 4
    y = np.full_like(x, np.nan)
    with qnb.backend(backend_name):
        kernels["wide_softmax"][2](x, y)
    want = bench_cuda._softmax_rows(np, x.astype(np.float64), np.empty(x.shape))
    np.testing.assert_allclose(y, want, rtol=2e-5, atol=1e-7)
    x64 = x.astype(np.float64)  # the baseline itself, against the definition
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(want, e / e.sum(axis=1, keepdims=True), rtol=1e-12)


def test_causal_attention_and_its_cupy_baseline(backend_name, kernels):
    rng = np.random.default_rng(7)
    heads, seq, d = 2, 192, 64  # 3 query blocks: programs loop 1, 2 and 3 key blocks
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float32) for _ in range(3))
    scale = np.float32(1 / 8)
    out = np.full_like(q, np.nan)
    with qnb.backend(backend_name):
        kernels["causal_attention"][seq // 64, heads](q, k, v, out, scale)
    mask = np.triu(np.full((seq, seq), -np.inf), 1)
    wide = [x.astype(np.float64) for x in (q, k, v)]
    scores, want = np.empty((heads, seq, seq)), np.empty(q.shape)
    bench_cuda._attention_reference(np, *wide, 1 / 8, mask, scores, want)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    for h in range(heads):  # the baseline itself, against the definition, row by row
        for i in (0, 63, 64, 191):
            s = wide[0][h, i] @ wide[1][h, : i + 1].T / 8
            p = np.exp(s - s.max())
            np.testing.assert_allclose(want[h, i], p @ wide[2][h, : i + 1] / p.sum(), rtol=1e-9)


# The layout probes: hand-written CUDA that bench_cuda times beside the qnb matmuls.


def test_layout_probes_compile_with_nvrtc():
    from qnb.backends import cuda
    from qnb.errors import BackendError

    try:
        cuda.nvrtc_version()
        cuda.include_dirs()
    except BackendError as exc:
        pytest.skip(f"NVRTC toolchain missing: {exc.message}")
    for arch in ("sm_80", "sm_90"):
        cubin, ptx, _log = cuda.nvrtc_compile(bench_cuda.PROBES, arch, name="probes.cu")
        assert cubin[:4] == b"\x7fELF"
        for name in [*bench_cuda.PROBE_KERNELS, bench_cuda.CHOLESKY_PROBE]:
            assert f".entry {name}(" in ptx
        assert "wmma.mma.sync" in ptx  # tensor cores


@pytest.mark.parametrize("name", list(bench_cuda.PROBE_KERNELS))
def test_layout_probes_compute_the_product_on_cuda_host(name):
    # cuda-host runs the probe's CUDA C++ with its WMMA emulation, on a C that is not
    # square and a grid whose last block has spare warps.
    from qnb.backends.base import Artifact
    from tests.conftest import require_backend
    from tests.cuda_host.backend import ONE_PROGRAM, CudaHostBackend

    require_backend("cuda-host")
    source = {"source": bench_cuda.PROBES, "entry": name, "abi": bench_cuda.PROBE_ABI}
    source.update(ONE_PROGRAM)
    launch = CudaHostBackend().load(Artifact(text=source))
    rng = np.random.default_rng(2)
    m, k, n = 64, 48, 96
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    launch((bench_cuda.probe_blocks(name, m, n), 1, 1), [a, b, c])
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)


def test_cholesky_probe_factors_on_cuda_host():
    from qnb.backends.base import Artifact
    from tests.conftest import require_backend
    from tests.cuda_host.backend import ONE_PROGRAM, CudaHostBackend

    require_backend("cuda-host")
    source = {
        "source": bench_cuda.PROBES,
        "entry": bench_cuda.CHOLESKY_PROBE,
        "abi": bench_cuda.CHOLESKY_PROBE_ABI,
        **ONE_PROGRAM,
    }
    launch = CudaHostBackend().load(Artifact(text=source))
    rng = np.random.default_rng(3)
    batch = 11  # two blocks of 8 warps: the second has 5 spare warps
    m = rng.standard_normal((batch, 16, 16)).astype(np.float32)
    spd = m @ m.transpose(0, 2, 1) + 16 * np.eye(16, dtype=np.float32)
    out = np.full_like(spd, np.nan)
    launch((2, 1, 1), [spd, out])
    np.testing.assert_allclose(out, np.linalg.cholesky(spd), rtol=1e-4, atol=1e-5)


def test_the_wgpu_launch_baseline_matches_qnb_and_runs():
    # bench_wgpu's raw wgpu-py dispatch builds its own uniform words from the artifact's
    # layout; it checks itself against qnb before timing (a layout change once broke it).
    from benchmarks import bench_wgpu
    from tests.conftest import require_backend

    require_backend("wgpu")
    rows = bench_wgpu.launch_overhead(rounds=1, repeat=5)  # it runs; make bench times it
    assert len(rows) == 3 and all(float(row[3].rstrip("x")) > 0 for row in rows)


@pytest.mark.parametrize("layout", ["solo", "block"])
def test_the_kernel_without_tiles_in_both_layouts(gpu_backend_name, layout, monkeypatch):
    # bench_wgpu and bench_cuda time map_kernel as qnb renders it (a thread per program)
    # against the same IR forced into the block layout: both must compute a * 2 + 1.
    from benchmarks import bench_wgpu
    from qnb import ir
    from qnb.backends import get
    from qnb.backends.base import Options

    backend = get(gpu_backend_name)
    if layout == "block":
        monkeypatch.setattr(ir, "holds_tiles", lambda kernel: True)
    artifact = backend.compile(bench_wgpu.map_kernel(), Options())
    source = artifact.text.get("source") or artifact.text["wgsl"]
    solo = "one thread is one program" in source or "one invocation is one program" in source
    assert solo == (layout == "solo")
    n = 1000  # not a multiple of any workgroup/block size
    a = np.random.default_rng(4).standard_normal(n + 8).astype(np.float32)
    out = np.full(n + 8, np.nan, np.float32)
    backend.load(artifact)((n, 1, 1), [a, out])
    np.testing.assert_array_equal(out[:n], a[:n] * 2 + 1)
    assert np.isnan(out[n:]).all()  # no program past the grid ran


def test_the_wgpu_layout_benchmark_runs():
    from benchmarks import bench_wgpu
    from tests.conftest import require_backend

    require_backend("wgpu")
    medians = bench_wgpu.solo_layout(n=300, repeat=1)  # it checks both results itself
    assert set(medians) == {"program per invocation", "workgroup per program"}


def test_the_cache_benchmark_runs(tmp_path):
    # bench_cache drives qnb's internals (key components, lowering) directly; an internal
    # change once broke it unseen. Its warm-vs-cold step, on cpu, must still run.
    from benchmarks import bench_cache

    (tmp_path / "cache_suite.py").write_text(bench_cache.suite_source())
    result = bench_cache.qnb_side("cpu", str(tmp_path))
    assert result["kernels"] >= 20 and result["cold"] > 0 and result["warm"] > 0


def test_bench_peers_workloads_agree_with_numpy():
    """Every workload of ``benchmarks/bench_peers.py`` (what ``make bench`` runs) computes
    NumPy's answer on the cpu backend; each peer that is installed is checked the same way,
    but Triton's interpreter, which takes about 40 s for the table's shapes: the next test
    checks its kernels, through the same runners, on small ones."""
    import importlib.util

    from benchmarks import bench_peers

    names = [w.name for w in bench_peers.workloads()]
    assert len(names) == 9
    with qnb.backend("cpu"):
        for workload in bench_peers.workloads():
            for tool, setup in workload.runners.items():
                if not tool.startswith("triton"):
                    assert workload.check(setup()()), (workload.name, tool)
    if importlib.util.find_spec("triton") is not None:
        # the README's "not run" for Triton: the two that would take minutes a call
        capped = [
            name
            for name, workload in zip(names, bench_peers.workloads())
            if not any(tool.startswith("triton") for tool in workload.runners)
        ]
        # the tile-free form, the Cholesky; and the three rows Triton has no kernel for
        assert capped == [names[2], names[5], names[6], names[7], names[8]]


def test_bench_peers_small_workloads_agree_with_numpy_on_every_tool():
    """The same workloads on small shapes, where no interpreter is capped: every tool
    installed here, qnb included, computes NumPy's answer, and where triton is importable
    its interpreter runs the first six on NumPy arrays (no PyTorch) and is checked too."""
    import importlib.util

    from benchmarks import bench_peers

    triton_here = importlib.util.find_spec("triton") is not None
    small = bench_peers.workloads(small=True)
    assert len(small) == 9
    with qnb.backend("cpu"):
        for workload in small:
            tools = set(workload.runners)
            assert "qnb" in tools
            with_triton = triton_here and workload in small[:6]
            assert any(tool.startswith("triton") for tool in tools) == with_triton, workload.name
            for tool, setup in workload.runners.items():
                assert workload.check(setup()()), (workload.name, tool)


def test_make_bench_discovers_bench_peers():
    from benchmarks import run_all

    assert "peers" in run_all.discover()


def test_make_bench_runs_each_module_without_its_own_arguments(monkeypatch, capsys):
    """``python -m benchmarks warm cpu_launch`` must not hand ``["warm", "cpu_launch"]`` to
    the modules, which read ``sys.argv`` for their own options (bench_warm took "warm" for a
    backend's name), and the runner's own arguments are back afterwards."""
    import types

    from benchmarks import run_all

    seen = []
    fake = types.ModuleType("benchmarks.bench_argv_probe")
    fake.main = lambda: seen.append(list(sys.argv))
    monkeypatch.setitem(sys.modules, "benchmarks.bench_argv_probe", fake)
    monkeypatch.setattr(sys, "argv", ["-m benchmarks", "argv_probe", "warm"])
    assert run_all.run_one("argv_probe")
    assert seen == [[str(run_all.HERE / "bench_argv_probe.py")]]
    assert sys.argv == ["-m benchmarks", "argv_probe", "warm"]
    assert "--- argv_probe:" in capsys.readouterr().out


def test_the_language_benchmark_s_kernels_agree_with_numpy(backend_name):
    """``bench_language``'s histogram, argmax, two-level cumsum and layer norm, at small
    sizes, each checked against its NumPy baseline on every backend (its ``main`` asserts
    the same before timing)."""
    from benchmarks import bench_language

    with qnb.backend(backend_name):
        for name, ours, theirs, agrees in bench_language.cases(small=True):
            assert agrees(np.array(ours()), theirs()), f"{name} on {backend_name}"


def test_bench_peers_new_rows_agree_with_numpy_on_every_backend(backend_name):
    """The attention (``Tile[64, 64]`` blocks, online softmax) and the wide softmax
    (``Tile[16, 128]`` over column tiles) of ``bench_peers``, on outputs poisoned with NaN,
    against NumPy's allocating and in-place forms, at two sizes each."""
    from benchmarks import _peers_rows

    rng = np.random.default_rng(1)
    with qnb.backend(backend_name):
        for seq in (64, 192):
            qkv = rng.uniform(-1, 1, (3, seq, 64)).astype(np.float32)
            forms = _peers_rows.Attention(qkv)
            got = np.full((seq, 64), np.nan, np.float32)
            _peers_rows.causal_attention_64[seq // 64](qkv, got, forms.scale)
            np.testing.assert_allclose(got, forms.allocating(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(forms.in_place(), forms.allocating(), rtol=1e-6, atol=1e-7)
        for rows, width in ((16, 128), (48, 384)):
            x = rng.uniform(-4, 4, (rows, width)).astype(np.float32)
            got = np.full_like(x, np.nan)
            _peers_rows.wide_softmax[rows // 16](x, got)
            want = _peers_rows.softmax_allocating(x)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
            top, total = np.empty((rows, 1), np.float32), np.empty((rows, 1), np.float32)
            in_place = _peers_rows.softmax_in_place(x, np.empty_like(x), top, total)
            np.testing.assert_allclose(in_place, want, rtol=1e-6, atol=1e-8)


class SlowOnce:
    """A real callable whose first call is slow (it sleeps, as a tracing compiler's first
    call takes seconds) and whose later calls sum a small array."""

    def __init__(self, first_seconds):
        self.first_seconds = first_seconds
        self.calls = 0
        self.data = np.arange(1000.0)

    def __call__(self):
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.first_seconds)
        return self.data.sum()


def test_warm_up_leaves_a_slow_first_call_out():
    """``_steady.warm_up`` calls until the last timings agree: the slow first call is never
    one of them, so the calls per timing and the rounds see only the warm cost."""
    from benchmarks import _steady

    slow = SlowOnce(0.5)
    timings = _steady.warm_up(slow)
    assert timings[0] >= 0.5
    assert len(timings) > _steady.WINDOW
    warm = timings[-_steady.WINDOW :]
    assert max(warm) < 0.05 and max(warm) <= (1 + _steady.TOLERANCE) * min(warm)
    assert _steady.calls_a_timing(timings) > 1


def test_a_tool_whose_first_call_is_slow_is_timed_at_its_steady_cost():
    """Through ``bench_peers.measure``, the path every tool's row takes: a runner whose
    first call sleeps 1.2 s (like JAX Pallas's trivial launch) and then does NumPy's own
    work gets a ratio near 1, never the first call's thousands."""
    from benchmarks import bench_peers

    data = np.arange(4096.0)
    slow = SlowOnce(1.2)
    slow.data = data
    workload = bench_peers.Workload(
        "sum of 4,096", data.sum, lambda got: got == data.sum(), {"slow": lambda: slow}
    )
    result = bench_peers.measure(workload, repeats=3)["slow"]
    assert result.ok == "ok"
    assert result.seconds < 0.01
    median, low, high = result.ratio
    assert low <= median <= high < 20  # the first call alone would be ~10⁵× NumPy's
    assert slow.calls > 3


def test_a_peer_that_is_missing_says_not_installed(monkeypatch):
    """A peer whose package is absent gives "not installed" in the notes and no runner,
    never a number."""
    from benchmarks import bench_peers

    monkeypatch.setitem(bench_peers.DISTRIBUTIONS, "numba", "qnb-no-such-distribution")
    assert not bench_peers.installed("numba")
    notes = [line for line in bench_peers.peer_notes() if line.startswith("numba")]
    assert notes == ["numba: not installed (pip install -e '.[peers]')"]


def test_the_hand_written_wgsl_reference_runs_and_agrees():
    """bench_wgsl_reference's hand-written WGSL (register-tiled matmul, workgroup-per-row
    softmax) and qnb's kernels beside it (the row softmax also as the same work, a row
    held as one Vec): each checks its result against NumPy on
    NaN-poisoned device outputs before it is timed; small sizes here."""
    from benchmarks import bench_wgsl_reference as ref
    from qnb.backends import get
    from tests.conftest import require_backend

    require_backend("wgpu")
    with qnb.backend("wgpu"):
        rows = ref.matmul(get("wgpu"), n=128, rounds=1) + ref.softmax(
            get("wgpu"), rows=32, rounds=1
        )
    assert [row[0].split(": ")[1] for row in rows] == [
        "hand-written, 4x4 registers, 64x64 workgroup",
        "qnb Tile[16, 16] blocks",
        "qnb Tile[64, 64] blocks",
        "hand-written, workgroup per row",
        "qnb row_softmax_vec, Vec[1024] a row",
        "qnb wide_softmax, Tile[16, 128]",
    ]
    assert all(float(row[2].rstrip("x")) > 0 for row in rows)
