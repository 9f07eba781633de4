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
    first = weakref.ref(_scaled._memo.hot[3].launcher)
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
