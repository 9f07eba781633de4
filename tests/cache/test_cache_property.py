"""Property: two launches share a cache key iff the backend gets the same artifact.

Random combinations of captured values (a bool, an int, a float, a dtype), a Template
value and an argument dtype are launched on the cpu backend, one after another in
one process (the kernel re-reads its captured names at every launch). For each pair:
equal keys ⇔ identical cpu artifacts, and equal keys ⇒ identical WGSL; and every
answer is the right one, so no launch was ever served another variant's kernel.
"""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("qnb.kernel", reason="the kernel layer is not written yet")
pytest.importorskip("qnb.backends.cpu", reason="the cpu backend is not written yet")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qnb
import qnb.cache
from qnb.cache import CacheKey, canonical_json, store

MODULE = """
import qnb

FLAG = False
REPEAT = 1
SCALE = 0.5
DT = qnb.f32


@qnb.kernel
def varied(x: qnb.Array, y: qnb.Array[qnb.f32, 2], mode: qnb.Template):
    t = qnb.Tile16.load(x, 0, 0).astype(qnb.f32)
    if qnb.static(FLAG):
        t = t * SCALE
    else:
        t = t + SCALE
    for i in qnb.static(range(REPEAT)):
        t = t + 1.0
    if qnb.static(mode == 1):
        t = -t
    elif qnb.static(mode == 2):
        t = t * t
    t = t.astype(DT).astype(qnb.f32)
    t.store(y, 0, 0)
"""

CONFIGS = st.fixed_dictionaries(
    {
        "FLAG": st.booleans(),
        "REPEAT": st.integers(0, 2),
        "SCALE": st.sampled_from([0.5, 1.5, 2.25]),
        "DT": st.sampled_from(["f32", "f16"]),
        "mode": st.integers(0, 2),
        "x_dtype": st.sampled_from(["float32", "float64"]),
    }
)


def expected(config) -> np.ndarray:
    x = _x(config["x_dtype"])
    t = x.astype(np.float32)
    t = t * np.float32(config["SCALE"]) if config["FLAG"] else t + np.float32(config["SCALE"])
    for _ in range(config["REPEAT"]):
        t = t + np.float32(1.0)
    if config["mode"] == 1:
        t = -t
    elif config["mode"] == 2:
        t = t * t
    return t.astype(np.float16 if config["DT"] == "f16" else np.float32).astype(np.float32)


def _x(dtype) -> np.ndarray:
    return (np.arange(256).reshape(16, 16) / 7.0).astype(dtype)


@pytest.fixture
def module(cache_dir, tmp_path, monkeypatch):
    (tmp_path / "varied_kernel.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("varied_kernel", None)
    return importlib.import_module("varied_kernel")


def launch(module, config):
    """Run one config; returns (key digest, cpu artifact text, wgsl or None)."""
    for name in ("FLAG", "REPEAT", "SCALE"):
        setattr(module, name, config[name])
    module.DT = getattr(qnb, config["DT"])
    x, y = _x(config["x_dtype"]), np.zeros((16, 16), np.float32)
    with qnb.backend("cpu"):
        module.varied(x, y, config["mode"])
    np.testing.assert_allclose(y, expected(config), rtol=1e-3 if config["DT"] == "f16" else 1e-6)
    event = [e for e in qnb.cache.events() if e.kernel.endswith("varied")][-1]
    key = CacheKey(event.components)
    assert key.digest == event.key
    artifact, rejected = store.load(event.kernel, key)
    assert rejected is None and artifact is not None
    wgsl = None
    if config["x_dtype"] == "float32":  # WGSL has no f64
        wgsl = module.varied.source("wgsl", x, y, config["mode"])
    return key.digest, canonical_json(artifact.text), wgsl


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=CONFIGS, second=CONFIGS)
def test_same_key_iff_same_artifact(module, first, second):
    key_a, text_a, wgsl_a = launch(module, first)
    key_b, text_b, wgsl_b = launch(module, second)
    assert (key_a == key_b) == (text_a == text_b), (first, second)
    if key_a == key_b and wgsl_a is not None and wgsl_b is not None:
        assert wgsl_a == wgsl_b
    if wgsl_a is not None and wgsl_b is not None and wgsl_a != wgsl_b:
        assert key_a != key_b
