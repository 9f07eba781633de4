"""Statements on the GPU: assignments, branches, loops, and the stores and atomics with
the barriers that keep a program's accesses to memory in order."""

from __future__ import annotations

from qnb import ir
from qnb.backends.gpu.analysis import LOADS
from qnb.dtypes import i32
from qnb.errors import BackendError


class StatementsMixin:
    """Statements: the body's control flow and its stores."""

    def block(self, body: list[ir.Stmt]) -> None:
        for stmt in body:
            saved = self._loc
            self._loc = stmt.loc or saved
            getattr(self, "stmt_" + type(stmt).__name__)(stmt)
            self._loc = saved

    def stmt_Assign(self, stmt: ir.Assign) -> None:
        typ = self.kernel.locals.get(stmt.name, stmt.value.type)
        if stmt.value.type.kind in ("tile", "vec"):
            target = self.local(stmt.name)
            if hasattr(self, "tile_" + type(stmt.value).__name__):
                source = self.materialize(stmt.value)
                self.slot_loop(typ)
                self.emit(f"{target}[q_s] = {source}[q_s];")
                self.close()
            else:  # written in place: an elementwise tree reads only its own slot
                self.elementwise(stmt.value, target)
        else:
            value = self.expr(stmt.value)
            self.emit(f"{self.local(stmt.name)} = {value};")
        if self.probe:
            self.probe_step(typ, self.local(stmt.name))

    def stmt_If(self, stmt: ir.If) -> None:
        cond = self.expr(stmt.cond)
        self.open(f"if ({cond}) {{")
        self.block(stmt.then_body)
        if stmt.else_body:
            self._depth -= 1
            self.emit("} else {")
            self._depth += 1
            self.block(stmt.else_body)
        self.close()

    def loop_body(self, body: list[ir.Stmt]) -> None:
        self._loops += 1
        self.block(body)
        self._loops -= 1

    def stmt_While(self, stmt: ir.While) -> None:
        self.open_loop(None)
        before = len(self._lines)
        cond = self.expr(stmt.cond)
        pure = len(self._lines) == before  # one expression, no statements: testable again
        self.emit(f"if (!{cond}) {{ break; }}")
        self.loop_body(stmt.body)
        self.close_loop(None, f"!{cond}" if pure else None)

    def stmt_For(self, stmt: ir.For) -> None:
        start, stop, step = (
            self.let(i32, self.expr(e)) for e in (stmt.start, stmt.stop, stmt.step)
        )
        counter = self.var(i32, start)
        # A step past the i32 range ends the loop (Python's range has no overflow): the
        # counter then becomes ``stop``, which the test below ends the loop at.
        past = (
            f"({step} > 0 && {counter} > {self.literal(2**31 - 1, i32)} - {step}) || "
            f"({step} < 0 && {counter} < {self.literal(-(2**31), i32)} - {step})"
        )
        increment = f"{counter} = {self.select(past, stop, self.arith('add', counter, step, i32))};"
        self.open_loop(increment)
        ends = (
            f"{step} == 0 || ({step} > 0 && {counter} >= {stop}) || "
            f"({step} < 0 && {counter} <= {stop})"
        )
        self.emit(f"if ({ends}) {{ break; }}")
        self.emit(f"{self.local(stmt.var)} = {counter};")
        self.loop_body(stmt.body)
        self.close_loop(increment, ends)

    def stmt_Break(self, stmt) -> None:
        self.emit("break;")

    def stmt_Continue(self, stmt) -> None:
        self.emit("continue;")

    def store_slots(self, stmt, place) -> None:
        """A tile or vec store: each thread writes its elements (``place()`` gives, in the
        slot loop, the flat index and the condition), ordered as :meth:`guarded_store`."""
        view, typ = stmt.view, stmt.value.type
        saved, in_slots = dict(self._pre), self._in_slots
        if self.probe:  # the stored value is recorded first, as a whole
            array = self.materialize(stmt.value)
            self.probe_step(typ, array)
            self._pre[id(stmt.value)] = f"{array}[q_s]"
        dtype = view.type.dtype
        if id(stmt.value) not in self._pre and any(
            isinstance(n, LOADS) and n.view.type.dtype is dtype for n in ir.walk(stmt.value)
        ):
            # read all of it before any thread writes (the store may overwrite what it reads)
            array = self.materialize(stmt.value)
            self._pre[id(stmt.value)] = f"{array}[q_s]"
        self.prepare(stmt)
        before, after = self.store_barriers[id(stmt)]
        if before or self._loops:
            self.emit(self.storage_barrier)
        self.slot_loop(typ)
        self._in_slots = True
        value = self.expr(stmt.value)
        if typ.dtype is not view.type.dtype:  # converted to the array's dtype
            value = self.cast(value, typ.dtype, view.type.dtype)
        index, ok = place()
        if self.replicated(typ):  # one writer per element
            ok = f"q_t < {typ.size} && {ok}"
        write = self.array_write(self.binding(view.param), index, value, view.type.dtype)
        self.emit(f"if ({ok}) {{ {write} }}")
        self._in_slots = in_slots
        self.close()
        self._pre = saved
        if after or self._loops:
            self.emit(self.storage_barrier)

    def stmt_StoreWindow(self, stmt: ir.StoreWindow) -> None:
        shape = stmt.value.type.shape
        self.store_slots(
            stmt, lambda: self.window(stmt.view, stmt.r0, stmt.r1, stmt.c0, stmt.c1, shape)
        )

    def stmt_VecStore(self, stmt: ir.VecStore) -> None:
        self.store_slots(
            stmt,
            lambda: self.vec_place(stmt.view, stmt.start, stmt.stop, stmt.col, stmt.axis),
        )

    def stmt_ArrayStore(self, stmt: ir.ArrayStore) -> None:
        value = self.probe_value(stmt.value, self.expr(stmt.value))
        index, ok = self.element(stmt.view, stmt.indices)
        self.guarded_store(stmt, ok if self.solo else f"q_lid == 0u && {ok}", index, value)

    def stmt_Atomic(self, stmt: ir.Atomic) -> None:
        """An atomic: each element of the index updates its element once (a scalar index:
        thread 0 of the program, its old value broadcast to the result)."""
        view, typ, dtype = stmt.view, stmt.value.type, stmt.view.type.dtype
        binding = self.binding(view.param)
        try:
            self.atomic_update(stmt.op, binding, "0", "0", dtype)
        except BackendError as exc:
            exc.ir_loc = stmt.loc
            raise
        before, after = self.store_barriers[id(stmt)]
        if typ.kind == "scalar":
            value = self.probe_value(stmt.value, self.expr(stmt.value))
            index, ok = self.element(view, stmt.indices)
            update = self.atomic_update(stmt.op, binding, index, value, dtype)
            if self.solo:
                old = self.var(dtype, self.literal(0, dtype))
                self.emit(f"if ({ok}) {{ {old} = {update}; }}")
            else:
                if before or self._loops:
                    self.emit(self.storage_barrier)
                slot = self.broadcast_slot(self.scratch_dtype(dtype))
                self.emit(self.barrier)
                self.open("if (q_lid == 0u) {")
                self.emit(f"{slot} = {self.to_scratch(self.literal(0, dtype), dtype)};")
                self.emit(f"if ({ok}) {{ {slot} = {self.to_scratch(update, dtype)}; }}")
                self.close()
                old = self.broadcast(slot, dtype)
            if stmt.result is not None:
                self.emit(f"{self.local(stmt.result)} = {old};")
        else:
            saved, in_slots = dict(self._pre), self._in_slots
            if self.probe:  # the value is recorded first, as a whole
                array = self.materialize(stmt.value)
                self.probe_step(typ, array)
                self._pre[id(stmt.value)] = f"{array}[q_s]"
            self.prepare(stmt)
            if before or self._loops:
                self.emit(self.storage_barrier)
            self.slot_loop(typ)
            self._in_slots = True
            value = self.expr(stmt.value)
            index, ok = self.element(view, stmt.indices)
            if self.replicated(typ):  # one update per element
                ok = f"q_t < {typ.size} && {ok}"
            update = self.atomic_update(stmt.op, binding, index, value, dtype)
            self.emit(f"if ({ok}) {{ {update}; }}")
            self._in_slots = in_slots
            self.close()
            self._pre = saved
        if not self.solo and (after or self._loops):  # (solo: a barrier would be divergent)
            self.emit(self.storage_barrier)

    def guarded_store(self, stmt, ok: str, index: str, value: str) -> None:
        """Write ``value`` at ``index`` of the array of ``stmt.view`` where ``ok`` holds,
        in program order with the program's other accesses to that memory (see the
        module docstring): a barrier first if any came before (or the store repeats, in
        a loop), and one after if a load may follow."""
        view = stmt.view
        write = self.array_write(self.binding(view.param), index, value, view.type.dtype)
        before, after = self.store_barriers[id(stmt)]
        if not self.solo and (before or self._loops):
            self.emit(self.storage_barrier)
        self.emit(f"if ({ok}) {{ {write} }}")
        if not self.solo and (after or self._loops):
            self.emit(self.storage_barrier)
