"""The collision that motivated qnb does not happen (DESIGN.md "Why the cache matters").

Each scenario runs real kernels on the cpu backend in fresh processes that share one
cache directory: the first process compiles one variant, the next runs the other
variant. Both answers must be right, and the second run must be a miss whose reason
names what changed. A third process going back to the first variant hits the disk.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from cache_fakes import run_python

pytest.importorskip("qnb.kernel", reason="the kernel layer is not written yet")
pytest.importorskip("qnb.backends.cpu", reason="the cpu backend is not written yet")

# A driver for one process: imports the kernel module from ``directory``, sets the
# variant, launches once on the cpu backend and reports the answer and the event.
DRIVER = r"""
import importlib, json, sys
import numpy as np
import qnb
sys.path.insert(0, sys.argv[1])
module = importlib.import_module(sys.argv[2])
qnb.set_backend("cpu")
x = (np.arange(256, dtype=np.float32).reshape(16, 16) / 3.0).astype(np.float32)
y = np.zeros_like(x)
module.run(x, y, json.loads(sys.argv[3]))
event = [e for e in qnb.cache.events() if e.outcome != "memory-hit"][-1]
print(json.dumps({"y": y.tolist(), "outcome": event.outcome, "reason": event.reason,
                  "kernel": event.kernel}))
"""


def run_variant(tmp_path, module: str, source: str, variant) -> dict:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    result = run_python(
        DRIVER,
        env={"QNB_CACHE_DIR": str(tmp_path / "cache"), "QNB_CACHE": "1", "QNB_ALWAYS_COMPILE": "0"},
        args=[str(tmp_path), module, json.dumps(variant)],
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["y"] = __import__("numpy").array(report["y"], dtype="float32")
    return report


def x_input():
    import numpy as np

    return (np.arange(256, dtype=np.float32).reshape(16, 16) / 3.0).astype(np.float32)


def check_flip(tmp_path, module, source, first, second, expect, reason):
    """Run ``first``, then ``second``, then ``first`` again, each in a fresh process."""
    import numpy as np

    one = run_variant(tmp_path, module, source, first)
    np.testing.assert_allclose(one["y"], expect(first), rtol=1e-6)
    assert (one["outcome"], one["reason"]) == ("miss", "first compile")

    two = run_variant(tmp_path, module, source, second)
    np.testing.assert_allclose(two["y"], expect(second), rtol=1e-6)
    assert two["outcome"] == "miss"
    assert reason in two["reason"], two["reason"]

    three = run_variant(tmp_path, module, source, first)
    np.testing.assert_allclose(three["y"], expect(first), rtol=1e-6)
    assert three["outcome"] == "disk-hit"
    return two


CAPTURED_BOOL = """
    import qnb

    use_alias = False


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(x, 0, 0)
        if qnb.static(use_alias):
            t = t * 2.0
        else:
            t = t + 100.0
        t.store(y, 0, 0)


    def run(x, y, variant):
        global use_alias
        use_alias = variant
        k(x, y)
"""


def test_captured_bool_flip_is_a_miss_naming_the_flag(tmp_path):
    check_flip(
        tmp_path, "flag_kernel", CAPTURED_BOOL, False, True,
        lambda flag: x_input() * 2.0 if flag else x_input() + 100.0,
        "captured.use_alias: False → True",
    )  # fmt: skip


CAPTURED_DTYPE = """
    import qnb

    DT = qnb.f32


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(x, 0, 0)
        t = t.astype(DT).astype(qnb.f32)
        t.store(y, 0, 0)


    def run(x, y, variant):
        global DT
        DT = getattr(qnb, variant)
        k(x, y)
"""


def test_captured_dtype_flip_is_a_miss_naming_the_dtype(tmp_path):
    import numpy as np

    two = check_flip(
        tmp_path, "dtype_kernel", CAPTURED_DTYPE, "f32", "f16",
        lambda dt: x_input().astype(np.float16).astype(np.float32) if dt == "f16" else x_input(),
        "captured.DT: f32 → f16",
    )  # fmt: skip
    assert not np.array_equal(two["y"], x_input())  # f16 rounding really happened


CAPTURED_INT = """
    import qnb

    TILE = 16


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.zeros(qnb.f32)
        t[:] = x[0:TILE, 0:TILE]
        t.store(y, 0, 0)


    def run(x, y, variant):
        global TILE
        TILE = variant
        k(x, y)
"""


def test_captured_tile_size_flip_is_a_miss_naming_it(tmp_path):
    def expect(size):
        out = x_input().copy()
        out[size:, :] = 0
        out[:, size:] = 0
        return out

    check_flip(tmp_path, "tile_kernel", CAPTURED_INT, 16, 8, expect, "captured.TILE: 16 → 8")


CAPTURED_NUMPY_SCALAR = """
    import numpy as np
    import qnb

    C = 1.0


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(x, 0, 0)
        if qnb.static(C + 1e-9 > 1.0):  # False in float32 arithmetic
            t = t * 2.0
        else:
            t = t + 100.0
        t.store(y, 0, 0)


    def run(x, y, variant):
        global C
        C = np.float32(1.0) if variant == "np.float32" else 1.0
        k(x, y)
