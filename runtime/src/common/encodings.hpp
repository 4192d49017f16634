// Element encodings on the host: what a code is worth, and how a float becomes a 16-bit code.
// Families' references and known answers share these (the truth their kernels are held to).
#pragma once

#include <cstdint>

#include "cubinrt/types.hpp"

namespace cubinrt {

// The exact value of an encoded element (16-bit: bits; FP8: the low byte). NaN for NaN codes and
// for encodings that are not one element a code (nvfp4, uint8).
double element_value(Dtype dtype, uint16_t bits);
// Round-to-nearest-even encoding of a float as fp16 or bf16.
uint16_t encode_float16(Dtype dtype, float value);
// Round-to-nearest-even encoding as FP8 (e4m3 or e5m2), saturated to the largest finite value, as
// CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does; the sign kept on zero; NaN to NaN.
uint8_t encode_fp8(Dtype dtype, float value);
// E2M1 (one NVFP4 element, 4 bits: sign in bit 3, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6): nearest,
// ties to the even code, saturated at 6, the sign bit copied from the float's (NaN: a zero).
uint8_t encode_e2m1(float value);
double e2m1_value(uint8_t code);

}  // namespace cubinrt
