/*
 * Kernels of ucx_pxn_stage_bench (not part of the module): a tiled FP32
 * matrix multiply standing for the application's compute while pxn stages.
 * Loaded through the driver API like pxn_gather.cu: keep the signature in
 * sync with ucx_pxn_stage_bench.cc. n must be a multiple of kTile.
 */
constexpr unsigned kTile = 32;

extern "C" __global__ void pxn_bench_matmul(const float *a, const float *b,
                                            float *c, unsigned n)
{
    __shared__ float ta[kTile][kTile];
    __shared__ float tb[kTile][kTile];
    const unsigned row = blockIdx.y * kTile + threadIdx.y;
    const unsigned col = blockIdx.x * kTile + threadIdx.x;
    float acc          = 0.0f;

    for (unsigned k0 = 0; k0 < n; k0 += kTile) {
        ta[threadIdx.y][threadIdx.x] = a[size_t(row) * n + k0 + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[size_t(k0 + threadIdx.y) * n + col];
        __syncthreads();
        for (unsigned k = 0; k < kTile; ++k) {
            acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        }
        __syncthreads();
    }
    c[size_t(row) * n + col] = acc;
}
