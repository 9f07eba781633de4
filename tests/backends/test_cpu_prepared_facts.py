"""The prepared path's one walk of the IR (``_Facts`` in qnb/backends/cpu/prepared_base.py)
against the questions it answers, each asked the long way: ``ir.array_uses``,
``ir.holds_tiles``, ``lanes.chunk_programs``, a walk per loop for its exits, and the
varying locals by walking every statement's expressions again at each round."""

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16, f32, i32, ir
from qnb.backends.cpu import lanes
from qnb.backends.cpu.prepared import _Compiler
from qnb.backends.cpu.prepared_base import _FOLDABLE, _Facts, _varying_names
from tests.suite import CASES, lowered


def _assignments(body, conditions=()):
    """Each assignment of ``body`` as ``(name, value or None, the conditions around it)``
    (a loop's variable is assigned under its bounds, as its body runs)."""
    for s in body:
        if isinstance(s, ir.Assign):
            yield s.name, s.value, conditions
        elif isinstance(s, ir.If):
            yield from _assignments(s.then_body + s.else_body, (*conditions, s.cond))
        elif isinstance(s, ir.For):
            inner = (*conditions, s.start, s.stop, s.step, *_exit_conditions(s.body))
            yield s.var, None, inner
            yield from _assignments(s.body, inner)
        elif isinstance(s, ir.While):
            yield from _assignments(s.body, (*conditions, s.cond, *_exit_conditions(s.body)))


def _exit_conditions(body, path=()):
    """The conditions around each of a loop's own exits: where one differs between
    programs, programs leave the loop at different turns."""
    for s in body:
        if isinstance(s, (ir.Break, ir.Continue)):
            yield from path
        elif isinstance(s, ir.If):
            yield from _exit_conditions(s.then_body + s.else_body, (*path, s.cond))


def _varying_by_walks(kernel):
    """The varying locals, by walking every expression again at each round: a local is
    varying where its value, or a condition around an assignment of it, reads
    ``program_id`` or a varying local."""
    varying = set()
    assignments = list(_assignments(kernel.body))
    while True:
        found = {
            name
            for name, value, conditions in assignments
            if any(
                _varying_by_walk(e, varying)
                for e in (*conditions, *([value] if value is not None else []))
            )
        }
        if found <= varying:
            return varying
        varying |= found


def _constant_by_walks(e):
    if isinstance(e, ir.Const) or (isinstance(e, ir.TileFill) and e.kind == "eye"):
        return True
    return isinstance(e, _FOLDABLE) and all(_constant_by_walks(c) for c in ir.children(e))


def _varying_by_walk(e, varying):
    return any(
        (isinstance(n, ir.ProgramId) and n.which == "id")
        or (isinstance(n, ir.Var) and n.name in varying)
        for n in ir.walk(e)
    )


def _assert_facts(kernel):
    facts = _Facts(kernel)
    loaded, stored = ir.array_uses(kernel)
    assert (facts.loaded, facts.stored) == (loaded, stored)
    assert facts.holds_tiles == ir.holds_tiles(kernel)
    assert facts.chunk == lanes.chunk_programs(kernel)  # (both paths: the same chunks)
    loops = [n for n in ir.walk_body(kernel.body) if isinstance(n, ir.For)]
    exits = {
        id(s)
        for s in loops
        if any(isinstance(n, ir.Break | ir.Continue) for n in ir.walk_body(s.body))
    }
    assert facts.exits == exits
    counts = {}
    for n in ir.walk_body(kernel.body):
        if isinstance(n, ir.Assign):
            counts[n.name] = counts.get(n.name, 0) + 1
        elif isinstance(n, ir.For):
            counts[n.var] = counts.get(n.var, 0) + 2
    assert facts.assign_count == counts
    varying = _varying_by_walks(kernel)
    assert _varying_names(kernel, facts) == varying
    compiler = _Compiler(kernel)
    for node in ir.walk_body(kernel.body):
        if not isinstance(node, ir.Stmt):
            assert compiler.constant(node) == _constant_by_walks(node), ir.format_expr(node)
            assert compiler.is_varying(node) == _varying_by_walk(node, varying)
    return facts


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_facts_of_the_suite_kernels(case):
    kernel, _, _ = lowered(case, np.dtype(case.dtypes[0]))
    _assert_facts(kernel)
    _assert_facts(ir.kernel_from_json(ir.kernel_to_json(kernel)))  # as a warm start has it


@qnb.kernel
def _loops(x: qnb.Array[f32, 2], y: qnb.Array[f32, 2], n: i32):
    p = qnb.program_id(0)
    q = 0
    acc = Tile16.zeros(f32)
    for k in range(n):
        if k > 3:
            break
        for j in range(2):
            if j == 1:
                continue
            acc += Tile16.load(x, k, j)
    for k in range(4):  # no exit: its body runs as is
        q = q + k
    while q < 10:
        q = q + p  # varying from here, and the loop below with it
        if q > 5:
            break
    w = Vec16.load_row(x, q, 0)
    for _k in range(q):
        acc += w
    acc.store(y, 0, 0)


def test_facts_of_loops_and_exits():
    x = np.zeros((32, 32), np.float32)
    kernel, _ = _loops._lower_for([x, x, 3])
    facts = _assert_facts(kernel)
    assert {"p", "q"} <= _varying_names(kernel, facts)
    assert len(facts.exits) == 2
