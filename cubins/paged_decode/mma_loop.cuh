// The tensor-core main loop (head_dim <= 256): q.K and P.V as warp-level mma.sync, with K and V
// loaded from global memory straight into the mma operand registers (docs/kernels.md).
//
// Per warp step of kStep tokens:
//   S[heads x tokens] = Q[16 x D] . K^T        m16n8k16, A = q (rows 0-7 are the chunk's heads;
//                                              rows 8-15 its heads 8-15, or, for chunks of up
//                                              to 8, q's dims of the next k-tile: consume_step),
//                                              B = K rows, one 8-token n-tile each
//   O^T[D x heads]   += V^T[D x tokens] . P^T  m16n8k16 (m16n8k8 for 8-token steps), A = V,
//                                              B = the softmax weights, taken as they come out of
//                                              the first mma (its C layout is the B layout here)
// A dot product does not care in which order its terms come, so each lane loads 16 contiguous
// bytes of a K or V row and the q fragment (and the output) use the same permutation of dims:
// no shared memory, no ldmatrix, and loads that cover whole 32-byte sectors.
// No include guard: included once per variant, after common.cuh (paged_decode.cu).

namespace paged_decode::mma {

// The mma operand type: FP8 KV is widened to half (exact, one cvt per pair), NVFP4 to half times
// its block scale (exact, below); 16-bit KV (which is in q's dtype) is used as stored.
constexpr bool kBf16 = !kKvWidened && kQDtype == CUBINRT_DTYPE_BF16;

// The dims a warp owns. Up to head_dim 256, all of them: the warps of a block split its tokens.
// At 512, a quarter each (kWarps 4): the warps walk the same tokens, each takes q.K and P.V over
// its own 128 dims, and the partial scores are summed through shared memory every step, so a
// lane's registers are those of the head_dim 128 loop rather than four times as many.
constexpr bool kDimSplit = kHeadDim > CUBINRT_PAGED_DECODE_TOKEN_SPLIT_MAX_HEAD_DIM;
constexpr int kSliceDim = kDimSplit ? kHeadDim / kWarps : kHeadDim;
static_assert(!kDimSplit || kSliceDim == 128, "head_dim 512 splits across 4 warps of 128 dims");
// The first of the warp's dims in q, K, V and the output (0 unless the warps split the dims).
__device__ __forceinline__ int dim0(const BlockWork& w) { return kDimSplit ? w.warp * kSliceDim : 0; }

constexpr int kKTiles = kSliceDim / 16;             // k-tiles of q.K = dim tiles of P.V
// A lane holds a quarter of the warp's dims of a K row and an eighth of a V row, in loads of up to
// 16 bytes (NVFP4 at head_dim 64: 8-byte K loads and 4-byte V loads).
constexpr int kKLoadBytes = kv_dim_bytes(kSliceDim / 4) < 16 ? kv_dim_bytes(kSliceDim / 4) : 16;
constexpr int kKElems = kKLoadBytes * 8 / kKvBits;  // elements per K load
constexpr int kKLoads = kSliceDim / 4 / kKElems;
constexpr int kVLoadBytes = kv_dim_bytes(kSliceDim / 8) < 16 ? kv_dim_bytes(kSliceDim / 8) : 16;
constexpr int kVElems = kVLoadBytes * 8 / kKvBits;  // elements per V load
constexpr int kVLoads = kSliceDim / 8 / kVElems;
using KRaw = typename std::conditional<kKLoadBytes == 16, uint4, uint2>::type;
using VRaw = typename std::conditional<kVLoadBytes == 16, uint4, typename std::conditional<kVLoadBytes == 8, uint2, uint32_t>::type>::type;

// Per variant, as measured on the H200 (docs/benchmarks.md): 8-token n-tiles per warp step, steps
// kept in flight through shared memory (0: loaded into registers), and resident blocks per SM
// asked of ptxas. B64 L8192 times, runs 12-21 (cp.async ring) and run 9 (register loop):
//   D128 16-bit: 1 tile, 3 staged steps, 4 blocks: 485-500 us; 2 tiles (96 KB, 2 blocks): the
//                same at B64 and 0.3 us faster at B1 L128 (run 20), not worth 96 KB on GPUs with
//                100 KB per SM; register loop, 2 tiles, 4 blocks: 508 us. At B1 L32768 the ring
//                is 10% faster.
//   D128 FP8:    2 tiles, 3 staged steps, 4 blocks: 260-277 us; 1 tile 6 steps: 319; 2 tiles
//                uncapped (3 blocks): 300; register loop 2 tiles: 323.
//   D256 16-bit: 1 tile, 3 staged steps (96 KB of dynamic shared memory, 2 blocks): 946-983 us;
//                2 steps capped to 3 blocks: 1076; 4 steps (1 block): 1305; register loop, 4
//                tiles (255 registers): 1073-1136.
//   D256 FP8:    1 tile, 3 staged steps (3 blocks by registers): 510-572 us; capped to 4 blocks
//                it spills: 829; register loop 2 tiles: 662. Since runs 101-102, 2 tiles where a
//                multiprocessor has 228 KB of shared memory (sm_90, sm_100a, sm_103a: 2 blocks of
//                96 KB): H200 490-491 us against 510 (the planner: 1 split against 2 in a
//                cluster), NVFP4 (54 KB) 430-437 against 482-488; 32q/4kv FP8 1% slower. GPUs of
//                100 KB an SM (sm_89, sm_120) would hold one such block, sm_80 (164 KB) one of
//                FP8's, so they keep 1 tile.
//   kv pairs (NVFP4, two head_dim 128 kv heads as one 256-dim row; H100 run 100): 2 tiles, 3
//                staged steps (54 KB of dynamic shared memory, 3 blocks by registers): 224-228 us
//                against 1 tile's 251; 4-6 steps of 1 tile 249-250; 1 tile held to 4 blocks an
//                SM (128 registers) 279.
// head_dim 64 (not measured) keeps the register loop with 8 KB a step.
#ifdef CUBINRT_MMA_TILES  // experiments only: the catalog build never sets it
constexpr int kTiles = CUBINRT_MMA_TILES;
#else
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900 || __CUDA_ARCH__ == 1000 || __CUDA_ARCH__ == 1030)
constexpr bool kSmem228 = true;  // a multiprocessor has 228 KB of shared memory
#else
constexpr bool kSmem228 = false;
#endif
constexpr int kTiles = kSliceDim == 64 ? (kKvWidened ? 8 : 4) : kSliceDim == 128 ? (kKvWidened ? 2 : 1) : kKvPair || (kKvWidened && kSmem228) ? 2 : 1;
#endif
// D128: 16 warps an SM, but 3 blocks (164 registers, no spill) for 16 heads of FP8 KV, which at 4
// blocks spills 116 bytes (H200 run 48, B64 L8192 128q/8kv: 408 us capped at 4, 304 at 3; bf16's
// 16 heads spill 24 bytes at 4 blocks and take 498 us there, 578 at 3). D256 FP8: 3 blocks (170
// registers); left uncapped, ptxas took 181 (2 blocks an SM) once the kernels were built per
// family unit, and B64 L8192 went 510 -> 653 us (runs 33, 39).
// head_dim 512 (its warps at 128 dims each) as head_dim 128.
constexpr int kMinBlocks = kSliceDim == 128 ? (kGroup > 8 && kKvWidened ? 3 : 16 / kWarps) : (kHeadDim == 256 && kKvWidened ? 3 : 1);
constexpr int kStep = 8 * kTiles;                       // tokens per warp step
constexpr int kGroupTokens = kStep < 16 ? kStep : 16;   // tokens that share a page lookup
constexpr int kLookups = kStep / kGroupTokens;
constexpr int kVTokens = kTiles == 1 ? 2 : 2 * kTiles;  // V rows a lane holds per step

