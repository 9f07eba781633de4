"""The cpu backend's artifact: the IR as JSON (qnb/ir.py: kernel_to_json /
kernel_from_json), what a warm start decodes before it prepares the kernel."""

import copy
import gc
import json
import sys

import numpy as np
import pytest

from qnb import ir
from qnb.backends.base import Options
from qnb.backends.cpu.backend import CpuBackend
from tests.suite import CASES, lowered


def _nodes(kernel):
    return list(ir.walk_body(kernel.body))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_ir_round_trips_through_json(case):
    kernel, _, _ = lowered(case, np.dtype(case.dtypes[0]))
    data = json.loads(json.dumps(ir.kernel_to_json(kernel)))
    kept = copy.deepcopy(data)
    decoded = ir.kernel_from_json(data)
    assert data == kept  # (decoding leaves the artifact's data as it was)
    assert ir.kernel_to_json(decoded) == kept
    assert ir.format_kernel(decoded) == ir.format_kernel(kernel)
    before, after = _nodes(kernel), _nodes(decoded)
    assert [type(n) for n in after] == [type(n) for n in before]
    for old, new in zip(before, after):
        assert getattr(new, "loc", None) == getattr(old, "loc", None)
        if isinstance(old, ir.Expr | ir.ArrayView):
            assert new.type == old.type
    assert [(p.name, p.type) for p in decoded.params] == [(p.name, p.type) for p in kernel.params]
    assert decoded.locals == kernel.locals
    assert [u.qualname for u in decoded.units] == [u.qualname for u in kernel.units]


def _artifact():
    kernel, _, _ = lowered(CASES[0], np.dtype(CASES[0].dtypes[0]))
    return json.loads(json.dumps(ir.kernel_to_json(kernel)))


def _first_node(data):
    return data["body"][0]


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d: d.pop("body"),
        lambda d: _first_node(d).__setitem__(0, "NotANode"),
        lambda d: _first_node(d).append(1),  # a field too many
        lambda d: _first_node(d).pop(),  # a field too few
        lambda d: _first_node(d).__setitem__(1, "not a loc"),
        lambda d: d["params"].append(["x", ["array", "no_such_dtype", 2]]),
        lambda d: d["body"].append(7),
    ],
)
def test_malformed_ir_raises_value_error(spoil):
    data = _artifact()
    spoil(data)
    with pytest.raises(ValueError, match="malformed kernel IR"):
        ir.kernel_from_json(data)


def _collections_inside_load(artifact):
    """The garbage collections that started while ``CpuBackend.load`` decoded or
    prepared the kernel (with the collector made to run after every 10 allocations),
    and the loaded launcher."""
    from qnb.backends.cpu import prepared

    inside = []
    building = {ir.kernel_from_json.__code__, prepared.prepare.__code__}

    def watch(phase, info):
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code in building:
                inside.append((phase, frame.f_code.co_name))
                return
            frame = frame.f_back

    threshold = gc.get_threshold()
    gc.set_threshold(10)
    gc.callbacks.append(watch)
    try:
        launch = CpuBackend().load(artifact)
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
    return inside, launch


def test_a_load_pauses_the_garbage_collector_and_restores_it():
    """A load's IR nodes and closures all live as long as the launcher: the collector
    waits until it is done (and is left on, or off, as it was found)."""
    kernel, grid, args = lowered(CASES[0], np.dtype(CASES[0].dtypes[0]))
    artifact = CpuBackend().compile(kernel, Options())
    assert gc.isenabled()
    inside, launch = _collections_inside_load(artifact)
    assert inside == []
    assert gc.isenabled()
    launch(grid, args)  # (a working launcher)
    gc.disable()
    try:
        inside, _ = _collections_inside_load(artifact)
        assert inside == []
        assert not gc.isenabled()
    finally:
        gc.enable()
