namespace qnb {
__device__ __forceinline__ __half abs_(__half x) { return __habs(x); }
__device__ __forceinline__ __half exp_(__half x) { return __float2half(expf(__half2float(x))); }
__device__ __forceinline__ __half log_(__half x) { return __float2half(logf(__half2float(x))); }
__device__ __forceinline__ __half sqrt_(__half x) { return __float2half(sqrtf(__half2float(x))); }
__device__ __forceinline__ __half floor_(__half x) { return hfloor(x); }
__device__ __forceinline__ __half exp2_(__half x) { return __float2half(exp2f(__half2float(x))); }
__device__ __forceinline__ __half log2_(__half x) { return __float2half(log2f(__half2float(x))); }
__device__ __forceinline__ __half sin_(__half x) { return __float2half(sinf(__half2float(x))); }
__device__ __forceinline__ __half cos_(__half x) { return __float2half(cosf(__half2float(x))); }
__device__ __forceinline__ __half tanh_(__half x) { return __float2half(tanhf(__half2float(x))); }
__device__ __forceinline__ __half ceil_(__half x) { return __float2half(ceilf(__half2float(x))); }
__device__ __forceinline__ __half pow_(__half a, __half b) {
  return __float2half(powf(__half2float(a), __half2float(b)));
}
__device__ __forceinline__ __half floordiv_(__half a, __half b) {
  return __float2half(floordiv_float(__half2float(a), __half2float(b)));
}
__device__ __forceinline__ __half mod_(__half a, __half b) {
  return __float2half(mod_float(__half2float(a), __half2float(b)));
}
}  // namespace qnb
