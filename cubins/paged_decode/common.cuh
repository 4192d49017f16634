// What both main loops of the paged decode kernel share: the variant's constants, the element
// types and the block's share of the work. Included by paged_decode.cu only.
//
// No include guard: paged_decode.cu includes this once per variant, inside the variant's
// namespace, after the system headers, the dtype table and the ABI header it needs.

#if !defined(CUBINRT_HEAD_DIM) || !defined(CUBINRT_Q_DTYPE) || !defined(CUBINRT_KV_DTYPE) || !defined(CUBINRT_PAGE_SIZE) || \
    !defined(CUBINRT_KERNEL)
#error "CUBINRT_HEAD_DIM, _Q_DTYPE, _KV_DTYPE, _PAGE_SIZE and _KERNEL define the variant: the build defines them"
#endif

namespace paged_decode {

// The paged_decode_kv_pair family (built with CUBINRT_KV_PAIR): a block takes two neighbouring kv
// heads of head_dim 128 as one row of 256 dims, where NHD pages keep them side by side, so that
// an NVFP4 step copies whole 128-byte lines (one kv head's 64-byte code rows are half a line,
// and 8 of them a copy instruction, where HND's are 4: docs/kernels.md, "NHD pages at head_dim
// 128"). The loop is head_dim 256's; q is block-diagonal in it (the first kv head's q heads in
// dims 0-127 and zeros past them, the second's in dims 128-255), and each q head keeps its own
// half of the output. kHeadDim is the loop's 256, kOutDim a head's 128.
#ifdef CUBINRT_KV_PAIR
constexpr bool kKvPair = true;
constexpr int kHeadDim = 2 * CUBINRT_HEAD_DIM;
#else
constexpr bool kKvPair = false;
constexpr int kHeadDim = CUBINRT_HEAD_DIM;
#endif
constexpr int kOutDim = kKvPair ? kHeadDim / 2 : kHeadDim;  // dims of a q head's output (and q)
constexpr int kPageSize = CUBINRT_PAGE_SIZE;
constexpr int kQDtype = CUBINRT_Q_DTYPE;
constexpr int kKvDtype = CUBINRT_KV_DTYPE;
// Warps a block: the kernel's launch bound, which the host reads from the cubin (the manifest's
// max_threads) and launches with, so a variant may choose its own.
#ifdef CUBINRT_WARPS  // experiments only: the catalog build never sets it
constexpr int kWarps = CUBINRT_WARPS;
#else
constexpr int kWarps = CUBINRT_PAGED_DECODE_THREADS / 32;
#endif
constexpr int kThreads = 32 * kWarps;
// q heads a block takes (paged_decode_abi.h): the paged_decode_g16 family's kernels are built with
// CUBINRT_G16 defined (the catalog's family defines).
#ifdef CUBINRT_G16
constexpr int kGroup = CUBINRT_PAGED_DECODE_G16_HEADS;
static_assert(CUBINRT_HEAD_DIM == CUBINRT_PAGED_DECODE_G16_HEAD_DIM, "paged_decode_g16 is built for head_dim 128 only");
#else
constexpr int kGroup = CUBINRT_PAGED_DECODE_HEADS;
#endif

// Encodings are tested by name (cubinrt/dtypes.h), never by order.
static_assert(CUBINRT_DTYPE_IS_FLOAT16(kQDtype), "q (and out) must be fp16 or bf16");
static_assert(CUBINRT_DTYPE_IS_FLOAT16(kKvDtype) || CUBINRT_DTYPE_IS_FP8(kKvDtype) || kKvDtype == CUBINRT_DTYPE_NVFP4,
              "KV must be fp16, bf16, fp8_e4m3, fp8_e5m2 or nvfp4");
constexpr bool kKvIsFp8 = CUBINRT_DTYPE_IS_FP8(kKvDtype);
constexpr bool kKvIsNvfp4 = kKvDtype == CUBINRT_DTYPE_NVFP4;
// NVFP4's V scales interleaved by 4 tokens (cubinrt::ScaleOrder::interleaved4): the
// *_vsf_interleaved families' kernels. The order is a build-time choice because a run-time one
// cost the head_dim 128 loop, at its register limit, 20 to 65 instructions a step (of 527).
#ifdef CUBINRT_VSF_INTERLEAVED
constexpr bool kVsfQuads = true;
static_assert(kKvIsNvfp4, "the V-scale order is NVFP4's");
#else
constexpr bool kVsfQuads = false;
#endif
static_assert(!kKvPair || (kKvIsNvfp4 && kOutDim == 128 && kGroup == 8 && !kVsfQuads),
              "paged_decode_kv_pair pairs the kv heads of NVFP4 head_dim 128 caches, 8 q heads a block, V scales in linear order");
// FP8 and NVFP4 are widened to half for the tensor cores; 16-bit KV is used as stored.
constexpr bool kKvWidened = kKvIsFp8 || kKvIsNvfp4;
// Bytes of one storage element, the unit of the KV strides (NVFP4's storage is bytes of two codes),
// and bits of one logical element.
constexpr int kKvBytes = kKvWidened ? 1 : 2;
constexpr int kKvBits = CUBINRT_DTYPE_BITS(kKvDtype);
// Bytes from a row's start to its element d (d a multiple of 2).
__device__ __forceinline__ constexpr int kv_dim_bytes(int d) { return d * kKvBits / 8; }
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegBig = -1.0e30f;  // finite "minus infinity": exp2 of differences stays 0, not NaN

static_assert((kPageSize & (kPageSize - 1)) == 0 && kPageSize >= 16, "page size must be a power of two >= 16");

using QType = typename std::conditional<kQDtype == CUBINRT_DTYPE_BF16, __nv_bfloat16, __half>::type;

__device__ __forceinline__ float q_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float q_to_float(__half x) { return __half2float(x); }
// Two floats as a pair of 16-bit T (bf16 or half), rounded to nearest, the first in the low half.
template <class T>
__device__ __forceinline__ uint32_t bits2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) { const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); return *reinterpret_cast<const uint32_t*>(&v); }
  else { const __half2 v = __floats2half2_rn(lo, hi); return *reinterpret_cast<const uint32_t*>(&v); }
}

