// verify on corrupted copies of the default bundle: each must fail with the right message, and
// one bundle where an FP8 KV pointer would be passed at the wrong offset must fail on ABI.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "family/family.hpp"
#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "cubin/cubin.hpp"
#include "cubin/elf.hpp"
#include "cubin/nv_info.hpp"
#include "bundle/verify.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::vector<std::byte> bundle_bytes() {
  static const auto b = *read_file(CUBINRT_TEST_DEFAULT_BUNDLE);
  return b;
}
Result<Bundle> load(std::vector<std::byte> b) {
  return Bundle::from_bytes(std::make_shared<const std::vector<std::byte>>(std::move(b)), "copy");
}
uint64_t u64(const std::vector<std::byte>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

TEST(BundleVerify, DefaultBundlePasses) {
  auto b = load(bundle_bytes());
  CUBINRT_ASSERT_OK(b);
  EXPECT_TRUE(verify_bundle(*b).empty());
}

TEST(BundleVerify, FlippedCubinByteFailsTheEntriesOfThatCubinOnly) {
  auto bytes = bundle_bytes();
  auto good = load(bytes);
  CUBINRT_ASSERT_OK(good);
  const ManifestEntry& e = good->manifest().entries[7];
  bytes[u64(bytes, 32) + e.offset + e.compressed_size / 2] ^= std::byte{0x01};
  auto b = load(bytes);
  CUBINRT_ASSERT_OK(b);  // the header and manifest are intact
  const auto failures = verify_bundle(*b);
  std::vector<std::string> sharing;  // the kernels of e's cubin (its family and arch)
  for (const ManifestEntry& x : good->manifest().entries)
    if (x.offset == e.offset) sharing.push_back(x.id);
  ASSERT_EQ(failures.size(), sharing.size());
  EXPECT_EQ(sharing.size(), 72u);
  for (size_t i = 0; i < failures.size(); ++i) EXPECT_EQ(failures[i].entry, sharing[i]);
  EXPECT_TRUE(failures[0].message.find("zstd") != std::string::npos || failures[0].message.find("sha256") != std::string::npos)
      << failures[0].message;
}

TEST(BundleVerify, TamperedManifestFailsItsDigest) {
  auto bytes = bundle_bytes();
  const uint64_t at = u64(bytes, 16);
  const std::string text(reinterpret_cast<const char*>(bytes.data() + at), u64(bytes, 24));
  const size_t pos = text.find("\"registers\": ");
  ASSERT_NE(pos, std::string::npos);
  bytes[at + pos + 13] = std::byte{'9'};
  auto b = load(bytes);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Errc::corrupt_bundle);
  EXPECT_NE(b.error().message.find("bundle copy: manifest sha256 is "), std::string::npos) << b.error().message;
}

// Bytes 80-95 of the header are reserved for a later version (a signature section): a version-1
// reader refuses a bundle that uses them rather than ignore what it cannot check.
TEST(BundleVerify, NonZeroReservedHeaderBytesAreRefused) {
  auto bytes = bundle_bytes();
  bytes[93] = std::byte{0x5a};
  auto b = load(bytes);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Errc::corrupt_bundle);
  EXPECT_EQ(b.error().message, "bundle copy: header byte 93 is 0x5a: bytes 80-95 are reserved and must be zero in format version 1");
}

TEST(BundleVerify, TruncatedAndForeignFilesAreRefused) {
  auto bytes = bundle_bytes();
  bytes.resize(bytes.size() - 1000);
  auto b = load(bytes);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("payload"), std::string::npos) << b.error().message;
  auto foreign = load(std::vector<std::byte>(200, std::byte{'x'}));
  ASSERT_FALSE(foreign);
  EXPECT_EQ(foreign.error().message, "bundle copy: not a cubinrt bundle (the magic \"CUBINRTB\" is missing)");
  auto tiny = load(std::vector<std::byte>(10, std::byte{0}));
  ASSERT_FALSE(tiny);
  EXPECT_EQ(tiny.error().message, "bundle copy: 10 bytes is smaller than the 96-byte bundle header");
}

