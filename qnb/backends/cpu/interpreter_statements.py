"""interpreter_statements"""

from __future__ import annotations

import numpy as np

from qnb.backends.cpu.lanes import _Blocks, _lanes, _Loop


class StatementsMixin:
    """The interpreter's statements: assignments, branches and loops under lane masks."""

    def s_Assign(self, s):
        self.observer.assign_begins(s)
        # Unmasked, a launch-order tile load may stay deferred (masking needs its values).
        value = self.value_of(s.value) if self.mask is None else self.ev(s.value)
        if isinstance(value, _Blocks):
            self.assign(s.name, value, "tile")
            return
        if value.dtype != s.value.type.dtype.numpy:
            value = value.astype(s.value.type.dtype.numpy)
        self.assign(s.name, value, s.value.type.kind)
        self.observer.assigned(s, value)

    def restore(self, saved):
        """The mask after a nested block: the saved lanes minus those that left the loop."""
        if not self.loops:
            self.mask = saved
            return
        loop = self.loops[-1]
        gone = loop.broken | loop.continued
        self.mask = _lanes(saved, self.n) & ~gone if gone.any() else saved

    def s_If(self, s):
        cond = self.ev(s.cond)
        saved = self.mask
        if cond.shape[0] == 1:
            self.block(s.then_body if cond[0] else s.else_body)
            self.restore(saved)
            return
        lanes = _lanes(saved, self.n)
        taken = lanes & cond
        if taken.any():
            self.mask = taken
            self.block(s.then_body)
            self.restore(saved)
        other = _lanes(self.mask, self.n) & ~cond
        if s.else_body and other.any():
            self.mask = other
            self.block(s.else_body)
        self.restore(saved)

    def s_Break(self, s):
        self.loops[-1].broken |= _lanes(self.mask, self.n)
        self.mask = np.zeros(self.n, bool)

    def s_Continue(self, s):
        self.loops[-1].continued |= _lanes(self.mask, self.n)
        self.mask = np.zeros(self.n, bool)

    def s_For(self, s):
        start, stop, step = self.ev(s.start), self.ev(s.stop), self.ev(s.step)
        saved = self.mask
        loop = _Loop(self.n)
        self.loops.append(loop)
        try:
            if start.shape[0] == 1 and stop.shape[0] == 1 and step.shape[0] == 1:
                if step[0] == 0:
                    raise self.index_error("range() step must not be zero", s)
                for i in range(int(start[0]), int(stop[0]), int(step[0])):
                    lanes = _lanes(saved, self.n) & ~loop.broken if loop.broken.any() else saved
                    if lanes is not None and not lanes.any():
                        break
                    loop.continued[:] = False
                    self.mask = lanes
                    self.assign(s.var, np.array([i], np.int32), "scalar")
                    self.block(s.body)
                return
            if (step == 0).any():
                raise self.index_error("range() step must not be zero", s)
            i = np.broadcast_to(start, (self.n,)).astype(np.int32)
            while True:
                inside = np.where(step > 0, i < stop, i > stop)
                lanes = _lanes(saved, self.n) & inside & ~loop.broken
                if not lanes.any():
                    break
                loop.continued[:] = False
                self.mask = lanes
                self.assign(s.var, i, "scalar")
                self.block(s.body)
                i = (i + step).astype(np.int32)
        finally:
            self.loops.pop()
            self.mask = saved

    def s_While(self, s):
        saved = self.mask
        loop = _Loop(self.n)
        self.loops.append(loop)
        try:
            while True:
                self.mask = _lanes(saved, self.n) & ~loop.broken
                cond = np.broadcast_to(self.ev(s.cond), (self.n,))
                lanes = self.mask & cond
                if not lanes.any():
                    break
                loop.continued[:] = False
                self.mask = lanes
                self.block(s.body)
        finally:
            self.loops.pop()
            self.mask = saved
