// Paged decode attention: one query token per sequence against a paged KV cache.
//
// One source for every catalog variant; the build defines the variant:
//   CUBINRT_HEAD_DIM   64 | 128 | 256 | 512
//   CUBINRT_Q_DTYPE    CUBINRT_DTYPE_FP16 | CUBINRT_DTYPE_BF16   (also the output dtype)
//   CUBINRT_KV_DTYPE   the q dtype | CUBINRT_DTYPE_FP8_E4M3 | _FP8_E5M2 | _NVFP4 (cubinrt/dtypes.h)
//   CUBINRT_PAGE_SIZE  tokens per page
//   CUBINRT_KERNEL     the entry point's name (the manifest records it)
//   CUBINRT_G16        defined for the paged_decode_g16 family: 16 q heads a block, head_dim 128
//   CUBINRT_KV_PAIR    defined for the paged_decode_kv_pair family (NVFP4, head_dim 128): two
//                      neighbouring kv heads a block, as one row of 256 dims (paged_decode/common.cuh)
//   CUBINRT_VSF_INTERLEAVED  defined for the *_vsf_interleaved families (NVFP4 only): V's block
//                      scales in TensorRT-LLM's 4-token interleave (docs/formats.md)
//   CUBINRT_E2M1_CVT   defined for test-only twins: NVFP4 widened as with the hardware e2m1
//                      conversion (paged_decode/common.cuh) on a target without it
//
// A block handles one (sequence, kv head, chunk of up to 8 q heads, or 16 in the paged_decode_g16
// family's kernels, KV split). KV is read once per kv head for all q heads of the chunk (grouped-query
// attention). The warps walk the block's tokens with an online softmax on tensor cores
// (paged_decode/mma_loop.cuh): each its own tokens up to head_dim 256, each its own quarter of the
// dims at 512; they merge in shared memory. With num_splits > 1 the
// splits of a (sequence, head chunk) merge one of two ways, as the dispatcher chose: launched as
// one thread-block cluster (sm_90 and later) they read each other's results through distributed
// shared memory; otherwise each writes a normalised partial output and its LSE to the workspace
// and the last split to finish merges them (counted with an atomic that it resets). Either way
// the launch needs no second kernel and stays graph-capturable.
//
// Many variants, one translation unit: the build compiles every variant of a family and arch in
// one nvcc run (one front-end pass over the CUDA headers instead of one a variant; the kernels
// keep their own extern "C" names in one cubin). Its generated unit defines a variant's macros,
// including CUBINRT_VARIANT_NS, includes this file, undefines them, and goes on to the next. So
// everything below the headers lives in namespace CUBINRT_VARIANT_NS, and the variant headers
// (paged_decode/*.cuh) have no include guards. A one-variant compile may leave it undefined.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include <type_traits>
#if defined(CUBINRT_TRACE) || defined(CUBINRT_TRACE_SPLITS)
#include <cstdio>
#endif

#include "cubinrt/dtypes.h"
#include "grid_dependency.cuh"
#include "paged_decode_abi.h"

#ifndef CUBINRT_VARIANT_NS  // a one-variant compile (bench/experiments/build.sh): a default name
#define CUBINRT_VARIANT_NS cubinrt_one_variant
#define CUBINRT_VARIANT_NS_DEFAULT_
#endif

