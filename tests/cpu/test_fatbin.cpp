// The fatbin reader on containers nvcc wrote: plain, LZ4 (--compress-mode=speed) and zstd
// (--compress-mode=size), and inside a host object's .nv_fatbin.
#include <gtest/gtest.h>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "cubin/cubin.hpp"
#include "fatbin/fatbin.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::vector<std::byte> file(const std::string& name) { return *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/" + name); }

void expect_probe_entries(const std::vector<FatbinEntry>& entries, std::string_view compression) {
  std::vector<std::string> cubins;
  for (const FatbinEntry& e : entries) {
    if (e.kind != FatbinEntry::Kind::elf) continue;
    cubins.push_back(e.arch.str());
    EXPECT_EQ(e.compression, compression) << e.arch.str();
    auto info = read_cubin(e.data);
    CUBINRT_ASSERT_OK(info);
    EXPECT_EQ(info->arch.sm(), e.arch.sm());
    EXPECT_NE(info->kernel("probe_params"), nullptr);
    // The same kernels as nvcc -cubin makes for that arch (the bytes differ only by the ptxas
    // command line recorded in .note.nv.tkinfo).
    const CubinInfo direct = *read_cubin(file("probe." + e.arch.str() + ".cubin"));
    ASSERT_EQ(info->kernels.size(), direct.kernels.size());
    for (const KernelInfo& k : direct.kernels) {
      ASSERT_NE(info->kernel(k.name), nullptr) << k.name;
      EXPECT_EQ(info->kernel(k.name)->registers, k.registers) << k.name;
      EXPECT_EQ(info->kernel(k.name)->params, k.params) << k.name;
    }
  }
  EXPECT_EQ(cubins, (std::vector<std::string>{"sm_80", "sm_90a"}));
}

struct Container {
  const char* file;
  const char* compression;
};
class FatbinKinds : public ::testing::TestWithParam<Container> {};

TEST_P(FatbinKinds, HoldTheProbeCubins) {
  auto e = read_fatbin(file(GetParam().file));
  CUBINRT_ASSERT_OK(e);
  expect_probe_entries(*e, GetParam().compression);
}

INSTANTIATE_TEST_SUITE_P(Containers, FatbinKinds,
                         ::testing::Values(Container{"probe.none.fatbin", "none"}, Container{"probe.speed.fatbin", "lz4"},
                                           Container{"probe.size.fatbin", "zstd"}, Container{"probe.host.o", "none"}),
                         [](const auto& p) { return std::string(p.param.compression) + (std::string(p.param.file).ends_with(".o") ? "_host_object" : ""); });

TEST(Fatbin, CorruptionIsReported) {
  auto b = file("probe.size.fatbin");
  std::vector<std::byte> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(b.size() / 2));
  auto r = read_fatbin(cut);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::corrupt_fatbin);
  EXPECT_NE(r.error().message.find("inside-file"), std::string::npos) << r.error().message;
  // A compressed payload flipped: decompression must fail or the cubin must fail validation.
  auto flipped = b;
  for (size_t i = 200; i < flipped.size(); i += 101) flipped[i] ^= std::byte{0x5a};
  EXPECT_FALSE(read_fatbin(flipped).has_value());
  EXPECT_FALSE(read_fatbin(std::vector<std::byte>(64, std::byte{0})).has_value());
}

}  // namespace
}  // namespace cubinrt::test
