// The CUDA-core main loop, kept for head_dim 512, whose tensor-core accumulators would not fit
// in registers (docs/kernels.md). A warp walks several tokens at once, lanes splitting each
// token's dims; the q.k partial sums are reduced across lanes by shuffles.
// No include guard: included once per variant, after common.cuh (paged_decode.cu).

namespace paged_decode::simt {

// 8 elements per load: 16 bytes of 16-bit KV, 8 bytes of FP8.
constexpr int kVec = 8;
constexpr int kWords = kVec * kKvBytes / 4;  // 32-bit words per load
using Raw = typename std::conditional<kKvIsFp8, uint2, uint4>::type;
constexpr int kLanesPerToken = (kHeadDim / kVec) < 32 ? kHeadDim / kVec : 32;
constexpr int kElemsPerLane = kHeadDim / kLanesPerToken;
constexpr int kLoadsPerLane = kElemsPerLane / kVec;
constexpr int kSlots = 32 / kLanesPerToken;  // tokens per warp step
// Warp steps in flight; measured on the H200 (docs/benchmarks.md): 4 beat 2, 8 and 16.
constexpr int kUnroll = kElemsPerLane > 8 ? 2 : 4;
constexpr int kTokensPerIter = kWarps * kSlots * kUnroll;
constexpr int kMinBlocks = 1;  // resident blocks per SM asked of ptxas: no cap

// q heads a pass over the KV range takes: the registers of 4 heads' q and accumulators fill the
// budget at head_dim 512, so a chunk of more heads (up to kGroup) walks the range once per 4.
constexpr int kPass = 4;
static_assert(kHeadDim % (kVec * kLanesPerToken) == 0, "head_dim must tile the warp");
static_assert(kGroup % kPass == 0 && kLanesPerToken >= 4, "the transposing reduction is written for 4 heads");

// One load of KV as kVec floats (not yet scaled).
__device__ __forceinline__ void unpack_kv(const Raw& raw, float* out) {
  uint32_t w[kWords];
  words(raw, w);
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if constexpr (kKvDtype == CUBINRT_DTYPE_FP16) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      out[2 * i] = f.x; out[2 * i + 1] = f.y;
    } else if constexpr (kKvDtype == CUBINRT_DTYPE_BF16) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
      out[2 * i] = f.x; out[2 * i + 1] = f.y;
    } else {
      const uint32_t lo = fp8x2_to_half2(w[i]), hi = fp8x2_to_half2(w[i] >> 16);
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
      const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
      out[4 * i] = a.x; out[4 * i + 1] = a.y; out[4 * i + 2] = b.x; out[4 * i + 3] = b.y;
    }
  }
}

// Sums each of the 4 heads' partial dot products over the kLanesPerToken lanes of a token with a
// transposing butterfly (lanes trade halves of their heads, so log2(L) + 1 shuffles reduce all
// four), then hands every lane all four sums.
__device__ __forceinline__ void reduce_scores(float (&dot)[kPass], int lane) {
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
  for (int h = 0; h < kPass; ++h) dot[h] = __shfl_sync(kAll, sum, base | ((h >> 1) ? L / 2 : 0) | ((h & 1) ? L / 4 : 0));
}

__device__ __forceinline__ void merge_state(float& m, float& l, float* acc, float m_o, float l_o, const float* acc_o) {
  const float mx = fmaxf(m, m_o);
  const float a = exp2f(m - mx), b = exp2f(m_o - mx);
  m = mx;
  l = l * a + l_o * b;
#pragma unroll
  for (int e = 0; e < kElemsPerLane; ++e) acc[e] = acc[e] * a + acc_o[e] * b;
}

// Nothing is staged in shared memory: loads go straight to registers.
struct Staging {};

