"""Many processes and threads sharing one cache directory, and unusable directories."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from cache_fakes import FakeBackend, make_key, run_python

import qnb.cache
from qnb.cache import store

WORKER = r"""
import os, random, sys, time, warnings
warnings.simplefilter("error")  # no entry may ever be found corrupt
import qnb.cache
from qnb.cache import lookup
from cache_fakes import FakeBackend, make_key

worker = int(sys.argv[1]); start = float(sys.argv[2])
keys = [make_key(captured_n=["int", n % 4], captured_flag=["bool", n >= 4]) for n in range(8)]
backend = FakeBackend(binary_size=200_000)
while time.time() < start:
    time.sleep(0.001)
rng = random.Random(worker)
outcomes = {"miss": 0, "disk-hit": 0, "memory-hit": 0}
for round in range(4):
    order = keys[:]
    rng.shuffle(order)
    lookup._memory.clear()  # go to the disk every round
    for key in order:
        launcher, event = backend.get(key, name="shared_kernel")
        assert launcher((1, 1, 1), []) == key.digest, "wrong launcher"
        outcomes[event.outcome] += 1
print("OK", outcomes["miss"], outcomes["disk-hit"])
"""


def test_eight_processes_share_keys_safely(cache_dir):
    cache_dir.mkdir(mode=0o700)
    start = time.time() + 3.0
    env = dict(os.environ, QNB_CACHE_DIR=str(cache_dir))
    procs = []
    for worker in range(8):
        # Half of them always compile, so writers of the same key really overlap.
        worker_env = dict(env, QNB_ALWAYS_COMPILE="1" if worker % 2 else "0")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(worker), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_with_path(worker_env),
            )
        )
    results = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.startswith("OK"), (out, err)
    readers = [r for i, r in enumerate(results) if i % 2 == 0]
    assert sum(int(out.split()[2]) for out, _ in readers) > 0  # readers did hit the disk

    files = sorted(cache_dir.iterdir())
    assert all(not f.name.startswith(".") for f in files), "temp files left behind"
    assert len(files) == 8
    for path in files:
        digest = store.digest_from_filename(path)
        artifact = store.verify(path.read_bytes(), path, digest)
        assert artifact.text["digest"] == digest


def _with_path(env):
    from cache_fakes import HERE, REPO

    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    return env


def test_threads_share_one_launcher_per_key(cache_dir):
    backend = FakeBackend()
    keys = [make_key(captured_n=["int", n]) for n in range(4)]
    results = []

    def work():
        for key in keys * 5:
            launcher, _ = backend.get(key)
            results.append((key.digest, launcher((1, 1, 1), [])))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 * 20 and all(a == b for a, b in results)
    launchers = {qnb.cache.lookup.memory_launcher(k.digest) for k in keys}
    assert len(launchers) == 4


DEGRADED = r"""
import warnings, json
warnings.simplefilter("always")
import qnb.cache
from cache_fakes import FakeBackend, make_key
backend = FakeBackend()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    outcomes = []
    for n in range(3):
        for repeat in range(2):
            key = make_key(captured_n=["int", n])
            launcher, event = backend.get(key)
            assert launcher((1, 1, 1), []) == key.digest
            outcomes.append(event.outcome)
cache_warnings = [str(w.message) for w in caught if issubclass(w.category, qnb.cache.CacheWarning)]
print(json.dumps({"outcomes": outcomes, "warnings": cache_warnings, "compiles": backend.compiles,
                  "disk_enabled": qnb.cache.stats()["disk_enabled"]}))
"""


def _run_degraded(directory):
    result = run_python(DEGRADED, env={"QNB_CACHE_DIR": str(directory)})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _check_degraded(report, directory):
    assert report["outcomes"] == ["miss", "memory-hit"] * 3
    assert report["compiles"] == 3
    assert len(report["warnings"]) == 1, report["warnings"]
    assert str(directory) in report["warnings"][0] and "memory only" in report["warnings"][0]
    assert report["disk_enabled"] is False


def test_uncreatable_directory_degrades_to_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "a-regular-file"
    blocker.write_text("")  # nothing can be created below a file, not even by root
    directory = blocker / "cache"
    _check_degraded(_run_degraded(directory), directory)


def _make_unwritable(directory) -> str:
    """Make ``directory`` unwritable for this user; returns how, or skips."""
    os.chmod(directory, 0o500)
    if os.geteuid() != 0:
        return "chmod"
    # root ignores permission bits; the immutable attribute binds root too.
    os.chmod(directory, 0o700)
    chattr = shutil.which("chattr")
    if (
        chattr
        and subprocess.run([chattr, "+i", str(directory)], capture_output=True).returncode == 0
    ):
        try:
            (directory / "probe").write_text("x")
        except OSError:
            return "chattr"
        subprocess.run([chattr, "-i", str(directory)], capture_output=True)
    pytest.skip("cannot make a directory unwritable for root here (no chattr +i)")


def test_read_only_directory_degrades_to_memory_with_one_warning(tmp_path):
    directory = tmp_path / "read-only-cache"
    directory.mkdir()
    how = _make_unwritable(directory)
    try:
        _check_degraded(_run_degraded(directory), directory)
        assert list(directory.iterdir()) == []
    finally:
        if how == "chattr":
            subprocess.run(["chattr", "-i", str(directory)], capture_output=True)
        os.chmod(directory, 0o700)
