"""``qnb.atomic_add`` / ``atomic_max`` / ``atomic_min`` on every backend that runs them,
against NumPy (``np.add.at`` and friends on the array's starting values).

Arrays start from random non-zero values (never zeros, so an update that did not happen
or happened twice shows), indices repeat heavily (every program into one element) and
fall outside the array (skipped); integer results are exact, f32 sums within a tolerance
that fits the number of additions.
"""

import numpy as np
import pytest

import qnb
from qnb import ir
from qnb.backends.cpu import interpreter
from qnb.backends.cpu.prepared import prepare
from tests.conftest import require_backend
from tests.helpers import define

ATOMIC_BACKENDS = ("cpu", "wgpu", "cuda-host", "cuda")  # cuda: on a GPU (gpu_check.sh)
REFERENCE = {"add": np.add, "max": np.maximum, "min": np.minimum}


@pytest.fixture(params=ATOMIC_BACKENDS)
def atomic_backend(request):
    require_backend(request.param)
    return request.param


def _kernels(n, dtype, op):
    ns, _ = define(f"""
        @qnb.kernel
        def by_vec(x: qnb.Array[qnb.i32, 1], v: qnb.Array[qnb.{dtype}, 1],
                   h: qnb.Array[qnb.{dtype}, 1]):
            i = qnb.program_id(0)
            idx = qnb.Vec[{n}].load(x, i * {n}, other=-1)
            qnb.atomic_{op}(h, idx, qnb.Vec[{n}].load(v, i * {n}))

        @qnb.kernel
        def one_element(v: qnb.Array[qnb.{dtype}, 1], h: qnb.Array[qnb.{dtype}, 1]):
            i = qnb.program_id(0)
            qnb.atomic_{op}(h, 2, v[i])

        @qnb.kernel
        def by_tile(r: qnb.Array[qnb.i32, 2], c: qnb.Array[qnb.i32, 1],
                    h: qnb.Array[qnb.{dtype}, 2]):
            i = qnb.program_id(0)
            rows = qnb.Tile[4, {n}].load(r, i * 4, 0, other=-1)
            cols = qnb.Vec[{n}].load(c, 0)
            qnb.atomic_{op}(h, (rows, cols), 3)
        """)
    return ns


def _start(rng, dtype, size):
    """Random non-zero starting values (the 'poison': a missed update shows)."""
    if dtype == "i32":
        values = rng.integers(1, 50, size)
        return np.where(rng.random(size) < 0.5, -values, values).astype(np.int32)
    return (rng.random(size) + 0.5).astype(np.dtype({"f32": np.float32, "f64": np.float64}[dtype]))


def _check(got, want, dtype, op, additions):
    if dtype == "i32" or op != "add":
        np.testing.assert_array_equal(got, want)
    else:
        eps = np.finfo(got.dtype).eps
        np.testing.assert_allclose(got, want, rtol=4 * eps * additions, atol=4 * eps * additions)


def _dtypes(backend):
    return ("i32", "f32", "f64") if backend in ("cpu", "cuda", "cuda-host") else ("i32", "f32")


