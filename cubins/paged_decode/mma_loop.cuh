// The tensor-core main loop (head_dim <= 256): q.K and P.V as warp-level mma.sync, with K and V
// loaded from global memory straight into the mma operand registers (docs/kernels.md).
//
// Per warp step of kStep tokens:
//   S[heads x tokens] = Q[16 x D] . K^T        m16n8k16, A = q (rows 0..3 are the chunk's heads,
//                                              the rest zero), B = K rows, one 8-token n-tile each
//   O^T[D x heads]   += V^T[D x tokens] . P^T  m16n8k16 (m16n8k8 for 8-token steps), A = V,
//                                              B = the softmax weights, taken as they come out of
//                                              the first mma (its C layout is the B layout here)
// A dot product does not care in which order its terms come, so each lane loads 16 contiguous
// bytes of a K or V row and the q fragment (and the output) use the same permutation of dims:
// no shared memory, no ldmatrix, and loads that cover whole 32-byte sectors.
#pragma once
#include "common.cuh"

namespace paged_decode::mma {

// The mma operand type: FP8 KV is widened to half (exact, one cvt per pair); 16-bit KV (which is
// in q's dtype) is used as stored.
constexpr bool kBf16 = !kKvIsFp8 && kQDtype == 2;

constexpr int kKTiles = kHeadDim / 16;              // k-tiles of q.K = dim tiles of P.V
constexpr int kKElems = 16 / kKvBytes;              // elements per 16-byte K load
constexpr int kKLoads = kHeadDim / 4 / kKElems;     // a lane holds head_dim/4 dims of a K row
constexpr int kVLoadBytes = kHeadDim / 8 * kKvBytes < 16 ? kHeadDim / 8 * kKvBytes : 16;
constexpr int kVElems = kVLoadBytes / kKvBytes;     // elements per V load
constexpr int kVLoads = kHeadDim / 8 / kVElems;     // a lane holds head_dim/8 dims of a V row
using KRaw = uint4;
using VRaw = typename std::conditional<kVLoadBytes == 16, uint4, uint2>::type;

#ifndef CUBINRT_MMA_PREFETCH  // experiments only: 1 loads step k + 1 before step k's math
#define CUBINRT_MMA_PREFETCH 0
#endif

// 8-token n-tiles per warp step, and resident blocks per SM asked of ptxas, per variant, as
// measured on the H200 (docs/benchmarks.md, run 9): bytes in flight against occupancy.
//   16-bit KV: D128 2 tiles (8 KB of K+V a warp step) at 4 blocks (128 registers): 504 us against
//              560 us uncapped; D256 4 tiles (32 KB, 255 registers): 1076 us against 1206 us at 1.
//   FP8 KV:    2 tiles at D128 (4 KB, 111 registers, 4 blocks): 321 us against 378 us at 4 tiles
//              (3 blocks); D256 2 tiles: 646 us against 697 at 4.
// head_dim 64 (not measured) keeps 8 KB a step.
#ifdef CUBINRT_MMA_TILES  // experiments only: the catalog build never sets it
constexpr int kTiles = CUBINRT_MMA_TILES;
#else
constexpr int kTiles = kHeadDim == 64 ? (kKvIsFp8 ? 8 : 4) : kHeadDim == 128 ? 2 : (kKvIsFp8 ? 2 : 4);
#endif
#ifdef CUBINRT_MIN_BLOCKS  // experiments only
constexpr int kMinBlocks = CUBINRT_MIN_BLOCKS;
#else
constexpr int kMinBlocks = kHeadDim == 128 && !kKvIsFp8 ? 4 : 1;
#endif
constexpr int kStep = 8 * kTiles;                       // tokens per warp step
constexpr int kGroupTokens = kStep < 16 ? kStep : 16;   // tokens that share a page lookup
constexpr int kLookups = kStep / kGroupTokens;
constexpr int kVTokens = kTiles == 1 ? 2 : 2 * kTiles;  // V rows a lane holds per step

static_assert(kHeadDim % 64 == 0 && kHeadDim <= 256, "the mma loop covers head_dim 64, 128, 256");
static_assert(kTiles == 1 || kTiles % 2 == 0, "P.V takes n-tiles in pairs");
static_assert(kGroup <= 8, "q heads are the 8 columns of the P.V mma");

// Lane (g, t) = (lane / 4, lane % 4). Word w (two consecutive dims) of the K row a lane holds,
// and of q for the same lane: its first dim. Lanes t = 0..3 cover a row, 16 bytes each.
__device__ __forceinline__ int k_word_dim(int w, int t) { return ((w / (kKElems / 2)) * 4 + t) * kKElems + 2 * (w % (kKElems / 2)); }
// Word w of a V row a lane holds: rows g and g + 8 of dim tile w. Lanes g = 0..7 cover a row.
__device__ __forceinline__ int v_word_dim(int w, int g) { return ((w / (kVElems / 2)) * 8 + g) * kVElems + 2 * (w % (kVElems / 2)); }
// Token (within the step) of the u-th V row lane t holds: the k index of the P.V fragment.
__device__ __forceinline__ int v_token(int u, int t) { return 16 * (u / 4) + 2 * t + (u & 1) + ((u >> 1) & 1) * 8; }

#ifndef CUBINRT_FP8_BITS  // experiments only: 1 widens FP8 by placing bits instead of cvt
#define CUBINRT_FP8_BITS 0
#endif
// What the bit placement leaves out: e4m3's exponent bias is 8 less than half's, so the half
// holds value / 2^8 (exact, subnormals included); the scores and V are scaled back in float.
constexpr float kFp8Unit = CUBINRT_FP8_BITS && kKvDtype == 3 ? 256.f : 1.f;

// Two FP8 codes of x (bytes `sel` picks) as a half pair: e5m2 is a half's top byte; e4m3 moves
// its exponent and mantissa one bit down under the sign.
__device__ __forceinline__ uint32_t fp8x2_bits(uint32_t x, uint32_t sel) {
  const uint32_t y = __byte_perm(x, 0u, sel);
  if constexpr (kKvDtype == 4) return y;
  else return (y & 0x80008000u) | ((y & 0x7fff7fffu) >> 1);
}

__device__ __forceinline__ void widen_fp8(uint32_t x, uint32_t* w) {
  if constexpr (CUBINRT_FP8_BITS) { w[0] = fp8x2_bits(x, 0x1404u); w[1] = fp8x2_bits(x, 0x3424u); }
  else { w[0] = fp8x2_to_half2(x); w[1] = fp8x2_to_half2(x >> 16); }
}

// One load as mma words (two elements each, the lower dim in the low half).
__device__ __forceinline__ void to_words(const uint4& r, uint32_t* w) {
  const uint32_t x[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kKvIsFp8) widen_fp8(x[i], w + 2 * i);
    else w[i] = x[i];
  }
}
__device__ __forceinline__ void to_words(const uint2& r, uint32_t* w) {
  const uint32_t x[2] = {r.x, r.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (kKvIsFp8) widen_fp8(x[i], w + 2 * i);
    else w[i] = x[i];
  }
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (kBf16) { const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); return *reinterpret_cast<const uint32_t*>(&v); }
  else { const __half2 v = __floats2half2_rn(lo, hi); return *reinterpret_cast<const uint32_t*>(&v); }
}
__device__ __forceinline__ float2 unpack2(uint32_t x) {
  if constexpr (kBf16) return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x));
  else return __half22float2(*reinterpret_cast<const __half2*>(&x));
}