// Re-assembled bundles that lie in their manifest: each lie is caught against the cubin.
class Relabelled : public ::testing::Test {
 protected:
  Manifest manifest;
  std::vector<std::vector<std::byte>> cubins;
  void SetUp() override {
    auto b = load(bundle_bytes());
    ASSERT_TRUE(b);
    for (const char* id : {"paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16", "paged_decode.sm_100a.hd512.bf16.bf16.p16"}) {
      manifest.entries.push_back(*b->manifest().find(id));
      cubins.push_back(*b->cubin(manifest.entries.back()));
    }
    manifest.toolkit = b->manifest().toolkit;
  }
  std::vector<VerifyFailure> verify(std::vector<VerifyFailure>* warnings = nullptr) {
    auto bytes = assemble_bundle(manifest, cubins);
    EXPECT_TRUE(bytes);
    auto b = load(*bytes);
    EXPECT_TRUE(b) << (b ? "" : b.error().message);
    return verify_bundle(*b, warnings);
  }
};

// A record a newer toolkit writes (an attribute code past the reader's table) is read, skipped and
// said as a warning; the entry still verifies.
TEST_F(Relabelled, NewerAttributeIsAWarningNotAFailure) {
  std::vector<std::byte>& cubin = cubins[0];
  const detail::ElfFile elf = *detail::ElfFile::parse(detail::ByteView(cubin, Errc::corrupt_cubin));
  const detail::Section* info = elf.find(".nv.info." + manifest.entries[0].symbol);
  ASSERT_NE(info, nullptr);
  const auto records = *detail::parse_nv_info(*elf.contents(*info), info->name);
  const auto api = std::ranges::find_if(records, [](const auto& r) { return r.attribute == detail::kCudaApiVersion; });
  ASSERT_NE(api, records.end());
  cubin[info->offset + api->at + 1] = std::byte{0x66};
  std::vector<VerifyFailure> warnings;
  EXPECT_TRUE(verify(&warnings).empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].entry, manifest.entries[0].id);
  EXPECT_EQ(warnings[0].message, fmt::format(".nv.info.{} record at offset {}: attribute 0x66 is unknown to this build (newer than its codes, "
                                             "which end at 0x60); skipped",
                                             manifest.entries[0].symbol, api->at));
}

TEST_F(Relabelled, HonestReassemblyPasses) { EXPECT_TRUE(verify().empty()); }

// A number that does not fit its field is refused, naming the entry and the field, never narrowed
// (4294967297 registers used to read as 1).
TEST(BundleVerify, ManifestNumbersThatDoNotFitAreRefused) {
  auto b = load(bundle_bytes());
  ASSERT_TRUE(b);
  const auto doc = nlohmann::ordered_json::parse(b->manifest().to_json());
  const std::string id = doc["entries"][0]["id"];
  for (const char* field : {"registers", "static_shared", "dynamic_shared", "max_threads", "toolkit_version", "min_driver_version"}) {
    auto bad = doc;
    bad["entries"][0][field] = uint64_t{4294967297};
    const auto m = Manifest::parse(bad.dump());
    ASSERT_FALSE(m) << field;
    EXPECT_EQ(m.error().code, Errc::corrupt_manifest);
    EXPECT_NE(m.error().message.find(fmt::format("manifest entry 0: entry {}: '{}' is 4294967297, not an unsigned 32-bit number", id, field)),
              std::string::npos)
        << m.error().message;
  }
  auto top = doc;
  top["version"] = uint64_t{4294967298};  // read as 2 before
  EXPECT_NE(Manifest::parse(top.dump()).error().message.find("manifest: 'version' is 4294967298, not an unsigned 32-bit number"), std::string::npos);
  auto driver = doc;
  driver["entries"][0]["min_driver_version"] = uint64_t{3000000000};
  EXPECT_NE(Manifest::parse(driver.dump()).error().message.find("'min_driver_version' 3000000000 is no driver version"), std::string::npos);
}

// A size the manifest claims is refused before it is allocated (it used to abort with bad_alloc).
TEST(BundleVerify, HugeClaimedSizeIsRefusedBeforeAllocation) {
  auto b = load(bundle_bytes());
  ASSERT_TRUE(b);
  ManifestEntry e = *b->manifest().find("paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16");
  for (uint64_t size : {uint64_t{1} << 40, e.compressed_size * 2000, uint64_t{300} << 20}) {
    e.size = size;
    const auto r = b->cubin(e);
    ASSERT_FALSE(r) << size;
    EXPECT_EQ(r.error().code, Errc::corrupt_bundle);
    EXPECT_NE(r.error().message.find(fmt::format("entry paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16: the manifest records {} bytes from {} compressed; "
                                                 "a cubin is at most 268435456 bytes and compresses at most 1000-fold here", size, e.compressed_size)),
              std::string::npos)
        << r.error().message;
  }
}

