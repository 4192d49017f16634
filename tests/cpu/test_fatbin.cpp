// The fatbin reader on containers nvcc wrote: plain, LZ4 (--compress-mode=speed) and zstd
// (--compress-mode=size), and inside a host object's .nv_fatbin.
#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>

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

// A small fatbin of `entries` zstd entries of `kind` (2 a cubin, 1 PTX), each the frame of `zeros`
// zero bytes and claiming `size` bytes.
std::vector<std::byte> bomb(uint64_t zeros, uint64_t size, int entries, uint16_t kind = 2) {
  const std::vector<char> plain(zeros, 0);
  std::vector<std::byte> frame(ZSTD_compressBound(zeros));
  frame.resize(ZSTD_compress(frame.data(), frame.size(), plain.data(), plain.size(), 19));
  const uint64_t payload = (frame.size() + 7) / 8 * 8, entry = 64 + payload;
  std::vector<std::byte> out(16 + entry * entries);
  auto put = [&](size_t at, auto v) { std::memcpy(out.data() + at, &v, sizeof v); };
  put(0, uint32_t{0xBA55ED50});
  put(4, uint16_t{1});
  put(6, uint16_t{16});
  put(8, uint64_t{entry * entries});
  for (int i = 0; i < entries; ++i) {
    const size_t e = 16 + entry * i;
    put(e, kind);
    put(e + 4, uint32_t{64});
    put(e + 8, payload);
    put(e + 0x10, static_cast<uint32_t>(frame.size()));
    put(e + 0x1c, uint32_t{90});
    put(e + 0x28, uint64_t{0x8000});  // zstd
    put(e + 0x38, size);
    std::memcpy(out.data() + e + 64, frame.data(), frame.size());
  }
  return out;
}

// Decompression is bounded before it allocates: by entry, by ratio, and for the whole file.
TEST(Fatbin, DecompressionBombsAreRefusedBeforeAllocating) {
  auto big = read_fatbin(bomb(1, uint64_t{1} << 40, 1));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("uncompressed size 1099511627776 is implausible (over 268435456 bytes)"), std::string::npos)
      << big.error().message;
  // 64 MiB of zeros is a few KB of zstd: more than 1000-fold.
  auto ratio = read_fatbin(bomb(uint64_t{64} << 20, uint64_t{64} << 20, 1));
  ASSERT_FALSE(ratio);
  EXPECT_NE(ratio.error().message.find("would decompress to 67108864, more than 1000-fold: refused before decompressing"), std::string::npos)
      << ratio.error().message;
  // Entries each within the limits, more than the total in all (limits scaled down, so the test
  // allocates KBs, not the default 1 GiB): the fifth 4 KiB PTX entry is refused at 16 KiB.
  const auto five = bomb(4096, 4096, 5, /*kind=*/1);
  CUBINRT_ASSERT_OK(read_fatbin(five, {.max_total_bytes = 20480}));
  // An SM no architecture spells is refused, not shown as sm_4294967295.
  auto bad_sm = bomb(4096, 4096, 1, /*kind=*/1);
  std::memcpy(bad_sm.data() + 16 + 0x1c, "\xff\xff\xff\xff", 4);
  auto sm = read_fatbin(bad_sm);
  ASSERT_FALSE(sm);
  EXPECT_NE(sm.error().message.find("entry at offset 0: SM 4294967295 is no architecture (sm_10 to sm_999)"), std::string::npos) << sm.error().message;
  auto total = read_fatbin(five, {.max_total_bytes = 16384});
  ASSERT_FALSE(total);
  EXPECT_NE(total.error().message.find("its 4096 bytes would take the file's decompressed entries past 16384 bytes"), std::string::npos)
      << total.error().message;
}

}  // namespace
}  // namespace cubinrt::test
