"""``cuda-host`` as users choose it: the CUDA C++ a kernel becomes, run on the CPU by g++.

Listed by ``qnb.backends()`` (available where a C++ compiler is, with the reason where
not), chosen with ``qnb.backend("cuda-host")`` or ``@qnb.kernel(backend="cuda-host")``,
never by "auto". Its compiles go through the kernel cache, whose entry holds the source
and the sha256 of the library built from it; a library is loaded only from bytes with
that hash, so nothing planted beside the cache runs. These run in fresh processes (no
test configuration: the backend as registered) against a cache directory of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import qnb
from qnb.backends import registry
from tests.conftest import require_backend

REPO = Path(__file__).resolve().parents[2]

KERNELS = """
import qnb

SCALE = {scale}


@qnb.kernel(backend="cuda-host")
def scaled(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], s: qnb.f32):
    i = qnb.program_id(0)
    t = qnb.Tile[16, 16].load(x, i * 16, 0)
    (t * s + SCALE).store(out, i * 16, 0)
"""

RUN = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import qnb
from qnb.backends.cuda_host import build
if "no-compile" in sys.argv:
    def refuse(*args, **kwargs):
        raise AssertionError("g++ ran")
    build.compile_text = refuse
compiles = []
original = build.compile_text
def counted(*args, **kwargs):
    compiles.append(str(args[1].name))
    return original(*args, **kwargs)
if "no-compile" not in sys.argv:
    build.compile_text = counted
import kernels
x = np.arange(48 * 16, dtype=np.float32).reshape(48, 16) / 7
out = np.full_like(x, np.nan)
kernels.scaled[3](x, out, 2.5)
right = bool(np.array_equal(out, x * np.float32(2.5) + np.float32(kernels.SCALE)))
events = [e.outcome for e in qnb.cache.events()]
library = [c for c in compiles if c.endswith(".so")]
print(json.dumps({"right": right, "events": events, "libraries": library,
                  "build_directory": str(build.build_directory())}))
"""


@pytest.fixture
def project(tmp_path):
    require_backend("cuda-host")
    (tmp_path / "kernels.py").write_text(KERNELS.format(scale=1.25))
    (tmp_path / "run.py").write_text(RUN)
    (tmp_path / "cache").mkdir(mode=0o700)
    return tmp_path


