// Kernels of every kind a real library ships, for the cubin and fatbin readers: C++ names
// (mangled), anonymous-namespace and static kernels (LOCAL symbols), a template instance, and a
// parameter block past 4 KiB (CUDA 12.1+, described by KPARAM_INFO_V2 records). Built as cubins,
// relocatable device code (-rdc), LTO IR (-dlto) and PTX (tests/CMakeLists.txt).
#include <stdint.h>

struct Big {
  int v[2000];  // 8000 bytes
};
struct alignas(16) Vec4 {
  float x[4];
};

// Parameters at offsets 0 (1 byte), 4 (8000), 8008 (8), 8016 (16), 8032 (2), 8040 (8): 8048 bytes.
__global__ void large_params(char c, Big b, double d, Vec4 v, short s, float* out) {
  out[threadIdx.x] = static_cast<float>(b.v[threadIdx.x] + c + d + v.x[1] + s);
}

namespace {
__global__ void anonymous_kernel(int* out) { out[threadIdx.x] = 1; }
}  // namespace

static __global__ void static_kernel(int* out) { out[threadIdx.x] = 2; }

template <int N>
__global__ void template_kernel(int* out) { out[threadIdx.x] = N; }

// Host code that launches the internal kernels, so that they are emitted.
void launch_all(int* out) {
  anonymous_kernel<<<1, 32>>>(out);
  static_kernel<<<1, 32>>>(out);
  template_kernel<3><<<1, 32>>>(out);
}
