// Kernels the benchmark needs besides cubinrt's own: an empty kernel (the bare-launch ceiling),
// a streaming read (the read-only ceiling: what a kernel that only reads can reach) and a
// device-side fill of random, never-zero data (host-side generation of gigabytes is slow).
#include <cuda_fp16.h>
#include <stdint.h>

extern "C" __global__ void bench_empty() {}

// Keeps the GPU busy for `cycles` SM clocks, so that a launch timed after it is already queued
// when its start event fires: its time is then the device's alone, without the host's launch
// latency (the way FlashInfer's peer bench times "gpu us", with torch.cuda._sleep).
extern "C" __global__ void bench_spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

__device__ __forceinline__ uint32_t mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// 16-bit elements (bf16 or fp16 by `bf16`): uniform in [-1, 1), never zero.
extern "C" __global__ void bench_fill16(uint16_t* out, uint64_t n, uint64_t seed, int bf16) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t r = mix(seed * 0x9e3779b97f4a7c15ull + i);
    const float f = (static_cast<float>(r >> 8) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
    const uint32_t bits = __float_as_uint(f);
    out[i] = bf16 ? static_cast<uint16_t>(bits >> 16) : __half_as_ushort(__float2half(f));
  }
}

// FP8 bytes finite and below 4 in both encodings: sign, and a magnitude code under 0x44.
extern "C" __global__ void bench_fill8(uint8_t* out, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t r = mix(seed * 0x9e3779b97f4a7c15ull + i);
    out[i] = static_cast<uint8_t>((r & 0x80) | (1 + (r >> 8) % 0x43));
  }
}

// Reads n 16-byte words once, four loads in flight per thread; the XOR of what it read goes to
// sink (one word per thread) so that no load can be dropped.
extern "C" __global__ void bench_read(const uint4* in, uint64_t n, uint32_t* sink) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 x[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = __ldcs(in + i + k * stride);
#pragma unroll
    for (int k = 0; k < 4; ++k) acc ^= x[k].x ^ x[k].y ^ x[k].z ^ x[k].w;
  }
  for (; i < n; i += stride) { const uint4 x = __ldcs(in + i); acc ^= x.x ^ x.y ^ x.z ^ x.w; }
  sink[blockIdx.x * uint64_t(blockDim.x) + threadIdx.x] = acc;
}
