"""Events, miss reasons, listeners, stats, explain and the ``qnb cache`` commands."""

import io
import json
import time

import pytest
from cache_fakes import FakeBackend, make_key, run_python

import qnb.cache
from qnb.cache import cli


def test_outcomes_and_event_fields(cache_dir):
    backend = FakeBackend()
    key = make_key()
    before = time.time()
    _, miss = backend.get(key)
    _, hit = backend.get(key)
    assert [e.outcome for e in qnb.cache.events()] == ["miss", "memory-hit"]
    assert miss.kernel == "k" and miss.backend == "fake"
    assert miss.key == key.digest and miss.short_key == key.short
    assert miss.components == key.components
    assert miss.reason == "first compile" and miss.differences == []
    assert miss.seconds > 0 and before <= miss.time <= time.time()
    assert hit.reason is None and hit.seconds < miss.seconds + 1


def test_miss_reason_names_what_changed_since_the_closest_earlier_key(cache_dir):
    backend = FakeBackend()
    backend.get(make_key(captured_use_alias=["bool", False]))
    backend.get(make_key(captured_use_alias=["bool", False], signature={"a": "f16"}))
    _, event = backend.get(make_key(captured_use_alias=["bool", True]))
    # The first key differs in one component, the second in two: the first is closest.
    assert event.reason == "captured.use_alias: False → True"
    assert [str(d) for d in event.differences] == [event.reason]


def test_several_differences_are_joined(cache_dir):
    backend = FakeBackend()
    backend.get(make_key())
    _, event = backend.get(make_key(captured_use_alias=["bool", True], captured_tile=["int", 32]))
    assert event.reason == "captured.tile: <absent> → 32; captured.use_alias: False → True"


def test_other_kernels_are_not_compared(cache_dir):
    backend = FakeBackend()
    backend.get(make_key(), name="one")
    _, event = backend.get(make_key(captured_x=["int", 1]), name="two")
    assert event.reason == "first compile"


def test_a_fresh_process_explains_its_miss_from_the_disk(cache_dir):
    code = (
        "import sys; from cache_fakes import FakeBackend, make_key\n"
        "_, e = FakeBackend().get(make_key(captured_use_alias=['bool', sys.argv[1] == 'on']))\n"
        "print(e.outcome, '|', e.reason)\n"
    )
    env = {"QNB_CACHE_DIR": str(cache_dir)}
    first = run_python(code.replace("sys.argv[1]", "'off'"), env=env)
    second = run_python(code.replace("sys.argv[1]", "'on'"), env=env)
    third = run_python(code.replace("sys.argv[1]", "'off'"), env=env)
    assert first.stdout.strip() == "miss | first compile", first.stderr
    assert second.stdout.strip() == "miss | captured.use_alias: False → True", second.stderr
    assert third.stdout.strip() == ("disk-hit | first launch in this process (found on disk)"), (
        third.stderr
    )


@pytest.fixture
def both_keys_on_disk(cache_dir):
    """A notebook re-run against a persistent cache: an earlier process compiled the
    kernel with the flag off and on, so this process loads both from disk."""
    code = (
        "from cache_fakes import FakeBackend, make_key\n"
        "for flag in (False, True):\n"
        "    FakeBackend().get(make_key(captured_use_alias=['bool', flag]))\n"
    )
    result = run_python(code, env={"QNB_CACHE_DIR": str(cache_dir)})
    assert result.returncode == 0, result.stderr
    return [make_key(captured_use_alias=["bool", flag]) for flag in (False, True)]


def test_a_disk_hit_says_what_changed_since_the_closest_key_seen_in_this_process(
    both_keys_on_disk,
):
    off, on = both_keys_on_disk
    backend = FakeBackend()
    _, first = backend.get(off)
    _, flipped = backend.get(on)
    _, back = backend.get(off)
    assert backend.compiles == 0
    assert (first.outcome, first.reason, first.differences) == (
        "disk-hit",
        "first launch in this process (found on disk)",
        [],
    )
    assert flipped.outcome == "disk-hit"
    assert flipped.reason == "captured.use_alias: False → True (found on disk)"
    assert [str(d) for d in flipped.differences] == ["captured.use_alias: False → True"]
    assert (back.outcome, back.reason) == ("memory-hit", None)


def test_explain_lists_disk_hits_with_their_reasons(both_keys_on_disk):
    backend = FakeBackend()
    for key in (*both_keys_on_disk, both_keys_on_disk[0]):
        backend.get(key)
    text = qnb.cache.explain("k")
    assert "0 misses and 3 hits (2 from disk) in this process" in text
    lines = text.splitlines()
    assert lines[-2].endswith(
        f"{both_keys_on_disk[0].short}  [fake]  first launch in this process (found on disk)"
    )
    assert lines[-1].endswith(
        f"{both_keys_on_disk[1].short}  [fake]  captured.use_alias: False → True (found on disk)"
    )