// Steps a warp keeps in flight through shared memory (cp.async), or 0: each step's K and V are
// loaded straight into registers just before its math (the loads then hold registers, and a
// warp has nothing in flight while it computes).
#ifdef CUBINRT_MMA_STAGES  // experiments only
constexpr int kStages = CUBINRT_MMA_STAGES;
#else
constexpr int kStages = kSliceDim >= 128 ? 3 : 0;
#endif
constexpr int kRowChunks = kv_dim_bytes(kSliceDim) / 16;  // 16-byte chunks of the warp's part of a K or V row
constexpr int kStepChunks = kStep * kRowChunks;        // of K (or V) in one warp step
constexpr int kRing = kStages > 0 ? kStages : 1;       // slots of the ring (kStages, or 1 unused)

static_assert(kSliceDim % 64 == 0 && kSliceDim <= 256, "the mma loop covers head_dim 64, 128, 256 and 512 (in 4 slices)");
static_assert(!kDimSplit || kGroup == 8, "the dim-split loop exchanges the q.K tile's rows 0-7 only");
static_assert(kTiles == 1 || kTiles % 2 == 0, "P.V takes n-tiles in pairs");
static_assert(kGroup == 8 || kGroup == 16, "q heads are the 16 rows of the q.K tile and two 8-column P.V tiles");
// NVFP4's block scales ride the ring too: a K and a V scale row for each token of the step.
constexpr int kSfRowBytes = kKvIsNvfp4 ? kSliceDim / 16 : 0;
constexpr int kSfChunks = kKvIsNvfp4 ? kStep * kSfRowBytes / 16 : 0;  // of K's (or V's) scales in one warp step
constexpr int kStageChunks = 2 * kStepChunks + 2 * kSfChunks;          // one step in the ring: K, V, K scales, V scales
static_assert(kStages == 0 || (kRowChunks >= 8 && kVLoadBytes == 16 && kStepChunks % 32 == 0) ||
                  (kKvIsNvfp4 && kRowChunks == 4 && kVLoadBytes == 8 && kStepChunks % 32 == 0),
              "the shared-memory pipeline needs rows of 128 bytes or more and 16-byte V loads (NVFP4: 64-byte rows, 8-byte V loads)");
static_assert(kStages == 0 || !kKvIsNvfp4 || (kSfRowBytes == 8 || kSfRowBytes == 16) && 2 * kStep <= 32,
              "NVFP4's staged scale rows are one 8- or 16-byte copy a lane");

// A warp's ring of kStages steps, each K then V (kStep rows of kRowChunks chunks), swizzled. Past
// 48 KB the block's shared memory becomes dynamic (paged_decode.cu says how the host learns it).
struct Ring {
  uint4 chunk[kStages > 0 ? kWarps * kStages * kStageChunks : 1];
};
// The dim-split loop's ring and each warp's partial scores of a step (rows 0-7 of the q.K tile:
// 2 a lane and n-tile), two steps' worth, so one barrier a step keeps readers and writers apart.
struct RingAndScores {
  uint4 chunk[kStages > 0 ? kWarps * kStages * kStageChunks : 1];
  float2 scores[2][kWarps][kTiles][32];
};
// q's fragment in shared memory (kQShared): a lane's four A registers of a k-tile (two rows of
// heads) or of a pair of k-tiles (one row) at q[slot][lane], read by every warp each step instead
// of held in registers (32 of them for 16 heads at head_dim 128, or 8 heads at 256). Taken by the
// 16-head kernels of 16-bit KV on sm_90, where it ends their loop's spills (14 spill instructions
// a step at 128 registers, none with it) and was timed (H100 run 96, B64 L8192 single launch, device
// time: 128q/8kv 748-752 -> 715-716 us, 32q/1kv in 2-block clusters 118-120 -> 108, 64q/4kv 369 ->
// 361-364). Not taken by FP8 and NVFP4 (no faster: 32q/1kv FP8 62 -> 63-64 us, 128q/8kv in
// clusters 391-392 either way; nor with 4 blocks an SM), nor head_dim 256, nor other archs (not
// timed; the 4 KB it adds to the 48 KB ring would leave one block an SM on 100 KB GPUs).
// CUBINRT_Q_SHARED (experiments) forces it on or off.
#ifdef CUBINRT_Q_SHARED
constexpr bool kQSharedWanted = CUBINRT_Q_SHARED;
#elif __CUDA_ARCH__ == 900
constexpr bool kQSharedWanted = kGroup > 8 && !kKvWidened;
#else
constexpr bool kQSharedWanted = false;
#endif
constexpr bool kQShared = kQSharedWanted && !kDimSplit && kStages > 0;
struct RingAndQ : Ring {
  uint4 q[kGroup > 8 ? kKTiles : kKTiles / 2][32];
};
// Only the dim-split loop pays for the score buffer (the others' shared memory stays as it was:
// 48 KB static at head_dim 128).
using Staging = typename std::conditional<kDimSplit, RingAndScores, typename std::conditional<kQShared, RingAndQ, Ring>::type>::type;
using ScoreBuf = float2 (*)[kTiles][32];  // [warp][n-tile][lane]
__device__ __forceinline__ ScoreBuf score_buf(RingAndScores& s, int step) { return s.scores[step & 1]; }
__device__ __forceinline__ ScoreBuf score_buf(Ring&, int) { return nullptr; }

// Lane (g, t) = (lane / 4, lane % 4). Word w (two consecutive dims) of the K row a lane holds,
// and of q for the same lane: its first dim. Lanes t = 0..3 cover a row, 16 bytes each.
__device__ __forceinline__ int k_word_dim(int w, int t) { return ((w / (kKElems / 2)) * 4 + t) * kKElems + 2 * (w % (kKElems / 2)); }
// Word w of a V row a lane holds: rows g and g + 8 of dim tile w. Lanes g = 0..7 cover a row. The
// word's two elements are dims v_word_dim and v_word_dim + kPairGap: neighbours, except where
// NVFP4 widens without the hardware conversion, whose words pair codes 4 apart
// (e2m1x8_to_half2x4); q and the output follow the same pairing.
constexpr bool kPairsApart = kKvIsNvfp4 && !kE2m1Cvt;
constexpr int kPairGap = kPairsApart ? 4 : 1;
__device__ __forceinline__ int v_word_dim(int w, int g) {
  const int r = w % (kVElems / 2), first = ((w / (kVElems / 2)) * 8 + g) * kVElems;
  return kPairsApart ? first + 8 * (r / 4) + r % 4 : first + 2 * r;
}
// Token (within the step) of the u-th V row lane t holds: the k index of the P.V fragment.
__device__ __forceinline__ int v_token(int u, int t) { return 16 * (u / 4) + 2 * t + (u & 1) + ((u >> 1) & 1) * 8; }

#ifndef CUBINRT_FP8_BITS  // experiments only: 1 widens FP8 by placing bits instead of cvt
#define CUBINRT_FP8_BITS 0
#endif
// What the bit placement leaves out: e4m3's exponent bias is 8 less than half's, so the half
// holds value / 2^8 (exact, subnormals included); the scores and V are scaled back in float.
constexpr float kFp8Unit = CUBINRT_FP8_BITS && kKvDtype == CUBINRT_DTYPE_FP8_E4M3 ? 256.f : 1.f;

// Two FP8 codes of x (bytes `sel` picks) as a half pair: e5m2 is a half's top byte; e4m3 moves
// its exponent and mantissa one bit down under the sign.
__device__ __forceinline__ uint32_t fp8x2_bits(uint32_t x, uint32_t sel) {
  const uint32_t y = __byte_perm(x, 0u, sel);
  if constexpr (kKvDtype == CUBINRT_DTYPE_FP8_E5M2) return y;
  else return (y & 0x80008000u) | ((y & 0x7fff7fffu) >> 1);
}

__device__ __forceinline__ void widen_fp8(uint32_t x, uint32_t* w) {
  if constexpr (CUBINRT_FP8_BITS) { w[0] = fp8x2_bits(x, 0x1404u); w[1] = fp8x2_bits(x, 0x3424u); }
  else { w[0] = fp8x2_to_half2(x); w[1] = fp8x2_to_half2<1>(x); }
}

