"""Loops past the driver's budget are never silently short (wgpu on lavapipe).

llvmpipe (lavapipe's compiler) ends an invocation's loops after 65,535 passes in all: a
``for``, a ``while`` and nested loops share the budget (every loop's last pass counts
too), and so do the invocations of one SIMD group. It cut silently: ``for _i in range(n):
acc += 1`` gave 65,535 for any n past it. On such an adapter (``wgpu.LOOP_BUDGETS``) the
generated code notes a loop left with work to do, and the launch raises ``BackendError``
naming the limit, writing nothing back; a loop that ends within the budget, right up to
it, runs as before.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import qnb
from qnb.backends import wgpu as wgpu_backend
from qnb.errors import BackendError
from tests.conftest import require_backend

LIMIT = 65535


@pytest.fixture(scope="module")
def budgeted():
    require_backend("wgpu")
    from qnb.backends import get

    budget = get("wgpu")._dev().loop_budget
    if budget is None:
        pytest.skip("this adapter's driver has no loop budget")
    assert budget == LIMIT
    return get("wgpu")


@qnb.kernel(backend="wgpu")
def counted(out, n: qnb.i32):
    acc = 0
    for _i in range(n):
        acc += 1
    out[0] = acc


@qnb.kernel(backend="wgpu")
def stepped(out, start: qnb.i32, stop: qnb.i32, step: qnb.i32):
    acc = 0
    for _i in range(start, stop, step):
        acc += 1
    out[0] = acc


@qnb.kernel(backend="wgpu")
def nested(out, n: qnb.i32, m: qnb.i32):
    acc = 0
    for _i in range(n):
        for _j in range(m):
            acc += 1
    out[0] = acc


@qnb.kernel(backend="wgpu")
def counted_while(out, n: qnb.i32):
    acc = 0
    i = 0
    while i < n:
        acc += 1
        i += 1
    out[0] = acc


@qnb.kernel(backend="wgpu")
def broken_out(out, n: qnb.i32):
    acc = 0
    while True:
        if acc >= n:
            break
        acc += 1
    out[0] = acc


@qnb.kernel(backend="wgpu")
def one_after_another(out, n1: qnb.i32, n2: qnb.i32):
    acc = 0
    for _i in range(n1):
        acc += 1
    for _i in range(n2):
        acc += 7
    out[0] = acc


@qnb.kernel(backend="wgpu")
def per_program(out, counts):
    p = qnb.program_id(0)
    acc = 0
    for _i in range(counts[p]):
        acc += 1
    for _i in range(counts[p + 64]):
        acc += 1
    out[p] = acc


@qnb.kernel(backend="wgpu")
def tile_loop(out: qnb.Array[qnb.f32, 2], n: qnb.i32):
    acc = qnb.Tile[64, 64].zeros(qnb.f32)
    for _i in range(n):
        acc = acc + 1.0
    acc.store(out, 0, 0)


@qnb.kernel(backend="wgpu")
def remainders(out: qnb.Array[qnb.f32, 1], n: qnb.i32):
    acc = 0.0
    for i in range(n):
        acc += (i * 1.5) % 7.0  # a loop inside WGSL's fmod helper, in every pass
    out[0] = acc


def _run(kernel, *args, grid=1, size=1):
    out = np.full(size, -1, np.int32)
    kernel[grid](out, *args)
    return out


@pytest.mark.parametrize("n", [0, 1, 1000, LIMIT - 1, LIMIT])
def test_a_loop_within_the_budget_is_right(budgeted, n):
    assert _run(counted, n)[0] == n


@pytest.mark.parametrize("n", [LIMIT + 1, 100_000, 200_000, 10**6])
def test_a_loop_past_the_budget_raises_naming_it_and_writes_nothing(budgeted, n):
    out = np.full(1, -1, np.int32)
    with pytest.raises(BackendError, match="65,535 iterations in all") as raised:
        counted(out, n)
    assert "1 invocation(s) short, program (0, 0, 0) first" in raised.value.message
    assert out[0] == -1  # not written back


@pytest.mark.parametrize(
    ("start", "stop", "step"), [(0, 2 * LIMIT, 2), (LIMIT, 0, -1), (10, 10 + 3 * LIMIT, 3)]
)
def test_a_stepped_range_of_exactly_the_budget_is_right(budgeted, start, stop, step):
    assert _run(stepped, start, stop, step)[0] == len(range(start, stop, step)) == LIMIT


@pytest.mark.parametrize(("start", "stop", "step"), [(0, 2 * LIMIT + 2, 2), (LIMIT + 1, 0, -1)])
def test_a_stepped_range_past_the_budget_raises(budgeted, start, stop, step):
    with pytest.raises(BackendError, match="loop budget"):
        _run(stepped, start, stop, step)


@pytest.mark.parametrize("n", [LIMIT, LIMIT + 1, 200_000])
def test_a_while_loop(budgeted, n):
    if n <= LIMIT:
        assert _run(counted_while, n)[0] == n
        return
    with pytest.raises(BackendError, match="65,535"):
        _run(counted_while, n)


@pytest.mark.parametrize("n", [1000, LIMIT - 1, LIMIT + 1, 200_000])
def test_a_loop_left_by_break(budgeted, n):
    # The loop's end is the body's break, which cannot be tested again at a pass's end:
    # the driver's cut is reported wherever it falls (at exactly n = LIMIT, too, where the
    # next pass would only have broken out); a loop that ends before it is right.
    if n < LIMIT:
        assert _run(broken_out, n)[0] == n
        return
    with pytest.raises(BackendError, match="65,535"):
        _run(broken_out, n)


@pytest.mark.parametrize(
    ("n", "m"), [(255, 255), (2, 32766), (2, 32767), (256, 256), (300, 300), (1, 70_000)]
)
def test_nested_loops_share_the_budget(budgeted, n, m):
    # each outer pass costs the inner loop's m passes, its last (leaving) pass, and its
    # own; the outer loop's last back edge and leaving pass do no work
    if n * (m + 2) <= LIMIT + 1:
        assert _run(nested, n, m)[0] == n * m
        return
    with pytest.raises(BackendError, match="65,535"):
        _run(nested, n, m)


@pytest.mark.parametrize(
    ("n1", "n2", "cut"),
    [(40_000, 25_000, False), (LIMIT - 1, 1, False), (LIMIT - 1, 2, True), (40_000, 40_000, True)],
)
def test_loops_one_after_another_share_the_budget(budgeted, n1, n2, cut):
    if not cut:
        assert _run(one_after_another, n1, n2)[0] == n1 + 7 * n2
        return
    with pytest.raises(BackendError, match="65,535"):
        _run(one_after_another, n1, n2)


def test_programs_of_one_simd_group_share_the_budget(budgeted):
    """Program 1 needs 60,011 passes alone, but runs beside program 0's 60,001 in one SIMD
    group of invocations: the driver cut program 1, and the error names it."""
    counts = np.zeros(128, np.int32)
    counts[0], counts[1], counts[64 + 1] = 60_000, 10, 60_000
    with pytest.raises(BackendError, match=r"program \(1, 0, 0\) first"):
        _run(per_program, counts, grid=64, size=64)
    counts[64 + 1] = 5000  # now both fit together
    out = _run(per_program, counts, grid=64, size=64)
    assert list(out[:3]) == [60_000, 5010, 0]


@pytest.mark.parametrize(("n", "cut"), [(40_000, False), (70_000, True)])
def test_a_loop_over_tiles(budgeted, n, cut):
    out = np.full((64, 64), np.nan, np.float32)
    if not cut:
        tile_loop(out, n)
        assert (out == n).all()
        return
    with pytest.raises(BackendError, match="65,535"):
        tile_loop(out, n)
    assert np.isnan(out).all()


def test_a_loop_inside_a_helper_is_watched_and_right(budgeted):
    out = np.zeros(1, np.float32)
    remainders(out, 300)
    want = np.float32(0)
    for i in range(300):
        want = np.float32(want + np.fmod(np.float32(i * 1.5), np.float32(7.0)))
    np.testing.assert_allclose(out[0], want, rtol=1e-5)
    wgsl = budgeted.compile(remainders._lower_for((out, 300))[0]).text["wgsl"]
    helper = wgsl[wgsl.index("fn qnb_fmod_f32") :].split("\n}\n")[0]
    assert "q_more = !(r < d);" in helper and "q_cut = true;" in helper


def test_only_the_launch_that_was_cut_raises_among_threads(budgeted):
    """Each launch reads its own report: threads launching one kernel, one of them past
    the budget, see only their own outcome."""
    counted(np.zeros(1, np.int32), 1)
    outcomes = {}

    def work(thread: int) -> None:
        n = LIMIT + 10 if thread == 3 else 1000 * (thread + 1)
        for _ in range(6):
            out = np.full(1, -1, np.int32)
            try:
                counted(out, n)
            except BackendError:
                outcomes.setdefault(thread, set()).add("cut")
            else:
                outcomes.setdefault(thread, set()).add("right" if out[0] == n else "wrong")

    workers = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert outcomes == {t: {"cut"} if t == 3 else {"right"} for t in range(6)}


def test_the_budget_is_known_by_adapter_and_watched_only_there(budgeted):
    assert wgpu_backend.loop_budget({"device": "llvmpipe (LLVM 15.0.6, 256 bits)"}) == LIMIT
    assert wgpu_backend.loop_budget({"device": "NVIDIA GeForce RTX 4090"}) is None
    ir = counted._lower_for((np.zeros(1, np.int32), 5))[0]
    plain = budgeted.render(ir)  # kernel.source: the portable code, no device's watch
    assert "q_budget" not in plain and "q_more" not in plain
    artifact = budgeted.compile(ir)
    assert artifact.text["loop_budget"] == {"binding": 2, "limit": LIMIT}
    assert "q_budget" in artifact.text["wgsl"]


def test_a_kernel_without_loops_binds_no_budget_words(budgeted):
    @qnb.kernel(backend="wgpu")
    def straight(out, s: qnb.i32):
        out[0] = s * 3

    ir = straight._lower_for((np.zeros(1, np.int32), 5))[0]
    assert "loop_budget" not in budgeted.compile(ir).text
    assert _run(straight, 5)[0] == 15


def test_the_report_comes_back_with_the_stored_array_in_one_read(budgeted, monkeypatch):
    """A launch that stores to a NumPy array reads its report words in the same read as
    that array's results (the tail of its staging buffer): no read of their own."""
    out = np.full(1, -1, np.int32)
    counted(out, 3)
    queue = budgeted._dev().queue
    reads = []
    real = type(queue).read_buffer
    monkeypatch.setattr(
        type(queue), "read_buffer", lambda q, *a, **k: reads.append(a) or real(q, *a, **k)
    )
    counted(out, 5)
    assert out[0] == 5 and len(reads) == 1
    with pytest.raises(BackendError, match="65,535"):
        counted(out, LIMIT + 1)
    assert out[0] == 5 and len(reads) == 2


def test_device_arrays_get_words_of_their_own(budgeted):
    out = qnb.to_device(np.full(1, -1, np.int32), backend="wgpu")
    counted(out, 77)
    assert out.numpy()[0] == 77
    with pytest.raises(BackendError, match="65,535"):
        counted(out, LIMIT + 1)
    counted(out, 9)  # the words went back zeroed: the next launch is not blamed
    assert out.numpy()[0] == 9
