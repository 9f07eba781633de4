"""The magics through a real IPython shell: ``%load_ext qnb``, then cells as a user runs them."""

import linecache
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import qnb

STATUS = re.compile(
    r"^(\w+): (compiled in [\d.]+ ms|loaded from disk in [\d.]+ ms|memory hit) "
    r"\[(\w+)\] key [0-9a-f]{12}(?: \((.+)\))?$",
    re.M,
)

DOUBLE = """\
def double(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile16.load(a, 16 * i, 0)
    t = t * 2.0
    t.store(out, 16 * i, 0)
"""


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "qnb")
    shell.run_cell("import numpy as np\nimport qnb")
    return shell


def run(ip, line, cell):
    with capture_output() as captured:
        result = ip.run_cell_magic("qkernel", line, cell)
    return captured, result


def test_cell_defines_compiles_and_launches(ip):
    captured, _ = run(ip, "-b cpu", DOUBLE)
    match = STATUS.search(captured.stdout)
    assert match, captured.stdout
    assert match.group(1) == "double" and match.group(3) == "cpu"
    assert match.group(2).startswith(("compiled", "loaded", "memory"))
    double = ip.user_ns["double"]
    assert isinstance(double, qnb.Kernel)
    assert double.filename.startswith("<qkernel-cell-")
    # the cell's own numbering: line 1 is the "%%qkernel" line
    assert double.firstlineno == 2
    assert linecache.getline(double.filename, 2).startswith("def double(")
    a = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    out = np.zeros_like(a)
    double[2](a, out)
    np.testing.assert_array_equal(out, 2 * a)


def test_rerun_is_a_cache_hit(ip):
    run(ip, "-b cpu", DOUBLE)
    captured, _ = run(ip, "-b cpu", DOUBLE)
    match = STATUS.search(captured.stdout)
    assert match, captured.stdout
    assert match.group(2) == "memory hit" or match.group(2).startswith("loaded from disk")


def test_no_cache_compiles_again(ip):
    run(ip, "-b cpu", DOUBLE)
    captured, _ = run(ip, "-b cpu --no-cache", DOUBLE)
    assert STATUS.search(captured.stdout).group(2).startswith("compiled in"), captured.stdout


def test_unannotated_kernel_waits_for_its_first_launch(ip):
    captured, _ = run(ip, "", "def later(a, out):\n    i = qnb.program_id(0)\n")
    assert "later: defined; compiles at its first launch" in captured.stdout
    assert isinstance(ip.user_ns["later"], qnb.Kernel)


def test_decorated_functions_stay_as_they_are(ip):
    cell = "@qnb.kernel(backend='cpu')\n" + DOUBLE.replace("double", "decorated")
    captured, _ = run(ip, "", cell)
    assert STATUS.search(captured.stdout).group(1) == "decorated"
    assert isinstance(ip.user_ns["decorated"], qnb.Kernel)


def test_final_expression_is_the_cell_result(ip):
    _, result = run(ip, "-b cpu", DOUBLE + "double.name\n")
    assert result == "double"


def test_error_shows_the_cell_line_with_a_caret_and_no_traceback(ip):
    cell = (
        "def broken(a: qnb.Array[qnb.f32, 2]):\n"
        "    t = qnb.Tile16.zeros(qnb.f32)\n"
        "    t[:] = a[0:, 0:16]\n"
    )
    with capture_output() as captured:
        result = ip.run_cell("%%qkernel -b cpu\n" + cell)
    assert isinstance(result.error_in_exec, qnb.QnbSyntaxError)
    text = captured.stdout + captured.stderr
    assert "Traceback" not in text
    assert "QnbSyntaxError" in text and "start and stop" in text
    lines = text.splitlines()
    where = next(i for i, line in enumerate(lines) if "t[:] = a[0:, 0:16]" in line)
    # line 4 of the cell as shown: line 1 is "%%qkernel -b cpu"
    assert 'File "<qkernel-cell-' in lines[where - 1] and "line 4" in lines[where - 1]
    assert lines[where + 1].strip() == "^"


def test_python_errors_keep_a_traceback_that_starts_in_the_cell(ip):
    with capture_output() as captured:
        result = ip.run_cell("%%qkernel\nundefined_name + 1\n")
    assert isinstance(result.error_in_exec, NameError)
    assert "<qkernel-cell-" in captured.stdout
    assert "magics.py" not in captured.stdout


def test_python_syntax_errors_show_the_cell_line_only(ip):
    with capture_output() as captured:
        result = ip.run_cell("%%qkernel\ndef f(a):\n    x = = 1\n")
    assert isinstance(result.error_in_exec, qnb.QnbSyntaxError)
    assert "Traceback" not in captured.stdout and "magics.py" not in captured.stdout
    assert 'File "<qkernel-cell-' in captured.stdout and "line 3" in captured.stdout
    assert "x = = 1" in captured.stdout