// NVFP4: the e2m1 codes times 2^-14 as half (e2m1x8_to_half2x4), so the KV unit is 2^14; with
// the hardware conversion they are exact.
constexpr float kKvUnit = kKvIsNvfp4 ? (kE2m1Cvt ? 1.f : 16384.f) : kFp8Unit;

// Eight e2m1 codes as four half pairs, the way this build widens them (kPairsApart, kKvUnit).
__device__ __forceinline__ void e2m1x8_widen(uint32_t x, uint32_t* w) {
  if constexpr (kE2m1Cvt) e2m1x8_cvt_to_half2x4(x, w);
  else e2m1x8_to_half2x4(x, w);
}

// One load as mma words (two elements each, the lower dim in the low half; NVFP4: to_words_scaled).
template <class Raw>
__device__ __forceinline__ void to_words(const Raw& r, uint32_t* w) {
  constexpr int kN = sizeof(Raw) / 4;
  uint32_t x[kN];
  words(r, x);
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if constexpr (kKvIsFp8) widen_fp8(x[i], w + 2 * i);
    else w[i] = x[i];
  }
}

// NVFP4: one load's codes as mma words, each times its 16 elements' e4m3 block scale: `sf` holds
// the load's scales, one a 16 codes (8 bytes), the first in the low byte. e2m1 x 2^-14 times an
// e4m3 scale is exact in half: both factors are multiples of 2^-24 in half's terms (e2m1 of
// 2^-15, e4m3 of 2^-9), with 2 and 4 significant bits, so every product is a multiple of 2^-24
// with at most 6 significant bits and at most 6 x 448 x 2^-14 (half's subnormals included).
// Unscaled (the hardware conversion) the products lie in [2^-10, 6 x 448], half's normal range.
template <class Raw>
__device__ __forceinline__ void to_words_scaled(const Raw& r, uint32_t sf, uint32_t* w) {
  constexpr int kN = sizeof(Raw) / 4;
  uint32_t x[kN];
  words(r, x);
  const uint32_t s2 = e4m3x2_to_half2(sf);
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    uint32_t c[4];
    e2m1x8_widen(x[i], c);
    const uint32_t scale = __byte_perm(s2, 0u, i / 2 == 0 ? 0x1010 : 0x3232);  // words 0-1: the first block
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&c[k]), *reinterpret_cast<const __half2*>(&scale));
      w[4 * i + k] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
}

using MmaType = typename std::conditional<kBf16, __nv_bfloat16, __half>::type;
__device__ __forceinline__ uint32_t pack2(float lo, float hi) { return bits2<MmaType>(lo, hi); }
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

// The q fragment (A of q.K) for lane (g, t): heads g and, for a chunk of more than 8 heads, g + 8
// of the chunk (zero past the chunk) at the dims of the lane's K words. Those
// dims are kKElems contiguous ones per K load, so q comes in as whole 16-byte loads (q rows are
// 16-byte aligned: the dispatcher checks q and head_dim is a multiple of 64).
template <bool kHi>
struct QFrag {
  uint32_t lo[kKTiles][2];                // head g: A registers a0, a2 (and a1, a3 of the k-tile before, without kHi)
  uint32_t hi[kHi ? kKTiles : 1][2];      // head g + 8: a1, a3 (unused without kHi)
};
// The A operand of k-tile i. Two rows of heads (kHi): heads g and g + 8 at the tile's dims. One
// row: k-tiles 2m and 2m + 1 share an A operand, q's dims of tile 2m in rows 0-7 and of tile
// 2m + 1 in rows 8-15, so q stays in registers as it is used, with no zero rows to hold. Against
// K's tile 2m the scores are rows 0-7 of the result; against tile 2m + 1, rows 8-15 (the other
// rows pair q's dims with K's of the other tile and are left unread). docs/kernels.md,
// "Instructions a step". From shared memory (QInShared) the load is volatile, so the compiler
// does not hoist it out of the loop into registers.
__device__ __forceinline__ uint4 q_a(const QFrag<true>& q, int i) { return make_uint4(q.lo[i][0], q.hi[i][0], q.lo[i][1], q.hi[i][1]); }
__device__ __forceinline__ uint4 q_a(const QFrag<false>& q, int i) {
  const int m = i & ~1;
  return make_uint4(q.lo[m][0], q.lo[m + 1][0], q.lo[m][1], q.lo[m + 1][1]);
}
template <bool kHi>
struct QInShared {
  uint32_t addr;  // of q[0][lane]
};
template <bool kHi>
__device__ __forceinline__ uint4 q_a(const QInShared<kHi>& q, int i) {
  uint4 a;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "r"(q.addr + (kHi ? i : i / 2) * static_cast<uint32_t>(sizeof(uint4[32]))));
  return a;
}

// Loads the fragment and returns the factor the scores must be multiplied by: bf16 q feeding a
// half mma (FP8 KV) is scaled by a power of two to fit half's range exactly (one factor for every
// row of the warp); in every other case q is in the mma's type already and its words are the
// fragment as loaded.
template <bool kHi>
__device__ __forceinline__ float load_q(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, int g, int t, QFrag<kHi>& q) {
  constexpr int kRows = kHi ? 2 : 1;
  constexpr int kVecsPerLoad = kKElems / 8;  // 16-byte loads of q per K load
  uint32_t qw[kRows][2 * kKTiles];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int head = g + 8 * r;
    const QType* row =
        static_cast<const QType*>(p.q) + w.b * p.q_stride_batch + (w.head0 + min(head, w.heads - 1)) * p.q_stride_head + dim0(w);
    // kKvPair: the head's q fills its half of the loop's dims; the other half is zero (pair_half).
    const int half = pair_half(head, w.heads);
#pragma unroll
    for (int j = 0; j < kKLoads; ++j)
#pragma unroll
      for (int v = 0; v < kVecsPerLoad; ++v) {
        const int d = k_word_dim(j * (kKElems / 2), t) + 8 * v;  // the load's first dim (8 of them)
        const bool mine = head < w.heads && (!kKvPair || d / kOutDim == half);
        // (Unpaired, the address is written as before pairs, which keeps those kernels' code as it was.)
        const uint4 x = mine ? __ldg(kKvPair ? reinterpret_cast<const uint4*>(row + (d - half * kOutDim))
                                             : reinterpret_cast<const uint4*>(row + k_word_dim(j * (kKElems / 2), t)) + v)
                             : make_uint4(0u, 0u, 0u, 0u);
        words(x, qw[r] + (j * kVecsPerLoad + v) * 4);
      }
  }
  if constexpr (kPairsApart) {
    // NVFP4's words pair dims k and k + 4 of every 8 (kPairGap): q's follow.
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < 2 * kKTiles; i += 4) {
        const uint32_t n[4] = {qw[r][i], qw[r][i + 1], qw[r][i + 2], qw[r][i + 3]};
#pragma unroll
        for (int k = 0; k < 4; ++k) qw[r][i + k] = __byte_perm(n[k / 2], n[2 + k / 2], k % 2 ? 0x7632 : 0x5410);
      }
  }
  float factor = 1.f;
  if constexpr (kKvWidened && kQDtype == CUBINRT_DTYPE_BF16) {
    float amax = 0.f;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < 2 * kKTiles; ++i) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qw[r][i]));
        amax = fmaxf(amax, fmaxf(fabsf(x.x), fabsf(x.y)));
      }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    int e = 0;
    frexpf(amax, &e);  // amax < 2^e
    const int shift = e > 15 ? e - 15 : 0;
    factor = ldexpf(1.f, shift);
    const float inv = ldexpf(1.f, -shift);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < 2 * kKTiles; ++i) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&qw[r][i]));
        qw[r][i] = pack2(x.x * inv, x.y * inv);
      }
  }
#pragma unroll
  for (int i = 0; i < kKTiles; ++i) {
    q.lo[i][0] = qw[0][2 * i];
    q.lo[i][1] = qw[0][2 * i + 1];
    if constexpr (kHi) {
      q.hi[i][0] = qw[kRows - 1][2 * i];
      q.hi[i][1] = qw[kRows - 1][2 * i + 1];
    }
  }
  return factor;
}

