// Paged decode attention: one query token per sequence against a paged KV cache.
//
// One source for every catalog variant; the build defines the variant:
//   CUBINRT_HEAD_DIM   64 | 128 | 256 | 512
//   CUBINRT_Q_DTYPE    1 fp16 | 2 bf16            (also the output dtype)
//   CUBINRT_KV_DTYPE   1 fp16 | 2 bf16 | 3 fp8_e4m3 | 4 fp8_e5m2
//   CUBINRT_PAGE_SIZE  tokens per page
//   CUBINRT_KERNEL     the entry point's name (the manifest records it)
//
// A block handles one (sequence, kv head, chunk of up to MAX_GROUP q heads, KV split). KV is read
// once per kv head for all q heads of the chunk (grouped-query attention). Each warp walks its own
// tokens with an online softmax; warps merge in shared memory. With num_splits > 1 each split
// writes a normalised partial output and its LSE; the last split to finish merges them (counted
// with an atomic that it resets, so the launch needs no second kernel and stays graph-capturable).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include <type_traits>

#include "cubinrt/abi/paged_decode_v1.h"

#ifndef CUBINRT_HEAD_DIM
#error "CUBINRT_HEAD_DIM is not defined: the build defines the variant"
#endif

namespace {

constexpr int kHeadDim = CUBINRT_HEAD_DIM;
constexpr int kPageSize = CUBINRT_PAGE_SIZE;
constexpr int kQDtype = CUBINRT_Q_DTYPE;
constexpr int kKvDtype = CUBINRT_KV_DTYPE;
constexpr int kThreads = CUBINRT_PAGED_DECODE_THREADS;
constexpr int kWarps = kThreads / 32;
constexpr int kGroup = CUBINRT_PAGED_DECODE_MAX_GROUP;

constexpr bool kKvIsFp8 = kKvDtype >= 3;
constexpr int kKvBytes = kKvIsFp8 ? 1 : 2;
// 8 elements per load: 16 bytes of 16-bit KV, 8 bytes of FP8 (which keeps FP8's registers, and so
// its occupancy, at the 16-bit kernels' level).
constexpr int kVec = 8;
constexpr int kWords = kVec * kKvBytes / 4;                            // 32-bit words per load
using Raw = typename std::conditional<kKvIsFp8, uint2, uint4>::type;
constexpr int kLanesPerToken = (kHeadDim / kVec) < 32 ? kHeadDim / kVec : 32;
constexpr int kElemsPerLane = kHeadDim / kLanesPerToken;
constexpr int kLoadsPerLane = kElemsPerLane / kVec;
constexpr int kSlots = 32 / kLanesPerToken;                             // tokens per warp step
#ifdef CUBINRT_UNROLL
constexpr int kUnroll = CUBINRT_UNROLL;  // experiments only: the catalog build never sets it
#else
// Warp steps in flight. Measured on the H200 (docs/benchmarks.md, experiments): 4 beats 2, 8
// and 16 for 16-bit and FP8 KV alike; more steps cost more occupancy than they hide latency.
constexpr int kUnroll = kElemsPerLane > 8 ? 2 : 4;
#endif
constexpr int kTokensPerIter = kWarps * kSlots * kUnroll;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegBig = -1.0e30f;                                     // finite "minus infinity"

static_assert(kHeadDim % (kVec * kLanesPerToken) == 0, "head_dim must tile the warp");
static_assert((kPageSize & (kPageSize - 1)) == 0, "page size must be a power of two");

using QType = typename std::conditional<kQDtype == 2, __nv_bfloat16, __half>::type;

__device__ __forceinline__ float q_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float q_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ void float_to_q(float x, __nv_bfloat16* dst) { *dst = __float2bfloat16(x); }
__device__ __forceinline__ void float_to_q(float x, __half* dst) { *dst = __float2half(x); }

__device__ __forceinline__ void words(const uint4& r, uint32_t* w) { w[0] = r.x; w[1] = r.y; w[2] = r.z; w[3] = r.w; }
__device__ __forceinline__ void words(const uint2& r, uint32_t* w) { w[0] = r.x; w[1] = r.y; }

// Unpacks one load of KV into kVec floats (not yet scaled). FP8 goes through half, which holds
// every e4m3 and e5m2 value exactly, so the result is the exact value of the encoding.
__device__ __forceinline__ void unpack_kv(const Raw& raw, float* out) {
  uint32_t w[kWords];
  words(raw, w);
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if constexpr (kKvDtype == 1) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      out[2 * i] = f.x; out[2 * i + 1] = f.y;
    } else if constexpr (kKvDtype == 2) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
      out[2 * i] = f.x; out[2 * i + 1] = f.y;
    } else {
      constexpr __nv_fp8_interpretation_t kind = kKvDtype == 3 ? __NV_E4M3 : __NV_E5M2;
      const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[i] & 0xffff), kind);
      const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[i] >> 16), kind);
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
      out[4 * i] = a.x; out[4 * i + 1] = a.y; out[4 * i + 2] = b.x; out[4 * i + 3] = b.y;
    }
  }
}