@pytest.mark.parametrize(
    ("cell", "line", "shown"),
    [
        ("def k(x, x):\n    pass\n", 2, "def k(x, x):"),
        ("x = 1\nreturn x\n", 3, "return x"),
        ("for i in range(2):\n    pass\nbreak\n", 4, "break"),
        ("yield 1\n", 2, "yield 1"),
        ("nonlocal z\n", 2, "nonlocal z"),
        ("def f():\n    pass\ncontinue\n", 4, "continue"),
        ("def f(a):\n    return a\nawait f(1)\n", 4, "await f(1)"),
    ],
    ids=["duplicate-argument", "return", "break", "yield", "nonlocal", "continue", "await"],
)
def test_syntax_errors_found_by_compile_show_the_cell_line_only(ip, cell, line, shown):
    # The parser accepts these; Python's compile() rejects them.
    with capture_output() as captured:
        result = ip.run_cell("%%qkernel\n" + cell)
    text = captured.stdout + captured.stderr
    assert isinstance(result.error_in_exec, qnb.QnbSyntaxError), text
    package = str(Path(qnb.__file__).resolve().parent)  # no file of qnb's is shown
    assert "Traceback" not in text and "magics.py" not in text and package not in text
    lines = text.splitlines()
    where = next(i for i, row in enumerate(lines) if row.strip() == shown)
    assert 'File "<qkernel-cell-' in lines[where - 1] and f"line {line}" in lines[where - 1]
    assert lines[where + 1].strip() == "^"


@pytest.mark.parametrize(
    ("language", "expected"),
    [("cuda", "__global__"), ("wgsl", "@compute"), ("ir", "double")],
)
def test_show_displays_generated_code(ip, language, expected):
    captured, _ = run(ip, f"-b cpu --show {language}", DOUBLE)
    shown = [o.data for o in captured.outputs]
    assert shown, "nothing was displayed"
    assert expected in shown[-1]["text/plain"]
    assert "<" in shown[-1]["text/html"]


@pytest.mark.parametrize("option", ["--cache-detail", "--trace"])
def test_cache_detail_shows_the_reason_and_key_components(ip, option):
    """--cache-detail (and --trace, its name in the contract) shows the cache's view."""
    captured, _ = run(ip, f"-b cpu --no-cache {option}", DOUBLE)
    assert "key components:" in captured.stdout
    assert "signature" in captured.stdout and "captured" in captured.stdout


def test_qkernel_usage_names_the_cell_magic_and_its_cache_option():
    from qnb.magics import magics

    usage = " ".join(magics.QnbMagics.qkernel.parser.format_usage().split())
    assert usage.startswith(":: %%qkernel [-b BACKEND]"), usage
    assert "[--cache-detail]" in usage
    options = magics.QnbMagics.qkernel.parser.format_help()
    assert "--cache-detail, --trace" in options and "kernel.trace" in options


def test_qcache_list_stats_explain_clear(ip):
    run(ip, "-b cpu", DOUBLE)
    with capture_output() as captured:
        ip.run_line_magic("qcache", "")
        ip.run_line_magic("qcache", "stats")
        ip.run_line_magic("qcache", "explain double")
    assert re.search(r"^double\s+cpu\s+(miss|memory-hit|disk-hit)", captured.stdout, re.M)
    ip.run_cell("a = np.ones((32, 16), np.float32)\nout = np.zeros_like(a)")
    ip.run_cell("for _ in range(3): double[2](a, out)")
    with capture_output() as listed:
        ip.run_line_magic("qcache", "list")
    assert re.search(r"^double\s+cpu\s+memory-hit ×[3-9]", listed.stdout, re.M), listed.stdout
    assert "misses" in captured.stdout
    assert "double" in captured.stdout.split("misses", 1)[1]
    with capture_output() as captured:
        ip.run_line_magic("qcache", "clear")
    assert "cleared" in captured.stdout
    assert qnb.cache.events() == []


def test_qbackend_lists_and_sets(ip):
    with capture_output() as captured:
        ip.run_line_magic("qbackend", "cpu")
    assert re.search(r"^\* cpu", captured.stdout, re.M)
    assert "launches use 'cpu'" in captured.stdout
    with capture_output() as captured:
        ip.run_line_magic("qbackend", "")
    assert all(name in captured.stdout for name in ("cpu", "wgpu", "cuda"))
    qnb.set_backend("auto")


def test_qbackend_unknown_name_is_a_short_error(ip):
    with capture_output() as captured:
        result = ip.run_cell("%qbackend nosuch")
    assert isinstance(result.error_in_exec, qnb.BackendError)
    assert "Traceback" not in captured.stdout and "nosuch" in captured.stdout