// NVFP4 block scales a load covers: one a 16 elements (at least one: head_dim 64's V loads take
// half a block).
constexpr int kKScales = kKvIsNvfp4 ? (kKElems >= 16 ? kKElems / 16 : 1) : 0;
constexpr int kVScales = kKvIsNvfp4 ? (kVElems >= 16 ? kVElems / 16 : 1) : 0;
static_assert(kKScales <= 2 && kVScales <= 2, "a load's scales are one 16-bit load at most");
constexpr int kSfArrays = kKvIsNvfp4 ? 1 : 0;  // the scale arrays below are empty for other dtypes

struct StepLoads {
  KRaw k[kTiles][kKLoads];   // token n * 8 + g of each n-tile
  VRaw v[kVTokens][kVLoads];  // tokens v_token(u, t)
  uint32_t ksf[kSfArrays * kTiles][kKLoads];     // NVFP4: each K load's block scales (low byte first)
  uint32_t vsf[kSfArrays * kVTokens][kVLoads];
};

// One load's block scales from the scale row `row` (byte `first` is the load's first).
template <int kCount>
__device__ __forceinline__ uint32_t load_scales(const uint8_t* row, int first) {
  if constexpr (kCount == 2) return *reinterpret_cast<const unsigned short*>(row + first);
  else return row[first];
}

// The page of each 16-token group of the step at t0; a group wholly past the end takes the last
// valid page (never past the block-table row), and its values are masked out.
struct StepPages {
  int32_t page[kLookups];
};
__device__ __forceinline__ StepPages step_pages(const int32_t* pages, int t0, int t_end) {
  StepPages sp;
#pragma unroll
  for (int i = 0; i < kLookups; ++i) sp.page[i] = pages[static_cast<unsigned>(min(t0 + i * kGroupTokens, t_end - 1)) / kPageSize];
  return sp;
}

// Element offset (within a kv head) of the first token of group i of the step at t0 (tokens are
// never negative: the unsigned modulo is a mask).
__device__ __forceinline__ int64_t group_base(const CubinrtPagedDecodeParamsV6& p, const StepPages& sp, int t0, int i) {
  const int tok = static_cast<int>(static_cast<unsigned>(t0 + i * kGroupTokens) % kPageSize);
  return static_cast<int64_t>(sp.page[i]) * p.kv_stride_page + static_cast<int64_t>(tok) * p.kv_stride_token;
}

// Byte offset (within a kv head) of the NVFP4 scale row of token `row` of the step at t0.
__device__ __forceinline__ int64_t sf_row(const CubinrtPagedDecodeParamsV6& p, const StepPages& sp, int t0, int row) {
  const int i = row / kGroupTokens;
  return static_cast<int64_t>(sp.page[i]) * p.sf_stride_page + ((t0 + i * kGroupTokens) % kPageSize + row % kGroupTokens) * p.sf_stride_token;
}

// Where a warp's K, V and (NVFP4) scale rows start: its kv head and, at head_dim 512, its dims.
struct KvBases {
  const char* k;
  const char* v;
  const uint8_t* ksf;
  const uint8_t* vsf;
  int slice;  // the warp's quarter of the dims at head_dim 512, else 0
};

// V's scales interleaved by 4 tokens (kVsfQuads, docs/formats.md): the rows of a 4-token quad,
// read as one array, hold block s of token t at byte 4 s + t % 4 instead of (t % 4) * (head_dim /
// 16) + s. A quad never straddles a page or a step, and a step's scale rows are copied whole either
// way, so only where a lane reads a scale changes (and, at head_dim 512, which row of the quad
// holds a warp's quarter of the blocks: issue_step).
static_assert(!kVsfQuads || (kStep % 4 == 0 && kPageSize % 4 == 0 && kSfRowBytes % 4 == 0), "whole quads and groups of 4 blocks");
static_assert(!kVsfQuads || !kDimSplit || kStages > 0, "the dim-split loop reads interleaved scale rows through the ring");
// Where the V scale of block s (of the warp's kSfRowBytes) of the step's token row r sits: which
// row of the step holds it (one of r's quad) and its byte in that row. From global memory each row
// is found through its page (load_step); the ring keeps a step's rows in order, kSfRowBytes apart,
// so read_step takes the same place as one offset.
struct VsfPlace {
  int row;
  int col;
};
__device__ __forceinline__ VsfPlace vsf_place(int r, int s) {
  if constexpr (!kVsfQuads) return {r, s};
  // Row length of the quad read as one array; kSfRowBytes is 0 where KV is not NVFP4, and this
  // non-template function is compiled (never called) there too: 1 keeps nvcc's constant folding
  // from warning of a division by zero.
  constexpr int kRow = kSfRowBytes > 0 ? kSfRowBytes : 1;
  const int k = 4 * s + (r & 3);  // in the quad's rows read as one array
  return {(r & ~3) + k / kRow, k % kRow};
}

// Issues one warp step's K and V loads (and NVFP4's scales).
__device__ __forceinline__ void load_step(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, const int32_t* pages, const KvBases& kv,
                                          int t0, int g, int t, StepLoads& out) {
  const StepPages sp = step_pages(pages, t0, w.t_end);
  int64_t base[kLookups];
#pragma unroll
  for (int i = 0; i < kLookups; ++i) base[i] = group_base(p, sp, t0, i);
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    const int row = n * 8 + g;
    const int64_t off = (base[row / kGroupTokens] + (row % kGroupTokens) * p.kv_stride_token) * kKvBytes;
#pragma unroll
    for (int j = 0; j < kKLoads; ++j) {
      out.k[n][j] = __ldg(reinterpret_cast<const KRaw*>(kv.k + off + kv_dim_bytes((4 * j + t) * kKElems)));
      if constexpr (kKvIsNvfp4) out.ksf[n][j] = load_scales<kKScales>(kv.ksf + sf_row(p, sp, t0, row), (4 * j + t) * kKElems / 16);
    }
  }
#pragma unroll
  for (int u = 0; u < kVTokens; ++u) {
    const int row = v_token(u, t);
    const int64_t off = (base[row / kGroupTokens] + (row % kGroupTokens) * p.kv_stride_token) * kKvBytes;
#pragma unroll
    for (int j = 0; j < kVLoads; ++j) {
      out.v[u][j] = __ldg(reinterpret_cast<const VRaw*>(kv.v + off + kv_dim_bytes((8 * j + g) * kVElems)));
      if constexpr (kKvIsNvfp4) {
        const int s = (8 * j + g) * kVElems / 16;
        if constexpr (!kVsfQuads) {
          out.vsf[u][j] = load_scales<kVScales>(kv.vsf + sf_row(p, sp, t0, row), s);
        } else {
          out.vsf[u][j] = 0;
#pragma unroll
          for (int i = 0; i < kVScales; ++i) {
            const VsfPlace at = vsf_place(row, s + i);
            out.vsf[u][j] |= static_cast<uint32_t>(kv.vsf[sf_row(p, sp, t0, at.row) + at.col]) << (8 * i);
          }
        }
      }
    }
  }
}

// Where chunk c of row r of a staged step lives: XOR-swizzled within each 128-byte span so that
// neither the K reads (rows 2a and 2a + 1, chunks 4j..4j+3 per quarter warp) nor the V reads
// (rows b + 2t, chunks 2a and 2a + 1) nor the cp.async writes meet in a bank.
// NVFP4's 64-byte rows (head_dim 128) pair up into 128-byte spans of 8 chunks, a row's 4 chunks
// at 4 * (r & 1), XOR-ed by twice rows r / 2 mod 4: the V reads (8 bytes a lane, rows b + 2t, of
// one parity) then fill all 8 chunks of a span, and the K reads and the copies stay apart too.
__device__ __forceinline__ int staged(int r, int c) {
  if constexpr (kRowChunks == 4) return (r >> 1) * 8 + ((4 * (r & 1) + c) ^ (((r >> 1) & 3) << 1));
  else return r * kRowChunks + (c ^ (((r & 1) << 2) ^ (r & 6)));
}

