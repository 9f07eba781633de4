"""Shared test setup: a private cache dir, Mesa's runtime dir, and backend selection.

``backend_name`` is a fixture parametrised over every backend. A backend that cannot
run here is skipped with its stated reason, except wgpu when QNB_REQUIRE_WGPU=1 (CI):
then a missing adapter fails the test instead of skipping it.
"""

import os
import tempfile

import pytest

# Mesa (lavapipe) complains on stderr without a private runtime dir; set it before any
# backend is imported.
if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
    _runtime = tempfile.mkdtemp(prefix="qnb-xdg-")
    os.chmod(_runtime, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = _runtime

# Tests never touch the user's real kernel cache.
os.environ.setdefault("QNB_CACHE_DIR", tempfile.mkdtemp(prefix="qnb-test-cache-"))

BACKENDS = ("cpu", "wgpu", "cuda")


def require_backend(name: str) -> None:
    """Skip (or, for wgpu under QNB_REQUIRE_WGPU=1, fail) unless backend ``name`` runs here."""
    import qnb

    info = {b.name: b for b in qnb.backends()}[name]
    if info.available:
        return
    if name == "wgpu" and os.environ.get("QNB_REQUIRE_WGPU") == "1":
        pytest.fail(f"QNB_REQUIRE_WGPU=1 but the wgpu backend is unavailable: {info.reason}")
    pytest.skip(f"backend {name!r} unavailable: {info.reason}")


@pytest.fixture(params=BACKENDS)
def backend_name(request):
    """Each backend in turn; skips those that cannot run here (see require_backend)."""
    require_backend(request.param)
    return request.param


@pytest.fixture(params=[b for b in BACKENDS if b != "cpu"])
def gpu_backend_name(request):
    """Each non-reference backend in turn (to compare against cpu)."""
    require_backend(request.param)
    return request.param