def test_qbench_times_a_launch(ip):
    run(ip, "-b cpu", DOUBLE)
    ip.run_cell("a = np.ones((32, 16), np.float32)\nout = np.zeros_like(a)\nqnb.set_backend('cpu')")
    try:
        with capture_output() as captured:
            result = ip.run_line_magic("qbench", "-n 3 -w 1 -o double[2](a, out)")
    finally:
        qnb.set_backend("auto")
    assert len(result.times) == 3 and result.median > 0
    assert result.nbytes == 2 * 32 * 16 * 4  # counted from the IR: each tile in and out
    assert result.flops == 2 * 16 * 16  # t * 2.0 on one 16×16 tile in each of 2 programs
    assert "median" in captured.stdout and "GB/s" in captured.stdout
    assert "GFLOP/s" in captured.stdout and "counted from the IR: 512 FLOPs (mul 512)" in str(
        result
    )


def test_qbench_matmul_estimates_flops(ip):
    cell = """\
def mm(a: qnb.Array[qnb.f32, 2], b: qnb.Array[qnb.f32, 2], c: qnb.Array[qnb.f32, 2]):
    acc = qnb.Tile16.zeros(qnb.f32)
    for k in range(0, a.shape[1], 16):
        acc = qnb.mma(qnb.Tile16.load(a, 0, k), qnb.Tile16.load(b, k, 0), acc)
    acc.store(c, 0, 0)
"""
    run(ip, "-b cpu", cell)
    ip.run_cell(
        "a = np.ones((16, 32), np.float32)\nb = np.ones((32, 16), np.float32)\n"
        "c = np.zeros((16, 16), np.float32)"
    )
    with qnb.backend("cpu"), capture_output() as captured:
        result = ip.run_line_magic("qbench", "-n 2 -w 1 -o mm(a, b, c)")
    assert result.flops == 2 * 16 * 16 * 32
    assert "GFLOP/s" in captured.stdout
    np.testing.assert_array_equal(ip.user_ns["c"], np.full((16, 16), 32.0))


def test_qbench_shows_the_users_own_mistakes_only(ip):
    with capture_output() as captured:
        ip.run_cell("%qbench 1 +")
    assert "cannot parse '1 +'" in captured.stdout + captured.stderr
    assert "bench.py" not in captured.stdout + captured.stderr
    with capture_output() as captured:
        result = ip.run_cell("%qbench undefined_launch(1)")
    shown = re.sub(r"\x1b\[[0-9;]*m", "", captured.stdout)  # without the colours
    assert isinstance(result.error_in_exec, NameError)
    assert "undefined_launch(1)" in shown  # the expression's own line
    assert "magics.py" not in shown and "bench.py" not in shown


def test_cell_annotations_are_the_users_not_this_modules_future_import(ip):
    # magics.py has `from __future__ import annotations`; a cell must not inherit it.
    cell = (
        "class Point:\n"
        "    x: int\n"
        'def quoted(out: "qnb.Array[qnb.f32, 2]"):\n'
        "    qnb.Tile16.ones(qnb.f32).store(out, 0, 0)\n"
    )
    captured, _ = run(ip, "-b cpu", cell)
    assert ip.user_ns["Point"].__annotations__ == {"x": int}
    assert STATUS.search(captured.stdout).group(1) == "quoted", captured.stdout


@pytest.fixture
def bench_arrays(ip):
    run(ip, "-b cpu", DOUBLE)
    ip.run_cell("a = np.ones((32, 16), np.float32)\nout = np.zeros_like(a)")
    with qnb.backend("cpu"):
        yield


@pytest.mark.parametrize(
    "options", ["-n2", "-n 2", "--runs=2", "--runs 2", "-n 2 --", "-n2 -w0", "-w 0 -o -n 2"]
)
def test_qbench_option_spellings(ip, bench_arrays, options):
    with capture_output():
        result = ip.run_line_magic("qbench", f"-o {options} double[2](a, out)")
    assert len(result.times) == 2 and result.expr == "double[2](a, out)"


def test_qbench_help_shows_the_options(ip):
    for flag in ("-h", "--help"):
        with capture_output() as captured:
            result = ip.run_cell(f"%qbench {flag}")
        assert result.error_in_exec is None
        assert "-n RUNS" in captured.stdout and "--bytes" in captured.stdout


@pytest.mark.parametrize(
    "options, message",
    [
        ("-n -3", "-n/--runs must be 0 or more, not -3"),
        ("-w -1", "-w/--warmup must be 0 or more, not -1"),
        ("--warmup=-1", "-w/--warmup must be 0 or more, not -1"),
        ("--bytes -5", "--bytes must be 0 or more"),
        ("--flops nan", "--flops must be 0 or more"),
        ("-n", "option -n needs a value"),
        ("--bogus 3", "unknown option '--bogus'"),
        ("-o3", "option -o takes no value"),
        ("-n abc", "invalid int value"),
    ],
)
def test_qbench_refuses_bad_options_with_a_usage_error(ip, bench_arrays, options, message):
    line = options if options == "-n" else f"{options} double[2](a, out)"
    with capture_output() as captured:
        result = ip.run_cell(f"%qbench {line}")
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert message in captured.stdout + captured.stderr


