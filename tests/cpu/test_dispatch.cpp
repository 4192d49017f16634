// The dispatcher on the fake driver: explicit KV dtypes, bad calls refused before any launch,
// and the parameter block a launch hands the driver, field by field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <tuple>

#include <cmath>
#include <cstring>

#include "families/paged_decode/paged_decode_abi.h"
#include "families/paged_decode/planner.hpp"
#include "cubinrt/paged_decode.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"

namespace {
thread_local bool t_counting = false;
std::atomic<int> g_allocations{0};
}  // namespace

// Every allocation of this test binary goes through here; only the counting thread's, while it
// counts, are counted.
void* operator new(std::size_t n) {
  if (t_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace cubinrt::test {
namespace {

void counting(bool on) { t_counting = on; }
int allocations() { return g_allocations.load(); }

TEST(ResolveKvDtype, UInt8StorageMustBeDeclared) {
  EXPECT_EQ(*resolve_kv_dtype(Dtype::bf16, Dtype::uint8, Dtype::fp8_e4m3), Dtype::fp8_e4m3);
  EXPECT_EQ(*resolve_kv_dtype(Dtype::bf16, Dtype::uint8, Dtype::fp8_e5m2), Dtype::fp8_e5m2);
  EXPECT_EQ(*resolve_kv_dtype(Dtype::bf16, Dtype::bf16, std::nullopt), Dtype::bf16);
  EXPECT_EQ(*resolve_kv_dtype(Dtype::fp16, Dtype::fp8_e4m3, std::nullopt), Dtype::fp8_e4m3);
  EXPECT_EQ(resolve_kv_dtype(Dtype::bf16, Dtype::uint8, std::nullopt).error().message,
            "KV cache dtype: the KV cache is uint8 storage with no declared dtype; declare fp8_e4m3, fp8_e5m2 or nvfp4 (cubinrt never infers the encoding from storage)");
  EXPECT_EQ(resolve_kv_dtype(Dtype::bf16, Dtype::uint8, Dtype::nvfp4).value(), Dtype::nvfp4);
  EXPECT_EQ(resolve_kv_dtype(Dtype::bf16, Dtype::nvfp4, std::nullopt).error().message,
            "KV cache dtype: nvfp4 is not a storage dtype: an NVFP4 cache is uint8 storage declared nvfp4 (two codes a byte), with its block scales");
  EXPECT_EQ(resolve_kv_dtype(Dtype::bf16, Dtype::bf16, Dtype::fp8_e4m3).error().message,
            "KV cache dtype: storage is bf16 but the declared dtype is fp8_e4m3; FP8 and NVFP4 caches are declared on uint8 storage");
  EXPECT_EQ(resolve_kv_dtype(Dtype::bf16, Dtype::fp16, std::nullopt).error().message,
            "KV cache dtype: 16-bit KV must match the q dtype (fp16 KV with bf16 q)");
}

class Dispatch : public ::testing::Test {
 protected:
  std::unique_ptr<Runtime> rt;
  DecodeShape shape{.batch = 3, .num_q_heads = 32, .num_kv_heads = 8, .head_dim = 128, .q_dtype = Dtype::bf16, .kv_storage = Dtype::uint8,
                    .kv_declared = Dtype::fp8_e4m3, .page_size = 16, .layout = KvLayout::hnd, .block_table_stride = 64};
  alignas(16) std::byte q[64], k[64], v[64], out[64], ws[1 << 20];
  int32_t table[4], lens[4];

  void SetUp() override {
    RuntimeOptions o;
    o.driver = make_fake_driver({h200()});
    o.bundle = std::make_shared<const Bundle>(*Bundle::embedded());
    o.lazy = true;
    rt = std::move(*Runtime::create(o));
    // An engine has its device's context current (cudaSetDevice), so a launch on the NULL stream
    // switches nothing (the allocation test below counts that path).
    ASSERT_TRUE(rt->bind_context().has_value());
  }
  DecodeArgs args(const DecodePlan& plan) {
    DecodeArgs a;
    a.q = q;
    a.kv = {k, v, shape.kv_storage, shape.kv_declared, 0.5f, 0.25f, nullptr, shape.layout, shape.page_size, shape.num_kv_heads, 1000};
    a.block_table = table;
    a.seq_lens = lens;
    a.out = out;
    a.workspace = ws;
    a.workspace_bytes = plan.workspace_bytes();
    return a;
  }
};

TEST_F(Dispatch, LaunchHandsTheDriverTheAbiStruct) {
  shape.merge = SplitMerge::workspace;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->id, "paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16");
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  ASSERT_EQ(fake_state().launches.size(), 1u);
  const LaunchRecord& r = fake_state().launches[0];
  EXPECT_EQ(r.kernel, "cubinrt_paged_decode_hd128_bf16_fp8_e4m3_p16");
  EXPECT_EQ(r.config.gridDimX, 3u);
  EXPECT_EQ(r.config.gridDimY, 8u);  // one block per kv head: 4 q heads per kv head fit one chunk
  EXPECT_EQ(r.config.gridDimZ, static_cast<unsigned>(plan->num_splits()));
  EXPECT_EQ(r.config.blockDimX, plan->kernel().entry->max_threads);  // the kernel's launch bound, as the manifest records it
  ASSERT_EQ(r.params.size(), offsetof(CubinrtPagedDecodeParamsV6, sf_stride_head) + sizeof(int64_t));
  CubinrtPagedDecodeParamsV6 p{};
  std::memcpy(&p, r.params.data(), r.params.size());
  EXPECT_EQ(p.k_cache, k);
  EXPECT_EQ(p.v_cache, v);
  EXPECT_EQ(p.kv_stride_page, 16 * 8 * 128);  // HND: [pages, heads, page_size, D]
  EXPECT_EQ(p.kv_stride_head, 16 * 128);
  EXPECT_EQ(p.kv_stride_token, 128);
  EXPECT_EQ(p.q_stride_batch, 32 * 128);
  EXPECT_FLOAT_EQ(p.k_scale, 0.5f);
  EXPECT_FLOAT_EQ(p.v_scale, 0.25f);
  EXPECT_FLOAT_EQ(p.softmax_scale, 1.f / std::sqrt(128.f));
  EXPECT_EQ(p.num_kv_heads, 8);
  EXPECT_EQ(p.block_table_stride, 64);
  EXPECT_EQ(p.num_splits, plan->num_splits());
  EXPECT_EQ(p.num_splits * p.pages_per_split >= 64, true);
  // 3 x 8 = 24 blocks leave most of the 132 SMs idle, so every split helps; 1024 tokens allow at
  // most 4 (256 tokens each): 4 splits of 16 pages.
  EXPECT_EQ(plan->num_splits(), 4);
  EXPECT_EQ(p.pages_per_split, 16);
  EXPECT_GT(plan->workspace_bytes(), 0u);
}

// A launch that succeeds allocates nothing (no message is formatted unless it fails): counted by
// the replaced operator new below, around launches the fake driver does not record.
TEST_F(Dispatch, ASuccessfulLaunchAllocatesNothing) {
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  const DecodeArgs a = args(*plan);
  fake_state().faults.record_launches = false;
  const int before = allocations();
  counting(true);
  int failed = 0;
  for (int i = 0; i < 100; ++i) failed += !plan->launch(a, nullptr).has_value();
  counting(false);
  fake_state().faults.record_launches = true;
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(allocations() - before, 0);
  // A failing one says why, which allocates: the counter does see allocations.
  DecodeArgs bad = a;
  bad.q = nullptr;
  counting(true);
  const bool refused = !plan->launch(bad, nullptr).has_value();
  counting(false);
  EXPECT_TRUE(refused);
  EXPECT_GT(allocations() - before, 0);
}

TEST_F(Dispatch, DeclaredEncodingPicksTheKernel) {
  shape.kv_declared = Dtype::fp8_e5m2;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->symbol, "cubinrt_paged_decode_hd128_bf16_fp8_e5m2_p16");
  shape.kv_declared = std::nullopt;
  auto undeclared = DecodePlan::create(*rt, shape);
  ASSERT_FALSE(undeclared);
  EXPECT_EQ(undeclared.error().code, Errc::invalid_argument);
}

// NVFP4: uint8 storage declared nvfp4 takes its own kernel; the codes' strides count bytes (rows
// of head_dim / 2), the block scales reach the kernel with their strides, and a launch without
// them, or with them misaligned, is refused before anything runs.
TEST_F(Dispatch, Nvfp4TakesItsKernelAndItsScales) {
  shape.kv_declared = Dtype::nvfp4;
  shape.layout = KvLayout::nhd;
  shape.num_q_heads = 64;  // a group of 8: too many for the kernels that pair kv heads (next test)
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->id, "paged_decode.sm_90.hd128.bf16.nvfp4.p16");
  alignas(16) std::byte ksf[64], vsf[64];
  DecodeArgs a = args(*plan);
  a.kv.k_scale = 0.375f;
  auto missing = plan->launch(a, nullptr);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "paged decode launch: an nvfp4 cache needs its block scales: kv.k_sf and kv.v_sf must be non-null");
  a.kv.k_sf = ksf;
  a.kv.v_sf = vsf + 4;  // scale rows of 8 bytes are copied whole
  auto odd = plan->launch(a, nullptr);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("V scales at "), std::string::npos) << odd.error().message;
  EXPECT_NE(odd.error().message.find("is not 8-byte aligned"), std::string::npos) << odd.error().message;
  EXPECT_TRUE(fake_state().launches.empty());
  a.kv.v_sf = vsf;
  CUBINRT_ASSERT_OK(plan->launch(a, nullptr));
  ASSERT_EQ(fake_state().launches.size(), 1u);
  EXPECT_EQ(fake_state().launches[0].kernel, "cubinrt_paged_decode_hd128_bf16_nvfp4_p16");
  CubinrtPagedDecodeParamsV6 p{};
  std::memcpy(&p, fake_state().launches[0].params.data(), fake_state().launches[0].params.size());
  EXPECT_EQ(p.kv_stride_page, 16 * 8 * 64);  // NHD rows of 64 bytes: [pages, page_size, heads, 128 / 2]
  EXPECT_EQ(p.kv_stride_token, 8 * 64);
  EXPECT_EQ(p.kv_stride_head, 64);
  EXPECT_EQ(p.k_sf, reinterpret_cast<const uint8_t*>(ksf));
  EXPECT_EQ(p.v_sf, reinterpret_cast<const uint8_t*>(vsf));
  EXPECT_EQ(p.sf_stride_page, 16 * 8 * 8);  // scale rows of 128 / 16 bytes
  EXPECT_EQ(p.sf_stride_token, 8 * 8);
  EXPECT_EQ(p.sf_stride_head, 8);
  EXPECT_FLOAT_EQ(p.k_scale, 0.375f);  // NVFP4's global scale
  // FP8 leaves the scale fields null and zero.
  shape.kv_declared = Dtype::fp8_e4m3;
  auto fp8 = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(fp8);
  a = args(*fp8);
  a.kv.k_sf = ksf;
  CUBINRT_ASSERT_OK(fp8->launch(a, nullptr));
  std::memcpy(&p, fake_state().launches.back().params.data(), fake_state().launches.back().params.size());
  EXPECT_EQ(p.k_sf, nullptr);
  EXPECT_EQ(p.sf_stride_token, 0);
}

