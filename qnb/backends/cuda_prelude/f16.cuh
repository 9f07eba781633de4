namespace qnb {
__device__ __forceinline__ __half abs_(__half x) { return __habs(x); }
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