@pytest.mark.parametrize("call", ["double[2](a=a, out=out)", "double[2](a, out=out)"])
def test_qbench_counts_keyword_array_arguments(ip, bench_arrays, call):
    with capture_output() as captured:
        result = ip.run_line_magic("qbench", f"-n 2 -w 1 -o {call}")
    assert result.nbytes == 2 * 32 * 16 * 4
    assert "GB/s" in captured.stdout


def test_qbench_waits_for_the_launch_backends_device(ip, monkeypatch):
    """After each run the backend the launch used is synchronised, and only it."""
    from qnb.backends import registry
    from qnb.magics import bench

    key = qnb.cache.CacheKey({name: {} for name in qnb.cache.COMPONENTS})
    waits = []

    class QueuedBackend:  # a backend whose launches return before the device is done
        def synchronize(self):
            waits.append(len(launches))

    launches = []

    def launch():
        launches.append(1)
        qnb.cache.record_memory_hit("k", "queued", key, 0.0)

    real_get = registry.get
    monkeypatch.setattr(
        registry, "get", lambda name: QueuedBackend() if name == "queued" else real_get(name)
    )
    result = bench.bench("launch()", {"launch": launch}, runs=3, warmup=2)
    assert result.backend == "queued"
    assert waits == [1, 2, 3, 4, 5]  # after every run, warm-up ones included


def test_qbench_waits_for_the_wgpu_queue(ip, monkeypatch):
    from qnb.backends.wgpu import WgpuBackend
    from tests.conftest import require_backend

    require_backend("wgpu")
    waits = []
    wait = WgpuBackend.synchronize

    def counted(self):
        waits.append(1)
        wait(self)  # the real wait, on the real device

    monkeypatch.setattr(WgpuBackend, "synchronize", counted)
    run(ip, "-b wgpu", DOUBLE.replace("double", "double_wgpu"))
    ip.run_cell(
        "a_dev = qnb.to_device(np.ones((32, 16), np.float32), backend='wgpu')\n"
        "out_dev = qnb.to_device(np.zeros((32, 16), np.float32), backend='wgpu')"
    )
    with capture_output():
        result = ip.run_line_magic("qbench", "-n 3 -w 1 -o double_wgpu[2](a_dev, out_dev)")
    assert result.backend == "wgpu" and len(waits) == 4
    np.testing.assert_array_equal(ip.user_ns["out_dev"].numpy(), np.full((32, 16), 2.0))


@pytest.mark.parametrize("line", ["stats extra", "clear extra", "list extra"])
def test_qcache_refuses_an_argument_its_action_does_not_take(ip, line):
    with capture_output() as captured:
        result = ip.run_cell(f"%qcache {line}")
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "takes no argument" in captured.stdout + captured.stderr


def test_qcache_clear_says_what_it_could_not_remove(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path))
    blocked = tmp_path / f"k-{'f' * 64}.json"
    blocked.mkdir()  # unlink fails for a directory, even for root
    with capture_output() as captured:
        result = ip.run_cell("%qcache clear --disk")
    shown = captured.stdout + captured.stderr
    assert isinstance(result.error_in_exec, OSError)
    assert f"could not remove 1 entry: {blocked.name}: Is a directory" in shown
    assert "Traceback" not in shown and "CacheWarning" not in shown


def test_qcache_clear_empties_memory_and_keeps_the_disk_unless_asked(ip, tmp_path, monkeypatch):
    """The disk cache is shared by every process: %qcache clear leaves it and says how
    many entries it kept; --disk deletes them and says how many."""
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("QNB_CACHE", raising=False)
    monkeypatch.delenv("QNB_ALWAYS_COMPILE", raising=False)
    qnb.cache.clear()
    run(ip, "-b cpu", DOUBLE.replace("double", "kept_one"))
    run(ip, "-b cpu", DOUBLE.replace("double", "kept_two"))
    with capture_output() as captured:
        ip.run_line_magic("qcache", "clear")
    assert captured.stdout.strip() == (
        "qnb kernel cache: cleared this process's memory level (2 compiled kernels, its "
        f"events and counts); the disk cache in {tmp_path / 'cache'} is kept: 2 entries "
        "there (%qcache clear --disk deletes them, for every process)"
    )
    assert qnb.cache.events() == [] and qnb.cache.stats()["disk_entries"] == 2
    captured, _ = run(ip, "-b cpu", DOUBLE.replace("double", "kept_one"))
    assert "kept_one: loaded from disk" in captured.stdout
    with capture_output() as captured:
        ip.run_line_magic("qcache", "clear --disk")
    assert captured.stdout.strip() == (
        "qnb kernel cache: cleared this process's memory level (1 compiled kernel, its "
        f"events and counts); removed 2 entries from {tmp_path / 'cache'}"
    )
    assert qnb.cache.stats()["disk_entries"] == 0
    with capture_output() as captured:
        result = ip.run_cell("%qcache list --disk")
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "only %qcache clear does" in captured.stdout + captured.stderr