// Two FP8 codes of encoding `kind`, the 16-bit half kHalf of x (the low byte first), as two
// halves. Half holds every e4m3 and e5m2 value exactly, so this is the encoding's exact value. On
// sm_89 and later it is one cvt that reads its half of x in place: given the half as a 16-bit
// register of the pair x splits into, ptxas folds the split into the operand
// (`F2FP.F16.E4M3.UNPACK_B R, R.H1`), where cuda_fp8.h's conversion of `x >> 16` spent a shift
// on every high pair (32 an FP8 step at head_dim 128, beside its 64 conversions). Earlier GPUs
// take cuda_fp8.h's conversion, which is their only one.
#define CUBINRT_FP8X2_CVT_(half, enc) \
  "{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2." enc "x2 %0, " half "; }"
template <__nv_fp8_interpretation_t kind, int kHalf = 0>
__device__ __forceinline__ uint32_t fp8x2_as_half2(uint32_t x) {
  static_assert(kHalf == 0 || kHalf == 1);
#if __CUDA_ARCH__ >= 890
  uint32_t h;
  if constexpr (kind == __NV_E4M3 && kHalf == 0) asm(CUBINRT_FP8X2_CVT_("lo", "e4m3") : "=r"(h) : "r"(x));
  else if constexpr (kind == __NV_E4M3) asm(CUBINRT_FP8X2_CVT_("hi", "e4m3") : "=r"(h) : "r"(x));
  else if constexpr (kHalf == 0) asm(CUBINRT_FP8X2_CVT_("lo", "e5m2") : "=r"(h) : "r"(x));
  else asm(CUBINRT_FP8X2_CVT_("hi", "e5m2") : "=r"(h) : "r"(x));
  return h;
#else
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>((x >> (16 * kHalf)) & 0xffff), kind);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
#endif
}
#undef CUBINRT_FP8X2_CVT_
// FP8 KV's codes (its declared encoding), and NVFP4's e4m3 block scales.
constexpr __nv_fp8_interpretation_t kFp8Kind = kKvDtype == CUBINRT_DTYPE_FP8_E4M3 ? __NV_E4M3 : __NV_E5M2;
template <int kHalf = 0>
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint32_t codes) { return fp8x2_as_half2<kFp8Kind, kHalf>(codes); }
__device__ __forceinline__ uint32_t e4m3x2_to_half2(uint32_t two_scales) { return fp8x2_as_half2<__NV_E4M3>(two_scales); }

