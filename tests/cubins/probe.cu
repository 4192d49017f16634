// Test kernels with every feature the cubin reader reports: odd parameter types and a struct by
// value, launch bounds, a required block size, static and dynamic shared memory, local memory,
// and (sm_90+) a cluster. The tests compare the reader against ptxas -v for each arch built.
#include <stdint.h>

struct Mixed {
  int i;
  float f;
  double d;
  char c;
};
struct Big {
  int v[33];
};

// probe_params states the dynamic shared memory its launches pass (cubinrt's convention);
// probe_local states none, as a zero (which lands in NOBITS .nv.global).
extern "C" __device__ const uint32_t cubinrt_dynamic_smem_probe_params = 70000;
extern "C" __device__ const uint32_t cubinrt_dynamic_smem_probe_local = 0;
// probe_params also states that it waits for the previous kernel (cubins/grid_dependency.cuh);
// probe_local states nothing.
extern "C" __device__ const uint32_t cubinrt_grid_dependency_probe_params = 1;

extern "C" __global__ void __launch_bounds__(256, 2)
probe_params(const float* a, float* b, int n, float s, Mixed m, char c, short h, double d, Big big) {
  __shared__ float tile[1024];
  extern __shared__ float dyn[];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = a[i % n] * s + m.f + static_cast<float>(m.d) + m.c + c + h + static_cast<float>(d) + big.v[i % 33];
  __syncthreads();
  dyn[threadIdx.x] = tile[(threadIdx.x + 1) % blockDim.x];
  __syncthreads();
  b[i] = dyn[(threadIdx.x + 3) % blockDim.x] + static_cast<float>(m.i);
}

// Local memory: an array indexed at run time stays in the stack frame.
extern "C" __global__ void __launch_bounds__(128) probe_local(float* out, int k) {
  float scratch[64];
  for (int i = 0; i < 64; ++i) scratch[i] = out[i] * static_cast<float>(i + k);
  out[threadIdx.x] = scratch[(threadIdx.x * 7 + k) & 63];
}

#if __CUDA_ARCH__ >= 900 || !defined(__CUDA_ARCH__)
extern "C" __global__ void __cluster_dims__(2, 1, 1) probe_cluster(int* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<int>(blockIdx.x);
}
#endif
