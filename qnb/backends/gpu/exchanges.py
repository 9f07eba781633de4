"""The ops that exchange elements between a program's threads through scratch
(workgroup/shared) memory: transposes, broadcasts, reductions, index reductions, scans."""

from __future__ import annotations

from qnb import ir
from qnb.backends.gpu.layout import (
    ARITH,
    REDUCE_ARITH,
    as_2d,
)
from qnb.dtypes import DType


class ExchangesMixin:
    """Exchanges through scratch memory."""

    def to_shared(
        self, array: str, typ: ir.Type, dtype: DType | None = None, index: int = 0
    ) -> str:
        """Barrier, then every thread writes its elements of the private ``array`` (a value
        of ``typ``, converted to ``dtype``) to scratch ``index`` at their flat indices;
        returns the scratch name. The caller puts a barrier before reading it."""
        dtype = dtype or typ.dtype
        name = self.scratch(self.scratch_dtype(dtype), index, typ.size)
        self.emit(self.barrier)
        self.slot_loop(typ)
        value = self.narrow(f"{array}[q_s]", typ.dtype, dtype)
        write = f"{name}[q_e] = {self.to_scratch(value, dtype)};"
        self.emit(f"if (q_t < {typ.size}) {{ {write} }}" if self.replicated(typ) else write)
        self.close()
        return name

    def read_shared(self, name: str, index: str, dtype: DType) -> str:
        return self.from_scratch(f"{name}[{index}]", dtype)

    def fill(self, typ: ir.Type, element) -> str:
        """A new private array of ``typ`` whose slot gets ``element()`` (called inside the
        slot loop, where it may emit statements)."""
        name = self.new_array(typ)
        self.slot_loop(typ)
        self.emit(f"{name}[q_s] = {element()};")
        self.close()
        return name

    def tile_Transpose(self, node: ir.Transpose) -> str:
        dtype = node.type.dtype
        m, n = node.operand.type.shape
        name = self.to_shared(self.materialize(node.operand), node.operand.type)
        self.emit(self.barrier)
        # result [r, c] (shape N x M) is operand [c, r]
        return self.fill(
            node.type, lambda: self.read_shared(name, f"(q_e % {m}) * {n} + q_e / {m}", dtype)
        )

    def tile_Broadcast(self, node: ir.Broadcast) -> str:
        source = self.materialize(node.operand)
        if self.free_broadcast(node):
            return self.fill(node.type, lambda: f"{source}[0]")
        a, b = as_2d(node.operand.type.shape)
        n = as_2d(node.type.shape)[1]
        name = self.to_shared(source, node.operand.type)
        self.emit(self.barrier)
        row = f"(q_e / {n}) * {b}" if a > 1 else "0"
        col = f"q_e % {n}" if b > 1 else "0"
        return self.fill(
            node.type, lambda: self.read_shared(name, f"{row} + {col}", node.type.dtype)
        )

    def free_broadcast(self, node: ir.Broadcast) -> bool:
        """Whether each thread already holds its elements of the broadcast: the operand is
        replicated (no larger than the program) and is repeated as whole rows, so element
        ``e`` of the result is element ``e % S`` of the operand, which thread ``e % P``
        holds in slot 0."""
        typ = node.operand.type
        a, b = as_2d(typ.shape)
        return typ.size <= self.threads and a == 1 and b in (1, as_2d(node.type.shape)[1])

    def expr_IndexReduce(self, node: ir.IndexReduce) -> str:
        """argmax/argmin: the spelling in reductions the node carries."""
        return self.expr(node.spelled)

    def tile_IndexReduce(self, node: ir.IndexReduce) -> str:
        return self.materialize(node.spelled)

    def expr_Reduce(self, node: ir.Reduce) -> str:
        """A reduction to a scalar: each thread combines its own slots, the program's
        partial results meet in scratch, and thread 0 combines them in thread order."""
        dtype = node.type.dtype
        # An f16 sum or product accumulates in f32 and rounds once, as NumPy's f16 sums do.
        work = self.accumulate_dtype(dtype) if node.op in REDUCE_ARITH else dtype
        typ = node.operand.type
        array = self.materialize(node.operand)
        partial = self.var(work, self.narrow(f"{array}[0]", typ.dtype, work))
        slots = self.slots(typ)
        if slots > 1:
            s = self.temp()
            self.open(self.counted_loop(s, 1, slots))
            value = self.narrow(f"{array}[{s}]", typ.dtype, work)
            self.emit(f"{partial} = {self.combine(node.op, partial, value, work)};")
            self.close()
        count = min(typ.size, self.threads)
        name = self.scratch(self.scratch_dtype(work), 0, count)
        self.emit(self.barrier)
        self.emit(f"if (q_t < {count}) {{ {name}[q_t] = {self.to_scratch(partial, work)}; }}")
        self.emit(self.barrier)
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        k = self.temp()
        self.open("if (q_lid == 0u) {")
        acc = self.reduce_init(node.op, name, "0", work)
        self.open(self.counted_loop(k, 1, count))
        value = self.read_shared(name, k, work)
        self.emit(f"{acc} = {self.combine(node.op, acc, value, work)};")
        self.close()
        self.emit(f"{slot} = {self.to_scratch(self.narrow(acc, work, dtype), dtype)};")
        self.close()
        return self.broadcast(slot, dtype)

    def tile_Reduce(self, node: ir.Reduce) -> str:
        """A reduction along one axis (to a vec): each thread combines its elements' rows
        or columns from scratch."""
        dtype = node.type.dtype
        work = self.accumulate_dtype(dtype) if node.op in REDUCE_ARITH else dtype
        typ = node.operand.type
        m, n = typ.shape
        name = self.to_shared(self.materialize(node.operand), typ, work)
        self.emit(self.barrier)
        k = self.temp()

        def element():
            if node.axis == 1:  # v[i] = op_j t[i, j]
                first, at, count = f"q_e * {n}", f"q_e * {n} + {k}", n
            else:  # v[j] = op_i t[i, j]
                first, at, count = "q_e", f"{k} * {n} + q_e", m
            acc = self.reduce_init(node.op, name, first, work)
            self.open(self.counted_loop(k, 1, count))
            self.emit(
                f"{acc} = {self.combine(node.op, acc, self.read_shared(name, at, work), work)};"
            )
            self.close()
            return self.narrow(acc, work, dtype)

        return self.fill(node.type, element)

    def tile_Scan(self, node: ir.Scan) -> str:
        """cumsum/cumprod, Hillis and Steele's way in scratch: at step ``d`` (1, 2, 4 …,
        unrolled: no loop for a driver to cut) each element combines the value ``d``
        before it on its line, when there is one, so after log2(line) steps each holds
        its inclusive scan. (Sums group differently from the cpu's running sum: the
        same value within rounding, the same bits for i32.)"""
        dtype = node.type.dtype
        work = self.accumulate_dtype(dtype)
        typ = node.operand.type
        m, n = as_2d(typ.shape)
        along_rows = node.axis != 0  # along each row (a vec: its one row)
        line, stride = (n, 1) if along_rows else (m, n)
        name = self.to_shared(self.materialize(node.operand), typ, work)
        self.emit(self.barrier)
        private = self.new_array(typ.with_dtype(work))
        position = f"q_e % {n}" if along_rows else f"q_e / {n}"
        step = 1
        while step < line:
            self.slot_loop(typ)
            own = self.read_shared(name, "q_e", work)
            # (clamped: a select may read both sides, and the first elements have none)
            earlier = self.read_shared(name, f"max(q_e - {step * stride}, 0)", work)
            combined = self.combine(node.op, earlier, own, work)
            self.emit(f"{private}[q_s] = {self.select(f'{position} >= {step}', combined, own)};")
            self.close()
            self.emit(self.barrier)
            self.slot_loop(typ)
            write = f"{name}[q_e] = {self.to_scratch(f'{private}[q_s]', work)};"
            self.emit(f"if (q_t < {typ.size}) {{ {write} }}" if self.replicated(typ) else write)
            self.close()
            self.emit(self.barrier)
            step *= 2
        return self.fill(
            node.type, lambda: self.narrow(self.read_shared(name, "q_e", work), work, dtype)
        )

    def narrow(self, value: str, work: DType, dtype: DType) -> str:
        """``value``, computed in ``work``, as ``dtype`` (unchanged text when they agree)."""
        return value if work is dtype else self.cast(value, work, dtype)

    def arith(self, op: str, a: str, b: str, dtype: DType) -> str:
        """``a + b`` / ``a - b`` / ``a * b`` in ``dtype``, unparenthesised, for the products
        and sums the walker writes itself (a target whose i32 overflow is undefined wraps
        it here)."""
        return f"{a} {ARITH[op]} {b}"

    def combine(self, op: str, acc: str, value: str, dtype: DType) -> str:
        if op in REDUCE_ARITH:
            return self.arith(REDUCE_ARITH[op], acc, value, dtype)
        return self.minmax(op, acc, value, dtype)

    def reduce_init(self, op: str, name: str, first: str, dtype: DType) -> str:
        return self.var(dtype, self.read_shared(name, first, dtype))
