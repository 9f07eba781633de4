"""Random kernels for the cpu backend's two executors (the interpreter and the prepared
closures), drawn by Hypothesis: windows at any offset, stride and overlap, program-
dependent windows on 1-, 2- and 3-D grids, padded, unpadded and masked loads and stores,
edge programs, aliased arguments, every dtype, reductions, vecs, elements, tile get/set
and control flow that is uniform or differs between programs.

:func:`kernels` draws a :class:`Case`: the kernel's source, its grid and a function that
builds fresh arguments (the same values, and the same aliasing between them, each time).
Each kernel is ``k(x, y, v, w, s)``: ``x`` an input array (2-D or 3-D), ``y`` an output
array (2-D or 3-D, maybe ``x`` itself or an overlapping view of it), ``v`` a 1-D array
(vecs are loaded from and stored to it; maybe a view of ``y``), ``w`` a 1-D array for
scalars, ``s`` an i32 scalar. The body is a few statements over tiles of one shape (and
its transpose), vecs and scalars, in the subset every dtype types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

DTYPES = ["f16", "bf16", "f32", "f64", "i32", "bool"]
NUMPY = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i32": np.dtype(np.int32),
    "bool": np.dtype(bool),
}
QNB_NAME = {d: f"qnb.{d}" if d != "bool" else "qnb.bool_" for d in DTYPES}
SIDES = [1, 2, 4, 8, 16]


@dataclass
class Case:
    source: str
    grid: tuple[int, int, int]
    make_args: Callable[[], list]
    dtype: str

    def __repr__(self):  # what Hypothesis prints for a failing example
        return f"Case(dtype={self.dtype}, grid={self.grid})\n{self.source}"


def _on_a_tile(statement):
    """A statement drawn about one of the tiles so far (its name and shape passed on);
    where there is none yet, a statement that makes one instead."""

    def drawn(self, indent, depth):
        name = self.any_tile()
        if name is None:
            return self.s_tile(indent, depth)
        return statement(self, indent, depth, name, self.tiles[name])

    return drawn


class _Body:
    """The statements of one kernel, drawn one by one (``draw`` is Hypothesis's)."""

    def __init__(self, draw, dtype: str, shape, x_ndim: int, y_ndim: int, grid_ndim: int):
        self.draw = draw
        self.dtype = dtype
        self.shape = shape
        self.x_ndim, self.y_ndim, self.grid_ndim = x_ndim, y_ndim, grid_ndim
        self.lines: list[str] = []
        self.tiles: dict[str, tuple[int, int]] = {}
        self.vecs: dict[str, int] = {}
        self.scalars: list[str] = []  # of the kernel's dtype
        self.counter = 0
        self.tight = False

    # ------------------------------------------------------------------ pieces

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def literal(self, value=None):
        if self.dtype == "bool":
            return self.pick(["True", "False"])
        if value is None:
            value = self.draw(st.integers(-3, 3))
        return f"{value}.0" if self.dtype[0] in "fb" else str(value)

    def pid(self):
        axes = ["i", "qnb.program_id(0)"]
        if self.grid_ndim > 1:
            axes += ["j", "qnb.program_id(1)"]
        if self.grid_ndim > 2:
            axes += ["b"]
        return self.pick(axes)

    def offset(self, wide=False, low=None):
        """An i32 index: ``program_id * f + u`` mostly (strided windows), else a uniform
        value, a scalar parameter, or a non-linear function of the program. ``low`` is
        the least ``u`` (unpadded windows mostly start inside the array)."""
        if self.tight:  # windows that step by little and stay inside the arrays
            f, u = self.pick([0, 1, 1, 2, 3, 4]), self.draw(st.integers(0, 3))
            return f"({self.pid()} * {f} + {u})" if f else f"({u} + 0)"
        kind = self.draw(st.integers(0, 9))
        if low is None:
            low = -6 if wide else -3
        u = self.draw(st.integers(low, 12 if wide else 6))
        if kind <= 5:
            f = self.pick([0, 1, 2, 3, 4, 8, 16] if wide else [0, 1, 2, 3])
            if f == 0:
                return f"({u} + 0)"  # (a negative literal is refused in a slice)
            return f"({self.pid()} * {f} + {u})"
        if kind == 6:
            return f"(s + {u})"
        if kind == 7:
            return f"({self.pid()} * {self.pick([1, 2, 4])} - s)"
        if kind == 8:
            return f"(({self.pid()} * 5 + {u}) % 7)"
        return f"(x.shape[{self.x_ndim - 2}] - 1 - {self.pid()} * {self.pick([1, 3])})"

    def inside(self, extent):
        """An index that is mostly inside ``extent`` (an expression of a side)."""
        index = self.offset()
        if self.draw(st.integers(0, 4)):
            return f"({index} % {extent})"
        return index

    def slab(self, array, ndim):
        """``array`` or one of its slabs ``array[b]`` (3-D)."""
        if ndim == 2:
            return array
        index = self.pick(["0", "(b % 2)", "(i % 2)", "(j % 2)", "1", "(s % 2)", "i", "s"])
        return f"{array}[{index}]"

    def bound(self, start, side):
        """The end of an unpadded window from ``start`` (usually a tile's side on)."""
        extra = self.pick([0, 0, 0, -1, 1, -side])
        return f"{start} + {side + extra}"

    def tile_shape(self):
        m, n = self.shape
        return self.pick([(m, n), (n, m)]) if m != n else (m, n)

    def tile_type(self, shape):
        return f"qnb.Tile[{shape[0]}, {shape[1]}]"

    def any_tile(self, shape=None):
        names = [n for n, s in self.tiles.items() if shape is None or s == shape]
        return self.pick(names) if names else None

    # ------------------------------------------------------------------ values

    def tile_expr(self, shape, depth=0):
        """An expression of a tile of ``shape`` and the kernel's dtype."""
        leaves = [n for n, s in self.tiles.items() if s == shape]
        if not leaves or (depth < 2 and self.draw(st.booleans())):
            kind = self.draw(st.integers(0, 5 if depth < 2 else 1))
            if kind <= 1:
                return self.load_expr(shape)
            if kind == 2:
                return f"{self.tile_type(shape)}.full({self.literal()}, {QNB_NAME[self.dtype]})"
            if kind == 3 and shape[0] == shape[1] and self.dtype != "bool":
                return f"{self.tile_type(shape)}.eye({QNB_NAME[self.dtype]})"
            if kind == 4:
                other = (shape[1], shape[0])
                if other in self.tiles.values():
                    return f"{self.any_tile(other)}.T"
            if kind == 5 and (self.vecs or self.scalars):
                return self.broadcast_expr(shape, depth)
            return self.load_expr(shape)
        a = self.pick(leaves)
        if depth >= 2 or self.draw(st.integers(0, 3)) == 0:
            return a
        b = self.tile_expr(shape, depth + 1)
        return self.combine(a, b, shape)

    def combine(self, a, b, shape):
        d = self.dtype
        if d == "bool":
            return self.pick([f"({a} & {b})", f"({a} | {b})", f"({a} ^ {b})", f"(~{a})"])
        if d == "i32":
            return self.pick(
                [
                    f"({a} + {b})",
                    f"({a} - {b} * 3)",
                    f"({a} * {b})",
                    f"({a} // (qnb.abs({b}) + 1))",
                    f"({a} % 7)",
                    f"({a} ^ {b})",
                    f"({a} << 2)",
                    f"({a} >> 1)",
                    f"qnb.maximum({a}, {b})",
                    f"qnb.where({a} > {b}, {a}, -{b})",
                ]
            )
        name = QNB_NAME[d]
        return self.pick(
            [
                f"({a} + {b})",
                f"({a} - {b} * 2.0)",
                f"({a} * {b})",
                f"({a} / (qnb.abs({b}) + 1.0))",
                f"qnb.maximum({a}, {b})",
                f"qnb.minimum({a}, -{b})",
                f"qnb.where({a} > {b}, {a}, {b} * 0.5)",
                f"qnb.sqrt(qnb.abs({a}))",
                f"qnb.exp(qnb.minimum({a}, 2.0))",
                f"qnb.floor({a} * 3.0)",
                f"({a}).astype(qnb.f64).astype({name})",
                f"({a}).astype(qnb.i32).astype({name})",
            ]
        )

    def broadcast_expr(self, shape, depth):
        """A tile from a vec or a scalar broadcast against another tile."""
        m, n = shape
        rows = [v for v, size in self.vecs.items() if size == n]
        cols = [v for v, size in self.vecs.items() if size == m]
        base = self.load_expr(shape)
        op = "&" if self.dtype == "bool" else "+"
        if rows and self.draw(st.booleans()):
            return f"({base} {op} {self.pick(rows)})"
        if cols and self.draw(st.booleans()):
            return f"({base} {op} {self.pick(cols)}[:, None])"
        if self.scalars:
            return f"({base} {op} {self.pick(self.scalars)})"
        return base

    def load_expr(self, shape):
        array = self.slab("x", self.x_ndim)
        r, c = self.offset(wide=True), self.offset(wide=True)
        kind = self.draw(st.integers(0, 3))
        if kind == 0:
            return f"{self.tile_type(shape)}.load({array}, {r}, {c})"
        if kind == 1 and self.dtype != "bool":
            return f"{self.tile_type(shape)}.load({array}, {r}, {c}, other={self.literal()})"
        if kind == 2 and self.dtype not in ("bool", "i32"):
            to = QNB_NAME[self.dtype]
            load = f"{self.tile_type(shape)}.load({array}, {r}, {c}, dtype=qnb.f64)"
            return f"{load}.astype({to})"
        return f"{self.tile_type(shape)}.load({array}, {r}, {c}, other={self.literal(0)})"

    def scalar_expr(self):
        """A scalar of the kernel's dtype (for bool: of i32 from a reduction's sum)."""
        options = []
        if self.tiles:
            t = self.pick(list(self.tiles))
            if self.dtype == "bool":
                shape = self.tiles[t]
                i = self.draw(st.integers(0, shape[0]))
                j = self.draw(st.integers(0, shape[1] - 1))
                options.append(f"{t}[{i}, {j}]")
            else:
                options += [f"{t}.sum()", f"{t}.max()", f"{t}.min()"]
                shape = self.tiles[t]
                i = self.pick([str(self.draw(st.integers(0, shape[0]))), "(i % 3)", "s"])
                j = self.draw(st.integers(0, shape[1] - 1))
                options.append(f"{t}[{i}, {j}]")
        if self.vecs and self.dtype != "bool":
            u = self.pick(list(self.vecs))
            options += [f"{u}.sum()", f"{u}.max()", f"{u}[{self.draw(st.integers(0, 3))}]"]
        rows, cols = (f"x.shape[{self.x_ndim - 2 + a}]" for a in (0, 1))
        if self.x_ndim == 2:
            options.append(f"x[{self.inside(rows)}, {self.inside(cols)}]")
        else:
            slab = self.pick(["0", "(i % 2)", "s"])
            options.append(f"x[{slab}, {self.inside(rows)}, {self.inside(cols)}]")
        options.append(self.literal())
        return self.pick(options)

    # ------------------------------------------------------------------ statements

    def statement(self, indent=1, depth=0):
        kinds = [
            "tile",
            "tile",
            "load_",
            "store",
            "store",
            "reduce",
            "vec",
            "vec_store",
            "element",
            "set",
            "block_grid",
        ]
        if depth < 2:
            kinds += ["if", "for", "loop_varying"]
        kind = self.pick(kinds)
        return getattr(self, "s_" + kind)(indent, depth)

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    def s_tile(self, indent, depth):
        shape = self.tile_shape()
        expr = self.tile_expr(shape)
        name = self.any_tile(shape) if self.draw(st.booleans()) else None
        if name is None or depth == 0:
            name = name or self.fresh("t")
        self.emit(indent, f"{name} = {expr}")
        if depth == 0:
            self.tiles[name] = shape

    @_on_a_tile
    def s_load_(self, indent, depth, name, shape):
        m, n = shape
        array = self.slab("x", self.x_ndim)
        low = self.pick([0, 0, 0, -2])
        r0, c0 = self.offset(low=low), self.offset(low=low)
        r1, c1 = self.bound(r0, m), self.bound(c0, n)
        if self.draw(st.booleans()):
            self.emit(indent, f"{name}.load_({array}, {r0}, {r1}, {c0}, {c1})")
        else:
            self.emit(indent, f"{name}[:] = {array}[{r0}:{r1}, {c0}:{c1}]")

    @_on_a_tile
    def s_store(self, indent, depth, name, shape):
        m, n = shape
        array = self.slab("y", self.y_ndim)
        kind = self.draw(st.integers(0, 2))
        low = None if kind == 0 else self.pick([0, 0, 0, -2])
        r0, c0 = self.offset(wide=True, low=low), self.offset(wide=True, low=low)
        value = name if self.draw(st.integers(0, 2)) else self.combine(name, name, (m, n))
        if kind == 0:
            self.emit(indent, f"({value}).store({array}, {r0}, {c0})")
        elif kind == 1:
            r1, c1 = self.bound(r0, m), self.bound(c0, n)
            self.emit(indent, f"({value}).store({array}, {r0}, {r1}, {c0}, {c1})")
        else:
            r1, c1 = self.bound(r0, m), self.bound(c0, n)
            self.emit(indent, f"{array}[{r0}:{r1}, {c0}:{c1}] = {value}")

    @_on_a_tile
    def s_reduce(self, indent, depth, name, shape):
        m, n = shape
        ops = ["sum", "max", "min", "argmax", "argmin"]
        op = "sum" if self.dtype == "bool" else self.pick(ops)
        kind = self.draw(st.integers(0, 4))
        if kind == 2 and op.startswith("arg"):  # (no keepdims for an index)
            op = op[3:]
        if kind == 4 and self.dtype != "bool":  # a scan, in place (a bool's is i32)
            scan = self.pick(["cumsum", "cumprod"])
            self.emit(indent, f"{name} = {name}.{scan}(axis={self.draw(st.integers(0, 1))})")
            return
        kind = min(kind, 3)
        index = self.pick(["i", "(i + j * 3)", "s", "0", "(i + j * 5 + b * 25)"])
        index = f"({index} % w.shape[0])" if self.draw(st.integers(0, 3)) else index
        if kind == 0:
            self.emit(indent, f"w[{index}] = {name}.{op}()")
            return
        if self.dtype == "bool":
            self.emit(indent, f"w[{index}] = {name}.sum()")
            return
        axis = self.draw(st.integers(0, 1))
        size = n if axis == 0 else m
        if kind == 1:
            u = self.fresh("u")
            self.emit(indent, f"{u} = {name}.{op}(axis={axis})")
            if depth == 0:
                self.vecs[u] = size
            self.emit(indent, f"{u}.store(v, {self.offset(wide=True)})")
        elif kind == 2:
            keep = f"{name}.{op}(axis={axis}, keepdims=True)"
            self.emit(indent, f"{name} = {name} - {keep}")
        else:
            self.emit(indent, f"w[{index}] = {name}.{op}(axis={axis}).{op}()")

    def s_block_grid(self, indent, depth):
        """A chain of elementwise ops over the grid's own blocks (``pid * side``) stored
        to the grid's blocks of ``y``: the prepared path computes it straight into ``y``
        (or, where ``y`` is ``x`` or a block hangs over the edge, as any value)."""
        m, n = shape = self.tile_shape()
        col = "j" if self.grid_ndim > 1 else "0"
        block = f"{self.tile_type(shape)}.load({self.slab('x', self.x_ndim)}, i * {m}, {col} * {n})"
        value = block
        for _ in range(self.draw(st.integers(1, 3))):
            other = self.pick([block, self.tile_expr(shape, depth=1), self.literal()])
            value = self.combine(value, other, shape)
        self.emit(indent, f"({value}).store({self.slab('y', self.y_ndim)}, i * {m}, {col} * {n})")

    def s_vec(self, indent, depth):
        u = self.fresh("u")
        kind = self.draw(st.integers(0, 3))
        size = self.pick(SIDES)
        other = f", other={self.literal()}" if self.draw(st.booleans()) else ""
        if kind == 0 or (kind >= 2 and not self.tiles):
            self.emit(indent, f"{u} = qnb.Vec[{size}].load(v, {self.offset(wide=True)}{other})")
        elif kind == 1:
            array = self.slab("x", self.x_ndim)
            how = self.pick(["load_row", "load_col"])
            r, c = self.offset(wide=True), self.offset(wide=True)
            self.emit(indent, f"{u} = qnb.Vec[{size}].{how}({array}, {r}, {c}{other})")
        else:
            t = self.any_tile()
            m, n = self.tiles[t]
            if kind == 2:
                size = n
                self.emit(indent, f"{u} = {t}.row({self.pick(['0', '(i % 2)', str(m - 1), 's'])})")
            else:
                size = m
                self.emit(indent, f"{u} = {t}.col({self.pick(['0', '(i % 3)', str(n), 's'])})")
        if depth == 0:
            self.vecs[u] = size

    def s_vec_store(self, indent, depth):
        if not self.vecs:
            return self.s_vec(indent, depth)
        u = self.pick(list(self.vecs))
        kind = self.draw(st.integers(0, 2))
        if kind == 0:
            self.emit(indent, f"{u}.store(v, {self.offset(wide=True)})")
        else:
            array = self.slab("y", self.y_ndim)
            how = "store_row" if kind == 1 else "store_col"
            r, c = self.offset(wide=True), self.offset(wide=True)
            self.emit(indent, f"{u}.{how}({array}, {r}, {c})")

    def s_element(self, indent, depth):
        value = self.scalar_expr()
        if self.draw(st.booleans()) and self.dtype != "bool":
            e = self.fresh("e")
            self.emit(indent, f"{e} = {value}")
            value = e
        target = self.pick(["w", "y"])
        rows, cols = (f"y.shape[{self.y_ndim - 2 + a}]" for a in (0, 1))
        if target == "w":
            self.emit(indent, f"w[{self.inside('w.shape[0]')}] = {value}")
        elif self.y_ndim == 2:
            self.emit(indent, f"y[{self.inside(rows)}, {self.inside(cols)}] = {value}")
        else:
            slab = self.pick(["0", "(i % 2)", "s"])
            self.emit(indent, f"y[{slab}, {self.inside(rows)}, {self.inside(cols)}] = {value}")

    @_on_a_tile
    def s_set(self, indent, depth, name, shape):
        m, n = shape
        i = self.pick([str(self.draw(st.integers(0, m))), "(i % 4)", "s"])
        j = self.pick(
            [str(self.draw(st.integers(0, n - 1))), "(j % 2)" if self.grid_ndim > 1 else "0"]
        )
        value = self.literal() if self.dtype == "bool" else self.scalar_expr()
        self.emit(indent, f"{name}[{i}, {j}] = {value}")

    def condition(self, varying):
        if varying:
            return self.pick(
                [
                    "i % 2 == 0",
                    "i < 2",
                    f"{self.pid()} > s",
                    "j == 1" if self.grid_ndim > 1 else "i == 1",
                ]
            )
        return self.pick(["s > 1", "s == 0", "x.shape[0] > 8"])

    def s_if(self, indent, depth):
        self.emit(indent, f"if {self.condition(self.draw(st.booleans()))}:")
        for _ in range(self.draw(st.integers(1, 2))):
            self.statement(indent + 1, depth + 1)
        if self.draw(st.booleans()):
            self.emit(indent, "else:")
            self.statement(indent + 1, depth + 1)

    def s_for(self, indent, depth):
        k = self.fresh("k")
        count = self.draw(st.integers(0, 3))
        self.emit(indent, f"for {k} in range({count}):")
        name = self.any_tile()
        if name is not None and self.dtype != "bool":
            m, n = self.tiles[name]
            array = self.slab("x", self.x_ndim)
            step = self.pick([1, m])
            r = f"{self.offset()} + {k} * {step}"
            self.emit(
                indent + 1,
                f"{name} = {name} + {self.tile_type((m, n))}.load({array}, {r}, {self.offset()})",
            )
        else:
            self.statement(indent + 1, depth + 1)
        if self.draw(st.integers(0, 3)) == 0:
            self.emit(indent + 1, f"if {self.condition(False)}:")
            self.emit(indent + 2, self.pick(["break", "continue"]))
        elif self.draw(st.integers(0, 2)) == 0:  # an exit some programs take
            self.emit(indent + 1, f"if {self.condition(True)}:")
            self.emit(indent + 2, self.pick(["break", "continue"]))
        self.statement(indent + 1, depth + 1)
        self.after_exits(indent, depth, k)

    def s_loop_varying(self, indent, depth):
        """A loop whose trip count differs between programs: a ``for`` over bounds that
        read ``program_id`` (up, down, from a per-program start) or a ``while`` on a
        per-program counter, with an exit at the body's top or under a branch."""
        k = self.fresh("k")
        if self.draw(st.integers(0, 3)) == 0:
            self.emit(indent, f"{k} = {self.pick(['i % 3', '2 - j', 'b + 1', 'i - s'])}")
            self.emit(indent, f"while {k} > 0:")
            self.emit(indent + 1, f"{k} = {k} - 1")
        else:
            bounds = self.pick(
                [
                    "i % 3",
                    "i + 1",
                    "i, 3",
                    "j, i + 2",
                    "s, i * 2 + 1",
                    "3, i - 1, -1",
                    "0, i + 3, 2",
                ]
            )
            self.emit(indent, f"for {k} in range({bounds}):")
        self.statement(indent + 1, depth + 1)
        exit_kind = self.draw(st.integers(0, 4))
        if exit_kind == 0:
            self.emit(indent + 1, f"if {k} + i == 2:")
            self.emit(indent + 2, self.pick(["break", "continue"]))
        elif exit_kind == 1:
            self.emit(indent + 1, f"if {self.condition(False)}:")
            self.emit(indent + 2, self.pick(["break", "continue"]))
        if self.draw(st.booleans()):
            self.statement(indent + 1, depth + 1)
        self.after_exits(indent, depth, k)

    def after_exits(self, indent, depth, k):
        """Where programs may have left a loop at different turns, a value the loop
        assigns after its exits (and its counter) differs between programs: a branch on
        each after the loop (what a path that took them as the same would get wrong)."""
        if self.draw(st.integers(0, 2)):
            return
        c = self.fresh("c")
        body_line = len(self.lines)
        self.lines.insert(body_line, "    " * (indent + 1) + f"{c} = {k} * 2 + 1")
        self.emit(indent, f"if {self.pick([c, k])} > {self.pick([0, 0, 1, 2])}:")
        # seen in w (poisoned with NaN: a value read from it would hide the difference)
        self.emit(indent + 1, f"w[((i + j * 5) % w.shape[0])] = {self.pick([1, 2, 7])}")
        if self.draw(st.booleans()):
            self.statement(indent + 1, depth + 1)


@st.composite
def window_reductions(draw) -> Case:
    """The issue's ``column_sums`` class: every program reduces a tile whose window
    steps by a few rows and columns per program (so windows overlap and the tiles are
    a strided view of the array), maybe transposed or masked, then stores the result."""
    dtype = draw(st.sampled_from(["f16", "bf16", "f32", "f64"]))
    m, n = draw(st.sampled_from(SIDES[1:])), draw(st.sampled_from(SIDES[1:]))
    grid_ndim = draw(st.integers(1, 2))
    grid = tuple(draw(st.integers(1, 5)) if a < grid_ndim else 1 for a in range(3))
    axes = ["qnb.program_id(0)", "qnb.program_id(1)"][:grid_ndim]
    r0, c0 = (
        f"{draw(st.sampled_from(axes))} * {draw(st.integers(0, 4))} + {draw(st.integers(0, 3))}"
        for _ in range(2)
    )
    load = f"qnb.Tile[{m}, {n}].load(x, {r0}, {c0})"
    if draw(st.booleans()):  # a window that may leave the array: padded with a value
        load = f"qnb.Tile[{m}, {n}].load(x, {r0} - 2, {c0} - 3, other=1.5)"
    lines = ["p = qnb.program_id(0) + qnb.program_id(1) * 5", f"t = {load}"]
    if draw(st.booleans()):
        lines[-1] = f"t = ({load}).T"
    if draw(st.booleans()):
        lines.append("t = t * 1.25 - t")
    op = draw(st.sampled_from(["sum", "sum", "max", "min"]))
    kind = draw(st.integers(0, 2))
    if kind == 0:
        lines.append(f"w[p] = t.{op}()")
    else:
        lines.append(f"u = t.{op}(axis={kind - 1})")
        lines.append("u.store(v, p * 16)")
        lines.append("w[p] = u.sum()")
    body = "".join(f"    {line}\n" for line in lines)
    source = f"@qnb.kernel\ndef k(x, y, v, w, s: qnb.i32):\n{body}"
    make_args = draw(arguments(dtype, 2, 2, tight=True, v_len=200))
    return Case(source, grid, make_args, dtype)


@st.composite
def kernels(draw) -> Case:
    if draw(st.integers(0, 4)) == 0:
        return draw(window_reductions())
    dtype = draw(st.sampled_from(DTYPES))
    m, n = draw(st.sampled_from(SIDES)), draw(st.sampled_from(SIDES))
    grid_ndim = draw(st.integers(1, 3))
    grid = tuple(draw(st.integers(1, 5)) if a < grid_ndim else 1 for a in range(3))
    x_ndim, y_ndim = draw(st.sampled_from([2, 3])), draw(st.sampled_from([2, 3]))
    body = _Body(draw, dtype, (m, n), x_ndim, y_ndim, grid_ndim)
    body.tight = draw(st.integers(0, 2)) == 0
    body.emit(1, "i = qnb.program_id(0)")
    body.emit(1, "j = qnb.program_id(1)")
    body.emit(1, "b = qnb.program_id(2)")
    first = f"t0 = {body.load_expr((m, n))}"
    body.emit(1, first)
    body.tiles["t0"] = (m, n)
    for _ in range(draw(st.integers(1, 5))):
        body.statement()
    source = "@qnb.kernel\ndef k(x, y, v, w, s: qnb.i32):\n" + "\n".join(body.lines) + "\n"
    make_args = draw(arguments(dtype, x_ndim, y_ndim, body.tight))
    return Case(source, grid, make_args, dtype)


def _values(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "i32":
        values = rng.integers(-40, 40, shape)
        values[values == 0] = 7
        return values.astype(np.int32)
    values = rng.standard_normal(shape) * 4
    if rng.random() < 0.3:  # the specials too
        flat = values.reshape(-1)
        for special in (np.inf, -np.inf, np.nan, -0.0):
            flat[rng.integers(0, flat.size)] = special
    return values.astype(NUMPY[dtype])


def _poison(dtype, shape):
    if dtype == "bool":
        return np.ones(shape, bool)
    if dtype == "i32":
        return np.full(shape, -12345, np.int32)
    return np.full(shape, np.nan, NUMPY[dtype])


@st.composite
def arguments(draw, dtype, x_ndim, y_ndim, tight=False, v_len=None):
    """``make_args()`` for a kernel: fresh arrays each call, aliased as drawn (``tight``:
    arrays large enough for every program's windows)."""
    seed = draw(st.integers(0, 2**32 - 1))
    sides = st.integers(36, 48) if tight else st.one_of(st.integers(8, 40), st.integers(1, 8))
    rows, cols = draw(sides), draw(sides)
    slabs = draw(st.sampled_from([2, 2, 3, 1]))
    x_shape = (rows, cols) if x_ndim == 2 else (slabs, rows, cols)
    alias = draw(st.sampled_from(["none", "none", "same", "shifted", "v_in_y"]))
    if alias in ("same", "shifted") and y_ndim != x_ndim:
        alias = "none"
    y_rows, y_cols = (rows, cols) if alias != "none" else (draw(sides), draw(sides))
    y_shape = (y_rows, y_cols) if y_ndim == 2 else (slabs, y_rows, y_cols)
    shift = draw(st.integers(1, 5))
    w_len = 30 if v_len else draw(st.integers(1, 30))  # (room for every program's w[p])
    v_len = v_len or draw(st.integers(1, 60))
    s = draw(st.integers(-3, 5))
    w_dtype = "f64" if dtype[0] in "fb" and dtype != "bool" else "i32"

    def make_args():
        rng = np.random.default_rng(seed)
        if alias == "shifted":  # y is x moved along its first axis: the same buffer
            axis = 0
            big = list(x_shape)
            big[axis] += shift
            base = _values(rng, dtype, tuple(big))
            index = [slice(None)] * x_ndim
            index[axis] = slice(0, x_shape[axis])
            x = base[tuple(index)]
            index[axis] = slice(shift, shift + x_shape[axis])
            y = base[tuple(index)]
        else:
            x = _values(rng, dtype, x_shape)
            y = x if alias == "same" else _poison(dtype, y_shape)
        if alias == "v_in_y" and y.size >= v_len and y.flags.c_contiguous:
            v = y.reshape(-1)[:v_len]
        else:
            v = _values(rng, dtype, (v_len,))
        w = _poison(w_dtype, (w_len,))
        return [x, y, v, w, s]

    return make_args


@st.composite
def exits_per_program(draw) -> Case:
    """A loop (the same bounds for every program, or its own) that some programs leave
    before others (``break``/``continue`` under a per-program branch), a value it
    assigns after the exit, and branches after the loop on that value and on the loop's
    counter: each program's own, which a path that took them as the same in every
    program (decided by program 0) gets wrong. Each program stores to its own cells."""
    grid = (draw(st.integers(2, 4)), draw(st.integers(1, 2)), 1)  # (p below 8)
    loop = draw(
        st.sampled_from(["range(4)", "range(1, 5)", "range(p % 3 + 2)", "range(4, p - 2, -1)"])
    )
    exit_if = draw(st.sampled_from(["p % 2 == 0", "p > 1", "k == p % 3", "x[p, k] > 0.5"]))
    exit = draw(st.sampled_from(["break", "continue"]))
    lines = [
        "p = qnb.program_id(0) + qnb.program_id(1) * 4",
        "c = 0",
        f"for k in {loop}:",
        f"    if {exit_if}:",
        f"        {exit}",
        "    c = c + k * 2 + 1",
        "    t = qnb.Tile[1, 4].load(x, p, k)",
        "    t.store(y, p, k)",
        f"if c > {draw(st.integers(0, 6))}:",
        "    w[p] = 1",
        f"if k > {draw(st.integers(0, 3))}:",
        "    w[p + 8] = 2",
        "w[p + 16] = c",
    ]
    body = "".join(f"    {line}\n" for line in lines)
    source = f"@qnb.kernel\ndef k(x, y, v, w, s: qnb.i32):\n{body}"
    make_args = draw(arguments("f32", 2, 2, tight=True, v_len=200))
    return Case(source, grid, make_args, "f32")


@st.composite
def batchable_loops(draw) -> Case:
    """A loop whose turns the prepared path may run at once (``prepared_batched``): a
    ``for`` of the same bounds in every program over windows its variable moves (by a
    tile's side, so the turns tile the array, or by less, so they overlap), statements
    that read nothing an earlier turn assigned (a load, an elementwise chain, stores of
    it, a per-turn store to one element: the later turn's value stays), and running
    values that do (a sum, a max, a chain of their own, an independent part in them);
    then reads after the loop of both kinds (or none of the chain, which the batch may
    then compute into a buffer it keeps)."""
    dtype = draw(st.sampled_from(["f32", "f64", "i32", "bf16"]))
    m, n = draw(st.sampled_from([(1, 4), (2, 8), (4, 4), (8, 16), (16, 1)]))
    grid_ndim = draw(st.integers(1, 2))
    grid = (draw(st.integers(1, 5)), draw(st.integers(1, 2)) if grid_ndim == 2 else 1, 1)
    tile = f"qnb.Tile[{m}, {n}]"
    by = draw(st.sampled_from([1, 2, n, n, max(1, n // 2)]))
    start = draw(st.sampled_from([0, 0, 1, 2]))
    stop = draw(st.sampled_from([f"{start + by * draw(st.integers(0, 5))}", "x.shape[1]"]))
    at = draw(st.sampled_from(["row, k", "row, k", f"k, p * {n}", "2, k"]))  # ("2, k": the
    # same tiles in every program)
    lines = [
        "p = qnb.program_id(0)" + (" + qnb.program_id(1) * 5" if grid_ndim == 2 else ""),
        f"row = p * {m}" if draw(st.booleans()) else f"row = p * {max(1, m // 2)} + 1",
        f"acc = qnb.Tile[{m}, 1].zeros(x.dtype)",
        f"top = qnb.Tile[{m}, 1].zeros(x.dtype) + s",
        f"for k in range({start}, {stop}, {by}):",
        f"    t = {tile}.load(x, {at})",
    ]
    body = []
    if draw(st.booleans()):
        body.append("    u = t * 3 + s" if dtype != "bf16" else "    u = t * 0.5 + t")
    else:
        body.append("    u = t")
    running = draw(
        st.lists(
            st.sampled_from(
                [
                    "    acc = acc + u.sum(axis=1, keepdims=True)",
                    "    acc = acc + (u * u).sum(axis=1, keepdims=True) + k",
                    "    top = qnb.maximum(top, t.max(axis=1, keepdims=True))",
                    "    acc = acc * 2 - top",
                    "    top = top + (t - top).sum(axis=1, keepdims=True)",
                ]
            ),
            min_size=0,
            max_size=3,
        )
    )
    body += running
    stores = draw(
        st.lists(
            st.sampled_from(
                [
                    "    (u * 2).store(y, row, k)",
                    f"    u.store(y, k, p * {n})",
                    "    w[p] = u.sum()",
                    "    w[p + 10] = t.max() + k",
                    "    w[p + k * 7] = t.min()",  # (out of range from a later turn)
                ]
            ),
            min_size=0 if running else 1,
            max_size=2,
        )
    )
    body += stores
    # (a chain reassigned after a running value read it; the tile made from a running
    # value, so that what reads it later in the body is a turn's too)
    body += draw(st.lists(st.sampled_from(["    u = u + 1", "    t = t + acc"]), max_size=2))
    lines += draw(st.permutations(body[1:])) if draw(st.booleans()) else body[1:]
    lines.insert(6, body[0])
    lines += [
        "w[p + 20] = acc.sum() + top.max()",
        draw(st.sampled_from(["(t + u).store(y, row, 30)", "t.store(y, row, 30)"])),
        "w[p + 25] = k",
    ]
    source = "@qnb.kernel\ndef k(x, y, v, w, s: qnb.i32):\n" + "".join(
        f"    {line}\n" for line in lines
    )
    make_args = draw(arguments(dtype, 2, 2, tight=True, v_len=200))
    return Case(source, grid, make_args, dtype)


@st.composite
def union_windows(draw) -> Case:
    """Programs that load a window at their own offset and store an elementwise function
    of it back at the same place (``prepared_union``: the windows' region computed once),
    and near misses the strategy must leave alone: a store a row or column off, its own
    window ends, windows with gaps between them, starts below 0, a 2-D grid, a tile
    read again after the store, other dtypes, ``y`` the same buffer as ``x`` or shifted."""
    dtype = draw(st.sampled_from(["f16", "bf16", "f32", "f64", "i32"]))
    m, n = draw(st.sampled_from([(1, 4), (2, 8), (4, 4), (8, 16), (16, 1), (16, 16)]))
    grid_ndim = draw(st.integers(1, 3) if draw(st.integers(0, 3)) == 0 else st.just(1))
    grid = tuple(draw(st.integers(1, 6)) if a < grid_ndim else 1 for a in range(3))
    along_rows = draw(st.booleans())
    side = m if along_rows else n
    step = draw(st.sampled_from([0, 1, 1, 2, max(1, side // 2), side, side + 1]))
    offset = draw(st.sampled_from([0, 0, 1, 3, -2]))
    other = draw(st.sampled_from([0, 5, 7]))
    pid = draw(st.sampled_from(["qnb.program_id(0)"] * 3 + ["p", "qnb.program_id(1)"]))
    start = f"{pid} * {step} + {offset}"

    def at(extra=0):
        moved = f"{start} + {extra}" if extra else start
        return f"{moved}, {other}" if along_rows else f"{other}, {moved}"

    floats = dtype != "i32"
    value = draw(
        st.sampled_from(
            ["t", "t * 2 + 1", "t - s", "-t", "qnb.maximum(t, s) * t", "t - t.max()"]
            + (
                [
                    "qnb.exp(t * 0.125) - t",
                    "(t * 0.5).astype(qnb.f32)",
                    "qnb.sqrt(t * t) + s",
                    "qnb.sqrt(t) * t",
                ]
                if floats
                else ["t * s - (t >> 1)"]
            )
        )
    )
    fill = draw(st.sampled_from(["", "", ", other=s", ", other=3"]))
    store = draw(
        st.sampled_from(
            [f"({value}).store(y, {at()})"] * 6
            + [
                f"({value}).store(y, {at(1)})",
                f"({value}).store(y, {start}, {start} + {max(1, m - 1)}, {other}, {other} + {n})"
                if along_rows
                else f"({value}).store(y, {other}, {other} + {m}, {start}, x.shape[1])",
            ]
        )
    )
    lines = ["p = qnb.program_id(0)", f"t = qnb.Tile[{m}, {n}].load(x, {at()}{fill})", store]
    if draw(st.integers(0, 5)) == 0:  # (the tile read again: not the last use)
        lines.append(f"(t + 1).store(y, {at(2)})")
    body = "".join(f"    {line}\n" for line in lines)
    source = f"@qnb.kernel\ndef k(x, y, v, w, s: qnb.i32):\n{body}"
    make_args = draw(arguments(dtype, 2, 2, tight=draw(st.booleans()), v_len=200))
    return Case(source, grid, make_args, dtype)
