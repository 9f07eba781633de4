"""Expressions on the GPU: addressing (views, windows, elements), scalars, and the
elementwise ops rendered one slot (element) at a time."""

from __future__ import annotations

from qnb import ir
from qnb.dtypes import DType, bf16, bool_, f16, f32, i32


class ExpressionsMixin:
    """Addressing and elementwise expressions."""

    def view_base(self, view: ir.ArrayView):
        """((flat offset of the view, condition that the batch exists), dims of the view)."""
        dims = [self.array_dim(self.dim_field(view.param, axis)) for axis in range(view.type.ndim)]
        if view.batch is None:
            return ("0", "true"), dims
        batch = self.let(i32, self.expr(view.batch))
        slab = " * ".join(dims[1:]) or "1"
        return (f"{self.wide(batch)} * {slab}", f"{batch} >= 0 && {batch} < {dims[0]}"), dims[1:]

    def window(self, view, r0, r1, c0, c1, shape):
        """(flat index, in-window condition) of this slot's element of a tile window."""
        (offset, batch_ok), (rows, cols) = self.view_base(view)
        r0, r1, c0, c1 = (self.let(i32, self.expr(e)) for e in (r0, r1, c0, c1))
        n = shape[1]
        row, col = self.let(i32, f"{r0} + q_e / {n}"), self.let(i32, f"{c0} + q_e % {n}")
        ok = self.let(
            bool_,
            f"{batch_ok} && {row} >= 0 && {col} >= 0 && {row} < min({r1}, {rows}) "
            f"&& {col} < min({c1}, {cols})",
        )
        return f"{offset} + {self.wide(row)} * {cols} + {col}", ok

    def element(self, view, indices):
        (offset, batch_ok), dims = self.view_base(view)
        values = [self.let(i32, self.expr(e)) for e in indices]
        ok = " && ".join([batch_ok] + [f"{v} >= 0 && {v} < {d}" for v, d in zip(values, dims)])
        flat = self.wide(values[0])
        for v, d in zip(values[1:], dims[1:]):
            flat = f"({flat}) * {d} + {v}"
        return f"{offset} + {flat}", ok

    def expr(self, node: ir.Expr) -> str:
        """A scalar's value; in a slot loop, the element ``q_s`` of a tile or vec; outside
        one, a tile or vec as the name of its private array."""
        prepared = self._pre.get(id(node))
        if prepared is not None:
            return prepared
        if not self._in_slots and node.type.kind in ("tile", "vec"):
            return self.materialize(node)
        saved = self._loc
        self._loc = node.loc or saved
        try:
            return getattr(self, "expr_" + type(node).__name__)(node)
        finally:
            self._loc = saved

    def expr_Const(self, node: ir.Const) -> str:
        return self.literal(node.value, node.type.dtype)

    def param_value(self, param: ir.Param) -> str:
        """A scalar parameter's value, as its own dtype."""
        return self.scalar_param(self.param_field(param.name))

    def expr_Var(self, node: ir.Var) -> str:
        if node.name in self.kernel.locals:
            if node.type.kind in ("tile", "vec"):
                return f"{self.local(node.name)}[q_s]"
            return self.local(node.name)
        for param in self.kernel.scalars:
            if param.name == node.name:
                return self.param_value(param)
        return self.local(node.name)

    def expr_ProgramId(self, node: ir.ProgramId) -> str:
        return self.program_id(node.which, node.axis)

    def expr_ArrayDim(self, node: ir.ArrayDim) -> str:
        return self.array_dim(self.dim_field(node.param, node.axis))

    def expr_Unary(self, node: ir.Unary) -> str:
        a = self.expr(node.operand)
        if a.startswith("-"):  # a negative literal: "--0.5f" would be a decrement
            a = f"({a})"
        if node.op in self.unary_templates:
            return self.unary_templates[node.op].format(a=a)
        if node.op == "abs" and node.type.dtype is bool_:
            return a
        return f"{self.math_functions[node.op]}({a})"

    def expr_Binary(self, node: ir.Binary) -> str:
        a, b = self.expr(node.left), self.expr(node.right)
        dtype = node.left.type.dtype
        op = node.op
        if op in ("max", "min"):
            return self.minmax(op, a, b, dtype)
        if op == "floordiv":
            return f"{self.helper_floordiv(dtype)}({a}, {b})"
        if op == "mod":
            return f"{self.helper_mod(dtype)}({a}, {b})"
        if op == "pow":
            return f"{self.helper_pow(dtype)}({a}, {b})"
        if op == "div" and not dtype.is_float:
            return f"{self.helper_floordiv(dtype)}({a}, {b})"
        if op == "xor" and dtype is i32:  # the table's "!=" is xor on bools only
            return f"({a} ^ {b})"
        if op in ("shl", "shr"):
            return f"{self.helper_shift(op)}({a}, {b})"
        return self.binary_templates[op].format(a=a, b=b)

    def expr_Logical(self, node: ir.Logical) -> str:
        left = self.expr(node.left)
        # The right side may need statements (a reduction, a load): evaluate it only
        # where the left side does not decide, like Python.
        result = self.var(bool_, left)
        self.open(f"if ({'' if node.op == 'and' else '!'}{result}) {{")
        right = self.expr(node.right)
        self.emit(f"{result} = {right};")
        self.close()
        return result

    def expr_Select(self, node: ir.Select) -> str:
        cond, a, b = self.expr(node.cond), self.expr(node.if_true), self.expr(node.if_false)
        return self.select(cond, a, b)

    def expr_Cast(self, node: ir.Cast) -> str:
        source, target = node.operand.type.dtype, node.type.dtype
        a = self.expr(node.operand)
        if source is target:
            return a
        if target is i32 and source.is_float:
            if source in (f16, bf16):  # through f32, which holds every half exactly
                a, source = self.cast(a, source, f32), f32
            return f"{self.helper_float_to_int(source)}({a})"
        return self.cast(a, source, target)

    def expr_ArrayLoad(self, node: ir.ArrayLoad) -> str:
        index, ok = self.element(node.view, node.indices)
        dtype = node.type.dtype
        value = self.array_read(self.binding(node.view.param), index, dtype)
        if self.solo:  # the program's one thread reads for itself
            result = self.var(dtype, self.literal(0, dtype))
            self.emit(f"if ({ok}) {{ {result} = {value}; }}")
            return result
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        self.emit(self.barrier)
        self.open("if (q_lid == 0u) {")
        self.emit(f"{slot} = {self.to_scratch(self.literal(0, dtype), dtype)};")
        self.emit(f"if ({ok}) {{ {slot} = {self.to_scratch(value, dtype)}; }}")
        self.close()
        return self.broadcast(slot, dtype)

    def broadcast(self, slot: str, dtype: DType) -> str:
        target = self.var(self.scratch_dtype(dtype))
        for line in self.uniform_load(slot, target):
            self.emit(line)
        return self.from_scratch(target, dtype)

    def to_scratch(self, value: str, dtype: DType) -> str:
        stored = self.scratch_dtype(dtype)
        return value if stored is dtype else self.cast(value, dtype, stored)

    def from_scratch(self, value: str, dtype: DType) -> str:
        stored = self.scratch_dtype(dtype)
        return value if stored is dtype else self.cast(value, stored, dtype)

    def expr_TileFill(self, node: ir.TileFill) -> str:
        dtype = node.type.dtype
        if node.kind == "eye":
            n = node.type.shape[-1]
            return self.select(
                f"q_e / {n} == q_e % {n}", self.literal(1, dtype), self.literal(0, dtype)
            )
        if node.kind == "arange":
            return self.cast("q_e", i32, dtype) if dtype is not i32 else "q_e"
        value = self.expr(node.value)
        if node.value.type.dtype is not dtype:
            value = self.cast(value, node.value.type.dtype, dtype)
        return value

    def expr_Reshape(self, node: ir.Reshape) -> str:
        return self.expr(node.operand)  # the same flat order: the same slots

    def expr_TileSet(self, node: ir.TileSet) -> str:
        base, value = self.expr(node.base), self.expr(node.value)
        shape = node.type.shape
        i = self.let(i32, self.expr(node.i))
        if node.j is None:
            here = f"{i} >= 0 && {i} < {shape[0]} && q_e == {i}"
        else:
            j = self.let(i32, self.expr(node.j))
            here = (
                f"{i} >= 0 && {i} < {shape[0]} && {j} >= 0 && {j} < {shape[1]} "
                f"&& q_e == {i} * {shape[1]} + {j}"
            )
        return self.let(node.type.dtype, self.select(here, value, base))

    def expr_LoadWindow(self, node: ir.LoadWindow) -> str:
        dtype = node.type.dtype
        result = self.var(dtype, self.expr(node.base))
        index, ok = self.window(node.view, node.r0, node.r1, node.c0, node.c1, node.type.shape)
        stored = node.view.type.dtype
        value = self.array_read(self.binding(node.view.param), index, stored)
        if stored is not dtype:  # Tile.load(..., dtype=): converted as astype does
            value = self.cast(value, stored, dtype)
        self.emit(f"if ({ok}) {{ {result} = {value}; }}")
        return result

    def vec_place(self, view, start, stop, col, axis):
        """(flat index, condition) of this slot's element of a vec load or store."""
        base, dims = self.view_base(view)
        start, stop = self.let(i32, self.expr(start)), self.let(i32, self.expr(stop))
        pos = self.let(i32, f"{start} + q_e")
        if col is None:
            ok = f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[0]})"
            return f"{base[0]} + {pos}", ok
        col = self.let(i32, self.expr(col))
        if axis == 0:  # a column: a[start + i, col]
            ok = (
                f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[0]}) "
                f"&& {col} >= 0 && {col} < {dims[1]}"
            )
            return f"{base[0]} + {self.wide(pos)} * {dims[1]} + {col}", ok
        ok = (  # a row: a[col, start + j]
            f"{base[1]} && {pos} >= 0 && {pos} < min({stop}, {dims[1]}) "
            f"&& {col} >= 0 && {col} < {dims[0]}"
        )
        return f"{base[0]} + {self.wide(col)} * {dims[1]} + {pos}", ok

    def expr_VecLoad(self, node: ir.VecLoad) -> str:
        dtype = node.type.dtype
        index, ok = self.vec_place(node.view, node.start, node.stop, node.col, node.axis)
        other = self.literal(0, dtype) if node.other is None else self.expr(node.other)
        result = self.var(dtype, other)
        stored = node.view.type.dtype
        value = self.array_read(self.binding(node.view.param), index, stored)
        if stored is not dtype:
            value = self.cast(value, stored, dtype)
        self.emit(f"if ({ok}) {{ {result} = {value}; }}")
        return result

    def expr_Broadcast(self, node: ir.Broadcast) -> str:
        raise AssertionError("a Broadcast is prepared before its slot loop")  # pragma: no cover
