"""The wgpu device's staging pool (NumPy arguments' device buffers) is bounded in bytes.

It kept 8 idle buffers whatever their size: a sweep over large arrays left 8 buffers of
up to a binding's size each (128 MiB on lavapipe, GiBs elsewhere) on the device. It keeps
at most ``MAX_FREE`` of them and at most ``MAX_FREE_BYTES`` in all, dropping (and
destroying) the sizes least recently given back first.
"""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb.backends import wgpu as wgpu_backend
from tests.conftest import require_backend

KIB = 1024


@pytest.fixture
def pool(monkeypatch):
    require_backend("wgpu")
    from qnb.backends import get

    staging = get("wgpu")._dev().staging
    staging.clear()
    monkeypatch.setattr(wgpu_backend._StagingPool, "MAX_FREE_BYTES", 64 * KIB)
    yield staging
    staging.clear()


def _idle(staging) -> list[int]:
    return [buffer.size for idle in staging.free.values() for buffer in idle]


def _destroyed(buffer) -> bool:
    """Whether the device refuses a write to ``buffer`` as destroyed."""
    from qnb.backends import get

    try:
        get("wgpu")._dev().queue.write_buffer(buffer, 0, np.zeros(4, np.uint8))
    except Exception as exc:  # noqa: BLE001 - wgpu's GPUValidationError
        return "has been destroyed" in str(exc)
    return False


def test_idle_buffers_stay_within_the_bytes(pool):
    buffers = [pool.take(size) for size in (16 * KIB, 16 * KIB, 24 * KIB, 24 * KIB, 4 * KIB)]
    pool.give(buffers)
    assert sum(_idle(pool)) <= 64 * KIB == wgpu_backend._StagingPool.MAX_FREE_BYTES
    assert pool.idle_bytes == sum(_idle(pool)) and pool.idle == len(_idle(pool))
    # the sizes given back least recently went first: 16 KiB, then the rest fit
    assert sorted(_idle(pool)) == [4 * KIB, 24 * KIB, 24 * KIB]
    assert _destroyed(buffers[0]) and not _destroyed(buffers[2])


def test_a_buffer_larger_than_the_bound_is_not_kept(pool):
    large = pool.take(100 * KIB)
    pool.give([large])
    assert _idle(pool) == [] and pool.idle_bytes == 0
    assert _destroyed(large)


def test_taken_buffers_leave_the_bytes_and_come_back(pool):
    first = pool.take(8 * KIB)
    pool.give([first])
    assert pool.idle_bytes == 8 * KIB
    again = pool.take(8 * KIB)
    assert again is first and pool.idle_bytes == 0 and pool.free == {}
    pool.give([again])


def test_launches_over_large_arrays_keep_the_pool_bounded(pool):
    """A sweep of launches over 48 KiB arrays (the kernel copies one to another): each
    result right, and the pool never holds more than its bound once they are done."""

    @qnb.kernel(backend="wgpu")
    def copy(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        qnb.Vec[256].load(x, i * 256).store(out, i * 256)

    rng = np.random.default_rng(5)
    for n in (12 * KIB, 12 * KIB - 7, 9 * KIB, 12 * KIB + 256):
        x = rng.standard_normal(n).astype(np.float32)
        out = np.full_like(x, np.nan)
        copy[-(-n // 256)](x, out)
        np.testing.assert_array_equal(out, x)
        assert pool.idle_bytes <= 64 * KIB and pool.idle <= wgpu_backend._StagingPool.MAX_FREE