namespace CUBINRT_VARIANT_NS {

#include "paged_decode/common.cuh"
#include "paged_decode/mma_loop.cuh"
namespace loop = paged_decode::mma;

namespace {
using namespace paged_decode;

// What the last split of a (sequence, head chunk) needs to merge the splits: per head, the
// largest split LSE, the sum of the splits' weights, and one chunk of the weights themselves.
constexpr int kMergeChunk = 256;
struct MergeScratch {
  float weight[kGroup][kMergeChunk];
  float max[kGroup];
  float sum[kGroup];
};

// What a block of a cluster merge leaves for the others to read: its normalised output and LSE
// (log2 units) for each head of the chunk.
struct ClusterShare {
  float out[kGroup][kOutDim];
  float lse2[kGroup];
};

// The block's shared memory: the main loop's staging ring, then the warps' partials (and the
// block's result, for a cluster merge), then the merge scratch, each used only after every
// thread is done with the one before.
union BlockShared {
  loop::Staging stage;
  struct {
    WarpPartials partials;
    ClusterShare share;
  } block;
  MergeScratch merge;
};

// The split-KV workspace: every split's normalised output [batch, num_q_heads, splits, D], then
// every split's LSE in log2 units [batch, num_q_heads, splits] (the host sizes it; only the
// kernel reads it, so its layout is the kernel's own).
__device__ __forceinline__ float* split_out(const CubinrtPagedDecodeParamsV6& p, int b, int qh) {
  return p.partial + (static_cast<int64_t>(b) * p.num_q_heads + qh) * p.num_splits * kOutDim;
}
__device__ __forceinline__ float* split_lse(const CubinrtPagedDecodeParamsV6& p, int b, int qh) {
  return p.partial + static_cast<int64_t>(p.batch) * p.num_q_heads * p.num_splits * kOutDim +
         (static_cast<int64_t>(b) * p.num_q_heads + qh) * p.num_splits;
}

// Dims d..d+3 of q head qh's output row of sequence b, in q's dtype.
__device__ __forceinline__ void store_out4(const CubinrtPagedDecodeParamsV6& p, int b, int qh, int d, float4 v) {
  QType* dst = static_cast<QType*>(p.out) + b * p.out_stride_batch + qh * p.out_stride_head + d;
  // One 8-byte store: out rows are 8-byte aligned (the dispatcher checks out's pointer and strides)
  // and d % 4 == 0.
  *reinterpret_cast<uint2*>(dst) = make_uint2(bits2<QType>(v.x, v.y), bits2<QType>(v.z, v.w));
}

// Where q head qh of sequence b keeps its LSE (the caller's strides, in floats).
__device__ __forceinline__ float* lse_at(const CubinrtPagedDecodeParamsV6& p, int b, int qh) {
  return p.lse + b * p.lse_stride_batch + qh * p.lse_stride_head;
}

// o += a * x, dim by dim: every merge's step, over warps, splits or cluster blocks.
__device__ __forceinline__ void add_scaled(float4& o, float a, const float4& x) {
  o.x += a * x.x; o.y += a * x.y; o.z += a * x.z; o.w += a * x.w;
}

// Folds a (max, sum) pair of the softmax (log2 units) into (m, l), as the online softmax does: both
// sums are rescaled to the larger max.
__device__ __forceinline__ void combine_lse_sum(float& m, float& l, float mo, float lo) {
  const float mn = fmaxf(m, mo);
  l = l * exp2f(m - mn) + lo * exp2f(mo - mn);
  m = mn;
}

// Merges every split's output and LSE into out and lse. It runs at the end of a launch, with the
// rest of the GPU idle, so what counts is how many times it waits on L2: the first splits' dims
// of a thread are requested before the weights are computed, and one read of the LSEs gives each
// head's max, its sum (online, as the softmax) and the first chunk's weights; before, the LSEs
// were read three times and the dims after them. Each split's weight is computed once per head
// (not once per dim); each thread sums whole float4s of dims with kBatch loads in flight.
__device__ void merge_splits(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, MergeScratch& s) {
  constexpr int kVecsPerHead = kOutDim / 4;
  constexpr int kPerThread = (kGroup * kVecsPerHead + kThreads - 1) / kThreads;
  constexpr int kBatch = 16;                   // splits' float4s a thread has in flight
  // LSEs of a chunk a lane reads and holds to its weight. Holding 8 cost the 16-head bf16 kernel,
  // held to 128 registers, 3 more spill instructions a step of its main loop (14 against 11; B64
  // L8192 32q/1kv in 2 clusters 113 -> 125 us, H100 run 93). Holding one gives the 11 back in the
  // SASS but lengthens the 8-head loops (head_dim 128 bf16 185 -> 233 instructions a step, FP8
  // 273 -> 309); it is not yet timed.
  constexpr int kLanesLse = kMergeChunk / 32;
  const int num_splits = p.num_splits;
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  auto column = [&](int v) {  // vector v's dims in split 0 (the splits follow kVecsPerHead apart)
    return reinterpret_cast<const float4*>(split_out(p, w.b, w.head0 + v / kVecsPerHead)) + v % kVecsPerHead;
  };
  // o += splits j0 .. j0 + kBatch - 1 of one vector of head h, x, by their weights; those at or
  // past n weigh 0.
  auto add_weighed_batch = [&](float4& o, const float4 (&x)[kBatch], int h, int j0, int n) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) add_scaled(o, j0 + j < n ? s.weight[h][j0 + j] : 0.f, x[j]);
  };
  float4 first[kBatch];  // splits 0 .. kBatch - 1 of this thread's first vector
  {
    const bool mine = static_cast<int>(threadIdx.x) / kVecsPerHead < w.heads;
    const float4* col = column(threadIdx.x);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) first[j] = mine && j < num_splits ? __ldcg(col + j * kVecsPerHead) : zero;
  }
  // A warp a head (a chunk may have more heads than the block has warps).
  for (int h = w.warp; h < w.heads; h += kWarps) {
    const float* lse = split_lse(p, w.b, w.head0 + h);
    float v[kLanesLse], m = kNegBig, l = 0.f;
#pragma unroll
    for (int k = 0; k < kLanesLse; ++k) {
      const int sp = 32 * k + w.lane;
      v[k] = sp < num_splits ? __ldcg(lse + sp) : kNegBig;
      m = fmaxf(m, v[k]);
    }
#pragma unroll
    for (int k = 0; k < kLanesLse; ++k) l += 32 * k + w.lane < num_splits ? exp2f(v[k] - m) : 0.f;
    for (int c0 = kMergeChunk; c0 < num_splits; c0 += kMergeChunk) {  // more splits than a chunk: rare
#pragma unroll
      for (int k = 0; k < kLanesLse; ++k) {
        const int sp = c0 + 32 * k + w.lane;
        if (sp >= num_splits) continue;
        combine_lse_sum(m, l, __ldcg(lse + sp), 1.f);
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float mo = __shfl_xor_sync(0xffffffffu, m, off), lo = __shfl_xor_sync(0xffffffffu, l, off);
      combine_lse_sum(m, l, mo, lo);
    }
    if (w.lane == 0) { s.max[h] = m; s.sum[h] = l; }
#pragma unroll
    for (int k = 0; k < kLanesLse; ++k)
      if (32 * k + w.lane < min(num_splits, kMergeChunk)) s.weight[h][32 * k + w.lane] = exp2f(v[k] - m);
  }
  float4 o[kPerThread];
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) o[it] = zero;
  __syncthreads();  // the first chunk's weights are written
  if (const int h = threadIdx.x / kVecsPerHead; h < w.heads) add_weighed_batch(o[0], first, h, 0, num_splits);
  for (int c0 = 0; c0 < num_splits; c0 += kMergeChunk) {
    const int n = min(kMergeChunk, num_splits - c0);
    if (c0 > 0) {
      __syncthreads();  // the last chunk's weights are used
      for (int i = threadIdx.x; i < w.heads * n; i += kThreads) {
        const int h = i / n, sp = i % n;
        s.weight[h][sp] = exp2f(__ldcg(split_lse(p, w.b, w.head0 + h) + c0 + sp) - s.max[h]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int it = 0; it < kPerThread; ++it) {
      const int v = threadIdx.x + it * kThreads, h = v / kVecsPerHead;
      if (h >= w.heads) continue;
      const float4* col = column(v) + static_cast<int64_t>(c0) * kVecsPerHead;
      for (int j0 = it == 0 && c0 == 0 ? kBatch : 0; j0 < n; j0 += kBatch) {  // the first batch is summed
        float4 x[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) x[j] = j0 + j < n ? __ldcg(col + (j0 + j) * kVecsPerHead) : zero;
        add_weighed_batch(o[it], x, h, j0, n);
      }
    }
  }
#pragma unroll
  for (int it = 0; it < kPerThread; ++it) {
    const int v = threadIdx.x + it * kThreads, h = v / kVecsPerHead, d = v % kVecsPerHead * 4;
    if (h >= w.heads) continue;
    const int qh = w.head0 + h;
    const float l = s.sum[h], inv = l > 0.f ? 1.f / l : 0.f;
    store_out4(p, w.b, qh, d, make_float4(o[it].x * inv, o[it].y * inv, o[it].z * inv, o[it].w * inv));
    if (p.lse != nullptr && d == 0) *lse_at(p, w.b, qh) = l > 0.f ? (s.max[h] + log2f(l)) / kLog2e : -INFINITY;
  }
}

// Blocks in this block's cluster: 1 outside a cluster launch (and on GPUs before sm_90, which
// have none; the dispatcher never asks them for a cluster merge).
__device__ __forceinline__ unsigned cluster_blocks() {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().num_blocks();
#else
  return 1;
#endif
}

#ifndef CUBINRT_CLUSTER_EARLY_ARRIVE
#define CUBINRT_CLUSTER_EARLY_ARRIVE 1
#endif
constexpr bool kClusterEarlyArrive = CUBINRT_CLUSTER_EARLY_ARRIVE;
// The two halves of cluster.sync(), apart: every thread of the cluster arrives once (release: its
// reads and writes of shared memory before are done) and waits later (acquire), all threads of a
// warp at the same point, which `.aligned` states. Inline PTX because cooperative_groups'
// cluster_group::barrier_arrive() and barrier_wait() (and its sync()) emit the forms without
// `.aligned`; H200 run 102 timed these.
__device__ __forceinline__ void cluster_arrive_release() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// The cluster's blocks are the splits of one (sequence, head chunk). Each reads every block's
// share of its part of the output dims through distributed shared memory and writes the merged
// result; no block leaves while another may still read its shared memory. A thread asks for all
// blocks' LSE and dims at once (unrolled to the largest cluster the dispatcher launches), so the
// merge waits on distributed shared memory once, where a loop over the blocks for the maximum and
// another for the sums waited twice, each round trip per block unless the compiler unrolled it.
__device__ void merge_cluster(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, const ClusterShare& mine) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  constexpr int kMaxBlocks = CUBINRT_PAGED_DECODE_MAX_CLUSTER_SPLITS;
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's share is written
  const int blocks = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  constexpr int kVecs = kOutDim / 4;
  const int vecs = w.heads * kVecs, per_block = (vecs + blocks - 1) / blocks;
  // Every thread arrives at the closing barrier once it has read the other blocks' shares for the
  // last time, and waits on it only before leaving, so the barrier's round trip overlaps the merge's
  // arithmetic and stores. The rounds are the same for every thread of the block, so the arrival
  // is one point of the code for all of them (`.aligned`).
  const int first = rank * per_block, end = min(vecs, first + per_block);
  const int rounds = (per_block + kThreads - 1) / kThreads;  // at least 1: a block has a head
  for (int round = 0; round < rounds; ++round) {
    const int i = first + round * kThreads + threadIdx.x;
    const bool active = i < end;  // a vector of this thread this round
    const int h = active ? i / kVecs : 0, d = i % kVecs * 4;
    float lse[kMaxBlocks];
    float4 x[kMaxBlocks];
#pragma unroll
    for (int r = 0; r < kMaxBlocks; ++r) {
      lse[r] = kNegBig;  // an absent block weighs exp2(kNegBig - m) = 0
      x[r] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (active && r < blocks) {
        const ClusterShare* theirs = cluster.map_shared_rank(&mine, r);
        lse[r] = theirs->lse2[h];
        x[r] = *reinterpret_cast<const float4*>(&theirs->out[h][d]);
      }
    }
    if (kClusterEarlyArrive && round == rounds - 1) cluster_arrive_release();
    if (!active) continue;
    float m = kNegBig;
#pragma unroll
    for (int r = 0; r < kMaxBlocks; ++r) m = fmaxf(m, lse[r]);
    float l = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int r = 0; r < kMaxBlocks; ++r) {
      const float a = exp2f(lse[r] - m);
      l += a;
      add_scaled(o, a, x[r]);
    }
    const float inv = 1.f / l;  // the largest LSE's block weighs 1
    const int qh = w.head0 + h;
    store_out4(p, w.b, qh, d, make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv));
    if (p.lse != nullptr && d == 0) *lse_at(p, w.b, qh) = (m + log2f(l)) / kLog2e;
  }
  if (kClusterEarlyArrive) cluster_wait();  // no block leaves while another may still read its share
  else cluster.sync();