static_assert(kGroup == 4 && kLanesPerToken >= 4, "the transposing reduction is written for 4 heads");
// Sums each of the 4 heads' partial dot products over the kLanesPerToken lanes of a token with a
// transposing butterfly (lanes trade halves of their heads, so log2(L) + 1 shuffles reduce all
// four), then hands every lane all four sums (4 more shuffles): 9 shuffles for L = 16, not 16.
// Measured on the H200: 2-11% faster at batch 64, 17% at batch 1 (docs/benchmarks.md).
__device__ __forceinline__ void reduce_scores(float (&dot)[kGroup], int lane) {
  constexpr int L = kLanesPerToken;
  constexpr unsigned kAll = 0xffffffffu;
  const bool hi = lane & (L / 2);  // keeps heads 2, 3 (else 0, 1)
  float keep0 = hi ? dot[2] : dot[0], keep1 = hi ? dot[3] : dot[1];
  keep0 += __shfl_xor_sync(kAll, hi ? dot[0] : dot[2], L / 2);
  keep1 += __shfl_xor_sync(kAll, hi ? dot[1] : dot[3], L / 2);
  const bool odd = lane & (L / 4);  // keeps head 2*hi + 1 (else 2*hi)
  float sum = odd ? keep1 : keep0;
  sum += __shfl_xor_sync(kAll, odd ? keep0 : keep1, L / 4);
#pragma unroll
  for (int off = L / 8; off > 0; off /= 2) sum += __shfl_xor_sync(kAll, sum, off);
  const int base = lane & ~(L - 1);
#pragma unroll
  for (int h = 0; h < kGroup; ++h) dot[h] = __shfl_sync(kAll, sum, base | ((h >> 1) ? L / 2 : 0) | ((h & 1) ? L / 4 : 0));
}

struct Softmax {  // running state of one (warp slot, q head): max and sum in log2 units
  float m = kNegBig;
  float l = 0.f;
};

__device__ __forceinline__ void merge_state(float& m, float& l, float* acc, float m_o, float l_o,
                                            const float* acc_o) {
  const float mx = fmaxf(m, m_o);
  const float a = exp2f(m - mx), b = exp2f(m_o - mx);
  m = mx;
  l = l * a + l_o * b;
#pragma unroll
  for (int e = 0; e < kElemsPerLane; ++e) acc[e] = acc[e] * a + acc_o[e] * b;
}

