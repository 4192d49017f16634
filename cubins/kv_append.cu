// kv_append: new K and V tokens written into a paged cache (kv_append_abi.h), in the cache's
// dtype: copied as they are (the input's 16-bit dtype), FP8 (x / scale, rounded to nearest and
// saturated, as vLLM's cache writer does), or NVFP4 (for each 16 elements an e4m3 scale
// amax / (6 * global scale), then each element times 1 / (scale * global scale) rounded to the
// nearest e2m1, ties to even, saturated at 6; two codes a byte, the even element in the low
// nibble). The arithmetic is float32 with explicitly rounded operations, so the host reference
// (runtime/src/families/kv_append/reference.cpp) reproduces every byte. Negative slots (padding
// tokens) and slots past the cache are skipped. NVFP4's V scales go in the order the cache
// declares (v_sf_order: linear, or interleaved by 4 tokens); K's are linear.
//
// Variant macros (the catalog's axes): CUBINRT_IN_DTYPE (fp16 or bf16), CUBINRT_CACHE_DTYPE
// (the input's dtype, fp8_e4m3, fp8_e5m2 or nvfp4), CUBINRT_KERNEL, CUBINRT_VARIANT_KEY.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include <type_traits>

#include "cubinrt/dtypes.h"
#include "e2m1_encode.cuh"
#include "grid_dependency.cuh"
#include "kv_append_abi.h"

#ifndef CUBINRT_VARIANT_NS
#define CUBINRT_VARIANT_NS cubinrt_kv_append_single
#endif

namespace CUBINRT_VARIANT_NS {

constexpr int kIn = CUBINRT_IN_DTYPE;
constexpr int kCache = CUBINRT_CACHE_DTYPE;
static_assert(CUBINRT_DTYPE_IS_FLOAT16(kIn), "kv_append takes fp16 or bf16 tokens");
static_assert(kCache == kIn || CUBINRT_DTYPE_IS_FP8(kCache) || kCache == CUBINRT_DTYPE_NVFP4,
              "the cache is the input's dtype, an FP8 encoding or NVFP4");
using In = typename std::conditional<kIn == CUBINRT_DTYPE_BF16, __nv_bfloat16, __half>::type;
constexpr int kChunk = CUBINRT_KV_APPEND_CHUNK;

// 32 bytes of input tokens (read only during the launch), as non-coherent loads in inline PTX.
// What keeps a quantizing writer's loads ahead of the slot's test is encoding before it (Chunk);
// ptxas sinks these loads below the test all the same where nothing uses them first. For the
// copying writer, plain loads here compiled to 464 sm_90 instructions against these 328 (the
// kernel as it was before the encoder moved).
__device__ __forceinline__ void load_chunk(const In* p, uint4 (&r)[2]) {
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r[0].x), "=r"(r[0].y), "=r"(r[0].z), "=r"(r[0].w) : "l"(p));
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r[1].x), "=r"(r[1].y), "=r"(r[1].z), "=r"(r[1].w) : "l"(p + 8));
}

__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// One 16-element chunk of K or V in the cache's dtype: its first 32, 16 or 8 bytes (16-bit, FP8,
// NVFP4) and, NVFP4, its block scale. Encoding does not depend on the slot, so the kernel encodes
// before it tests the slot: the token loads then stay ahead of the slot's global round trip
// instead of being sunk below its test.
struct Chunk {
  uint4 lo, hi;
  uint8_t sf;
};

// prmt.b32 in its generic mode: a selector nibble with bit 3 set replicates the chosen byte's sign
// bit over the byte (what CUDA's __byte_perm leaves unsaid).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// The sign bits of 8 consecutive 16-bit elements (element 2k in word k's low half) at
// bits 3, 7, .., 31: an NVFP4 word's sign bits. The permutes take each element's high byte, the
// even elements' as 0x00 or 0xff (the byte's sign replicated), so that one mask leaves bit 3.
__device__ __forceinline__ uint32_t signs8(const uint4& w) {
  const uint32_t lo = prmt(w.x, w.y, 0x7531), hi = prmt(w.z, w.w, 0x7531);  // high bytes: e0 e1 e2 e3, e4 e5 e6 e7
  const uint32_t even = prmt(lo, hi, 0xeca8) & 0x08080808u;                     // e0 e2 e4 e6 as 0x00 or 0xff, bit 3 kept
  const uint32_t odd = prmt(lo, hi, 0x7531) & 0x80808080u;                      // e1 e3 e5 e7, their sign bits at bit 7
  return even | odd;
}