// NVFP4 head_dim 128 in NHD pages with groups up to 4 and an even number of kv heads takes the
// kernels that read two neighbouring kv heads a block (half the blocks, grid y of pairs) where
// the unpaired grid fills the GPU unsplit or the split count is forced; a launch
// whose strides part the pair's code or scale rows, or whose scales are not 16-byte aligned, runs
// the plan's unpaired kernel with every kv head its own block. HND pages, a group of 8 and an odd
// number of kv heads plan the unpaired kernel alone.
TEST_F(Dispatch, Nvfp4NhdPairsNeighbouringKvHeads) {
  shape.kv_declared = Dtype::nvfp4;
  shape.layout = KvLayout::nhd;
  shape.batch = 64;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->id, "paged_decode_kv_pair.sm_90.hd128.bf16.nvfp4.p16");
  ASSERT_NE(plan->unpaired_kernel(), nullptr);
  EXPECT_EQ(plan->unpaired_kernel()->entry->id, "paged_decode.sm_90.hd128.bf16.nvfp4.p16");
  alignas(16) std::byte ksf[64], vsf[64];
  DecodeArgs a = args(*plan);
  a.kv.k_sf = ksf;
  a.kv.v_sf = vsf;
  CUBINRT_ASSERT_OK(plan->launch(a, nullptr));
  ASSERT_EQ(fake_state().launches.size(), 1u);
  EXPECT_EQ(fake_state().launches[0].kernel, "cubinrt_paged_decode_kvpair_hd128_bf16_nvfp4_p16");
  EXPECT_EQ(fake_state().launches[0].config.gridDimY, 4u);  // 8 kv heads in 4 pairs
  EXPECT_EQ(fake_state().launches[0].config.gridDimZ, static_cast<unsigned>(plan->num_splits()));
  CubinrtPagedDecodeParamsV6 p{};
  std::memcpy(&p, fake_state().launches[0].params.data(), fake_state().launches[0].params.size());
  EXPECT_EQ(p.kv_stride_head, 64);  // the kernel's second head of a pair: 64 bytes on
  EXPECT_EQ(p.sf_stride_head, 8);
  EXPECT_EQ(p.num_kv_heads, 8);     // the real heads: the kernel forms the pairs
  const auto unpaired_launch = [&](const DecodeArgs& args) {
    CUBINRT_ASSERT_OK(plan->launch(args, nullptr));
    EXPECT_EQ(fake_state().launches.back().kernel, "cubinrt_paged_decode_hd128_bf16_nvfp4_p16");
    EXPECT_EQ(fake_state().launches.back().config.gridDimY, 8u);
    EXPECT_EQ(fake_state().launches.back().config.gridDimZ, static_cast<unsigned>(plan->num_splits()));
  };
  DecodeArgs padded = a;  // NHD with each head's row padded to 80 bytes: the pair is not one row
  padded.kv.k_strides = padded.kv.v_strides = {16 * 8 * 80, 8 * 80, 80};
  unpaired_launch(padded);
  DecodeArgs sf_apart = a;  // the codes side by side, the scales in HND order
  sf_apart.kv.sf_strides = {16 * 8 * 8, 8, 16 * 8};
  unpaired_launch(sf_apart);
  alignas(16) std::byte ksf2[80], vsf2[80];
  DecodeArgs sf_8 = a;  // scale rows 8-byte aligned (enough for one head's), not 16 (a pair's)
  sf_8.kv.k_sf = ksf2 + 8;
  sf_8.kv.v_sf = vsf2 + 8;
  unpaired_launch(sf_8);
  EXPECT_EQ(fake_state().launches.size(), 4u);

  // Batch 1: the unpaired grid (8 blocks) is split to fill the GPU, where pairs would need twice
  // the splits, so the plan stays unpaired; a forced split count pairs.
  DecodeShape single = shape;
  single.batch = 1;
  auto one = DecodePlan::create(*rt, single);
  CUBINRT_ASSERT_OK(one);
  EXPECT_EQ(one->kernel().entry->id, "paged_decode.sm_90.hd128.bf16.nvfp4.p16");
  EXPECT_GT(one->num_splits(), 1);
  EXPECT_EQ(one->unpaired_kernel(), nullptr);
  single.num_splits = 4;
  auto forced = DecodePlan::create(*rt, single);
  CUBINRT_ASSERT_OK(forced);
  EXPECT_EQ(forced->kernel().entry->id, "paged_decode_kv_pair.sm_90.hd128.bf16.nvfp4.p16");
  EXPECT_EQ(forced->num_splits(), 4);

  for (auto [layout, q_heads, kv_heads] : {std::tuple{KvLayout::hnd, 32u, 8u}, std::tuple{KvLayout::nhd, 64u, 8u}, std::tuple{KvLayout::nhd, 12u, 3u}}) {
    DecodeShape other = shape;
    other.layout = layout;
    other.num_q_heads = q_heads;
    other.num_kv_heads = kv_heads;
    auto unpaired = DecodePlan::create(*rt, other);
    CUBINRT_ASSERT_OK(unpaired);
    EXPECT_EQ(unpaired->kernel().entry->id, "paged_decode.sm_90.hd128.bf16.nvfp4.p16") << q_heads << "/" << kv_heads;
    EXPECT_EQ(unpaired->unpaired_kernel(), nullptr);
  }
}

