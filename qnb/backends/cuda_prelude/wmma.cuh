namespace qnb {
template <int ROWS, int COLS>
__device__ __forceinline__ void matmul_f16_units(const __half* a, const __half* b, float* c,
                                                 int m, int n, int k, int splits, int warps) {
  using namespace nvcuda;
  const int warp = (int)(threadIdx.x / 32u);
  const int across = n / (16 * COLS), groups = (m / (16 * ROWS)) * across;
  const int length = k / 16 / splits;  // K steps per slice (splits divides them)
#pragma unroll 1
  for (int u = warp; u < groups * splits; u += warps) {
    const int g = u % groups, s = u / groups;
    const int row0 = g / across * ROWS * 16, col0 = g % across * COLS * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[ROWS];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[COLS];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc[ROWS][COLS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int j = 0; j < COLS; ++j) wmma::fill_fragment(fc[i][j], 0.0f);
#pragma unroll
    for (int q = 0; q < length; ++q) {
      const int kt = (s * length + q) * 16;
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
        wmma::load_matrix_sync(fa[i], a + (row0 + i * 16) * k + kt, k);
#pragma unroll
      for (int j = 0; j < COLS; ++j)
        wmma::load_matrix_sync(fb[j], b + kt * n + col0 + j * 16, n);
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int j = 0; j < COLS; ++j) wmma::mma_sync(fc[i][j], fa[i], fb[j], fc[i][j]);
    }
    float* slice = c + s * m * n;
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int j = 0; j < COLS; ++j)
        wmma::store_matrix_sync(slice + (row0 + i * 16) * n + col0 + j * 16, fc[i][j], n,
                                wmma::mem_row_major);
  }
}
__device__ __forceinline__ void matmul_f16(const __half* a, const __half* b, float* c, int m,
                                           int n, int k, int warps, int splits, int rows,
                                           int cols) {
  if (rows == 2 && cols == 2) matmul_f16_units<2, 2>(a, b, c, m, n, k, splits, warps);
  else if (rows == 2) matmul_f16_units<2, 1>(a, b, c, m, n, k, splits, warps);
  else if (cols == 2) matmul_f16_units<1, 2>(a, b, c, m, n, k, splits, warps);
  else matmul_f16_units<1, 1>(a, b, c, m, n, k, splits, warps);
}
}  // namespace qnb
