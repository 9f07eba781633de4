"""Python's (and NumPy's) meaning where a GPU language's own operator means something
else: float to int, floor division, modulo, powers."""

from __future__ import annotations

import math

from qnb.dtypes import DType, bool_, f16, f32, i32


class PythonSemanticsMixin:
    """Python's semantics in the target language."""

    def helper_float_to_int(self, dtype: DType) -> str:
        """float → i32 as the cpu backend defines it: toward zero, saturating, NaN → 0
        (a plain conversion is undefined out of range in C++ and differs by target)."""
        name = f"qnb_to_i32_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("x", dtype)], i32))
            self.emit(f"if ({self.is_nan('x', dtype)}) {{ return {self.literal(0, i32)}; }}")
            self.emit(
                f"if (x >= {self.literal(2.0**31, dtype)}) {{ return {self.literal(2**31 - 1, i32)}; }}"
            )
            self.emit(
                f"if (x <= {self.literal(-(2.0**31), dtype)}) {{ return {self.literal(-(2**31), i32)}; }}"
            )
            self.emit(f"return {self.cast('x', dtype, i32)};")
            self.close()

        return self.helper(name, build)

    def helper_floordiv(self, dtype: DType) -> str:
        name = f"qnb_floordiv_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            zero, one = self.literal(0, dtype), self.literal(1, dtype)
            if dtype is f16:  # NumPy divides halves in f32 and rounds the quotient once
                wide = self.helper_floordiv(f32)
                a32, b32 = self.cast("a", f16, f32), self.cast("b", f16, f32)
                self.emit(f"return {self.cast(f'{wide}({a32}, {b32})', f32, f16)};")
                self.close()
                return
            if dtype.is_float:
                self.float_floordiv_body(dtype)
                self.close()
                return
            self.emit(f"if (b == {zero}) {{ return {zero}; }}")
            self.emit(self.declare_var("q", dtype, "a / b"))
            self.emit(
                f"if ((a - q * b) != {zero} && ((a < {zero}) != (b < {zero}))) {{ q = q - {one}; }}"
            )
            self.emit("return q;")
            self.close()

        return self.helper(name, build)

    def float_floordiv_body(self, dtype: DType) -> None:
        """NumPy's ``divmod`` quotient: from the exact remainder (``float_remainder``),
        ``(a - m) / b``, moved down when ``m`` and ``b`` differ in sign, then rounded to
        the nearest integer (not floored: the division may land just below it)."""
        zero, one = self.literal(0, dtype), self.literal(1, dtype)
        nan = self.literal(math.nan, dtype)
        self.emit(f"if (b == {zero}) {{ return a / b; }}")
        undefined = (
            f"{self.is_nan('a', dtype)} || {self.is_nan('b', dtype)} || {self.is_inf('a', dtype)}"
        )
        self.emit(f"if ({undefined}) {{ return {nan}; }}")
        self.emit(self.declare_let("m", dtype, self.float_remainder("a", "b", dtype)))
        self.emit(self.declare_var("d", dtype, "(a - m) / b"))
        self.emit(f"if (m != {zero} && ((b < {zero}) != (m < {zero}))) {{ d = d - {one}; }}")
        # a zero quotient has the sign of a / b (the signs of a and b, -0.0 included)
        opposite = f"{self.sign_bit('a', dtype)} != {self.sign_bit('b', dtype)}"
        negative = self.select(opposite, self.literal(-0.0, dtype), zero)
        self.emit(f"if (d == {zero}) {{ return {negative}; }}")
        self.emit(self.declare_let("f", dtype, f"{self.math_functions['floor']}(d)"))
        self.emit(f"if (d - f > {self.literal(0.5, dtype)}) {{ return f + {one}; }}")
        self.emit("return f;")

    def helper_mod(self, dtype: DType) -> str:
        name = f"qnb_mod_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            zero = self.literal(0, dtype)
            if dtype.is_float:  # fmod's own NaNs and infinities carry NumPy's cases through
                self.emit(self.declare_var("r", dtype, self.float_remainder("a", "b", dtype)))
            else:
                self.emit(f"if (b == {zero}) {{ return {zero}; }}")
                self.emit(self.declare_var("r", dtype, "a % b"))
            self.emit(f"if (r != {zero} && ((r < {zero}) != (b < {zero}))) {{ r = r + b; }}")
            if dtype.is_float:  # a zero remainder has the sign of b, as NumPy's
                signed = self.select(self.sign_bit("b", dtype), self.literal(-0.0, dtype), zero)
                self.emit(f"if (r == {zero}) {{ return {signed}; }}")
            self.emit("return r;")
            self.close()

        return self.helper(name, build)

    def float_remainder(self, a: str, b: str, dtype: DType) -> str:
        """C's ``fmod(a, b)``, exactly (NaN for an infinite ``a`` or a zero ``b``, ``a`` for
        an infinite ``b``): the float ``//`` and ``%`` helpers build NumPy's divmod on it."""
        raise NotImplementedError

    def helper_pow(self, dtype: DType) -> str:
        name = f"qnb_pow_{dtype.name}"

        def build():
            self.open(self.function_open(name, [("a", dtype), ("b", dtype)], dtype))
            zero, one = self.literal(0, dtype), self.literal(1, dtype)
            if dtype is f16:  # NumPy raises halves to a power in f32 and rounds once
                wide = self.helper_pow(f32)
                a32, b32 = self.cast("a", f16, f32), self.cast("b", f16, f32)
                self.emit(f"return {self.cast(f'{wide}({a32}, {b32})', f32, f16)};")
            elif dtype.is_float:
                self.float_pow_body(dtype)
            else:
                # By squaring, wrapping; a negative exponent gives the true power
                # truncated toward zero (±1 for a base of ±1, else 0).
                self.open(f"if (b < {zero}) {{")
                self.emit(
                    f"if (a == {one} || (a == -{one} && (b & {one}) == {zero})) {{ return {one}; }}"
                )
                self.emit(f"if (a == -{one}) {{ return a; }}")
                self.emit(f"return {zero};")
                self.close()
                self.emit(self.declare_var("r", dtype, one))
                self.emit(self.declare_var("x", dtype, "a"))
                self.emit(self.declare_var("e", dtype, "b"))
                self.open_loop(None)
                self.emit(f"if (e <= {zero}) {{ break; }}")
                self.emit(f"if ((e & {one}) != {zero}) {{ r = r * x; }}")
                self.emit("x = x * x;")
                self.emit(f"e = e >> {self.shift_amount(1)};")
                self.close_loop(None)
                self.emit("return r;")
            self.close()

        return self.helper(name, build)

    def float_pow_body(self, dtype: DType) -> None:
        """C99's pow (Annex F), which NumPy's is. The target's pow(a, b) is
        exp2(b * log2(a)): undefined for a <= 0 and for infinite operands, so those cases
        are decided here, and the target's pow sees only a finite nonzero base."""
        zero, one = self.literal(0, dtype), self.literal(1, dtype)
        inf, nan = self.literal(math.inf, dtype), self.literal(math.nan, dtype)
        negative_zero, half = self.literal(-0.0, dtype), self.literal(0.5, dtype)
        floor = self.math_functions["floor"]
        self.emit(f"if (b == {zero} || a == {one}) {{ return {one}; }}")
        self.emit(
            f"if ({self.is_nan('a', dtype)} || {self.is_nan('b', dtype)}) {{ return a + b; }}"
        )
        whole = f"{floor}(b) == b"
        self.emit(self.declare_let("odd", bool_, f"{whole} && {floor}(b * {half}) != b * {half}"))
        self.open(f"if ({self.is_inf('b', dtype)}) {{")  # |a| against 1 decides
        self.emit(f"if (abs(a) == {one}) {{ return {one}; }}")
        self.emit(self.declare_let("grows", bool_, f"(abs(a) > {one}) == (b > {zero})"))
        self.emit(f"return {self.select('grows', inf, zero)};")
        self.close()
        negative = self.sign_bit("a", dtype)
        self.open(f"if (a == {zero}) {{")  # ±0: the sign survives an odd power
        self.emit(
            f"if (b < {zero}) {{ return {self.select(f'odd && {negative}', f'-{inf}', inf)}; }}"
        )
        self.emit(f"return {self.select(f'odd && {negative}', negative_zero, zero)};")
        self.close()
        self.open(f"if ({self.is_inf('a', dtype)}) {{")
        self.emit(f"if (a > {zero}) {{ return {self.select(f'b > {zero}', inf, zero)}; }}")
        self.emit(f"if (b > {zero}) {{ return {self.select('odd', f'-{inf}', inf)}; }}")
        self.emit(f"return {self.select('odd', negative_zero, zero)};")
        self.close()
        self.emit(self.declare_let("m", dtype, f"{self.math_functions['pow']}(abs(a), b)"))
        self.emit(f"if (a > {zero}) {{ return m; }}")
        self.emit(f"if (!({whole})) {{ return {nan}; }}")
        self.emit(f"return {self.select('odd', '-m', 'm')};")