@pytest.mark.parametrize("op", ["add", "max", "min"])
@pytest.mark.parametrize("n", [1, 16, 128])
def test_vec_index_repeats_and_out_of_range(atomic_backend, op, n):
    for dtype in _dtypes(atomic_backend):
        rng = np.random.default_rng(n)
        ns = _kernels(n, dtype, op)
        count, bins = 1000, 7
        x = rng.integers(-3, bins + 3, count).astype(np.int32)  # some outside [0, bins)
        v = _start(rng, dtype, count)
        h = _start(rng, dtype, bins)
        want = h.copy()
        inside = (x >= 0) & (x < bins)
        REFERENCE[op].at(want, x[inside], v[inside])
        with qnb.backend(atomic_backend):
            ns["by_vec"][(count + n - 1) // n](x, v, h)
        _check(h, want, dtype, op, count)


@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_every_program_into_one_element(atomic_backend, op):
    for dtype in _dtypes(atomic_backend):
        rng = np.random.default_rng(1)
        ns = _kernels(16, dtype, op)
        v = _start(rng, dtype, 4096)
        h = _start(rng, dtype, 5)
        want = h.copy()
        want[2] = REFERENCE[op].reduce(np.concatenate([h[2:3], v]))
        with qnb.backend(atomic_backend):
            ns["one_element"][4096](v, h)
        _check(h, want, dtype, op, 4096)


@pytest.mark.parametrize("op", ["add", "max", "min"])
@pytest.mark.parametrize("n", [1, 8, 32])
def test_tuple_index_into_2d_with_broadcast_value(atomic_backend, op, n):
    rng = np.random.default_rng(n + 7)
    ns = _kernels(n, "i32", op)
    rows, cols, programs = 6, 5, 9
    r = rng.integers(-1, rows + 1, (programs * 4, n)).astype(np.int32)
    c = rng.integers(-1, cols + 1, n).astype(np.int32)
    h = _start(rng, "i32", (rows, cols))
    want = h.copy()
    rr, cc = np.broadcast_arrays(r, c[None, :])
    inside = (rr >= 0) & (rr < rows) & (cc >= 0) & (cc < cols)
    REFERENCE[op].at(want, (rr[inside], cc[inside]), 3)
    with qnb.backend(atomic_backend):
        ns["by_tile"][programs](r, c, h)
    np.testing.assert_array_equal(h, want)


COMPACT, _ = define("""
    @qnb.kernel
    def compact(x: qnb.Array[qnb.i32, 1], count: qnb.Array[qnb.i32, 1],
                out: qnb.Array[qnb.i32, 1], slots: qnb.Array[qnb.i32, 1]):
        i = qnb.program_id(0)
        v = x[i]
        if v > 0:
            slot = qnb.atomic_add(count, 0, 1)
            out[slot] = v
            slots[i] = slot
    """)


def test_scalar_index_returns_the_old_value(atomic_backend):
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 5, 700).astype(np.int32)
    x[x == 0] = 3
    count = np.array([0], np.int32)
    out = np.full(700, -99, np.int32)
    slots = np.full(700, -99, np.int32)
    with qnb.backend(atomic_backend):
        COMPACT["compact"][700](x, count, out, slots)
    kept = x > 0
    assert count[0] == kept.sum()
    # each kept element got its own slot, and the slot holds it
    assert sorted(slots[kept].tolist()) == list(range(kept.sum()))
    assert (slots[~kept] == -99).all()
    np.testing.assert_array_equal(out[slots[kept]], x[kept])
    if atomic_backend == "cpu":  # the cpu runs programs in grid order
        np.testing.assert_array_equal(out[: kept.sum()], x[kept])


OLD_OUT, _ = define("""
    @qnb.kernel
    def old_values(h: qnb.Array[qnb.f32, 1], old: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        old[i] = qnb.atomic_max(h, i % 3 - 1, qnb.f32(i))
    """)


def test_scalar_old_value_outside_the_array_is_zero():
    h = np.array([100.0, 2.0], np.float32)
    old = np.full(6, -7.0, np.float32)
    with qnb.backend("cpu"):
        OLD_OUT["old_values"][6](h, old)
    # programs 0, 3: index -1 (skipped, 0); 1, 4: index 0; 2, 5: index 1
    np.testing.assert_array_equal(old, [0, 100, 2, 0, 100, 2])
    np.testing.assert_array_equal(h, [100, 5])


