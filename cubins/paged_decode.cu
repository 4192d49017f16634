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
// tokens with an online softmax (paged_decode/mma_loop.cuh on tensor cores up to head_dim 256,
// paged_decode/simt_loop.cuh beyond); warps merge in shared memory. With num_splits > 1 each
// split writes a normalised partial output and its LSE; the last split to finish merges them
// (counted with an atomic that it resets, so the launch needs no second kernel and stays
// graph-capturable).
#include "paged_decode/common.cuh"
#if CUBINRT_HEAD_DIM <= 256
#include "paged_decode/mma_loop.cuh"
namespace loop = paged_decode::mma;
#else
#include "paged_decode/simt_loop.cuh"
namespace loop = paged_decode::simt;
#endif

namespace {
using namespace paged_decode;

__device__ void paged_decode_block(const CubinrtPagedDecodeParamsV1& p) {
  const int group = p.num_q_heads / p.num_kv_heads;
  const int chunks = (group + kGroup - 1) / kGroup;
  BlockWork w;
  w.b = blockIdx.x;
  w.kvh = blockIdx.y / chunks;
  const int chunk = blockIdx.y % chunks;
  w.head0 = w.kvh * group + chunk * kGroup;
  w.heads = min(kGroup, group - chunk * kGroup);
  const int split = blockIdx.z;
  // Clamped to the block table row: a length past its capacity never reads past the row.
  const int seq_len = min(p.seq_lens[w.b], p.block_table_stride * kPageSize);
  w.t_begin = min(seq_len, split * p.pages_per_split * kPageSize);
  w.t_end = min(seq_len, w.t_begin + p.pages_per_split * kPageSize);
  w.warp = threadIdx.x / 32;
  w.lane = threadIdx.x % 32;
  const int b = w.b, head0 = w.head0, heads = w.heads;

  __shared__ WarpPartials s;
  loop::warp_partial(p, w, s);
  __syncthreads();

  const int num_splits = p.num_splits;
  for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads) {
    const int h = i / kHeadDim, d = i % kHeadDim;
    float m = kNegBig;
    for (int wp = 0; wp < kWarps; ++wp) m = fmaxf(m, s.ml[wp][h][0]);
    float l = 0.f, o = 0.f;
    for (int wp = 0; wp < kWarps; ++wp) {
      const float a = exp2f(s.ml[wp][h][0] - m);
      l += s.ml[wp][h][1] * a;
      o += s.acc[wp][h][d] * a;
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

// The loop says how many blocks per SM to fit registers for (its measured best).
extern "C" __global__ void __launch_bounds__(CUBINRT_PAGED_DECODE_THREADS, loop::kMinBlocks)
CUBINRT_KERNEL(CUBINRT_LIST_(0 CUBINRT_PAGED_DECODE_V1_FIELDS(CUBINRT_PARAM_DECL_))) {
  const CubinrtPagedDecodeParamsV1 p = {CUBINRT_LIST_(0 CUBINRT_PAGED_DECODE_V1_FIELDS(CUBINRT_PARAM_NAME_))};
  paged_decode_block(p);
}
