"""The magics through a real IPython shell: ``%load_ext qnb``, then cells as a user runs them."""

import linecache
import re

import numpy as np
import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import qnb

STATUS = re.compile(
    r"^(\w+): (compiled in [\d.]+ ms|loaded from disk in [\d.]+ ms|memory hit) "
    r"\[(\w+)\] key [0-9a-f]{12}$",
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
    ("language", "expected"),
    [("cuda", "__global__"), ("wgsl", "@compute"), ("ir", "double")],
)
def test_show_displays_generated_code(ip, language, expected):
    captured, _ = run(ip, f"-b cpu --show {language}", DOUBLE)
    shown = [o.data for o in captured.outputs]
    assert shown, "nothing was displayed"
    assert expected in shown[-1]["text/plain"]
    assert "<" in shown[-1]["text/html"]


def test_trace_shows_the_reason_and_key_components(ip):
    captured, _ = run(ip, "-b cpu --no-cache --trace", DOUBLE)
    assert "key components:" in captured.stdout
    assert "signature" in captured.stdout and "captured" in captured.stdout


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
    assert result.nbytes == 2 * 32 * 16 * 4
    assert "median" in captured.stdout and "GB/s" in captured.stdout
    assert "GFLOP/s" not in captured.stdout  # not a matrix product: no flops guessed


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
        result = ip.run_cell("%qcache clear")
    shown = captured.stdout + captured.stderr
    assert isinstance(result.error_in_exec, OSError)
    assert f"could not remove 1 entry: {blocked.name}: Is a directory" in shown
    assert "Traceback" not in shown and "CacheWarning" not in shown