// NVFP4 V scales in TensorRT-LLM's 4-token interleave take their own kernels: built for the SM100
// family (a B200 here, plans of both group widths), refused on the H200 with the reason; a launch
// whose descriptor says another order than the plan, or a cache that is not NVFP4, is refused.
TEST_F(Dispatch, Nvfp4InterleavedVScalesTakeTheirKernels) {
  RuntimeOptions o;
  o.driver = make_fake_driver({b200()});
  o.bundle = std::make_shared<const Bundle>(*Bundle::embedded());
  o.lazy = true;
  auto b200_rt = Runtime::create(o);
  CUBINRT_ASSERT_OK(b200_rt);
  ASSERT_TRUE((*b200_rt)->bind_context().has_value());
  shape.kv_declared = Dtype::nvfp4;
  shape.v_sf_order = ScaleOrder::interleaved4;
  auto plan = DecodePlan::create(**b200_rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->id, "paged_decode_vsf_interleaved.sm_100a.hd128.bf16.nvfp4.p16");
  DecodeShape wide = shape;
  wide.num_q_heads = 8 * 16;  // a group of 16
  auto wide_plan = DecodePlan::create(**b200_rt, wide);
  CUBINRT_ASSERT_OK(wide_plan);
  EXPECT_EQ(wide_plan->kernel().entry->id, "paged_decode_g16_vsf_interleaved.sm_100a.hd128.bf16.nvfp4.p16");
  alignas(16) std::byte ksf[64], vsf[64];
  DecodeArgs a = args(*plan);
  a.kv.k_sf = ksf;
  a.kv.v_sf = vsf;
  EXPECT_EQ(plan->launch(a, nullptr).error().message,
            "paged decode launch: the KV descriptor's v_sf_order is not the plan's (the order of V's scales picks the kernel)");
  a.kv.v_sf_order = ScaleOrder::interleaved4;
  CUBINRT_ASSERT_OK(plan->launch(a, nullptr));
  ASSERT_EQ(fake_state().launches.size(), 1u);
  EXPECT_EQ(fake_state().launches[0].kernel, "cubinrt_paged_decode_vsfi_hd128_bf16_nvfp4_p16");

  auto on_h200 = DecodePlan::create(*rt, shape);
  ASSERT_FALSE(on_h200);
  EXPECT_EQ(on_h200.error().code, Errc::unsupported);
  EXPECT_EQ(on_h200.error().message,
            "NVIDIA H200 (sm_90) cannot run paged_decode_vsf_interleaved head_dim=128 q_dtype=bf16 kv_dtype=nvfp4 page_size=16: the "
            "paged_decode_vsf_interleaved family is built for sm_100a and sm_103a only; use an SM100 (Blackwell) GPU");
  shape.kv_declared = Dtype::fp8_e4m3;
  EXPECT_EQ(DecodePlan::create(*rt, shape).error().message,
            "paged decode: v_sf_order interleaved4 orders NVFP4's V block scales, and this cache is not NVFP4");
  shape.v_sf_order = static_cast<ScaleOrder>(7);
  EXPECT_EQ(DecodePlan::create(*rt, shape).error().message, "paged decode: v_sf_order 7 is not a scale order (0 linear, 1 interleaved4)");
}