#endif
}

// Shared memory beyond the 48 KiB a block may declare statically comes from the launch: the
// kernel states how much it needs in a device object that the cubin reader finds by name
// (cubinrt_dynamic_smem_<kernel>, 0 when all of it is static), pack records it in the manifest,
// and the loader and the dispatcher set it. So the host never guesses a kernel's shared memory.
constexpr uint32_t kSharedBytes = sizeof(BlockShared);
constexpr bool kDynamicShared = kSharedBytes > 48 * 1024;
#define CUBINRT_CAT2_(a, b) a##b
#define CUBINRT_CAT_(a, b) CUBINRT_CAT2_(a, b)
extern "C" __device__ const uint32_t CUBINRT_CAT_(cubinrt_dynamic_smem_, CUBINRT_KERNEL) = kDynamicShared ? kSharedBytes : 0;
// The key this kernel is, as the catalog's unit source states it: the reader checks it against the
// manifest, so an entry cannot name a sibling kernel of the same cubin.
#ifndef CUBINRT_VARIANT_KEY
#error "CUBINRT_VARIANT_KEY (the variant's key, \"head_dim=128 q_dtype=bf16 ...\") is not defined: the build defines it"
#endif
extern "C" __device__ const char CUBINRT_CAT_(cubinrt_key_, CUBINRT_KERNEL)[] = CUBINRT_VARIANT_KEY;
// It waits for the kernel before it on the stream ahead of any global access (grid_dependency.cuh).
CUBINRT_STATE_GRID_DEPENDENCY(CUBINRT_KERNEL)

