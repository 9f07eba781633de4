"""Indexing and windows: what ``arr[i, j]``, ``arr[b]``, ``arr[r0:r1, c0:c1]``,
``t[i, j]`` and ``v[:, None]`` read, and what assigning them stores."""

from __future__ import annotations

import ast

from qnb import ir
from qnb.dtypes import DType, i32
from qnb.errors import QnbSyntaxError, QnbTypeError
from qnb.frontend import lists, operators
from qnb.frontend.bindings import Py
from qnb.frontend.parse import is_negative_literal
from qnb.frontend.values import plural, unparse


class Indexing:
    def __init__(self, lower):
        self.lower = lower  # the walker

    def subscript_parts(self, node) -> list:
        return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]

    def map_subscript(self, target: ast.Subscript, fn, base=None, ctx=None):
        """``fn`` applied to each index and slice bound of ``target``, in order (a missing
        bound stays None); with ``ctx``, the subscript rebuilt on ``base`` from the results."""
        parts = []
        for part in self.subscript_parts(target):
            if isinstance(part, ast.Slice):
                bounds = [None if b is None else fn(b) for b in (part.lower, part.upper)]
                part = ast.copy_location(ast.Slice(*bounds), part)
            else:
                part = fn(part)
            parts.append(part)
        if ctx is None:
            return None
        index = (
            ast.copy_location(ast.Tuple(parts, ast.Load()), target.slice)
            if isinstance(target.slice, ast.Tuple)
            else parts[0]
        )
        return ast.copy_location(ast.Subscript(base, index, ctx), target)

    # ------------------------------------------------------------------ reads

    def array_dim(self, view: ir.ArrayView, node) -> ir.ArrayDim:
        """``arr.shape[d]``."""
        lower = self.lower
        index = lower.lower_expr(node.slice)
        if not isinstance(index, Py) or not isinstance(index.value, int):
            raise lower.error(QnbTypeError, "arr.shape[d] needs a constant d", node)
        axis = index.value + (view.view_ndim if index.value < 0 else 0)
        if not 0 <= axis < view.view_ndim:
            raise lower.error(
                QnbTypeError,
                f"axis {index.value} is out of range for a {view.view_ndim}-D array",
                node,
            )
        if view.batch is not None:
            axis += 1
        return ir.ArrayDim(ir.scalar(i32), lower.loc(node), view.param, axis)

    def read_array(self, base: ir.ArrayView, node):
        """``arr[i, j]`` (an element), ``arr[b]`` (a slab) or a window of slices."""
        lower = self.lower
        parts = self.subscript_parts(node)
        if any(isinstance(p, ast.Slice) for p in parts):
            kind, view, *window = self.window_indices(base, node, want="any")
            return self.slice_load(kind, view, window, node)
        view, rest = self.apply_batch(base, parts, node)
        if not rest:
            return view
        indices = self.array_indices(view, rest, node)
        return ir.ArrayLoad(ir.scalar(view.type.dtype), lower.loc(node), view, indices)

    def read_tile(self, base: ir.Expr, node, axis: int | None):
        """``t[i, j]`` / ``v[i]`` (an element) or ``v[:, None]`` / ``v[None, :]``
        (``axis``: see new_axis)."""
        lower = self.lower
        parts = self.subscript_parts(node)
        if base.type.kind == "vec" and axis is not None:
            n = base.type.shape[0]
            shape = (n, 1) if axis == 1 else (1, n)
            return ir.Reshape(ir.tile(base.type.dtype, shape), lower.loc(node), base)
        if any(isinstance(p, ast.Slice) for p in parts):
            raise lower.error(
                QnbTypeError,
                "tiles cannot be sliced; index elements with t[i, j] (a vec v becomes a "
                "column with v[:, None] and a row with v[None, :])",
                node,
            )
        i, j = self.element_indices(base, parts, node)
        return ir.TileGet(ir.scalar(base.type.dtype), lower.loc(node), base, i, j)

    def apply_batch(self, view: ir.ArrayView, parts, node):
        """``arr[b, ...]`` on a 3-D array: the slab view, and the remaining index parts."""
        if (
            view.batch is None
            and view.type.ndim == 3
            and len(parts) in (1, 3)
            and not isinstance(parts[0], ast.Slice)
        ):
            lower = self.lower
            batch = lower.to_index(lower.lower_expr(parts[0]), parts[0], "batch index")
            return ir.ArrayView(view.param, view.type, batch), parts[1:]
        return view, parts

    def refuse_negative_literals(self, parts):
        for part in parts:
            if is_negative_literal(part):
                raise self.lower.error(
                    QnbSyntaxError,
                    "Negative indices are not supported (elements are counted from 0)",
                    part,
                )

    def array_indices(self, view: ir.ArrayView, parts, node) -> list[ir.Expr]:
        lower = self.lower
        self.refuse_negative_literals(parts)
        if len(parts) != view.view_ndim:
            if view.batch is not None:  # arr[b] was taken as a slab: say what arr is
                message = (
                    f"{view.param!r} is a 3-D array: an element is {view.param}[b, i, j], "
                    f"got {len(parts) + 1} {plural(len(parts) + 1, 'index', 'indices')}"
                )
            else:
                message = (
                    f"a {view.view_ndim}-D array needs {view.view_ndim} indices, got {len(parts)}"
                )
            raise lower.error(QnbTypeError, message, node)
        return [lower.to_index(lower.lower_expr(p), p) for p in parts]

    def element_indices(self, base: ir.Expr, parts, node):
        lower = self.lower
        self.refuse_negative_literals(parts)
        want = 2 if base.type.kind == "tile" else 1
        if len(parts) != want:
            raise lower.error(
                QnbTypeError,
                f"a {base.type} is indexed with {want} {'indices' if want == 2 else 'index'}",
                node,
            )
        indices = [lower.to_index(lower.lower_expr(p), p) for p in parts]
        return indices[0], (indices[1] if want == 2 else None)

    def window_indices(self, view: ir.ArrayView, node, want: str):
        """Parse ``arr[(b,) r0:r1, c0:c1]`` / ``arr[(b,) r0:r1, col]`` /
        ``arr[(b,) row, c0:c1]`` / ``arr[s0:s1]``.

        Returns ("tile", view, r0, r1, c0, c1) for a tile window, or ("vec", view, start,
        stop, col, axis) for a vector window (col None on 1-D arrays; axis 1 for a row,
        with ``col`` the fixed row, as in :class:`ir.VecLoad`)."""
        lower = self.lower
        parts = self.subscript_parts(node)
        if view.batch is None and view.type.ndim == 3:
            if len(parts) != 3 or isinstance(parts[0], ast.Slice):
                raise lower.error(
                    QnbTypeError, "a 3-D array is sliced as arr[b, r0:r1, c0:c1]", node
                )
            batch = lower.to_index(lower.lower_expr(parts[0]), parts[0], "batch index")
            view = ir.ArrayView(view.param, view.type, batch)
            parts = parts[1:]
        ndim = view.view_ndim
        if len(parts) != ndim:
            raise lower.error(QnbTypeError, f"a {ndim}-D array needs {ndim} slice parts here", node)

        def bounds(part):
            return (
                lower.to_index(lower.lower_expr(part.lower), part.lower, "slice start"),
                lower.to_index(lower.lower_expr(part.upper), part.upper, "slice stop"),
            )

        if ndim == 1:
            if not isinstance(parts[0], ast.Slice):
                raise lower.error(QnbTypeError, "expected a slice", node)
            start, stop = bounds(parts[0])
            if want == "tile":
                raise lower.error(QnbTypeError, "a 1-D slice is a Vec16, not a Tile16", node)
            return "vec", view, start, stop, None, 0
        rows, cols = parts
        if not isinstance(rows, ast.Slice):
            # arr[row, c0:c1]: a row of the array
            if want == "tile":
                raise lower.error(QnbTypeError, "arr[row, c0:c1] is a Vec16, not a Tile16", node)
            row = lower.to_index(lower.lower_expr(rows), rows, "row index")
            c0, c1 = bounds(cols)
            return "vec", view, c0, c1, row, 1
        r0, r1 = bounds(rows)
        if isinstance(cols, ast.Slice):
            if want == "vec":
                raise lower.error(QnbTypeError, "a 2-D window is a Tile16, not a Vec16", node)
            c0, c1 = bounds(cols)
            return "tile", view, r0, r1, c0, c1
        if want == "tile":
            raise lower.error(QnbTypeError, "arr[r0:r1, col] is a Vec16, not a Tile16", node)
        col = lower.to_index(lower.lower_expr(cols), cols, "column index")
        return "vec", view, r0, r1, col, 0

    def slice_load(self, kind, view, window, node):
        lower = self.lower
        if kind == "tile":
            r0, r1, c0, c1 = window
            zeros = operators.fill(lower.builder, "tile", "full", 0, view.type.dtype, node)
            return self.load_window(zeros, view, r0, r1, c0, c1, node)
        start, stop, col, axis = window
        vec = ir.vec(view.type.dtype)
        return ir.VecLoad(vec, lower.loc(node), view, start, stop, col, None, False, axis)

    def load_window(self, base, view, r0, r1, c0, c1, node):
        lower = self.lower
        if view.view_ndim != 2:
            raise lower.error(
                QnbTypeError,
                f"tile windows need a 2-D array (or a slab of a 3-D "
                f"one), got a {view.view_ndim}-D array",
                node,
            )
        # a tile of another dtype takes the elements converted, as astype converts them
        return ir.LoadWindow(base.type, lower.loc(node), base, view, r0, r1, c0, c1)

    # ------------------------------------------------------------------ writes

    def assign_full_tile(self, target, value_node, stmt):
        """``t[:] = arr[r0:r1, c0:c1]`` (window load in place) or ``t[:] = tile``."""
        lower = self.lower
        if not isinstance(target.value, ast.Name):
            raise lower.error(
                QnbSyntaxError, "t[:] = ... needs a tile variable on the left", target
            )
        current = lower.lower_expr(target.value)
        if not (isinstance(current, ir.Expr) and current.type.kind == "tile"):
            raise lower.error(QnbTypeError, "t[:] = ... needs a tile on the left", target)
        if isinstance(value_node, ast.Subscript):
            view = lower.lower_expr(value_node.value)
            if isinstance(view, ir.ArrayView):
                _kind, *window = self.window_indices(view, value_node, want="tile")
                value = self.load_window(current, *window, value_node)
                lower.scopes.update_in_place(target.value, value, stmt)
                return
        value = lower.lower_expr(value_node)
        value = lower.coerce(value, current.type, value_node)
        lower.scopes.update_in_place(target.value, value, stmt)

    def assign_subscript(self, target, value, stmt):
        lower = self.lower
        base = lower.lower_expr(target.value)
        if lists.is_list(base):
            lists.write(lower, base, lower.lower_expr(target.slice), value, target, stmt)
            return
        if isinstance(base, ir.ArrayView):
            self.store_to_array(base, target, value, stmt)
            return
        if isinstance(base, ir.Expr) and base.type.kind in ("tile", "vec"):
            if not isinstance(target.value, ast.Name):
                raise lower.error(QnbSyntaxError, "element writes need a tile variable", target)
            indices = self.subscript_parts(target)
            if any(isinstance(p, ast.Slice) for p in indices):
                raise lower.error(
                    QnbTypeError,
                    f"a {base.type} cannot be sliced; write elements with t[i, j] = s, "
                    "or the whole tile with t[:] = ...",
                    target,
                )
            i, j = self.element_indices(base, indices, target)
            element = self.element_value(value, base.type.dtype, target, "tile")
            new = ir.TileSet(base.type, lower.loc(target), base, i, j, element)
            lower.scopes.update_in_place(target.value, new, stmt)
            return
        raise lower.error(
            QnbTypeError, "only arrays, tiles and vectors can be assigned by index", target
        )

    def store_to_array(self, view: ir.ArrayView, target, value, stmt):
        lower = self.lower
        parts = self.subscript_parts(target)
        has_slice = any(isinstance(p, ast.Slice) for p in parts)
        if not has_slice:
            view, parts = self.apply_batch(view, parts, target)
            indices = self.array_indices(view, parts, target)
            element = self.element_value(value, view.type.dtype, target, "array")
            lower.emit(ir.ArrayStore(lower.loc(stmt), view, indices, element))
            return
        if not isinstance(value, ir.Expr) or value.type.kind not in ("tile", "vec"):
            raise lower.error(
                QnbTypeError,
                "a slice of an array can only be assigned a tile "
                "(2-D window) or a vec (a 1-D range, a row or a column)",
                target,
            )
        if value.type.kind == "tile":
            _kind, view, r0, r1, c0, c1 = self.window_indices(view, target, want="tile")
            value = lower.cast_elements(value, view.type.dtype)
            lower.emit(ir.StoreWindow(lower.loc(stmt), value, view, r0, r1, c0, c1))
            return
        _kind, view, start, stop, col, axis = self.window_indices(view, target, want="vec")
        value = lower.cast_elements(value, view.type.dtype)
        lower.emit(ir.VecStore(lower.loc(stmt), value, view, start, stop, col, False, axis))

    def element_value(self, value, dtype: DType, target, into: str) -> ir.Expr:
        """The scalar stored into one element of an array or a tile (``into``)."""
        lower = self.lower
        if isinstance(value, ir.Expr) and value.type.kind in ("tile", "vec"):
            name = unparse(target.value)
            if into == "tile":
                hint = f"an element of {name} is a scalar"
            elif value.type.kind == "tile":
                hint = (
                    f"store a tile with t.store({name}, row, col) or into a window "
                    f"{name}[r0:r1, c0:c1] = t"
                )
            else:
                hint = f"store a vector with v.store({name}, start) or into {name}[s0:s1] = v"
            raise lower.error(
                QnbTypeError, f"cannot store a {value.type} into one element; {hint}", target
            )
        return lower.coerce(value, ir.scalar(dtype), target)


def new_axis(parts) -> int | None:
    """``v[:, None]`` (1: a column) or ``v[None, :]`` (0: a row); None for anything else."""
    if len(parts) != 2:
        return None

    def full(part):
        return isinstance(part, ast.Slice) and part.lower is part.upper is part.step is None

    def none(part):
        return isinstance(part, ast.Constant) and part.value is None

    if full(parts[0]) and none(parts[1]):
        return 1
    if none(parts[0]) and full(parts[1]):
        return 0
    return None