__device__ __forceinline__ Chunk encode_chunk(const uint4 (&raw)[2], float scale) {
  Chunk out{raw[0], raw[1], 0};
  if constexpr (kCache != kIn) {
    float x[kChunk];
    const In* e = reinterpret_cast<const In*>(raw);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) x[i] = to_float(e[i]);
    if constexpr (CUBINRT_DTYPE_IS_FP8(kCache)) {
      constexpr __nv_fp8_interpretation_t kind = kCache == CUBINRT_DTYPE_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
      uint32_t w[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(x[4 * q], scale), __fdiv_rn(x[4 * q + 1], scale)), __NV_SATFINITE, kind);
        const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(__fdiv_rn(x[4 * q + 2], scale), __fdiv_rn(x[4 * q + 3], scale)), __NV_SATFINITE, kind);
        w[q] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
      }
      out.lo = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      float amax = 0.f;
#pragma unroll
      for (int i = 0; i < kChunk; ++i) amax = fmaxf(amax, fabsf(x[i]));
      const __nv_fp8_storage_t code = __nv_cvt_float_to_fp8(__fdiv_rn(amax, __fmul_rn(6.f, scale)), __NV_SATFINITE, __NV_E4M3);
      const float sf_value = __half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3)));
      // One correctly rounded reciprocal a block, then products (as FlashInfer and vLLM write it:
      // x * 1 / (scale * global)), 16 divisions fewer. A zero scale writes zero codes (selected,
      // not branched around: the codes of x * inf are computed and dropped).
      const float denom = __fmul_rn(sf_value, scale);
      const float inv = __frcp_rn(denom);
      // Magnitudes a nibble each, added into place; the signs are the inputs' (the scale is
      // positive), gathered 8 at a time by byte permutes: 2 instructions an element fewer.
      uint32_t w[2] = {0, 0};
#pragma unroll
      for (int i = 0; i < kChunk; ++i) w[i / 8] += cubinrt_e2m1::magnitude(__fmul_rn(x[i], inv)) << (4 * (i % 8));
      out.lo.x = denom != 0.f ? w[0] | signs8(raw[0]) : 0u;
      out.lo.y = denom != 0.f ? w[1] | signs8(raw[1]) : 0u;
      out.sf = code;
    }
  }
  return out;
}

// A chunk stored at storage element `at` of its row (and, NVFP4, its block scale at byte `sf_at`).
__device__ __forceinline__ void store_chunk(const Chunk& c, void* cache, uint8_t* sf, int64_t at, int64_t sf_at) {
  if constexpr (kCache == kIn) {
    uint4* dst = reinterpret_cast<uint4*>(static_cast<In*>(cache) + at);
    dst[0] = c.lo;
    dst[1] = c.hi;
  } else if constexpr (CUBINRT_DTYPE_IS_FP8(kCache)) {
    *reinterpret_cast<uint4*>(static_cast<uint8_t*>(cache) + at) = c.lo;
  } else {
    *reinterpret_cast<uint2*>(static_cast<uint8_t*>(cache) + at) = make_uint2(c.lo.x, c.lo.y);
    sf[sf_at] = c.sf;
  }
}

// Division by a launch constant: a shift where it is a power of two (head_dim / 16 always is in
// the catalog, and so are the usual kv head counts), the hardware's sequence (some twenty
// instructions) otherwise. The test is the same for every thread.
struct Divisor {
  uint32_t d;
  int shift;  // log2(d), or -1
};
__device__ __forceinline__ Divisor divisor(uint32_t d) { return {d, (d & (d - 1)) == 0 ? __ffs(d) - 1 : -1}; }
// n / d and n % d, the remainder from the quotient.
struct QuotRem {
  uint32_t q, r;
};
__device__ __forceinline__ QuotRem divmod(uint32_t n, Divisor v) {
  const uint32_t q = v.shift >= 0 ? n >> v.shift : n / v.d;
  return {q, n - q * v.d};
}