@pytest.mark.parametrize("n", [1, 16, 128])
def test_cpu_launch_path_matches_the_interpreter(n):
    """The prepared launch and the interpreter (trace, qnb.check) share one implementation;
    both run the vec form in the same fixed order, to the bit."""
    ns = _kernels(n, "f32", "add")
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 40, 3000).astype(np.int32)
    v = _start(rng, "f32", 3000)
    h0 = _start(rng, "f32", 40)
    args = [x, v, h0.copy()]
    kernel_ir, _ = ns["by_vec"]._lower_for(args)
    launch = prepare(kernel_ir)
    assert launch is not None
    grid = ((3000 + n - 1) // n, 1, 1)
    stored = ir.array_uses(kernel_ir)[1]
    assert "h" in stored
    a, b = [x, v, h0.copy()], [x, v, h0.copy()]
    interpreter.run(kernel_ir, grid, a, stored)
    launch(grid, b, stored)
    np.testing.assert_array_equal(a[2], b[2])


HIST, _ = define("""
    @qnb.kernel
    def racing(x: qnb.Array[qnb.i32, 1], h: qnb.Array[qnb.i32, 1]):
        i = qnb.program_id(0)
        j = x[i]
        h[j] = h[j] + 1

    @qnb.kernel
    def atomic(x: qnb.Array[qnb.i32, 1], h: qnb.Array[qnb.i32, 1]):
        i = qnb.program_id(0)
        qnb.atomic_add(h, qnb.Vec16.load(x, i * 16, other=-1), 1)
    """)


def test_check_treats_atomics_as_race_free():
    x = np.random.default_rng(0).integers(0, 8, 256).astype(np.int32)
    h = np.zeros(8, np.int32)
    assert not qnb.check(HIST["racing"][256], x, h).ok
    report = qnb.check(HIST["atomic"][16], x, h)
    assert report.ok and report.hazards == []
    assert (h == 0).all()  # qnb.check runs on copies


BAD = {
    "f16 array": ("h: qnb.Array[qnb.f16, 1]", "qnb.atomic_add(h, 0, 1.0)", "i32 and f32 arrays"),
    "float index": (
        "h: qnb.Array[qnb.i32, 1]",
        "qnb.atomic_add(h, qnb.Vec16.zeros(qnb.f32), 1)",
        "index must be i32",
    ),
    "tuple into 1-D": ("h: qnb.Array[qnb.i32, 1]", "qnb.atomic_add(h, (0, 1), 1)", "not a tuple"),
    "one index into 2-D": (
        "h: qnb.Array[qnb.i32, 2]",
        "qnb.atomic_min(h, 0, 1)",
        "tuple (rows, cols)",
    ),
    "float into i32": ("h: qnb.Array[qnb.i32, 1]", "qnb.atomic_max(h, 0, 1.5)", "integer value"),
    "shapes": (
        "h: qnb.Array[qnb.i32, 1]",
        "qnb.atomic_add(h, qnb.Vec16.zeros(qnb.i32), qnb.Vec32.ones(qnb.i32))",
        "qnb.atomic_add",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_at_the_users_line(case):
    param, call, words = BAD[case]
    ns, filename = define(f"""
        @qnb.kernel
        def bad({param}):
            x = 1
            {call}
        """)
    with pytest.raises(qnb.QnbTypeError) as info:
        ns["bad"].source("ir")
    assert words in str(info.value)
    assert info.value.filename == filename and info.value.lineno == 5


def test_wgsl_declares_an_atomic_array_and_reads_it_atomically():
    """An array any atomic updates is an ``array<atomic<…>>`` in WGSL, and every other
    access to it (here the racing kernel's plain reads and writes of ``h`` beside the
    atomic) goes through atomicLoad/atomicStore; the other arrays stay plain."""
    ns, _ = define("""
        @qnb.kernel
        def mixed(x: qnb.Array[qnb.i32, 1], h: qnb.Array[qnb.i32, 1],
                  f: qnb.Array[qnb.f32, 1]):
            i = qnb.program_id(0)
            qnb.atomic_add(h, qnb.Vec16.load(x, i * 16, other=-1), 1)
            qnb.atomic_max(f, 0, 2.5)
            h[0] = h[1] + 1
            f[1] = f[0] * 2.0
        """)
    text = ns["mixed"].source(
        "wgsl", np.zeros(16, np.int32), np.zeros(8, np.int32), np.zeros(2, np.float32)
    )
    assert "a_h: array<atomic<i32>>" in text and "a_f: array<atomic<u32>>" in text
    assert "a_x: array<i32>" in text
    assert "atomicLoad(&a_h[" in text and "atomicStore(&a_h[" in text
    assert "bitcast<f32>(atomicLoad(&a_f[" in text and "atomicCompareExchangeWeak" in text


def test_wgpu_refuses_f64_atomics_at_the_users_line():
    ns = _kernels(16, "f64", "add")
    with pytest.raises(qnb.BackendError, match="f64") as info:
        ns["by_vec"].source("wgsl", np.zeros(16, np.int32), np.zeros(16), np.zeros(16))
    assert info.value.lineno is not None


def test_cuda_atomics_compile_with_nvrtc():
    """Every atomic form and dtype the cuda backend renders compiles with NVRTC (they
    run on cuda-host above, through g++)."""
    from tests.backends.nvrtc_batch import Unit, compile_units, toolchain_reason

    if toolchain_reason() is not None:
        pytest.skip(f"NVRTC toolchain missing: {toolchain_reason()}")
    units = []
    for op in ("add", "max", "min"):
        for dtype in ("i32", "f32", "f64"):
            ns = _kernels(16, dtype, op)
            x, v = np.zeros(16, np.int32), np.zeros(16, np.dtype(_NUMPY[dtype]))
            units.append(Unit(f"vec_{op}_{dtype}", ns["by_vec"].source("cuda", x, v, v)))
            units.append(Unit(f"one_{op}_{dtype}", ns["one_element"].source("cuda", v, v)))
        units.append(
            Unit(
                f"tile_{op}",
                _kernels(8, "i32", op)["by_tile"].source(
                    "cuda",
                    np.zeros((4, 8), np.int32),
                    np.zeros(8, np.int32),
                    np.zeros((2, 2), np.int32),
                ),
            )
        )
    units.append(Unit("compact", COMPACT["compact"].source("cuda", *[np.zeros(4, np.int32)] * 4)))
    units.append(Unit("old", OLD_OUT["old_values"].source("cuda", *[np.zeros(4, np.float32)] * 2)))
    compiled, failures = compile_units(units, "sm_80")
    assert not failures, "\n\n".join(failures[:3])
    assert len(compiled) == len(units)
    assert all("atom" in c.ptx for c in compiled)


_NUMPY = {"i32": np.int32, "f32": np.float32, "f64": np.float64}


SUMS, _ = define("""
    @qnb.kernel
    def block_sums(x: qnb.Array[qnb.f32, 2], total: qnb.Array[qnb.f32, 1],
                   before: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        t = qnb.Tile[8, 16].load(x, i * 8, 0)
        before[i] = qnb.atomic_add(total, 1, t.sum())

    @qnb.kernel
    def block_max(x: qnb.Array[qnb.i32, 2], best: qnb.Array[qnb.i32, 1]):
        i = qnb.program_id(0)
        t = qnb.Tile[8, 16].load(x, i * 8, 0, other=-1000)
        qnb.atomic_max(best, 0, t.max())
        qnb.atomic_min(best, 1, t.min(axis=1))  # a vec of row minima, one index each
    """)


def test_scalar_atomics_in_a_kernel_of_tiles(atomic_backend):
    """A program of many threads: one thread updates, and its old value reaches all."""
    rng = np.random.default_rng(11)
    x = (rng.random((80, 16)) + 0.25).astype(np.float32)
    total = np.array([-3.0, 2.5, -3.0], np.float32)
    before = np.full(10, np.nan, np.float32)
    with qnb.backend(atomic_backend):
        SUMS["block_sums"][10](x, total, before)
    sums = x.reshape(10, -1).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(total, [-3.0, 2.5 + sums.sum(), -3.0], rtol=1e-5)
    # each program saw the total of some set of the others: the sorted old values climb
    # by one block sum at a time from the start
    order = np.argsort(before)
    np.testing.assert_allclose(
        before[order], 2.5 + np.concatenate([[0], np.cumsum(sums[order])[:-1]]), rtol=1e-5
    )
    xi = rng.integers(-500, 500, (80, 16)).astype(np.int32)
    best = np.array([-7, 7], np.int32)
    with qnb.backend(atomic_backend):
        SUMS["block_max"][10](xi, best)
    assert best.tolist() == [max(-7, xi.max()), min(7, xi.min())]


LOOPED, _ = define("""
    @qnb.kernel
    def looped(h: qnb.Array[qnb.i32, 1], f: qnb.Array[qnb.f32, 1]):
        for _ in range(20):
            qnb.atomic_add(h, 0, 1)
            qnb.atomic_add(f, 0, 0.5)
    """)


@pytest.mark.parametrize("programs", [1, 9, 300])
def test_atomics_in_a_loop_of_a_kernel_without_tiles(atomic_backend, programs):
    """One invocation is one program there, and those past the grid have returned: no
    barrier may follow the atomic (a divergent one made lavapipe keep 3 of 20)."""
    h, f = np.zeros(1, np.int32), np.zeros(1, np.float32)
    with qnb.backend(atomic_backend):
        LOOPED["looped"][programs](h, f)
    assert h[0] == 20 * programs and f[0] == 10.0 * programs


SPECIALS = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.5, 3.0], np.float32)


@pytest.mark.parametrize("op", ["add", "max", "min"])
@pytest.mark.parametrize("form", ["by_vec", "one_each"])
def test_f32_specials_as_numpy_applies_them(atomic_backend, op, form):
    """NaN, infinities and signed zeros, each element updated by one program (so the
    order cannot matter): NaN propagates through max and min, and a max/min between
    -0.0 and 0.0 takes the value applied, as NumPy's maximum.at / minimum.at do."""
    start, values = np.meshgrid(SPECIALS, SPECIALS)
    h, v = start.ravel().copy(), values.ravel().copy()
    x = np.random.default_rng(2).permutation(h.size).astype(np.int32)
    want = h.copy()
    with np.errstate(invalid="ignore"):
        REFERENCE[op].at(want, x, v)
    with qnb.backend(atomic_backend):
        if form == "by_vec":
            _kernels(16, "f32", op)["by_vec"][h.size // 16](x, v, h)
        else:
            SPECIAL_KERNELS[op][h.size](x, v, h)
    np.testing.assert_array_equal(h, want)  # NaN where NumPy has NaN
    np.testing.assert_array_equal(np.signbit(h[~np.isnan(h)]), np.signbit(want[~np.isnan(want)]))


_SPECIAL_NS, _ = define("""
    @qnb.kernel
    def add_each(x: qnb.Array[qnb.i32, 1], v: qnb.Array[qnb.f32, 1], h: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        qnb.atomic_add(h, x[i], v[i])

    @qnb.kernel
    def max_each(x: qnb.Array[qnb.i32, 1], v: qnb.Array[qnb.f32, 1], h: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        qnb.atomic_max(h, x[i], v[i])

    @qnb.kernel
    def min_each(x: qnb.Array[qnb.i32, 1], v: qnb.Array[qnb.f32, 1], h: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        qnb.atomic_min(h, x[i], v[i])
    """)
SPECIAL_KERNELS = {op: _SPECIAL_NS[f"{op}_each"] for op in ("add", "max", "min")}


REPEATED, _ = define("""
    @qnb.kernel
    def repeated_f32(h: qnb.Array[qnb.f32, 1], n: qnb.i32):
        for _k in range(n):
            qnb.atomic_add(h, 0, 1.0)

    @qnb.kernel
    def repeated_i32(h: qnb.Array[qnb.i32, 1], n: qnb.i32):
        for _k in range(n):
            qnb.atomic_add(h, 0, 1)
    """)


@pytest.fixture
def loop_budget():
    """The wgpu adapter's loop budget (lavapipe's llvmpipe: 65535), else skip."""
    require_backend("wgpu")
    from qnb.backends import get

    budget = get("wgpu")._dev().loop_budget
    if budget is None:
        pytest.skip("this adapter's driver has no loop budget")
    return budget


def test_atomic_retries_are_watched_by_the_loop_budget(loop_budget):
    """On llvmpipe an f32 atomic's compare-exchange loop counts toward the loop budget
    (a pass per call, more under contention): within it the sums are exact, contended or
    not; past it the launch raises naming the atomics and writes nothing, never a short
    sum. i32 atomics (WGSL's own) cost no pass."""
    with qnb.backend("wgpu"):
        for programs, n in ((1, loop_budget // 2 - 100), (64, 1000), (512, 200)):
            h = np.array([0.75], np.float32)
            REPEATED["repeated_f32"][programs](h, n)
            assert h[0] == 0.75 + programs * n
        for programs, n in ((1, loop_budget // 2 + 100), (64, loop_budget // 3)):
            h = np.array([0.75], np.float32)
            with pytest.raises(qnb.BackendError, match="f32 atomic's compare-exchange"):
                REPEATED["repeated_f32"][programs](h, n)
            assert h[0] == 0.75
        h = np.array([0], np.int32)
        REPEATED["repeated_i32"][1](h, loop_budget - 100)
        assert h[0] == loop_budget - 100