__device__ void paged_decode(const CubinrtPagedDecodeParamsV1& p) {
  const int b = blockIdx.x;
  const int group = p.num_q_heads / p.num_kv_heads;
  const int chunks = (group + kGroup - 1) / kGroup;
  const int kvh = blockIdx.y / chunks;
  const int chunk = blockIdx.y % chunks;
  const int head0 = kvh * group + chunk * kGroup;
  const int heads = min(kGroup, group - chunk * kGroup);
  const int split = blockIdx.z;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slot = lane / kLanesPerToken, lane_d = lane % kLanesPerToken;

  // Clamped to the block table row: a length past its capacity never reads past the row.
  const int seq_len = min(p.seq_lens[b], p.block_table_stride * kPageSize);
  const int t_begin = min(seq_len, split * p.pages_per_split * kPageSize);
  const int t_end = min(seq_len, t_begin + p.pages_per_split * kPageSize);

  // The lane's dims: load j covers [d0 + j * kLanesPerToken * kVec, + kVec).
  const int d0 = lane_d * kVec;
  const float qscale = p.softmax_scale * kLog2e;
  float q[kGroup][kElemsPerLane];
#pragma unroll
  for (int h = 0; h < kGroup; ++h) {
    const QType* qrow = static_cast<const QType*>(p.q) + b * p.q_stride_batch +
                        (head0 + min(h, heads - 1)) * p.q_stride_head;
#pragma unroll
    for (int j = 0; j < kLoadsPerLane; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        q[h][j * kVec + e] = q_to_float(qrow[d0 + j * kLanesPerToken * kVec + e]) * qscale;
  }

  Softmax st[kGroup];
  float acc[kGroup][kElemsPerLane];
#pragma unroll
  for (int h = 0; h < kGroup; ++h)
#pragma unroll
    for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = 0.f;

  const int32_t* pages = p.block_table + static_cast<int64_t>(b) * p.block_table_stride;
  const char* kbase = static_cast<const char*>(p.k_cache) + kvh * p.kv_stride_head * kKvBytes;
  const char* vbase = static_cast<const char*>(p.v_cache) + kvh * p.kv_stride_head * kKvBytes;

  for (int t0 = t_begin; t0 < t_end; t0 += kTokensPerIter) {
    Raw kraw[kUnroll][kLoadsPerLane], vraw[kUnroll][kLoadsPerLane];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + (u * kWarps + warp) * kSlots + slot;
      valid[u] = t < t_end;
      const int tc = valid[u] ? t : t_begin;  // a valid address; its values are masked out
      const int64_t off = (static_cast<int64_t>(pages[tc / kPageSize]) * p.kv_stride_page +
                           (tc % kPageSize) * p.kv_stride_token) * kKvBytes;
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j) {
        const int64_t o = off + (d0 + j * kLanesPerToken * kVec) * kKvBytes;
        kraw[u][j] = __ldg(reinterpret_cast<const Raw*>(kbase + o));
        vraw[u][j] = __ldg(reinterpret_cast<const Raw*>(vbase + o));
      }
    }
    float s[kUnroll][kGroup];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kElemsPerLane];
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j) unpack_kv(kraw[u][j], kf + j * kVec);
      float dots[kGroup];
#pragma unroll
      for (int h = 0; h < kGroup; ++h) {
        dots[h] = 0.f;
#pragma unroll
        for (int e = 0; e < kElemsPerLane; ++e) dots[h] = fmaf(q[h][e], kf[e], dots[h]);
      }
      reduce_scores(dots, lane);
#pragma unroll
      for (int h = 0; h < kGroup; ++h) s[u][h] = valid[u] ? dots[h] * p.k_scale : kNegBig;
    }
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      float mx = st[h].m;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u][h]);
      const float corr = exp2f(st[h].m - mx);
      st[h].m = mx;
      st[h].l *= corr;
#pragma unroll
      for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] *= corr;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[kElemsPerLane];
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j) unpack_kv(vraw[u][j], vf + j * kVec);
#pragma unroll
      for (int h = 0; h < kGroup; ++h) {
        const float pr = valid[u] ? exp2f(s[u][h] - st[h].m) : 0.f;
        st[h].l += pr;
        const float pv = pr * p.v_scale;
#pragma unroll
        for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = fmaf(pv, vf[e], acc[h][e]);
      }
    }
  }

  // Merge the slots of a warp (lanes kLanesPerToken apart hold the same dims).
#pragma unroll
  for (int h = 0; h < kGroup; ++h)
