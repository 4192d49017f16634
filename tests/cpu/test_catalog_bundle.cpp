// The catalog and the embedded default bundle: real contents, recomputed, not trusted.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "catalog/catalog.hpp"
#include "cubin/cubin.hpp"
#include "select/select.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

const Bundle& embedded() {
  static const Bundle b = *Bundle::embedded();
  return b;
}

TEST(Catalog, DeclaresEveryVariant) {
  auto c = Catalog::load(CUBINRT_TEST_CATALOG);
  CUBINRT_ASSERT_OK(c);
  std::map<std::string, int> per_arch;
  for (const auto& v : c->variants) ++per_arch[v.arch.str()];
  // paged_decode: 3 head_dims x 2 q dtypes x 4 kv dtypes x 3 page sizes = 72 everywhere, +24 of
  // head_dim 512 on SM100; paged_decode_g16: head_dim 128's 24 everywhere; kv_append: 2 input
  // dtypes x 4 cache dtypes = 8 everywhere; on SM100, NVFP4 with interleaved V scales: 4 head_dims
  // x 2 x 3 = 24, and 6 of 16 heads a block; paged_decode_kv_pair: NVFP4 head_dim 128's 6 on
  // sm_90 and SM100.
  EXPECT_EQ(per_arch, (std::map<std::string, int>{{"sm_80", 104}, {"sm_89", 104}, {"sm_90", 110}, {"sm_100a", 164}, {"sm_103a", 164}, {"sm_120", 104}}));
  EXPECT_EQ(c->variants.size(), 750u);
  for (const auto& v : c->variants) {
    if (v.key.family == "kv_append") {
      EXPECT_TRUE(v.key.axis("cache_dtype") == v.key.axis("in_dtype") || v.key.axis("cache_dtype") != "fp16") << v.id;
      EXPECT_TRUE(v.symbol.starts_with("cubinrt_kv_append_")) << v.id;
      continue;
    }
    const auto defined = [&](std::string_view name) { return std::ranges::any_of(v.defines, [&](const auto& d) { return d.first == name && d.second == "1"; }); };
    if (v.key.family == "paged_decode_vsf_interleaved" || v.key.family == "paged_decode_g16_vsf_interleaved") {
      EXPECT_EQ(decode_axes(v.key).kv_dtype, Dtype::nvfp4) << v.id;
      EXPECT_TRUE(defined("CUBINRT_VSF_INTERLEAVED")) << v.id;
      EXPECT_EQ(defined("CUBINRT_G16"), v.key.family == "paged_decode_g16_vsf_interleaved") << v.id;
      EXPECT_TRUE(v.arch.str() == "sm_100a" || v.arch.str() == "sm_103a") << v.id;
    } else if (v.key.family == "paged_decode_kv_pair") {
      EXPECT_EQ(decode_axes(v.key).head_dim, 128u) << v.id;
      EXPECT_EQ(decode_axes(v.key).kv_dtype, Dtype::nvfp4) << v.id;
      EXPECT_EQ(v.defines.back(), (std::pair<std::string, std::string>{"CUBINRT_KV_PAIR", "1"})) << v.id;
      EXPECT_TRUE(v.symbol.starts_with("cubinrt_paged_decode_kvpair_hd128_")) << v.id;
      EXPECT_TRUE(v.arch.str() == "sm_90" || v.arch.str() == "sm_100a" || v.arch.str() == "sm_103a") << v.id;
    } else if (v.key.family == "paged_decode_g16") {
      EXPECT_EQ(decode_axes(v.key).head_dim, 128u) << v.id;
      EXPECT_EQ(v.defines.back(), (std::pair<std::string, std::string>{"CUBINRT_G16", "1"})) << v.id;
      EXPECT_TRUE(v.symbol.starts_with("cubinrt_paged_decode_g16_hd128_")) << v.id;
    } else {
      EXPECT_EQ(v.key.family, "paged_decode") << v.id;
      EXPECT_TRUE(std::ranges::none_of(v.defines, [](const auto& d) { return d.first == "CUBINRT_G16"; })) << v.id;
    }
    if (decode_axes(v.key).head_dim == 512) EXPECT_TRUE(v.arch.str() == "sm_100a" || v.arch.str() == "sm_103a") << v.id;
    if (decode_axes(v.key).kv_dtype == Dtype::fp16 || decode_axes(v.key).kv_dtype == Dtype::bf16) EXPECT_EQ(decode_axes(v.key).kv_dtype, decode_axes(v.key).q_dtype) << v.id;
  }
  const auto& v = c->variants.front();
  EXPECT_EQ(v.id, "paged_decode.sm_80.hd64.fp16.fp16.p16");
  EXPECT_EQ(v.symbol, "cubinrt_paged_decode_hd64_fp16_fp16_p16");
  EXPECT_EQ(v.abi_name, "PagedDecodeParams");
  EXPECT_EQ(v.abi_version, 6u);
}