TEST_F(Dispatch, BadShapesAreRefusedAtPlan) {
  auto s = shape;
  s.num_q_heads = 30;
  EXPECT_EQ(DecodePlan::create(*rt, s).error().message, "paged decode: num_q_heads 30 is not a multiple of num_kv_heads 8");
  s = shape;
  s.page_size = 8;
  EXPECT_EQ(DecodePlan::create(*rt, s).error().message,
            "NVIDIA H200 (sm_90) cannot run paged_decode head_dim=128 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=8: the bundle builds head_dim=128 for "
            "sm_100a, sm_103a, sm_120, sm_80, sm_89 and sm_90 but not with q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=8");
  s = shape;
  s.max_seq_len = 64 * 16 + 1;
  EXPECT_EQ(DecodePlan::create(*rt, s).error().message, "paged decode: max_seq_len 1025 exceeds the block table's capacity of 1024 tokens (64 pages of 16)");
  s = shape;
  s.head_dim = 96;
  EXPECT_EQ(DecodePlan::create(*rt, s).error().code, Errc::unsupported);
}

TEST_F(Dispatch, BadArgumentsAreRefusedBeforeLaunch) {
  shape.merge = SplitMerge::workspace;  // a plan that needs its workspace
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  auto a = args(*plan);
  a.kv.k = nullptr;
  EXPECT_EQ(plan->launch(a, nullptr).error().message, "paged decode launch: q, kv.k, kv.v, block_table, seq_lens and out must all be non-null");
  a = args(*plan);
  a.out = out + 2;
  EXPECT_NE(plan->launch(a, nullptr).error().message.find("paged decode launch: out at 0x"), std::string::npos);
  EXPECT_NE(plan->launch(a, nullptr).error().message.find(" is not 8-byte aligned (the kernels access it 8 bytes at a time)"), std::string::npos);
  a = args(*plan);
  a.kv.declared = Dtype::fp8_e5m2;
  EXPECT_EQ(plan->launch(a, nullptr).error().message,
            "paged decode launch: the KV descriptor's dtype (storage uint8, declared fp8_e5m2) is not the plan's (storage uint8, declared fp8_e4m3)");
  a = args(*plan);
  a.workspace = nullptr;
  EXPECT_NE(plan->launch(a, nullptr).error().message.find("needs a 16-byte aligned workspace of"), std::string::npos);
  a = args(*plan);
  a.kv.page_size = 32;
  EXPECT_EQ(plan->launch(a, nullptr).error().code, Errc::invalid_argument);
  EXPECT_TRUE(fake_state().launches.empty());
}

// vLLM's heads-first one-tensor cache [pages, 2, kv_heads, page_size, D] (K and V are views of it),
// q sliced from a fused QKV projection, out padded, lse transposed: all reach the kernel as given.
TEST_F(Dispatch, StridedViewsReachTheKernelAsGiven) {
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  DecodeArgs a = args(*plan);
  const int64_t page = 2 * 8 * 16 * 128;  // [2, kv_heads, page_size, D] per page
  a.kv.k_strides = a.kv.v_strides = {page, 128, 16 * 128};
  a.kv.v = k + 16;  // a real cache would have V 8*16*128 elements after K; the kernel is not run here
  a.q_strides = {(32 + 2 * 8) * 128, 128};
  a.out_strides = {32 * 136, 136};
  alignas(16) float lse[4];
  a.lse = lse;
  a.lse_strides = {1, 3};
  CUBINRT_ASSERT_OK(plan->launch(a, nullptr));
  ASSERT_EQ(fake_state().launches.size(), 1u);
  CubinrtPagedDecodeParamsV6 p{};
  std::memcpy(&p, fake_state().launches[0].params.data(), fake_state().launches[0].params.size());
  EXPECT_EQ(p.v_cache, k + 16);
  EXPECT_EQ(p.kv_stride_page, page);
  EXPECT_EQ(p.kv_stride_token, 128);
  EXPECT_EQ(p.kv_stride_head, 16 * 128);
  EXPECT_EQ(p.q_stride_batch, 48 * 128);
  EXPECT_EQ(p.q_stride_head, 128);
  EXPECT_EQ(p.out_stride_batch, 32 * 136);
  EXPECT_EQ(p.out_stride_head, 136);
  EXPECT_EQ(p.lse_stride_batch, 1);
  EXPECT_EQ(p.lse_stride_head, 3);
}

