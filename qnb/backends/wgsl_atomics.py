"""Atomics in WGSL (``qnb.atomic_add``/``max``/``min`` on wgpu): an array any atomic
updates is declared ``array<atomic<i32>>`` (i32) or ``array<atomic<u32>>`` (f32, its bit
patterns), and every access to it is atomic (``WgslRenderer.array_read``/``array_write``
ask :meth:`WgslAtomics.is_atomic`); i32 updates are WGSL's own, f32 ones a
compare-exchange loop on the bits."""

from __future__ import annotations

from qnb.dtypes import DType, f32, i32
from qnb.errors import BackendError


class WgslAtomics:
    """The atomic spellings of :class:`qnb.backends.wgsl.WgslRenderer`."""

    def is_atomic(self, binding: str) -> bool:
        return any(self.binding(p) == binding for p in self.atomic_params)

    def storage_element(self, name: str, dtype: DType) -> str:
        if name in self.atomic_params:
            if dtype not in (i32, f32):
                self.type_name(dtype)  # f64, bf16: WGSL has no such type (BackendError)
                raise BackendError(
                    f"qnb.atomic_* on wgpu updates i32 and f32 arrays, not {dtype.name} "
                    f"({name!r}); use the cpu or cuda backend"
                )
            return "atomic<i32>" if dtype is i32 else "atomic<u32>"
        return self.storage_types[dtype]

    def atomic_update(self, op: str, binding: str, index: str, value: str, dtype: DType) -> str:
        if dtype is i32:  # WGSL's own: each returns the element's old value
            name = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin"}[op]
            return f"{name}(&{self.array_element(binding, index)}, {value})"
        if dtype is not f32:
            self.type_name(dtype)  # f64, bf16: WGSL has no such type (BackendError)
            raise BackendError(f"qnb.atomic_{op} on wgpu updates i32 and f32, not {dtype.name}")
        return f"{self.helper_atomic_f32(op, binding)}({index}, {value})"

    def helper_atomic_f32(self, op: str, binding: str) -> str:
        """``qnb.atomic_<op>`` on an f32 element of ``binding`` by compare-exchange on its
        bits (WGSL has no float atomics): read the word, compute the new value, swap it in
        if the word is still the one read, else try again from the word found; returns the
        old value. One function per array (WGSL passes no pointer into storage). Under a
        loop budget the retry loop is watched like the kernel's own."""
        name = f"qnb_atomic_{op}_f32_{binding}"

        def build():
            self.open(self.function_open(name, [("i", i32), ("v", f32)], f32))
            element = f"&{self.array_element(binding, 'i')}"
            self.emit(f"var seen: u32 = atomicLoad({element});")
            self.open_loop(None)
            current = "bitcast<f32>(seen)"
            new = f"{current} + v" if op == "add" else self.minmax(op, current, "v", f32)
            self.emit(
                f"let swap = atomicCompareExchangeWeak({element}, seen, bitcast<u32>({new}));"
            )
            self.emit("if (swap.exchanged) { break; }")
            self.emit("seen = swap.old_value;")
            self.close_loop(None)
            self.emit("return bitcast<f32>(seen);")
            self.close()

        return self.helper(name, build)
