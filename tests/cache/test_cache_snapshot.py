"""A kernel is compiled from exactly the values its key holds (DESIGN.md "Kernel cache"):
a thread rebinding a captured name during compiles never stores an entry under the wrong
key, in memory or on disk.

A thread flips a captured flag (a global, and a module attribute the kernel reads as
``cfg.FLAG``) as fast as it can while the main thread compiles the kernel hundreds of times
(``QNB_ALWAYS_COMPILE=1``: every launch compiles and rewrites its entry). Then a clean
process loads each variant from that cache and must get each one's own answer.
"""

from __future__ import annotations

import json
import textwrap

from cache_fakes import run_python

MODULE = """
    import qnb
    import snap_cfg

    FLAG = False

    @qnb.kernel
    def by_global(x: qnb.Array[qnb.f32, 1]):
        if qnb.static(FLAG):
            x[0] = 1.0
        else:
            x[0] = 2.0

    @qnb.kernel
    def by_module(x: qnb.Array[qnb.f32, 1]):
        if snap_cfg.FLAG:
            x[0] = 3.0
        else:
            x[0] = 4.0

    @qnb.func
    def flag_of(m):
        return m.FLAG

    @qnb.kernel
    def by_func_arg(x: qnb.Array[qnb.f32, 1]):
        if flag_of(snap_cfg):
            x[0] = 5.0
        else:
            x[0] = 6.0

    EXPECT = {"by_global": (2.0, 1.0), "by_module": (4.0, 3.0), "by_func_arg": (6.0, 5.0)}
"""

FLIPPING = r"""
import sys, threading
import numpy as np
import qnb
sys.path.insert(0, sys.argv[1])
sys.setswitchinterval(1e-6)
import snap_cfg, snap_kernels as m
qnb.set_backend("cpu")
stop = False

def flip():
    while not stop:
        m.FLAG = not m.FLAG
        snap_cfg.FLAG = not snap_cfg.FLAG

thread = threading.Thread(target=flip)
thread.start()
x = np.zeros(1, np.float32)
try:
    for _ in range(int(sys.argv[2])):
        for k in (m.by_global, m.by_module, m.by_func_arg):
            k(x)
finally:
    stop = True
    thread.join()
# After the flipping: the memory level and the launch memo hold each variant's own kernel.
import os
os.environ["QNB_ALWAYS_COMPILE"] = "0"
bad = []
for flag in (False, True, False, True):
    m.FLAG = snap_cfg.FLAG = flag
    for k in (m.by_global, m.by_module, m.by_func_arg):
        k(x)
        if x[0] != m.EXPECT[k.__name__][flag]:
            bad.append([k.__name__, flag, float(x[0])])
print(bad)
"""

CLEAN = r"""
import json, sys
import numpy as np
import qnb
sys.path.insert(0, sys.argv[1])
import snap_cfg, snap_kernels as m
qnb.set_backend("cpu")
x = np.zeros(1, np.float32)
report = []
for flag in (False, True):
    m.FLAG = snap_cfg.FLAG = flag
    for k in (m.by_global, m.by_module, m.by_func_arg):
        k(x)
        report.append([k.__name__, flag, float(x[0]), qnb.cache.events()[-1].outcome])
print(json.dumps(report))
"""


def test_a_thread_rebinding_captured_names_never_stores_an_entry_under_the_wrong_key(tmp_path):
    (tmp_path / "snap_cfg.py").write_text("FLAG = False\n")
    (tmp_path / "snap_kernels.py").write_text(textwrap.dedent(MODULE))
    env = {"QNB_CACHE_DIR": str(tmp_path / "cache"), "QNB_CACHE": "1"}
    flipping = run_python(
        FLIPPING, env={**env, "QNB_ALWAYS_COMPILE": "1"}, args=[str(tmp_path), "100"], timeout=600
    )
    assert flipping.returncode == 0, flipping.stderr
    assert flipping.stdout.strip().splitlines()[-1] == "[]"
    clean = run_python(CLEAN, env={**env, "QNB_ALWAYS_COMPILE": "0"}, args=[str(tmp_path)])
    assert clean.returncode == 0, clean.stderr
    expect = {"by_global": (2.0, 1.0), "by_module": (4.0, 3.0), "by_func_arg": (6.0, 5.0)}
    for name, flag, value, outcome in json.loads(clean.stdout.strip().splitlines()[-1]):
        assert value == expect[name][flag], (name, flag, value)
        assert outcome == "disk-hit"