// Zero strides mean contiguous, in the layout the descriptor names; a dimension of extent 1 may
// have any stride (torch gives such dimensions arbitrary ones), and the kernel gets 0 for it.
TEST_F(Dispatch, ContiguousDefaultsAndExtentOneDimensions) {
  shape.batch = 1;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  DecodeArgs a = args(*plan);
  a.q_strides = {7, 128};  // batch 1: never stepped over
  alignas(16) float lse[32];
  a.lse = lse;
  CUBINRT_ASSERT_OK(plan->launch(a, nullptr));
  CubinrtPagedDecodeParamsV6 p{};
  std::memcpy(&p, fake_state().launches[0].params.data(), fake_state().launches[0].params.size());
  EXPECT_EQ(p.q_stride_batch, 0);
  EXPECT_EQ(p.q_stride_head, 128);
  EXPECT_EQ(p.out_stride_head, 128);
  EXPECT_EQ(p.lse_stride_head, 1);
  EXPECT_EQ(p.kv_stride_page, 8 * 16 * 128);  // HND: [pages, heads, page_size, D]
  EXPECT_EQ(p.kv_stride_token, 128);
}

// Each refusal names the tensor, the dimension and the stride, and nothing is launched.
TEST_F(Dispatch, StridesThatBreakTheKernelsAccessesAreRefused) {
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  auto refused = [&](auto edit) {
    DecodeArgs a = args(*plan);
    edit(a);
    auto s = plan->launch(a, nullptr);
    EXPECT_FALSE(s.has_value());
    return s ? std::string() : s.error().message;
  };
  EXPECT_EQ(refused([](DecodeArgs& a) { a.q_strides = {32 * 128, 100}; }),
            "paged decode launch: q has head stride 100 elements (200 bytes), not a multiple of 16 bytes: every head must start 16-byte "
            "aligned for the kernels' vector accesses");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.out_strides = {32 * 130, 130}; }),
            "paged decode launch: out has head stride 130 elements (260 bytes), not a multiple of 8 bytes: every head must start 8-byte "
            "aligned for the kernels' vector accesses");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.q_strides = {32 * 128, 64}; }),
            "paged decode launch: q has head stride 64, which overlaps its elements (they span 128 elements): the view overlaps itself");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.out_strides = {128, 128}; }),
            "paged decode launch: out has batch stride 128, which overlaps its head (they span 4096 elements): the view overlaps itself");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.q_strides = {-4096, 128}; }),
            "paged decode launch: q has batch stride -4096: strides must be in 0..2^40 elements (cubinrt takes no negative strides)");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.kv.k_strides = {int64_t{1} << 41, 128, 2048}; }),
            "paged decode launch: K has page stride 2199023255552: strides must be in 0..2^40 elements (cubinrt takes no negative strides)");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.kv.k_strides = a.kv.v_strides = {16 * 8 * 144, 144, 16 * 144 + 8}; }),
            "paged decode launch: K has head stride 2312 elements (2312 bytes), not a multiple of 16 bytes: every head must start 16-byte "
            "aligned for the kernels' vector accesses");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.kv.k_strides = {2 * 16 * 8 * 128, 128, 16 * 128}; }),
            "paged decode launch: K's strides (page 32768, token 128, head 2048) differ from V's (page 16384, token 128, head 2048); the "
            "kernels address K and V from one offset, so they must be views of one layout (as vLLM's cache[:, 0] and cache[:, 1] are)");
  EXPECT_EQ(refused([](DecodeArgs& a) { a.kv.k_strides = a.kv.v_strides = {16 * 8 * 128, 8 * 128, 16 * 128}; }),
            "paged decode launch: K has head stride 2048, which overlaps its token (they span 15488 elements): the view overlaps itself");
  alignas(16) float lse[128];
  EXPECT_NE(refused([&](DecodeArgs& a) { a.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(lse) + 2); }).find("paged decode launch: lse at 0x"),
            std::string::npos);
  EXPECT_EQ(refused([&](DecodeArgs& a) { a.lse = lse; a.lse_strides = {32, 0}; }),
            "paged decode launch: lse has head stride 0, which overlaps its elements (they span 1 elements): the view overlaps itself");
  EXPECT_TRUE(fake_state().launches.empty());
}

TEST_F(Dispatch, GroupsOfUpTo16TakeOneBlockPerKvHead) {
  shape.batch = 64;
  // 4 and 8 q heads per kv head: the 8-head kernel; 12 and 16 (Llama-3-405B): the 16-head one. Each
  // reads KV once per kv head: one block per kv head.
  for (uint32_t heads : {32u, 64u, 96u, 128u}) {
    shape.num_q_heads = heads;
    auto plan = DecodePlan::create(*rt, shape);
    CUBINRT_ASSERT_OK(plan);
    const bool wide = heads > 64;
    EXPECT_EQ(plan->kernel().entry->id, wide ? "paged_decode_g16.sm_90.hd128.bf16.fp8_e4m3.p16" : "paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16");
    EXPECT_EQ(plan->heads_per_block(), wide ? 16 : 8) << heads;
    CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
    EXPECT_EQ(fake_state().launches.back().kernel, wide ? "cubinrt_paged_decode_g16_hd128_bf16_fp8_e4m3_p16" : "cubinrt_paged_decode_hd128_bf16_fp8_e4m3_p16");
    EXPECT_EQ(fake_state().launches.back().config.gridDimY, 8u) << heads;
  }
}