def test_qcache_stats_rounds_seconds(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path / "cache"))
    qnb.cache.clear()
    run(ip, "-b cpu", DOUBLE.replace("double", "timed"))
    with capture_output() as captured:
        ip.run_line_magic("qcache", "stats")
    lines = dict(line.split(None, 1) for line in captured.stdout.splitlines())
    assert lines["misses"] == "1"
    for name in ("compile_seconds", "disk_load_seconds"):
        assert re.fullmatch(r"\d+\.\d{1,3}", lines[name]), lines[name]


# ---------------------------------------------------------------------- why it recompiled

SCALED = """\
def scaled(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(a, 0, 0) * ALPHA).store(out, 0, 0)
"""


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("QNB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("QNB_CACHE", raising=False)
    monkeypatch.delenv("QNB_ALWAYS_COMPILE", raising=False)
    qnb.cache.clear()
    yield tmp_path / "cache"
    qnb.cache.clear()


def statuses(ip, cell, values):
    """The status line of ``cell`` run once per value of ALPHA, as (outcome, reason)."""
    found = []
    for value in values:
        ip.run_cell(f"ALPHA = {value!r}")
        captured, _ = run(ip, "-b cpu", cell)
        match = STATUS.search(captured.stdout)
        assert match, captured.stdout
        found.append((match.group(2).split(" in ")[0], match.group(4)))
    return found


def test_status_line_says_why_a_kernel_recompiled(ip, own_cache):
    assert statuses(ip, SCALED, [2.0, 3.0, 2.0]) == [
        ("compiled", None),  # the first compile: nothing to explain
        ("compiled", "captured.ALPHA: 2.0 → 3.0"),
        ("memory hit", None),
    ]


def test_status_line_says_why_a_kernel_was_loaded_from_disk(ip, own_cache):
    """A notebook re-run against a persistent cache: an earlier process compiled both."""
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'qnb')\n"
        "ip.run_cell('import qnb')\n"
        "for value in (2.0, 3.0):\n"
        "    ip.run_cell(f'ALPHA = {value!r}')\n"
        f"    ip.run_cell_magic('qkernel', '-b cpu', {SCALED!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.count("compiled in") == 2, done.stderr
    assert statuses(ip, SCALED, [2.0, 3.0]) == [
        ("loaded from disk", None),  # the first in this process: nothing to explain
        ("loaded from disk", "captured.ALPHA: 2.0 → 3.0"),
    ]
    with capture_output() as captured:
        ip.run_line_magic("qcache", "explain scaled")
    assert "captured.ALPHA: 2.0 → 3.0 (found on disk)" in captured.stdout


def test_trace_shows_a_disk_hits_reason(ip, own_cache, monkeypatch):
    from qnb.magics import magics

    class Event:  # a disk hit as qnb.cache records one
        kernel, backend, outcome, short_key, seconds = "scaled", "cpu", "disk-hit", "0" * 12, 0.001
        components = {"captured": {"ALPHA": 3.0}}
        differences = ["captured.ALPHA: 2.0 → 3.0"]
        reason = "captured.ALPHA: 2.0 → 3.0 (found on disk)"

    class Kernel:
        name, is_fully_annotated = "scaled", True

        def specialize(self):  # (what a launch resolves: its compile() is the event)
            return self

        def compile(self):
            return Event()

    args = magics.parse_argstring(magics.QnbMagics.qkernel, "--trace")
    with capture_output() as captured:
        ip.magics_manager.registry["QnbMagics"]._compile_and_report(Kernel(), args)
    lines = captured.stdout.splitlines()
    assert lines[0].endswith("(captured.ALPHA: 2.0 → 3.0)")
    assert lines[3:5] == [
        "  not in memory: changed since the closest key this process has seen:",
        "    captured.ALPHA: 2.0 → 3.0",
    ]


def test_a_long_reason_is_cut_short_on_the_status_line():
    from qnb.magics.magics import REASON_CHARS, _short_reason

    class Event:
        outcome, reason = "miss", "…"
        differences = [f"captured.FLAG_NUMBER_{i}: False → True" for i in range(6)]

    text = _short_reason(Event())
    assert text.startswith("captured.FLAG_NUMBER_0: False → True; captured.FLAG_NUMBER_1:")
    assert text.endswith("; +4 more") and len(text) <= REASON_CHARS + len("; +4 more")
    Event.differences = ["source.k: text changed at line 3: " + "'x' " * 60]
    text = _short_reason(Event())
    assert len(text) == REASON_CHARS and text.endswith("…")


# ------------------------------------------------------------- a definition that fails

WORKING = """\
{decorator}def k1(a: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    t = qnb.Tile16.load(a, 0, 0)
    (t * 2.0).store(out, 0, 0)
"""
BROKEN = WORKING.replace("    (t * 2.0)", "    t[:] = a[0:, 0:16]\n    (t * 2.0)")