// The ring is addressed in the shared state space, 32 bits: a chunk of a slot is then one add from
// the slot's address, where generic pointers cost every step the CTA's shared window (S2UR, ULEA)
// and a scaled add per load.
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
// CUBINRT_L2_PREFETCH=64|128|256 (experiments only; the catalog build never sets it): every
// cp.async of the ring also asks the L2 to fetch that many bytes around it (PTX .L2::<n>B), so
// that a row shorter than a line (NVFP4 head_dim 128 in NHD pages: 64 bytes, the next kv head's
// 64 bytes beside it) comes from DRAM in one access, and the single-sequence shapes keep more
// bytes in flight per request.
#if !defined(CUBINRT_L2_PREFETCH)
#define CUBINRT_CP_L2 ""
#elif CUBINRT_L2_PREFETCH == 64
#define CUBINRT_CP_L2 ".L2::64B"
#elif CUBINRT_L2_PREFETCH == 128
#define CUBINRT_CP_L2 ".L2::128B"
#elif CUBINRT_L2_PREFETCH == 256
#define CUBINRT_CP_L2 ".L2::256B"
#else
#error "CUBINRT_L2_PREFETCH is 64, 128 or 256"
#endif
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global" CUBINRT_CP_L2 " [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory"); }
// An NVFP4 scale row: 8 bytes (head_dim 128: through L1, the only way 8-byte copies go) or 16.
template <int kBytes>
__device__ __forceinline__ void cp_async_row(uint32_t dst, const void* src) {
  if constexpr (kBytes == 16) asm volatile("cp.async.cg.shared.global" CUBINRT_CP_L2 " [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
  else asm volatile("cp.async.ca.shared.global" CUBINRT_CP_L2 " [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}
// Loads from the ring, at a shared address: as plain loads through the generic pointer that the
// compiler sees come from the shared window (so they are LDS with the address as it is, and
// ptxas schedules them as it likes, where asm loads would pin their order).
__device__ __forceinline__ const uint8_t* ring_bytes(uint32_t a) { return static_cast<const uint8_t*>(__cvta_shared_to_generic(a)); }
template <class Raw>
__device__ __forceinline__ Raw lds(uint32_t a) { return *reinterpret_cast<const Raw*>(ring_bytes(a)); }

// Tokens between a warp's steps: warps that split the tokens take every kWarps-th step; warps that
// split the dims, every step.
constexpr int kStride = kDimSplit ? kStep : kWarps * kStep;
static_assert(kStages == 0 || kLookups == 1, "a staged step lies in one page");
// Where a step sits in its page is the same for all of a warp's steps where the stride is a
// multiple of the page (every catalog variant but page 64 with 8-token steps, and head_dim 512's
// dim split at pages 32 and 64).
constexpr bool kInPageFixed = kStride % kPageSize == 0;

// What a lane's copies of every staged step share beyond the kv head's K and V (KvBases),
// computed once a warp (copy_lane): where the warp's first token sits in its page and, for NVFP4,
// the lane's scale-row source at page 0. The lane's row and chunk of K and V are recomputed each
// step from the lane index rather than kept: the 16-head bf16 loop has no register to spare.
struct CopyLane {
  const uint8_t* sf;  // NVFP4 (lanes below 2 kStep): K's scale row, or V's
  int in_page;        // the warp's first token's place in its page
};
__device__ __forceinline__ CopyLane copy_lane(const CubinrtPagedDecodeParamsV6& p, int lane, const KvBases& kv, int first) {
  CopyLane cl;
  cl.in_page = first & (kPageSize - 1);
  cl.sf = nullptr;
  if constexpr (kKvIsNvfp4) {
    const int row = lane % kStep;
    const bool is_v = lane >= kStep;
    int row_at = row, extra = 0;
    // Interleaved, a warp's quarter of head_dim 512's 32 blocks is bytes 32 w to 32 w + 31 of each
    // quad's array: all of the quad's row w, which the warp's 4 lanes of the quad copy in 4 parts,
    // so that its staged quad reads as head_dim 128's.
    if constexpr (kVsfQuads && kDimSplit) {
      static_assert(kWarps == 4, "a warp's blocks of a quad are one row of it");
      if (is_v) { row_at = (row & ~3) + kv.slice; extra = ((row & 3) - kv.slice) * kSfRowBytes; }
    }
    cl.sf = (is_v ? kv.vsf : kv.ksf) + static_cast<int64_t>(cl.in_page + row_at) * p.sf_stride_token + extra;
  }
  return cl;
}

// Starts copying one warp step's K and V rows into the slot at `slot`: the warp's lanes take
// consecutive chunks, so each row is read as whole 32-byte sectors. Copy k of a lane is row
// r0 + k * kCopyRows of the step at chunk c, a fixed distance after copy k - 1 (a step never
// leaves its page), and V's copies are K's moved by the distance between the caches; what a step
// computes is its page's offset (and, where the steps do not keep their place in the page, that
// place): docs/kernels.md, "Instructions a step".
__device__ __forceinline__ void issue_step(const CubinrtPagedDecodeParamsV6& p, const KvBases& kv, const CopyLane& cl, int32_t page, int t0,
                                           int lane, uint32_t slot) {
  static_assert(32 % kRowChunks == 0, "a copy of the warp covers whole rows");
  constexpr int kCopyRows = 32 / kRowChunks;
  const int r0 = lane / kRowChunks, c = lane % kRowChunks;
  // Pages are indices, never negative: unsigned, the product is one wide multiply.
  const uint64_t pg = static_cast<uint32_t>(page);
  const int in_page = kInPageFixed ? cl.in_page : t0 & (kPageSize - 1);
  const char* src = kv.k + static_cast<int64_t>(pg * static_cast<uint64_t>(p.kv_stride_page * kKvBytes)) +
                    (in_page + r0) * p.kv_stride_token * kKvBytes + c * 16;
  const int64_t v_minus_k = kv.v - kv.k;
#pragma unroll
  for (int k = 0; k < kStepChunks / 32; ++k) {
    const uint32_t dst = slot + 16 * staged(r0 + k * kCopyRows, c);
    cp_async16(dst, src);
    cp_async16(dst + 16 * kStepChunks, src + v_minus_k);
    src += kCopyRows * p.kv_stride_token * kKvBytes;
  }
  if constexpr (kKvIsNvfp4) {
    // Lanes 0 .. kStep - 1 copy K's scale rows, the next kStep V's (copy_lane chose the source).
    if (lane < 2 * kStep) {
      const uint32_t dst = slot + 16 * 2 * kStepChunks + (lane >= kStep ? 16 * kSfChunks : 0) + (lane % kStep) * kSfRowBytes;
      cp_async_row<kSfRowBytes>(dst, cl.sf + static_cast<int64_t>(pg * static_cast<uint64_t>(p.sf_stride_page)) + (in_page - cl.in_page) * p.sf_stride_token);
    }
  }
}

// A staged step's K and V as the lane's operand loads (the same rows and chunks load_step takes),
// from the slot at `slot`.
__device__ __forceinline__ void read_step(uint32_t slot, int g, int t, StepLoads& out) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int j = 0; j < kKLoads; ++j) out.k[n][j] = lds<KRaw>(slot + 16 * staged(n * 8 + g, 4 * j + t));
#pragma unroll
  for (int u = 0; u < kVTokens; ++u)
#pragma unroll
    for (int j = 0; j < kVLoads; ++j) {
      const int at = (8 * j + g) * kVLoadBytes;  // the load's first byte in its row (NVFP4's 8-byte loads: half a chunk)
      out.v[u][j] = lds<VRaw>(slot + 16 * (kStepChunks + staged(v_token(u, t), at / 16)) + at % 16);
    }
  if constexpr (kKvIsNvfp4) {
    const uint32_t ksf = slot + 16 * 2 * kStepChunks;
    const uint32_t vsf = ksf + 16 * kSfChunks;
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int j = 0; j < kKLoads; ++j) out.ksf[n][j] = load_scales<kKScales>(ring_bytes(ksf + (n * 8 + g) * kSfRowBytes + (4 * j + t) * kKElems / 16), 0);
#pragma unroll
    for (int u = 0; u < kVTokens; ++u)
#pragma unroll
      for (int j = 0; j < kVLoads; ++j) {
        const int r = v_token(u, t), s = (8 * j + g) * kVElems / 16;
        if constexpr (!kVsfQuads) {
          out.vsf[u][j] = load_scales<kVScales>(ring_bytes(vsf + r * kSfRowBytes + s), 0);
        } else {  // vsf_place's row * kSfRowBytes + byte, as one offset into the quad's contiguous rows
          // (the division and remainder, which ptxas keeps, cost head_dim 256's loop 16 instructions a step)
          const uint8_t* at = ring_bytes(vsf + (r & ~3) * kSfRowBytes + 4 * s + (r & 3));
          out.vsf[u][j] = kVScales == 2 ? at[0] | static_cast<uint32_t>(at[4]) << 8 : at[0];
        }
      }
  }
}

// The online-softmax state of one row of heads in a warp: head g's running max and sum (per
// quad) and O^T for the row's 8 heads.
struct RowState {
  float acc[kKTiles][4];  // O^T tile i: (dim lo, head 2t), (lo, 2t+1), (hi, 2t), (hi, 2t+1)
  float m;                // head g's running max (the same in the 4 lanes of a quad)
  float l;                // head g's sum over this lane's tokens
};
template <bool kHi>
struct Running {
  RowState row[kHi ? 2 : 1];  // heads 0-7 of the chunk, then 8-15
};

#ifndef CUBINRT_RESCALE_SLACK  // experiments only: -1 rescales every step, as before run 48
#define CUBINRT_RESCALE_SLACK 8
#endif
// How far (log2 units) a head's running max may trail its true max before the accumulator is
// rescaled. The weights exp2(s - m) then reach at most 2^slack, which the mma type (half or bf16)
// and the float sums hold exactly as well as weights up to 1; in exchange a rescale (a multiply
// of every accumulator and two shuffles) happens only when some head's max jumps by more than
// the slack, which after a sequence's first steps is rare. -1: every step (the exact running max).
constexpr float kRescaleSlack = CUBINRT_RESCALE_SLACK;

// exp2 of a score's distance from its head's running max (at most kRescaleSlack) as one MUFU.EX2
// (ex2.approx.ftz, exp2f's own approximation): exp2f spends four more instructions and two
// predicates a call keeping a result below 2^-126 subnormal rather than zero: a weight that half
// cannot hold at all and that, beside the row's largest weight (at least 1), is far below float's
// rounding of the row's sum.
__device__ __forceinline__ float exp2_weight(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One row's online-softmax update for a step: scores s (head g, tokens n*8 + 2t + e) in, the
// weights rounded to the mma type out (the sum adds the rounded values, so the normalisation
// matches what P.V multiplies), the row's accumulator rescaled where its max moved.
__device__ __forceinline__ void update_row(const float (&s)[kTiles][2], const bool (&valid)[kTiles][2], int t, RowState& r,
                                           uint32_t (&pb)[kTiles]) {
  float mx = r.m;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) mx = fmaxf(mx, fmaxf(s[n][0], s[n][1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const bool grow = kRescaleSlack < 0.f || mx > r.m + kRescaleSlack;
  // Warp-uniform: either no head of the warp rescales this step, or every lane takes part in the
  // shuffles that bring each accumulator column its head's factor.
  if (__any_sync(0xffffffffu, grow)) {
    const float m_new = grow ? mx : r.m;
    const float corr = exp2_weight(r.m - m_new);
    r.m = m_new;
    r.l *= corr;
    // The accumulator's columns are heads 2t and 2t + 1, whose corrections live in quads 2t, 2t + 1.
    const float c_lo = __shfl_sync(0xffffffffu, corr, 8 * t), c_hi = __shfl_sync(0xffffffffu, corr, 8 * t + 4);
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) { r.acc[i][0] *= c_lo; r.acc[i][1] *= c_hi; r.acc[i][2] *= c_lo; r.acc[i][3] *= c_hi; }
  }
  float psum = 0.f;
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    pb[n] = pack2(valid[n][0] ? exp2_weight(s[n][0] - r.m) : 0.f, valid[n][1] ? exp2_weight(s[n][1] - r.m) : 0.f);
    const float2 x = unpack2(pb[n]);
    psum += x.x + x.y;
  }
  r.l += psum;
}

// O^T += V^T P^T for one row of heads (its weights pb as the B operand).
// V^T as the P.V mma's A operand: vt[p][0][i] holds dim tile i's low dim (row g) for V rows 2p and
// 2p + 1 (the k index pair 2t, 2t + 1, or 2t + 8, 2t + 9), vt[p][1][i] its high dim (row g + 8).
using VtWords = uint32_t[kVTokens / 2][2][kKTiles];

// From rows' words (each two dims of one V row) to V^T: two byte permutes a pair of words.
__device__ __forceinline__ void transpose_v(const uint32_t (&vw)[kVTokens][kKTiles], VtWords& vt) {
#pragma unroll
  for (int p = 0; p < kVTokens / 2; ++p)
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) {
      vt[p][0][i] = __byte_perm(vw[2 * p][i], vw[2 * p + 1][i], 0x5410);
      vt[p][1][i] = __byte_perm(vw[2 * p][i], vw[2 * p + 1][i], 0x7632);
    }
}

// FP8 and NVFP4 straight to V^T: the codes of rows 2p and 2p + 1 are interleaved before they are
// widened, so every word the widening makes is already a (row 2p, row 2p + 1) pair of one dim:
// two byte permutes for 4 codes (FP8) or 8 (NVFP4) of each row, instead of two for every pair of
// words as 16-bit KV needs (transpose_v). NVFP4's block scales are paired the same way. Rows past
// the end become zero codes and, for NVFP4, zero scales (they may hold anything, NaN scales
// included), so they add 0; a zero code is zero in every encoding. kWhole: no row is past it.
template <bool kWhole>
__device__ __forceinline__ void narrow_vt(const StepLoads& cur, int t0, int t_end, int t, VtWords& vt) {
  constexpr int kN = sizeof(VRaw) / 4;
#pragma unroll
  for (int p = 0; p < kVTokens / 2; ++p) {
    const bool in_a = kWhole || t0 + v_token(2 * p, t) < t_end, in_b = kWhole || t0 + v_token(2 * p + 1, t) < t_end;
#pragma unroll
    for (int j = 0; j < kVLoads; ++j) {
      uint32_t xa[kN], xb[kN];
      words(cur.v[2 * p][j], xa);
      words(cur.v[2 * p + 1][j], xb);
#pragma unroll
      for (int m = 0; m < kN; ++m) {
        const uint32_t a = in_a ? xa[m] : 0u, b = in_b ? xb[m] : 0u;
        const int i = j * (kVElems / 2) + (kKvIsNvfp4 ? 4 : 2) * m;  // the load's first word, then word m's
        if constexpr (kKvIsNvfp4) {
          const uint32_t sa = e4m3x2_to_half2(in_a ? cur.vsf[2 * p][j] : 0u), sb = e4m3x2_to_half2(in_b ? cur.vsf[2 * p + 1][j] : 0u);
          const uint32_t scale = __byte_perm(sa, sb, m / 2 == 0 ? 0x5410 : 0x7632);  // words 0-1: the first block
          uint32_t lo[4], hi[4];
          if constexpr (kE2m1Cvt) {
            // Each row's codes as neighbour pairs (2k, 2k + 1), then the rows' pairs of one dim.
            uint32_t ra[4], rb[4];
            e2m1x8_cvt_to_half2x4(a, ra);
            e2m1x8_cvt_to_half2x4(b, rb);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              lo[k] = __byte_perm(ra[k], rb[k], 0x5410);  // dim 8m + 2k
              hi[k] = __byte_perm(ra[k], rb[k], 0x7632);  // dim 8m + 2k + 1
            }
          } else {
            e2m1x8_to_half2x4(__byte_perm(a, b, 0x5410), lo);  // codes 0-3 of each row: dims 8m + k
            e2m1x8_to_half2x4(__byte_perm(a, b, 0x7632), hi);  // codes 4-7: dims 8m + k + 4
          }
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const __half2 l = __hmul2(*reinterpret_cast<const __half2*>(&lo[k]), *reinterpret_cast<const __half2*>(&scale));
            const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&hi[k]), *reinterpret_cast<const __half2*>(&scale));
            vt[p][0][i + k] = *reinterpret_cast<const uint32_t*>(&l);
            vt[p][1][i + k] = *reinterpret_cast<const uint32_t*>(&h);
          }
        } else {
          const uint32_t lo = __byte_perm(a, b, 0x5140), hi = __byte_perm(a, b, 0x7362);  // codes 0-1, 2-3 of each row
          vt[p][0][i] = fp8x2_to_half2(lo);  // the words of codes (0, 1) and (2, 3)
          vt[p][1][i] = fp8x2_to_half2<1>(lo);
          vt[p][0][i + 1] = fp8x2_to_half2(hi);
          vt[p][1][i + 1] = fp8x2_to_half2<1>(hi);
        }
      }
    }
  }
}