#pragma unroll
    for (int off = kLanesPerToken; off < 32; off *= 2) {
      float acc_o[kElemsPerLane];
#pragma unroll
      for (int e = 0; e < kElemsPerLane; ++e) acc_o[e] = __shfl_xor_sync(0xffffffffu, acc[h][e], off);
      const float m_o = __shfl_xor_sync(0xffffffffu, st[h].m, off);
      const float l_o = __shfl_xor_sync(0xffffffffu, st[h].l, off);
      merge_state(st[h].m, st[h].l, acc[h], m_o, l_o, acc_o);
    }

  // Merge the warps in shared memory.
  __shared__ float s_acc[kWarps][kGroup][kHeadDim];
  __shared__ float s_ml[kWarps][kGroup][2];
  if (slot == 0) {
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j)
#pragma unroll
        for (int e = 0; e < kVec; ++e) s_acc[warp][h][d0 + j * kLanesPerToken * kVec + e] = acc[h][j * kVec + e];
      if (lane_d == 0) { s_ml[warp][h][0] = st[h].m; s_ml[warp][h][1] = st[h].l; }
    }
  }
  __syncthreads();

  const int num_splits = p.num_splits;
  for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads) {
    const int h = i / kHeadDim, d = i % kHeadDim;
    float m = kNegBig;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, s_ml[w][h][0]);
    float l = 0.f, o = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float a = exp2f(s_ml[w][h][0] - m);
      l += s_ml[w][h][1] * a;
      o += s_acc[w][h][d] * a;
    }
    const float out = l > 0.f ? o / l : 0.f;
    const float lse2 = l > 0.f ? m + log2f(l) : kNegBig;  // log2 units
    const int qh = head0 + h;
    if (num_splits == 1) {
      float_to_q(out, static_cast<QType*>(p.out) + b * p.out_stride_batch + qh * p.out_stride_head + d);
      if (p.lse != nullptr && d == 0) p.lse[b * p.num_q_heads + qh] = lse2 / kLog2e;
    } else {
      float* part = p.partial + ((static_cast<int64_t>(b) * p.num_q_heads + qh) * num_splits + split) * (kHeadDim + 1);
      part[d] = out;
      if (d == 0) part[kHeadDim] = lse2;
    }
  }
  if (num_splits == 1) return;

  // Split-KV: the last split of this (sequence, head chunk) to finish merges all of them.
  __shared__ bool s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* counter = p.split_counters + b * gridDim.y + blockIdx.y;
    s_last = atomicAdd(counter, 1) == num_splits - 1;
    if (s_last) *counter = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads) {
    const int h = i / kHeadDim, d = i % kHeadDim;
    const int qh = head0 + h;
    const float* part = p.partial + (static_cast<int64_t>(b) * p.num_q_heads + qh) * num_splits * (kHeadDim + 1);
    float m = kNegBig;
    for (int sp = 0; sp < num_splits; ++sp) m = fmaxf(m, __ldcg(part + sp * (kHeadDim + 1) + kHeadDim));
    float l = 0.f, o = 0.f;
    for (int sp = 0; sp < num_splits; ++sp) {
      const float w = exp2f(__ldcg(part + sp * (kHeadDim + 1) + kHeadDim) - m);
      l += w;
      o += w * __ldcg(part + sp * (kHeadDim + 1) + d);
    }
    float_to_q(l > 0.f ? o / l : 0.f, static_cast<QType*>(p.out) + b * p.out_stride_batch + qh * p.out_stride_head + d);
    if (p.lse != nullptr && d == 0) p.lse[b * p.num_q_heads + qh] = l > 0.f ? (m + log2f(l)) / kLog2e : -INFINITY;
  }
}

}  // namespace

#define CUBINRT_PARAM_DECL_(type, name) , type name
#define CUBINRT_PARAM_NAME_(type, name) , name
#define CUBINRT_DROP_FIRST_(first, ...) __VA_ARGS__
#define CUBINRT_LIST_(...) CUBINRT_DROP_FIRST_(__VA_ARGS__)

#ifdef CUBINRT_MIN_BLOCKS  // experiments only: cap registers for this many resident blocks per SM
#define CUBINRT_BOUNDS_ __launch_bounds__(CUBINRT_PAGED_DECODE_THREADS, CUBINRT_MIN_BLOCKS)
#else
#define CUBINRT_BOUNDS_ __launch_bounds__(CUBINRT_PAGED_DECODE_THREADS)
#endif

extern "C" __global__ void CUBINRT_BOUNDS_
CUBINRT_KERNEL(CUBINRT_LIST_(0 CUBINRT_PAGED_DECODE_V1_FIELDS(CUBINRT_PARAM_DECL_))) {
  const CubinrtPagedDecodeParamsV1 p = {CUBINRT_LIST_(0 CUBINRT_PAGED_DECODE_V1_FIELDS(CUBINRT_PARAM_NAME_))};
  paged_decode(p);
}