// The longest KV range a block takes for which the kernel lets the next one be scheduled before
// its merge and output (below); longer ranges leave it to the grid's end.
constexpr int kEarlyDependentsTokens = 512;

template <bool kDynamic>
__device__ __forceinline__ BlockShared& block_shared() {
  if constexpr (kDynamic) {
    extern __shared__ uint4 dynamic_shared[];
    return *reinterpret_cast<BlockShared*>(dynamic_shared);
  } else {
    __shared__ BlockShared s;
    return s;
  }
}

// CUBINRT_TRACE=<length> (experiments only): block (0, 0, 0) of each unsplit launch whose sequence
// 0 has that length prints the global timer at its start and end and the SM cycles to its phases'
// ends (the global timer: global_ns, common.cuh); bench/experiments/trace_summary.py takes the
// medians.

// CUBINRT_TRACE_SPLITS=<length> (experiments only): every split launch whose sequence 0 has that
// length records the global timer of each block's start, first step, partials and end
// (g_split_ns, common.cuh); the block that ends last prints, for a few launches of each bench row
// (3 warm-up, 25 single, 25 queued, 1000 back to back), where in the launch the blocks were:
// times after the first block's start, the minimum, median and maximum over the blocks.
#ifdef CUBINRT_TRACE_SPLITS
__device__ unsigned g_split_done, g_split_launches;
__device__ unsigned long long g_split_prev_end;
__device__ unsigned long long rank_of(const unsigned long long* v, unsigned n, unsigned k) {  // k-th smallest
  for (unsigned i = 0; i < n; ++i) {
    unsigned below = 0, equal = 0;
    for (unsigned j = 0; j < n; ++j) { below += v[j] < v[i]; equal += v[j] == v[i]; }
    if (below <= k && k < below + equal) return v[i];
  }
  return 0;
}
__device__ void split_trace_end(const CubinrtPagedDecodeParamsV6& p) {
  __syncthreads();  // every thread of the block is done
  const unsigned n = gridDim.x * gridDim.y * gridDim.z;
  if (threadIdx.x != 0 || gridDim.z == 1 || n > kTraceBlocks || p.seq_lens[0] != CUBINRT_TRACE_SPLITS) return;
  g_split_ns[3][trace_block()] = global_ns();
  __threadfence();
  if (atomicAdd(&g_split_done, 1) != n - 1) return;
  g_split_done = 0;
  __threadfence();
  const unsigned launch = g_split_launches++;
  const unsigned at = launch % 1053;
  unsigned long long t0 = ~0ull, end = 0;
  for (unsigned i = 0; i < n; ++i) { t0 = min(t0, g_split_ns[0][i]); end = max(end, g_split_ns[3][i]); }
  const long long gap = static_cast<long long>(t0 - g_split_prev_end);  // negative: overlapped
  g_split_prev_end = end;
  if (at != 10 && at != 40 && at != 600) return;
  unsigned long long q[4][3];
  for (int k = 0; k < 4; ++k) {
    for (unsigned i = 0; i < n; ++i) g_split_ns[k][i] -= t0;
    q[k][0] = rank_of(g_split_ns[k], n, 0);
    q[k][1] = rank_of(g_split_ns[k], n, n / 2);
    q[k][2] = rank_of(g_split_ns[k], n, n - 1);
  }
  printf("SPLITTRACE launch %u (row's %u) blocks %u splits %d gap-after-previous %lld ns | start %llu %llu %llu | first step %llu %llu %llu | partials %llu %llu %llu | end %llu %llu %llu\n",
         launch, at, n, p.num_splits, gap, q[0][0], q[0][1], q[0][2], q[1][0], q[1][1], q[1][2], q[2][0], q[2][1], q[2][2], q[3][0], q[3][1], q[3][2]);
}
#endif

