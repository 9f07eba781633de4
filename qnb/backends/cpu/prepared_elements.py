"""prepared_elements"""

from __future__ import annotations

import numpy as np

from qnb.backends.cpu.lanes import _mask_lanes
from qnb.backends.cpu.prepared_base import _clamp
from qnb.backends.cpu.semantics import cast_values
from qnb.errors import QnbError


class ElementClosures:
    """Vecs and elements: vec windows, element loads and stores (program-indexed as slices)."""

    def vec_window(self, node, v, start, stop, col, padded=False, size=16, axis=0):
        """``window(st) -> (array, batch, index, ok, fixed)`` for an N-element line per
        lane, as the interpreter's: ``index`` runs along the array's last axis (1-D, or a
        row: ``axis`` 1) or its rows (a column), ``fixed`` is the column (for a row, the
        row) that stays, ``ok`` which elements exist inside the window."""
        view = self.view(v, node)
        start_fn, stop_fn = self.expr(start), self.expr(stop)
        col_fn = self.expr(col) if col is not None else None
        negative = self.checker(f"negative bound on {v.param!r}", node)
        what = "row" if axis == 1 else "column"
        outside_check = self.checker(f"{what} index out of range for {v.param!r}", node)
        steps = np.arange(size, dtype=np.int64)
        along_last = col is None or axis == 1
        uniform = not any(self.is_varying(x) for x in (start, stop, col) if x is not None)
        if v.batch is not None and self.is_varying(v.batch):
            uniform = False

        def line(st):
            """``(array, batch, fixed, lo)`` where the line is the same in every program
            and all its elements lie in the array and the window (no mask, no failing
            check): the elements are ``array[batch, fixed, lo:lo + size]`` (along the last
            axis) or ``array[batch, lo:lo + size, fixed]``; else None."""
            array, batch = view(st)
            lo, hi = int(start_fn(st)[0]), int(stop_fn(st)[0])
            limit = array.shape[2] if along_last else array.shape[1]
            if lo < 0 or lo + size > hi or lo + size > limit:
                return None
            if col_fn is None:
                return array, batch, 0, lo
            fixed = int(col_fn(st)[0])
            if not 0 <= fixed < (array.shape[1] if axis == 1 else array.shape[2]):
                return None
            return array, batch, fixed, lo

        def window(st):
            array, batch = view(st)
            batch = np.asarray(batch).reshape(-1)
            lo = start_fn(st).astype(np.int64, copy=False)
            hi = stop_fn(st).astype(np.int64, copy=False)
            if not padded:
                negative(st, (lo < 0) | (hi < 0))
            index = lo[:, None] + steps
            limit = array.shape[2] if along_last else array.shape[1]
            fixed = None
            ok = (index >= 0) & (index < np.minimum(hi, limit)[:, None])
            if col_fn is not None:
                fixed = col_fn(st).astype(np.int64, copy=False)
                extent = array.shape[1] if axis == 1 else array.shape[2]
                outside = (fixed < 0) | (fixed >= extent)
                if padded:  # a line outside the array has no elements
                    ok = ok & ~outside[:, None]
                else:
                    outside_check(st, outside)
            return array, batch, index, ok, fixed

        def elements(array, index, fixed):
            """The (row, column) indices of a line's elements, clamped into the array."""
            if fixed is None:
                return np.zeros((1, 1), np.int64), _clamp(index, 0, array.shape[2] - 1)
            if axis == 1:
                rows = _clamp(fixed, 0, array.shape[1] - 1)[:, None]
                return rows, _clamp(index, 0, array.shape[2] - 1)
            cols = _clamp(fixed, 0, array.shape[2] - 1)[:, None]
            return _clamp(index, 0, array.shape[1] - 1), cols

        def run(st):
            """``(array, batch, lo, end, count)`` where the ``count`` programs' lines abut
            in order along a 1-D array (program p reads from ``lo + p * size``: a vec per
            program over a long array), each window reaching to its line's end or to one
            stop they share, so all of them are the one slice ``array[batch, 0, lo:lo +
            count * size]`` of which ``[lo, end)`` exists; else None."""
            array, batch = view(st)
            if np.ndim(batch) and np.size(batch) != 1:
                return None
            lo, hi = start_fn(st), stop_fn(st)
            count, first = lo.shape[0], int(lo[0])
            if count < 2 or first < 0 or int(lo[-1]) - first != (count - 1) * size:
                return None
            if not (np.diff(lo) == size).all():
                return None
            end = min(array.shape[2], first + count * size)
            if hi.shape[0] == 1:
                end = min(end, int(hi[0]))
            elif not (hi >= lo + size).all():
                return None
            batch = int(np.reshape(batch, -1)[0])
            return array, batch, first, max(end, first), count

        abutting = col is None and not uniform
        return window, elements, line if uniform else None, run if abutting else None

    def e_VecLoad(self, e):
        size = e.type.shape[0]
        window, elements, line, run = self.vec_window(
            e, e.view, e.start, e.stop, e.col, e.padded, size, e.axis
        )
        other_fn = None if e.other is None else self.expr(e.other)
        target = e.type.dtype
        dtype = target.numpy
        along_last = e.col is None or e.axis == 1
        if e.other is not None and (self.is_varying(e.other) or e.other.type.dtype.numpy != dtype):
            line = run = None  # (np.where would give each lane its own value, or convert)

        def load(st):
            found = None if run is None else run(st)
            if found is not None:  # the lines abut: one slice, padded at its end
                array, b, lo, end, count = found
                other = 0 if other_fn is None else np.asarray(other_fn(st)).reshape(-1)[0]
                out = np.empty(count * size, dtype)
                values = array[b, 0, lo:end]
                if values.dtype != dtype:
                    values = cast_values(values, target)
                out[: end - lo] = values
                out[end - lo :] = other
                return out.reshape(count, size)
            found = None if line is None else line(st)
            if found is not None:  # every element exists: the line itself, copied
                if other_fn is not None:
                    other_fn(st)
                array, b, fixed, lo = found
                if along_last:
                    values = array[b, fixed, lo : lo + size]
                else:
                    values = array[b, lo : lo + size, fixed]
                if values.dtype != dtype:
                    return cast_values(values[None], target)
                return values[None].copy()
            array, batch, index, ok, fixed = window(st)
            if other_fn is None:
                other = np.zeros((), dtype)
            else:
                other = np.asarray(other_fn(st)).reshape(-1)[:, None]
            if array.size == 0:
                return np.broadcast_to(other, ok.shape).astype(dtype)
            rows, cols = elements(array, index, fixed)
            values = array[batch[:, None], rows, cols]
            if values.dtype != dtype:
                values = cast_values(values, target)
            return np.where(ok, values, other).astype(dtype, copy=False)

        return load

    def s_VecStore(self, s):
        value = self.expr(s.value)
        size = s.value.type.shape[0]
        window, elements, line, run = self.vec_window(
            s, s.view, s.start, s.stop, s.col, s.padded, size, s.axis
        )
        compiler = self
        along_last = s.col is None or s.axis == 1

        def store(st):
            v = value(st)
            found = None if run is None or st.mask is not None else run(st)
            if found is not None:  # the lines abut: one slice of the array, cut at its end
                array, b, lo, end, count = found
                compiler.detach(st, array)
                flat = np.broadcast_to(v, (count, size)).reshape(-1)
                array[b, 0, lo:end] = flat[: end - lo]
                return
            found = None if line is None or st.mask is not None else line(st)
            if found is not None and v.shape[0] == 1:  # one line, every element in it
                array, b, fixed, lo = found
                if st.aliased:
                    compiler.detach(st, array)
                if along_last:
                    array[b, fixed, lo : lo + size] = v[0]
                else:
                    array[b, lo : lo + size, fixed] = v[0]
                return
            array, batch, index, ok, fixed = window(st)
            compiler.detach(st, array)
            lanes = max(
                v.shape[0], index.shape[0], batch.shape[0], _mask_lanes(st.mask), ok.shape[0]
            )
            ok = np.broadcast_to(ok, (lanes, size))
            if st.mask is not None:
                ok = ok & st.mask[:, None]
            rows, cols = elements(array, index, fixed)
            r = np.broadcast_to(rows, (lanes, size))
            c = np.broadcast_to(cols, (lanes, size))
            b = np.broadcast_to(batch[:, None], (lanes, size))
            array[b[ok], r[ok], c[ok]] = np.broadcast_to(v, (lanes, size))[ok]

        return store

    def element(self, node, v, indices):
        """``element(st) -> (array, batch, rows, cols)`` with the interpreter's checks;
        ``rows``/``cols`` are ints, int64 arrays, or slices (program-indexed elements)."""
        view = self.view(v, node)
        fns = tuple(self.expr(i) for i in indices)
        count = len(indices)
        uniform = not any(self.is_varying(i) for i in indices)
        uniform_view = v.batch is None or not self.is_varying(v.batch)
        # x[program_id(0)] on a 1-D array: a slice of programs, when the grid is 1-D
        by_program = count == 1 and self.pid_axis(indices[0]) == 0 and v.batch is None
        param = v.param
        check = self.checker("", node)
        compiler = self

        def message(st):  # (made only where needed: formatting a shape costs a launch)
            return f"index out of range for {param!r} of shape {st.shapes[param]}"

        if v.batch is None and all(self.constant(i) for i in indices):
            # known now (x[0, 0]): only the array's shape is checked at a launch
            with np.errstate(all="ignore"):
                known = [int(f(None)[0]) for f in fns]
            row, col = ([0] if count == 1 else []) + known

            def known_element(st):
                array = st.arrays[param]
                dims = array.shape[3 - count :]
                for i, d in zip(known, dims):
                    if not 0 <= i < d:
                        raise compiler.error(
                            f"{message(st)} (in program {compiler.first_active(st)})", node
                        )
                return array, 0, row, col

            return known_element, True

        def element(st):
            array, batch = view(st)
            dims = array.shape[3 - count :]
            values = [f(st) for f in fns]
            if uniform:
                idx = [int(x[0]) for x in values]
                if any(not 0 <= i < d for i, d in zip(idx, dims)):
                    raise compiler.error(
                        f"{message(st)} (in program {compiler.first_active(st)})", node
                    )
                if count == 1:
                    idx = [0, *idx]
                return array, batch, idx[0], idx[1]
            if by_program and st.run0 and st.mask is None and values[0] is st.pid[0]:
                first = int(values[0][0])
                if first >= 0 and first + st.n <= dims[0] and st.n == len(values[0]):
                    return array, batch, 0, slice(first, first + st.n)
            idx = [x.astype(np.int64, copy=False) for x in values]
            bad = np.zeros(1, bool)
            for i, d in zip(idx, dims):
                bad = bad | (i < 0) | (i >= d)
            check(st, bad, message(st))
            idx = [_clamp(i, 0, d - 1) for i, d in zip(idx, dims)]
            if count == 1:
                idx = [np.zeros(1, np.int64), *idx]
            return array, batch, idx[0], idx[1]

        return element, uniform and uniform_view

    def e_ArrayLoad(self, e):
        element, uniform = self.element(e, e.view, e.indices)
        if uniform:

            def load_one(st):
                array, b, r, c = element(st)
                return array[b, r, c : c + 1].copy()

            return load_one

        def load(st):
            array, b, r, c = element(st)
            if isinstance(c, slice):
                return array[b, r, c]
            return array[b, r, c]

        return load

    def s_ArrayStore(self, s):
        value = self.expr(s.value)
        element, uniform = self.element(s, s.view, s.indices)
        compiler = self
        into = None if uniform else self.elements_into(s, value, element)

        def store(st):
            if into is not None and into(st):
                return
            v = value(st)
            array, b, r, c = element(st)
            if st.aliased:
                compiler.detach(st, array)
            if isinstance(c, slice):
                array[b, r, c] = np.broadcast_to(v, (st.n,))
                return
            if uniform and st.mask is None and v.shape[0] == 1:
                array[b, r, c] = v[0]
                return
            b, r, c = (np.asarray(x).reshape(-1) for x in (b, r, c))
            n = max(v.shape[0], r.shape[0], c.shape[0], b.shape[0])
            n = n if st.mask is None else st.n
            lanes = np.ones(n, bool) if st.mask is None else st.mask
            b, r, c = (np.broadcast_to(x, (n,))[lanes] for x in (b, r, c))
            array[b, r, c] = np.broadcast_to(v, (n,))[lanes]

        return store

    def elements_into(self, s, value, element):
        """``into(st) -> done`` for ``y[program_id(0)] = chain``, the chain elementwise
        and taking ``out=`` (:meth:`ScalarClosures.writes_over`): computed straight into
        the programs' slice of ``y``, where :meth:`chain_target` allows it (an error
        finding the slice is left to the plain store, which raises it after the value,
        as the interpreter does); None where the value is not such."""
        free = self.chain_target(s)
        if free is None:
            return None
        compiler = self

        def into(st):
            if st.mask is not None or not free(st):
                return False
            try:
                array, b, r, c = element(st)
            except QnbError:
                return False
            if not isinstance(c, slice) or type(b) is not int:  # (else a copy, not a view)
                return False
            if st.aliased:
                compiler.detach(st, array)
            out = array[b, r, c]
            v = value(st, out)
            if v is not out:
                out[...] = v
            return True

        return into
