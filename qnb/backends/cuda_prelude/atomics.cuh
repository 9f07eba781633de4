namespace qnb {
__device__ __forceinline__ int atomic_add(int* p, int v) { return atomicAdd(p, v); }
__device__ __forceinline__ int atomic_max(int* p, int v) { return atomicMax(p, v); }
__device__ __forceinline__ int atomic_min(int* p, int v) { return atomicMin(p, v); }
__device__ __forceinline__ float atomic_add(float* p, float v) { return atomicAdd(p, v); }
#define QNB_ATOMIC_CAS(NAME, T, W, TO, FROM, NEW)                                   \
  __device__ __forceinline__ T NAME(T* p, T v) {                                   \
    W* word = (W*)p;                                                               \
    W old = *word, seen;                                                           \
    do {                                                                           \
      seen = old;                                                                  \
      old = atomicCAS(word, seen, TO(NEW(FROM(seen), v)));                         \
    } while (seen != old);                                                         \
    return FROM(old);                                                              \
  }
__device__ __forceinline__ float plus_(float a, float b) { return a + b; }
__device__ __forceinline__ double plus_(double a, double b) { return a + b; }
QNB_ATOMIC_CAS(atomic_max, float, int, __float_as_int, __int_as_float, max_)
QNB_ATOMIC_CAS(atomic_min, float, int, __float_as_int, __int_as_float, min_)
#define QNB_U64(x) ((unsigned long long)__double_as_longlong(x))
#define QNB_F64(x) __longlong_as_double((long long)(x))
QNB_ATOMIC_CAS(atomic_add, double, unsigned long long, QNB_U64, QNB_F64, plus_)
QNB_ATOMIC_CAS(atomic_max, double, unsigned long long, QNB_U64, QNB_F64, max_)
QNB_ATOMIC_CAS(atomic_min, double, unsigned long long, QNB_U64, QNB_F64, min_)
}  // namespace qnb
