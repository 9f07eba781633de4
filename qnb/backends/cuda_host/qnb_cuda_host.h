// Runs qnb's generated CUDA C++ on the host, for tests on machines without a GPU.
//
// This is not a GPU and not a simulator of one: it gives the CUDA execution model that
// qnb's generated code relies on (blocks of threads, per-block __shared__ memory,
// __syncthreads, WMMA's 16x16x16 product), so that the generated code's logic (indexing,
// guards, barriers, exchanges through shared memory, the ABI) can be checked against the
// cpu backend. Timing, warp scheduling, the memory model and CUDA's math-library ulps are
// not modelled.
//
// Model (the scheduler, qnb_cuda_host_runtime.cpp): blocks run one after another; within
// a block every thread is a fiber and runs until it reaches __syncthreads() or returns;
// phases between barriers alternate the order the threads run in, so a missing barrier
// shows whichever thread's write it fails to order. __shared__ becomes `static
// thread_local`: one block at a time uses it on each host thread. Every piece of the
// model's state (threadIdx, blockIdx, the scheduler's block) is per host thread too, so
// Python threads may launch kernels, even one kernel, at the same time. This header is
// what a kernel sees; the scheduler is compiled once, apart, so that a kernel's compile is
// its own code.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
};

// ---------------------------------------------------------------- the block scheduler

// Built once, apart from the kernels (qnb_cuda_host_runtime.cpp; each kernel's library
// links its object), so a kernel's compile is its own code only. Per host thread; hidden,
// so a kernel reaches them without a call into the dynamic linker.
#define QNB_HOST_STATE extern thread_local __attribute__((visibility("hidden")))
QNB_HOST_STATE uint3 threadIdx;
QNB_HOST_STATE uint3 blockIdx;
QNB_HOST_STATE dim3 blockDim;
QNB_HOST_STATE dim3 gridDim;

namespace qnb_host {
// Runs body(context) as every thread of every block of the grid; returns the barriers
// released (for the harness's report).
long launch(const unsigned int grid[3], unsigned int threads, void (*body)(void*),
            void* context);
void syncthreads();
// Counts one wmma::mma_sync of the running thread: per thread of the block, summed over the
// launch's blocks, read back through qnb_host_mma_calls (so that a test can see which warps
// of a block did the tensor-core work, and that every lane of a warp took part).
void count_mma();
}  // namespace qnb_host

inline void __syncthreads() { qnb_host::syncthreads(); }
// __syncwarp is modelled as a block barrier. That orders more than the hardware does, and
// models faithfully only code in which every warp of a block passes the same __syncwarp
// calls (bench_cuda's layout probes); qnb's generated code has none.
inline void __syncwarp(unsigned int = 0xffffffffu) { qnb_host::syncthreads(); }

// ---------------------------------------------------------------- device functions

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float __int_as_float(int x) {
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}
inline double __longlong_as_double(long long x) {
  double d;
  memcpy(&d, &x, sizeof d);
  return d;
}

// ---------------------------------------------------------------- bit casts (probe builds)

inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, sizeof i);
  return i;
}
inline long long __double_as_longlong(double d) {
  long long i;
  memcpy(&i, &d, sizeof i);
  return i;
}

// ---------------------------------------------------------------- atomics

// Blocks run one after another and a thread runs until it reaches __syncthreads(), so no
// other thread runs between an atomic's read and its write: each is a plain
// read-modify-write that returns the old value, as CUDA's do.
#define QNB_HOST_ATOMIC(NAME, T, EXPR) \
  inline T NAME(T* p, T v) {           \
    T old = *p;                        \
    *p = (EXPR);                       \
    return old;                        \
  }
QNB_HOST_ATOMIC(atomicAdd, int, (int)((unsigned)old + (unsigned)v))
QNB_HOST_ATOMIC(atomicAdd, float, old + v)
QNB_HOST_ATOMIC(atomicMax, int, old > v ? old : v)
QNB_HOST_ATOMIC(atomicMin, int, old < v ? old : v)
#undef QNB_HOST_ATOMIC
template <class W>
inline W atomicCAS(W* p, W compare, W value) {
  W old = *p;
  if (old == compare) *p = value;
  return old;
}

// ---------------------------------------------------------------- cuda_fp16

// A half holds an IEEE binary16; every operation computes in float and rounds once, which
// for + - * / is the correctly rounded result, as CUDA's __hadd etc. are.
struct __half {
  _Float16 v;
};
inline __half __float2half(float f) { return __half{(_Float16)f}; }
inline __half __double2half(double d) { return __half{(_Float16)d}; }
inline float __half2float(__half h) { return (float)h.v; }
inline __half __habs(__half h) { return __float2half(fabsf(__half2float(h))); }
inline __half hfloor(__half h) { return __float2half(floorf(__half2float(h))); }
#define QNB_HALF_ARITH(op)                                      \
  inline __half operator op(__half a, __half b) {               \
    return __float2half(__half2float(a) op __half2float(b));    \
  }                                                             \
  inline __half& operator op##=(__half& a, __half b) {          \
    return a = a op b;                                          \
  }