__device__ __forceinline__ void mma_k16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  if constexpr (kBf16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_k8(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  if constexpr (kBf16)
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(b0));
  else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(b0));
}

// The q fragment (A of q.K) for lane (g, t): head g of the chunk at the dims of the lane's K
// words; zero for rows past the chunk. Returns the factor the scores must be multiplied by:
// bf16 q feeding a half mma (FP8 KV) is scaled by a power of two to fit half's range exactly.
__device__ __forceinline__ float load_q(const CubinrtPagedDecodeParamsV1& p, const BlockWork& w, int g, int t, uint32_t (&qa)[kKTiles][2]) {
  const QType* row = static_cast<const QType*>(p.q) + w.b * p.q_stride_batch + (w.head0 + min(g, w.heads - 1)) * p.q_stride_head;
  const bool real = g < w.heads;
  float x[2 * kKTiles][2];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 2 * kKTiles; ++i) {
    const int d = k_word_dim(i, t);
    x[i][0] = real ? q_to_float(row[d]) : 0.f;
    x[i][1] = real ? q_to_float(row[d + 1]) : 0.f;
    amax = fmaxf(amax, fmaxf(fabsf(x[i][0]), fabsf(x[i][1])));
  }
  float factor = 1.f;
  if constexpr (kKvIsFp8 && kQDtype == 2) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    int e = 0;
    frexpf(amax, &e);  // amax < 2^e
    const int shift = e > 15 ? e - 15 : 0;
    factor = ldexpf(1.f, shift);
    const float inv = ldexpf(1.f, -shift);
