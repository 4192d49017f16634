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

}  // namespace cubinrt