// Eight e2m1 codes (NVFP4's elements, the low nibble first), without the hardware conversion, as
// four half pairs, each the code's value times 2^-14, exactly: the sign goes to bit 15 and the
// three magnitude bits (exponent and mantissa) to bits 9-11, where half's exponent bias (15
// against e2m1's 1) makes the value 2^-14 of e2m1's, and e2m1's one subnormal (0.5) lands on
// half's subnormal 2^-15. Word k holds codes k and k + 4 (low and high half): pairing codes 16
// bits apart lets one shift serve both halves.
// 11 integer instructions for 8 elements; the caller owes the factor 2^14 (kKvUnit).
__device__ __forceinline__ void e2m1x8_to_half2x4(uint32_t x, uint32_t* w) {
  constexpr uint32_t kHalves = 0x8e008e00u;  // sign and magnitude bits of both halves
  // Each code's sign 3 bits up, next to its magnitude's top (a rotate: code 7's sign wraps to bit 2).
  const uint32_t a = __funnelshift_l(x, x, 3);
  // Even codes: magnitude in bits 0-2 of their byte, sign in bit 6; odd codes: bits 4-6 and bit 10
  // (code 7: bits 28-30 and, wrapped, bit 2).
  const uint32_t even = (x & 0x07070707u) | (a & ~0x07070707u);
  const uint32_t odd = (x & 0x70707070u) | (a & ~0x70707070u);
  w[0] = (even << 9) & kHalves;                   // codes 0 and 4
  w[1] = (odd << 5) & kHalves;                    // 1 and 5
  w[2] = (even << 1) & kHalves;                   // 2 and 6
  w[3] = __funnelshift_r(odd, odd, 3) & kHalves;  // 3 and 7 (code 7's sign from bit 2 to 31)
}

// Where the target converts e2m1 in hardware (cvt.rn.f16x2.e2m1x2, one byte of two codes an
// instruction: the family-specific targets sm_100a, sm_103a and sm_120a; the catalog's sm_120
// entries are plain sm_120, without it), NVFP4 widens that way: neighbouring codes to a half pair,
// at their exact values, so its words pair neighbouring dims as FP8's do. The sm_100a build of the
// head_dim 128 loop then spends 4 instructions, not 11, on 8 codes of K, and 16, not 24, on 8
// codes of two V rows. CUBINRT_E2M1_CVT builds that same source for another target with cuda_fp4.h's
// software conversion (the same function's fallback, slow) in the instruction's place: the
// test-only bundle's sm_90 twins, which check the SM100 kernels' indexing on the H200.
#if defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1000 && __CUDA_ARCH_FAMILY_SPECIFIC__ < 1300
#define CUBINRT_E2M1_HARDWARE_ 1
#else
#define CUBINRT_E2M1_HARDWARE_ 0
#endif
#ifdef CUBINRT_E2M1_CVT
constexpr bool kE2m1Cvt = kKvIsNvfp4;
#else
constexpr bool kE2m1Cvt = kKvIsNvfp4 && CUBINRT_E2M1_HARDWARE_;
#endif

