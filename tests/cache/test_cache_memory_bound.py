"""The memory level is bounded: beyond ``MAX_LAUNCHERS`` the least recently used
launcher is dropped, with the launch memo entries of kernels the user still has, and
what it held is freed; ``qnb.cache.clear()`` frees everything at once. On wgpu no
launcher keeps array-sized buffers of its own. Counts live objects, never wall time."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import qnb
import qnb.cache
from qnb.cache import lookup
from tests.conftest import require_backend

BOUND = 4
SLIDER = 1.0
OTHER = 5.0


def _slider(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i, j = qnb.program_id(0), qnb.program_id(1)
    t = qnb.Tile16.load(x, i * 16, j * 16)
    (t * SLIDER).store(y, i * 16, j * 16)


def _steady(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile16.load(x, i * 16, 0)
    (t + OTHER).store(y, i * 16, 0)


@pytest.fixture
def bounded(cache_dir, monkeypatch):
    monkeypatch.setenv("QNB_CACHE", "0")  # the memory level alone
    monkeypatch.setattr(lookup, "MAX_LAUNCHERS", BOUND, raising=False)
    yield
    qnb.cache.clear()


def _live(refs) -> int:
    """How many of the (distinct) launchers behind ``refs`` are still alive."""
    gc.collect()
    return len({id(ref): ref for ref in refs if ref() is not None})


def _slide(kernel, values, x, y, seen=None):
    global SLIDER
    try:
        for value in values:
            SLIDER = value
            kernel[(x.shape[0] // 16, x.shape[1] // 16)](x, y)
            np.testing.assert_array_equal(y, x * np.float32(value))
            if seen is not None:
                seen.extend(weakref.ref(p.launcher) for p in kernel._memo.values())
    finally:
        SLIDER = 1.0


def _arrays(rows=32, cols=32):
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    return x, np.full_like(x, np.nan)


def test_a_slider_keeps_at_most_the_bound_of_launchers_alive(bounded):
    kernel = qnb.kernel(_slider, backend="cpu")
    x, y = _arrays()
    seen = []
    _slide(kernel, [float(v) for v in range(1, 21)], x, y, seen)
    assert len(lookup._memory) == BOUND
    assert len(kernel._memo) <= BOUND  # the kernel the user holds lets them go too
    assert _live(seen) <= BOUND
    # the newest values are the ones kept: relaunching them is a memory hit
    before = qnb.cache.stats()["misses"]
    _slide(kernel, [20.0, 19.0], x, y)
    assert qnb.cache.stats()["misses"] == before
    # an evicted value compiles again, correctly
    _slide(kernel, [1.0], x, y)
    assert qnb.cache.stats()["misses"] == before + 1


def test_the_launcher_dropped_is_the_least_recently_used(bounded):
    """A kernel launched between the slider's steps stays: its memory hits through the
    kernel's own memo count as uses."""
    steady = qnb.kernel(_steady, backend="cpu")
    slider = qnb.kernel(_slider, backend="cpu")
    x, y = _arrays(32, 16)
    z = np.zeros_like(x)
    steady[2](x, z)
    kept = weakref.ref(next(iter(steady._memo.values())).launcher)
    for value in range(1, 13):
        _slide(slider, [float(value)], x, y)
        steady[2](x, z)
        np.testing.assert_array_equal(z, x + np.float32(OTHER))
    steady_events = [e.outcome for e in qnb.cache.events() if e.kernel == "_steady"]
    assert steady_events.count("miss") == 1 and len(steady_events) == 13
    assert _live([kept]) == 1 and len(lookup._memory) == BOUND


def test_many_kernels_share_one_bound(bounded):
    kernels = [qnb.kernel(_slider, backend="cpu") for _ in range(3)]
    x, y = _arrays()
    seen = []
    for offset, kernel in enumerate(kernels):
        _slide(kernel, [float(10 * offset + v) for v in range(1, 6)], x, y, seen)
    assert len(lookup._memory) == BOUND
    assert sum(len(k._memo) for k in kernels) <= BOUND
    assert _live(seen) <= BOUND


def test_clear_frees_every_launcher_at_once(bounded):
    kernel = qnb.kernel(_slider, backend="cpu")
    x, y = _arrays()
    seen = []
    _slide(kernel, [2.0, 3.0], x, y, seen)
    assert _live(seen) == 2
    qnb.cache.clear()  # no launch after it: the kernel's own memo is emptied too
    assert len(kernel._memo) == 0 and _live(seen) == 0


def test_the_default_bound_is_1024():
    assert lookup.MAX_LAUNCHERS == 1024


def _wgpu_objects():
    from qnb.backends import wgpu as wgpu_backend

    gc.collect()
    launchers = [
        o
        for o in gc.get_objects()
        if type(o) is wgpu_backend._Launcher and "_slider" in str(o.name)
    ]
    return launchers, wgpu_backend._get_device()


def test_wgpu_memory_stays_flat_as_a_captured_value_changes(bounded):
    """A 1 MiB array and a new captured value at every launch: the live launchers stay
    at the bound, none keeps an array-sized buffer of its own, and the device's shared
    staging pool stays at one buffer per array."""
    require_backend("wgpu")
    kernel = qnb.kernel(_slider, backend="wgpu")
    x, y = _arrays(512, 512)  # 1 MiB of f32
    _wgpu_objects()[1].staging.clear()  # (what earlier tests' launches left idle)
    _slide(kernel, [2.0], x, y)
    launchers, dev = _wgpu_objects()
    array_bytes = x.nbytes
    assert all(
        not any(getattr(v, "size", 0) >= array_bytes for v in vars(launcher).values())
        for launcher in launchers
    )
    del launchers  # (holds the first launcher)
    _slide(kernel, [float(v) for v in range(3, 23)], x, y)
    launchers, dev = _wgpu_objects()
    assert len(launchers) <= BOUND
    for launcher in launchers:  # nothing array-sized of a launcher's own
        own = [v for v in vars(launcher).values() if getattr(v, "size", 0) >= array_bytes]
        assert own == [] and not hasattr(launcher, "staging")
    pooled = [b for idle in dev.staging.free.values() for b in idle]
    assert len(pooled) <= 2 and all(b.size == array_bytes for b in pooled)  # x and y
    del launchers, launcher
    qnb.cache.clear()
    assert _wgpu_objects()[0] == []