TEST_F(Relabelled, ArchLie) {
  manifest.entries[1].arch = *Arch::parse("sm_90");  // the head_dim 512 cubin passed off as sm_90
  const auto f = verify();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "bundle copy: entry paged_decode.sm_100a.hd512.bf16.bf16.p16: manifest and cubin disagree: arch sm_90 in the manifest, sm_100a in the cubin");
}

TEST_F(Relabelled, SymbolLie) {
  // The e5m2 kernel is in the same cubin as the e4m3 one: only the key it states catches the lie
  // (the FP8-confusion bug this project exists to stop).
  manifest.entries[0].symbol = "cubinrt_paged_decode_hd128_bf16_fp8_e5m2_p16";
  auto f = verify();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "bundle copy: entry paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16: manifest and cubin disagree: kernel "
                          "'cubinrt_paged_decode_hd128_bf16_fp8_e5m2_p16' states the key 'head_dim=128 q_dtype=bf16 kv_dtype=fp8_e5m2 "
                          "page_size=16', the manifest gives it 'head_dim=128 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=16'");
  manifest.entries[0].symbol = "cubinrt_paged_decode_hd128_bf16_fp8_e5m2_p8";
  f = verify();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "bundle copy: entry paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16: manifest and cubin disagree: the cubin defines no kernel 'cubinrt_paged_decode_hd128_bf16_fp8_e5m2_p8'");
}

TEST_F(Relabelled, AbiVersionLie) {
  manifest.entries[0].abi_version = 7;
  const auto f = verify();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("parameter ABI PagedDecodeParams v7 of family paged_decode is unknown to this build"), std::string::npos) << f[0].message;
}

// A kernel whose FP8 KV pointer sits 8 bytes later than the dispatcher's struct puts it (built
// from tests/cubins/shifted_abi.cu with the real entry point's name) must fail verification.
TEST_F(Relabelled, Fp8KvPointerAtTheWrongOffset) {
  auto shifted = read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/shifted_abi.sm_90.cubin");
  CUBINRT_ASSERT_OK(shifted);
  cubins[0] = *shifted;
  manifest.entries[0].registers = read_cubin(*shifted)->kernels[0].registers;
  const auto f = verify();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "bundle copy: entry paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16: kernel 'cubinrt_paged_decode_hd128_bf16_fp8_e4m3_p16' "
                          "parameter 1 is at offset 8 size 4, but ABI PagedDecodeParams v6 field 'k_cache' is at offset 8 size 8");
}

// Every launch uses the kernel's launch bound as its block size, so the ABI check wants one the
// kernel's warp arithmetic can run with: one-dimensional, whole warps, a warp per q head of a chunk.
TEST(BundleVerify, KernelAbiWantsALaunchBoundToLaunchWith) {
  auto b = load(bundle_bytes());
  CUBINRT_ASSERT_OK(b);
  const ManifestEntry& e = b->manifest().entries[0];
  auto cubin = b->cubin(e);
  CUBINRT_ASSERT_OK(cubin);
  auto info = read_cubin(*cubin);
  CUBINRT_ASSERT_OK(info);
  const KernelInfo good = *info->kernel(e.symbol);
  auto abi = find_abi(e.key.family, e.abi_name, e.abi_version);
  CUBINRT_ASSERT_OK(abi);
  CUBINRT_ASSERT_OK(check_kernel_abi(good, **abi));
  EXPECT_EQ(block_threads(good), e.max_threads);
  EXPECT_EQ((*abi)->min_block_threads, 128u);
  for (const std::array<uint32_t, 3> bounds : {std::array<uint32_t, 3>{0, 0, 0}, {96, 1, 1}, {136, 1, 1}, {128, 2, 1}}) {
    KernelInfo k = good;
    k.max_ntid = bounds;
    const auto s = check_kernel_abi(k, **abi);
    ASSERT_FALSE(s) << bounds[0];
    EXPECT_EQ(s.error().message, fmt::format("kernel '{}' has launch bounds ({}, {}, {}), but ABI PagedDecodeParams v6 launches "
                                             "one-dimensional blocks of the launch bound: a multiple of 32 threads, at least 128",
                                             e.symbol, bounds[0], bounds[1], bounds[2]));
  }
}

TEST(BundleVerify, EmptyBundleFails) {
  auto bytes = assemble_bundle({}, std::vector<std::vector<std::byte>>{});
  CUBINRT_ASSERT_OK(bytes);
  auto b = load(*bytes);
  CUBINRT_ASSERT_OK(b);
  const auto f = verify_bundle(*b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message, "bundle copy: holds no entries");
}

}  // namespace
}  // namespace cubinrt::test