"""


def test_numpy_scalar_and_python_float_of_equal_value_never_share_an_entry(tmp_path):
    check_flip(
        tmp_path, "numpy_scalar_kernel", CAPTURED_NUMPY_SCALAR, "float", "np.float32",
        lambda kind: x_input() + 100.0 if kind == "np.float32" else x_input() * 2.0,
        "captured.C: 1.0 → np.float32(1.0)",
    )  # fmt: skip


TEMPLATE = """
    import qnb


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2], negate: qnb.Template):
        t = qnb.Tile16.load(x, 0, 0)
        if qnb.static(negate):
            t = -t
        t.store(y, 0, 0)


    def run(x, y, variant):
        k(x, y, variant)
"""


def test_template_value_flip_is_a_miss_naming_the_parameter(tmp_path):
    two = check_flip(
        tmp_path, "template_kernel", TEMPLATE, False, True,
        lambda negate: -x_input() if negate else x_input(),
        "signature.negate:",
    )  # fmt: skip
    assert "False" in two["reason"] and "True" in two["reason"]


def func_source(body: str) -> str:
    return f"""
    import qnb


    @qnb.func
    def adjust(t):
        return {body}


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(x, 0, 0)
        adjust(t).store(y, 0, 0)


    def run(x, y, variant):
        k(x, y)
"""


def test_edited_func_is_a_miss_naming_its_source(tmp_path):
    import numpy as np

    first = run_variant(tmp_path, "func_kernel", func_source("t + 1.0"), None)
    np.testing.assert_allclose(first["y"], x_input() + 1.0, rtol=1e-6)
    second = run_variant(tmp_path, "func_kernel", func_source("t * 3.0"), None)
    np.testing.assert_allclose(second["y"], x_input() * 3.0, rtol=1e-6)
    assert second["outcome"] == "miss"
    assert second["reason"].startswith("source.") and "adjust" in second["reason"]
    assert "'return t + 1.0' → 'return t * 3.0'" in second["reason"]


def same_line_source(body: str) -> str:
    # Line for line the same file except for the body: the kernel starts on the same
    # line, so a key of (file-independent source position, name) would collide.
    return f"""
    import qnb


    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(x, 0, 0)
        t = {body}
        t.store(y, 0, 0)


    def run(x, y, variant):
        k(x, y)
"""


def test_same_name_same_line_in_two_files_never_share_an_entry(tmp_path):
    import numpy as np

    a = run_variant(tmp_path, "file_a", same_line_source("t + 5.0"), None)
    b = run_variant(tmp_path, "file_b", same_line_source("t - 5.0"), None)
    np.testing.assert_allclose(a["y"], x_input() + 5.0, rtol=1e-6)
    np.testing.assert_allclose(b["y"], x_input() - 5.0, rtol=1e-6)
    assert b["outcome"] == "miss"
    # The source component names each unit by module and qualname, so the two files'
    # kernels are different entries even at the same line.
    assert "source.file_a:k: text of 4 lines → <absent>" in b["reason"], b["reason"]
    assert "source.file_b:k: <absent> → text of 4 lines" in b["reason"], b["reason"]
    again = run_variant(tmp_path, "file_a", same_line_source("t + 5.0"), None)
    np.testing.assert_allclose(again["y"], x_input() + 5.0, rtol=1e-6)
    assert again["outcome"] == "disk-hit"


# The same kernel run by a given copy of the qnb package (argv[1] is put first on sys.path;
# argv[2] holds the kernel's module).
EDITED_QNB_DRIVER = r"""
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import json
import numpy as np
import qnb
from doubling import double
assert qnb.__file__.startswith(sys.argv[1]), qnb.__file__
x = np.arange(256, dtype=np.float32).reshape(16, 16)
y = np.zeros_like(x)
with qnb.backend("cpu"):
    double[1](x, y)
assert (y == 2 * x).all()
event = qnb.cache.events()[-1]
print(json.dumps({"outcome": event.outcome, "reason": event.reason}))
"""

DOUBLING = """
import qnb

@qnb.kernel
def double(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(x, 0, 0) * 2.0).store(y, 0, 0)
"""


def test_an_edited_qnb_compiler_never_reuses_what_the_old_one_compiled(tmp_path):
    """An editable install (or a patched release with the same version number) changes
    qnb's code but not its version: the ``qnb.code`` digest makes that a miss."""
    import pathlib
    import shutil

    import qnb

    package = pathlib.Path(qnb.__file__).parent
    copy = tmp_path / "site"
    shutil.copytree(package, copy / "qnb", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "doubling.py").write_text(DOUBLING)
    env = {"QNB_CACHE_DIR": str(tmp_path / "cache"), "QNB_CACHE": "1", "QNB_ALWAYS_COMPILE": "0"}

    def run(root) -> dict:
        args = [str(root), str(tmp_path / "kernels")]
        result = run_python(EDITED_QNB_DRIVER, env=env, args=args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])

    assert run(copy) == {"outcome": "miss", "reason": "first compile"}
    assert run(copy)["outcome"] == "disk-hit"
    lower = copy / "qnb" / "frontend" / "lower.py"
    lower.write_text(lower.read_text() + "\n# an edit to the compiler\n")
    edited = run(copy)
    assert edited["outcome"] == "miss"
    assert edited["reason"].startswith("qnb.code: "), edited["reason"]
    # The unedited package (this checkout) has the first digest again: a disk hit.
    assert run(package.parent)["outcome"] == "disk-hit"
