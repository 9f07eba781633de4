"""``%%qkernel --no-cache`` and ``Kernel.no_cache``: the cell's kernels compile anew, and
nothing else changes: not the process environment, not other kernels, not other threads."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import qnb
from qnb.kernel import NO_CACHE_REASON


def shared_source(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) + 1.0).store(out, 0, 0)


def set_later(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) + 2.0).store(out, 0, 0)


def threaded_other(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) + 3.0).store(out, 0, 0)


def threaded_fresh(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) + 4.0).store(out, 0, 0)


def _outcomes(name: str) -> list[str]:
    return [e.outcome for e in qnb.cache.events() if e.kernel == name]


def test_a_no_cache_kernel_compiles_anew_and_the_others_still_hit(monkeypatch):
    monkeypatch.delenv("QNB_ALWAYS_COMPILE", raising=False)
    fn = shared_source  # (plain functions: each kernel made of one has the same key)
    a, out = np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32)
    plain = qnb.kernel(fn, backend="cpu")
    plain(a, out)
    plain(a, out)
    fresh = qnb.kernel(fn, backend="cpu", no_cache=True)
    assert fresh.no_cache and not plain.no_cache
    start = len(qnb.cache.events())
    fresh(a, out)  # the cache holds this key: compiled anyway
    fresh(a, out)  # its own launch memo serves it now
    plain(a, out)  # the kernel that does not ask is untouched
    qnb.kernel(fn, backend="cpu")(a, out)  # and so is a new one: the fresh entry
    events = qnb.cache.events()[start:]
    assert [e.outcome for e in events] == ["miss", "memory-hit", "memory-hit", "memory-hit"]
    assert events[0].reason == NO_CACHE_REASON
    np.testing.assert_array_equal(out, a + 1)
    assert "QNB_ALWAYS_COMPILE" not in os.environ


def test_no_cache_is_a_kernel_option_that_can_be_set_later():
    k = qnb.kernel(set_later, backend="cpu")
    a, out = np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32)
    k(a, out)
    k.no_cache = True  # what it launched came from the cache: it compiles again
    start = len(qnb.cache.events())
    k(a, out)
    assert [e.outcome for e in qnb.cache.events()[start:]] == ["miss"]
    assert k.variant(debug=True).no_cache  # a variant keeps it


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "qnb")
    shell.run_cell("import numpy as np\nimport qnb")
    return shell


OTHER = """\
def other_kernel(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) * 3.0).store(out, 0, 0)
"""

CELL = """\
import os, threading
seen_environment = os.environ.get("QNB_ALWAYS_COMPILE")
a = np.ones((16, 16), np.float32)
out = np.zeros_like(a)
other_kernel(a, out)  # a kernel of another cell, launched in this one
from_thread = []
worker = threading.Thread(target=lambda: from_thread.append(other_kernel(a, out)))
worker.start()
worker.join()
def fresh_kernel(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) - 1.0).store(out, 0, 0)
"""


def test_the_magic_leaves_the_environment_other_kernels_and_threads_alone(ip, monkeypatch):
    monkeypatch.delenv("QNB_ALWAYS_COMPILE", raising=False)
    with capture_output():
        ip.run_cell_magic("qkernel", "-b cpu", OTHER)
        ip.run_cell("other_kernel(np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32))")
        ip.run_cell_magic("qkernel", "-b cpu", CELL)  # fresh_kernel, once, with the cache
    start = len(qnb.cache.events())
    with capture_output() as captured:
        ip.run_cell_magic("qkernel", "-b cpu --no-cache", CELL)
    assert ip.user_ns["seen_environment"] is None  # the cell's code saw no QNB_ALWAYS_COMPILE
    assert "QNB_ALWAYS_COMPILE" not in os.environ
    events = qnb.cache.events()[start:]
    # other_kernel in the cell and from its thread: memory hits; fresh_kernel compiled
    assert [(e.kernel, e.outcome) for e in events] == [
        ("other_kernel", "memory-hit"),
        ("other_kernel", "memory-hit"),
        ("fresh_kernel", "miss"),
    ]
    assert "fresh_kernel: compiled in" in captured.stdout
    assert NO_CACHE_REASON in captured.stdout
    assert ip.user_ns["fresh_kernel"].no_cache and not ip.user_ns["other_kernel"].no_cache


def test_a_decorated_kernel_in_a_no_cache_cell_gets_the_option_too(ip):
    cell = "@qnb.kernel(backend='cpu')\n" + OTHER.replace("other_kernel", "decorated_fresh")
    with capture_output():
        ip.run_cell_magic("qkernel", "", cell)
    with capture_output() as captured:
        ip.run_cell_magic("qkernel", "--no-cache", cell)
    assert ip.user_ns["decorated_fresh"].no_cache
    assert "decorated_fresh: compiled in" in captured.stdout


def test_other_threads_launching_during_a_no_cache_compile_still_hit():
    other = qnb.kernel(threaded_other, backend="cpu")
    a, out = np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32)
    other(a, out)
    fresh = qnb.kernel(threaded_fresh, backend="cpu", no_cache=True)
    start = len(qnb.cache.events())
    threads = [threading.Thread(target=other, args=(a, np.zeros_like(a))) for _ in range(4)]
    for thread in threads:
        thread.start()
    fresh(a, out)
    for thread in threads:
        thread.join()
    assert _outcomes("threaded_other")[-4:] == ["memory-hit"] * 4
    assert [e.outcome for e in qnb.cache.events()[start:] if e.kernel == "threaded_fresh"] == [
        "miss"
    ]