#pragma unroll
    for (int i = 0; i < 2 * kKTiles; ++i) { x[i][0] *= inv; x[i][1] *= inv; }
  }
#pragma unroll
  for (int i = 0; i < kKTiles; ++i) {
    qa[i][0] = pack2(x[2 * i][0], x[2 * i][1]);
    qa[i][1] = pack2(x[2 * i + 1][0], x[2 * i + 1][1]);
  }
  return factor;
}

struct StepLoads {
  KRaw k[kTiles][kKLoads];   // token n * 8 + g of each n-tile
  VRaw v[kVTokens][kVLoads];  // tokens v_token(u, t)
};

// Issues one warp step's K and V loads. Each 16-token group looks its page up once; a group
// wholly past the end looks up the last valid page (never past the block-table row) and its
// values are masked out.
__device__ __forceinline__ void load_step(const CubinrtPagedDecodeParamsV1& p, const BlockWork& w, const int32_t* pages, const char* kbase,
                                          const char* vbase, int t0, int g, int t, StepLoads& out) {
  int64_t base[kLookups];  // element offset of each group's first token
#pragma unroll
  for (int i = 0; i < kLookups; ++i) {
    const int tg = t0 + i * kGroupTokens;
    base[i] = static_cast<int64_t>(pages[min(tg, w.t_end - 1) / kPageSize]) * p.kv_stride_page + (tg % kPageSize) * p.kv_stride_token;
  }
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const int row = n * 8 + g;
    const int64_t off = base[row / kGroupTokens] + (row % kGroupTokens) * p.kv_stride_token;
#pragma unroll
    for (int j = 0; j < kKLoads; ++j) out.k[n][j] = __ldg(reinterpret_cast<const KRaw*>(kbase + (off + (4 * j + t) * kKElems) * kKvBytes));
  }
#pragma unroll
  for (int u = 0; u < kVTokens; ++u) {
    const int row = v_token(u, t);
    const int64_t off = base[row / kGroupTokens] + (row % kGroupTokens) * p.kv_stride_token;
#pragma unroll
    for (int j = 0; j < kVLoads; ++j) out.v[u][j] = __ldg(reinterpret_cast<const VRaw*>(vbase + (off + (8 * j + g) * kVElems) * kKvBytes));
  }
}

