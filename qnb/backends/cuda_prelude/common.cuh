namespace qnb {
// i32 arithmetic wraps (two's complement) as NumPy's and WGSL's does; signed overflow is
// undefined in C++, so it goes through unsigned.
__device__ __forceinline__ int iadd(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ int isub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ int imul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ int ineg(int a) { return (int)(0u - (unsigned)a); }
__device__ __forceinline__ int abs_(int x) { return x < 0 ? -x : x; }
__device__ __forceinline__ float abs_(float x) { return fabsf(x); }
__device__ __forceinline__ double abs_(double x) { return fabs(x); }
__device__ __forceinline__ bool abs_(bool x) { return x; }
// NumPy's shifts for every count: outside 0..31 (negative counts are huge unsigned ones)
// << gives 0 and >> the sign; C++ leaves those counts undefined, and << of a negative
// value too, so the left shift goes through unsigned
__device__ __forceinline__ int shl_(int x, int c) {
  return (unsigned)c >= 32u ? 0 : (int)((unsigned)x << c);
}
__device__ __forceinline__ int shr_(int x, int c) { return x >> ((unsigned)c >= 32u ? 31 : c); }
__device__ __forceinline__ float pow_(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double pow_(double a, double b) { return pow(a, b); }
// by squaring, wrapping; a negative exponent gives the true power truncated toward zero
__device__ __forceinline__ int pow_(int a, int b) {
  if (b < 0) return (a == 1 || a == -1) ? ((b & 1) ? a : 1) : 0;
  unsigned r = 1u, x = (unsigned)a;
  for (; b; b >>= 1, x *= x) if (b & 1) r *= x;
  return (int)r;
}
// maximum/minimum propagate NaN, as NumPy's do
template <class T> __device__ __forceinline__ T max_(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <class T> __device__ __forceinline__ T min_(T a, T b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}
__device__ __forceinline__ int max_(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int min_(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ bool max_(bool a, bool b) { return a || b; }
__device__ __forceinline__ bool min_(bool a, bool b) { return a && b; }
// Python's floor division and modulo (x // 0 and x % 0 give 0 for ints, as NumPy's do;
// INT_MIN // -1 wraps to INT_MIN, where C++'s / is undefined)
__device__ __forceinline__ int floordiv_(int a, int b) {
  if (b == 0) return 0;
  if (b == -1) return ineg(a);
  const int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int mod_(int a, int b) {
  if (b == 0 || b == -1) return 0;
  const int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <class F> __device__ __forceinline__ F floordiv_float(F a, F b) {  // NumPy's divmod
  if (b == F(0)) return a / b;
  const F m = fmod(a, b);
  F div = (a - m) / b;
  if (m != F(0) && ((b < F(0)) != (m < F(0)))) div -= F(1);
  if (div == F(0)) return copysign(F(0), a / b);
  const F f = floor(div);
  return (div - f > F(0.5)) ? f + F(1) : f;
}
template <class F> __device__ __forceinline__ F mod_float(F a, F b) {
  const F m = fmod(a, b);
  if (b == F(0)) return m;
  if (m != F(0)) return ((b < F(0)) != (m < F(0))) ? m + b : m;
  return copysign(F(0), b);
}
__device__ __forceinline__ float floordiv_(float a, float b) { return floordiv_float(a, b); }
__device__ __forceinline__ double floordiv_(double a, double b) { return floordiv_float(a, b); }
__device__ __forceinline__ float mod_(float a, float b) { return mod_float(a, b); }
__device__ __forceinline__ double mod_(double a, double b) { return mod_float(a, b); }
}  // namespace qnb