def test_cache_view_shows_a_disk_hits_reason(both_keys_on_disk):
    pytest.importorskip("anywidget")
    from qnb.viz import CacheView

    backend = FakeBackend()
    for key in both_keys_on_disk:
        backend.get(key)
    view = CacheView()
    try:
        rows = view.events
        assert [row["outcome"] for row in rows] == ["disk-hit", "disk-hit"]
        assert rows[1]["reason"] == "captured.use_alias: False → True (found on disk)"
        detail = view.select(rows[1]["n"]).splitlines()
        assert detail[1] == "served from the disk cache: every key component matched"
        assert detail[2:4] == [
            "not in memory: changed since the closest key this process has seen:",
            "  captured.use_alias: False → True",
        ]
        assert detail[4] == "key components:"
        first = view.select(rows[0]["n"]).splitlines()
        assert first[2] == "not in memory: first launch in this process (found on disk)"
    finally:
        view.close()


def test_memory_hits_compute_no_reason(cache_dir, monkeypatch):
    """The reason of a disk hit is found on the disk-hit path only: a memory hit (the
    lookup's and the launch fast path's) costs what it did."""
    backend = FakeBackend()
    backend.get(make_key())

    def refuse(*args):
        raise AssertionError("a memory hit looked for a reason")

    monkeypatch.setattr(qnb.cache.lookup, "disk_hit_reason", refuse)
    monkeypatch.setattr(qnb.cache.lookup, "miss_reason", refuse)
    _, hit = backend.get(make_key())
    qnb.cache.record_memory_hit("k", "fake", make_key(), 0.0)
    assert [e.outcome for e in qnb.cache.events()[-2:]] == ["memory-hit", "memory-hit"]
    assert hit.reason is None and qnb.cache.events()[-1].reason is None


def test_listeners_get_each_new_event_until_removed(cache_dir):
    seen = []
    qnb.cache.add_listener(seen.append)
    qnb.cache.add_listener(seen.append)  # adding twice is adding once
    backend = FakeBackend()
    try:
        backend.get(make_key())
        backend.get(make_key())
    finally:
        qnb.cache.remove_listener(seen.append)
    backend.get(make_key())
    assert [e.outcome for e in seen] == ["miss", "memory-hit"]


def test_a_failing_listener_does_not_break_a_lookup(cache_dir):
    def broken(event):
        raise RuntimeError("widget bug")

    qnb.cache.add_listener(broken)
    try:
        _, event = FakeBackend().get(make_key())
    finally:
        qnb.cache.remove_listener(broken)
    assert event.outcome == "miss"


def test_record_memory_hit_is_counted_and_read_back_as_an_event(cache_dir):
    # Its cost is measured side by side in benchmarks/bench_cache.py, not asserted here.
    key = make_key()
    n = 2_000
    for _ in range(n):
        qnb.cache.record_memory_hit("k", "fake", key, 1e-7)
    event = qnb.cache.events()[-1]
    assert (event.outcome, event.key, event.components, event.seconds) == (
        "memory-hit",
        key.digest,
        key.components,
        1e-7,
    )
    assert event.time > 0 and event.kernel == "k" and event.backend == "fake"
    assert qnb.cache.stats()["memory_hits"] == n


def test_a_listener_receives_each_memory_hit_as_it_happens(cache_dir):
    key = make_key()
    seen = []
    qnb.cache.add_listener(seen.append)
    try:
        qnb.cache.record_memory_hit("k", "fake", key, 0.0)
    finally:
        qnb.cache.remove_listener(seen.append)
    assert [(e.kernel, e.outcome, e.key) for e in seen] == [("k", "memory-hit", key.digest)]
    assert qnb.cache.events()[-1] is seen[0]


def test_events_are_bounded_but_counts_are_not(cache_dir):
    key = make_key()
    for _ in range(qnb.cache.lookup.MAX_EVENTS + 5):
        qnb.cache.record_memory_hit("k", "fake", key, 0.0)
    assert len(qnb.cache.events()) == qnb.cache.lookup.MAX_EVENTS
    assert qnb.cache.stats()["memory_hits"] == qnb.cache.lookup.MAX_EVENTS + 5


def test_stats(cache_dir):
    backend = FakeBackend()
    backend.get(make_key())
    backend.get(make_key())
    backend.get(make_key(captured_x=["int", 1]))
    stats = qnb.cache.stats()
    assert (stats["misses"], stats["memory_hits"], stats["disk_hits"]) == (2, 1, 0)
    assert stats["memory_entries"] == 2 and stats["disk_entries"] == 2 and stats["disk_bytes"] > 0
    assert stats["directory"] == str(cache_dir) and stats["disk_enabled"] is True
    json.dumps(stats)  # JSON-able for widgets and `qnb doctor`


