"""The cpu backend's memory does not grow with the grid, on either executor, and a launch
that does not fit in memory is a ``BackendError`` naming the kernel, not NumPy's
``MemoryError``. Each case runs in a fresh process (its peak resident memory is its own;
``QNB_CPU_PATH`` picks the executor when the kernel loads).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import qnb

    @qnb.kernel
    def add_one(x: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        if i < x.shape[0]:
            x[i] = x[i] + 1.0

    @qnb.kernel
    def tiles(x: qnb.Array[qnb.f32, 2]):
        i = qnb.program_id(0) * 128
        t = qnb.Tile[128, 128].load(x, i, 0)
        (qnb.exp(t) * t + t).store(x, i, 0)

    n, limit = int(sys.argv[1]), int(sys.argv[2])
    x = np.zeros(4096, np.float32)  # (small: what grows is the grid's, not an array's)
    y = np.zeros((128 * 64, 128), np.float32)
    add_one[1024](x)  # compiled and loaded before the measurement
    tiles.compile(y)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if limit:  # the address space mapped now, and ``limit`` bytes more: all a launch gets
        status = open("/proc/self/status").read().split("VmSize:")[1].split()[0]
        mapped = int(status) * 1024 + limit
        resource.setrlimit(resource.RLIMIT_AS, (mapped, mapped))
    outcome = "ok"
    try:
        if limit:
            tiles[64](y)
        else:
            add_one[n](x)  # programs past the array's end do nothing
            assert (x[:1024] == 2).all() and (x[1024:] == 1).all()
    except qnb.QnbError as err:
        outcome = type(err).__name__ + ": " + str(err).splitlines()[0]
    except MemoryError:
        outcome = "MemoryError"
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"grew": after - before, "outcome": outcome}))
""")


def _run(tmp_path, path: str, n: int, limit: int = 0) -> dict:
    env = dict(os.environ, QNB_CPU_PATH=path, QNB_CACHE="0")
    script = tmp_path / "launch.py"  # (qnb reads a kernel's source from its file)
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(n), str(limit)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", ["prepared", "interpreter"])
def test_a_scalar_kernel_over_many_programs_runs_in_bounded_memory(tmp_path, path):
    n = 30_000_000  # at the 31 bytes a program the prepared path held at once: 890 MiB
    found = _run(tmp_path, path, n)
    assert found["outcome"] == "ok"
    assert found["grew"] < 96 * 2**20, f"grew {found['grew'] / 2**20:.0f} MiB on {path}"


@pytest.mark.parametrize("path", ["prepared", "interpreter"])
def test_a_launch_that_does_not_fit_is_a_backend_error_naming_the_kernel(tmp_path, path):
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        pytest.skip("this process already runs under an address-space limit")
    # the tiles kernel holds 64 × 64 KiB (4 MiB) a value: 1 MiB more is too little
    found = _run(tmp_path, path, 1024, limit=2**20)
    assert found["outcome"].startswith("BackendError: the cpu ran out of host memory")
    assert "'tiles'" in found["outcome"] and "64 programs" in found["outcome"]
