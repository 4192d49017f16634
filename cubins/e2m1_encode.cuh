// The e2m1 (NVFP4 element) code of a float, in integer and float operations that run at full rate
// and without branches, compiled both for the kv_append kernel and for the host test that holds it
// to the reference encoder (common/encodings.cpp) over every threshold and its neighbours.
//
// Why not a float-to-integer conversion: F2I runs at a quarter of the FP32 rate on sm_80..sm_90,
// and the two-range form (rint(2m) below 2, rint(m) + 2 from 2 to 4) compiled to a divergent branch
// an element: kv_append's NVFP4 writer was bound by it (docs/benchmarks.md, kv_append).
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define CUBINRT_E2M1_FN __host__ __device__ __forceinline__
#else
#include <math.h>

#include <cstring>
#define CUBINRT_E2M1_FN inline
#endif

namespace cubinrt_e2m1 {

CUBINRT_E2M1_FN uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

// The code of |y| (0..7 for 0, 0.5, 1, 1.5, 2, 3, 4, 6): round to nearest, ties to the even code;
// magnitudes past 6 (infinity too) saturate at 6; NaN is 0.
CUBINRT_E2M1_FN uint32_t magnitude(float y) {
  // max(|y|, 0) is |y|, and 0 for NaN: the device's max returns the operand that is a number. The
  // host's quiets a signaling NaN instead (IEEE 754 maxNum), so the host build tests for NaN (the
  // kernel encodes products, never signaling NaNs).
#if defined(__CUDA_ARCH__)
  const float m = fmaxf(fabsf(y), 0.f);
#else
  const float m = isnan(y) ? 0.f : fabsf(y);
#endif
  const uint32_t a = bits_of(m);
  // From 1 up the codes are the float itself rounded to one mantissa bit: add half an ulp of that
  // bit less one, plus the bit (ties to even), and read exponent and bit as 2 (e - 126) + bit.
  // 2.0 is then 256 - 252 = 4; 8.0 and above (rounded up from past 6) saturate at 7.
  const uint32_t rounded = a + 0x1fffffu + ((a >> 22) & 1u);
  const uint32_t normal = (rounded >> 22) - 252u;
  // Below 1 the codes step by 0.5: rint(2m) in {0, 1, 2}, rounded by the add to 1.5 * 2^23, whose
  // ulp is 1 (2m is exact, so the add rounds once, ties to even).
  const uint32_t below_one = bits_of(2.f * m + 12582912.f) & 3u;
  return a >= 0x3f800000u ? (normal < 7u ? normal : 7u) : below_one;
}

// The e2m1 code of y: its magnitude's, with y's sign as bit 3 (NaN: 0 with its sign bit).
CUBINRT_E2M1_FN uint32_t code(float y) { return magnitude(y) | ((bits_of(y) >> 28) & 8u); }

}  // namespace cubinrt_e2m1

#undef CUBINRT_E2M1_FN