TEST_F(Dispatch, LargeGroupsAreSplitIntoHeadChunks) {
  shape.num_q_heads = 256;  // 32 q heads per kv head: 2 chunks of 16 (head_dim 128)
  shape.batch = 64;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  EXPECT_EQ(fake_state().launches.back().config.gridDimY, 16u);
  EXPECT_EQ(plan->num_splits(), 1);  // 64 x 16 blocks fill the GPU without splitting
  EXPECT_EQ(plan->workspace_bytes(), 0u);
  // head_dim 256 has no 16-head kernels: a group of 16 takes 2 chunks of 8 from the 8-head one.
  shape.head_dim = 256;
  shape.num_q_heads = 128;
  auto d256 = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(d256);
  EXPECT_EQ(d256->kernel().entry->id, "paged_decode.sm_90.hd256.bf16.fp8_e4m3.p16");
  EXPECT_EQ(d256->heads_per_block(), 8);
  CUBINRT_ASSERT_OK(d256->launch(args(*d256), nullptr));
  EXPECT_EQ(fake_state().launches.back().config.gridDimY, 16u);
}

// head_dim 512's warps walk one token range together, so the planner counts a block as one
// stream and wants 4 of them an SM, not 2: B16 L8192 32q/4kv (64 blocks unsplit) takes 8 splits
// (4 blocks an SM on 132), where head_dim 128's rule would take 4; 1024 tokens a split are too
// long for a cluster (kMaxTokensPerClusterSplit), so they merge through the workspace.
TEST(Planner, DimSplitKernelsWantTwiceTheBlocks) {
  EXPECT_EQ(paged_decode::choose_splits(64, 512, 132, 4, 32, paged_decode::kSaturatingBlocks), 4);
  EXPECT_EQ(paged_decode::choose_splits(64, 512, 132, 4, 32, paged_decode::kSaturatingBlocksDimSplit), 8);
  RuntimeOptions o;
  o.driver = make_fake_driver({h200()});
  o.bundle_path = build_file("CUBINRT_TEST_HD512_BUNDLE", CUBINRT_TEST_HD512_BUNDLE);
  o.lazy = true;
  auto rt = Runtime::create(o);
  CUBINRT_ASSERT_OK(rt);
  DecodeShape s{.batch = 16, .num_q_heads = 32, .num_kv_heads = 4, .head_dim = 512, .q_dtype = Dtype::bf16, .kv_storage = Dtype::uint8,
                .kv_declared = Dtype::fp8_e4m3, .page_size = 16, .block_table_stride = 512};
  auto plan = DecodePlan::create(**rt, s);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().entry->id, "paged_decode.sm_90.hd512.bf16.fp8_e4m3.p16");
  EXPECT_EQ(plan->num_splits(), 8);
  EXPECT_EQ(plan->merge(), SplitMerge::workspace);
}

// A multiprocessor holds blocks_per_sm blocks at once; 512 blocks on 132 SMs give each 4. A kernel
// that holds 4 streams them in one round: no split. One that holds 3 streams the fourth alone,
// below the rate 2 blocks reach, so 2 splits (8 blocks an SM in rounds of 3, 3 and 2) cost less:
// 8 x 256 pages against (3 + 2) x 512 (B64 L8192 16q/8kv D256 FP8, H200 run 84).
TEST(Planner, ALastRoundOfOneBlockIsWorthASplit) {
  EXPECT_EQ(paged_decode::choose_splits(512, 512, 132, 4, 32), 1);
  EXPECT_EQ(paged_decode::choose_splits(512, 512, 132, 3, 32), 2);
  // 384 blocks: at most 3 an SM, one round of 3: no split.
  EXPECT_EQ(paged_decode::choose_splits(384, 512, 132, 3, 32), 1);
  // Rounds of 2 (head_dim 256's 16-bit kernels): 4 blocks an SM are two full rounds, no split.
  EXPECT_EQ(paged_decode::choose_splits(512, 512, 132, 2, 32), 1);
}

TEST_F(Dispatch, SplitsBalanceTheBusiestMultiprocessor) {
  // 48 x 8 = 384 blocks: at most 3 on each of 132 SMs, 3 x 64 pages; 2 or 4 splits give the
  // busiest SM the same 192 pages and add a merge, 3 splits give it 9 x 22 = 198.
  shape.batch = 48;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 1);
  // 64 x 8 = 512 blocks: 4 on 128 SMs, none on 4. 9 splits would balance them 2.6% better,
  // short of what a split must gain (5%).
  shape.batch = 64;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 1);
  // One long sequence: 8 blocks would leave 124 SMs idle. 32 splits of 64 pages put 2 blocks
  // (which saturate an SM) on 124 SMs: 128 pages the busiest; 33 would give 126 (not 5% less),
  // 31 gives 134 (5% more), 59 gives 4 x 35.
  shape.batch = 1;
  shape.block_table_stride = 2048;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 32);
  EXPECT_EQ(plan->pages_per_split(), 64);
  EXPECT_EQ(plan->merge(), SplitMerge::workspace);  // more splits than a cluster holds
  // Short: 128 tokens are not split (at least 256 tokens a workspace split; a cluster splits only
  // what the workspace would).
  shape.block_table_stride = 8;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 1);
  // 256 tokens: the workspace would not split them, so neither does a cluster (measured slower).
  shape.block_table_stride = 16;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 1);
  // 1024 tokens: 4 workspace splits become a cluster of 8 (128 tokens each).
  shape.block_table_stride = 64;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 8);
  EXPECT_EQ(plan->merge(), SplitMerge::cluster);
  // 4 x 8 blocks of 512 tokens: the workspace would take 2 splits (256 tokens each); a cluster
  // takes 4 (each on its own SM), and needs no workspace.
  shape.batch = 4;
  shape.block_table_stride = 32;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 4);
  EXPECT_EQ(plan->merge(), SplitMerge::cluster);
  EXPECT_EQ(plan->workspace_bytes(), 0u);
  shape.merge = SplitMerge::workspace;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 2);
  EXPECT_EQ(plan->merge(), SplitMerge::workspace);
  // 4 x 8 blocks of 32768 tokens: 8 splits of 4096 tokens, too long for a cluster (its blocks
  // ended further apart than the workspace's: H200 run 107), so through the workspace; forced,
  // the cluster is taken as asked.
  shape.merge = SplitMerge::choose;
  shape.block_table_stride = 2048;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 8);
  EXPECT_EQ(plan->merge(), SplitMerge::workspace);
  EXPECT_GT(plan->workspace_bytes(), 0u);
  shape.merge = SplitMerge::cluster;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 8);
  EXPECT_EQ(plan->merge(), SplitMerge::cluster);
  // 16 x 8 blocks of 8192 tokens: 2 splits of 4096 tokens, but a pair of blocks, which ends close
  // enough together for the cluster's merge to pay at any length (H100 runs 108-110).
  shape.merge = SplitMerge::choose;
  shape.batch = 16;
  shape.block_table_stride = 512;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 2);
  EXPECT_EQ(plan->merge(), SplitMerge::cluster);
  EXPECT_EQ(plan->workspace_bytes(), 0u);
}

