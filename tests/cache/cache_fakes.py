"""A stand-in backend for the cache tests: real Artifacts, real files, no compiler.

``compile_for(key)`` makes an artifact whose text and binary are derived from the key
(so a wrongly served entry is detectable), and counts compiles; ``load`` checks the
artifact against the key it was asked for before returning a launcher. Subprocess
scripts import this module too (tests put its directory on PYTHONPATH).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from qnb.backends.base import Artifact
from qnb.cache import CacheKey

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

BASE = {
    "qnb": {"version": "0.1.0", "cache_schema": 1},
    "source": {"k": "def k(a):\n    if qnb.static(use_alias):\n        a[0, 0] = 1\n"},
    "captured": {"use_alias": ["bool", False]},
    "signature": {"a": {"kind": "array", "dtype": "f32", "ndim": 2}},
    "backend": {"name": "fake"},
    "compiler": {"fake": "1"},
    "options": {"debug": False, "fast_math": False},
}


def make_key(**overrides) -> CacheKey:
    """BASE with whole components replaced, or ``captured_X=value`` entries set."""
    components = {name: dict(value) for name, value in BASE.items()}
    for name, value in overrides.items():
        if name.startswith("captured_"):
            components["captured"][name[len("captured_") :]] = value
        else:
            components[name] = value
    return CacheKey(components)


def expected_binary(digest: str, size: int = 0) -> bytes | None:
    if size == 0:
        return None
    block = hashlib.sha256(digest.encode()).digest()
    return (block * (size // len(block) + 1))[:size]


class FakeBackend:
    """compile/load callables for qnb.cache.get_or_compile, with counters."""

    def __init__(self, binary_size: int = 0):
        self.binary_size = binary_size
        self.compiles = 0
        self.loads: list[Artifact] = []

    def compile_for(self, key: CacheKey):
        def compile() -> Artifact:
            self.compiles += 1
            return Artifact(
                text={
                    "digest": key.digest,
                    "source": f"// kernel for {key.short}\n",
                    "marker": "compiled",
                },
                binary=expected_binary(key.digest, self.binary_size),
            )

        return compile

    def load_for(self, key: CacheKey):
        def load(artifact: Artifact):
            self.loads.append(artifact)
            if artifact.text.get("digest") != key.digest:
                raise AssertionError(
                    f"served the artifact of {artifact.text.get('digest')} for {key.digest}"
                )
            if artifact.binary != expected_binary(key.digest, self.binary_size):
                raise AssertionError("binary payload differs")

            def launcher(grid, args):
                return key.digest

            return launcher

        return load

    def get(self, key: CacheKey, name: str = "k"):
        import qnb.cache

        return qnb.cache.get_or_compile(
            name, "fake", key, self.compile_for(key), self.load_for(key)
        )


def run_python(
    code: str, env: dict | None = None, timeout: float = 120, args: tuple | list = ()
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that can import qnb and cache_fakes."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), full_env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def qnb_cache_in_turn(cache_dir, *commands, timeout: float = 120) -> list:
    """``qnb cache ARGV`` over ``cache_dir`` for each ARGV in ``commands``, in order, in one
    fresh process (tests/cli_in_turn.py); a CompletedProcess (returncode, stdout, stderr)
    for each."""
    from tests.cli_in_turn import run_in_turn

    jobs = [[{"QNB_CACHE_DIR": str(cache_dir)}, ["cache", *argv]] for argv in commands]
    return [
        subprocess.CompletedProcess(["qnb", "cache", *argv], status, out, err)
        for argv, (status, out, err) in zip(commands, run_in_turn(jobs, timeout=timeout))
    ]
