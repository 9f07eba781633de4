"""Debug mode: a negative window bound, a scalar index outside its array, a batch outside
its array or a tile index outside 0..15 raises QnbIndexError at the kernel's own line on
every backend (the cpu backend always checks; GPU backends check in debug mode)."""

import numpy as np
import pytest

import qnb
from qnb.frontend.checks import ERRORS_PARAM, add_bounds_checks
from tests.helpers import define

BAD = {
    "negative window": (
        """
        @qnb.kernel(debug=True)
        def k(x, out):
            r = qnb.program_id(0) - 1
            t = Tile16.zeros()
            t[:] = x[r:r + 16, 0:16]
            out[0:16, 0:16] = t
        """,
        6,
        "negative window bound",
    ),
    "scalar index": (
        """
        @qnb.kernel(debug=True)
        def k(x, out):
            i = qnb.program_id(0) * 20
            out[0, 0] = x[i, 0]
        """,
        5,
        "index out of range",
    ),
    "while condition, a later test": (  # checked before every test, not only the first
        """
        @qnb.kernel(debug=True)
        def k(x, out):
            i = qnb.program_id(0)
            while x[i, 0] > 0.0:
                i += 1
        """,
        5,
        "index out of range",
    ),
    "tile index": (
        """
        @qnb.kernel(debug=True)
        def k(x, out):
            t = Tile16.load(x, 0, 0)
            out[0, 0] = t[qnb.program_id(0) + 15, 0]
        """,
        5,
        "0..15",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_index_raises_at_the_users_line(backend_name, case):
    source, line, message = BAD[case]
    scope, filename = define(source)
    x = np.ones((16, 16), np.float32)
    out = np.zeros((16, 16), np.float32)
    with pytest.raises(qnb.QnbIndexError, match=message) as info, qnb.backend(backend_name):
        scope["k"][2](x, out)
    assert info.value.filename == filename and info.value.lineno == line


def test_short_circuit_guards_the_check(backend_name):
    scope, _ = define("""
        @qnb.kernel(debug=True)
        def k(x, out):
            i = qnb.program_id(0) + 14
            if i < x.shape[0] and x[i, 0] > 0:
                out[i, 0] = 2.0
        """)
    x = np.ones((16, 16), np.float32)
    out = np.zeros((16, 16), np.float32)
    with qnb.backend(backend_name):
        scope["k"][4](x, out)  # programs 2 and 3 have i >= 16: the and skips the read
    assert out[14, 0] == 2 and out[15, 0] == 2


def test_checks_are_ir_with_a_hidden_errors_parameter():
    scope, _ = define(BAD["negative window"][0])
    x = np.ones((16, 16), np.float32)
    kernel_ir, _ = scope["k"]._lower_for((x, x))
    checked, table = add_bounds_checks(kernel_ir)
    assert checked.params[-1].name == ERRORS_PARAM
    assert [c.message for c in table] == [
        "negative window bound on 'x'",
        "negative window bound on 'out'",
    ]
    assert [c.loc.line for c in table] == [4, 5]  # relative to the def line
    assert "qnb_errors" in qnb.ir.format_kernel(checked)


@pytest.mark.parametrize("case", sorted(BAD))
def test_checked_kernels_compile_for_cuda(case):
    """The checked IR is real CUDA: NVRTC compiles it to a cubin (no GPU needed)."""
    from tests.backends.nvrtc_batch import toolchain_reason

    reason = toolchain_reason()
    if reason is not None:
        pytest.skip(f"NVRTC toolchain missing: {reason}")
    from qnb.backends.base import Options
    from qnb.backends.cuda import CudaBackend

    scope, _ = define(BAD[case][0])
    x = np.ones((16, 16), np.float32)
    kernel_ir, _ = scope["k"]._lower_for((x, x))
    checked, _ = add_bounds_checks(kernel_ir)
    artifact = CudaBackend().compile_for_arch(checked, Options(debug=True), arch="sm_90")
    assert artifact.binary and "qnb_errors" in artifact.text["source"]


def test_the_check_table_round_trips_through_json():
    import json

    from qnb.frontend.checks import table_from_json, table_to_json

    scope, _ = define(BAD["tile index"][0])
    x = np.ones((16, 16), np.float32)
    _, table = add_bounds_checks(scope["k"]._lower_for((x, x))[0])
    assert table and table_from_json(json.loads(json.dumps(table_to_json(table)))) == table


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_disk_hit_raises_from_the_stored_check_table_without_lowering(
    gpu_backend_name, case, monkeypatch
):
    source, line, message = BAD[case]
    scope, filename = define(source)
    kernel = scope["k"]
    x = np.ones((16, 16), np.float32)
    out = np.zeros((16, 16), np.float32)
    with qnb.backend(gpu_backend_name):
        kernel.compile(x, out)  # stored on disk with its checks
        qnb.cache.clear(disk=False)
        lowered = []
        real_lower = kernel._lower
        monkeypatch.setattr(
            kernel, "_lower", lambda *a, **k: lowered.append(1) or real_lower(*a, **k)
        )
        with pytest.raises(qnb.QnbIndexError, match=message) as info:
            kernel[2](x, out)
    assert qnb.cache.events()[-1].outcome == "disk-hit"
    assert lowered == []  # the table came from the artifact
    assert info.value.filename == filename and info.value.lineno == line