__device__ void paged_decode_block(const CubinrtPagedDecodeParamsV6& p) {
#ifdef CUBINRT_TRACE
  const unsigned long long trace_ns = global_ns();
  const long long trace_c0 = clock64();
#endif
#ifdef CUBINRT_TRACE_SPLITS
  if (threadIdx.x == 0 && trace_block() < kTraceBlocks) g_split_ns[0][trace_block()] = global_ns();
#endif
  // q heads a block's kv unit serves: a kv head's group, or (kKvPair) a pair's two groups in order.
  const int group = (kKvPair ? 2 : 1) * (p.num_q_heads / p.num_kv_heads);
  const int chunks = (group + kGroup - 1) / kGroup;
  BlockWork w;
  // Blocks start in launch order (x fastest), and the grid is (batch, head chunks, splits); the
  // block at launch position i takes head chunk i % chunks of sequence i / chunks, so blocks
  // running together read every kv head of a few sequences (neighbouring bytes of each page)
  // rather than one kv head of many. Measured (H200 run 15): bf16 D256 983 -> 972 us, FP8 D128
  // 282 -> 272.
  const int64_t launch_pos = blockIdx.x + int64_t{blockIdx.y} * gridDim.x;
  const int head_chunk = static_cast<int>(launch_pos % gridDim.y);
  w.b = static_cast<int>(launch_pos / gridDim.y);
  w.kvh = head_chunk / chunks;
  const int chunk = head_chunk % chunks;
  w.head0 = w.kvh * group + chunk * kGroup;
  w.heads = min(kGroup, group - chunk * kGroup);
  const int split = blockIdx.z;
  // Nothing above touched global memory; from here on everything may be the previous kernel's
  // output (q, the cache, the tables), and the workspace its input (grid_dependency.cuh).
  cubinrt_wait_for_prior_grids();
  // Clamped to the block table row: a length past its capacity never reads past the row.
  const int seq_len = min(p.seq_lens[w.b], p.block_table_stride * kPageSize);
  w.t_begin = min(seq_len, split * p.pages_per_split * kPageSize);
  w.t_end = min(seq_len, w.t_begin + p.pages_per_split * kPageSize);
  w.warp = threadIdx.x / 32;
  w.lane = threadIdx.x % 32;
  const int b = w.b, head0 = w.head0, heads = w.heads;

  BlockShared& s = block_shared<kDynamicShared>();
  loop::warp_partial(p, w, s.stage, s.block.partials);
  // Short ranges (a launch that is mostly latency): the KV range is read, so the next kernel on the
  // stream may now be scheduled; it still waits for this grid's end before it reads anything
  // (grid_dependency.cuh). Long ones leave that to the grid's end: dependents launched while
  // blocks here still run take whatever slots are free and, crowded onto few multiprocessors,
  // run slower once released. H200 runs 77-80, per launch (docs/benchmarks.md): B4 L512 in
  // 4-block clusters under graph replay 6.7 us in plain stream order, 6.3 let go here, 8.8 let go
  // at the kernel's start; B1 L131072 FP8 back to back 73.5 plain, 80.1 when every range was let
  // go here, 71.5 with this rule.
  if (p.pages_per_split * kPageSize <= kEarlyDependentsTokens) cubinrt_allow_dependent_grids();
  __syncthreads();
#ifdef CUBINRT_TRACE
  const long long trace_c2 = clock64();
#endif
#ifdef CUBINRT_TRACE_SPLITS
  if (threadIdx.x == 0 && trace_block() < kTraceBlocks) g_split_ns[2][trace_block()] = global_ns();
#endif

  // Each thread merges 4 dims of one head at a time with float4 reads (at head_dim 128, one pass
  // of the block does every dim of 4 heads). The head's per-warp weights and LSE are computed by
  // every thread that needs them: a few exp2 each, rather than a serial step and one more barrier
  // (H200 run 24, CUBINRT_TRACE at B1 L128: 1102 -> 825 cycles from the warps' partials to the
  // output for bf16 KV, 997 -> 832 for FP8).
  const WarpPartials& part = s.block.partials;
  const int num_splits = p.num_splits;
  const bool in_cluster = cluster_blocks() > 1;
  constexpr int kVecs = kOutDim / 4;
  for (int i = threadIdx.x; i < heads * kVecs; i += kThreads) {
    const int h = i / kVecs, d = i % kVecs * 4;
    float m = kNegBig;
#pragma unroll
    for (int wp = 0; wp < kPartialRows; ++wp) m = fmaxf(m, part.ml[wp][h][0]);
    float a[kPartialRows], l = 0.f;
#pragma unroll
    for (int wp = 0; wp < kPartialRows; ++wp) {
      a[wp] = exp2f(part.ml[wp][h][0] - m);
      l += part.ml[wp][h][1] * a[wp];
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int wp = 0; wp < kPartialRows; ++wp) {
      const float wt = a[wp] * inv;
      add_scaled(o, wt, *reinterpret_cast<const float4*>(&part.acc[wp][h][d]));
    }
    const int qh = head0 + h;
    const float lse2 = l > 0.f ? m + log2f(l) : kNegBig;
    if (in_cluster) {
      *reinterpret_cast<float4*>(&s.block.share.out[h][d]) = o;
      if (d == 0) s.block.share.lse2[h] = lse2;
    } else if (num_splits == 1) {
      store_out4(p, b, qh, d, o);
      if (p.lse != nullptr && d == 0) *lse_at(p, b, qh) = lse2 / kLog2e;
    } else {
      *reinterpret_cast<float4*>(split_out(p, b, qh) + static_cast<int64_t>(split) * kOutDim + d) = o;
      if (d == 0) split_lse(p, b, qh)[split] = lse2;
    }
  }
  if (in_cluster) return merge_cluster(p, w, s.block.share);
  if (num_splits == 1) {
#ifdef CUBINRT_TRACE
    __syncthreads();
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && seq_len == CUBINRT_TRACE) {
      const long long c3 = clock64();
      printf("TRACE %llu %llu %lld %lld %lld\n", trace_ns, global_ns(), g_trace_first_step - trace_c0, trace_c2 - trace_c0, c3 - trace_c0);
    }
#endif
    return;
  }

  // Split-KV: the last split of this (sequence, head chunk) to finish merges all of them.
  __threadfence();
  __syncthreads();
  bool last = false;
  if (threadIdx.x == 0) {
    int32_t* counter = p.split_counters + b * gridDim.y + head_chunk;
    last = atomicAdd(counter, 1) == num_splits - 1;
    if (last) *counter = 0;  // ready for the next launch
  }
  if (!__syncthreads_or(last)) return;
  __threadfence();
  merge_splits(p, w, s.merge);
}

}  // namespace