TEST(Catalog, RejectsMalformedDocuments) {
  EXPECT_EQ(Catalog::parse("{", "x").error().message, "catalog x: not valid JSON");
  EXPECT_EQ(Catalog::parse(R"({"format":"other","version":1})", "x").error().message, "catalog x: not a cubinrt-catalog version 2 document");
  const auto bad_arch = Catalog::parse(R"({"format":"cubinrt-catalog","version":2,"families":[{"name":"f","symbol":"s","id":"i","source":"f.cu",
      "abi":{"name":"a","version":1},"axes":["head_dim"],"groups":[{"arch":["gfx90a"],"head_dim":[64]}]}]})", "x");
  ASSERT_FALSE(bad_arch);
  EXPECT_NE(bad_arch.error().message.find("'gfx90a' is not an architecture"), std::string::npos) << bad_arch.error().message;
  // A family's own defines: CUBINRT_ names that are not the build's, with plain values.
  auto with_define = [](std::string_view defines) {
    return Catalog::parse(fmt::format(R"({{"format":"cubinrt-catalog","version":2,"families":[{{"name":"f","symbol":"s{{head_dim}}","id":"i{{head_dim}}",
      "source":"f.cu","abi":{{"name":"a","version":1}},"axes":["head_dim"],"defines":{},"groups":[{{"arch":["sm_90"],"head_dim":[64]}}]}}]}})", defines), "x");
  };
  const auto good = with_define(R"({"CUBINRT_WIDE": "1", "CUBINRT_MODE": "fast_path"})");
  CUBINRT_ASSERT_OK(good);
  ASSERT_EQ(good->variants.size(), 1u);
  EXPECT_EQ(good->variants[0].defines, (std::vector<std::pair<std::string, std::string>>{
                                           {"CUBINRT_HEAD_DIM", "64"}, {"CUBINRT_KERNEL", "s64"}, {"CUBINRT_MODE", "fast_path"}, {"CUBINRT_WIDE", "1"}}));  // in name order
  for (const char* bad : {R"({"CUBINRT_HEAD_DIM": "1"})", R"({"CUBINRT_KERNEL": "x"})", R"({"CUBINRT_VARIANT_NS": "x"})", R"({"WIDE": "1"})",
                          R"({"CUBINRT_WIDE": "1; int x"})", R"({"CUBINRT_WIDE": 1})", R"(["CUBINRT_WIDE"])"}) {
    const auto r = with_define(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, Errc::corrupt_manifest) << bad;
    EXPECT_NE(r.error().message.find("family f: "), std::string::npos) << r.error().message;
  }
  const auto missing = Catalog::parse(R"({"format":"cubinrt-catalog","version":2,"families":[{"name":"f"}]})", "x");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, Errc::corrupt_manifest);
}

TEST(EmbeddedBundle, HoldsEveryCatalogEntryWithFactsReadFromItsCubin) {
  auto c = Catalog::load(CUBINRT_TEST_CATALOG);
  CUBINRT_ASSERT_OK(c);
  const Manifest& m = embedded().manifest();
  ASSERT_EQ(m.entries.size(), c->variants.size());
  EXPECT_EQ(m.version, 2u);
  EXPECT_EQ(m.min_driver_version, 13000);
  EXPECT_NE(m.toolkit.find("release 13.0"), std::string::npos) << m.toolkit;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const ManifestEntry& e = m.entries[i];
    const CatalogVariant& v = c->variants[i];
    EXPECT_EQ(e.id, v.id);
    EXPECT_EQ(e.key, v.key);
    auto bytes = embedded().cubin(e);
    CUBINRT_ASSERT_OK(bytes);
    // sha256 and size recomputed here, arch and symbol read again from the cubin.
    EXPECT_EQ(*sha256_hex(*bytes), e.sha256) << e.id;
    EXPECT_EQ(bytes->size(), e.size) << e.id;
    auto info = read_cubin(*bytes);
    CUBINRT_ASSERT_OK(info);
    EXPECT_EQ(info->arch.str(), v.arch.str()) << e.id;
    EXPECT_EQ(info->arch.str(), e.arch.str()) << e.id;
    // One cubin a family and arch, each of its kernels stating its own key.
    const std::string_view f = e.key.family;
    ASSERT_EQ(info->kernels.size(), f == "kv_append"                          ? 8u
                                    : f == "paged_decode_g16"                 ? 24u
                                    : f == "paged_decode_vsf_interleaved"     ? 24u  // NVFP4 only, head_dim 512 too (SM100 only)
                                    : f == "paged_decode_g16_vsf_interleaved" ? 6u
                                    : f == "paged_decode_kv_pair"             ? 6u
                                    : e.arch.major == 10                      ? 96u
                                                                              : 72u)
        << e.id;
    const KernelInfo* k = info->kernel(e.symbol);
    ASSERT_NE(k, nullptr) << e.id;
    EXPECT_EQ(k->registers, e.registers) << e.id;
    EXPECT_EQ(k->key, e.key.str()) << e.id;
    EXPECT_EQ(info->toolkit_version, 130u) << e.id;
    EXPECT_EQ(e.min_driver_version, 13000) << e.id;
    EXPECT_LT(e.compressed_size, e.size) << e.id;
    if (e.key.family != "kv_append" && decode_axes(e.key).head_dim == 512) EXPECT_EQ(e.arch.major, 10u) << e.id;
  }
}

TEST(EmbeddedBundle, MatchesTheBuiltBundleFile) {
  auto file = Bundle::open(CUBINRT_TEST_DEFAULT_BUNDLE);
  CUBINRT_ASSERT_OK(file);
  ASSERT_EQ(file->size(), embedded().size());
  EXPECT_TRUE(std::equal(file->bytes().begin(), file->bytes().end(), embedded().bytes().begin()));
}

// The head_dim=512 rule lives in data: a bundle that builds head_dim 512 for sm_90 serves sm_90.
TEST(EmbeddedBundle, Hd512RefusalComesFromContentsNotAList) {
  const KernelKey key = decode_key(512, Dtype::bf16, Dtype::fp8_e4m3, 16);
  EXPECT_EQ(select_entry(embedded().manifest(), Arch::from_sm(90), key).chosen, nullptr);
  auto test_bundle = Bundle::open(CUBINRT_TEST_HD512_BUNDLE);
  CUBINRT_ASSERT_OK(test_bundle);
  const ManifestEntry* chosen = select_entry(test_bundle->manifest(), Arch::from_sm(90), key).chosen;
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->id, "paged_decode.sm_90.hd512.bf16.fp8_e4m3.p16");
}

}  // namespace
}  // namespace cubinrt::test