// A cluster merge launches each (sequence, head chunk)'s splits as one cluster along z, and asks
// for no workspace; where clusters cannot run it is refused at plan time, in one sentence.
TEST_F(Dispatch, ClusterMergeLaunchesOneClusterPerHeadChunk) {
  shape.batch = 2;
  shape.block_table_stride = 10;  // 160 tokens
  shape.num_splits = 3;
  shape.merge = SplitMerge::cluster;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->merge(), SplitMerge::cluster);
  EXPECT_EQ(plan->num_splits(), 3);  // 4, 3 and 3 pages
  EXPECT_EQ(plan->workspace_bytes(), 0u);
  DecodeArgs a = args(*plan);
  a.workspace = nullptr;
  a.workspace_bytes = 0;
  CUBINRT_ASSERT_OK(plan->launch(a, nullptr));
  const LaunchRecord& r = fake_state().launches.back();
  EXPECT_EQ(r.config.gridDimZ, 3u);
  const CUlaunchAttribute* cluster = r.attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  ASSERT_NE(cluster, nullptr);
  EXPECT_EQ(cluster->value.clusterDim.x, 1u);
  EXPECT_EQ(cluster->value.clusterDim.y, 1u);
  EXPECT_EQ(cluster->value.clusterDim.z, 3u);
  CubinrtPagedDecodeParamsV6 p{};
  std::memcpy(&p, r.params.data(), r.params.size());
  EXPECT_EQ(p.partial, nullptr);
  EXPECT_EQ(p.split_counters, nullptr);
  EXPECT_EQ(p.pages_per_split, 4);
  // The same splits through the workspace: no cluster attribute.
  shape.merge = SplitMerge::choose;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->merge(), SplitMerge::workspace);
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  EXPECT_EQ(fake_state().launches.back().attr(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION), nullptr);

  shape.merge = SplitMerge::cluster;
  shape.num_splits = 9;
  EXPECT_EQ(DecodePlan::create(*rt, shape).error().message, "paged decode: a cluster merge takes 2 to 8 splits, 9 asked");
}

// An emulated A100 (sm_80: no clusters, no grid dependency) with the embedded bundle.
Result<std::unique_ptr<Runtime>> a100_runtime() {
  RuntimeOptions o;
  o.driver = make_fake_driver({{"NVIDIA A100-SXM4-80GB", 8, 0, 108, 166912, 2}});
  o.bundle = std::make_shared<const Bundle>(*Bundle::embedded());
  o.lazy = true;
  return Runtime::create(o);
}

// sm_90 kernels wait for the previous kernel before they touch memory and say so in their cubin,
// so their launches may overlap it (programmatic dependent launch) unless the shape says never;
// an sm_80 kernel says nothing and is launched in plain stream order.
TEST_F(Dispatch, LaunchesOverlapThePreviousKernelWhereTheKernelWaitsForIt) {
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_TRUE(plan->kernel().waits_on_prior_grids);
  EXPECT_TRUE(plan->overlaps_previous_kernel());
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  const CUlaunchAttribute* overlap = fake_state().launches.back().attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  ASSERT_NE(overlap, nullptr);
  EXPECT_EQ(overlap->value.programmaticStreamSerializationAllowed, 1);

  shape.overlap = LaunchOverlap::never;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_FALSE(plan->overlaps_previous_kernel());
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  EXPECT_EQ(fake_state().launches.back().attr(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION), nullptr);

  auto a100 = a100_runtime();
  CUBINRT_ASSERT_OK(a100);
  shape.overlap = LaunchOverlap::allow;
  auto old = DecodePlan::create(**a100, shape);
  CUBINRT_ASSERT_OK(old);
  EXPECT_FALSE(old->kernel().waits_on_prior_grids);
  EXPECT_FALSE(old->overlaps_previous_kernel());
}

TEST_F(Dispatch, LaunchPassesTheKernelsDynamicSharedMemory) {
  // 16-bit KV at head_dim 256 keeps a 96 KiB ring: more than a block may take without the
  // attribute the loader raised (the fake driver refuses such a launch otherwise).
  shape.head_dim = 256;
  shape.kv_storage = Dtype::bf16;
  shape.kv_declared = std::nullopt;
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().dynamic_shared, 98304u);
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  EXPECT_EQ(fake_state().launches.back().config.sharedMemBytes, 98304u);
  // FP8 at head_dim 256 takes 16-token steps on sm_90: twice the bytes a step, the same 96 KiB.
  shape.kv_storage = Dtype::uint8;
  shape.kv_declared = Dtype::fp8_e4m3;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  EXPECT_EQ(fake_state().launches.back().config.sharedMemBytes, 98304u);
  // FP8 at head_dim 128 fits its 48 KiB ring statically: it passes none.
  shape.head_dim = 128;
  plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->kernel().dynamic_shared, 0u);
  CUBINRT_ASSERT_OK(plan->launch(args(*plan), nullptr));
  EXPECT_EQ(fake_state().launches.back().config.sharedMemBytes, 0u);
}