QNB_HALF_ARITH(+)
QNB_HALF_ARITH(-)
QNB_HALF_ARITH(*)
QNB_HALF_ARITH(/)
#undef QNB_HALF_ARITH
#define QNB_HALF_COMPARE(op) \
  inline bool operator op(__half a, __half b) { return __half2float(a) op __half2float(b); }
QNB_HALF_COMPARE(<)
QNB_HALF_COMPARE(<=)
QNB_HALF_COMPARE(>)
QNB_HALF_COMPARE(>=)
QNB_HALF_COMPARE(==)
QNB_HALF_COMPARE(!=)
#undef QNB_HALF_COMPARE
inline __half operator-(__half a) { return __half{(_Float16)(-a.v)}; }

// ---------------------------------------------------------------- cuda_bf16

// A bfloat16 is the top half of a float. Conversions round to nearest even (ties to the
// even bf16) and keep NaN a quiet NaN of the same sign, as CUDA's __float2bfloat16 does;
// the generated code computes every bf16 op in float and converts once.
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(uint16_t)((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{(uint16_t)(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = (uint32_t)h.bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
// double -> bf16 rounds once (as ml_dtypes and CUDA's __double2bfloat16 do): the double is
// first narrowed to float toward zero, with a sticky bit for what was dropped, so that the
// float's rounding to bf16 is the double's.
inline __nv_bfloat16 __double2bfloat16(double d) {
  if (d != d) return __float2bfloat16((float)d);
  float f = (float)d;
  if ((double)f != d && fabs(d) < 3.4028234663852886e38) {
    // (float)d rounded to nearest; step toward zero if it went past d, then set the sticky bit
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u |= 1u;
    memcpy(&f, &u, sizeof f);
  }
  return __float2bfloat16(f);
}
#define QNB_BF16_COMPARE(op)                                    \
  inline bool operator op(__nv_bfloat16 a, __nv_bfloat16 b) {   \
    return __bfloat162float(a) op __bfloat162float(b);          \
  }
QNB_BF16_COMPARE(<)
QNB_BF16_COMPARE(<=)
QNB_BF16_COMPARE(>)
QNB_BF16_COMPARE(>=)
QNB_BF16_COMPARE(==)
QNB_BF16_COMPARE(!=)
#undef QNB_BF16_COMPARE
#define QNB_BF16_ARITH(op)                                                       \
  inline __nv_bfloat16 operator op(__nv_bfloat16 a, __nv_bfloat16 b) {           \
    return __float2bfloat16(__bfloat162float(a) op __bfloat162float(b));         \
  }                                                                              \
  inline __nv_bfloat16& operator op##=(__nv_bfloat16& a, __nv_bfloat16 b) {      \
    return a = a op b;                                                           \
  }
QNB_BF16_ARITH(+)
QNB_BF16_ARITH(-)
QNB_BF16_ARITH(*)
QNB_BF16_ARITH(/)
#undef QNB_BF16_ARITH

// ---------------------------------------------------------------- WMMA

// A fragment holds the whole matrix in every thread (WMMA's element-to-thread mapping is
// opaque to its users, so the emulation may choose any). mma_sync sums in float, k in order,
// and is counted per thread (qnb_host::count_mma).
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the host emulation has only 16x16x16");
  T x[256];
  static constexpr bool col = __is_same(Layout, col_major);
};

template <class Use, class T, class Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = f.col ? p[c * ldm + r] : p[r * ldm + c];
}
template <class T>
inline void fill_fragment(fragment<accumulator, 16, 16, 16, T>& f, T value) {
  for (T& e : f.x) e = value;
}
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, __half, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __half, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
  qnb_host::count_mma();
  float out[256];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float s = c.x[i * 16 + j];
      for (int k = 0; k < 16; ++k) s += __half2float(a.x[i * 16 + k]) * __half2float(b.x[k * 16 + j]);
      out[i * 16 + j] = s;
    }
  memcpy(d.x, out, sizeof out);
}
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
  qnb_host::count_mma();
  float out[256];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float s = c.x[i * 16 + j];
      for (int k = 0; k < 16; ++k)
        s += __bfloat162float(a.x[i * 16 + k]) * __bfloat162float(b.x[k * 16 + j]);
      out[i * 16 + j] = s;
    }
  memcpy(d.x, out, sizeof out);
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  if (threadIdx.x % 32 != 0) return;  // one store for the warp (its lanes' parts together)
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * 16 + c];
}
}  // namespace wmma
}  // namespace nvcuda
