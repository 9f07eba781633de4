"""The launch memo's hot entry (``_LaunchMemo.hot``): a launch that finds every captured
name bound to the same object as at the last hit skips the snapshot and the lookup. It must
never serve another kernel than the snapshot would, and every hit it serves is recorded.
"""

from __future__ import annotations

import gc
import types
import weakref

import numpy as np
import pytest

import qnb
import qnb.cache
from qnb.cache import lookup

SCALE = 2.0
SETTINGS = types.ModuleType("hot_settings")
SETTINGS.SCALE = 3.0


@qnb.kernel(backend="cpu")
def _scaled(x: qnb.Array[qnb.f32, 2]):
    qnb.Tile16.full(SCALE).store(x, 0, 0)


@qnb.kernel(backend="cpu")
def _through_module(x: qnb.Array[qnb.f32, 2]):
    qnb.Tile16.full(SETTINGS.SCALE).store(x, 0, 0)


def _closure_kernel():
    value = 1.5

    @qnb.kernel(backend="cpu")
    def closed(x: qnb.Array[qnb.f32, 2]):
        qnb.Tile16.full(value).store(x, 0, 0)

    def rebind(new):
        nonlocal value
        value = new

    return closed, rebind


def _run(kernel) -> float:
    x = np.zeros((16, 16), np.float32)
    kernel(x)
    return float(x[3, 5])


@pytest.fixture
def scale():
    global SCALE
    yield
    SCALE = 2.0


def _outcomes(kernel):
    return [e.outcome for e in qnb.cache.events() if e.kernel == kernel.name]


def test_a_rebound_global_recompiles_after_the_hot_entry_was_set(cache_dir, scale):
    global SCALE
    assert _run(_scaled) == 2.0 and _run(_scaled) == 2.0
    assert _scaled._memo.hot is not None  # the second launch hit and set it
    for value, expected in [(4.0, 4.0), (4.0, 4.0), (2.0, 2.0), (-0.0, -0.0), (0.0, 0.0)]:
        SCALE = value
        assert _run(_scaled) == expected
        x = np.zeros((16, 16), np.float32)
        _scaled(x)
        assert np.signbit(x[0, 0]) == np.signbit(np.float32(value))  # -0.0 is not 0.0


def test_equal_values_of_another_type_are_not_the_same_object(cache_dir, scale):
    global SCALE
    SCALE = 1.0
    _run(_scaled), _run(_scaled)
    SCALE = 1  # == 1.0, but an int: another key
    _run(_scaled)
    assert _outcomes(_scaled)[-1] != "memory-hit"


def test_a_rebound_closure_cell_recompiles():
    closed, rebind = _closure_kernel()
    assert _run(closed) == 1.5 and _run(closed) == 1.5
    rebind(7.0)
    assert _run(closed) == 7.0
    rebind(1.5)
    assert _run(closed) == 1.5


def test_a_module_attribute_takes_the_snapshot_at_every_launch(cache_dir):
    assert _run(_through_module) == 3.0 and _run(_through_module) == 3.0
    assert _through_module._memo.hot is None  # not the name's object alone
    SETTINGS.SCALE = 5.0
    try:
        assert _run(_through_module) == 5.0
    finally:
        SETTINGS.SCALE = 3.0
    assert _run(_through_module) == 3.0


def test_every_hot_hit_is_a_recorded_memory_hit(cache_dir):
    n = lookup.HITS_PENDING * 2 + 7  # past a batch, and some left pending
    for _ in range(n + 1):
        _run(_scaled)
    outcomes = _outcomes(_scaled)
    assert outcomes.count("memory-hit") == n and outcomes[0] in ("miss", "disk-hit")
    assert qnb.cache.stats()["memory_hits"] == n


def test_a_listener_sees_each_hot_hit_as_it_happens(cache_dir):
    _run(_scaled), _run(_scaled)
    seen = []
    qnb.cache.add_listener(seen.append)
    try:
        _run(_scaled)
        assert [e.outcome for e in seen] == ["memory-hit"]
    finally:
        qnb.cache.remove_listener(seen.append)


def test_clear_drops_the_hot_entry(cache_dir):
    _run(_scaled), _run(_scaled)
    qnb.cache.clear()
    assert _run(_scaled) == 2.0
    assert _outcomes(_scaled) == ["miss"]  # looked up again (and compiled), not served