def test_explain_shows_the_last_key_and_the_misses(cache_dir):
    backend = FakeBackend()
    backend.get(make_key(), name="mod.k")
    backend.get(make_key(captured_use_alias=["bool", True]), name="mod.k")
    backend.get(make_key(captured_use_alias=["bool", True]), name="mod.k")

    class KernelLike:
        name = "mod.k"

    for asked in ("mod.k", "k", KernelLike()):
        text = qnb.cache.explain(asked)
        assert "last key " + make_key(captured_use_alias=["bool", True]).short in text
        for component in qnb.cache.COMPONENTS:
            assert f"\n  {component} " in text
        assert "captured.use_alias: False → True" in text and "first compile" in text
        assert "2 misses and 1 hit" in text
    assert "no entries" in qnb.cache.explain("unknown")


def test_explain_in_a_fresh_process_reads_the_disk(cache_dir):
    backend = FakeBackend()
    backend.get(make_key())
    backend.get(make_key(captured_use_alias=["bool", True]))
    qnb.cache.lookup._events.clear()
    text = qnb.cache.explain("k")
    assert "no cache events in this process" in text
    assert "2 entries for kernel 'k'" in text
    assert "captured.use_alias: False → True" in text


def run_cli(*argv):
    out = io.StringIO()
    return cli.run(list(argv), out=out), out.getvalue()


def test_cli_list_stats_explain_clear(cache_dir):
    backend = FakeBackend(1000)
    backend.get(make_key(), name="saxpy")
    backend.get(make_key(captured_use_alias=["bool", True]), name="saxpy")

    code, out = run_cli("list")
    assert code == 0 and out.count("saxpy") == 2 and make_key().short in out
    code, out = run_cli("stats")
    assert code == 0 and str(cache_dir) in out and "entries    2" in out
    code, out = run_cli("explain", "saxpy")
    assert code == 0 and "captured.use_alias: False → True" in out
    code, out = run_cli("explain", "nothing")
    assert code == 1
    code, out = run_cli("clear")
    assert code == 0 and "removed 2 entries" in out
    assert run_cli("list")[1].startswith("no entries")


def test_cli_usage_errors(cache_dir, capsys):
    assert cli.run(["explain"]) == 2
    assert cli.run(["frobnicate"]) == 2


@pytest.mark.parametrize("argv", [["list"], ["stats"], ["clear"]])
def test_cli_on_a_missing_directory(tmp_path, monkeypatch, argv):
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path / "never-created"))
    assert run_cli(*argv)[0] == 0


def test_a_first_compile_on_another_backend_says_so_and_keeps_the_details(cache_dir):
    """The whole backend and compiler components differ on a first compile for a new
    backend: the reason says "first compile on cpu"; explain, the CLI's explain and
    CacheView's detail pane list what differs, the backend's name first."""
    backend = FakeBackend()
    wgpu = {"name": "wgpu", "adapter": "llvmpipe", "adapter_type": "CPU", "driver": "Mesa"}
    backend.get(make_key(backend=wgpu, compiler={"wgpu-native": "29"}))
    _, event = backend.get(make_key(backend={"name": "cpu"}, compiler={"numpy": "2.4"}))
    assert event.reason == "first compile on cpu"
    assert event.differences[0].label == "backend.name"
    assert str(event.differences[0]) == "backend.name: wgpu → cpu"
    explained = qnb.cache.explain("k").splitlines()
    assert any(line.endswith("[fake]  first compile on cpu") for line in explained)
    assert "      backend.name: wgpu → cpu" in explained
    disk = cli_output("explain", "k").splitlines()
    assert any(line.endswith("first compile on cpu") for line in disk)
    assert "      backend.name: wgpu → cpu" in disk
    from qnb.viz.events import event_detail

    detail = event_detail(event, components=False).splitlines()
    assert detail[1:4] == [
        "reason: first compile on cpu",
        "the closest earlier entry (another backend) differs in:",
        "  backend.name: wgpu → cpu",
    ]
    # Back on the first backend with a changed value: the reason names the change.
    _, again = backend.get(
        make_key(backend=wgpu, compiler={"wgpu-native": "29"}, captured_use_alias=["bool", True])
    )
    assert again.reason == "captured.use_alias: False → True"


def test_a_first_launch_on_another_backend_found_on_disk_says_so(cache_dir):
    backend = FakeBackend()
    on_cpu = make_key(backend={"name": "cpu"}, compiler={"numpy": "2.4"})
    backend.get(on_cpu)
    qnb.cache.lookup._memory.clear()
    qnb.cache.lookup._history.clear()
    backend.get(make_key())  # on "fake": a miss, now seen in this process
    _, event = backend.get(on_cpu)
    assert event.outcome == "disk-hit"
    assert event.reason == "first launch on cpu in this process (found on disk)"
    assert event.differences[0].label == "backend.name"


def cli_output(*argv) -> str:
    out = io.StringIO()
    cli.run(list(argv), out=out, err=out)
    return out.getvalue()
