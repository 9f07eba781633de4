"""Probe builds (``qnb.compare``): after every step of the chosen program the walker
writes a header word and the value's bits to a hidden buffer."""

from __future__ import annotations

from qnb import ir
from qnb.backends import probe
from qnb.dtypes import bool_, i32


class ProbeMixin:
    """A probe build's step records."""

    def probe_open(self) -> None:
        params = {p.name: p for p in self.kernel.scalars}
        ids = [self.program_id("id", axis) for axis in range(3)]
        counts = [self.program_id("count", axis) for axis in range(2)]
        flat = f"{ids[0]} + {counts[0]} * ({ids[1]} + {counts[1]} * {ids[2]})"
        chosen = self.param_value(params[probe.PROGRAM_PARAM])
        here = self.let(bool_, f"({flat}) == {chosen}")
        count = self.var(i32, self.literal(0, i32))
        at = self.var(i32, self.literal(1, i32))
        binding = self.binding(probe.PROBE_PARAM)
        capacity = self.array_dim(self.dim_field(probe.PROBE_PARAM, 0))
        first = "true" if self.solo else "q_lid == 0u"
        self._probe = (here, count, at, binding, capacity, first)
        self.emit(f"if ({here} && {first}) {{ {self.array_element(binding, '0')} = 0; }}")

    def probe_value(self, node: ir.Expr, value: str) -> str:
        """A stored scalar, recorded first in a probe build (into a temporary, once)."""
        if not self.probe:
            return value
        value = self.let(node.type.dtype, value)
        self.probe_step(node.type, value)
        return value

    def probe_step(self, typ: ir.Type, value: str) -> None:
        """Record ``value`` (a scalar, or the private array of a tile or vec): element
        ``e`` at word ``e`` of the entry, written by its owner thread."""
        kind, dtype = typ.kind, typ.dtype
        here, count, at, binding, capacity, first = self._probe
        words = (
            self.probe_words(value, dtype)
            if kind == "scalar"
            else [None] * len(self.probe_words("x", dtype))
        )
        need = 1 + probe.value_words(typ)
        line = self._loc.line if self._loc is not None else 0
        element = lambda index: self.array_element(binding, index)  # noqa: E731
        self.open(f"if ({here}) {{")
        self.open(f"if ({count} < {probe.STEP_BUDGET} && {at} + {need} <= {capacity}) {{")
        self.emit(f"if ({first}) {{ {element(at)} = {probe.header(typ, line)}; }}")
        if kind in ("tile", "vec"):
            self.slot_loop(typ)
            words = self.probe_words(f"{value}[q_s]", dtype)
            position = "q_e"
            guard = f"q_t < {typ.size}" if self.replicated(typ) else None
        else:
            position, guard = "0", first
        for w, word in enumerate(words):
            index = f"{at} + {1 + w} + {position} * {len(words)}"
            write = f"{element(index)} = {word};"
            self.emit(write if guard is None else f"if ({guard}) {{ {write} }}")
        if kind in ("tile", "vec"):
            self.close()
        self.emit(f"{at} = {at} + {need};")
        self.close()
        self.emit(f"if ({count} <= {probe.STEP_BUDGET}) {{ {count} = {count} + 1; }}")
        self.emit(f"if ({first}) {{ {element('0')} = {count}; }}")
        self.close()