@pytest.mark.parametrize("decorator", ["", "@qnb.kernel(backend='cpu')\n"])
def test_a_failed_redefinition_leaves_no_stale_kernel(ip, decorator):
    run(ip, "-b cpu", WORKING.format(decorator=decorator))
    ip.run_cell("a = np.ones((16, 16), np.float32)\nout = np.zeros_like(a)")
    assert ip.run_cell("k1(a, out)").error_in_exec is None

    with capture_output():
        result = ip.run_cell("%%qkernel -b cpu\n" + BROKEN.format(decorator=decorator))
    error = result.error_in_exec
    assert isinstance(error, qnb.QnbSyntaxError)

    for launch in ("k1(a, out)", "k1[1](a, out)", "k1.source('ir')"):
        with capture_output() as captured:
            again = ip.run_cell(launch)
        assert again.error_in_exec is error, launch  # the same error, not a RuntimeError
        shown = captured.stdout + captured.stderr
        assert "'k1' is not a kernel: its last %%qkernel definition failed" in shown
        assert 'File "<qkernel-cell-' in shown and "t[:] = a[0:, 0:16]" in shown
        assert "Traceback" not in shown
    assert "definition failed (QnbSyntaxError" in repr(ip.user_ns["k1"])

    run(ip, "-b cpu", WORKING.format(decorator=decorator))  # fixed: a kernel again
    assert isinstance(ip.user_ns["k1"], qnb.Kernel)
    assert ip.run_cell("k1(a, out)").error_in_exec is None


def test_the_cells_other_functions_become_kernels_when_one_fails(ip):
    cell = BROKEN.format(decorator="") + DOUBLE.replace("double", "fine_one")
    with capture_output():
        result = ip.run_cell("%%qkernel -b cpu\n" + cell)
    assert isinstance(result.error_in_exec, qnb.QnbSyntaxError)
    assert isinstance(ip.user_ns["fine_one"], qnb.Kernel)


def test_an_error_at_a_launch_in_the_cell_keeps_its_kernel(ip):
    cell = (
        "def needs_2d(a: qnb.Array[qnb.f32, 2]):\n"
        "    qnb.Tile16.load(a, 0, 0).store(a, 0, 0)\n"
        "needs_2d(np.ones(16, np.float32))\n"
    )
    with capture_output():
        result = ip.run_cell("%%qkernel -b cpu\n" + cell)
    assert isinstance(result.error_in_exec, qnb.QnbError)
    assert isinstance(ip.user_ns["needs_2d"], qnb.Kernel)


# ------------------------------------------------------------------------ generated code


def test_show_cuda_leaves_out_the_helper_prelude(ip):
    captured, _ = run(ip, "-b cpu --show cuda", DOUBLE)
    shown = captured.outputs[-1].data
    text = shown["text/plain"]
    full = ip.user_ns["double"].source("cuda")
    assert full.count("\n") > 60 and "namespace qnb {" in full and "#line" in full
    lines = text.splitlines()
    assert lines[0] == "// double: CUDA C++"
    note = next(line for line in lines if "prelude lines" in line)
    assert "double.source('cuda') has the full text" in note
    omitted = int(re.search(r"\((\d+) prelude lines", note).group(1))
    entry = full.splitlines().index(
        next(x for x in full.splitlines() if x.startswith('extern "C"'))
    )
    assert 40 < omitted < entry
    assert lines[lines.index(note) + 1].startswith('extern "C" __global__')
    assert "namespace qnb {" not in text and "floordiv_" not in text
    assert not any(line.lstrip().startswith("#line") for line in lines)
    assert "floordiv_" in full and "floordiv_" not in shown["text/html"]
    assert len(lines) < len(full.splitlines()) - 40


def test_show_wgsl_is_shown_whole(ip):
    captured, _ = run(ip, "-b cpu --show wgsl", DOUBLE)
    text = captured.outputs[-1].data["text/plain"]
    assert text == "// double: WGSL\n" + ip.user_ns["double"].source("wgsl")


# ------------------------------------------------------------------------------ %qbench


def test_qbench_result_repr_is_a_summary(ip, bench_arrays):
    with capture_output():
        result = ip.run_line_magic("qbench", "-o -n 1000 -w 0 double[2](a, out)")
    assert len(result.times) == 1000  # the data stays there
    shown = ip.display_formatter.format(result)[0]["text/plain"]
    assert shown == repr(result) and "\n" not in shown and len(shown) < 200
    assert shown.startswith("<BenchResult double[2](a, out) [cpu]: median ")
    assert "1000 runs" in shown and "GB/s" in shown