#define CUBINRT_CAT2_(a, b) a##b
#define CUBINRT_CAT_(a, b) CUBINRT_CAT2_(a, b)
// The key this kernel is (the reader checks it against the manifest); the unit source defines it.
extern "C" __device__ const char CUBINRT_CAT_(cubinrt_key_, CUBINRT_KERNEL)[] = CUBINRT_VARIANT_KEY;
// It waits for the kernel before it on the stream ahead of any global access (grid_dependency.cuh).
CUBINRT_STATE_GRID_DEPENDENCY(CUBINRT_KERNEL)
#define CUBINRT_PARAM_DECL_(type, name) , type name
#define CUBINRT_DROP_FIRST_(first, ...) __VA_ARGS__
#define CUBINRT_LIST_(...) CUBINRT_DROP_FIRST_(__VA_ARGS__)
// Resident blocks a multiprocessor to fit registers for: none asked (the sm_90 NVFP4 writer takes
// 55 registers, 4 blocks of 256), or an experiment's.
#ifdef CUBINRT_KV_APPEND_MIN_BLOCKS
#define CUBINRT_KV_APPEND_BOUNDS_ CUBINRT_KV_APPEND_THREADS, CUBINRT_KV_APPEND_MIN_BLOCKS
#else
#define CUBINRT_KV_APPEND_BOUNDS_ CUBINRT_KV_APPEND_THREADS
#endif
extern "C" __global__ void __launch_bounds__(CUBINRT_KV_APPEND_BOUNDS_)
CUBINRT_KERNEL(CUBINRT_LIST_(0 CUBINRT_KV_APPEND_V2_FIELDS(CUBINRT_PARAM_DECL_))) {
  // Index arithmetic in 32 bits (the launch keeps every chunk index below 2^31: kv_append_abi.h),
  // and a slot's page and offset too while the cache's slots fit 32 bits: 64-bit division costs
  // more than this kernel's arithmetic. A quantizing thread takes a chunk of K and the same chunk
  // of V (one index computation, four loads in flight, issued before the slot is known); a
  // copying one takes one chunk (more threads in flight: runs 62-63).
  constexpr uint32_t kSides = kCache == kIn ? 2 : 1;  // work items a row holds per chunk
  const Divisor chunks_per_row = divisor(static_cast<uint32_t>(head_dim) / kChunk), heads = divisor(static_cast<uint32_t>(num_kv_heads));
  const Divisor page_div = divisor(static_cast<uint32_t>(page_size));
  const uint32_t rows = static_cast<uint32_t>(num_tokens) * heads.d, items = kSides * rows * chunks_per_row.d;
  const bool small_cache = num_slots <= 0xffffffffll;
  // The tokens, the slots and the cache may all be the previous kernel's output (grid_dependency.cuh).
  cubinrt_wait_for_prior_grids();
  for (uint32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < items; c += gridDim.x * blockDim.x) {
    const auto [side_row, j] = divmod(c, chunks_per_row);
    const bool only_v = kSides == 2 && side_row >= rows;  // copying: items of V follow those of K
    const uint32_t row = only_v ? side_row - rows : side_row;
    const auto [token, head] = divmod(row, heads);
    const int64_t slot = slots[token];
    const In* ks = static_cast<const In*>(k_in) + int64_t{token} * k_in_stride_token + int64_t{head} * k_in_stride_head + int64_t{j} * kChunk;
    const In* vs = static_cast<const In*>(v_in) + int64_t{token} * v_in_stride_token + int64_t{head} * v_in_stride_head + int64_t{j} * kChunk;
    const bool has_k = kSides == 1 || !only_v, has_v = kSides == 1 || only_v;
    uint4 kr[2], vr[2];
    if (has_k) load_chunk(ks, kr);
    if (has_v) load_chunk(vs, vr);
    Chunk ke, ve;
    if (has_k) ke = encode_chunk(kr, k_scale);
    if (has_v) ve = encode_chunk(vr, v_scale);
    if (slot < 0 || slot >= num_slots) continue;  // padding, or past the cache
    const QuotRem small = divmod(static_cast<uint32_t>(slot), page_div);
    const int64_t page = small_cache ? small.q : slot / page_size;
    const int64_t offset = small_cache ? small.r : slot % page_size;
    // Storage elements of the row (NVFP4: bytes holding two codes each), and the chunk within it.
    const int64_t at = page * cache_stride_page + offset * cache_stride_token + int64_t{head} * cache_stride_head +
                       int64_t{j} * (kCache == CUBINRT_DTYPE_NVFP4 ? kChunk / 2 : kChunk);
    const int64_t sf_at = page * sf_stride_page + offset * sf_stride_token + int64_t{head} * sf_stride_head + j;
    // V's scales interleaved by 4 tokens (TensorRT-LLM's SM100 order, docs/formats.md): the rows of
    // the slot's quad, read as one array, hold block j of token `offset` at byte 4 j + offset % 4.
    int64_t v_sf_at = sf_at;
    if (kCache == CUBINRT_DTYPE_NVFP4 && v_sf_order == CUBINRT_SCALE_ORDER_INTERLEAVED4) {
      const QuotRem k = divmod(4 * j + static_cast<uint32_t>(offset) % 4, chunks_per_row);
      v_sf_at = page * sf_stride_page + (offset - offset % 4 + k.q) * sf_stride_token + int64_t{head} * sf_stride_head + k.r;
    }
    if (has_k) store_chunk(ke, k_cache, k_sf, at, sf_at);
    if (has_v) store_chunk(ve, v_cache, v_sf, at, v_sf_at);
  }
  // The next kernel (the decode that reads these pages) may be scheduled once every thread is done
  // here, not before: launched early, its blocks would crowd onto the multiprocessors this grid
  // left first (see paged_decode.cu). It waits for this grid's writes before it reads.
  cubinrt_allow_dependent_grids();
}
#undef CUBINRT_KV_APPEND_BOUNDS_
#undef CUBINRT_PARAM_DECL_
#undef CUBINRT_DROP_FIRST_
#undef CUBINRT_LIST_
#undef CUBINRT_CAT2_
#undef CUBINRT_CAT_

}  // namespace CUBINRT_VARIANT_NS
