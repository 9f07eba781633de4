"""Helpers shared by tests: define kernels from source text, as a notebook cell would."""

import linecache
import textwrap

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16

_counter = [0]


def define(source: str, namespace=None, prefix="test-cell"):
    """Exec ``source`` under a fresh linecache filename (like a notebook cell); returns
    (namespace, filename)."""
    _counter[0] += 1
    filename = f"<{prefix}-{_counter[0]}>"
    text = textwrap.dedent(source)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    scope = {"qnb": qnb, "Tile16": Tile16, "Vec16": Vec16, "np": np}
    scope.update(namespace or {})
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 - the test's own source
    return scope, filename


def skip_unless_dtype_runs(backend: str, dtype) -> None:
    """Skip where ``backend`` cannot run ``dtype`` here: f16 on a wgpu adapter without
    ``shader-f16`` (f64 on wgpu is not a skip: it must raise BackendError)."""
    if backend != "wgpu" or np.dtype(dtype) != np.float16:
        return
    from qnb.backends import get

    if not get("wgpu")._dev().has_f16:
        pytest.skip("this adapter has no shader-f16")