def test_qbench_runs_on_the_backend_it_is_given(ip):
    run(ip, "", DOUBLE.replace("double", "double_anywhere"))  # no backend of its own
    ip.run_cell("a = np.ones((32, 16), np.float32)\nout = np.zeros_like(a)")
    from qnb.backends import registry

    before = registry.current_name()
    with capture_output() as captured:
        result = ip.run_line_magic("qbench", "-o -n 2 -w 1 -b cpu double_anywhere[2](a, out)")
    assert result.backend == "cpu" and "[cpu]" in captured.stdout
    assert registry.current_name() == before
    with capture_output() as captured:
        refused = ip.run_cell("%qbench -b nosuch double_anywhere[2](a, out)")
    assert isinstance(refused.error_in_exec, qnb.BackendError)
    assert "nosuch" in captured.stdout and "Traceback" not in captured.stdout


# ------------------------------------------------------------------- cell file names


def test_cell_file_names_say_the_execution_count_and_are_never_reused(ip):
    count = ip.execution_count
    with capture_output():
        ip.run_cell("%%qkernel -b cpu\n" + DOUBLE.replace("double", "counted"), store_history=True)
    assert ip.user_ns["counted"].filename == f"<qkernel-cell-In[{count}]>"
    names = set()
    for _ in range(3):  # one execution count, three cells (run_cell_magic stores no history)
        run(ip, "-b cpu", DOUBLE.replace("double", "again"))
        names.add(ip.user_ns["again"].filename)
    assert len(names) == 3


RELOADED = """\
def {name}(x: qnb.Array[qnb.f32, 1]):
    x[0] = x[{index}]{extra}
"""


def test_reload_ext_does_not_reuse_cell_file_names(ip):
    """After %reload_ext qnb (a new QnbMagics) a cell's file name is still new: a failed
    redefinition of an older kernel is bound to a FailedDefinition."""
    run(ip, "-b cpu", RELOADED.format(name="before_reload", index=5, extra=""))
    old = ip.user_ns["before_reload"]
    with capture_output():
        ip.run_line_magic("reload_ext", "qnb")
    redefined = RELOADED.format(name="before_reload", index=1, extra="\n    y = {3: 1}")
    with capture_output():
        failed = ip.run_cell("%%qkernel -b cpu\n" + redefined)
    assert isinstance(failed.error_in_exec, qnb.QnbSyntaxError)
    assert failed.error_in_exec.filename != old.filename
    with capture_output():
        again = ip.run_cell("before_reload(np.ones(2, np.float32))")
    assert again.error_in_exec is failed.error_in_exec  # not the older kernel, run


def test_an_older_kernels_errors_keep_naming_its_own_cell(ip):
    from qnb.magics.magics import QnbMagics

    before, after = QnbMagics(shell=ip), QnbMagics(shell=ip)  # as around %reload_ext qnb
    with capture_output():
        before.qkernel("-b cpu", RELOADED.format(name="from_before", index=5, extra=""))
        after.qkernel("-b cpu", "\n" * 3 + RELOADED.format(name="from_after", index=0, extra=""))
    old = ip.user_ns["from_before"]
    assert old.filename != ip.user_ns["from_after"].filename
    with pytest.raises(IndexError) as raised:
        old(np.ones(2, np.float32))  # out of range: x has 2 elements
    assert raised.value.filename == old.filename
    assert raised.value.source_line.strip() == "x[0] = x[5]"


# ------------------------------------------------- a kernel that uses a failed function

FAILED_HELPER = """\
@qnb.func
def failed_helper(t):
    y = {1: 2}
    return t
"""
USES_HELPER = """\
def uses_helper(x: qnb.Array[qnb.f32, 2]):
    t = qnb.Tile16.load(x, 0, 0)
    failed_helper(t).store(x, 0, 0)
"""


def test_a_kernel_reading_a_failed_definition_says_that_it_failed(ip):
    with capture_output():
        first = ip.run_cell("%%qkernel -b cpu\n" + FAILED_HELPER)
    assert isinstance(first.error_in_exec, qnb.QnbSyntaxError)
    for cell in ("%%qkernel -b cpu\n" + USES_HELPER, "uses_helper(np.ones((16, 16), np.float32))"):
        with capture_output() as captured:
            result = ip.run_cell(cell)
        error = result.error_in_exec
        assert isinstance(error, qnb.QnbCaptureError), cell
        shown = captured.stdout + captured.stderr
        assert (
            "a kernel reads 'failed_helper', whose last %%qkernel definition failed "
            "(QnbSyntaxError: dicts cannot be used inside a kernel)" in shown
        )
        assert "FailedDefinition" not in shown and "pass it as a parameter" not in shown
        # the caret is at the helper's own failing line
        assert (error.filename, error.source_line.strip()) == (
            first.error_in_exec.filename,
            "y = {1: 2}",
        )


# ------------------------------------------------------- errors keep the user's frames

WRAPPED = """\
@qnb.kernel(backend="cpu")
def wants_f32(x: qnb.Array[qnb.f32, 2]):
    qnb.Tile16.load(x, 0, 0).store(x, 0, 0)
def wrapper(a):
    return wants_f32(a.astype(np.float64))
"""


