"""WGSL spellings for the shared GPU walker (:mod:`qnb.backends.gpu`).

Device representation (what the wgpu runtime binds):

- each array parameter is a ``var<storage, read_write>`` ``array<T>`` at binding
  ``k`` of group 0 (parameter order); f32 → ``f32``, f16 → ``f16`` (needs the
  ``shader-f16`` feature), i32 → ``i32``, and **bool arrays are stored as u32**
  words (0 or 1), converted on the way in and out;
- scalar parameters and every array dimension live in one ``var<uniform>`` struct
  of 4-byte words at the next binding (f32 scalars as f32, i32 and bool as i32);
- f64 has no WGSL spelling: rendering raises ``BackendError`` at its first use.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from qnb.backends.gpu import GpuRenderer, Layout, Rendered
from qnb.backends.wgsl_atomics import WgslAtomics
from qnb.dtypes import DType, as_dtype, bf16, bool_, f16, f32, f64, i32
from qnb.errors import BackendError
from qnb.ir import MATH_OPS, KernelIR

WORKGROUP_SIZE = 256


class WgslRenderer(WgslAtomics, GpuRenderer):
    """WGSL; ``loop_budget``: the iterations in all after which the adapter's driver ends a
    program's loops (None: it never does), which the code then watches for."""

    language = "wgsl"
    type_names: ClassVar[dict] = {f32: "f32", f16: "f16", i32: "i32", bool_: "bool"}
    storage_types: ClassVar[dict] = {f32: "f32", f16: "f16", i32: "i32", bool_: "u32"}
    # workgroup bytes a program may declare: the adapter's limit is requested (wgpu.py),
    # 32768 on lavapipe and desktop GPUs; the launcher checks the device's own
    shared_limit = 32768
    barrier = "workgroupBarrier();"
    storage_barrier = "storageBarrier();"

    def __init__(self, options=None, loop_budget: int | None = None):
        super().__init__(options)
        self.loop_budget = loop_budget
        self.watched = False  # whether a loop was rendered under the budget
        self.loop_budget_binding: int | None = None  # the q_budget words, where rendered

    def type_name(self, dtype: DType) -> str:
        if dtype is bf16:
            raise BackendError(
                "WGSL has no bf16: this kernel uses bf16, which the wgpu backend cannot run; "
                "use the cpu or cuda backend (or f16/f32)"
            )
        if dtype is f64:
            raise BackendError(
                "WGSL has no f64: this kernel uses f64, which the wgpu backend cannot run; "
                "use the cpu or cuda backend (or f32)"
            )
        return self.type_names[dtype]

    def literal(self, value, dtype: DType) -> str:
        if dtype is bool_:
            return "true" if value else "false"
        if dtype is i32:
            n = int(value)
            return "i32(-2147483648)" if n == -(2**31) else f"{n}i"
        narrow = float(np.float16(value) if dtype is f16 else np.float32(value))
        suffix = "h" if dtype is f16 else "f"
        if math.isnan(narrow) or math.isinf(narrow):
            bits = {"nan": "0x7fc00000u", "inf": "0x7f800000u", "-inf": "0xff800000u"}[repr(narrow)]
            spelled = f"bitcast<f32>({bits})"
            return spelled if dtype is f32 else f"f16({spelled})"
        text = repr(narrow)
        return f"{text}{suffix}"

    def cast(self, text: str, source: DType, target: DType) -> str:
        return f"{self.type_name(target)}({text})"

    def declare_var(self, name: str, dtype: DType, init: str | None = None) -> str:
        if init is None:
            return f"var {name}: {self.type_name(dtype)};"
        return f"var {name}: {self.type_name(dtype)} = {init};"

    def declare_let(self, name: str, dtype: DType, value: str) -> str:
        return f"let {name}: {self.type_name(dtype)} = {value};"

    def declare_scratch(self, name: str, dtype: DType, size: int) -> str:
        spelled = self.type_name(dtype)
        if size:
            spelled = f"array<{spelled}, {size}>"
        return f"var<workgroup> {name}: {spelled};"

    def declare_array(self, name: str, dtype: DType, count: int) -> str:
        return f"var {name}: array<{self.type_name(dtype)}, {count}>;"

    def scalar_param(self, name: str) -> str:
        return f"prm.{name}"

    def array_dim(self, field_name: str) -> str:
        return f"prm.{field_name}"

    def array_read(self, binding: str, index: str, dtype: DType) -> str:
        element = self.array_element(binding, index)
        if self.is_atomic(binding):  # (declared atomic: every access is an atomic one)
            loaded = f"atomicLoad(&{element})"
            return f"bitcast<f32>({loaded})" if dtype is f32 else loaded
        return f"({element} != 0u)" if dtype is bool_ else element

    def array_write(self, binding: str, index: str, value: str, dtype: DType) -> str:
        if self.is_atomic(binding):
            word = f"bitcast<u32>({value})" if dtype is f32 else value
            return f"atomicStore(&{self.array_element(binding, index)}, {word});"
        if dtype is bool_:
            value = f"select(0u, 1u, {value})"
        return f"{self.array_element(binding, index)} = {value};"

    def program_id(self, which: str, axis: int) -> str:
        if which == "id":
            return f"i32(q_pid.{'xyz'[axis]})"
        return f"i32(prm.q_grid_{'xyz'[axis]})"

    def _layout(self, kernel: KernelIR) -> Layout:
        # The launch grid travels in the parameters: a dispatch has at most 65535
        # workgroups per axis, so the launcher may fold a larger grid (see entry_open).
        layout = super()._layout(kernel)
        layout.grid_slot = layout.words
        layout.words += 3
        return layout

    def uniform_load(self, slot: str, target: str) -> list[str]:
        # workgroupUniformLoad is a barrier whose result the uniformity analysis
        # accepts as uniform, so branches on it may contain barriers.
        return [f"{target} = workgroupUniformLoad(&{slot});"]

    # ---- loops on a driver with a loop budget
    #
    # Where the adapter's driver ends a program's loops after ``loop_budget`` iterations in
    # all (llvmpipe: wgpu.py's LOOP_BUDGETS), the code notes, per invocation, whether a loop
    # was left with work to do, and the launcher raises. The driver leaves a loop only at
    # its back edge, so: a ``loop`` sets ``q_more`` at the end of each pass (whether its
    # next test continues: ``ends`` negated, or true where the test cannot be repeated) and
    # clears it at the start of the next, and ``q_more`` still set after the loop means the
    # driver cut it (``q_cut``). A counted ``for`` counts itself open while its counter has
    # work left (``q_open``). The entry's end reports either into the hidden ``q_budget``
    # words: the invocations cut, and the first program among them.

    def open_loop(self, increment: str | None) -> None:
        self.open("loop {")
        if self.loop_budget:
            self.watched = True
            self.emit("q_more = false;")

    def close_loop(self, increment: str | None, ends: str | None = None) -> None:
        if self.loop_budget:
            steps = [increment] if increment else []
            steps.append(f"q_more = {f'!({ends})' if ends else 'true'};")
            self.emit(f"continuing {{ {' '.join(steps)} }}")
            self.close()
            self.emit("if (q_more) { q_cut = true; }")
            return
        if increment:
            self.emit(f"continuing {{ {increment} }}")
        self.close()

    def counted_loop(self, name: str, start, stop) -> str:
        return self.strided_loop(name, start, stop, 1)

    def strided_loop(self, name: str, start: str, stop, step: int) -> str:
        if not self.loop_budget:
            return f"for (var {name}: i32 = {start}; {name} < {stop}; {name} = {name} + {step}) {{"
        self.watched = True
        enter, step_to = self.helper_loop_count()
        return (
            f"for (var {name}: i32 = {enter}({start}, {stop}); {name} < {stop}; "
            f"{name} = {step_to}({name} + {step}, {stop})) {{"
        )

    def helper_loop_count(self) -> tuple[str, str]:
        """The functions a counted loop opens and steps through under a loop budget."""

        def build_enter():
            self.open(self.function_open("qnb_loop_enter", [("v", i32), ("stop", i32)], i32))
            self.emit("if (v < stop) { q_open = q_open + 1u; }")
            self.emit("return v;")
            self.close()

        def build_step():
            self.open(self.function_open("qnb_loop_step", [("v", i32), ("stop", i32)], i32))
            self.emit("if (v >= stop) { q_open = q_open - 1u; }")
            self.emit("return v;")
            self.close()

        return self.helper("qnb_loop_enter", build_enter), self.helper("qnb_loop_step", build_step)

    def budget_lines(self) -> list[str]:
        """The declarations of a loop-budget build (after the parameters)."""
        self.loop_budget_binding = self.layout.uniform_binding + 1
        return [
            f"@group(0) @binding({self.loop_budget_binding}) var<storage, read_write> "
            "q_budget: array<atomic<u32>, 2>;",
            "var<private> q_more: bool;  // the loop just left had work left",
            "var<private> q_cut: bool;  // a loop of this invocation was cut short",
            "var<private> q_open: u32;  // counted loops entered with work left, not done",
            "",
        ]

    def function_open(self, name: str, params, result: DType) -> str:
        spelled = ", ".join(f"{p}: {self.type_name(d)}" for p, d in params)
        return f"fn {name}({spelled}) -> {self.type_name(result)} {{"

    def shift_amount(self, n: int) -> str:
        return f"{n}u"

    def probe_words(self, value: str, dtype: DType) -> list[str]:
        if dtype is bool_:
            return [f"select(0, 1, {value})"]
        if dtype is i32:
            return [value]
        return [f"bitcast<i32>(f32({value}))" if dtype is f16 else f"bitcast<i32>({value})"]

    def is_nan(self, x: str, dtype: DType) -> str:
        # WGSL lets a compiler assume no NaNs, so x != x may fold to false: test the bits.
        return f"((bitcast<u32>(f32({x})) & 0x7fffffffu) > 0x7f800000u)"

    def sign_bit(self, x: str, dtype: DType) -> str:
        return f"((bitcast<u32>(f32({x})) >> 31u) == 1u)"

    def is_inf(self, x: str, dtype: DType) -> str:
        return f"((bitcast<u32>(f32({x})) & 0x7fffffffu) == 0x7f800000u)"

    def expr_Unary(self, node) -> str:
        # An f16 math function computes in f32 and rounds once, as NumPy's f16 ufuncs do
        # (lavapipe's f16 tanh was 1.5e-2 off near 0, 15 f16 ulps).
        if node.op in MATH_OPS and node.type.dtype is f16:
            a = self.expr(node.operand)
            return f"f16({self.math_functions[node.op]}(f32({a})))"
        if node.op == "tanh":
            return f"{self.helper_tanh()}({self.expr(node.operand)})"
        return super().expr_Unary(node)

    def helper_tanh(self) -> str:
        """tanh for f32 within 3 ulps (Cephes' tanhf): lavapipe's own tanh is a quotient of
        exponentials, 62,598 ulps off near 0 (where it cancels) and 1,924 ulps off at
        |x| < 100 (measured against NumPy, see tests/backends/test_math.py)."""
        name = "qnb_tanh_f32"

        def build():
            self.open(self.function_open(name, [("x", f32)], f32))
            self.emit(f"if ({self.is_nan('x', f32)}) {{ return x; }}")
            self.emit("let a: f32 = abs(x);")
            self.emit("if (a > 9.0f) { return sign(x); }  // tanh(9) rounds to 1 in f32")
            self.open("if (a >= 0.625f) {")
            self.emit("return sign(x) * (1.0f - 2.0f / (exp(2.0f * a) + 1.0f));")
            self.close()
            self.emit("let z: f32 = x * x;")
            self.emit(
                "let p: f32 = (((-5.70498872745e-3f * z + 2.06390887954e-2f) * z "
                "- 5.37397155531e-2f) * z + 1.33314422036e-1f) * z - 3.33332819422e-1f;"
            )
            self.emit("return p * z * x + x;")
            self.close()

        return self.helper(name, build)

    def expr_Binary(self, node) -> str:
        # Float != must hold when an operand is NaN. lavapipe compiles WGSL's != to an
        # ordered comparison (false for NaN); == is false for NaN either way, so negate it.
        if node.op == "ne" and node.left.type.dtype.is_float:
            return f"(!({self.expr(node.left)} == {self.expr(node.right)}))"
        return super().expr_Binary(node)

    def helper_shift(self, op: str) -> str:
        # A count outside 0..31 (negative ones read as huge unsigned counts, as NumPy
        # reads them) shifts every bit out; WGSL's own << and >> would take it mod 32.
        name = f"qnb_{op}_i32"

        def build():
            self.open(self.function_open(name, [("x", i32), ("c", i32)], i32))
            if op == "shl":
                self.emit("if (u32(c) >= 32u) { return 0i; }")
                self.emit("return x << u32(c);")
            else:  # arithmetic: past 31 every bit is the sign
                self.emit("return x >> min(u32(c), 31u);")
            self.close()

        return self.helper(name, build)

    def minmax(self, op: str, a: str, b: str, dtype: DType) -> str:
        # WGSL's max/min need not propagate NaN; NumPy's maximum/minimum do.
        if not dtype.is_float:
            return super().minmax(op, a, b, dtype)
        name = f"qnb_{op}_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            self.emit(f"if ({self.is_nan('a', dtype)}) {{ return a; }}")
            self.emit(f"if ({self.is_nan('b', dtype)}) {{ return b; }}")
            self.emit(f"return {op}(a, b);")
            self.close()

        return f"{self.helper(name, build)}({a}, {b})"

    def float_remainder(self, a: str, b: str, dtype: DType) -> str:
        # C's fmod, exactly (WGSL's % is a - b * trunc(a / b), rounded twice).
        if dtype is f16:
            return f"f16({self.helper_fmod()}(f32({a}), f32({b})))"
        return f"{self.helper_fmod()}({a}, {b})"

    def helper_fmod(self) -> str:
        """fmod for f32 by long division: each step subtracts b scaled by a power of two
        into the remainder's binade, which Sterbenz's lemma makes exact."""
        name = "qnb_fmod_f32"

        def build():
            nan = self.literal(math.nan, f32)
            self.open(self.function_open(name, [("a", f32), ("b", f32)], f32))
            undefined = " || ".join(
                [self.is_nan("a", f32), self.is_nan("b", f32), self.is_inf("a", f32), "b == 0.0f"]
            )
            self.emit(f"if ({undefined}) {{ return {nan}; }}")
            self.emit(f"if ({self.is_inf('b', f32)}) {{ return a; }}")
            self.emit("var r: f32 = abs(a);")
            self.emit("let d: f32 = abs(b);")
            self.emit("let e: i32 = frexp(d).exp;")
            self.open_loop(None)
            self.emit("if (r < d) { break; }")
            self.emit("var t: f32 = ldexp(d, frexp(r).exp - e);")
            self.emit("if (t > r) { t = t * 0.5f; }")
            self.emit("r = r - t;")
            self.close_loop(None, "r < d")
            self.emit("return select(r, -r, a < 0.0f);")
            self.close()

        return self.helper(name, build)

    def prelude(self, kernel: KernelIR, layout: Layout, uses_f16: bool) -> list[str]:
        lines = [f"// qnb kernel {kernel.name!s} (generated WGSL)"]
        if uses_f16:
            lines.append("enable f16;")
        lines.append("")
        lines.append("struct Params {")
        for scalar in layout.scalars:
            spelled = "f32" if scalar["dtype"] in ("f32", "f16") else "i32"
            lines.append(f"  {self.param_field(scalar['name'])}: {spelled},")
        for dim in layout.dims:
            lines.append(f"  {self.dim_field(dim['name'], dim['axis'])}: i32,")
        lines += [f"  q_grid_{axis}: u32," for axis in "xyz"]
        lines.append("}")
        lines.append("")
        for array in layout.arrays:
            element = self.storage_element(array["name"], as_dtype(array["dtype"]))
            lines.append(
                f"@group(0) @binding({array['binding']}) var<storage, read_write> "
                f"{self.binding(array['name'])}: array<{element}>;"
            )
        lines.append(f"@group(0) @binding({layout.uniform_binding}) var<uniform> prm: Params;")
        lines.append("")
        if self.watched:  # (the body and the helpers are rendered before the prelude)
            lines += self.budget_lines()
        return lines

    def entry_close(self) -> list[str]:
        if self.loop_budget_binding is None:
            return ["}"]
        return [
            "  if (q_cut || q_open != 0u) {  // the driver ended a loop with work left",
            "    atomicAdd(&q_budget[0], 1u);",
            "    atomicMax(&q_budget[1], 0xffffffffu - q_lin);  // the first such program",
            "  }",
            "}",
        ]

    def param_value(self, param) -> str:
        # f16 and bool scalar parameters travel as f32 / i32 words.
        text = super().param_value(param)
        if param.type.dtype is f16:
            return f"f16({text})"
        if param.type.dtype is bool_:
            return f"({text} != 0)"
        return text

    def entry_open(self, kernel: KernelIR, layout: Layout) -> list[str]:
        if self.solo:
            per_group = layout.programs_per_group
            return [
                f"@compute @workgroup_size({per_group})",
                "fn main(@builtin(local_invocation_index) q_inv: u32,",
                "        @builtin(workgroup_id) q_wid: vec3<u32>,",
                "        @builtin(num_workgroups) q_nwg: vec3<u32>) {",
                f"  // the kernel holds no tile: one invocation is one program, {per_group} per",
                "  // workgroup, in the grid's order (x fastest); those past the last return",
                f"  let q_lin: u32 = (q_wid.x + q_nwg.x * (q_wid.y + q_nwg.y * q_wid.z)) * "
                f"{per_group}u + q_inv;",
                "  if (q_lin >= prm.q_grid_x * prm.q_grid_y * prm.q_grid_z) { return; }",
                "  let q_pid = vec3<u32>(q_lin % prm.q_grid_x, (q_lin / prm.q_grid_x) % prm.q_grid_y,",
                "                        q_lin / (prm.q_grid_x * prm.q_grid_y));",
            ]
        return [
            f"@compute @workgroup_size({layout.threads})",
            "fn main(@builtin(local_invocation_index) q_lid: u32,",
            "        @builtin(workgroup_id) q_wid: vec3<u32>,",
            "        @builtin(num_workgroups) q_nwg: vec3<u32>) {",
            "  // program ids from the workgroup's place in the dispatch, which is the grid",
            "  // itself or, past 65535 programs on an axis, the grid folded onto x and y",
            "  let q_lin: u32 = q_wid.x + q_nwg.x * (q_wid.y + q_nwg.y * q_wid.z);",
            "  if (q_lin >= prm.q_grid_x * prm.q_grid_y * prm.q_grid_z) { return; }",
            "  let q_pid = vec3<u32>(q_lin % prm.q_grid_x, (q_lin / prm.q_grid_x) % prm.q_grid_y,",
            "                        q_lin / (prm.q_grid_x * prm.q_grid_y));",
            "  let q_t: i32 = i32(q_lid);",
        ]


def render_wgsl(kernel: KernelIR) -> Rendered:
    """Render ``kernel`` to WGSL (no device needed)."""
    return WgslRenderer().render(kernel)
