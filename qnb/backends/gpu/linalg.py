"""Linear algebra on the GPU: ``@`` in chunks of K through scratch, outer products,
rows and columns, tile elements, Cholesky factorisation and triangular solves."""

from __future__ import annotations

from qnb import ir
from qnb.backends.gpu.layout import (
    BYTES,
)
from qnb.dtypes import DType, i32


class LinalgMixin:
    """Linear algebra through scratch."""

    def matmul_chunk(self, m: int, n: int, k: int, dtype: DType) -> int:
        """How many of the K columns of ``a`` (rows of ``b``) are staged at once: the
        largest power of two whose two panels fit :attr:`staging_bytes`."""
        chunk = k
        while chunk > 1 and (m + n) * chunk * BYTES[dtype] > self.staging_bytes:
            chunk //= 2
        return chunk

    def micro_tile(self, m: int, n: int, work: DType) -> tuple[int, int] | None:
        """``(rows, cols)`` of the block of C each thread accumulates in registers when
        it holds more than one element of C (``rows * cols`` its slots, as square as
        the sides allow): each k then reads ``rows + cols`` values of the panels for
        ``rows * cols`` products, where a thread of the program's layout (its slots in
        one column of C) reads one more than it multiplies. None where a thread holds
        one element, the blocks do not tile C, or C would not fit in half the scratch
        (it goes to the program's layout through scratch once K is done)."""
        slots = m * n // self.threads
        if m * n < self.threads or slots < 2 or m * n * BYTES[work] > self.shared_limit // 2:
            return None
        rows = 1 << ((slots.bit_length() - 1 + 1) // 2)
        cols = slots // rows
        if m % rows or n % cols:
            return None
        return rows, cols

    def tile_Matmul(self, node: ir.Matmul) -> str:
        """``acc + a @ b``: the K axis in chunks; per chunk the panels ``a[:, k0:k0+kc]``
        and ``b[k0:k0+kc, :]`` go through scratch and each thread adds their products
        into its own elements (or a block of C it holds in registers, see
        :meth:`micro_tile`), in K order."""
        dtype = node.type.dtype
        work = self.accumulate_dtype(node.a.type.dtype)
        (m, kk), n = node.a.type.shape, node.b.type.shape[1]
        a, b = self.materialize(node.a), self.materialize(node.b)
        acc_value = None if node.acc is None else self.materialize(node.acc)
        chunk = self.matmul_chunk(m, n, kk, work)
        micro = self.micro_tile(m, n, work)
        if micro is None:
            total = self.new_array(node.type.with_dtype(work))
            self.slot_loop(node.type)
            self.emit(f"{total}[q_s] = {self.literal(0, work)};")
            self.close()
        else:
            block = self.micro_block(micro, n, work)
            total = block[0]
        sa = self.scratch(self.scratch_dtype(work), 0, m * chunk)
        sb = self.scratch(self.scratch_dtype(work), 1, chunk * n)
        c = self.temp()
        self.open(self.counted_loop(c, 0, kk // chunk))
        self.emit(self.barrier)
        for array, typ, panel, at, inside in (
            (
                a,
                node.a.type,
                sa,
                f"(q_e / {kk}) * {chunk} + q_e % {chunk}",
                f"q_e % {kk} / {chunk} == {c}",
            ),
            (
                b,
                node.b.type,
                sb,
                f"(q_e / {n} % {chunk}) * {n} + q_e % {n}",
                f"q_e / {n} / {chunk} == {c}",
            ),
        ):
            if self.replicated(typ):
                inside += f" && q_t < {typ.size}"
            self.slot_loop(typ)
            value = self.to_scratch(self.narrow(f"{array}[q_s]", typ.dtype, work), work)
            self.emit(f"if ({inside}) {{ {panel}[{at}] = {value}; }}")
            self.close()
        self.emit(self.barrier)
        if micro is None:
            self.slot_products(node.type, total, sa, sb, n, chunk, work)
            slot = f"{total}[q_s]"
        else:
            held = self.micro_products(micro, block, sa, sb, m, n, chunk, work)
            slot = self.read_shared(held, "q_e", work)

        def element():
            result = self.narrow(slot, work, dtype)
            if acc_value is not None:
                result = f"({self.arith('add', f'{acc_value}[q_s]', result, dtype)})"
            return result

        return self.fill(node.type, element)

    def slot_products(self, typ, total, sa, sb, n, chunk, work) -> None:
        """A chunk's products added into each thread's slots of C, and the chunk loop
        closed."""
        k = self.temp()
        if self.threads % n == 0 and not self.replicated(typ):
            # every slot of a thread is in one column of C (q_e % n is q_t % n): each k
            # reads that column's b once and adds its products into all the slots
            self.open(self.counted_loop(k, 0, chunk))
            b_k = self.let(work, self.read_shared(sb, f"{k} * {n} + q_t % {n}", work))
            self.slot_loop(typ)
        else:
            self.slot_loop(typ)
            self.open(self.counted_loop(k, 0, chunk))
            b_k = self.read_shared(sb, f"{k} * {n} + q_e % {n}", work)
        a_k = self.read_shared(sa, f"(q_e / {n}) * {chunk} + {k}", work)
        product = self.arith("mul", a_k, b_k, work)
        self.emit(f"{total}[q_s] = {self.arith('add', f'{total}[q_s]', product, work)};")
        self.close()
        self.close()
        self.close()

    def micro_block(self, micro, n, work) -> tuple[str, str, str]:
        """``(array, top, left)``: the private array of a thread's block of C (zeros),
        and the block's first row and column."""
        rows, cols = micro
        total = self.temp()
        self.emit(self.declare_array(total, work, rows * cols))
        for slot in range(rows * cols):
            self.emit(f"{total}[{slot}] = {self.literal(0, work)};")
        across = n // cols  # (blocks along a row of C)
        top = self.let(i32, f"(q_t / {across}) * {rows}")
        left = self.let(i32, f"(q_t % {across}) * {cols}")
        return total, top, left

    def micro_products(self, micro, block, sa, sb, m, n, chunk, work) -> str:
        """A chunk's products added into each thread's block of C (``rows + cols`` panel
        reads a k), the chunk loop closed, then C written to scratch 0 at its flat
        indices, for the program's layout to read; returns that scratch."""
        rows, cols = micro
        total, top, left = block
        k = self.temp()
        self.open(self.counted_loop(k, 0, chunk))
        a_i = [
            self.let(work, self.read_shared(sa, f"({top} + {i}) * {chunk} + {k}", work))
            for i in range(rows)
        ]
        b_j = [
            self.let(work, self.read_shared(sb, f"{k} * {n} + {left} + {j}", work))
            for j in range(cols)
        ]
        for i in range(rows):
            for j in range(cols):
                slot = f"{total}[{i * cols + j}]"
                product = self.arith("mul", a_i[i], b_j[j], work)
                self.emit(f"{slot} = {self.arith('add', slot, product, work)};")
        self.close()
        self.close()
        held = self.scratch(self.scratch_dtype(work), 0, m * n)
        self.emit(self.barrier)  # (the last chunk's panel reads are done)
        for i in range(rows):
            for j in range(cols):
                value = self.to_scratch(f"{total}[{i * cols + j}]", work)
                self.emit(f"{held}[({top} + {i}) * {n} + {left} + {j}] = {value};")
        self.emit(self.barrier)
        return held

    def tile_Outer(self, node: ir.Outer) -> str:
        dtype = node.type.dtype
        n = node.type.shape[1]
        u, v = self.materialize(node.u), self.materialize(node.v)
        su = self.to_shared(u, node.u.type, index=0)
        sv = self.to_shared(v, node.v.type, index=1)
        self.emit(self.barrier)
        return self.fill(
            node.type,
            lambda: self.arith(
                "mul",
                self.read_shared(su, f"q_e / {n}", dtype),
                self.read_shared(sv, f"q_e % {n}", dtype),
                dtype,
            ),
        )

    def tile_RowCol(self, node: ir.RowCol) -> str:
        dtype = node.type.dtype
        m, n = node.operand.type.shape
        array = self.materialize(node.operand)
        index = self.let(i32, self.expr(node.index))
        name = self.to_shared(array, node.operand.type)
        self.emit(self.barrier)
        at = f"{index} * {n} + q_e" if node.which == "row" else f"q_e * {n} + {index}"
        limit = m if node.which == "row" else n

        def element():
            result = self.var(dtype, self.literal(0, dtype))
            self.emit(
                f"if ({index} >= 0 && {index} < {limit}) "
                f"{{ {result} = {self.read_shared(name, at, dtype)}; }}"
            )
            return result

        return self.fill(node.type, element)

    def expr_TileGet(self, node: ir.TileGet) -> str:
        """An element as a scalar: its owner thread writes it to the broadcast slot."""
        dtype = node.type.dtype
        typ = node.base.type
        array = self.materialize(node.base)
        i = self.let(i32, self.expr(node.i))
        if node.j is None:
            inside = f"{i} >= 0 && {i} < {typ.shape[0]}"
            flat = i
        else:
            j = self.let(i32, self.expr(node.j))
            m, n = typ.shape
            inside = f"{i} >= 0 && {i} < {m} && {j} >= 0 && {j} < {n}"
            flat = self.let(i32, f"{i} * {n} + {j}")
        if self.replicated(typ):
            owner, slot_index = f"q_t == {flat}", "0"
        else:
            p = self.threads
            owner, slot_index = f"q_t == {flat} % {p}", f"{flat} / {p}"
        slot = self.broadcast_slot(self.scratch_dtype(dtype))
        self.emit(self.barrier)
        # An index outside the value reads 0 (thread 0 writes it; no owner exists).
        self.emit(
            f"if (q_lid == 0u && !({inside})) {{ {slot} = "
            f"{self.to_scratch(self.literal(0, dtype), dtype)}; }}"
        )
        self.emit(
            f"if (({inside}) && {owner}) {{ {slot} = "
            f"{self.to_scratch(f'{array}[{slot_index}]', dtype)}; }}"
        )
        return self.broadcast(slot, dtype)

    def tile_Cholesky(self, node: ir.Cholesky) -> str:
        dtype = node.type.dtype
        n = node.type.shape[0]
        eps = self.let(dtype, self.expr(node.eps))
        a = self.to_shared(self.materialize(node.operand), node.operand.type)
        self.emit(self.barrier)
        j, k, r = self.temp(), self.temp(), self.temp()
        at = lambda row, col: self.read_shared(a, f"{row} * {n} + {col}", dtype)  # noqa: E731
        # Column j: thread 0 finishes the diagonal over the finished columns k < j, then
        # the rows below (a thread per row, strided) divide by it. f16 dot products
        # accumulate in f32 and round once (as the cpu backend's einsum).
        work = self.accumulate_dtype(dtype)
        wide = lambda row, col: self.narrow(at(row, col), dtype, work)  # noqa: E731
        sqrt = self.math_functions["sqrt"]

        def dot(row):
            total = self.var(work, self.literal(0, work))
            self.open(self.counted_loop(k, 0, j))
            self.emit(f"{total} = {total} + {wide(row, k)} * {wide(j, k)};")
            self.close()
            return self.narrow(total, work, dtype)

        self.open(self.counted_loop(j, 0, n))
        self.open("if (q_lid == 0u) {")
        total = self.let(dtype, dot(j))
        floored = self.minmax("max", f"{at(j, j)} - {total}", eps, dtype)
        self.emit(f"{a}[{j} * {n} + {j}] = {self.to_scratch(f'{sqrt}({floored})', dtype)};")
        self.close()
        self.emit(self.barrier)
        self.open(self.strided_loop(r, f"{j} + 1 + q_t", n, self.threads))
        total = self.let(dtype, dot(r))
        below = self.to_scratch(f"({at(r, j)} - {total}) / {at(j, j)}", dtype)
        self.emit(f"{a}[{r} * {n} + {j}] = {below};")
        self.close()
        self.emit(self.barrier)
        self.close()
        return self.fill(
            node.type,
            lambda: self.select(
                f"q_e / {n} >= q_e % {n}", self.read_shared(a, "q_e", dtype), self.literal(0, dtype)
            ),
        )

    def tile_SolveTriangular(self, node: ir.SolveTriangular) -> str:
        dtype = node.type.dtype
        m, n = node.type.shape
        lower_value, rhs_value = self.materialize(node.lower), self.materialize(node.rhs)
        lower = self.to_shared(lower_value, node.lower.type, index=0)
        x = self.to_shared(rhs_value, node.rhs.type, index=1)
        self.emit(self.barrier)
        k, q, r = self.temp(), self.temp(), self.temp()
        L = lambda row, col: self.read_shared(lower, f"{row} * {n} + {col}", dtype)  # noqa: E731
        X = lambda row, col: self.read_shared(x, f"{row} * {n} + {col}", dtype)  # noqa: E731
        # Rows of X are independent: a thread per row (strided) substitutes forward.
        work = self.accumulate_dtype(dtype)  # f16 dots accumulate in f32, round once
        self.open(self.strided_loop(r, "q_t", m, self.threads))
        self.open(self.counted_loop(k, 0, n))
        if work is dtype:
            total = self.var(dtype, X(r, k))
            self.open(self.counted_loop(q, 0, k))
            self.emit(f"{total} = {total} - {X(r, q)} * {L(k, q)};")
            self.close()
        else:
            dot = self.var(work, self.literal(0, work))
            self.open(self.counted_loop(q, 0, k))
            wide = [self.narrow(v, dtype, work) for v in (X(r, q), L(k, q))]
            self.emit(f"{dot} = {dot} + {wide[0]} * {wide[1]};")
            self.close()
            total = self.let(dtype, f"{X(r, k)} - {self.narrow(dot, work, dtype)}")
        self.emit(f"{x}[{r} * {n} + {k}] = {self.to_scratch(f'{total} / {L(k, k)}', dtype)};")
        self.close()
        self.close()
        self.emit(self.barrier)
        return self.fill(node.type, lambda: self.read_shared(x, "q_e", dtype))