@pytest.mark.parametrize(
    "cell, first_frame",
    [
        ("%qbench -n 1 wrapper(np.ones((16, 16), np.float32))", 'File "<qbench>", line 1'),
        (
            "%%qkernel -b cpu\n" + DOUBLE.replace("double", "beside")
            + "wrapper(np.ones((16, 16), np.float32))\n",
            'File "<qkernel-cell-',
        ),
    ],
)  # fmt: skip
def test_an_error_through_the_users_code_keeps_their_frames(ip, cell, first_frame):
    """As in a plain cell: the expression's (or cell's) line, the user's function, then
    the error with its caret; not the magic's call nor qnb's frames."""
    ip.run_cell(WRAPPED)
    with capture_output() as captured:
        result = ip.run_cell(cell)
    assert isinstance(result.error_in_exec, qnb.QnbTypeError)
    lines = (captured.stdout + captured.stderr).splitlines()
    start = lines.index("Traceback (most recent call last):")
    assert lines[start + 1].strip().startswith(first_frame)
    assert "wrapper(np.ones((16, 16), np.float32))" in lines[start + 2]
    assert "in wrapper" in lines[start + 3]
    assert "return wants_f32(a.astype(np.float64))" in lines[start + 4]
    shown = "\n".join(lines)
    assert "qnb.QnbTypeError: array 'x' must be f32, got f64" in shown
    assert "run_cell_magic" not in shown and "run_line_magic" not in shown
    assert "magics.py" not in shown and "bench.py" not in shown


# ------------------------------------------------------- %qbench: bytes of launches only


def test_qbench_estimates_bytes_for_a_kernel_launch_only(ip, bench_arrays):
    ip.run_cell("def launches(a, out):\n    double[2](a, out)\n")
    for expression in ("np.sum(a)", "launches(a, out)"):  # not a launch / not one we can see
        with capture_output() as captured:
            result = ip.run_line_magic("qbench", f"-o -n 2 -w 1 {expression}")
        assert result.nbytes is None and result.estimate == "", expression
        assert "GB/s" not in captured.stdout and "bytes:" not in captured.stdout
    with capture_output() as captured:
        result = ip.run_line_magic("qbench", "-o -n 2 -w 1 --bytes 2048 np.sum(a)")
    assert result.nbytes == 2048 and "GB/s" in captured.stdout  # given: still a rate


# ------------------------------------------------ every kernel of a cell gets its status

THREE = """\
def first_of_three(x: qnb.Array[qnb.f32, 2]):
    qnb.Tile16.load(x, 0, 0).store(x, 0, 0)
def second_of_three(x: qnb.Array[qnb.f32, 2]):
    (qnb.Tile16.load(x, 0, 0) + qnb.f32).store(x, 0, 0)
def third_of_three(x: qnb.Array[qnb.f32, 2]):
    qnb.Tile16.load(x, 0, 0).store(x, 0, 0)
"""


def test_a_compile_failure_does_not_stop_the_cells_other_kernels(ip):
    with capture_output() as captured:
        result = ip.run_cell("%%qkernel -b cpu\n" + THREE)
    assert isinstance(result.error_in_exec, qnb.QnbTypeError)
    lines = captured.stdout.splitlines()
    assert [STATUS.match(line).group(1) for line in (lines[0], lines[2])] == [
        "first_of_three",
        "third_of_three",
    ]
    assert lines[1] == (
        "second_of_three: compile failed: QnbTypeError: cannot use DType in arithmetic (line 5)"
    )
    # then the error itself, with its caret, once
    assert lines[3] == "QnbTypeError: cannot use DType in arithmetic"
    assert "(qnb.Tile16.load(x, 0, 0) + qnb.f32)" in lines[5] and lines[6].strip() == "^"


def test_a_failed_definition_does_not_hide_the_other_kernels_status(ip):
    cell = DOUBLE.replace("double", "good_one") + BROKEN.format(decorator="").replace(
        "k1", "bad_one"
    )
    with capture_output() as captured:
        result = ip.run_cell("%%qkernel -b cpu\n" + cell)
    assert isinstance(result.error_in_exec, qnb.QnbSyntaxError)
    lines = captured.stdout.splitlines()
    assert STATUS.match(lines[0]).group(1) == "good_one"
    assert lines[1] == (
        "bad_one: definition failed: QnbSyntaxError: start and stop indices are required "
        "in a slice (line 9)"
    )
    assert isinstance(ip.user_ns["good_one"], qnb.Kernel)

    with capture_output() as captured:
        ip.run_line_magic("qcache", "explain bad_one")
    assert captured.stdout.startswith(
        "bad_one: its last %%qkernel definition failed: QnbSyntaxError: start and stop "
        f"indices are required in a slice ({result.error_in_exec.filename} line 9)\n"
    )
