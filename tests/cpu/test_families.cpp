// Families as modules: the test-only family test_copy (tests/families/test_copy) plugs into the
// core with no edit to it, through its catalog, the pack step, verification, selection, loading
// and the self-check's known answer (run by the fake driver on the host).
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "bundle/verify.hpp"
#include "catalog/catalog.hpp"
#include "cubinrt/selfcheck.hpp"
#include "common/encodings.hpp"
#include "family/family.hpp"
#include "pack/pack.hpp"
#include "support/fake_driver.hpp"
#include "support/gpu.hpp"
#include "../families/test_copy/test_copy_abi.h"

namespace cubinrt::test {
namespace {

std::shared_ptr<const Bundle> copy_bundle() {
  auto b = Bundle::open(CUBINRT_TEST_COPY_BUNDLE);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message);
  return std::make_shared<const Bundle>(std::move(*b));
}

// The host's version of the kernel: y = 2x, or (wrong) y = x.
void emulate_copy(bool correct) {
  fake_state().emulate["cubinrt_test_copy_"] = [correct](const LaunchRecord& r) {
    CubinrtTestCopyParamsV1 p{};
    std::memcpy(&p, r.params.data(), std::min(r.params.size(), sizeof p));
    const Dtype dtype = r.kernel.find("bf16") != std::string::npos ? Dtype::bf16 : Dtype::fp16;
    const auto* x = static_cast<const uint16_t*>(p.x);
    auto* y = static_cast<uint16_t*>(p.y);
    for (int64_t i = 0; i < p.n; ++i) y[i] = correct ? encode_float16(dtype, static_cast<float>(2 * element_value(dtype, x[i]))) : x[i];
  };
}

TEST(Families, TheBuildsAndTheTestsFamiliesAreKnown) {
  std::set<std::string> names;
  for (const Family* f : families()) names.insert(std::string(f->name()));
  EXPECT_EQ(names, (std::set<std::string>{"kv_append", "paged_decode", "paged_decode_g16", "paged_decode_g16_vsf_interleaved",
                                          "paged_decode_kv_pair", "paged_decode_vsf_interleaved", "test_copy"}));
  const Family* copy = find_family("test_copy");
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(std::vector<std::string_view>(copy->axes().begin(), copy->axes().end()), (std::vector<std::string_view>{"dtype", "vector"}));
  auto abi = find_abi("test_copy", "TestCopyParams", 1);
  CUBINRT_ASSERT_OK(abi);
  EXPECT_EQ((*abi)->param_bytes, 24u);
  EXPECT_EQ(find_abi("nope", "X", 1).error().message, "kernel family 'nope' is unknown to this build of cubinrt (it knows kv_append, paged_decode, paged_decode_g16, paged_decode_g16_vsf_interleaved, paged_decode_kv_pair, paged_decode_vsf_interleaved, test_copy)");
}

TEST(Families, ItsCatalogExpandsIntoOneUnitPerArch) {
  auto c = Catalog::load(CUBINRT_TEST_COPY_CATALOG);
  CUBINRT_ASSERT_OK(c);
  ASSERT_EQ(c->variants.size(), 8u);
  EXPECT_EQ(c->variants[1].id, "test_copy.sm_80.fp16.v4");
  EXPECT_EQ(c->variants[1].symbol, "cubinrt_test_copy_fp16_v4");
  EXPECT_EQ(c->variants[1].unit(), "test_copy.sm_80");
  EXPECT_EQ(c->variants[1].defines,
            (std::vector<std::pair<std::string, std::string>>{{"CUBINRT_DTYPE", "CUBINRT_DTYPE_FP16"}, {"CUBINRT_VECTOR", "4"}, {"CUBINRT_KERNEL", "cubinrt_test_copy_fp16_v4"}}));
  const std::string unit = unit_source(*c, "test_copy.sm_90", "/src");
  EXPECT_NE(unit.find("#define CUBINRT_VARIANT_NS cubinrt_variant_3\n#define CUBINRT_DTYPE CUBINRT_DTYPE_BF16\n#define CUBINRT_VECTOR 4\n"
                      "#define CUBINRT_KERNEL cubinrt_test_copy_bf16_v4\n#define CUBINRT_VARIANT_KEY \"dtype=bf16 vector=4\"\n#include \"/src/tests/families/test_copy/test_copy.cu\"\n"),
            std::string::npos)
      << unit;
  EXPECT_EQ(unit.find("sm_80"), std::string::npos);
}

TEST(Families, ItsBundleVerifiesWithEachCubinStoredOnce) {
  auto b = copy_bundle();
  EXPECT_TRUE(verify_bundle(*b).empty());
  std::set<uint64_t> offsets;
  for (const ManifestEntry& e : b->manifest().entries) offsets.insert(e.offset);
  EXPECT_EQ(b->manifest().entries.size(), 8u);
  EXPECT_EQ(offsets.size(), 2u);  // one cubin for sm_80, one for sm_90, four kernels each
}

TEST(Families, PackRefusesAFamilyThisBuildDoesNotHave) {
  auto c = Catalog::parse(R"({"format": "cubinrt-catalog", "version": 2, "families": [{"name": "nope", "source": "x.cu",
    "abi": {"name": "X", "version": 1}, "axes": ["n"], "id": "n{n}", "symbol": "k{n}", "groups": [{"arch": ["sm_90"], "n": [1]}]}]})",
                          "inline");
  CUBINRT_ASSERT_OK(c);
  auto bytes = pack_bundle(*c, {.cubin_dir = std::string(CUBINRT_TEST_BINARY_DIR) + "/cubinrt_test_copy_bundle.cubins"});
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().message, "catalog variant nope.sm_90.n1: kernel family 'nope' is unknown to this build of cubinrt (it knows kv_append, paged_decode, paged_decode_g16, paged_decode_g16_vsf_interleaved, paged_decode_kv_pair, paged_decode_vsf_interleaved, test_copy)");
}

