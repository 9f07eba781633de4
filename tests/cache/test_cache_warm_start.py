"""What a warm start pays: a disk hit on the cpu backend, in a fresh process, imports
nothing the hit path does not need (``logging``, ``tempfile``, ``base64``: a few ms of
a warm process's first launches), and the cache's log records still reach a handler
wherever one is configured."""

from __future__ import annotations

import json
import logging
import textwrap

import numpy as np
import pytest
from cache_fakes import run_python

import qnb

KERNEL = """
import qnb

SCALE = 2.0


@qnb.kernel
def scaled(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile16.load(x, i * 16, 0)
    t = t * SCALE + 1.0
    t.store(y, i * 16, 0)
"""

# One process: launch the kernel once on cpu; report the outcome, the answer's check and
# which of the modules a warm hit need not import are loaded.
DRIVER = r"""
import json, sys
import numpy as np
import qnb
qnb.set_backend("cpu")
sys.path.insert(0, sys.argv[1])
import warm_kernel
x = np.linspace(-1.0, 1.0, 32 * 16, dtype=np.float32).reshape(32, 16)
y = np.full_like(x, np.nan)
warm_kernel.scaled[2](x, y)
outcome = [e.outcome for e in qnb.cache.events()][-1]
print(json.dumps({"outcome": outcome, "right": bool(np.array_equal(y, x * 2.0 + 1.0)),
                  "loaded": [m for m in sys.argv[2:] if m in sys.modules]}))
"""

NOT_NEEDED = ("logging", "tempfile", "base64", "shutil", "subprocess")


def _launch(tmp_path, env) -> dict:
    result = run_python(DRIVER, env=env, args=(str(tmp_path), *NOT_NEEDED))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_warm_hit_imports_no_logging_tempfile_or_base64(tmp_path):
    (tmp_path / "warm_kernel.py").write_text(textwrap.dedent(KERNEL))
    env = {"QNB_CACHE_DIR": str(tmp_path / "cache")}
    cold = _launch(tmp_path, env)
    warm = _launch(tmp_path, env)
    assert (cold["outcome"], warm["outcome"]) == ("miss", "disk-hit")
    assert cold["right"] and warm["right"]
    assert warm["loaded"] == [], f"a warm hit imported {warm['loaded']}"


def test_compiles_are_logged_where_logging_is_on(cache_dir, caplog):
    x = np.linspace(-1.0, 1.0, 16 * 16, dtype=np.float32).reshape(16, 16)

    @qnb.kernel
    def logged(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        qnb.Tile16.load(x, 0, 0).store(y, 0, 0)

    with qnb.backend("cpu"), caplog.at_level(logging.INFO, logger="qnb.cache"):
        logged[1](x, np.zeros_like(x))
    messages = [r.getMessage() for r in caplog.records if r.name == "qnb.cache"]
    assert any(m.startswith("compiled logged [cpu]") for m in messages), messages


def test_a_discarded_entry_still_warns_through_logging(cache_dir, caplog):
    x = np.ones((16, 16), np.float32)

    @qnb.kernel
    def spoiled(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        qnb.Tile16.load(x, 0, 0).store(y, 0, 0)

    with qnb.backend("cpu"):
        spoiled[1](x, np.zeros_like(x))
        (entry,) = cache_dir.glob("spoiled-*.json")
        entry.write_text("{ not json")
        qnb.cache.clear(disk=False)
        with (
            caplog.at_level(logging.WARNING, logger="qnb.cache"),
            pytest.warns(qnb.cache.CacheWarning, match="discarding"),
        ):
            spoiled[1](x, np.zeros_like(x))
    assert any("discarding spoiled-" in r.getMessage() for r in caplog.records)


def test_a_disk_hit_checks_the_directory_once(cache_dir, monkeypatch):
    """The read manifest and the entry are read under one check of the directory's trust
    (owner, mode), not one each."""
    from qnb.cache import store

    x = np.linspace(-1.0, 1.0, 16 * 16, dtype=np.float32).reshape(16, 16)

    @qnb.kernel
    def checked_once(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        (qnb.Tile16.load(x, 0, 0) + 1.0).store(y, 0, 0)

    with qnb.backend("cpu"):
        checked_once[1](x, np.zeros_like(x))
        qnb.cache.clear(disk=False)
        checks = []
        real = store.usable_directory

        def counted():
            checks.append(1)
            return real()

        monkeypatch.setattr(store, "usable_directory", counted)
        y = np.zeros_like(x)
        checked_once[1](x, y)
    assert qnb.cache.events()[-1].outcome == "disk-hit"
    np.testing.assert_array_equal(y, x + 1.0)
    assert len(checks) == 1
