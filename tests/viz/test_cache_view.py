"""CacheView: live rows from real kernel launches, the detail of a miss, unsubscribing."""

import gc

import numpy as np
import pytest

pytest.importorskip("anywidget")

import qnb
from qnb.viz import CacheView

USE_ALIAS = True


@qnb.kernel(backend="cpu")
def copy_tile(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    t = qnb.Tile16.load(a, 0, 0)
    if qnb.static(USE_ALIAS):
        t = t + 1.0
    t.store(out, 0, 0)


def launch():
    a = np.ones((16, 16), np.float32)
    out = np.zeros_like(a)
    copy_tile(a, out)
    return out


@pytest.fixture
def view():
    qnb.cache.clear()
    widget = CacheView()
    yield widget
    widget.close()


def test_rows_arrive_from_real_launches(view):
    global USE_ALIAS
    assert view.events == []
    launch()
    launch()
    outcomes = [row["outcome"] for row in view.events]
    assert outcomes[0] in ("miss", "disk-hit") and outcomes[-1] == "memory-hit"
    assert all(
        row["kernel"].endswith("copy_tile") and row["backend"] == "cpu" for row in view.events
    )
    assert [row["n"] for row in view.events] == list(range(len(view.events)))

    USE_ALIAS = False  # a captured constant changes: a miss that names it
    try:
        np.testing.assert_array_equal(launch(), 1.0)
    finally:
        USE_ALIAS = True
    last = view.events[-1]
    assert last["outcome"] == "miss" and "captured" in last["reason"]
    detail = view.select(last["n"])
    assert view.selected == last["n"] and view.detail == detail
    assert "captured" in detail and "USE_ALIAS" in detail
    assert "True" in detail and "False" in detail
    assert "key components:" in detail


def test_repeated_memory_hits_share_a_row(view):
    launch()
    rows_before = len(view.events)
    for _ in range(5):
        launch()
    view._flush()  # count updates are throttled; flush what is pending
    assert len(view.events) <= rows_before + 1  # one row for the hits (maybe the first's)
    last = view.events[-1]
    assert last["outcome"] == "memory-hit" and last["count"] >= 5
    data, _ = view._repr_mimebundle_()
    assert f"memory-hit ×{last['count']}" in data["text/html"]


def test_selecting_a_hit_says_it_matched(view):
    launch()
    launch()
    detail = view.select(view.events[-1]["n"])
    assert "memory cache" in detail
    view.selected = -1
    assert view.detail == ""


def test_existing_events_are_shown_at_creation():
    qnb.cache.clear()
    launch()
    widget = CacheView()
    try:
        assert len(widget.events) == len(qnb.cache.events()) >= 1
    finally:
        widget.close()


def test_close_unsubscribes(view):
    view.close()
    launch()
    assert view.events == []


def test_a_forgotten_view_does_not_stay_alive():
    import weakref

    widget = CacheView()
    ref = weakref.ref(widget)
    widget.close()  # ipywidgets keeps open widgets in a registry; closing drops it
    del widget
    gc.collect()
    assert ref() is None


def test_static_fallback_lists_events(view):
    launch()
    data, _ = view._repr_mimebundle_()
    assert data["text/plain"].startswith("CacheView(")
    assert "copy_tile" in data["text/html"]
