"""The collision that motivated qnb does not happen (DESIGN.md "Why the cache matters").

Each scenario runs real kernels on the cpu backend in fresh processes that share one
cache directory: the first process compiles one variant, the next runs the other
variant. Both answers must be right, and the second run must be a miss whose reason
names what changed. A third process going back to the first variant hits the disk.

The scenarios run side by side: the first process runs every scenario's first run (each
its own module and cache directory), the second every second run, the third every third
(where a process each spent ~1 s on the same imports).
"""

from __future__ import annotations

import json
import textwrap

import pytest
from cache_fakes import run_python

pytest.importorskip("qnb.kernel", reason="the kernel layer is not written yet")
pytest.importorskip("qnb.backends.cpu", reason="the cpu backend is not written yet")

# A driver for one process: for each scenario in turn (argv[1], a JSON list of [its
# directory, module, variant]), empties the process's memory level, imports the kernel
# module from its directory with its own cache directory, launches once on the cpu backend
# and reports the answer and the event (or the error).
DRIVER = r"""
import importlib, json, os, sys, traceback
import numpy as np
import qnb
qnb.set_backend("cpu")
sys.dont_write_bytecode = True  # a module edited within a second has the same mtime
reports = []
for directory, name, variant in json.loads(sys.argv[1]):
    os.environ["QNB_CACHE_DIR"] = os.path.join(directory, "cache")
    sys.path.insert(0, directory)
    x = (np.arange(256, dtype=np.float32).reshape(16, 16) / 3.0).astype(np.float32)
    y = np.zeros_like(x)
    qnb.cache.clear(disk=False)  # memory, events, miss history: as in a fresh process
    try:
        importlib.import_module(name).run(x, y, variant)
        event = [e for e in qnb.cache.events() if e.outcome != "memory-hit"][-1]
        reports.append({"y": y.tolist(), "outcome": event.outcome, "reason": event.reason,
                        "kernel": event.kernel})
    except Exception:
        reports.append({"error": traceback.format_exc()})
    sys.path.remove(directory)
print(json.dumps(reports))
"""

# scenario: its runs, in order, each (module, its source, variant: what its run() is given)
SCENARIOS = {}


def scenario(name: str, *runs) -> str:
    SCENARIOS[name] = runs
    return name


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """{scenario: [its runs' reports]}: run k of every scenario in process k."""
    import numpy as np

    base = tmp_path_factory.mktemp("scenarios")
    found = {name: [] for name in SCENARIOS}
    for k in range(max(len(runs) for runs in SCENARIOS.values())):
        jobs, names = [], []
        for name, runs in SCENARIOS.items():
            if k < len(runs):
                module, source, variant = runs[k]
                (base / name).mkdir(exist_ok=True)
                (base / name / f"{module}.py").write_text(textwrap.dedent(source))
                jobs.append([str(base / name), module, variant])
                names.append(name)
        env = {"QNB_CACHE": "1", "QNB_ALWAYS_COMPILE": "0"}
        result = run_python(DRIVER, env=env, args=[json.dumps(jobs)])
        assert result.returncode == 0, result.stderr
        for name, report in zip(names, json.loads(result.stdout.strip().splitlines()[-1])):
            if "y" in report:
                report["y"] = np.array(report["y"], dtype="float32")
            found[name].append(report)
    return found


def runs_of(reports, name) -> list[dict]:
    for report in reports[name]:
        assert "error" not in report, report["error"]
    return reports[name]


def x_input():
    import numpy as np

    return (np.arange(256, dtype=np.float32).reshape(16, 16) / 3.0).astype(np.float32)


def flip(name, module, source, first, second) -> str:
    """A scenario: ``first``, then ``second``, then ``first`` again, each in a fresh process."""
    return scenario(
        name, (module, source, first), (module, source, second), (module, source, first)
    )


def check_flip(reports, name, expect, reason):
    import numpy as np

    one, two, three = runs_of(reports, name)
    first, second = SCENARIOS[name][0][2], SCENARIOS[name][1][2]
    np.testing.assert_allclose(one["y"], expect(first), rtol=1e-6)
    assert (one["outcome"], one["reason"]) == ("miss", "first compile")

    np.testing.assert_allclose(two["y"], expect(second), rtol=1e-6)
    assert two["outcome"] == "miss"
    assert reason in two["reason"], two["reason"]

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


BOOL_FLIP = flip("bool", "flag_kernel", CAPTURED_BOOL, False, True)


def test_captured_bool_flip_is_a_miss_naming_the_flag(reports):
    check_flip(
        reports, BOOL_FLIP,
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


DTYPE_FLIP = flip("dtype", "dtype_kernel", CAPTURED_DTYPE, "f32", "f16")


def test_captured_dtype_flip_is_a_miss_naming_the_dtype(reports):
    import numpy as np

    two = check_flip(
        reports, DTYPE_FLIP,
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


TILE_FLIP = flip("tile", "tile_kernel", CAPTURED_INT, 16, 8)


def test_captured_tile_size_flip_is_a_miss_naming_it(reports):
    def expect(size):
        out = x_input().copy()
        out[size:, :] = 0
        out[:, size:] = 0
        return out

    check_flip(reports, TILE_FLIP, expect, "captured.TILE: 16 → 8")


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


SCALAR_FLIP = flip("scalar", "numpy_scalar_kernel", CAPTURED_NUMPY_SCALAR, "float", "np.float32")


def test_numpy_scalar_and_python_float_of_equal_value_never_share_an_entry(reports):
    check_flip(
        reports, SCALAR_FLIP,
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


TEMPLATE_FLIP = flip("template", "template_kernel", TEMPLATE, False, True)


def test_template_value_flip_is_a_miss_naming_the_parameter(reports):
    two = check_flip(
        reports, TEMPLATE_FLIP,
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


EDITED_FUNC = scenario(
    "edited-func",
    ("func_kernel", func_source("t + 1.0"), None),
    ("func_kernel", func_source("t * 3.0"), None),
)


def test_edited_func_is_a_miss_naming_its_source(reports):
    import numpy as np

    first, second = runs_of(reports, EDITED_FUNC)
    np.testing.assert_allclose(first["y"], x_input() + 1.0, rtol=1e-6)
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


# file_a's kernel, then file_b's (the same file but for one line) in the same directory
# and cache, then file_a's again.
SAME_LINE = scenario(
    "same-line",
    ("file_a", same_line_source("t + 5.0"), None),
    ("file_b", same_line_source("t - 5.0"), None),
    ("file_a", same_line_source("t + 5.0"), None),
)


def test_same_name_same_line_in_two_files_never_share_an_entry(reports):
    import numpy as np

    a, b, again = runs_of(reports, SAME_LINE)
    np.testing.assert_allclose(a["y"], x_input() + 5.0, rtol=1e-6)
    np.testing.assert_allclose(b["y"], x_input() - 5.0, rtol=1e-6)
    assert b["outcome"] == "miss"
    # The source component names each unit by module and qualname, so the two files'
    # kernels are different entries even at the same line.
    assert "source.file_a:k: text of 4 lines → <absent>" in b["reason"], b["reason"]
    assert "source.file_b:k: <absent> → text of 4 lines" in b["reason"], b["reason"]
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
