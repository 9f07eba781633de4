"""scripts/gpu_check.sh, the one call a lent GPU machine gets, checked here without a GPU:
its steps' budgets fit its deadline and one command's 10 minutes, it cannot pass while
testing nothing (QNB_REQUIRE_CUDA=1 turns a cuda skip into a failure, in the tests and in
bench_cuda), it needs no wgpu, and where cuda cannot run it stops at the install step
with its table and logs written (run for real here: this machine has no GPU)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_the_script_parses_and_its_budgets_fit_the_deadline():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    text = SCRIPT.read_text()
    budgets = dict(re.findall(r"\[(\w+)\]=(\d+)", re.search(r"BUDGET=\((.*)\)", text).group(1)))
    deadline = int(re.search(r"GPU_CHECK_SECONDS:-(\d+)", text).group(1))
    assert set(budgets) == {"machine", "install", "tests", "bench", "layouts"}
    assert sum(map(int, budgets.values())) < deadline <= 540 < 600, budgets


def test_the_script_needs_no_wgpu():
    text = SCRIPT.read_text()
    assert "--sections 12" in text  # bench_layouts' wgpu-only section 3 is left out
    commands = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    using = [line for line in commands if "wgpu" in line]
    assert not using, using


def test_require_cuda_turns_a_cuda_skip_into_a_failure(monkeypatch):
    from qnb.backends import registry
    from tests.conftest import require_backend

    if registry.get("cuda").info().available:
        pytest.skip("a CUDA device is here: nothing would skip")
    monkeypatch.setenv("QNB_REQUIRE_CUDA", "1")
    with pytest.raises(pytest.fail.Exception, match="QNB_REQUIRE_CUDA=1"):
        require_backend("cuda")
    monkeypatch.delenv("QNB_REQUIRE_CUDA")
    with pytest.raises(pytest.skip.Exception):
        require_backend("cuda")


def test_bench_cuda_fails_instead_of_skipping_under_require_cuda():
    from qnb.backends import registry

    if registry.get("cuda").info().available:
        pytest.skip("a CUDA device is here: bench_cuda would run")
    env = dict(os.environ, QNB_REQUIRE_CUDA="1", PYTHONPATH=str(ROOT))
    ran = subprocess.run(
        [sys.executable, "benchmarks/bench_cuda.py"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 1 and "skipped" in ran.stdout, ran.stdout + ran.stderr


def test_without_cuda_the_script_stops_at_install_and_still_writes_its_table(tmp_path):
    from qnb.backends import registry

    if registry.get("cuda").info().available:
        pytest.skip("a CUDA device is here: the script would run its tests")
    env = dict(os.environ, OUT=str(tmp_path), GPU_CHECK_SECONDS="120", PYTHON=sys.executable)
    ran = subprocess.run(
        ["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert ran.returncode != 0, ran.stdout
    summary = (tmp_path / "summary.txt").read_text()
    assert re.search(r"install +failed", summary), summary
    assert re.search(r"tests +skipped \(after install failed\)", summary), summary
    assert (tmp_path / "install.log").exists()


def test_the_summary_carries_every_benchmark_row(capsys):
    """Each bench_cuda step's rows and ratio lines reach the final table (its grep), the
    bf16 matmul, the wide softmax and the causal attention the issue asks for among them."""
    from benchmarks import bench_cuda

    source = Path(bench_cuda.__file__).read_text()
    steps = re.search(r"steps = \((.*)\)", source).group(1).split(", ")
    assert steps == ["matmul", "matmul_bf16", "cholesky", "row_softmax", "causal_attention"]
    text = SCRIPT.read_text()
    rows = re.compile(re.search(r"grep -E '(\^ \+\(qnb[^']*)' \"\$OUT_DIR/bench.log\"", text)[1])
    ratios = re.compile(re.search(r"grep -E '(ratio[^']*)' \"\$OUT_DIR/bench.log\"", text)[1])
    printed = re.findall(r'\["((?:qnb|cupy)[^"]*)"', source)
    assert any("causal_attention" in label for label in printed), printed
    for label in printed:
        bench_cuda._table("t", ["", "ms"], [[label, "1.0"]])
        line = capsys.readouterr().out.splitlines()[-1]
        assert rows.search(line), line
    for line in re.findall(r'print\(\s*f?"(  (?:speedup|throughput ratio)[^"]*)"', source):
        assert ratios.search(line), line


def test_the_half_precision_line_counts_cuda_outcomes(tmp_path):
    """The table's bf16/f16 line reads pytest's junit xml: cuda cases only, by outcome."""
    xml = tmp_path / "pytest.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.backends.test_bf16" name="test_exact[cuda-add]"/>'
        '<testcase classname="tests.backends.test_bf16" name="test_exact[cuda-mul]">'
        '<failure message="x"/></testcase>'
        '<testcase classname="tests.backends.test_cuda" name="test_op[f16-exp-cuda]"/>'
        '<testcase classname="tests.backends.test_cuda" name="test_op[f16-log-cuda]">'
        '<skipped message="y"/></testcase>'
        '<testcase classname="tests.backends.test_bf16" name="test_exact[cuda-host-add]"/>'
        '<testcase classname="tests.backends.test_cuda" name="test_op[f32-exp-cuda]"/>'
        "</testsuite></testsuites>"
    )
    ran = subprocess.run(
        [sys.executable, "scripts/gpu_check_halves.py", str(xml)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert ran.stdout.splitlines() == [
        "  bf16 cuda 1 passed, 1 failed, 0 skipped",
        "  f16 cuda  1 passed, 0 failed, 1 skipped",
    ], ran.stdout