__device__ __forceinline__ void warp_partial(const CubinrtPagedDecodeParamsV1& p, const BlockWork& w, WarpPartials& out) {
  const int g = w.lane >> 2, t = w.lane & 3;
  uint32_t qa[kKTiles][2];
  const float sscale = load_q(p, w, g, t, qa) * p.softmax_scale * kLog2e * p.k_scale * kFp8Unit;
  const float vscale = p.v_scale * kFp8Unit;

  float acc[kKTiles][4];  // O^T tile i: (dim lo, head 2t), (lo, 2t+1), (hi, 2t), (hi, 2t+1)
#pragma unroll
  for (int i = 0; i < kKTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  float m = kNegBig;  // head g's running max (the same in the 4 lanes of a quad)
  float l = 0.f;      // head g's sum over this lane's tokens

  const int32_t* pages = p.block_table + static_cast<int64_t>(w.b) * p.block_table_stride;
  const char* kbase = static_cast<const char*>(p.k_cache) + w.kvh * p.kv_stride_head * kKvBytes;
  const char* vbase = static_cast<const char*>(p.v_cache) + w.kvh * p.kv_stride_head * kKvBytes;

  constexpr int kStride = kWarps * kStep;
  const int first = w.t_begin + w.warp * kStep;
#if CUBINRT_MMA_PREFETCH
  StepLoads cur;
  if (first < w.t_end) load_step(p, w, pages, kbase, vbase, first, g, t, cur);
#endif
  for (int t0 = first; t0 < w.t_end; t0 += kStride) {
#if CUBINRT_MMA_PREFETCH
    // The next step's loads go out before this step's math, so a warp always has one in flight.
    StepLoads next;
    if (t0 + kStride < w.t_end) load_step(p, w, pages, kbase, vbase, t0 + kStride, g, t, next);
#else
    StepLoads cur;
    load_step(p, w, pages, kbase, vbase, t0, g, t, cur);
#endif
    const KRaw (&kraw)[kTiles][kKLoads] = cur.k;
    const VRaw (&vraw)[kVTokens][kVLoads] = cur.v;
    // Scores of head g for tokens n*8 + 2t and n*8 + 2t + 1 of each n-tile.
    float s[kTiles][2];
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      uint32_t kw[2 * kKTiles];
#pragma unroll
      for (int j = 0; j < kKLoads; ++j) to_words(kraw[n][j], kw + j * (kKElems / 2));
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int i = 0; i < kKTiles; ++i) mma_k16(c, qa[i][0], 0u, qa[i][1], 0u, kw[2 * i], kw[2 * i + 1]);
#pragma unroll
      for (int e = 0; e < 2; ++e) s[n][e] = t0 + n * 8 + 2 * t + e < w.t_end ? c[e] * sscale : kNegBig;
    }

    float mx = m;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) mx = fmaxf(mx, fmaxf(s[n][0], s[n][1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float corr = exp2f(m - mx);
    m = mx;
    // The weights, rounded to the mma type; the sum adds the rounded values, so the
    // normalisation matches what P.V multiplies.
    uint32_t pb[kTiles];
    float psum = 0.f;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      const bool v0 = t0 + n * 8 + 2 * t < w.t_end, v1 = t0 + n * 8 + 2 * t + 1 < w.t_end;
      pb[n] = pack2(v0 ? exp2f(s[n][0] - m) : 0.f, v1 ? exp2f(s[n][1] - m) : 0.f);
      const float2 r = unpack2(pb[n]);
      psum += r.x + r.y;
    }
    l = l * corr + psum;
    // The accumulator's columns are heads 2t and 2t + 1, whose corrections live in quads 2t, 2t + 1.
    const float c_lo = __shfl_sync(0xffffffffu, corr, 8 * t), c_hi = __shfl_sync(0xffffffffu, corr, 8 * t + 4);
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) { acc[i][0] *= c_lo; acc[i][1] *= c_hi; acc[i][2] *= c_lo; acc[i][3] *= c_hi; }

    uint32_t vw[kVTokens][kKTiles];
#pragma unroll
    for (int u = 0; u < kVTokens; ++u) {
#pragma unroll
      for (int j = 0; j < kVLoads; ++j) to_words(vraw[u][j], vw[u] + j * (kVElems / 2));
      // Rows past the end may hold anything (NaN included); zero them so 0 * V stays 0.
      if (t0 + v_token(u, t) >= w.t_end)
#pragma unroll
        for (int i = 0; i < kKTiles; ++i) vw[u][i] = 0u;
    }
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) {
      if constexpr (kTiles == 1) {
        mma_k8(acc[i], __byte_perm(vw[0][i], vw[1][i], 0x5410), __byte_perm(vw[0][i], vw[1][i], 0x7632), pb[0]);
      } else {
#pragma unroll
        for (int q = 0; q < kTiles / 2; ++q)
          mma_k16(acc[i], __byte_perm(vw[4 * q][i], vw[4 * q + 1][i], 0x5410), __byte_perm(vw[4 * q][i], vw[4 * q + 1][i], 0x7632),
                  __byte_perm(vw[4 * q + 2][i], vw[4 * q + 3][i], 0x5410), __byte_perm(vw[4 * q + 2][i], vw[4 * q + 3][i], 0x7632),
                  pb[2 * q], pb[2 * q + 1]);
      }
    }
#if CUBINRT_MMA_PREFETCH
    cur = next;
#endif
  }

  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (2 * t < kGroup) {
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) {
      const int d = v_word_dim(i, g);
      out.acc[w.warp][2 * t][d] = acc[i][0] * vscale;
      out.acc[w.warp][2 * t + 1][d] = acc[i][1] * vscale;
      out.acc[w.warp][2 * t][d + 1] = acc[i][2] * vscale;
      out.acc[w.warp][2 * t + 1][d + 1] = acc[i][3] * vscale;
    }
  }
  if (t == 0 && g < kGroup) { out.ml[w.warp][g][0] = m; out.ml[w.warp][g][1] = l; }
}

}  // namespace paged_decode::mma