// Heads h0 .. h0 + kPass - 1 of the chunk over the block's KV range.
__device__ __forceinline__ void warp_pass(const CubinrtPagedDecodeParamsV5& p, const BlockWork& w, int h0, WarpPartials& out) {
  const int slot = w.lane / kLanesPerToken, lane_d = w.lane % kLanesPerToken;
  // The lane's dims: load j covers [d0 + j * kLanesPerToken * kVec, + kVec).
  const int d0 = lane_d * kVec;
  const float qscale = p.softmax_scale * kLog2e;
  float q[kPass][kElemsPerLane];
#pragma unroll
  for (int h = 0; h < kPass; ++h) {
    const QType* qrow = static_cast<const QType*>(p.q) + w.b * p.q_stride_batch + (w.head0 + min(h0 + h, w.heads - 1)) * p.q_stride_head;
#pragma unroll
    for (int j = 0; j < kLoadsPerLane; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) q[h][j * kVec + e] = q_to_float(qrow[d0 + j * kLanesPerToken * kVec + e]) * qscale;
  }

  float m[kPass], l[kPass];
  float acc[kPass][kElemsPerLane];
#pragma unroll
  for (int h = 0; h < kPass; ++h) {
    m[h] = kNegBig;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = 0.f;
  }

  const int32_t* pages = p.block_table + static_cast<int64_t>(w.b) * p.block_table_stride;
  const char* kbase = static_cast<const char*>(p.k_cache) + w.kvh * p.kv_stride_head * kKvBytes;
  const char* vbase = static_cast<const char*>(p.v_cache) + w.kvh * p.kv_stride_head * kKvBytes;

  for (int t0 = w.t_begin; t0 < w.t_end; t0 += kTokensPerIter) {
    Raw kraw[kUnroll][kLoadsPerLane], vraw[kUnroll][kLoadsPerLane];
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + (u * kWarps + w.warp) * kSlots + slot;
      valid[u] = t < w.t_end;
      const int tc = valid[u] ? t : w.t_begin;  // a valid address; its values are masked out
      const int64_t off = (static_cast<int64_t>(pages[tc / kPageSize]) * p.kv_stride_page + (tc % kPageSize) * p.kv_stride_token) * kKvBytes;
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j) {
        const int64_t o = off + (d0 + j * kLanesPerToken * kVec) * kKvBytes;
        kraw[u][j] = __ldg(reinterpret_cast<const Raw*>(kbase + o));
        vraw[u][j] = __ldg(reinterpret_cast<const Raw*>(vbase + o));
      }
    }
    float s[kUnroll][kPass];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kElemsPerLane];
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j) unpack_kv(kraw[u][j], kf + j * kVec);
      float dots[kPass];
#pragma unroll
      for (int h = 0; h < kPass; ++h) {
        dots[h] = 0.f;
#pragma unroll
        for (int e = 0; e < kElemsPerLane; ++e) dots[h] = fmaf(q[h][e], kf[e], dots[h]);
      }
      reduce_scores(dots, w.lane);
#pragma unroll
      for (int h = 0; h < kPass; ++h) s[u][h] = valid[u] ? dots[h] * p.k_scale : kNegBig;
    }
#pragma unroll
    for (int h = 0; h < kPass; ++h) {
      float mx = m[h];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u][h]);
      const float corr = exp2f(m[h] - mx);
      m[h] = mx;
      l[h] *= corr;
#pragma unroll
      for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] *= corr;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float vf[kElemsPerLane];
#pragma unroll
      for (int j = 0; j < kLoadsPerLane; ++j) unpack_kv(vraw[u][j], vf + j * kVec);
#pragma unroll
      for (int h = 0; h < kPass; ++h) {
        const float pr = valid[u] ? exp2f(s[u][h] - m[h]) : 0.f;
        l[h] += pr;
        const float pv = pr * p.v_scale;
#pragma unroll
        for (int e = 0; e < kElemsPerLane; ++e) acc[h][e] = fmaf(pv, vf[e], acc[h][e]);
      }
    }
  }

  // Merge the slots of a warp (lanes kLanesPerToken apart hold the same dims).
#pragma unroll
  for (int h = 0; h < kPass; ++h)
#pragma unroll
    for (int off = kLanesPerToken; off < 32; off *= 2) {
      float acc_o[kElemsPerLane];
#pragma unroll
      for (int e = 0; e < kElemsPerLane; ++e) acc_o[e] = __shfl_xor_sync(0xffffffffu, acc[h][e], off);
      const float m_o = __shfl_xor_sync(0xffffffffu, m[h], off);
      const float l_o = __shfl_xor_sync(0xffffffffu, l[h], off);
      merge_state(m[h], l[h], acc[h], m_o, l_o, acc_o);
    }

  if (slot != 0) return;
#pragma unroll
  for (int h = 0; h < kPass; ++h) {
#pragma unroll
    for (int j = 0; j < kLoadsPerLane; ++j)
#pragma unroll
      for (int e = 0; e < kVec; ++e) out.acc[w.warp][h0 + h][d0 + j * kLanesPerToken * kVec + e] = acc[h][j * kVec + e];
    if (lane_d == 0) { out.ml[w.warp][h0 + h][0] = m[h]; out.ml[w.warp][h0 + h][1] = l[h]; }
  }
}

__device__ __forceinline__ void warp_partial(const CubinrtPagedDecodeParamsV5& p, const BlockWork& w, Staging&, WarpPartials& out) {
  for (int h0 = 0; h0 < w.heads; h0 += kPass) warp_pass(p, w, h0, out);
}

}  // namespace paged_decode::simt