// Before sm_90 there are no clusters: a forced cluster merge is refused, a chosen one never made.
TEST(DispatchWithoutClusters, ClusterMergeIsRefusedOrNotChosen) {
  auto a100 = a100_runtime();
  CUBINRT_ASSERT_OK(a100);
  DecodeShape shape{.batch = 1, .num_q_heads = 32, .num_kv_heads = 8, .head_dim = 128, .q_dtype = Dtype::bf16, .kv_storage = Dtype::uint8,
                    .kv_declared = Dtype::fp8_e4m3, .page_size = 16, .layout = KvLayout::nhd, .block_table_stride = 8,
                    .num_splits = 2, .merge = SplitMerge::cluster};
  EXPECT_EQ(DecodePlan::create(**a100, shape).error().message,
            "paged decode: a cluster merge needs thread-block clusters, which device 0 'NVIDIA A100-SXM4-80GB' (sm_80) "
            "(kernel paged_decode.sm_80.hd128.bf16.fp8_e4m3.p16 for sm_80) does not have; use SplitMerge::workspace or choose");
  shape.num_splits = 0;
  shape.merge = SplitMerge::choose;
  auto plan = DecodePlan::create(**a100, shape);
  CUBINRT_ASSERT_OK(plan);
  EXPECT_EQ(plan->num_splits(), 1);  // 128 tokens stay whole where no cluster can merge them
  EXPECT_EQ(plan->merge(), SplitMerge::workspace);
}

// A plan reads only its runtime's device: a tensor or stream of another device is refused before
// the driver sees a launch, naming what is where; the NULL stream is its device's default stream.
TEST(DispatchAcrossDevices, TensorsAndStreamsOfAnotherDeviceAreRefused) {
  FakeDevice second = h200();
  second.uuid_tail = 7;
  const auto driver = make_fake_driver({h200(), second});
  RuntimeOptions o;
  o.driver = driver;
  o.lazy = true;
  auto rts = Runtime::create_all(o);
  CUBINRT_ASSERT_OK(rts);
  ASSERT_EQ(rts->size(), 2u);
  const Runtime& rt0 = *(*rts)[0];
  const Runtime& rt1 = *(*rts)[1];
  // Memory of each device, allocated with its context current (the fake records whose it is).
  auto alloc_on = [&](const Runtime& rt) {
    EXPECT_TRUE(rt.bind_context().has_value());
    CUdeviceptr p = 0;
    EXPECT_EQ(driver->cuMemAlloc(&p, 1 << 16), CUDA_SUCCESS);
    return reinterpret_cast<std::byte*>(p);
  };
  std::byte* on1 = alloc_on(rt1);
  std::byte* on0 = alloc_on(rt0);
  const DecodeShape shape{.batch = 1, .num_q_heads = 8, .num_kv_heads = 2, .head_dim = 128, .q_dtype = Dtype::bf16, .kv_storage = Dtype::bf16,
                          .page_size = 16, .block_table_stride = 4, .num_splits = 1};
  auto plan = DecodePlan::create(rt0, shape);
  CUBINRT_ASSERT_OK(plan);
  auto args = [&](std::byte* base) {
    DecodeArgs a;
    a.q = base;
    a.kv = {base + 4096, base + 8192, Dtype::bf16, std::nullopt, 1.f, 1.f, nullptr, KvLayout::nhd, 16, 2, 4};
    a.block_table = reinterpret_cast<const int32_t*>(base + 12288);
    a.seq_lens = reinterpret_cast<const int32_t*>(base + 12544);
    a.out = base + 16384;
    return a;
  };
  CUBINRT_ASSERT_OK(plan->launch(args(on0), nullptr));
  const std::string dev0 = "device 0 'NVIDIA H200' (sm_90)";
  DecodeArgs mixed = args(on0);
  mixed.kv.v = on1 + 8192;
  EXPECT_EQ(plan->launch(mixed, nullptr).error().message,
            fmt::format("paged decode launch: kv.v ({}) is on device 1, but this plan runs on {}; a plan reads the memory of its runtime's "
                        "device only", static_cast<const void*>(on1 + 8192), dev0));
  mixed = args(on0);
  mixed.lse = reinterpret_cast<float*>(on1);
  EXPECT_EQ(plan->launch(mixed, nullptr).error().code, Errc::invalid_argument);
  // Streams: one of device 1 is refused, one of device 0 runs.
  const auto stream1 = reinterpret_cast<CUstream>(0x5001), stream0 = reinterpret_cast<CUstream>(0x5000);
  fake_state().stream_device = {{stream1, 1}, {stream0, 0}};
  EXPECT_EQ(plan->launch(args(on0), stream1).error().message,
            fmt::format("paged decode launch: the stream belongs to device 1, but this plan runs on {}; make a plan on a runtime of device 1, "
                        "or launch on a stream of device 0", dev0));
  CUBINRT_ASSERT_OK(rt1.bind_context());
  CUBINRT_ASSERT_OK(plan->launch(args(on0), stream0));  // an explicit stream: the current context does not matter
  // The NULL stream is the plan's device's default stream, whatever context the thread has (or
  // none): its context is current for the launch, and the caller's is put back.
  CUcontext current = nullptr;
  CUBINRT_ASSERT_OK(plan->launch(args(on0), nullptr));
  ASSERT_EQ(driver->cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, rt1.context());
  ASSERT_EQ(driver->cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  CUBINRT_ASSERT_OK(plan->launch(args(on0), nullptr));
  ASSERT_EQ(driver->cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, nullptr);
  ASSERT_EQ(fake_state().launches.size(), 4u);  // the good ones only, each on device 0
  for (const LaunchRecord& r : fake_state().launches) EXPECT_EQ(r.device, 0);
  driver->cuMemFree(reinterpret_cast<CUdeviceptr>(on0));
  driver->cuMemFree(reinterpret_cast<CUdeviceptr>(on1));
}

TEST_F(Dispatch, DriverLaunchErrorIsReported) {
  auto plan = DecodePlan::create(*rt, shape);
  CUBINRT_ASSERT_OK(plan);
  fake_state().faults.launch = CUDA_ERROR_LAUNCH_FAILED;
  EXPECT_EQ(plan->launch(args(*plan), nullptr).error().message,
            "device 0 'NVIDIA H200' (sm_90): kernel cubinrt_paged_decode_hd128_bf16_fp8_e4m3_p16: cuLaunchKernelEx failed: "
            "CUDA_ERROR_LAUNCH_FAILED (emulated error)");
}

}  // namespace
}  // namespace cubinrt::test
