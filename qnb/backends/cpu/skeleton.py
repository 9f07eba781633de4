"""A kernel's access skeleton: what ``qnb.check``'s first pass runs beside the launch.

Which elements a program touches depends only on its addresses (window bounds,
indices, slabs), its control flow (conditions, loop bounds) and the values these read,
memory included; not on the tiles it computes and stores elsewhere. :func:`skeleton`
keeps exactly those and replaces every other value (an ``@``, a Cholesky, a softmax's
``exp``) by a fill of its type, so the executor running it reports the same windows,
lines and elements to its observer as the kernel does, at a fraction of the cost.

What is kept exactly, closed under "is read by":

- every address and every header: a load's or store's slab, bounds and indices, an
  ``if``/``while`` condition, a ``for`` loop's bounds;
- every assignment to a variable that a kept expression reads;
- every store into a memory that a kept expression loads from (its value is read back).

A value that is left out keeps its loads from the *watched* memories (those some
parameter stores to: the accesses the recorder must see), each moved into a statement
of its own at the same place, so it runs under the same lanes. A value whose loads run
under a short-circuit ``and``/``or`` (on fewer lanes) is kept whole. Errors are not
the skeleton's business: ``qnb.check`` runs the launch itself first, which raises them.
"""

from __future__ import annotations

import dataclasses

from qnb import ir

_LOADS = (ir.ArrayLoad, ir.LoadWindow, ir.VecLoad)
_STORES = (ir.ArrayStore, ir.StoreWindow, ir.VecStore)
TEMPORARY = "__skeleton_load_"


def skeleton(
    kernel: ir.KernelIR, watched: set[str], memory_of: dict[str, int]
) -> tuple[ir.KernelIR, set[int]]:
    """The skeleton of ``kernel``, and the memories whose contents it reads back (the
    others' contents never reach an address: they may start blank). ``watched`` are the
    array parameters whose accesses are recorded; ``memory_of`` names each array
    parameter's memory (parameters that share bytes share one), so a store through one
    alias of a memory read back through another is kept."""
    kept_vars, feeding = _kept(kernel, memory_of)
    builder = _Skeleton(kernel, watched, kept_vars, feeding, memory_of)
    body = builder.block(kernel.body)
    local_types = dict(kernel.locals)
    local_types.update(builder.temporaries)
    return dataclasses.replace(kernel, body=body, locals=local_types), feeding


def _addresses(node) -> list:
    """The address expressions of a load or store node (slab, bounds, indices)."""
    out = [node.view.batch] if node.view.batch is not None else []
    if isinstance(node, ir.ArrayLoad | ir.ArrayStore):
        return out + list(node.indices)
    if isinstance(node, ir.LoadWindow | ir.StoreWindow):
        return [*out, node.r0, node.r1, node.c0, node.c1]
    return out + [node.start, node.stop] + ([node.col] if node.col is not None else [])


def headers(stmt) -> list:
    """The expressions of an if/while condition or a for loop's bounds (else none)."""
    if isinstance(stmt, ir.If | ir.While):
        return [stmt.cond]
    if isinstance(stmt, ir.For):
        return [stmt.start, stmt.stop, stmt.step]
    return []


def statements(body):
    """Every statement of ``body``, nested ones included, in source (pre-)order."""
    for stmt in body:
        yield stmt
        for name in ("then_body", "else_body", "body"):
            inner = getattr(stmt, name, None)
            if inner:
                yield from statements(inner)


def _kept(kernel: ir.KernelIR, memory_of: dict[str, int]) -> tuple[set[str], set[int]]:
    """The variables whose values are kept, and the memories kept expressions load from."""
    every = list(statements(kernel.body))
    roots = []
    for stmt in every:
        roots += headers(stmt)
        if isinstance(stmt, _STORES):
            roots += _addresses(stmt)
        for expr in _values(stmt):
            roots += [
                a for node in ir.walk(expr) if isinstance(node, _LOADS) for a in _addresses(node)
            ]
    kept_vars: set[str] = set()
    feeding: set[int] = set()
    pending = list(roots)
    done_assigns: set[int] = set()
    while pending:
        for expr in pending:
            for node in ir.walk(expr):
                if isinstance(node, ir.Var):
                    kept_vars.add(node.name)
                elif isinstance(node, _LOADS):
                    feeding.add(memory_of[node.view.param])
        pending = []
        for stmt in every:
            if id(stmt) in done_assigns:
                continue
            keep = (isinstance(stmt, ir.Assign) and stmt.name in kept_vars) or (
                isinstance(stmt, _STORES) and memory_of[stmt.view.param] in feeding
            )
            if keep:
                done_assigns.add(id(stmt))
                pending.append(stmt.value)
    return kept_vars, feeding