def _run(project: Path, *flags: str, **env) -> dict:
    environment = {**os.environ, "QNB_CACHE_DIR": str(project / "cache"), **env}
    done = subprocess.run(
        [sys.executable, str(project / "run.py"), str(project), *flags],
        capture_output=True,
        text=True,
        env=environment,
        cwd=REPO,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def _library_files(project: Path) -> list[Path]:
    return sorted((project / "cache" / "cuda-host-build").glob("*.so"))


def test_listed_chosen_and_never_auto(tmp_path):
    script = tmp_path / "listed.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, numpy as np, qnb
            from qnb.backends import registry
            records = {b.name: [b.available, b.reason, b.device] for b in qnb.backends()}
            @qnb.kernel
            def k(x, out):
                (qnb.Vec[16].load(x, 0) * 3.0).store(out, 0)
            x = np.arange(16, dtype=np.float32); out = np.zeros_like(x)
            with qnb.backend("cuda-host"):
                k(x, out)
            print(json.dumps({"records": records, "auto": registry._probe_auto(),
                "class": type(registry.get("cuda-host")).__module__,
                "right": bool((out == 3 * x).all()),
                "outcome": [e.backend for e in qnb.cache.events()]}))
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=REPO, timeout=240
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert list(result["records"]) == ["cuda", "wgpu", "cpu", "cuda-host"]
    available, reason, device = result["records"]["cuda-host"]
    assert available and reason is None and "CUDA C++ on the CPU" in device
    assert result["class"] == "qnb.backends.cuda_host" and result["right"]
    assert result["outcome"] == ["cuda-host"]
    assert result["auto"] != "cuda-host" and "cuda-host" not in registry.AUTO_ORDER


def test_unavailable_without_a_compiler_says_why(tmp_path):
    script = (
        "import qnb, json; r = {b.name: b for b in qnb.backends()}['cuda-host']; "
        "print(json.dumps([r.available, r.reason]))"
    )
    env = {**os.environ, "CXX": str(tmp_path / "no-such-compiler")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO
    )
    available, reason = json.loads(done.stdout.splitlines()[-1])
    assert not available and "no-such-compiler" in reason


def test_the_key_names_the_compiler_and_the_host_model():
    require_backend("cuda-host")
    from qnb.backends.cuda_host import CudaHostBackend, build

    backend, compiler = CudaHostBackend().key_components()
    assert backend["name"] == "cuda-host"
    assert backend["cxx"] == build.compiler()[1] and "[" in backend["cxx"]  # version, target
    assert backend["emulation"] == build.emulation_digest()
    assert compiler["flags"] == " ".join(build.CXXFLAGS)


def test_the_cache_entry_is_source_and_the_library_hash():
    require_backend("cuda-host")
    import hashlib

    from qnb.backends.cuda_host import CudaHostBackend, build

    @qnb.kernel
    def twice(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
        (qnb.Vec[16].load(x, 0) * 2.0).store(out, 0)

    ir = twice._lower_for((np.zeros(16, np.float32), np.zeros(16, np.float32)))[0]
    artifact = CudaHostBackend().compile(ir)
    assert artifact.binary is None and artifact.text["source"] == twice.source("cuda")
    library = artifact.text["library"]
    data = (build.build_directory() / library["name"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == library["sha256"]


def test_a_warm_process_loads_the_kept_library_without_compiling(project):
    cold = _run(project)
    assert cold["right"] and cold["events"] == ["miss"] and len(cold["libraries"]) == 1
    assert Path(cold["build_directory"]) == project / "cache" / "cuda-host-build"
    warm = _run(project, "no-compile")
    assert warm["right"] and warm["events"] == ["disk-hit"]


def _plant(project: Path, make_planted) -> Path:
    """Build the kernel, then put ``make_planted(kept library, another kernel's library)``
    in the kept library's place."""
    assert _run(project)["right"]
    (kept,) = _library_files(project)
    (project / "kernels.py").write_text(KERNELS.format(scale=99.0))  # another kernel
    assert _run(project)["right"]
    (other,) = [path for path in _library_files(project) if path != kept]
    (project / "kernels.py").write_text(KERNELS.format(scale=1.25))  # back to the first
    make_planted(kept, other)
    return kept


@pytest.mark.parametrize("how", ["other bytes", "symlink", "truncated"])
def test_a_planted_library_is_never_loaded(project, how):
    """The kept library is replaced by another kernel's (a real library that computes
    something else), by a link to it, or cut short: the warm process refuses it, builds
    the kernel again from the cached source, and its result is right."""

    def plant(kept: Path, other: Path) -> None:
        if how == "other bytes":
            kept.write_bytes(other.read_bytes())
        elif how == "symlink":
            kept.unlink()
            kept.symlink_to(other)
        else:
            kept.write_bytes(kept.read_bytes()[:4096])

    kept = _plant(project, plant)
    warm = _run(project)
    assert warm["events"] == ["disk-hit"] and warm["right"]
    assert warm["libraries"] == [kept.name]  # built again, under its own name
    assert not kept.is_symlink()


def test_a_build_directory_others_may_write_is_not_used(project):
    builds = project / "cache" / "cuda-host-build"
    builds.mkdir(mode=0o700)
    os.chmod(builds, 0o777)
    result = _run(project)
    assert result["right"]
    assert "not keeping cuda-host's builds in" in result["stderr"]
    assert "group or others may write" in result["stderr"]
    assert Path(result["build_directory"]) != builds and list(builds.iterdir()) == []


def test_without_the_disk_cache_builds_stay_in_the_process(project):
    result = _run(project, QNB_CACHE="0")
    assert result["right"] and result["events"] == ["miss"]
    assert not (project / "cache" / "cuda-host-build").exists()
    assert not Path(result["build_directory"]).exists()  # removed when the process ended


def test_source_and_device_arrays():
    require_backend("cuda-host")

    @qnb.kernel(backend="cuda-host")
    def add_one(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        (qnb.Vec[32].load(x, i * 32) + 1.0).store(out, i * 32)

    with qnb.backend("cuda-host"):
        x = qnb.to_device(np.arange(64, dtype=np.float32))
        out = qnb.to_device(np.zeros(64, np.float32))
        add_one[2](x, out)
    assert x.backend_name == "cuda-host"
    np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) + 1)
    assert add_one.source("cuda") == registry.get("cuda").render(add_one._lower_for((x, out))[0])


def test_the_build_directory_keeps_the_libraries_last_used(monkeypatch):
    """At most MAX_LIBRARIES stay (a sweep over a captured value makes one per value); a
    kernel whose library went is built again from its source when it loads."""
    require_backend("cuda-host")
    from qnb.backends.cuda_host import CudaHostBackend, build

    monkeypatch.setattr(build, "MAX_LIBRARIES", 2)
    backend = CudaHostBackend()
    artifacts = []
    for scale in (3.0, 4.0, 5.0):

        @qnb.kernel
        def times(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
            (qnb.Vec[16].load(x, 0) * scale).store(out, 0)

        ir = times._lower_for((np.zeros(16, np.float32), np.zeros(16, np.float32)))[0]
        artifacts.append((scale, backend.compile(ir)))
    kept = [path.name for path in build.build_directory().glob("*.so")]
    assert len(kept) <= 2
    assert artifacts[0][1].text["library"]["name"] not in kept  # the least recently used
    x = np.arange(16, dtype=np.float32)
    for scale, artifact in artifacts:
        out = np.zeros_like(x)
        backend.load(artifact)((1, 1, 1), [x, out])
        np.testing.assert_array_equal(out, x * np.float32(scale))
