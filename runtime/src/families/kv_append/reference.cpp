#include "families/kv_append/reference.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/encodings.hpp"
#include "common/kv_strides.hpp"

namespace cubinrt::kv_append {

namespace {

constexpr int kChunk = 16;

int storage_bytes(Dtype cache) { return cache == Dtype::bf16 || cache == Dtype::fp16 ? 2 : 1; }
// Storage elements of one row (a token's head): NVFP4 packs two elements a byte.
int64_t row_elements(const Problem& p) { return p.cache_dtype == Dtype::nvfp4 ? p.head_dim / 2 : p.head_dim; }

int64_t span(const KvStrides& s, int64_t pages, int64_t page_size, int64_t heads, int64_t row) {
  return (pages - 1) * s.page + (page_size - 1) * s.token + (heads - 1) * s.head + row;
}

}  // namespace

size_t cache_bytes(const Problem& p) {
  return static_cast<size_t>(span(p.cache_strides, p.num_pages, p.page_size, p.num_kv_heads, row_elements(p))) * storage_bytes(p.cache_dtype);
}
size_t sf_bytes(const Problem& p) {
  return p.cache_dtype == Dtype::nvfp4 ? static_cast<size_t>(span(p.sf_strides, p.num_pages, p.page_size, p.num_kv_heads, p.head_dim / kChunk)) : 0;
}

void append(const Problem& p, HostCache& cache) {
  const int H = p.num_kv_heads, D = p.head_dim;
  const int64_t num_slots = p.num_pages * p.page_size;
  for (int t = 0; t < p.num_tokens(); ++t) {
    const int64_t slot = p.slots[t];
    if (slot < 0 || slot >= num_slots) continue;
    const int64_t page = slot / p.page_size, offset = slot % p.page_size;
    for (int side = 0; side < 2; ++side) {
      const std::vector<uint16_t>& in = side ? p.v_in : p.k_in;
      std::vector<uint8_t>& out = side ? cache.v : cache.k;
      const float scale = side ? p.v_scale : p.k_scale;
      for (int h = 0; h < H; ++h) {
        const uint16_t* x = in.data() + (int64_t{t} * H + h) * D;
        const int64_t at = page * p.cache_strides.page + offset * p.cache_strides.token + h * p.cache_strides.head;  // storage elements
        for (int j = 0; j < D / kChunk; ++j) {
          const uint16_t* e = x + j * kChunk;
          if (p.cache_dtype == p.in_dtype) {
            for (int i = 0; i < kChunk; ++i) {
              out[(at + j * kChunk + i) * 2] = static_cast<uint8_t>(e[i] & 0xff);
              out[(at + j * kChunk + i) * 2 + 1] = static_cast<uint8_t>(e[i] >> 8);
            }
          } else if (p.cache_dtype == Dtype::fp8_e4m3 || p.cache_dtype == Dtype::fp8_e5m2) {
            for (int i = 0; i < kChunk; ++i)
              out[at + j * kChunk + i] = encode_fp8(p.cache_dtype, static_cast<float>(element_value(p.in_dtype, e[i])) / scale);
          } else {  // nvfp4: the kernel's float32 steps, in its order
            float x32[kChunk], amax = 0.f;
            for (int i = 0; i < kChunk; ++i) amax = std::max(amax, std::fabs(x32[i] = static_cast<float>(element_value(p.in_dtype, e[i]))));
            const uint8_t sf = encode_fp8(Dtype::fp8_e4m3, amax / (6.f * scale));
            const float denom = static_cast<float>(element_value(Dtype::fp8_e4m3, sf)) * scale;
            const float inv = denom != 0.f ? 1.f / denom : 0.f;  // the kernel's __frcp_rn: correctly rounded
            for (int i = 0; i < kChunk; i += 2) {
              const uint8_t lo = denom != 0.f ? encode_e2m1(x32[i] * inv) : 0, hi = denom != 0.f ? encode_e2m1(x32[i + 1] * inv) : 0;
              out[at + j * (kChunk / 2) + i / 2] = static_cast<uint8_t>(lo | (hi << 4));
            }
            const ScalePlace at_sf = scale_place(side ? p.v_sf_order : ScaleOrder::linear, offset, j, D / kChunk);
            (side ? cache.v_sf : cache.k_sf)[page * p.sf_strides.page + at_sf.row * p.sf_strides.token + h * p.sf_strides.head + at_sf.col] = sf;
          }
        }
      }
    }
  }
}

Problem make_problem(Dtype in_dtype, Dtype cache_dtype, int tokens, uint64_t seed) {
  Problem p;
  p.in_dtype = in_dtype;
  p.cache_dtype = cache_dtype;
  p.num_kv_heads = 2;
  p.head_dim = 128;
  p.page_size = 16;
  p.num_pages = (tokens + 2 + p.page_size - 1) / p.page_size + 1;
  // NHD, with a page stride that leaves a gap (a view of a larger cache).
  const int64_t row = row_elements(p);
  p.cache_strides = {int64_t{p.page_size} * p.num_kv_heads * row + 64, p.num_kv_heads * row, row};
  p.sf_strides = {int64_t{p.page_size} * p.num_kv_heads * (p.head_dim / kChunk), p.num_kv_heads * (p.head_dim / kChunk), p.head_dim / kChunk};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-4.f, 4.f);
  std::vector<int64_t> slots(static_cast<size_t>(p.num_pages * p.page_size));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(tokens);
  slots[1] = -1;                                   // a padding token
  slots[2] = p.num_pages * p.page_size;            // past the cache
  p.slots = slots;
  const size_t n = size_t{static_cast<size_t>(tokens)} * p.num_kv_heads * p.head_dim;
  p.k_in.resize(n);
  p.v_in.resize(n);
  // Token 5's first block: NVFP4's rounding ties. Its maximum 6 * 0.25 makes the block scale
  // exactly 0.5 at a global scale of 0.5, so each element lands on a tie between two codes.
  static constexpr float kTies[kChunk] = {6, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5, 0.1f};
  for (size_t i = 0; i < n; ++i) {
    // Token 3's first block all zero (an NVFP4 scale of 0); token 4's first head 300 times larger
    // (past FP8 e4m3's 448 at the scales below: saturated).
    const size_t token = i / (p.num_kv_heads * p.head_dim), within = i % (p.num_kv_heads * p.head_dim);
    const float gain = token == 4 && within < size_t(p.head_dim) ? 300.f : 1.f;
    const bool zero = token == 3 && within < kChunk, ties = token == 5 && within < kChunk;
    const float k = ties ? 0.25f * kTies[within] : zero ? 0.f : gain * unit(rng), v = ties ? 0.25f * kTies[within] : zero ? 0.f : gain * unit(rng);
    p.k_in[i] = encode_float16(in_dtype, k);
    p.v_in[i] = encode_float16(in_dtype, v);
  }
  // FP8: stored = x / scale. NVFP4: the global scale 0.5 keeps every block scale (at most
  // 1200 / 3) within e4m3's 448, and token 5's ties exact.
  if (cache_dtype == Dtype::nvfp4) {
    p.k_scale = p.v_scale = 0.5f;
  } else {
    p.k_scale = 0.5f;
    p.v_scale = 0.25f;
  }
  return p;
}

}  // namespace cubinrt::kv_append