TEST(Families, RuntimeSelectsAndLoadsItsKernelsFromOneLibrary) {
  RuntimeOptions o;
  o.driver = make_fake_driver({h200()});
  o.bundle = copy_bundle();
  o.required = {{"test_copy", {{"dtype", "bf16"}, {"vector", "4"}}}, {"test_copy", {{"dtype", "fp16"}, {"vector", "1"}}}};
  auto rt = Runtime::create(o);
  CUBINRT_ASSERT_OK(rt);
  EXPECT_EQ((*rt)->available().size(), 4u);
  EXPECT_EQ((*rt)->loaded().size(), 2u);
  EXPECT_EQ(fake_state().loads, 1);  // both kernels come from the sm_90 cubin, loaded once
  EXPECT_EQ((*rt)->selected({"test_copy", {{"dtype", "bf16"}, {"vector", "4"}}})->id, "test_copy.sm_90.bf16.v4");
  const Support no = (*rt)->supports({"test_copy", {{"dtype", "fp16"}, {"vector", "8"}}});
  EXPECT_EQ(no.reason, "NVIDIA H200 (sm_90) cannot run test_copy dtype=fp16 vector=8: the bundle builds dtype=fp16 for sm_80 and sm_90 but not with vector=8");
}

// The self-check of the test_copy bundle on an emulated A100, its kernel run on the host.
SelfCheckReport copy_selfcheck(bool correct_kernel) {
  SelfCheckOptions o;
  o.runtime.driver = make_fake_driver({a100()});
  o.runtime.bundle = copy_bundle();
  emulate_copy(correct_kernel);
  return run_selfcheck(o);
}

TEST(Families, SelfCheckRunsItsKnownAnswer) {
  const SelfCheckReport r = copy_selfcheck(/*correct_kernel=*/true);
  EXPECT_TRUE(r.passed);
  ASSERT_EQ(r.steps.back().name, "known-answer");
  EXPECT_EQ(r.steps.back().detail, "4 kernels matched the float64 reference; worst error 0.00 of its tolerance");
  EXPECT_EQ(fake_state().launches.size(), 4u);
}

TEST(Families, SelfCheckFailsAWrongKernelByName) {
  const SelfCheckReport r = copy_selfcheck(/*correct_kernel=*/false);
  EXPECT_FALSE(r.passed);
  ASSERT_EQ(r.steps.back().name, "known-answer");
  EXPECT_EQ(r.steps.back().status, StepStatus::fail);
  EXPECT_NE(r.steps.back().detail.find("known-answer test of kernel cubinrt_test_copy_"), std::string::npos) << r.steps.back().detail;
  EXPECT_NE(r.steps.back().detail.find("1000 of 1000 elements differ"), std::string::npos) << r.steps.back().detail;
}

}  // namespace
}  // namespace cubinrt::test
