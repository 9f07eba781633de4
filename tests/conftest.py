"""Shared test setup: a private cache dir, Mesa's runtime dir, and backend selection.

``backend_name`` is a fixture parametrised over every backend (``cuda-host`` among them:
the cuda backend's generated code compiled by g++ and run on the host; this file puts the
tests' checked form of it, ``tests/cuda_host/backend.py``, in its place). A backend that cannot run here is skipped
with its stated reason, except that CI sets QNB_REQUIRE_WGPU=1 and QNB_REQUIRE_CUDA_HOST=1
(and the GPU check QNB_REQUIRE_CUDA=1): then a missing wgpu adapter, host compiler or
CUDA device fails the test instead of skipping it.
"""

import atexit
import os
import shutil
import tempfile

import pytest

# Mesa (lavapipe) complains on stderr without a private runtime dir; set it before any
# backend is imported. What this file makes goes when the test process ends (each
# pytest-xdist worker makes its own).
if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
    _runtime = tempfile.mkdtemp(prefix="qnb-xdg-")
    os.chmod(_runtime, 0o700)
    os.environ["XDG_RUNTIME_DIR"] = _runtime
    atexit.register(shutil.rmtree, _runtime, ignore_errors=True)

# Tests never touch the user's real kernel cache, and each test process has its own: a
# pytest-xdist worker inherits the cache dir its controller made, and makes another.
if os.environ.get("QNB_CACHE_DIR", "") in ("", os.environ.get("QNB_TEST_PROCESS_CACHE")):
    _cache = tempfile.mkdtemp(prefix="qnb-test-cache-")
    os.environ["QNB_CACHE_DIR"] = os.environ["QNB_TEST_PROCESS_CACHE"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

from qnb.backends import registry  # noqa: E402 (after the environment above)

registry._REGISTRY["cuda-host"] = "tests.cuda_host.backend:CheckedCudaHostBackend"

BACKENDS = ("cpu", "wgpu", "cuda", "cuda-host")
# CI sets the first two; scripts/gpu_check.sh sets QNB_REQUIRE_CUDA on the GPU machine, so
# a cuda test there fails instead of skipping when the backend cannot run (no CuPy, …).
REQUIRED_BY = {
    "wgpu": "QNB_REQUIRE_WGPU",
    "cuda-host": "QNB_REQUIRE_CUDA_HOST",
    "cuda": "QNB_REQUIRE_CUDA",
}


def require_backend(name: str) -> None:
    """Skip unless backend ``name`` runs here; fail instead where CI requires it."""
    info = registry.get(name).info()
    if info.available:
        return
    variable = REQUIRED_BY.get(name)
    if variable and os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but the {name} backend is unavailable: {info.reason}")
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


# --------------------------------------------------------------------------- test distribution

# `make test` runs the tests on pytest-xdist workers with --dist loadgroup, which here (the
# scheduler below) keeps a file's tests on one worker, as --dist loadfile does: some share a
# module's fixture (an IPython shell, a race report) or its state. The files named here are
# the exceptions: long ones whose tests each stand alone (no module state, cheap fixtures),
# handed out test by test, so no worker waits idle at the end on one long file.
SPLIT_FILES = frozenset(
    {
        "tests/backends/test_cuda_compile.py",
        "tests/backends/test_gpu_shapes.py",
        "tests/frontend/test_property.py",
    }
)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _scope(nodeid: str) -> str:
    path = _file(nodeid)
    return nodeid if path in SPLIT_FILES else path


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown without the plugin
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup: one work unit per file, per test in SPLIT_FILES, handed out in the
    order pytest_collection_modifyitems puts them. (pytest-xdist's own loadgroup reads
    ``xdist_group`` marks through ``Item._nodeid``, which pytest 9 no longer reads: there
    every test would be a unit of its own.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # the collection's order, below
    return FileScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """The files with a test marked slow first (a long file started last keeps one worker
    busy while the other waits), then the others, most tests first; then the single tests
    of SPLIT_FILES, the slow ones first, so the last handed out are short. Within a file
    the order stays."""
    scopes: dict[str, list] = {}
    for item in items:
        scopes.setdefault(_scope(item.nodeid), []).append(item)

    def order(scope):
        members = scopes[scope]
        slow = any(item.get_closest_marker("slow") for item in members)
        return (_file(scope) in SPLIT_FILES, not slow, -len(members))

    items[:] = [item for scope in sorted(scopes, key=order) for item in scopes[scope]]