__device__ __forceinline__ void pv_row(const VtWords& vt, const uint32_t (&pb)[kTiles], RowState& r) {
#pragma unroll
  for (int i = 0; i < kKTiles; ++i) {
    if constexpr (kTiles == 1) {
      mma_k8(r.acc[i], vt[0][0][i], vt[0][1][i], pb[0]);
    } else {
#pragma unroll
      for (int q = 0; q < kTiles / 2; ++q)
        mma_k16(r.acc[i], vt[2 * q][0][i], vt[2 * q][1][i], vt[2 * q + 1][0][i], vt[2 * q + 1][1][i], pb[2 * q], pb[2 * q + 1]);
    }
  }
}

// What a warp of the dim-split loop needs to sum its partial scores with the others': this step's
// buffer, its place in it, and its q fragment's power-of-two factor (each warp scales its own
// slice of q, so partials are brought to one scale before they are added).
struct ScoreShare {
  ScoreBuf buf;
  int warp;
  int lane;
  float qf;
};

__device__ __forceinline__ void named_barrier() { asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory"); }

// One warp step's math on its loaded K and V: scores, the online softmax update and P.V, for one
// row of heads or two (kHi: rows 8-15 of the q.K tile are heads 8-15, whose scores come out of
// the same mmas; their P.V is a second 8-column tile over the same V words). kWhole: every token
// of the step is below t_end, so nothing is masked (the compiler drops the checks and selects).
template <bool kHi, bool kWhole, class QSource>
__device__ __forceinline__ void consume_step(const StepLoads& cur, int t0, int t_end, int g, int t, const QSource& q, float sscale,
                                             Running<kHi>& r, const ScoreShare& share) {
  // Scores of heads g (and g + 8) for tokens n*8 + 2t and n*8 + 2t + 1 of each n-tile.
  float s[kHi ? 2 : 1][kTiles][2];
  bool valid[kTiles][2];
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    uint32_t kw[2 * kKTiles];
#pragma unroll
    for (int j = 0; j < kKLoads; ++j) {
      if constexpr (kKvIsNvfp4) to_words_scaled(cur.k[n][j], cur.ksf[n][j], kw + j * (kKElems / 2));
      else to_words(cur.k[n][j], kw + j * (kKElems / 2));
    }
    // Two independent accumulators halve the dependent chain of mmas (H200 run 18: FP8 D256
    // 542 -> 512 us at B64 L8192; at B1 L128, where one warp per scheduler waits on every
    // latency, 6.2 -> 6.0 us).
    float c2[2][4] = {};
    uint4 a;
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) {
      if (kHi || i % 2 == 0) a = q_a(q, i);  // one row: tiles 2m and 2m + 1 share it
      mma_k16(c2[i & 1], a.x, a.y, a.z, a.w, kw[2 * i], kw[2 * i + 1]);
    }
    const float c[4] = {c2[0][0] + c2[1][kHi ? 0 : 2], c2[0][1] + c2[1][kHi ? 1 : 3], c2[0][2] + c2[1][2], c2[0][3] + c2[1][3]};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      valid[n][e] = kWhole || t0 + n * 8 + 2 * t + e < t_end;
      s[0][n][e] = valid[n][e] ? c[e] * sscale : kNegBig;
      if constexpr (kHi) s[kHi ? 1 : 0][n][e] = valid[n][e] ? c[2 + e] * sscale : kNegBig;
    }
    if constexpr (kDimSplit) share.buf[share.warp][n][share.lane] = make_float2(c[0] * share.qf, c[1] * share.qf);
  }
  if constexpr (kDimSplit) {
    // Every warp's partial scores of this step are written: add them (in warp order, so every
    // warp gets the same sums and keeps the same running max).
    named_barrier();
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      float2 sum = share.buf[0][n][share.lane];
#pragma unroll
      for (int wp = 1; wp < kWarps; ++wp) {
        const float2 x = share.buf[wp][n][share.lane];
        sum.x += x.x;
        sum.y += x.y;
      }
      s[0][n][0] = valid[n][0] ? sum.x * sscale : kNegBig;
      s[0][n][1] = valid[n][1] ? sum.y * sscale : kNegBig;
    }
  }
  uint32_t pb[kHi ? 2 : 1][kTiles];