#define CUBINRT_PARAM_DECL_(type, name) , type name
#define CUBINRT_PARAM_NAME_(type, name) , name
#define CUBINRT_DROP_FIRST_(first, ...) __VA_ARGS__
#define CUBINRT_LIST_(...) CUBINRT_DROP_FIRST_(__VA_ARGS__)

// Resident blocks per SM to fit registers for: the loop's measured best, or an experiment's.
#ifdef CUBINRT_MIN_BLOCKS
constexpr int kMinBlocks = CUBINRT_MIN_BLOCKS;
#else
constexpr int kMinBlocks = loop::kMinBlocks;
#endif
extern "C" __global__ void __launch_bounds__(kThreads, kMinBlocks)
CUBINRT_KERNEL(CUBINRT_LIST_(0 CUBINRT_PAGED_DECODE_V6_FIELDS(CUBINRT_PARAM_DECL_))) {
  const CubinrtPagedDecodeParamsV6 p = {CUBINRT_LIST_(0 CUBINRT_PAGED_DECODE_V6_FIELDS(CUBINRT_PARAM_NAME_))};
  paged_decode_block(p);
#ifdef CUBINRT_TRACE_SPLITS
  split_trace_end(p);
#endif
}
#undef CUBINRT_PARAM_DECL_
#undef CUBINRT_PARAM_NAME_
#undef CUBINRT_DROP_FIRST_
#undef CUBINRT_LIST_
#undef CUBINRT_CAT2_
#undef CUBINRT_CAT_
#undef CUBINRT_TRACE_FIRST_STEP  // common.cuh's

}  // namespace CUBINRT_VARIANT_NS

// Nothing of this variant outlives it: the next inclusion brings its own namespace name.
#ifdef CUBINRT_VARIANT_NS_DEFAULT_
#undef CUBINRT_VARIANT_NS
#undef CUBINRT_VARIANT_NS_DEFAULT_
#endif