// Eight e2m1 codes (the low nibble first) as four half pairs at their exact values: word k holds
// codes 2k and 2k + 1 (low and high half), as cuda_fp4.h's __nv_cvt_fp4x2_to_halfraw2 orders them.
__device__ __forceinline__ void e2m1x8_cvt_to_half2x4(uint32_t x, uint32_t* w) {
#if CUBINRT_E2M1_HARDWARE_
  // The bytes as .b8 operands: ptxas reads each in place (a byte selector), no shift or mask.
  asm("{ .reg .b8 b0, b1, b2, b3;\n"
      "  mov.b32 {b0, b1, b2, b3}, %4;\n"
      "  cvt.rn.f16x2.e2m1x2 %0, b0;\n  cvt.rn.f16x2.e2m1x2 %1, b1;\n"
      "  cvt.rn.f16x2.e2m1x2 %2, b2;\n  cvt.rn.f16x2.e2m1x2 %3, b3;\n}"
      : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
      : "r"(x));
#else
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const __half2_raw h = __nv_cvt_fp4x2_to_halfraw2(static_cast<__nv_fp4x2_storage_t>(x >> (8 * k)), __NV_E2M1);
    w[k] = static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  }
#endif
}
#undef CUBINRT_E2M1_HARDWARE_

// The 32-bit words of one load.
__device__ __forceinline__ void words(const uint4& r, uint32_t* w) { w[0] = r.x; w[1] = r.y; w[2] = r.z; w[3] = r.w; }
__device__ __forceinline__ void words(const uint2& r, uint32_t* w) { w[0] = r.x; w[1] = r.y; }
__device__ __forceinline__ void words(const uint32_t& r, uint32_t* w) { w[0] = r; }

#if defined(CUBINRT_TRACE) || defined(CUBINRT_TRACE_SPLITS)  // experiments only: see paged_decode.cu
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif
#ifdef CUBINRT_TRACE
__device__ long long g_trace_first_step;  // clock64 when block (0, 0, 0)'s warp 0 has its first step
#define CUBINRT_TRACE_FIRST_STEP() \
  if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) g_trace_first_step = clock64()
#elif defined(CUBINRT_TRACE_SPLITS)
constexpr unsigned kTraceBlocks = 2048;
// The global timer at each block's start, first step, partials and end (warp 0's lane 0).
__device__ unsigned long long g_split_ns[4][kTraceBlocks];
__device__ __forceinline__ unsigned trace_block() { return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); }
#define CUBINRT_TRACE_FIRST_STEP() \
  if (threadIdx.x == 0 && trace_block() < kTraceBlocks) g_split_ns[1][trace_block()] = global_ns()
#else
#define CUBINRT_TRACE_FIRST_STEP()
#endif

// One block's share: a sequence, a kv head (kKvPair: a pair of them), up to kGroup of its q heads,
// one KV split.
struct BlockWork {
  int b;        // sequence
  int kvh;      // kv head (kKvPair: the pair's index; its kv heads are 2 kvh and 2 kvh + 1)
  int head0;    // first q head of the chunk
  int heads;    // q heads in the chunk (1..kGroup)
  int t_begin;  // token range of this split
  int t_end;
  int warp;
  int lane;
};

// Rows of partials the block merges: one a warp where the warps split the tokens (head_dim up to
// 256), one in all where they split the dims (512: each warp writes its dims, and every warp has
// the same running max and sum).
constexpr int kPartialRows = kHeadDim > CUBINRT_PAGED_DECODE_TOKEN_SPLIT_MAX_HEAD_DIM ? 1 : kWarps;

// kKvPair: the half of the loop's dims that row h of a block's heads (of `heads`, the pair's q heads
// in order) owns: 0 for the first kv head's q heads, 1 for the second's.
__device__ __forceinline__ int pair_half(int h, int heads) { return kKvPair && 2 * h >= heads ? 1 : 0; }

// The main loop leaves, per row and q head, the unnormalised output (V scale applied) and the
// running max and sum of its tokens (log2 units) here; the block then merges the rows.
struct WarpPartials {
  float acc[kPartialRows][kGroup][kOutDim];  // a q head's own dims (kKvPair: its half of the loop's)
  float ml[kPartialRows][kGroup][2];
};

}  // namespace paged_decode
