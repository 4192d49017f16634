// Exact values of element encodings and round-to-nearest-even 16-bit encoding, on the host.
#include <bit>
#include <cmath>

#include "common/encodings.hpp"

namespace cubinrt {

namespace {

double fp8(uint8_t b, int exp_bits, int man_bits, int bias, bool e4m3) {
  const int sign = b >> 7;
  const int e = (b >> man_bits) & ((1 << exp_bits) - 1);
  const int m = b & ((1 << man_bits) - 1);
  if (e4m3 && e == 15 && m == 7) return NAN;
  if (!e4m3 && e == 31) return m == 0 ? (sign ? -INFINITY : INFINITY) : NAN;
  const double mag = e == 0 ? std::ldexp(m, 1 - bias - man_bits) : std::ldexp((1 << man_bits) + m, e - bias - man_bits);
  return sign ? -mag : mag;
}

}  // namespace

double element_value(Dtype d, uint16_t bits) {
  switch (d) {
    case Dtype::bf16: {
      const uint32_t w = uint32_t{bits} << 16;
      return std::bit_cast<float>(w);
    }
    case Dtype::fp16: {
      const int sign = bits >> 15, e = (bits >> 10) & 31, m = bits & 1023;
      if (e == 31) return m ? NAN : (sign ? -INFINITY : INFINITY);
      const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
      return sign ? -mag : mag;
    }
    case Dtype::fp8_e4m3: return fp8(static_cast<uint8_t>(bits), 4, 3, 7, true);
    case Dtype::fp8_e5m2: return fp8(static_cast<uint8_t>(bits), 5, 2, 15, false);
    default: return NAN;
  }
}

uint16_t encode_float16(Dtype d, float value) {
  if (d == Dtype::bf16) {
    const uint32_t w = std::bit_cast<uint32_t>(value);
    if (std::isnan(value)) return 0x7fc0;
    return static_cast<uint16_t>((w + 0x7fff + ((w >> 16) & 1)) >> 16);
  }
  // fp16, rounding half to even (nearbyint in the default rounding mode).
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return 0x7e00;
  if (std::isinf(value)) return sign | 0x7c00;
  const double a = std::fabs(static_cast<double>(value));
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::nearbyint(a / std::ldexp(1.0, -24)));  // 1024 = min normal
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): unbiased exponent e - 1
  int ue = e - 1;
  int mant = static_cast<int>(std::nearbyint(a / std::ldexp(1.0, ue - 10)));  // 1024..2048
  if (mant == 2048) mant = 1024, ++ue;
  if (ue + 15 >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(((ue + 15) << 10) | (mant - 1024));
}

uint8_t encode_fp8(Dtype d, float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return d == Dtype::fp8_e4m3 ? 0x7f : 0x7f;
  // The finite magnitudes are codes 0 up to the largest finite one, in increasing order: the
  // nearest by value, a tie to the even code, anything past the largest saturated to it.
  const uint8_t top = d == Dtype::fp8_e4m3 ? 0x7e : 0x7b;
  // Magnitudes are clamped at 1e6, past the largest finite code of both encodings, where all
  // saturate to it anyway (infinity too, as the kernels' satfinite conversions): above that the
  // distances in double would lose their units and tie.
  const double a = std::fmin(std::fabs(static_cast<double>(value)), 1e6);
  // Magnitudes grow with the code, so the nearest is the last code not above a or the one after
  // it (a binary search: the references encode millions of values in the GPU tests).
  uint8_t lo = 0, hi = top;
  while (lo < hi) {
    const uint8_t mid = static_cast<uint8_t>((lo + hi + 1) / 2);
    if (element_value(d, mid) <= a) lo = mid;
    else hi = static_cast<uint8_t>(mid - 1);
  }
  uint8_t best = lo;
  if (lo < top) {
    const double below = a - element_value(d, lo), above = element_value(d, static_cast<uint8_t>(lo + 1)) - a;
    if (above < below || (above == below && ((lo + 1) & 1) == 0)) best = static_cast<uint8_t>(lo + 1);
  }
  return sign | best;
}

double e2m1_value(uint8_t code) {
  static constexpr double kMagnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (code & 8 ? -1 : 1) * kMagnitude[code & 7];
}

uint8_t encode_e2m1(float value) {
  // Clamped at 8, past 6, where every larger magnitude (infinity too) saturates: far above it the
  // distances in double would lose their units and tie.
  const double a = std::isnan(value) ? 0 : std::fmin(std::fabs(static_cast<double>(value)), 8.0);
  uint8_t best = 0;
  for (uint8_t c = 0; c < 8; ++c) {
    const double dc = std::fabs(e2m1_value(c) - a), db = std::fabs(e2m1_value(best) - a);
    if (dc < db || (dc == db && (c & 1) == 0 && (best & 1) != 0)) best = c;
  }
  return static_cast<uint8_t>(best | (std::signbit(value) ? 8 : 0));
}

}  // namespace cubinrt