def _values(stmt) -> list:
    """The value expressions of a statement (an assignment's, a store's)."""
    return (
        [stmt.value]
        if isinstance(stmt, ir.Assign | ir.StoreWindow | ir.VecStore | ir.ArrayStore)
        else []
    )


def fill(typ: ir.Type) -> ir.Expr:
    """A value of type ``typ`` that costs nothing to make: zeros."""
    zero = ir.Const(ir.scalar(typ.dtype), None, 0)
    if typ.kind == "scalar":
        return zero
    return ir.TileFill(typ, None, "full", zero)


class _Skeleton:
    def __init__(self, kernel, watched, kept_vars, feeding, memory_of):
        self.kernel = kernel
        self.watched = watched
        self.kept_vars = kept_vars
        self.feeding = feeding
        self.memory_of = memory_of
        self.temporaries: dict[str, ir.Type] = {}

    def block(self, body: list) -> list:
        out = []
        for stmt in body:
            out += self.statement(stmt)
        return out

    def statement(self, stmt) -> list:
        if isinstance(stmt, ir.If):
            then_body, else_body = self.block(stmt.then_body), self.block(stmt.else_body)
            return [dataclasses.replace(stmt, then_body=then_body, else_body=else_body)]
        if isinstance(stmt, ir.For | ir.While):
            return [dataclasses.replace(stmt, body=self.block(stmt.body))]
        if isinstance(stmt, ir.Assign):
            if stmt.name in self.kept_vars or not self.prunable(stmt.value):
                return [stmt]
            return [
                *self.hoisted(stmt.value, stmt.loc),
                dataclasses.replace(stmt, value=fill(stmt.value.type)),
            ]
        if isinstance(stmt, _STORES):
            if self.memory_of[stmt.view.param] in self.feeding or not self.prunable(stmt.value):
                return [stmt]
            return [
                *self.hoisted(stmt.value, stmt.loc),
                dataclasses.replace(stmt, value=fill(stmt.value.type)),
            ]
        return [stmt]

    def prunable(self, value) -> bool:
        """Whether ``value`` may be replaced: it computes something (it is not already a
        name, a literal or a fill) and none of its watched loads runs under a
        short-circuit operator's narrower lanes."""
        if isinstance(value, ir.Var | ir.Const | ir.ProgramId | ir.ArrayDim | ir.TileFill):
            return False
        for node in ir.walk(value):
            if isinstance(node, ir.Logical) and any(
                isinstance(n, _LOADS) and n.view.param in self.watched for n in ir.walk(node.right)
            ):
                return False
        return True

    def hoisted(self, value, loc) -> list:
        """One assignment per watched load of ``value`` (its addresses as they are; its
        padding and base, values no one reads, as fills)."""
        out = []
        for node in self.watched_loads(value):
            name = f"{TEMPORARY}{len(self.temporaries)}"
            load = node
            if isinstance(node, ir.LoadWindow):
                load = dataclasses.replace(node, base=fill(node.base.type))
            elif isinstance(node, ir.VecLoad):
                load = dataclasses.replace(node, other=None)
            self.temporaries[name] = node.type
            # loaded, then dropped: a view of the array held on would be copied before
            # the next store to it (the executor keeps tiles values)
            out += [ir.Assign(loc, name, load), ir.Assign(loc, name, fill(node.type))]
        return out

    def watched_loads(self, value) -> list:
        """The watched loads of ``value`` that run as part of its value (not those in a
        watched load's own addresses: hoisting that load keeps them)."""
        found = []
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, _LOADS) and node.view.param in self.watched:
                found.append(node)
                continue  # its addresses are evaluated with it
            stack.extend(reversed(ir.children(node)))
        return found