#pragma unroll
  for (int h = 0; h < (kHi ? 2 : 1); ++h) update_row(s[h], valid, t, r.row[h], pb[h]);

  VtWords vt;
  if constexpr (kKvIsNvfp4 || (kKvIsFp8 && !CUBINRT_FP8_BITS)) {
    narrow_vt<kWhole>(cur, t0, t_end, t, vt);
  } else {
    uint32_t vw[kVTokens][kKTiles];
#pragma unroll
    for (int u = 0; u < kVTokens; ++u) {
#pragma unroll
      for (int j = 0; j < kVLoads; ++j) to_words(cur.v[u][j], vw[u] + j * (kVElems / 2));
      // Rows past the end may hold anything (NaN included); zero them so 0 * V stays 0.
      if (!kWhole && t0 + v_token(u, t) >= t_end)
#pragma unroll
        for (int i = 0; i < kKTiles; ++i) vw[u][i] = 0u;
    }
    transpose_v(vw, vt);
  }
#pragma unroll
  for (int h = 0; h < (kHi ? 2 : 1); ++h) pv_row(vt, pb[h], r.row[h]);
}

// Every step of this warp (tokens first, first + kStride, ... below t_end), through registers or
// through the shared-memory ring.
template <bool kHi, class QSource>
__device__ __forceinline__ void walk_steps(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, Staging& stage, int g, int t,
                                           const QSource& q, float qf, float sscale, Running<kHi>& r) {
  const int32_t* pages = p.block_table + static_cast<int64_t>(w.b) * p.block_table_stride;
  // kKvPair: the pair's first kv head, whose row runs on into the second's (the plan's condition).
  const int64_t kv_head = kKvPair ? 2 * static_cast<int64_t>(w.kvh) : w.kvh;
  const int64_t head = kv_head * p.kv_stride_head * kKvBytes + kv_dim_bytes(dim0(w));
  const char* kbase = static_cast<const char*>(p.k_cache) + head;
  const char* vbase = static_cast<const char*>(p.v_cache) + head;
  const int64_t sf_head = kKvIsNvfp4 ? kv_head * p.sf_stride_head + dim0(w) / 16 : 0;
  const KvBases kv{kbase, vbase, kKvIsNvfp4 ? p.k_sf + sf_head : nullptr, kKvIsNvfp4 ? p.v_sf + sf_head : nullptr, kDimSplit ? w.warp : 0};
  const int first = w.t_begin + (kDimSplit ? 0 : w.warp * kStep);
  ScoreShare share{nullptr, w.warp, w.lane, qf};

  if constexpr (kStages > 0) {
    constexpr uint32_t kSlotBytes = 16 * kStageChunks, kRingBytes = kRing * kSlotBytes;
    const uint32_t ring = smem_addr(stage.chunk + w.warp * kStages * kStageChunks);
    const CopyLane cl = copy_lane(p, w.lane, kv, first);
    const int steps = first < w.t_end ? (w.t_end - first + kStride - 1) / kStride : 0;
    // Every iteration commits one group (empty past the last step), so "all but the newest
    // kStages - 1 groups done" always means "this step's group done".
#pragma unroll
    for (int k = 0; k < kStages - 1; ++k) {
      const int t0 = first + k * kStride;
      if (k < steps) issue_step(p, kv, cl, step_pages(pages, t0, w.t_end).page[0], t0, w.lane, ring + k * kSlotBytes);
      cp_async_commit();
    }
    // Each step's page is looked up one iteration before its copies go out, so the block-table
    // load never stalls the issue.
    int32_t next = 0;
    if (kStages - 1 < steps) next = step_pages(pages, first + (kStages - 1) * kStride, w.t_end).page[0];
    // Step k reads slot k mod kRing and refills the slot step k - 1 read (step k + kStages - 1's):
    // an offset advanced a slot a step (a modulo of the step index costs 5 instructions a use).
    uint32_t at = 0;
    const auto step = [&](int k, auto whole) {
      const int ahead = k + kStages - 1;  // into the slot step k - 1 used, which every lane has read
      const uint32_t before = at == 0 ? kRingBytes - kSlotBytes : at - kSlotBytes;
      if (ahead < steps) issue_step(p, kv, cl, next, first + ahead * kStride, w.lane, ring + before);
      if (ahead + 1 < steps) next = step_pages(pages, first + (ahead + 1) * kStride, w.t_end).page[0];
      cp_async_commit();
      cp_async_wait<kStages - 1>();
      __syncwarp();  // the other lanes' copies of step k are visible
      if (k == 0) CUBINRT_TRACE_FIRST_STEP();
      StepLoads cur;
      read_step(ring + at, g, t, cur);
      share.buf = score_buf(stage, k);
      consume_step<kHi, decltype(whole)::value>(cur, first + k * kStride, w.t_end, g, t, q, sscale, r, share);
      __syncwarp();  // every lane has read step k before its slot is refilled
      at = at + kSlotBytes == kRingBytes ? 0 : at + kSlotBytes;
    };
    // Only a warp's last step can reach past t_end (each step starts kStride >= kStep tokens
    // before the next), so the loop runs the unmasked math and the last step the masked one.
    for (int k = 0; k < steps - 1; ++k) step(k, std::true_type{});
    if (steps > 0) step(steps - 1, std::false_type{});
  } else {
    const auto step = [&](int t0, int k, auto whole) {
      StepLoads cur;
      load_step(p, w, pages, kv, t0, g, t, cur);
      share.buf = score_buf(stage, k);
      consume_step<kHi, decltype(whole)::value>(cur, t0, w.t_end, g, t, q, sscale, r, share);
    };
    int t0 = first, k = 0;
    for (; t0 + kStride < w.t_end; t0 += kStride, ++k) step(t0, k, std::true_type{});
    if (t0 < w.t_end) step(t0, k, std::false_type{});
  }
}