def test_an_evicted_launcher_is_not_kept_by_the_hot_entry(cache_dir, monkeypatch, scale):
    global SCALE
    monkeypatch.setenv("QNB_CACHE", "0")
    monkeypatch.setattr(lookup, "MAX_LAUNCHERS", 2)
    _run(_scaled), _run(_scaled)
    assert _scaled._memo.hot is not None  # (it holds the launcher while it is hot)
    (prepared,) = _scaled._memo.values()
    first = weakref.ref(prepared.launcher)
    del prepared
    for value in (5.0, 6.0, 7.0):  # three more launchers: the first one is evicted
        SCALE = value
        _run(_scaled), _run(_scaled)
    SCALE = 2.0
    gc.collect()
    assert first() is None
    assert _run(_scaled) == 2.0 and _outcomes(_scaled)[-1] == "miss"


def test_lru_order_follows_hits_recorded_without_the_lock(cache_dir, monkeypatch, scale):
    """A launcher hit on the hot path is the most recently used one when an eviction
    comes, although its hits were only appended, not yet folded in."""
    global SCALE
    monkeypatch.setenv("QNB_CACHE", "0")
    monkeypatch.setattr(lookup, "MAX_LAUNCHERS", 2)
    _run(_scaled)  # launcher A (2.0)
    SCALE = 5.0
    _run(_scaled)  # launcher B
    SCALE = 2.0
    _run(_scaled), _run(_scaled)  # A used again, after B
    SCALE = 6.0
    _run(_scaled)  # C: the least recently used, B, goes
    SCALE = 2.0
    assert _run(_scaled) == 2.0 and _outcomes(_scaled)[-1] == "memory-hit"


@qnb.kernel
def _follows(x, n: qnb.i32):  # no backend of its own, a scalar parameter: the full signature
    x[0] = x[0] + n


def test_the_hot_launch_steps_aside_for_what_its_lookup_read(cache_dir, monkeypatch):
    """Each thing a lookup reads, changed after the hot entry was set, takes the launch
    past it: the kernel's backend, the current one, the arguments' types, the cache's
    generation, QNB_ALWAYS_COMPILE. A scalar argument is no part of it: its hits stay hot."""
    x = np.ones(4, np.float32)
    with qnb.backend("cpu"):
        _follows(x, 1), _follows(x, 2)
        assert _follows._memo.hot is not None
        for n in (3, 4, 5):
            _follows(x, n)
        assert x[0] == 1 + 1 + 2 + 3 + 4 + 5
        assert _outcomes(_follows)[-3:] == ["memory-hit"] * 3
        _follows(x, n=0), _follows(x=x, n=0)  # (keywords: the same hot launch)
        assert _outcomes(_follows)[-2:] == ["memory-hit"] * 2 and x[0] == 16

        _follows.backend = "cuda-host"  # the kernel's own backend, set after the hit
        try:
            _follows(x, 1)
        finally:
            _follows.backend = None
        assert qnb.cache.events()[-1].backend == "cuda-host" and x[0] == 17

        _follows(x, 1), _follows(x, 1)  # hot on cpu again
        with qnb.backend("cuda-host"):  # the current backend, changed
            _follows(x, 1)
        assert qnb.cache.events()[-1].backend == "cuda-host" and x[0] == 20

        wide = np.ones(4, np.float64)  # another dtype: another key
        _follows(wide, 2)
        assert wide[0] == 3.0 and qnb.cache.events()[-1].key != _last_key(x)

        _follows(x, 1), _follows(x, 1)
        qnb.cache.clear()
        _follows(x, 1)
        assert _outcomes(_follows)[-1] != "memory-hit"

        _follows(x, 1), _follows(x, 1)
        monkeypatch.setenv("QNB_ALWAYS_COMPILE", "1")
        _follows(x, 1)
        assert _outcomes(_follows)[-1] == "miss"
        assert x[0] == 26


def _last_key(x):
    _follows(x, 0)
    return qnb.cache.events()[-1].key


def test_an_error_from_the_hot_launch_names_the_users_line():
    @qnb.kernel(backend="cpu")
    def reads_at(x: qnb.Array[qnb.f32, 1], i: qnb.i32):
        x[0] = x[i]  # the line the error names

    x = np.ones(4, np.float32)
    reads_at(x, 1), reads_at(x, 2)
    assert reads_at._memo.hot is not None
    with pytest.raises(qnb.QnbIndexError) as caught:
        reads_at(x, 9)
    assert f"line {reads_at.firstlineno + 1}\n    x[0] = x[i]" in str(caught.value)
    assert len(caught.traceback) == 2  # this test's frame and the call's: none of qnb's inside
