"""The planted-hazard suite: every kernel of ``planted.py`` has a hazard of another shape,
and ``qnb.check`` finds each with the right kind, array, first element, programs and
lines (and count, values and order dependence where the case says)."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from tests.hazards.planted import PLANTED, marker_lines


def _padded(program) -> tuple:
    program = (program,) if isinstance(program, int) else tuple(program)
    return program + (0,) * (3 - len(program))


def test_the_suite_is_large_and_every_name_is_its_own():
    assert len(PLANTED) >= 40
    assert len({case.name for case in PLANTED}) == len(PLANTED)


@pytest.mark.parametrize("case", PLANTED, ids=lambda c: c.name)
def test_each_planted_hazard_is_found(case):
    grid, args = case.make(np.random.default_rng(0))
    before = [np.array(a) if isinstance(a, np.ndarray) else a for a in args]
    found = qnb.check(case.kernel[grid], *args)
    assert not found.ok, found
    # the arguments passed are not changed
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
    assert {h.kind for h in found.hazards} == {e.kind for e in case.expect}, found.hazards
    for expect in case.expect:
        first = next(h for h in found.hazards if h.kind == expect.kind)
        assert first.array == expect.array, first
        assert first.index == expect.index, first
        assert first.programs == tuple(_padded(p) for p in expect.programs), first
        lines = tuple(_line(case, marker) for marker in expect.lines)
        assert first.lines == lines, (first, lines)
        if expect.count is not None:
            assert first.count == expect.count, first
        if expect.values is not None:
            assert first.values == expect.values, first
        if expect.kind == "write-write":
            assert first.values is not None and len(first.values) == 2
            assert first.same_value == (first.values[0] == first.values[1])
        else:
            assert first.values is None
        assert first.count >= 1
        assert all(w.array == expect.array for side in first.windows for w in side)
        assert first.windows[0] and first.windows[1], "each program's windows are kept"
    if case.order_dependent is not None:
        assert found.order_dependent == case.order_dependent
    for name, count in case.elements.items():
        assert found.elements[name] == count
        assert found.conflicts[name].sum() == count
    assert set(found.arrays) == set(found.elements) == set(found.conflicts)


def _line(case, marker) -> int:
    lines = marker_lines(case, marker)
    assert len(lines) == 1, f"{case.name}: marker {marker!r} on lines {lines}"
    return lines[0]