// Puts the fragment in shared memory (kQShared): every warp has loaded the same one, and each
// stores its share of the slots. (A template: Staging has q only where kQShared.)
template <bool kHi, class S>
__device__ __forceinline__ QInShared<kHi> share_q(S& stage, const QFrag<kHi>& q, const BlockWork& w) {
  constexpr int kSlots = kHi ? kKTiles : kKTiles / 2;
#pragma unroll
  for (int i = 0; i < kSlots; ++i)
    if (i % kWarps == w.warp) stage.q[i][w.lane] = q_a(q, kHi ? i : 2 * i);
  __syncthreads();
  return QInShared<kHi>{smem_addr(&stage.q[0][w.lane])};
}

// `stage` and `out` may share memory: every warp is done with the ring before any writes out.
template <bool kHi>
__device__ __forceinline__ void warp_partial_rows(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, Staging& stage, WarpPartials& out) {
  const int g = w.lane >> 2, t = w.lane & 3;
  QFrag<kHi> q;
  const float qf = load_q<kHi>(p, w, g, t, q);
  const float scale = p.softmax_scale * kLog2e * p.k_scale * kKvUnit;
  // Split dims: the partials are brought to one scale (qf) before they are added, then scaled.
  const float sscale = kDimSplit ? scale : qf * scale;
  const float vscale = p.v_scale * kKvUnit;

  Running<kHi> r;
#pragma unroll
  for (int h = 0; h < (kHi ? 2 : 1); ++h) {
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) r.row[h].acc[i][0] = r.row[h].acc[i][1] = r.row[h].acc[i][2] = r.row[h].acc[i][3] = 0.f;
    r.row[h].m = kNegBig;
    r.row[h].l = 0.f;
  }
  if constexpr (kQShared) {
    walk_steps<kHi>(p, w, stage, g, t, share_q<kHi>(stage, q, w), qf, sscale, r);
  } else {
    walk_steps<kHi>(p, w, stage, g, t, q, qf, sscale, r);
  }
  if constexpr (kStages > 0) __syncthreads();

#pragma unroll
  for (int h = 0; h < (kHi ? 2 : 1); ++h) {
    const RowState& row = r.row[h];
    const int head = 8 * h;  // the row's first head
    float l = row.l;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    // Split tokens: a partial row a warp. Split dims: one row, each warp writing its dims and
    // warp 0 the running max and sum (the same in every warp).
    const int prow = kDimSplit ? 0 : w.warp;
#pragma unroll
    for (int i = 0; i < kKTiles; ++i) {
      const int d = dim0(w) + v_word_dim(i, g);
      if constexpr (kKvPair) {
        // Each head keeps the half of the loop's dims its q filled (d and d + kPairGap share one).
        const int hd = d % kOutDim, half = d / kOutDim;
        if (pair_half(head + 2 * t, w.heads) == half) {
          out.acc[prow][head + 2 * t][hd] = row.acc[i][0] * vscale;
          out.acc[prow][head + 2 * t][hd + kPairGap] = row.acc[i][2] * vscale;
        }
        if (pair_half(head + 2 * t + 1, w.heads) == half) {
          out.acc[prow][head + 2 * t + 1][hd] = row.acc[i][1] * vscale;
          out.acc[prow][head + 2 * t + 1][hd + kPairGap] = row.acc[i][3] * vscale;
        }
      } else {
        out.acc[prow][head + 2 * t][d] = row.acc[i][0] * vscale;
        out.acc[prow][head + 2 * t + 1][d] = row.acc[i][1] * vscale;
        out.acc[prow][head + 2 * t][d + kPairGap] = row.acc[i][2] * vscale;
        out.acc[prow][head + 2 * t + 1][d + kPairGap] = row.acc[i][3] * vscale;
      }
    }
    if (t == 0 && (!kDimSplit || w.warp == 0)) { out.ml[prow][head + g][0] = row.m; out.ml[prow][head + g][1] = l; }
  }
}

// A chunk of more than 8 heads (kGroup 16) takes both rows of the q.K tile; up to 8 take one,
// with the accumulators and mmas of one row only.
__device__ __forceinline__ void warp_partial(const CubinrtPagedDecodeParamsV6& p, const BlockWork& w, Staging& stage, WarpPartials& out) {
  if constexpr (kGroup > 8) {
    if (w.heads > 8) return warp_partial_rows<true>(p, w, stage, out);
  }
  warp_partial_rows<false>(p, w, stage, out);
}

}  // namespace paged_decode::mma
